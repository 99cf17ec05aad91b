/* End-to-end tests of CORS: the default "*" for reads with exposed headers, a listed origin echoed
 * (with Vary: Origin) and an unlisted one refused, preflights for GET and for transforms' POST,
 * and writes to learned tables never opened by a preflight. */
#include "support/pe_check.h"
#include "support/pe_daemon.h"

#include <signal.h>
#include <string.h>

START_TEST(default_star_and_preflight)
{
	struct pe_daemon d;
	pe_daemon_start(&d, NULL);
	struct pe_resp r;
	char h[256];
	const char *origin[] = {"Origin: http://dash.example", NULL};
	pe_request(&d, "GET", "/v1/sinusoidal?len=2&dim=2", origin, NULL, 0, &r);
	ck_assert_str_eq(pe_resp_header(&r, "Access-Control-Allow-Origin", h, sizeof h), "*");
	ck_assert(strstr(pe_resp_header(&r, "Access-Control-Expose-Headers", h, sizeof h), "X-PE-Shape") != NULL);
	ck_assert(strstr(h, "ETag") && strstr(h, "X-PE-Attention-Scaling") && strstr(h, "X-PE-Cache"));
	pe_resp_free(&r);
	const char *pre[] = {"Origin: http://dash.example", "Access-Control-Request-Method: GET", NULL};
	pe_request(&d, "OPTIONS", "/v1/sinusoidal", pre, NULL, 0, &r);
	ck_assert_int_eq(r.status, 204);
	ck_assert_str_eq(pe_resp_header(&r, "Access-Control-Allow-Origin", h, sizeof h), "*");
	ck_assert(strstr(pe_resp_header(&r, "Access-Control-Allow-Methods", h, sizeof h), "GET") != NULL);
	ck_assert(strstr(pe_resp_header(&r, "Access-Control-Allow-Headers", h, sizeof h), "If-None-Match") != NULL);
	pe_resp_free(&r);
	const char *post[] = {"Origin: http://dash.example", "Access-Control-Request-Method: POST", NULL};
	pe_request(&d, "OPTIONS", "/v1/rope/apply", post, NULL, 0, &r);
	pe_resp_free(&r);
	pe_request(&d, "OPTIONS", "/v1/alibi/apply", post, NULL, 0, &r);
	ck_assert_int_eq(r.status, 204);
	ck_assert(strstr(pe_resp_header(&r, "Access-Control-Allow-Methods", h, sizeof h), "POST") != NULL);
	pe_resp_free(&r);
	const char *put[] = {"Origin: http://dash.example", "Access-Control-Request-Method: PUT", NULL};
	pe_request(&d, "OPTIONS", "/v1/learned/table", put, NULL, 0, &r);
	ck_assert_int_eq(r.status, 204);
	ck_assert_ptr_null(pe_resp_header(&r, "Access-Control-Allow-Origin", h, sizeof h));
	ck_assert(strstr(pe_resp_header(&r, "Allow", h, sizeof h), "PUT") != NULL);
	pe_resp_free(&r);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

START_TEST(listed_origins)
{
	struct pe_daemon d;
	const char *args[] = {"--cors-origins", "http://a.example, http://b.example", NULL};
	pe_daemon_start(&d, args);
	struct pe_resp r;
	char h[128];
	const char *b[] = {"Origin: http://b.example", NULL};
	double cached = 0;
	for (int i = 0; i < 3; i++) { /* miss, then hits: all answer per origin */
		pe_request(&d, "GET", "/v1/sinusoidal?len=2&dim=2", b, NULL, 0, &r);
		ck_assert_str_eq(pe_resp_header(&r, "Access-Control-Allow-Origin", h, sizeof h), "http://b.example");
		ck_assert(strstr(r.headers, "Vary: Origin") != NULL);
		pe_resp_free(&r);
		/* no shared response is ever built for a hit here, so none is counted in the cache */
		double now = pe_metric(&d, "posenc_cache_bytes");
		ck_assert_msg(i == 0 || now == cached, "cache bytes %.0f after hit %d, %.0f after the miss", now, i, cached);
		cached = now;
	}
	const char *c[] = {"Origin: http://c.example", NULL};
	pe_request(&d, "GET", "/v1/sinusoidal?len=2&dim=2", c, NULL, 0, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_ptr_null(pe_resp_header(&r, "Access-Control-Allow-Origin", h, sizeof h));
	pe_resp_free(&r);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

static Suite *cors_suite(void)
{
	Suite *s = suite_create("e2e_cors");
	TCase *tc = tcase_create("cors");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, default_star_and_preflight);
	tcase_add_test(tc, listed_origins);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(cors_suite)
