/* The worker pool: the one owner of posencd's compute threads. `workers` threads take jobs from a
 * bounded queue (max_queue; past it submit says PE_EBUSY and the request gets 503), and the same
 * threads help a running job with its parallel parts (pe_pool_parallel: the JSON encoder's rows),
 * so a request never uses more threads than `workers`. A ticker thread calls tick every tick_ms
 * (the HTTP layer's deadline check for waiting requests); it computes nothing.
 *
 * The threads, locks and condition variables are libuv's portable ones (uv_thread_t, uv_mutex_t,
 * uv_cond_t; the ticker waits with uv_cond_timedwait on uv_hrtime's monotonic clock). There is no
 * libuv loop and no libuv threadpool: the pool is ours, so it is sized by `workers` directly and
 * its queue is the bounded one; a submit wakes a sleeping worker itself, with no thread between
 * the HTTP thread and the worker. Helpers are not pinned to CPUs: waking a sleeping worker is as
 * fast as starting a pinned thread. */
#ifndef PE_DAEMON_POOL_H
#define PE_DAEMON_POOL_H

#include <stddef.h>
#include <stdint.h>
#include "posenc/err.h"
#include "posenc/tensor.h"

struct pe_pool;

struct pe_pool_stats {
	uint64_t submitted, completed, rejected; /* inline computations counted in submitted and completed */
	uint64_t inlined; /* computations that ran on the HTTP thread (pe_pool_count_inline) */
	size_t queued;  /* accepted, not yet started */
	size_t running; /* on a worker now */
	uint64_t trims; /* times the ticker handed free heap pages back (pool.c trim_heap) */
};

/* tick(tick_arg) runs on the ticker thread every tick_ms (tick may be NULL: no ticker). NULL with
 * err filled on failure. */
struct pe_pool *pe_pool_new(unsigned workers, size_t max_queue, void (*tick)(void *), void *tick_arg,
			    unsigned tick_ms, struct pe_err *err);
/* Run the workers at this nice value (0..19; Linux nice is per thread): the HTTP thread, at 0,
 * then takes a CPU from a worker the moment a request arrives, so small requests keep their
 * latency while large tables compute. slice_us (0: the kernel's default) is the scheduler slice
 * they ask for (daemon/slice.h): a long one lets a short-sliced HTTP thread preempt them at once.
 * Workers apply both as they start, and running ones at once; best effort (an unprivileged
 * process can raise nice, never lower it). Any thread. */
void pe_pool_set_sched(struct pe_pool *p, int nice, unsigned slice_us);
/* Run work(arg) on a worker. 0, PE_EBUSY when max_queue jobs are waiting, PE_EDRAINING after
 * pe_pool_close, PE_ENOMEM. Thread-safe. */
int pe_pool_submit(struct pe_pool *p, void (*work)(void *), void *arg);
/* The same for a heavy job (a large table): while the HTTP threads are busy it may wait for one of
 * the workers pe_pool_reserve_cpus leaves it, behind light jobs submitted after it. */
int pe_pool_submit_heavy(struct pe_pool *p, void (*work)(void *), void *arg);
/* Leave cpus of the CPUs the workers may use to the HTTP threads while they are busy: heavy jobs,
 * with the helpers of their parallel parts, then run on the rest (at least one). Call before
 * submitting. 0: no reserve (the default). */
void pe_pool_reserve_cpus(struct pe_pool *p, unsigned cpus);
/* A request was answered (the HTTP threads call this for each): how the pool knows they are busy,
 * from the requests of the last 10-20 ms. Lock-free. */
void pe_pool_note_request(struct pe_pool *p);
/* The same at a given uv_hrtime() instant, and whether the HTTP threads count as busy at one:
 * for the pool's tests, which play a clock. */
void pe_pool_note_request_at(struct pe_pool *p, uint64_t now_ns);
int pe_pool_busy_at(struct pe_pool *p, uint64_t now_ns);
/* fn(arg, k) for every k in [0, n), returning when all have returned. The calling thread takes the
 * chunks in order and workers with nothing to do take the next ones as they come free; with none
 * free, the caller runs them all. So a job on every worker calling this at once still finishes, and
 * the threads at work never outnumber the workers (plus a caller that is not one). Any thread. */
void pe_pool_parallel(struct pe_pool *p, size_t n, void (*fn)(void *arg, size_t k), void *arg);
/* The same as a hook for layers below the daemon (the JSON encoder): width is the number of threads
 * that can work at once on this machine (workers, at most the CPUs this process may use). */
struct pe_parallel pe_pool_parallel_hook(struct pe_pool *p);
/* Count a computation that ran elsewhere (on the HTTP thread, too small to be worth a job): it
 * counts as submitted and completed, and as inlined. Thread-safe. */
void pe_pool_count_inline(struct pe_pool *p);
/* Refuse new jobs from now on; accepted ones still run. */
void pe_pool_close(struct pe_pool *p);
void pe_pool_stats(struct pe_pool *p, struct pe_pool_stats *out);
/* Run what was accepted to completion and stop the threads (pe_pool_close's refusals from then
 * on), keeping p: the HTTP threads may still note requests, count and read stats until they stop
 * too (pe_pool_note_request on a freed pool was a use after free at shutdown). Owner's thread. */
void pe_pool_stop(struct pe_pool *p);
/* pe_pool_stop if not yet, then free. At shutdown the caller first calls
 * pe_cancel_all() (posenc/core.h): running kernels then stop at their next check and jobs still
 * queued fail as they start, so this join takes moments, not the queue's work. */
void pe_pool_free(struct pe_pool *p);

#endif
