/* The worker pool: a libuv loop on its own thread feeding uv_queue_work (UV_THREADPOOL_SIZE =
 * workers), with admission control (libuv's queue is unbounded; ours stops at max_queue) and a
 * periodic tick on the loop thread. pe_pool_submit is the only entry point other threads use. */
#ifndef PE_DAEMON_POOL_H
#define PE_DAEMON_POOL_H

#include <stddef.h>
#include <stdint.h>
#include "posenc/err.h"

struct pe_pool;

struct pe_pool_stats {
	uint64_t submitted, completed, rejected;
	size_t queued;  /* accepted, not yet started */
	size_t running; /* on a worker now */
};

/* tick(tick_arg) runs on the loop thread every tick_ms (tick may be NULL). NULL on failure. */
struct pe_pool *pe_pool_new(unsigned workers, size_t max_queue, void (*tick)(void *), void *tick_arg,
			    unsigned tick_ms, struct pe_err *err);
/* Run work(arg) on a worker. 0, PE_EBUSY when max_queue jobs are waiting, PE_EDRAINING after
 * pe_pool_close. Thread-safe. */
int pe_pool_submit(struct pe_pool *p, void (*work)(void *), void *arg);
/* Refuse new jobs from now on; accepted ones still run. */
void pe_pool_close(struct pe_pool *p);
void pe_pool_stats(struct pe_pool *p, struct pe_pool_stats *out);
/* Run what was accepted to completion, stop the loop thread, free. At shutdown the caller first
 * calls pe_cancel_all() (posenc/core.h): running kernels then stop at their next check and jobs
 * still queued fail as they start, so this join takes moments, not the queue's work. */
void pe_pool_free(struct pe_pool *p);

#endif
