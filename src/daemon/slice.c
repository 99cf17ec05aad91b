/* Scheduler slice hints (see slice.h). glibc 2.36 has no sched_setattr wrapper, so the two system
 * calls are made directly with the kernel's struct sched_attr (linux/sched/types.h). For an
 * ordinary (SCHED_OTHER) thread the kernel reads sched_runtime as its requested slice since
 * Linux 6.12, and reports it back from sched_getattr; older kernels ignore it. */
#include "daemon/slice.h"

#include <linux/sched/types.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int get_attr(pid_t tid, struct sched_attr *a)
{
	memset(a, 0, sizeof *a);
	return (int)syscall(SYS_sched_getattr, tid, a, (unsigned)sizeof *a, 0u);
}

int pe_slice_set(pid_t tid, unsigned us)
{
	struct sched_attr a;
	if (get_attr(tid, &a) != 0)
		return -1;
	a.size = sizeof a;
	a.sched_flags = 0;            /* policy and nice as read: only the slice changes */
	a.sched_runtime = (__u64)us * 1000u; /* nanoseconds */
	return syscall(SYS_sched_setattr, tid, &a, 0u) == 0 ? 0 : -1;
}

unsigned pe_slice_get(pid_t tid)
{
	struct sched_attr a;
	if (get_attr(tid, &a) != 0)
		return 0;
	return (unsigned)(a.sched_runtime / 1000u);
}
