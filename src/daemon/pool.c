/* Worker pool (see pool.h). One lock guards the job queue (a list, counted against max_queue), the
 * list of parallel tasks that still have chunks nobody took, and the stack of idle workers. Each
 * idle worker sleeps on its own condition variable, so whoever has work wakes exactly one thread
 * and knows which (a submit wakes one for the job; a parallel task wakes one per spare chunk).
 * A woken or finishing worker looks for chunks first, then jobs: a chunk belongs to a request that
 * already holds a worker and is nearly answered. Workers may run at a lower priority than the
 * HTTP thread, and with a longer scheduler slice (pe_pool_set_sched).
 *
 * The ticker also hands the heap's free pages back to the system every few seconds (trim_heap):
 * glibc returns only the top of its heap, so once many small cached tables were evicted for large
 * ones (which live in their own mappings), the small ones' pages stayed resident for good. It
 * waits for the HTTP threads to be quiet: a trim stalls every allocation while it runs.
 *
 * A parallel task lives on its caller's stack. Chunks are claimed under the lock; the caller runs
 * chunks too, and once all are claimed it waits only for those others are running, never for a
 * thread to come free, so it cannot deadlock when every worker is such a caller. A helper touches
 * the task only under the lock, and the last one out signals the caller, who may then return. */
#include "daemon/pool.h"
#include "daemon/slice.h"

#include <pthread.h>
#include <malloc.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>
#include <uv.h>

struct job {
	void (*work)(void *);
	void *arg;
	int heavy; /* pe_pool_submit_heavy: held back while the HTTP threads are busy */
	struct job *next;
};

struct task {
	void (*fn)(void *arg, size_t k);
	void *arg;
	size_t n, next, done; /* chunks; the next to claim; finished (under the pool's lock) */
	uv_cond_t all_done;
	struct task *older;
};

struct worker {
	struct pe_pool *pool;
	uv_thread_t thread;
	uv_cond_t wake;
	int woken;
	int cpu; /* the CPU this worker keeps to, or -1 (see pin_workers) */
	pid_t tid; /* its kernel thread id once it runs (under the lock), for pe_pool_set_sched */
	struct worker *next_idle;
};

struct pe_pool {
	uv_mutex_t lock;
	struct job *head, *tail; /* accepted, not started */
	struct task *tasks;      /* parallel tasks with chunks left to claim, newest first */
	struct worker *idle;     /* sleeping workers, most recently idle first */
	struct worker *workers;
	unsigned nworkers, width;
	int nice;          /* the workers' nice value (pe_pool_set_sched) */
	unsigned slice_us; /* their scheduler slice, 0: the kernel's (pe_pool_set_sched) */
	size_t max_queue;
	int closed, stopping;
	int joined; /* pe_pool_stop: the threads are gone (owner's thread only) */
	/* the ticker */
	void (*tick)(void *);
	void *tick_arg;
	unsigned tick_ms;
	int tick_stop, has_ticker;
	uv_thread_t ticker;
	uv_cond_t tick_cv;
	atomic_size_t queued, running;
	atomic_uint_fast64_t submitted, completed, rejected, inlined;
	/* the HTTP threads' reserve (pe_pool_reserve_cpus) */
	unsigned heavy_cap;              /* heavy jobs and helpers at once while they are busy; 0: no cap */
	unsigned heavy_running, helping; /* under the lock */
	atomic_uint_fast64_t fg_window, fg_busy_until; /* pe_pool_note_request */
	atomic_uint fg_count;
	atomic_uint_fast64_t trims; /* malloc_trim calls (trim_heap) */
};

/* ---- under the lock ---- */

static void wake(struct worker *w)
{
	w->woken = 1;
	uv_cond_signal(&w->wake);
}

static struct worker *pop_idle(struct pe_pool *p)
{
	struct worker *w = p->idle;
	if (w)
		p->idle = w->next_idle;
	return w;
}

/* Claim the next chunk of the newest task that has one; unlink a task whose last chunk this is. */
static struct task *claim(struct pe_pool *p, size_t *k)
{
	struct task *t = p->tasks;
	if (!t)
		return NULL;
	*k = t->next++;
	if (t->next == t->n)
		p->tasks = t->older;
	return t;
}

static void unlink_task(struct pe_pool *p, struct task *t)
{
	for (struct task **at = &p->tasks; *at; at = &(*at)->older)
		if (*at == t) {
			*at = t->older;
			return;
		}
}

/* ---- workers ---- */

static void run_chunk(struct pe_pool *p, struct task *t, size_t k)
{
	uv_mutex_unlock(&p->lock);
	t->fn(t->arg, k);
	uv_mutex_lock(&p->lock);
	if (++t->done == t->n)
		uv_cond_signal(&t->all_done);
}

/* Run the job *at links to (p->head or a queued job's next), unlinking it first. */
static void run_job(struct pe_pool *p, struct job **at)
{
	struct job *j = *at;
	*at = j->next;
	if (p->tail == j)
		p->tail = at == &p->head ? NULL : (struct job *)((char *)at - offsetof(struct job, next));
	atomic_fetch_add(&p->running, 1); /* before queued drops: never both 0 while a job is live */
	atomic_fetch_sub(&p->queued, 1);
	p->heavy_running += (unsigned)j->heavy;
	uv_mutex_unlock(&p->lock);
	j->work(j->arg);
	atomic_fetch_add(&p->completed, 1);
	atomic_fetch_sub(&p->running, 1);
	uv_mutex_lock(&p->lock);
	p->heavy_running -= (unsigned)j->heavy;
	free(j);
}

/* ---- the HTTP threads' reserve ----
 * While the HTTP threads are busy (FG_BUSY_REQUESTS requests finished within one FG_WINDOW_NS,
 * and FG_HOLD_NS after), heavy jobs and the helpers of their parallel parts run at most heavy_cap
 * at once, so the CPUs the HTTP threads need are not all taken by large tables; the rest wait in
 * the queue, light jobs pass them. That keeps small requests' tail latency low under a mixed load
 * at about the same large-table throughput (figures: docs/architecture.md, "Who gets the CPU"). */
#define FG_WINDOW_NS 10000000ull    /* 10 ms */
#define FG_BUSY_REQUESTS 32u        /* in one window: 3200 requests a second */
#define FG_HOLD_NS (2 * FG_WINDOW_NS)
#define FG_RECHECK_NS 1000000ull    /* past the end of busy, when a held-back worker looks again */

static int foreground_busy(struct pe_pool *p) { return pe_pool_busy_at(p, uv_hrtime()); }

/* May one more heavy job or helper start now? Under the lock. At shutdown, always. */
static int heavy_room(struct pe_pool *p)
{
	return !p->heavy_cap || p->stopping || p->heavy_running + p->helping < p->heavy_cap || !foreground_busy(p);
}

/* The link to the first queued job that may start (a light one when there is no heavy room). */
static struct job **next_job(struct pe_pool *p, int room)
{
	for (struct job **at = &p->head; *at; at = &(*at)->next)
		if (room || !(*at)->heavy)
			return at;
	return NULL;
}

/* Nice is not relative to the HTTP thread: every nice-0 thread of the scheduling group outweighs a
 * worker 1.25^nice times (a 0.2 s table beside one busy loop on its CPU: 8 s at 19, 0.65 s at 5),
 * which is why worker_nice defaults to 5, not 19 (tests/fault/test_worker_nice.c). The slice
 * changes no share, only when a worker gives way (slice.h). Both best effort. Under p->lock. */
static void apply_sched(struct pe_pool *p, pid_t tid)
{
	if (p->nice)
		setpriority(PRIO_PROCESS, (id_t)tid, p->nice);
	if (p->slice_us)
		pe_slice_set(tid, p->slice_us); /* after the nice: it keeps the nice it reads */
}

static void unlink_idle(struct pe_pool *p, struct worker *w)
{
	for (struct worker **at = &p->idle; *at; at = &(*at)->next_idle)
		if (*at == w) {
			*at = w->next_idle;
			return;
		}
}

/* On the idle list until woken (a submit, a parallel task, shutdown). A worker held back (jobs or
 * chunks wait for heavy room) waits there too, so a light job wakes it at once, and also leaves
 * when busy may have ended: room that a finishing job or helper makes is taken by that thread,
 * which looks at the queue next. A held-back worker can take a submit's wake-up meant for a job
 * it may not run, leaving another idle worker asleep with no timeout; so a worker that starts a
 * job with more queued behind it wakes one more (worker_main): once busy ends, the first held-back
 * worker to look starts the queue and each start wakes the next (test_pool_attack
 * storm_of_mixed_jobs). Polling every FG_RECHECK_NS instead would cost each held-back worker
 * 1000 wake-ups a second, on the lock, while the HTTP threads are busy. */
static void sleep_idle(struct pe_pool *p, struct worker *w, int held)
{
	w->woken = 0;
	w->next_idle = p->idle;
	p->idle = w;
	while (!w->woken) {
		uint64_t now = uv_hrtime(), until = held ? atomic_load(&p->fg_busy_until) : 0;
		if (!held)
			uv_cond_wait(&w->wake, &p->lock);
		else if (now < until)
			uv_cond_timedwait(&w->wake, &p->lock, until - now + FG_RECHECK_NS);
		else {
			unlink_idle(p, w);
			return;
		}
	}
}

static void worker_main(void *arg)
{
	struct worker *w = arg;
	struct pe_pool *p = w->pool;
	if (w->cpu >= 0) {
		cpu_set_t one;
		CPU_ZERO(&one);
		CPU_SET(w->cpu, &one);
		pthread_setaffinity_np(pthread_self(), sizeof one, &one); /* best effort */
	}
	uv_mutex_lock(&p->lock);
	w->tid = (pid_t)syscall(SYS_gettid);
	apply_sched(p, w->tid);
	for (;;) {
		size_t k;
		int room = heavy_room(p);
		struct task *t = room ? claim(p, &k) : NULL;
		struct job **at = t ? NULL : next_job(p, room);
		if (t) {
			p->helping++;
			run_chunk(p, t, k);
			p->helping--;
		} else if (at) {
			if ((*at)->next && p->idle) /* more queued: a wake a held-back worker took is passed on */
				wake(pop_idle(p));
			run_job(p, at);
		} else if (p->stopping)
			break;
		else
			sleep_idle(p, w, p->head || p->tasks);
	}
	uv_mutex_unlock(&p->lock);
}

/* ---- the ticker ---- */

#define TRIM_EVERY_NS (4 * 1000000000ull) /* how often the ticker looks at the heap */
#define TRIM_FREE_BYTES ((size_t)16 << 20)  /* free heap below its top worth giving back */
#define TRIM_QUIET_NS (1000000000ull)        /* since the HTTP threads were last busy */

/* Free pages inside the heap go back to the system (malloc_trim madvises them) once
 * TRIM_FREE_BYTES more are free than at the lowest since the last trim (*low: pages freed since,
 * which may be resident again), so idle RSS follows the cache after a turnover of small entries.
 * The trim holds the arena's lock while it madvises, stalling other threads' allocations, hence
 * only after such a turnover, at most every TRIM_EVERY_NS (steady churn frees about what it
 * reuses: no trim), and only once the HTTP threads have not been busy (pe_pool_note_request) for
 * TRIM_QUIET_NS. Figures: docs/architecture.md, "Memory". */
static void trim_heap(struct pe_pool *p, size_t *low)
{
	struct mallinfo2 mi = mallinfo2(); /* fordblks: all free bytes; keepcost: the top's */
	size_t free_now = mi.fordblks - mi.keepcost;
	if (free_now < *low)
		*low = free_now;
	if (free_now - *low >= TRIM_FREE_BYTES) {
		malloc_trim(0);
		atomic_fetch_add(&p->trims, 1);
		*low = free_now;
	}
}

static void ticker_main(void *arg)
{
	struct pe_pool *p = arg;
	uint64_t period = (uint64_t)p->tick_ms * 1000000u, due = uv_hrtime() + period;
	uint64_t trim_due = uv_hrtime() + TRIM_EVERY_NS;
	size_t trim_low = 0;
	uv_mutex_lock(&p->lock);
	while (!p->tick_stop) {
		uint64_t now = uv_hrtime();
		if (now < due) {
			uv_cond_timedwait(&p->tick_cv, &p->lock, due - now);
			continue;
		}
		uv_mutex_unlock(&p->lock);
		p->tick(p->tick_arg);
		if (uv_hrtime() >= trim_due) {
			if (uv_hrtime() > atomic_load(&p->fg_busy_until) + TRIM_QUIET_NS)
				trim_heap(p, &trim_low);
			trim_due = uv_hrtime() + TRIM_EVERY_NS;
		}
		due = uv_hrtime() + period; /* as a repeating uv_timer: no burst after a slow tick */
		uv_mutex_lock(&p->lock);
	}
	uv_mutex_unlock(&p->lock);
}

/* ---- life ---- */

/* Stop and join the first `started` workers and the ticker. */
static void stop_threads(struct pe_pool *p, unsigned started)
{
	uv_mutex_lock(&p->lock);
	p->closed = p->stopping = 1;
	for (struct worker *w; (w = pop_idle(p));)
		wake(w);
	uv_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < started; i++)
		uv_thread_join(&p->workers[i].thread);
	uv_mutex_lock(&p->lock); /* the ticker runs until the last job is done: jobs need its deadlines */
	p->tick_stop = 1;
	uv_cond_signal(&p->tick_cv);
	uv_mutex_unlock(&p->lock);
	if (p->has_ticker)
		uv_thread_join(&p->ticker);
}

static void destroy(struct pe_pool *p)
{
	for (unsigned i = 0; i < p->nworkers; i++)
		uv_cond_destroy(&p->workers[i].wake);
	uv_cond_destroy(&p->tick_cv);
	uv_mutex_destroy(&p->lock);
	free(p->workers);
	free(p);
}

static int start_threads(struct pe_pool *p)
{
	unsigned i = 0;
	while (i < p->nworkers && uv_thread_create(&p->workers[i].thread, worker_main, &p->workers[i]) == 0)
		i++;
	p->has_ticker = i == p->nworkers && p->tick && uv_thread_create(&p->ticker, ticker_main, p) == 0;
	if (i == p->nworkers && (p->has_ticker || !p->tick))
		return 0;
	stop_threads(p, i);
	return PE_EINTERNAL;
}

/* Worker i keeps to the i-th CPU this process may use (round robin), when it may use two or more:
 * a big JSON document's chunks then run on different CPUs from their first microsecond. Left to the
 * scheduler, a woken helper often starts on its waker's CPU and both halves share it for
 * milliseconds. */
static void pin_workers(struct pe_pool *p)
{
	cpu_set_t allowed;
	int ids[CPU_SETSIZE], n = 0;
	if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
		for (int c = 0; c < CPU_SETSIZE; c++)
			if (CPU_ISSET(c, &allowed))
				ids[n++] = c;
	for (unsigned i = 0; i < p->nworkers; i++)
		p->workers[i].cpu = n >= 2 ? ids[i % (unsigned)n] : -1;
}

void pe_pool_set_sched(struct pe_pool *p, int nice, unsigned slice_us)
{
	uv_mutex_lock(&p->lock);
	p->nice = nice;
	p->slice_us = slice_us;
	for (unsigned i = 0; i < p->nworkers; i++)
		if (p->workers[i].tid > 0) /* the others apply it as they start */
			apply_sched(p, p->workers[i].tid);
	uv_mutex_unlock(&p->lock);
}

struct pe_pool *pe_pool_new(unsigned workers, size_t max_queue, void (*tick)(void *), void *tick_arg,
			    unsigned tick_ms, struct pe_err *err)
{
	struct pe_pool *p = calloc(1, sizeof *p);
	if (p && workers && !(p->workers = calloc(workers, sizeof *p->workers))) {
		free(p);
		p = NULL;
	}
	if (!p) {
		pe_err_set(err, PE_ENOMEM, "workers", "out of memory");
		return NULL;
	}
	*p = (struct pe_pool){.workers = p->workers, .nworkers = workers, .max_queue = max_queue, .tick = tick,
			      .tick_arg = tick_arg, .tick_ms = tick_ms ? tick_ms : 1};
	unsigned cpus = uv_available_parallelism(); /* the CPUs this process may run on */
	pin_workers(p);
	p->width = workers < cpus ? workers : cpus;
	int rc = uv_mutex_init(&p->lock) | uv_cond_init(&p->tick_cv);
	for (unsigned i = 0; i < workers; i++) {
		p->workers[i].pool = p;
		rc |= uv_cond_init(&p->workers[i].wake);
	}
	if (rc != 0 || workers == 0 || start_threads(p) != 0) {
		destroy(p);
		pe_err_set(err, PE_EINTERNAL, "workers", "cannot start %u worker threads", workers);
		return NULL;
	}
	return p;
}

static int submit(struct pe_pool *p, void (*work)(void *), void *arg, int heavy)
{
	struct job *j = malloc(sizeof *j);
	if (!j)
		return PE_ENOMEM;
	*j = (struct job){.work = work, .arg = arg, .heavy = heavy};
	struct worker *w = NULL;
	uv_mutex_lock(&p->lock);
	int rc = p->closed ? PE_EDRAINING : atomic_load(&p->queued) >= p->max_queue ? PE_EBUSY : 0;
	if (rc == 0) {
		if (p->tail)
			p->tail->next = j;
		else
			p->head = j;
		p->tail = j;
		atomic_fetch_add(&p->queued, 1);
		atomic_fetch_add(&p->submitted, 1);
		if ((w = pop_idle(p)))
			wake(w);
	}
	uv_mutex_unlock(&p->lock);
	if (rc != 0) {
		atomic_fetch_add(&p->rejected, 1);
		free(j);
	}
	return rc;
}

int pe_pool_submit(struct pe_pool *p, void (*work)(void *), void *arg) { return submit(p, work, arg, 0); }

int pe_pool_submit_heavy(struct pe_pool *p, void (*work)(void *), void *arg) { return submit(p, work, arg, 1); }

void pe_pool_reserve_cpus(struct pe_pool *p, unsigned cpus)
{
	uv_mutex_lock(&p->lock);
	unsigned cap = p->width > cpus ? p->width - cpus : 1;
	p->heavy_cap = cpus && cap < p->nworkers ? cap : 0; /* no reserve, or a cap of every worker: none */
	uv_mutex_unlock(&p->lock);
}

void pe_pool_note_request(struct pe_pool *p) { pe_pool_note_request_at(p, uv_hrtime()); }

int pe_pool_busy_at(struct pe_pool *p, uint64_t now) { return now < atomic_load(&p->fg_busy_until); }

void pe_pool_note_request_at(struct pe_pool *p, uint64_t now)
{
	uint64_t window = now / FG_WINDOW_NS;
	uint_fast64_t seen = atomic_load_explicit(&p->fg_window, memory_order_relaxed);
	/* forward only: a thread that read the clock before another thread's turn must not turn the
	 * window back and zero the newer window's count */
	if (window > seen && atomic_compare_exchange_strong(&p->fg_window, &seen, window))
		atomic_store(&p->fg_count, 0); /* a request or two at the turn may count in either window */
	if (atomic_fetch_add(&p->fg_count, 1) + 1 >= FG_BUSY_REQUESTS)
		atomic_store(&p->fg_busy_until, now + FG_HOLD_NS);
}

void pe_pool_parallel(struct pe_pool *p, size_t n, void (*fn)(void *arg, size_t k), void *arg)
{
	if (n < 2 || p->nworkers < 2) {
		for (size_t k = 0; k < n; k++)
			fn(arg, k);
		return;
	}
	struct task t = {.fn = fn, .arg = arg, .n = n};
	if (uv_cond_init(&t.all_done) != 0) {
		for (size_t k = 0; k < n; k++)
			fn(arg, k);
		return;
	}
	uv_mutex_lock(&p->lock);
	t.older = p->tasks;
	p->tasks = &t;
	struct worker *w;
	for (size_t spare = n - 1; spare > 0 && (w = pop_idle(p)); spare--)
		wake(w);
	while (t.next < t.n) {
		size_t k = t.next++;
		if (t.next == t.n)
			unlink_task(p, &t);
		run_chunk(p, &t, k);
	}
	while (t.done < t.n)
		uv_cond_wait(&t.all_done, &p->lock);
	uv_mutex_unlock(&p->lock);
	uv_cond_destroy(&t.all_done);
}

static void parallel_cb(void *ctx, size_t n, void (*fn)(void *arg, size_t k), void *arg)
{
	pe_pool_parallel(ctx, n, fn, arg);
}

struct pe_parallel pe_pool_parallel_hook(struct pe_pool *p)
{
	return (struct pe_parallel){.run = parallel_cb, .ctx = p, .width = p->width};
}

void pe_pool_count_inline(struct pe_pool *p)
{
	atomic_fetch_add(&p->inlined, 1);
	atomic_fetch_add(&p->submitted, 1);
	atomic_fetch_add(&p->completed, 1);
}

void pe_pool_close(struct pe_pool *p)
{
	uv_mutex_lock(&p->lock);
	p->closed = 1;
	uv_mutex_unlock(&p->lock);
}

void pe_pool_stats(struct pe_pool *p, struct pe_pool_stats *out)
{
	out->submitted = atomic_load(&p->submitted);
	out->completed = atomic_load(&p->completed);
	out->rejected = atomic_load(&p->rejected);
	out->inlined = atomic_load(&p->inlined);
	out->queued = atomic_load(&p->queued);
	out->running = atomic_load(&p->running);
	out->trims = atomic_load(&p->trims);
}

void pe_pool_stop(struct pe_pool *p)
{
	if (!p->joined)
		stop_threads(p, p->nworkers);
	p->joined = 1;
}

void pe_pool_free(struct pe_pool *p)
{
	if (!p)
		return;
	pe_pool_stop(p);
	destroy(p);
}
