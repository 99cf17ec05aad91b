/* Failing a pending key with the computation's pe_err (src/cache/lru.c, pe_cache_fail_err): every
 * waiter, the one that computes included, gets the error code and a reference to one failed entry
 * carrying a copy of that pe_err (code, param, detail), which outlives the caller's and goes with
 * the last reference; nothing is stored, the key is a miss again; a failure that is no error code
 * becomes PE_EINTERNAL; strings that fill their arrays come back terminated. ASan (make asan)
 * checks that the copy is freed exactly once. */
#include "posenc/cache.h"
#include "posenc/err.h"
#include "support/pe_check.h"

#include <string.h>

struct rec {
	int calls, code;
	struct pe_cache_entry *e;
};

static void record(void *arg, struct pe_cache_entry *e, int code)
{
	struct rec *r = arg;
	r->calls++;
	r->e = e;
	r->code = code;
}

START_TEST(every_waiter_gets_the_job_error)
{
	struct pe_cache *c = pe_cache_new(1 << 20);
	struct pe_cache_entry *e;
	struct rec owner = {0}, w[3] = {{0}};
	ck_assert_int_eq(pe_cache_acquire(c, "k", 1, record, &owner, &e), PE_CACHE_MISS);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(pe_cache_acquire(c, "k", 1, record, &w[i], &e), PE_CACHE_WAIT);
	struct pe_err err = {0};
	pe_err_set(&err, PE_EINVAL, "dtype", "the dot products reach beyond what %s can hold", "f16");
	pe_cache_fail_err(c, "k", 1, &err);
	memset(&err, 0x55, sizeof err); /* the cache kept its own copy */
	struct rec *all[] = {&owner, &w[0], &w[1], &w[2]};
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(all[i]->calls, 1);
		ck_assert_int_eq(all[i]->code, PE_EINVAL);
		ck_assert_ptr_nonnull(all[i]->e);
		ck_assert_ptr_eq(all[i]->e, owner.e); /* one failed entry, one reference each */
		const struct pe_err *got = pe_cache_entry_err(all[i]->e);
		ck_assert_ptr_nonnull(got);
		ck_assert_int_eq(got->code, PE_EINVAL);
		ck_assert_str_eq(got->param, "dtype");
		ck_assert_str_eq(got->detail, "the dot products reach beyond what f16 can hold");
	}
	struct pe_cache_stats s;
	pe_cache_stats(c, &s);
	ck_assert_uint_eq(s.pending, 0);
	ck_assert_uint_eq(s.entries, 0);
	ck_assert_uint_eq(s.bytes, 0);
	/* released one by one; the last one frees the copy (ASan: no leak, no double free) */
	for (int i = 0; i < 4; i++)
		pe_cache_release(all[i]->e);
	/* nothing stored: the next request computes again */
	struct rec again = {0};
	ck_assert_int_eq(pe_cache_acquire(c, "k", 1, record, &again, &e), PE_CACHE_MISS);
	pe_cache_fail(c, "k", 1, PE_EIO);
	ck_assert_int_eq(again.code, PE_EIO);
	ck_assert_ptr_null(again.e);
	pe_cache_free(c);
}
END_TEST

/* A ready entry's pe_cache_entry_err is NULL: it is no failure. */
START_TEST(ready_entry_is_no_failure)
{
	struct pe_cache *c = pe_cache_new(1 << 20);
	static char value[] = "v";
	ck_assert_int_eq(pe_cache_fill(c, "k", 1, value, 1, NULL), 0);
	struct pe_cache_entry *e = pe_cache_get(c, "k", 1);
	ck_assert_ptr_nonnull(e);
	ck_assert_ptr_null(pe_cache_entry_err(e));
	ck_assert_ptr_null(pe_cache_entry_err(NULL));
	pe_cache_release(e);
	pe_cache_free(c);
}
END_TEST

/* A code that is no error becomes PE_EINTERNAL, in the callback and the copy; full arrays are cut
 * and terminated. */
START_TEST(copy_is_an_error_and_bounded)
{
	struct pe_cache *c = pe_cache_new(1 << 20);
	struct pe_cache_entry *e;
	struct rec r = {0};
	ck_assert_int_eq(pe_cache_acquire(c, "k", 1, record, &r, &e), PE_CACHE_MISS);
	struct pe_err err;
	memset(&err, 'x', sizeof err);
	err.code = 0;
	pe_cache_fail_err(c, "k", 1, &err);
	ck_assert_int_eq(r.calls, 1);
	ck_assert_int_eq(r.code, PE_EINTERNAL);
	const struct pe_err *got = pe_cache_entry_err(r.e);
	ck_assert_ptr_nonnull(got);
	ck_assert_int_eq(got->code, PE_EINTERNAL);
	ck_assert_uint_eq(strlen(got->param), PE_ERR_PARAM_MAX - 1);
	ck_assert_uint_eq(strlen(got->detail), PE_ERR_DETAIL_MAX - 1);
	pe_cache_release(r.e);
	pe_cache_free(c);
}
END_TEST

/* No computation under way: nothing happens (a ready entry stays); a pending key without waiters
 * (acquired with cb NULL) is just removed. */
START_TEST(nothing_pending)
{
	struct pe_cache *c = pe_cache_new(1 << 20);
	struct pe_err err = {0};
	pe_err_set(&err, PE_EIO, "", "damaged");
	pe_cache_fail_err(c, "none", 4, &err);
	static char value[] = "v";
	ck_assert_int_eq(pe_cache_fill(c, "k", 1, value, 1, NULL), 0);
	pe_cache_fail_err(c, "k", 1, &err);
	struct pe_cache_entry *e = pe_cache_get(c, "k", 1);
	ck_assert_ptr_nonnull(e);
	pe_cache_release(e);
	ck_assert_int_eq(pe_cache_acquire(c, "p", 1, NULL, NULL, &e), PE_CACHE_MISS);
	pe_cache_fail_err(c, "p", 1, &err);
	struct pe_cache_stats s;
	pe_cache_stats(c, &s);
	ck_assert_uint_eq(s.pending, 0);
	ck_assert_int_eq(pe_cache_acquire(c, "p", 1, NULL, NULL, &e), PE_CACHE_MISS);
	pe_cache_fail(c, "p", 1, PE_EIO);
	pe_cache_free(c);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("lru_fail_err");
	TCase *tc = tcase_create("fail_err");
	tcase_add_test(tc, every_waiter_gets_the_job_error);
	tcase_add_test(tc, ready_entry_is_no_failure);
	tcase_add_test(tc, copy_is_an_error_and_bounded);
	tcase_add_test(tc, nothing_pending);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
