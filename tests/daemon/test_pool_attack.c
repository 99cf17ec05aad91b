/* Hostile tests of the pool's reserve for the HTTP threads (pe_pool_reserve_cpus,
 * pe_pool_submit_heavy, pe_pool_note_request): reserve_cpus 0 holds nothing back whatever the
 * machine; one worker, or a reserve of more CPUs than there are, never starves heavy jobs; light
 * and heavy jobs (some with parallel parts) submitted from several threads at once while "busy"
 * flaps on and off each run exactly once, the counts add up, and the reserve's accounting is
 * intact afterwards (one heavy job at a time while busy, all once quiet); pe_pool_close and
 * pe_pool_stop while heavy jobs are held back and busy goes on runs every accepted one, and the
 * stopped pool still takes notes and counts until it is freed (the daemon's HTTP threads answer,
 * and note, until they stop, after the pool's threads: a freed pool was a use after free). Meant to be run under
 * ThreadSanitizer too (the run_job middle-of-queue unlink and tail fix). */
#include "support/pe_check.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "daemon/pool.h"
#include "daemon/pool_noter.h"

/* ---- helpers ---- */

static atomic_int gate, gated_ran;

static void gated_job(void *arg)
{
	while (!atomic_load(&gate))
		usleep(1000);
	atomic_fetch_add(&gated_ran, 1);
}

/* Poll until running reaches want, then see that it stays there a while (bounded polls, no
 * timing asserted: what is checked is the count). */
static size_t settle_running(struct pe_pool *p, size_t want)
{
	struct pe_pool_stats s;
	poll_running(p, want);
	usleep(30000);
	pe_pool_stats(p, &s);
	return s.running;
}

/* Two gated heavy jobs on a busy pool: how many run at once. Opens the gate and frees the pool. */
static size_t heavy_at_once(struct pe_pool *p, size_t want)
{
	atomic_store(&gate, 0);
	atomic_store(&gated_ran, 0);
	pthread_t t = start_noting(p, 0);
	ck_assert_int_eq(pe_pool_submit_heavy(p, gated_job, NULL), 0);
	ck_assert_int_eq(pe_pool_submit_heavy(p, gated_job, NULL), 0);
	size_t n = settle_running(p, want);
	atomic_store(&gate, 1);
	stop_noting(t); /* before free: noting on a freed pool is the caller's use after free */
	pe_pool_free(p);
	ck_assert_int_eq(atomic_load(&gated_ran), 2);
	return n;
}

/* ---- the reserve's configuration ---- */

/* A busy pool with two gated heavy jobs: how many may run at once, by workers and reserve. */
static const struct reserve_case {
	const char *what;
	unsigned workers, reserve;
	size_t want;
	int one_cpu; /* the pool is made while this thread is kept to one CPU */
} reserve_cases[] = {
	/* reserve_cpus 0 is "no reserve": with more workers than CPUs (one CPU, two workers) heavy
	 * jobs still take every worker while busy */
	{"reserve_cpus 0, 2 workers on one CPU", 2, 0, 2, 1},
	/* one worker: nothing to reserve, its heavy job runs while busy (a cap of every worker) */
	{"one worker, reserve 1", 1, 1, 1, 0},
	/* more CPUs reserved than there are: heavy jobs still get one worker, never none */
	{"reserve 1024 of 2 workers", 2, 1024, 1, 0},
};

/* Keeps this thread (and so a pool made now) to the first CPU of its set; returns the old set. */
static cpu_set_t pin_to_one_cpu(void)
{
	cpu_set_t was, one;
	ck_assert_int_eq(sched_getaffinity(0, sizeof was, &was), 0);
	CPU_ZERO(&one);
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &was)) {
			CPU_SET(c, &one);
			break;
		}
	ck_assert_int_eq(sched_setaffinity(0, sizeof one, &one), 0);
	return was;
}

START_TEST(reserve_never_starves_heavy)
{
	const struct reserve_case *c = &reserve_cases[_i];
	cpu_set_t was;
	if (c->one_cpu)
		was = pin_to_one_cpu();
	struct pe_err err = {0};
	struct pe_pool *p = pe_pool_new(c->workers, 10, NULL, NULL, 50, &err);
	if (c->one_cpu)
		sched_setaffinity(0, sizeof was, &was);
	ck_assert_msg(p != NULL, "%s: pe_pool_new failed", c->what);
	pe_pool_reserve_cpus(p, c->reserve);
	size_t n = heavy_at_once(p, c->want);
	ck_assert_msg(n == c->want, "%s, busy: %zu heavy jobs running, want %zu", c->what, n, c->want);
}
END_TEST

/* ---- many submitters while busy flaps ---- */

enum { SUBMITTERS = 4, PER = 1500, JOBS = SUBMITTERS * PER, CHUNKS = 4 };

static struct pe_pool *storm_pool;
static atomic_int job_runs[JOBS], chunk_runs[JOBS][CHUNKS];
static int accepted[JOBS];
static atomic_int busy_refusals;

static void chunk_fn(void *arg, size_t k) { atomic_fetch_add(&chunk_runs[(int)(intptr_t)arg][k], 1); }

/* Every third job has parallel parts (the encoder's rows), so helpers and jobs mix. */
static void storm_job(void *arg)
{
	int id = (int)(intptr_t)arg;
	atomic_fetch_add(&job_runs[id], 1);
	if (id % 3 == 0)
		pe_pool_parallel(storm_pool, CHUNKS, chunk_fn, arg);
}

static void *submitter_main(void *arg)
{
	int base = (int)(intptr_t)arg * PER;
	unsigned seed = (unsigned)base + 1;
	for (int i = 0; i < PER; i++) {
		int id = base + i, rc;
		int heavy = rand_r(&seed) % 2;
		while ((rc = (heavy ? pe_pool_submit_heavy : pe_pool_submit)(storm_pool, storm_job, (void *)(intptr_t)id)) == PE_EBUSY) {
			atomic_fetch_add(&busy_refusals, 1);
			usleep(200);
		}
		accepted[id] = rc == 0;
	}
	return NULL;
}

/* Light and heavy jobs from four threads into a short queue (refusals and retries), busy flapping:
 * every accepted job and chunk runs exactly once, the counts add up, and afterwards the reserve
 * still lets exactly one heavy job run while busy and both once quiet. */
START_TEST(storm_of_mixed_jobs)
{
	struct pe_err err = {0};
	storm_pool = pe_pool_new(3, 16, NULL, NULL, 50, &err);
	ck_assert_ptr_nonnull(storm_pool);
	pe_pool_reserve_cpus(storm_pool, 1);
	pthread_t noter = start_noting(storm_pool, 1);
	pthread_t sub[SUBMITTERS];
	for (int i = 0; i < SUBMITTERS; i++)
		ck_assert_int_eq(pthread_create(&sub[i], NULL, submitter_main, (void *)(intptr_t)i), 0);
	for (int i = 0; i < SUBMITTERS; i++)
		pthread_join(sub[i], NULL);
	struct pe_pool_stats s;
	for (int i = 0; i < 10000; i++) {
		pe_pool_stats(storm_pool, &s);
		if (s.completed == s.submitted)
			break;
		usleep(1000);
	}
	stop_noting(noter);
	int n_ok = 0;
	for (int id = 0; id < JOBS; id++) {
		n_ok += accepted[id];
		ck_assert_msg(atomic_load(&job_runs[id]) == accepted[id], "job %d ran %d times", id, atomic_load(&job_runs[id]));
		for (int k = 0; k < CHUNKS; k++)
			ck_assert_int_eq(atomic_load(&chunk_runs[id][k]), accepted[id] && id % 3 == 0);
	}
	ck_assert_int_eq(n_ok, JOBS);
	ck_assert_uint_eq(s.submitted, JOBS);
	ck_assert_uint_eq(s.completed, JOBS);
	ck_assert_uint_eq(s.rejected, (uint64_t)atomic_load(&busy_refusals));
	ck_assert_uint_eq(s.queued, 0);
	ck_assert_uint_eq(s.running, 0);
	printf("storm_of_mixed_jobs: %d jobs, %d refusals (queue full) retried\n", JOBS, atomic_load(&busy_refusals));
	/* the reserve's accounting (heavy_running, helping) came back to 0: one heavy job while busy */
	atomic_store(&gate, 0);
	atomic_store(&gated_ran, 0);
	noter = start_noting(storm_pool, 0);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(pe_pool_submit_heavy(storm_pool, gated_job, NULL), 0);
	size_t n = settle_running(storm_pool, 1);
	ck_assert_msg(n == 1, "after the storm, busy: %zu heavy jobs running (1)", n);
	stop_noting(noter);
	n = settle_running(storm_pool, 3);
	ck_assert_msg(n == 3, "after the storm, quiet: %zu heavy jobs running (3)", n);
	atomic_store(&gate, 1);
	pe_pool_free(storm_pool);
	ck_assert_int_eq(atomic_load(&gated_ran), 3);
}
END_TEST

static atomic_int plain_runs;

static void plain_job(void *arg) { atomic_fetch_add(&plain_runs, 1); }

/* Close and stop while heavy jobs are held back and busy never ends: close refuses new ones, stop
 * runs every accepted one (shutdown lifts the reserve) and returns; notes, stats and counts on the
 * stopped pool are fine until it is freed. */
START_TEST(close_and_free_while_held_back)
{
	struct pe_err err = {0};
	atomic_store(&gate, 0);
	atomic_store(&gated_ran, 0);
	atomic_store(&plain_runs, 0);
	struct pe_pool *p = pe_pool_new(2, 64, NULL, NULL, 50, &err);
	ck_assert_ptr_nonnull(p);
	pe_pool_reserve_cpus(p, 1);
	pthread_t t = start_noting(p, 0);
	ck_assert_int_eq(pe_pool_submit_heavy(p, gated_job, NULL), 0);
	ck_assert_uint_eq(settle_running(p, 1), 1);
	for (int i = 0; i < 40; i++)
		ck_assert_int_eq((i % 2 ? pe_pool_submit_heavy : pe_pool_submit)(p, plain_job, NULL), 0);
	for (int i = 0; i < 5000 && atomic_load(&plain_runs) < 20; i++)
		usleep(1000);
	ck_assert_msg(atomic_load(&plain_runs) == 20, "busy: %d ran, the 20 light ones pass the held heavy ones", atomic_load(&plain_runs));
	struct pe_pool_stats s;
	pe_pool_stats(p, &s);
	ck_assert_uint_eq(s.queued, 20);
	pe_pool_close(p);
	ck_assert_int_eq(pe_pool_submit_heavy(p, plain_job, NULL), PE_EDRAINING);
	atomic_store(&gate, 1);
	pe_pool_stop(p); /* busy still: every held-back job runs all the same */
	ck_assert_int_eq(atomic_load(&plain_runs), 40);
	ck_assert_int_eq(atomic_load(&gated_ran), 1);
	pe_pool_stats(p, &s); /* a stopped pool still takes notes and tells its counts (the HTTP threads */
	ck_assert_uint_eq(s.completed, 41); /* answer until they stop, after the pool's threads) */
	ck_assert_uint_eq(s.queued + s.running, 0);
	ck_assert_int_eq(pe_pool_submit(p, plain_job, NULL), PE_EDRAINING);
	pe_pool_count_inline(p);
	stop_noting(t);
	pe_pool_free(p);
}
END_TEST


/* Two HTTP threads note requests at a window's turn: one read the clock just before it, and its
 * note lands after the other's first note of the new window. That stale note must not turn the
 * window back (which zeroed the new window's count, and the next note zeroed it again), so 32
 * requests in the new window, one stale note among them, still make busy. Played clock: a
 * window is 10 ms, busy is 32 notes in one. */
START_TEST(stale_clock_keeps_the_window)
{
	const uint64_t ms = 1000000, t = 1000000 * 1000 * ms + 5 * ms; /* 5 ms into a window */
	struct pe_err err = {0};
	struct pe_pool *p = pe_pool_new(1, 10, NULL, NULL, 50, &err);
	ck_assert_ptr_nonnull(p);
	for (int i = 0; i < 31; i++)
		pe_pool_note_request_at(p, t);
	ck_assert_msg(!pe_pool_busy_at(p, t), "31 notes in a window are not busy");
	pe_pool_note_request_at(p, t - 10 * ms + 1); /* read in the window before */
	pe_pool_note_request_at(p, t);
	ck_assert_msg(pe_pool_busy_at(p, t + ms), "32 notes in the window and a stale one: busy");
	ck_assert_msg(!pe_pool_busy_at(p, t + 21 * ms), "busy holds 20 ms after the last busy note");
	pe_pool_free(p);
}
END_TEST
/* Workers held back while busy sleep: 63 of 64 workers waiting behind one running heavy job (each
 * woken by a heavy submit, finding no room) must not poll the lock. Counted in the process's
 * voluntary context switches over one second of busy, not in time: polling every millisecond
 * costs one switch per worker and millisecond (~63000), sleeping until busy may have ended
 * (FG_HOLD_NS, 20 ms) some 50 per worker; the noter's own 1000 are not counted. */
START_TEST(held_back_workers_sleep)
{
	enum { W = 64 };
	struct pe_err err = {0};
	atomic_store(&gate, 0);
	atomic_store(&gated_ran, 0);
	atomic_store(&plain_runs, 0);
	struct pe_pool *p = pe_pool_new(W, 2 * W, NULL, NULL, 50, &err);
	ck_assert_ptr_nonnull(p);
	pe_pool_reserve_cpus(p, 1024); /* cap 1 whatever the CPUs */
	pthread_t t = start_noting(p, 0);
	ck_assert_int_eq(pe_pool_submit_heavy(p, gated_job, NULL), 0);
	ck_assert_uint_eq(settle_running(p, 1), 1);
	for (int i = 0; i < W - 1; i++)
		ck_assert_int_eq(pe_pool_submit_heavy(p, plain_job, NULL), 0);
	usleep(100000);
	struct rusage a, b;
	getrusage(RUSAGE_SELF, &a);
	usleep(1000000);
	getrusage(RUSAGE_SELF, &b);
	long switches = b.ru_nvcsw - a.ru_nvcsw;
	struct pe_pool_stats s;
	pe_pool_stats(p, &s);
	ck_assert_msg(s.running == 1 && s.queued == W - 1, "busy: %zu running, %zu queued", s.running, s.queued);
	/* a light job still starts at once: a held-back worker is woken for it */
	ck_assert_int_eq(pe_pool_submit(p, plain_job, NULL), 0);
	for (int i = 0; i < 5000 && !atomic_load(&plain_runs); i++)
		usleep(1000);
	ck_assert_int_eq(atomic_load(&plain_runs), 1);
	atomic_store(&gate, 1);
	stop_noting(t);
	pe_pool_free(p);
	ck_assert_int_eq(atomic_load(&plain_runs), W);
	printf("held_back_workers_sleep: %ld voluntary switches in 1 s with %d workers held back\n", switches, W - 1);
	ck_assert_msg(switches < 12000, "%ld voluntary context switches in 1 s: held-back workers poll", switches);
}
END_TEST

static Suite *pool_attack_suite(void)
{
	Suite *s = suite_create("pool_attack");
	TCase *tc = tcase_create("reserve");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, reserve_never_starves_heavy, 0, (int)(sizeof reserve_cases / sizeof reserve_cases[0]));
	tcase_add_test(tc, storm_of_mixed_jobs);
	tcase_add_test(tc, close_and_free_while_held_back);
	tcase_add_test(tc, held_back_workers_sleep);
	tcase_add_test(tc, stale_clock_keeps_the_window);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(pool_attack_suite)
