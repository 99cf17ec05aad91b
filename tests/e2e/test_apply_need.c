/* End-to-end: the early size check of POST /v1/rope/apply with a positions part (check_need in
 * src/http/transform.c) is exact for int32 and int64 positions.
 *
 * The check counts the scratch of pe_rope_apply_positions by the number of positions, which the
 * part's npy header gives; it used to guess one position per 4 bytes of the part, so an int64
 * part (8 bytes each) counted twice its scratch and was refused with 413 long before it was too
 * big. Here, for the same x and the same positions as int32 and as int64:
 * - the bytes the server says it would hold differ by what the two parts hold (the int64 part's
 *   4 bytes more per position, up to the allocator's rounding), nothing else;
 * - with response_budget_bytes one byte under that figure, 413 naming positions; at exactly it,
 *   200 (the job really fits in the budget it was admitted to). */
#include "support/pe_check.h"
#include "support/pe_daemon.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc/posenc.h"
#include "test_apply_positions_form.h"

#define SEQ 512
#define D 64

/* An f32 npy [1, 1, SEQ, D]; caller frees. */
static char *npy_x(size_t *len)
{
	struct pe_tensor_view v = {.dtype = PE_F32, .shape = {.rank = 4, .dim = {1, 1, SEQ, D}}};
	float *x = malloc(SEQ * D * sizeof *x);
	for (size_t i = 0; i < SEQ * D; i++)
		x[i] = (float)(i % 17) * 0.125f - 1.0f;
	v.data = x;
	struct pe_buf b;
	pe_buf_init(&b, (size_t)1 << 30);
	ck_assert_int_eq(pe_npy_write(&b, &v, NULL), 0);
	free(x);
	return pe_buf_steal(&b, len);
}

/* POST x and SEQ positions (int64 when wide) to a daemon with this response budget. */
static void post(const char *budget, int wide, struct pe_resp *r)
{
	const char *args[] = {"--response-budget-bytes", budget, "--cache-bytes", "0", NULL};
	struct pe_daemon d;
	pe_daemon_start(&d, args);
	int64_t pos[SEQ];
	for (size_t i = 0; i < SEQ; i++)
		pos[i] = (int64_t)(i * 7 % SEQ);
	size_t xlen, plen, ps[] = {SEQ}, blen;
	char *x = npy_x(&xlen), *p = npy_ints(pos, ps, 1, wide, &plen);
	struct form_part parts[] = {{"x", "application/x-npy", x, xlen}, {"positions", "application/x-npy", p, plen}};
	char *body = form_body(parts, 2, &blen);
	pe_request(&d, "POST", "/v1/rope/apply?format=npy", form_headers, body, blen, r);
	free(body);
	free(x);
	free(p);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}

/* The bytes a 413 says the transform would hold. */
static unsigned long long held_of(const struct pe_resp *r)
{
	pe_assert_problem(r, 413, "positions");
	const char *at = strstr(r->body, "hold up to ");
	ck_assert_ptr_nonnull(at);
	return strtoull(at + 11, NULL, 10);
}

static unsigned long long need_of(int wide)
{
	struct pe_resp r;
	post("1Mi", wide, &r); /* holds the parts, not the positions' scratch */
	unsigned long long n = held_of(&r);
	pe_resp_free(&r);
	return n;
}

static void at_the_limit(int wide, unsigned long long need)
{
	char b[32];
	struct pe_resp r;
	snprintf(b, sizeof b, "%llu", need - 1);
	post(b, wide, &r);
	ck_assert_uint_eq(held_of(&r), need);
	pe_resp_free(&r);
	snprintf(b, sizeof b, "%llu", need);
	post(b, wide, &r);
	ck_assert_msg(r.status == 200, "%s positions, budget %s: %ld %s", wide ? "int64" : "int32", b, r.status, r.body);
	pe_resp_free(&r);
}

START_TEST(int32_and_int64_alike)
{
	unsigned long long n32 = need_of(0), n64 = need_of(1);
	/* the int64 part holds 4 bytes more per position; malloc rounds each block to 16 */
	long long extra = (long long)(n64 - n32) - 4 * SEQ;
	ck_assert_msg(extra > -32 && extra < 32, "int32 needs %llu, int64 %llu: %lld bytes beyond the part's own",
		      n32, n64, extra);
}
END_TEST

START_TEST(int32_limit)
{
	at_the_limit(0, need_of(0));
}
END_TEST

START_TEST(int64_limit)
{
	at_the_limit(1, need_of(1));
}
END_TEST

static Suite *apply_need_suite(void)
{
	Suite *s = suite_create("e2e_apply_need");
	TCase *tc = tcase_create("need");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, int32_and_int64_alike);
	tcase_add_test(tc, int32_limit);
	tcase_add_test(tc, int64_limit);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(apply_need_suite)
