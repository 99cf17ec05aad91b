/* Unit tests of the worker pool: every accepted job runs exactly once on a worker thread,
 * admission stops at max_queue with PE_EBUSY, close refuses with PE_EDRAINING, the tick runs (and
 * keeps running while free drains the queue), and free runs what was accepted before returning.
 * pe_pool_parallel: every chunk exactly once, on the caller and workers only; with every worker
 * busy the caller runs them all; with every worker a caller at once it still finishes; the JSON
 * encoder through the pool's hook writes the bytes of one thread. pe_pool_set_sched's nice and
 * slice reach every worker, started or not, and no other thread. */
#include "daemon/slice.h"
#include "support/pe_check.h"

#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "daemon/pool.h"
#include "daemon/pool_noter.h"
#include "posenc/core.h"

static atomic_int ran, ticks;
static pthread_t main_thread;
static atomic_int on_main;

static void count_job(void *arg)
{
	if (pthread_equal(pthread_self(), main_thread))
		atomic_fetch_add(&on_main, 1);
	atomic_fetch_add(&ran, 1);
	atomic_fetch_add((atomic_int *)arg, 1);
}

static atomic_int gate;

static void blocking_job(void *arg)
{
	while (!atomic_load(&gate))
		usleep(1000);
	atomic_fetch_add(&ran, 1);
}

/* A pool of workers threads and a queue of max_queue for blocking_job: the gate closed, the run
 * count zeroed. */
static struct pe_pool *gated_pool(unsigned workers, size_t max_queue)
{
	struct pe_err err = {0};
	atomic_store(&ran, 0);
	atomic_store(&gate, 0);
	struct pe_pool *p = pe_pool_new(workers, max_queue, NULL, NULL, 50, &err);
	ck_assert_msg(p != NULL, "pe_pool_new(%u, %zu): %s", workers, max_queue, err.detail);
	return p;
}

static void tick_cb(void *arg) { atomic_fetch_add(&ticks, 1); }

/* Poll stats until running reaches want (bounded: the assertion after says what was seen). */
static void wait_running(struct pe_pool *p, size_t want)
{
	ck_assert_uint_eq(poll_running(p, want), want);
}

START_TEST(runs_every_job_once)
{
	struct pe_err err = {0};
	main_thread = pthread_self();
	atomic_store(&ran, 0);
	struct pe_pool *p = pe_pool_new(2, 1000, tick_cb, NULL, 5, &err);
	ck_assert_ptr_nonnull(p);
	atomic_int per[200];
	for (int i = 0; i < 200; i++) {
		atomic_init(&per[i], 0);
		ck_assert_int_eq(pe_pool_submit(p, count_job, &per[i]), 0);
	}
	struct pe_pool_stats s;
	for (int i = 0; i < 5000; i++) {
		pe_pool_stats(p, &s);
		if (s.completed == 200)
			break;
		usleep(1000);
	}
	ck_assert_uint_eq(s.completed, 200);
	ck_assert_uint_eq(s.submitted, 200);
	ck_assert_uint_eq(s.queued + s.running + s.rejected, 0);
	pe_pool_free(p);
	ck_assert_int_eq(atomic_load(&ran), 200);
	for (int i = 0; i < 200; i++)
		ck_assert_int_eq(atomic_load(&per[i]), 1);
	ck_assert_int_eq(atomic_load(&on_main), 0);
}
END_TEST

/* Each worker keeps to one CPU (when the process may use two or more), so a big JSON document's
 * helper starts on another CPU than its caller: every job sees a one-CPU affinity, and the two
 * workers of a 2-worker pool two different CPUs. */
static atomic_int cpu_seen[2];

static void affinity_job(void *arg)
{
	cpu_set_t s;
	int i = *(int *)arg, one = -1;
	if (pthread_getaffinity_np(pthread_self(), sizeof s, &s) == 0 && CPU_COUNT(&s) == 1)
		for (int c = 0; c < CPU_SETSIZE; c++)
			if (CPU_ISSET(c, &s))
				one = c;
	atomic_store(&cpu_seen[i], one + 1);
	usleep(200000); /* hold this worker so the other job goes to the other one */
}

START_TEST(workers_keep_to_distinct_cpus)
{
	cpu_set_t allowed;
	ck_assert_int_eq(sched_getaffinity(0, sizeof allowed, &allowed), 0);
	if (CPU_COUNT(&allowed) < 2) {
		fprintf(stderr, "pool: one CPU here; pinning not checked\n");
		return;
	}
	struct pe_err err = {0};
	struct pe_pool *p = pe_pool_new(2, 10, NULL, NULL, 50, &err);
	ck_assert_ptr_nonnull(p);
	static int idx[2] = {0, 1};
	atomic_store(&cpu_seen[0], 0);
	atomic_store(&cpu_seen[1], 0);
	ck_assert_int_eq(pe_pool_submit(p, affinity_job, &idx[0]), 0);
	ck_assert_int_eq(pe_pool_submit(p, affinity_job, &idx[1]), 0);
	pe_pool_free(p); /* runs both */
	int a = atomic_load(&cpu_seen[0]) - 1, b = atomic_load(&cpu_seen[1]) - 1;
	ck_assert_msg(a >= 0 && b >= 0, "a worker without a one-CPU affinity (%d, %d)", a, b);
	ck_assert_msg(a != b, "both workers on CPU %d", a);
}
END_TEST

static atomic_int nice_seen[2], nice_started;
static atomic_uint slice_seen[2];

/* Record this worker's own nice value, then hold it until both jobs have started, so each job
 * runs on a different worker. */
static void nice_job(void *arg)
{
	atomic_store(&nice_seen[*(int *)arg], 100 + getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid)));
	atomic_store(&slice_seen[*(int *)arg], pe_slice_get(0));
	atomic_fetch_add(&nice_started, 1);
	for (int i = 0; i < 5000 && atomic_load(&nice_started) < 2; i++)
		usleep(1000);
}

/* pe_pool_set_sched reaches every worker: those already running and those not started yet. */
START_TEST(workers_take_their_nice)
{
	struct pe_err err = {0};
	static int idx[2] = {0, 1};
	unsigned own = pe_slice_get(0);
	int own_nice = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid)); /* 0, or what `nice make` gave */
	int keeps = pe_slice_set(0, 700) == 0 && pe_slice_get(0) == 700; /* Linux 6.12+ */
	pe_slice_set(0, own);
	for (int round = 0; round < 2; round++) {
		struct pe_pool *p = pe_pool_new(2, 10, NULL, NULL, 50, &err);
		ck_assert_ptr_nonnull(p);
		if (round == 1)
			usleep(100000); /* both workers have started and are asleep */
		pe_pool_set_sched(p, 7 + round, 3000 + 1000 * (unsigned)round);
		atomic_store(&nice_started, 0);
		for (int k = 0; k < 2; k++) {
			atomic_store(&nice_seen[k], 0);
			ck_assert_int_eq(pe_pool_submit(p, nice_job, &idx[k]), 0);
		}
		pe_pool_free(p); /* runs both */
		for (int k = 0; k < 2; k++)
			ck_assert_msg(atomic_load(&nice_seen[k]) - 100 == 7 + round, "round %d, job %d ran at nice %d", round,
				      k, atomic_load(&nice_seen[k]) - 100);
		for (int k = 0; k < 2 && keeps; k++) /* the slice too, where the kernel keeps one (slice.h) */
			ck_assert_msg(atomic_load(&slice_seen[k]) == 3000 + 1000 * (unsigned)round,
				      "round %d, job %d ran with a %u µs slice", round, k, atomic_load(&slice_seen[k]));
		ck_assert_int_eq(atomic_load(&nice_started), 2);
	}
	ck_assert_msg(getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid)) == own_nice, "the caller's own nice changed");
	ck_assert_msg(pe_slice_get(0) == own, "the caller's own slice changed");
}
END_TEST

START_TEST(admission_and_close)
{
	struct pe_pool *p = gated_pool(1, 2);
	ck_assert_int_eq(pe_pool_submit(p, blocking_job, NULL), 0);
	wait_running(p, 1); /* the first job occupies the only worker */
	ck_assert_int_eq(pe_pool_submit(p, blocking_job, NULL), 0);
	ck_assert_int_eq(pe_pool_submit(p, blocking_job, NULL), 0);
	ck_assert_int_eq(pe_pool_submit(p, blocking_job, NULL), PE_EBUSY);
	struct pe_pool_stats s;
	pe_pool_stats(p, &s);
	ck_assert_uint_eq(s.queued, 2);
	ck_assert_uint_eq(s.rejected, 1);
	ck_assert_uint_eq(s.submitted, 3);
	pe_pool_close(p);
	ck_assert_int_eq(pe_pool_submit(p, blocking_job, NULL), PE_EDRAINING);
	pe_pool_stats(p, &s);
	ck_assert_uint_eq(s.rejected, 2);
	atomic_store(&gate, 1);
	pe_pool_free(p);
	ck_assert_int_eq(atomic_load(&ran), 3);
}
END_TEST

START_TEST(tick_runs)
{
	struct pe_err err = {0};
	atomic_store(&ticks, 0);
	struct pe_pool *p = pe_pool_new(1, 10, tick_cb, NULL, 5, &err);
	ck_assert_ptr_nonnull(p);
	for (int i = 0; i < 2000 && atomic_load(&ticks) < 3; i++)
		usleep(1000);
	pe_pool_free(p);
	ck_assert_int_ge(atomic_load(&ticks), 3);
}
END_TEST

/* ---- shutdown with queued jobs ---- */

static atomic_int saw_cancel;

/* A queued request's job at shutdown: it checks the cancel flag first, as the HTTP jobs do. */
static void cancellable_job(void *arg)
{
	if (pe_cancelled())
		atomic_fetch_add(&saw_cancel, 1);
	atomic_fetch_add(&ran, 1);
}

/* A job that needs the tick to go on (the HTTP layer's deadlines): it returns after two more. */
static void needs_ticks_job(void *arg)
{
	int t0 = atomic_load(&ticks);
	while (atomic_load(&ticks) < t0 + 2)
		usleep(1000);
	atomic_fetch_add(&ran, 1);
}

static void *free_pool(void *arg)
{
	pe_pool_free(arg);
	return NULL;
}

/* main.c at SIGTERM past shutdown_timeout: close, pe_cancel_all, free. Every queued job still runs
 * (once, and it sees the cancellation, so it fails fast), free returns only after all of them, and
 * the tick keeps coming until the last job is done. */
START_TEST(shutdown_with_queued_jobs)
{
	struct pe_err err = {0};
	atomic_store(&ran, 0);
	atomic_store(&gate, 0);
	atomic_store(&ticks, 0);
	struct pe_pool *p = pe_pool_new(1, 100, tick_cb, NULL, 2, &err);
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(pe_pool_submit(p, blocking_job, NULL), 0);
	wait_running(p, 1);
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(pe_pool_submit(p, cancellable_job, NULL), 0);
	ck_assert_int_eq(pe_pool_submit(p, needs_ticks_job, NULL), 0);
	struct pe_pool_stats s;
	pe_pool_stats(p, &s);
	ck_assert_uint_eq(s.queued, 6);
	pe_pool_close(p);
	pe_cancel_all();
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, free_pool, p), 0);
	ck_assert_int_eq(atomic_load(&ran), 0); /* free waits for the blocked job */
	atomic_store(&gate, 1);
	pthread_join(t, NULL);
	ck_assert_int_eq(atomic_load(&ran), 7);
	ck_assert_int_eq(atomic_load(&saw_cancel), 5);
}
END_TEST

/* ---- parallel ---- */

#define MAX_THREADS 8

struct par {
	atomic_int hits[64];
	pthread_t seen[MAX_THREADS + 1];
	int nseen;
	pthread_mutex_t lock;
};

static void par_init(struct par *x)
{
	memset(x, 0, sizeof *x);
	pthread_mutex_init(&x->lock, NULL);
}

static void note_thread(struct par *x)
{
	pthread_mutex_lock(&x->lock);
	int known = 0;
	for (int i = 0; i < x->nseen; i++)
		known |= pthread_equal(x->seen[i], pthread_self());
	if (!known) {
		ck_assert_int_lt(x->nseen, MAX_THREADS + 1);
		x->seen[x->nseen++] = pthread_self();
	}
	pthread_mutex_unlock(&x->lock);
}

static void chunk_fn(void *arg, size_t k)
{
	struct par *x = arg;
	atomic_fetch_add(&x->hits[k], 1);
	note_thread(x);
	for (int i = 0; i < 100; i++) /* something to share */
		sched_yield();
}

static int ran_on(const struct par *x, pthread_t t)
{
	for (int i = 0; i < x->nseen; i++)
		if (pthread_equal(x->seen[i], t))
			return 1;
	return 0;
}

/* Every chunk once; the threads that ran them are the caller and at most `workers` others. */
START_TEST(parallel_every_chunk_once)
{
	struct pe_err err = {0};
	struct pe_pool *p = pe_pool_new(3, 10, NULL, NULL, 50, &err);
	ck_assert_ptr_nonnull(p);
	for (size_t n = 0; n <= 64; n += 7) {
		struct par x;
		par_init(&x);
		pe_pool_parallel(p, n, chunk_fn, &x);
		for (size_t k = 0; k < 64; k++)
			ck_assert_int_eq(atomic_load(&x.hits[k]), k < n ? 1 : 0);
		ck_assert_int_le(x.nseen, 4);
		if (n)
			ck_assert(ran_on(&x, pthread_self())); /* the caller takes part */
	}
	struct pe_parallel h = pe_pool_parallel_hook(p);
	ck_assert_uint_ge(h.width, 1);
	ck_assert_uint_le(h.width, 3);
	struct par x;
	par_init(&x);
	h.run(h.ctx, 5, chunk_fn, &x);
	for (size_t k = 0; k < 5; k++)
		ck_assert_int_eq(atomic_load(&x.hits[k]), 1);
	struct pe_pool_stats s;
	pe_pool_stats(p, &s);
	ck_assert_uint_eq(s.submitted, 0); /* chunks are not jobs */
	pe_pool_free(p);
}
END_TEST

/* Every worker busy and the queue full: the caller runs every chunk itself, and nothing waits. */
START_TEST(parallel_all_workers_busy)
{
	struct pe_pool *p = gated_pool(2, 2);
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(pe_pool_submit(p, blocking_job, NULL), 0);
		if (i == 1)
			wait_running(p, 2);
	}
	ck_assert_int_eq(pe_pool_submit(p, blocking_job, NULL), PE_EBUSY);
	struct par x;
	par_init(&x);
	pe_pool_parallel(p, 16, chunk_fn, &x);
	for (size_t k = 0; k < 16; k++)
		ck_assert_int_eq(atomic_load(&x.hits[k]), 1);
	ck_assert_int_eq(x.nseen, 1);
	ck_assert(ran_on(&x, pthread_self()));
	atomic_store(&gate, 1);
	pe_pool_free(p);
	ck_assert_int_eq(atomic_load(&ran), 4);
}
END_TEST

/* Every worker is a job that calls pe_pool_parallel at the same moment (a barrier lines them up):
 * nobody is free to help, and all of them finish. */
static pthread_barrier_t line_up;
static struct par many[4];

static struct pe_pool *shared_pool;

static void encoder_job(void *arg)
{
	struct par *x = arg;
	pthread_barrier_wait(&line_up);
	pe_pool_parallel(shared_pool, 32, chunk_fn, x);
	atomic_fetch_add(&ran, 1);
}

START_TEST(parallel_every_worker_a_caller)
{
	struct pe_err err = {0};
	atomic_store(&ran, 0);
	enum { W = 4 };
	pthread_barrier_init(&line_up, NULL, W);
	shared_pool = pe_pool_new(W, 10, NULL, NULL, 50, &err);
	ck_assert_ptr_nonnull(shared_pool);
	for (int w = 0; w < W; w++) {
		par_init(&many[w]);
		ck_assert_int_eq(pe_pool_submit(shared_pool, encoder_job, &many[w]), 0);
	}
	pe_pool_free(shared_pool); /* returns once every job is done: a deadlock is a test timeout */
	ck_assert_int_eq(atomic_load(&ran), W);
	for (int w = 0; w < W; w++)
		for (size_t k = 0; k < 32; k++)
			ck_assert_int_eq(atomic_load(&many[w].hits[k]), 1);
	pthread_barrier_destroy(&line_up);
}
END_TEST

/* The JSON encoder through the pool's hook: the bytes of one thread, from a job (the daemon's case)
 * and from a thread outside the pool. */
static struct pe_tensor_view big;
static struct pe_buf one;
static atomic_int json_ok;

static void check_json(struct pe_pool *p)
{
	struct pe_parallel h = pe_pool_parallel_hook(p);
	h.width = 4; /* chunks even on a machine with fewer CPUs */
	struct pe_buf b;
	pe_buf_init(&b, 1u << 30);
	int ok = pe_json_write_table_mt(&b, NULL, &big, &h, NULL) == 0 && b.len == one.len &&
		 memcmp(b.data, one.data, one.len) == 0;
	atomic_fetch_add(&json_ok, ok);
	pe_buf_destroy(&b);
}

static void json_job(void *arg) { check_json(arg); }

START_TEST(json_through_the_pool)
{
	size_t rows = 300, cols = 500;
	float *v = malloc(rows * cols * sizeof *v);
	for (size_t i = 0; i < rows * cols; i++)
		v[i] = (float)i * 0.37f - 1000.0f;
	big = (struct pe_tensor_view){{2, {rows, cols}}, PE_F32, v};
	pe_buf_init(&one, 1u << 30);
	ck_assert_int_eq(pe_json_write_table(&one, NULL, &big, NULL), 0);
	struct pe_err err = {0};
	struct pe_pool *p = pe_pool_new(2, 10, NULL, NULL, 50, &err);
	ck_assert_ptr_nonnull(p);
	atomic_store(&json_ok, 0);
	check_json(p);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(pe_pool_submit(p, json_job, p), 0);
	pe_pool_free(p);
	ck_assert_int_eq(atomic_load(&json_ok), 5);
	pe_buf_destroy(&one);
	free(v);
}
END_TEST

/* ---- the HTTP threads' reserve (pe_pool_reserve_cpus) ---- */

/* While the HTTP threads are busy, one heavy job at a time on two workers with one CPU reserved;
 * a light job passes the one that waits; once they are quiet the second starts. */
START_TEST(heavy_jobs_leave_the_reserve)
{
	struct pe_pool *p = gated_pool(2, 10);
	pe_pool_reserve_cpus(p, 1);
	pthread_t t = start_noting(p, 0);
	ck_assert_int_eq(pe_pool_submit_heavy(p, blocking_job, NULL), 0);
	ck_assert_int_eq(pe_pool_submit_heavy(p, blocking_job, NULL), 0);
	wait_running(p, 1);
	usleep(50000);
	struct pe_pool_stats s;
	pe_pool_stats(p, &s);
	ck_assert_msg(s.running == 1 && s.queued == 1, "busy: %zu heavy running, %zu queued (1, 1)", s.running, s.queued);
	atomic_int light;
	atomic_init(&light, 0);
	ck_assert_int_eq(pe_pool_submit(p, count_job, &light), 0);
	for (int i = 0; i < 5000 && !atomic_load(&light); i++)
		usleep(1000);
	ck_assert_msg(atomic_load(&light) == 1, "a light job waited behind the heavy one");
	stop_noting(t);
	wait_running(p, 2); /* quiet: the second heavy job starts */
	atomic_store(&gate, 1);
	pe_pool_free(p);
	ck_assert_int_eq(atomic_load(&ran), 3);
}
END_TEST

/* No reserve: heavy jobs take every worker, busy or not. At shutdown a held-back job still runs. */
START_TEST(heavy_jobs_without_a_reserve)
{
	for (int reserve = 0; reserve < 2; reserve++) {
		struct pe_pool *p = gated_pool(2, 10);
		pe_pool_reserve_cpus(p, (unsigned)reserve);
		pthread_t t = start_noting(p, 0);
		ck_assert_int_eq(pe_pool_submit_heavy(p, blocking_job, NULL), 0);
		ck_assert_int_eq(pe_pool_submit_heavy(p, blocking_job, NULL), 0);
		wait_running(p, reserve ? 1 : 2);
		atomic_store(&gate, 1);
		pe_pool_stop(p); /* still busy: the held-back one runs all the same */
		stop_noting(t);  /* then free: noting on a freed pool is a use after free */
		pe_pool_free(p);
		ck_assert_int_eq(atomic_load(&ran), 2);
	}
}
END_TEST

static struct pe_pool *reserve_pool;

static void parallel_job(void *arg) { pe_pool_parallel(reserve_pool, 16, chunk_fn, arg); }

/* A heavy job's parallel parts get no helper while the HTTP threads are busy and it holds the one
 * CPU left to heavy work: every chunk runs on its own worker. */
START_TEST(heavy_job_helpers_leave_the_reserve)
{
	struct pe_err err = {0};
	struct par x;
	par_init(&x);
	reserve_pool = pe_pool_new(2, 10, NULL, NULL, 50, &err);
	ck_assert_ptr_nonnull(reserve_pool);
	pe_pool_reserve_cpus(reserve_pool, 1);
	pthread_t t = start_noting(reserve_pool, 0);
	ck_assert_int_eq(pe_pool_submit_heavy(reserve_pool, parallel_job, &x), 0);
	struct pe_pool_stats s = {0};
	for (int i = 0; i < 5000 && s.completed < 1; i++) {
		usleep(1000);
		pe_pool_stats(reserve_pool, &s); /* done before pe_pool_free: shutdown lifts the reserve */
	}
	stop_noting(t);
	pe_pool_free(reserve_pool);
	for (int k = 0; k < 16; k++)
		ck_assert_int_eq(atomic_load(&x.hits[k]), 1);
	ck_assert_msg(x.nseen == 1, "chunks ran on %d threads", x.nseen);
}
END_TEST

/* The ticker hands free heap pages back only once the HTTP threads have been quiet for a second:
 * none while requests are noted at a busy rate, one soon after they stop (where the allocator
 * reports its free bytes: not under AddressSanitizer, whose allocator is its own). */
START_TEST(no_trim_while_busy)
{
	struct pe_err err = {0};
	enum { N = 6000 };
	static void *blocks[N];
	for (int i = 0; i < N; i++)
		if ((blocks[i] = malloc(8192))) /* 48 MiB on the heap, below its top */
			((volatile char *)blocks[i])[0] = 1; /* kept: the compiler may drop a malloc never used */
	void *pin = malloc(8192);
	if (pin)
		((volatile char *)pin)[0] = 1;
	for (int i = 0; i < N; i++)
		free(blocks[i]);
	struct mallinfo2 mi = mallinfo2();
	int reports = mi.fordblks - mi.keepcost >= (size_t)32 << 20;
	struct pe_pool *p = pe_pool_new(1, 10, tick_cb, NULL, 50, &err);
	ck_assert_ptr_nonnull(p);
	pthread_t t = start_noting(p, 0);
	usleep(9 * 1000 * 1000); /* two of the ticker's trim periods (TRIM_EVERY_NS) */
	struct pe_pool_stats s;
	pe_pool_stats(p, &s);
	ck_assert_msg(s.trims == 0, "%" PRIu64 " trims while busy", s.trims);
	stop_noting(t);
	for (int i = 0; i < 100 && reports && s.trims == 0; i++) {
		usleep(100000);
		pe_pool_stats(p, &s);
	}
	ck_assert_msg(!reports || s.trims >= 1, "no trim within 10 s of quiet");
	printf("no_trim_while_busy: allocator reports free bytes: %d, trims after quiet: %" PRIu64 "\n", reports, s.trims);
	pe_pool_free(p);
	free(pin);
}
END_TEST

static Suite *pool_suite(void)
{
	Suite *s = suite_create("pool");
	TCase *tc = tcase_create("pool");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, runs_every_job_once);
	tcase_add_test(tc, workers_keep_to_distinct_cpus);
	tcase_add_test(tc, workers_take_their_nice);
	tcase_add_test(tc, admission_and_close);
	tcase_add_test(tc, tick_runs);
	tcase_add_test(tc, shutdown_with_queued_jobs);
	suite_add_tcase(s, tc);
	TCase *par = tcase_create("parallel");
	tcase_set_timeout(par, 30);
	tcase_add_test(par, parallel_every_chunk_once);
	tcase_add_test(par, parallel_all_workers_busy);
	tcase_add_test(par, parallel_every_worker_a_caller);
	tcase_add_test(par, json_through_the_pool);
	suite_add_tcase(s, par);
	TCase *res = tcase_create("reserve");
	tcase_set_timeout(res, 30);
	tcase_add_test(res, heavy_jobs_leave_the_reserve);
	tcase_add_test(res, heavy_jobs_without_a_reserve);
	tcase_add_test(res, heavy_job_helpers_leave_the_reserve);
	tcase_add_test(res, no_trim_while_busy);
	suite_add_tcase(s, res);
	return s;
}

PE_TEST_MAIN(pool_suite)
