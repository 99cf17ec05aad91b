/* End-to-end: the multipart/form-data refusals of POST /v1/rope/apply reach the client as RFC 9457
 * problems naming the part (the reader itself is tested in tests/http/test_multipart.c):
 * an empty x and then an x (MHD reports both parts from offset 0: they used to be taken as one
 * x), an x and then an empty x, positions twice with one empty, an unknown part, and a part
 * whose Content-Type the handler does not take (the detail says which it takes). */
#include "support/pe_check.h"
#include "support/pe_daemon.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc/posenc.h"
#include "test_apply_positions_form.h"

/* An f32 npy [1, 1, 4, 8]; caller frees. */
static char *npy_x(size_t *len)
{
	struct pe_tensor_view v = {.dtype = PE_F32, .shape = {.rank = 4, .dim = {1, 1, 4, 8}}};
	float x[32];
	for (size_t i = 0; i < 32; i++)
		x[i] = (float)i * 0.0625f;
	v.data = x;
	struct pe_buf b;
	pe_buf_init(&b, 1 << 20);
	ck_assert_int_eq(pe_npy_write(&b, &v, NULL), 0);
	return pe_buf_steal(&b, len);
}

static void expect(const struct pe_daemon *d, const struct form_part *parts, size_t n, const char *param,
		   const char *says)
{
	size_t len;
	char *body = form_body(parts, n, &len);
	struct pe_resp r;
	pe_request(d, "POST", "/v1/rope/apply?format=bin", form_headers, body, len, &r);
	pe_assert_problem(&r, 400, param);
	ck_assert_msg(strstr(r.body, says) != NULL, "the problem should say \"%s\": %s", says, r.body);
	pe_resp_free(&r);
	free(body);
}

START_TEST(parts_refused_by_name)
{
	struct pe_daemon d;
	pe_daemon_start(&d, NULL);
	size_t xlen, plen, ps[] = {4};
	int64_t pos[] = {0, 1, 2, 3};
	char *x = npy_x(&xlen), *p = npy_ints(pos, ps, 1, 0, &plen);
	const struct form_part empty_then_x[] = {{"x", NULL, "", 0}, {"x", NULL, x, xlen}, {"positions", NULL, p, plen}};
	const struct form_part x_then_empty[] = {{"x", NULL, x, xlen}, {"x", NULL, "", 0}, {"positions", NULL, p, plen}};
	const struct form_part pos_twice[] = {{"positions", NULL, "", 0}, {"x", NULL, x, xlen}, {"positions", NULL, p, plen}};
	const struct form_part unknown[] = {{"x", NULL, x, xlen}, {"q", NULL, "", 0}};
	const struct form_part png[] = {{"x", "image/png", x, xlen}, {"positions", NULL, p, plen}};
	const struct form_part json_pos[] = {{"x", NULL, x, xlen}, {"positions", "application/json", p, plen}};
	expect(&d, empty_then_x, 3, "x", "given twice");
	expect(&d, x_then_empty, 3, "x", "given twice");
	expect(&d, pos_twice, 3, "positions", "given twice");
	expect(&d, unknown, 2, "q", "unexpected part");
	expect(&d, png, 2, "x", "application/x-npy, application/octet-stream, application/json, text/plain");
	expect(&d, json_pos, 2, "positions", "application/x-npy, application/octet-stream");
	const struct form_part ok[] = {{"x", "application/x-npy", x, xlen}, {"positions", "application/octet-stream", p, plen}};
	size_t len;
	char *body = form_body(ok, 2, &len);
	struct pe_resp r;
	pe_request(&d, "POST", "/v1/rope/apply?format=bin", form_headers, body, len, &r);
	ck_assert_msg(r.status == 200 && r.len == 32 * 4, "a good form: %ld %s", r.status, r.body);
	pe_resp_free(&r);
	free(body);
	free(x);
	free(p);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

static Suite *apply_form_parts_suite(void)
{
	Suite *s = suite_create("e2e_apply_form_parts");
	TCase *tc = tcase_create("parts");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, parts_refused_by_name);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(apply_form_parts_suite)
