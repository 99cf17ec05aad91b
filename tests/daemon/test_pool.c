/* Unit tests of the libuv worker pool: every accepted job runs exactly once on a worker thread,
 * admission stops at max_queue with PE_EBUSY, close refuses with PE_EDRAINING, the tick runs,
 * and free runs what was accepted before returning. */
#include "support/pe_check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "daemon/pool.h"

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

static void tick_cb(void *arg) { atomic_fetch_add(&ticks, 1); }

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
	pe_pool_free(p); /* runs what was accepted */
	ck_assert_int_eq(atomic_load(&ran), 200);
	for (int i = 0; i < 200; i++)
		ck_assert_int_eq(atomic_load(&per[i]), 1);
	ck_assert_int_eq(atomic_load(&on_main), 0);
}
END_TEST

START_TEST(admission_and_close)
{
	struct pe_err err = {0};
	atomic_store(&ran, 0);
	atomic_store(&gate, 0);
	struct pe_pool *p = pe_pool_new(1, 2, NULL, NULL, 50, &err);
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(pe_pool_submit(p, blocking_job, NULL), 0);
	/* wait until the first job occupies the only worker */
	struct pe_pool_stats s;
	for (int i = 0; i < 2000; i++) {
		pe_pool_stats(p, &s);
		if (s.running == 1)
			break;
		usleep(1000);
	}
	ck_assert_uint_eq(s.running, 1);
	ck_assert_int_eq(pe_pool_submit(p, blocking_job, NULL), 0);
	ck_assert_int_eq(pe_pool_submit(p, blocking_job, NULL), 0);
	ck_assert_int_eq(pe_pool_submit(p, blocking_job, NULL), PE_EBUSY);
	pe_pool_stats(p, &s);
	ck_assert_uint_eq(s.queued, 2);
	ck_assert_uint_eq(s.rejected, 1);
	ck_assert_uint_eq(s.submitted, 3);
	pe_pool_close(p);
	ck_assert_int_eq(pe_pool_submit(p, blocking_job, NULL), PE_EDRAINING);
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

static Suite *pool_suite(void)
{
	Suite *s = suite_create("pool");
	TCase *tc = tcase_create("pool");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, runs_every_job_once);
	tcase_add_test(tc, admission_and_close);
	tcase_add_test(tc, tick_runs);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(pool_suite)
