/* Cancellation of computations in progress: a per-thread deadline (the job's, set by whoever runs
 * it on a worker) and one process-wide flag (shutdown). Long kernels call pe_cancelled() between
 * blocks of work, never inside one, so a check costs one clock read per block (vDSO, ~20 ns).
 * Thread-local because a worker runs one job at a time and the tables' compute functions have no
 * room for a context argument; pe_table_compute and pe_transform_apply check it on entry, so a
 * job started after pe_cancel_all() fails at once. */
#include "posenc/core.h"

#include <stdatomic.h>
#include <time.h>

static _Thread_local double thread_deadline; /* CLOCK_MONOTONIC seconds; 0: none */
static atomic_int cancel_all;

double pe_monotonic(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void pe_cancel_set_deadline(double deadline) { thread_deadline = deadline; }

double pe_cancel_deadline(void) { return thread_deadline; }

void pe_cancel_all(void) { atomic_store(&cancel_all, 1); }

int pe_cancelled(void)
{
	if (atomic_load_explicit(&cancel_all, memory_order_relaxed))
		return PE_EDRAINING;
	if (thread_deadline > 0 && pe_monotonic() > thread_deadline)
		return PE_ETIMEOUT;
	return 0;
}

int pe_cancel_err(int code, struct pe_err *err)
{
	return pe_err_set(err, code, "",
			  code == PE_EDRAINING ? "the service is shutting down; the computation was stopped"
					       : "the computation was stopped at job_timeout");
}
