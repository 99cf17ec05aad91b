/* End-to-end tests of the leniencies of issue 21 item 8: a CORS preflight matches the requested
 * method exactly against the allowed list ("OST," or "EAD" are not methods) and answers 404 on
 * paths that do not exist; with a list of origins every cacheable response says Vary: Origin,
 * whether or not the request had a listed Origin (also 304s and cache hits); and
 * "Accept: application/json;q=0, *\/\*" never gets JSON. */
#include "support/pe_check.h"
#include "support/pe_daemon.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

static void preflight(const struct pe_daemon *d, const char *path, const char *method, struct pe_resp *r)
{
	char acrm[96];
	snprintf(acrm, sizeof acrm, "Access-Control-Request-Method: %s", method);
	const char *hs[] = {"Origin: http://dash.example", acrm, NULL};
	pe_request(d, "OPTIONS", path, hs, NULL, 0, r);
}

START_TEST(preflight_matches_methods_exactly)
{
	struct pe_daemon d;
	pe_daemon_start(&d, NULL);
	struct pe_resp r;
	char h[256];
	static const struct {
		const char *path, *method;
		int allowed;
	} cases[] = {
		{"/v1/rope/apply", "POST", 1},   {"/v1/rope/apply", "OST,", 0},  {"/v1/rope/apply", "POST, OPTIONS", 0},
		{"/v1/rope/apply", "GET", 0},    {"/v1/sinusoidal", "GET", 1},   {"/v1/sinusoidal", "HEAD", 1},
		{"/v1/sinusoidal", "EAD", 0},    {"/v1/sinusoidal", "get", 0},   {"/v1/sinusoidal", "GET, HEAD", 0},
		{"/v1/sinusoidal", "POST", 0},   {"/v1/learned/t", "PUT", 0},    {"/v1/learned/t", "GET", 1},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		preflight(&d, cases[i].path, cases[i].method, &r);
		ck_assert_msg(r.status == 204, "OPTIONS %s (%s): %ld", cases[i].path, cases[i].method, r.status);
		const char *acao = pe_resp_header(&r, "Access-Control-Allow-Origin", h, sizeof h);
		ck_assert_msg((acao != NULL) == cases[i].allowed, "OPTIONS %s for \"%s\": Allow-Origin %s", cases[i].path,
			      cases[i].method, acao ? acao : "(none)");
		pe_resp_free(&r);
	}
	static const char *const unknown[] = {"/v1/nothing", "/nowhere", "/v1/sinusoidal/", "/v1/rope/apply/x"};
	for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
		preflight(&d, unknown[i], "GET", &r);
		ck_assert_msg(r.status == 404, "OPTIONS %s: %ld", unknown[i], r.status);
		pe_assert_problem(&r, 404, NULL);
		pe_resp_free(&r);
	}
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

static int vary_origin(const struct pe_resp *r)
{
	for (const char *p = r->headers; (p = strstr(p, "\nVary:")) != NULL; p++) {
		const char *eol = strchr(p + 1, '\n');
		const char *o = strstr(p, "Origin");
		if (o && (!eol || o < eol))
			return 1;
	}
	return 0;
}

START_TEST(vary_origin_with_a_list)
{
	struct pe_daemon d;
	const char *args[] = {"--cors-origins", "http://a.example", NULL};
	pe_daemon_start(&d, args);
	struct pe_resp r;
	char etag[128], h[128];
	const char *none[] = {NULL};
	const char *other[] = {"Origin: http://c.example", NULL};
	const char *listed[] = {"Origin: http://a.example", NULL};
	const char *const *who[] = {none, other, listed};
	for (int round = 0; round < 2; round++) /* a miss, then cache hits */
		for (int k = 0; k < 3; k++) {
			pe_request(&d, "GET", "/v1/sinusoidal?len=4&dim=8", who[k], NULL, 0, &r);
			ck_assert_int_eq(r.status, 200);
			ck_assert_msg(vary_origin(&r), "round %d, origin case %d: no Vary: Origin in\n%s", round, k, r.headers);
			ck_assert(pe_resp_header(&r, "ETag", etag, sizeof etag) != NULL);
			pe_resp_free(&r);
		}
	char inm[160];
	snprintf(inm, sizeof inm, "If-None-Match: %s", etag);
	const char *cond[] = {inm, NULL};
	pe_request(&d, "GET", "/v1/sinusoidal?len=4&dim=8", cond, NULL, 0, &r);
	ck_assert_int_eq(r.status, 304);
	ck_assert_msg(vary_origin(&r), "304 without Vary: Origin:\n%s", r.headers);
	pe_resp_free(&r);
	pe_request(&d, "GET", "/v1", none, NULL, 0, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert(vary_origin(&r));
	pe_resp_free(&r);
	/* and an empty list (no CORS) adds none */
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
	const char *off[] = {"--cors-origins", "", NULL};
	pe_daemon_start(&d, off);
	pe_request(&d, "GET", "/v1/sinusoidal?len=4&dim=8", listed, NULL, 0, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert(!vary_origin(&r));
	ck_assert_ptr_null(pe_resp_header(&r, "Access-Control-Allow-Origin", h, sizeof h));
	pe_resp_free(&r);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

START_TEST(accept_q_zero)
{
	struct pe_daemon d;
	pe_daemon_start(&d, NULL);
	struct pe_resp r;
	char h[128];
	const char *no_json[] = {"Accept: application/json;q=0, */*", NULL};
	pe_request(&d, "GET", "/v1/sinusoidal?len=4&dim=8", no_json, NULL, 0, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_ne(pe_resp_header(&r, "Content-Type", h, sizeof h), "application/json");
	pe_resp_free(&r);
	const char *nothing[] = {"Accept: application/json;q=0", NULL};
	pe_request(&d, "GET", "/v1/sinusoidal?len=4&dim=8", nothing, NULL, 0, &r);
	ck_assert_int_eq(r.status, 406);
	pe_resp_free(&r);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

static Suite *preflight_suite(void)
{
	Suite *s = suite_create("e2e_preflight");
	TCase *tc = tcase_create("preflight");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, preflight_matches_methods_exactly);
	tcase_add_test(tc, vary_origin_with_a_list);
	tcase_add_test(tc, accept_q_zero);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(preflight_suite)
