/* End-to-end: POST /v1/rope/apply checks its positions whatever x's shape, a zero-length axis
 * included. Positions out of range (negative, past 2^52) and M-RoPE rows with a negative entry are
 * a 400 naming positions for an empty x exactly as for a non-empty one; in-range positions are 200
 * for both. Each case is sent twice, x empty along a batch axis and x non-empty, and both answers
 * must have the same status. */
#include "support/pe_check.h"
#include "support/pe_daemon.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc/posenc.h"
#include "test_apply_positions_form.h"

struct pos_case {
	const char *what;
	const char *query;
	int64_t pos[6];
	size_t pshape[2];
	int prank;
	long status;
};

static const struct pos_case cases[] = {
	{"in range", "format=bin", {0, 1}, {2}, 1, 200},
	{"a negative position", "format=bin", {-5, 1}, {2}, 1, 400},
	{"a position of 2^62", "format=bin", {(int64_t)1 << 62, 1}, {2}, 1, 400},
	{"M-RoPE in range", "format=bin&mrope_section=4,2,2", {0, 1, 0, 1, 0, 1}, {3, 2}, 2, 200},
	{"M-RoPE with a row of -7", "format=bin&mrope_section=4,2,2", {0, 1, -7, 1, 0, 1}, {3, 2}, 2, 400},
};

/* x [batch, 2, 16] (seq 2 on axis -2) with these positions: the answer's status. */
static long post(const struct pe_daemon *d, const struct pos_case *c, size_t batch)
{
	size_t xshape[] = {batch, 2, 16}, xlen, plen, blen;
	char *x = npy_reals(PE_F32, xshape, 3, &xlen), *p = npy_ints(c->pos, c->pshape, c->prank, 1, &plen), url[256];
	struct form_part parts[] = {{"x", "application/x-npy", x, xlen}, {"positions", "application/x-npy", p, plen}};
	char *body = form_body(parts, 2, &blen);
	struct pe_resp r;
	snprintf(url, sizeof url, "/v1/rope/apply?%s", c->query);
	pe_request(d, "POST", url, form_headers, body, blen, &r);
	if (c->status != 200)
		pe_assert_problem(&r, c->status, "positions");
	long status = r.status;
	ck_assert_msg(status == c->status, "%s, batch %zu: %ld %s", c->what, batch, status, r.body);
	pe_resp_free(&r);
	free(body);
	free(p);
	free(x);
	return status;
}

START_TEST(positions_checked_for_every_shape)
{
	struct pe_daemon d;
	pe_daemon_start(&d, NULL);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		ck_assert_int_eq(post(&d, &cases[i], 0), post(&d, &cases[i], 1));
	ck_assert_int_eq(pe_daemon_stop(&d, 15), 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("apply_empty");
	TCase *tc = tcase_create("positions");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, positions_checked_for_every_shape);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
