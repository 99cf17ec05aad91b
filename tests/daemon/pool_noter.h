/* For the pool's tests: a thread that notes answered requests (pe_pool_note_request) at a rate
 * that keeps the pool's "HTTP threads busy" on (busy is 32 in 10 ms; this is 40 in every
 * millisecond or so, so a slow machine still makes it; real-time priority where the process may
 * take it, so a loaded machine does not hold the noter off for longer than busy holds). With flaps
 * set, alternately ~5 ms busy and ~40 ms quiet, so busy turns on and off (it holds for 20 ms); and
 * a poll of the running count. test_pool.c and test_pool_attack.c. */
#ifndef PE_TESTS_POOL_NOTER_H
#define PE_TESTS_POOL_NOTER_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <unistd.h>
#include "daemon/pool.h"
#include "support/pe_check.h"

static atomic_int noting, noter_flaps;

static void *noter_main(void *arg)
{
	for (unsigned round = 0; atomic_load(&noting); round++) {
		int quiet = atomic_load(&noter_flaps) && round % 10 >= 5;
		for (int i = 0; i < 40 && !quiet; i++)
			pe_pool_note_request(arg);
		usleep(quiet ? 8000 : 1000);
	}
	return NULL;
}

/* Start noting on p (busy from the first 40), and give it 20 ms to take. */
static inline pthread_t start_noting(struct pe_pool *p, int flaps)
{
	pthread_t t;
	atomic_store(&noter_flaps, flaps);
	atomic_store(&noting, 1);
	ck_assert_int_eq(pthread_create(&t, NULL, noter_main, p), 0);
	struct sched_param sp = {.sched_priority = 1};
	(void)pthread_setschedparam(t, SCHED_FIFO, &sp); /* without CAP_SYS_NICE: the default policy */
	usleep(20000);
	return t;
}

static inline void stop_noting(pthread_t t)
{
	atomic_store(&noting, 0);
	pthread_join(t, NULL);
}

/* Poll p's stats until running reaches want, at most 5 s (bounded; callers assert on the result):
 * how many jobs run. */
static inline size_t poll_running(struct pe_pool *p, size_t want)
{
	struct pe_pool_stats s;
	for (int i = 0; i < 5000; i++) {
		pe_pool_stats(p, &s);
		if (s.running == want)
			break;
		usleep(1000);
	}
	return s.running;
}

#endif
