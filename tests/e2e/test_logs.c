/* End-to-end tests of request identity and logs: X-Request-Id is echoed (the client's, or one
 * generated), and stdout carries one JSON line per request with its fields, between the start and
 * stop lines. */
#include "support/pe_check.h"
#include "support/pe_daemon.h"

#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct pe_daemon D;

static void start(void) { pe_daemon_start(&D, NULL); }
static void stop(void) { ck_assert_int_eq(pe_daemon_stop(&D, SIGTERM), 0); }

START_TEST(request_id_echoed)
{
	struct pe_resp r;
	char h[128];
	const char *rid[] = {"X-Request-Id: trace-42", NULL};
	/* miss, then hit: both echo the client's id */
	for (int i = 0; i < 2; i++) {
		pe_request(&D, "GET", "/v1/sinusoidal?len=2&dim=2", rid, NULL, 0, &r);
		ck_assert_str_eq(pe_resp_header(&r, "X-Request-Id", h, sizeof h), "trace-42");
		pe_resp_free(&r);
	}
	pe_request(&D, "GET", "/v1/nope", rid, NULL, 0, &r);
	ck_assert_str_eq(pe_resp_header(&r, "X-Request-Id", h, sizeof h), "trace-42");
	pe_resp_free(&r);
	/* without one, a miss carries a generated 16-hex-digit id, different per request */
	char a[64], b[64];
	pe_get(&D, "/v1/sinusoidal?len=3&dim=2", &r);
	ck_assert_ptr_nonnull(pe_resp_header(&r, "X-Request-Id", a, sizeof a));
	ck_assert_uint_eq(strlen(a), 16);
	ck_assert_uint_eq(strspn(a, "0123456789abcdef"), 16);
	pe_resp_free(&r);
	pe_get(&D, "/healthz", &r);
	ck_assert_ptr_nonnull(pe_resp_header(&r, "X-Request-Id", b, sizeof b));
	ck_assert_str_ne(a, b);
	pe_resp_free(&r);
	/* an unusable id (too long) is replaced */
	char longid[120] = "X-Request-Id: ";
	memset(longid + 14, 'x', 90);
	const char *bad[] = {longid, NULL};
	pe_request(&D, "GET", "/healthz", bad, NULL, 0, &r);
	ck_assert_uint_eq(strlen(pe_resp_header(&r, "X-Request-Id", h, sizeof h)), 16);
	pe_resp_free(&r);
}
END_TEST

static json_t *find_request(char *log, const char *rid)
{
	for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n")) {
		json_t *j = json_loads(line, 0, NULL);
		ck_assert_msg(j != NULL, "log line is not JSON: %s", line);
		const char *ev = json_string_value(json_object_get(j, "event"));
		const char *id = json_string_value(json_object_get(j, "request_id"));
		if (ev && !strcmp(ev, "request") && id && !strcmp(id, rid))
			return j;
		json_decref(j);
	}
	return NULL;
}

START_TEST(one_json_line_per_request)
{
	struct pe_resp r;
	const char *rid[] = {"X-Request-Id: line-1", NULL};
	pe_request(&D, "GET", "/v1/sinusoidal?len=4&dim=4&format=bin&offset=9", rid, NULL, 0, &r);
	ck_assert_int_eq(r.status, 200);
	pe_resp_free(&r);
	const char *rid2[] = {"X-Request-Id: line-2", NULL};
	pe_request(&D, "GET", "/v1/sinusoidal?len=4", rid2, NULL, 0, &r);
	pe_resp_free(&r);
	usleep(600000); /* access lines are flushed every 250 ms */
	char *log = pe_daemon_log(&D);
	ck_assert(strstr(log, "\"event\":\"start\"") != NULL);
	char *copy = strdup(log);
	json_t *j = find_request(copy, "line-1");
	ck_assert_msg(j != NULL, "no request line for line-1 in: %s", log);
	ck_assert_str_eq(json_string_value(json_object_get(j, "method")), "GET");
	ck_assert_str_eq(json_string_value(json_object_get(j, "path")), "/v1/sinusoidal?len=4&dim=4&format=bin&offset=9");
	ck_assert_int_eq(json_integer_value(json_object_get(j, "status")), 200);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "bytes")), 64);
	ck_assert_str_eq(json_string_value(json_object_get(j, "cache")), "miss");
	ck_assert(json_real_value(json_object_get(j, "duration_ms")) >= 0);
	ck_assert_ptr_nonnull(json_string_value(json_object_get(j, "time")));
	json_decref(j);
	strcpy(copy, log);
	j = find_request(copy, "line-2");
	ck_assert_ptr_nonnull(j);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "status")), 400);
	ck_assert_int_gt(json_integer_value(json_object_get(j, "bytes")), 0);
	json_decref(j);
	free(copy);
	free(log);
}
END_TEST

/* The logged path is the target as parsed: path, then each argument (a key without '=' stays
 * bare), cut at 511 bytes. */
START_TEST(logged_path_is_cut_at_511_bytes)
{
	char target[800] = "/v1/sinusoidal?flag&len=4&zzz=", want[512];
	size_t n = strlen(target);
	memset(target + n, 'a', 600);
	target[n + 600] = 0;
	memcpy(want, target, 511);
	want[511] = 0;
	const char *rid[] = {"X-Request-Id: line-3", NULL};
	struct pe_resp r;
	pe_request(&D, "GET", target, rid, NULL, 0, &r);
	ck_assert_int_eq(r.status, 400);
	pe_resp_free(&r);
	usleep(600000); /* access lines are flushed every 250 ms */
	char *log = pe_daemon_log(&D);
	json_t *j = find_request(log, "line-3");
	ck_assert_ptr_nonnull(j);
	ck_assert_str_eq(json_string_value(json_object_get(j, "path")), want);
	json_decref(j);
	free(log);
}
END_TEST

static Suite *logs_suite(void)
{
	Suite *s = suite_create("e2e_logs");
	TCase *tc = tcase_create("logs");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, start, stop);
	tcase_add_test(tc, request_id_echoed);
	tcase_add_test(tc, one_json_line_per_request);
	tcase_add_test(tc, logged_path_is_cut_at_511_bytes);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(logs_suite)
