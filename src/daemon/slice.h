/* Scheduler slice hints (slice.c): how long a thread asks to run before the kernel's fair
 * scheduler (EEVDF, Linux 6.6 and later) may switch to another. A short slice gives a thread an
 * early deadline, so it is picked, and since Linux 6.12 may preempt a longer-sliced one, as soon
 * as it wakes; a long slice lets a thread run on once picked, preempted by shorter-sliced ones.
 * posencd asks for short slices on its HTTP threads and long ones on its workers. */
#ifndef PE_DAEMON_SLICE_H
#define PE_DAEMON_SLICE_H

#include <sys/types.h>

/* The kernel clamps a slice to [PE_SLICE_MIN_US, PE_SLICE_MAX_US]. */
#define PE_SLICE_MIN_US 100u
#define PE_SLICE_MAX_US 100000u

/* Ask for a slice of us microseconds for thread tid (0: the calling thread), keeping its policy
 * and nice. Never needs privileges for a thread of this process. 0 on success; -1 when the
 * kernel refused or keeps no slice for ordinary threads (before 6.12: the request is ignored, and
 * pe_slice_get shows it). Best effort: posencd serves the same without it. */
int pe_slice_set(pid_t tid, unsigned us);
/* Thread tid's slice in microseconds (0: the calling thread), 0 if the kernel does not say. */
unsigned pe_slice_get(pid_t tid);

#endif
