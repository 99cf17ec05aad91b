/* Hostile request targets: the access log's path is the query as the router read it, so a
 * parameter the router read as one is logged as one ("%26" and "%3D" inside a name or value stay
 * escaped) and a logged "+" or "%" is not mistaken for a space or an escape; an absolute-form
 * target ("http://host/path?query") is answered as its path and query are; a trailing '&' is no
 * parameter, also at the parameter limit; a query refused for its size is logged. */
#include "support/pe_check.h"
#include "support/pe_daemon.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct pe_daemon D;

static void start(void) { pe_daemon_start(&D, NULL); }
static void stop(void) { ck_assert_int_eq(pe_daemon_stop(&D, SIGTERM), 0); }

/* GET target with X-Request-Id rid on its own connection: the status, and the body (a copy to
 * free) when body is not NULL. */
static int exchange(const char *target, const char *rid, char **body)
{
	size_t cap = strlen(target) + 256;
	char *req = malloc(cap), buf[8192];
	int n = snprintf(req, cap, "GET %s HTTP/1.1\r\nHost: x\r\nX-Request-Id: %s\r\nConnection: close\r\n\r\n",
			 target, rid);
	ck_assert(n > 0 && (size_t)n < cap);
	ck_assert_uint_gt(pe_raw_exchange(&D, req, (size_t)n, buf, sizeof buf, 5000), 12);
	free(req);
	char *start = strstr(buf, "\r\n\r\n");
	ck_assert_ptr_nonnull(start);
	if (body)
		*body = strdup(start + 4);
	return atoi(buf + 9);
}

/* The logged path of the request with X-Request-Id rid (a copy to free). */
static char *logged_path(const char *rid)
{
	usleep(600000); /* access lines are flushed every 250 ms */
	char *log = pe_daemon_log(&D), *path = NULL;
	for (char *line = strtok(log, "\n"); line && !path; line = strtok(NULL, "\n")) {
		json_t *j = json_loads(line, 0, NULL);
		const char *id = j ? json_string_value(json_object_get(j, "request_id")) : NULL;
		if (id && !strcmp(id, rid))
			path = strdup(json_string_value(json_object_get(j, "path")));
		json_decref(j);
	}
	free(log);
	ck_assert_msg(path != NULL, "no request line for %s", rid);
	return path;
}

static const struct {
	const char *target, *logged;
	int status;
} cases[] = {
	/* the clean query: logged as sent */
	{"/v1/sinusoidal?len=2&dim=4", "/v1/sinusoidal?len=2&dim=4", 200},
	/* one parameter len="2&dim=4" (400 naming len): not the clean query's line */
	{"/v1/sinusoidal?len=2%26dim=4", "/v1/sinusoidal?len=2%26dim%3D4", 400},
	/* one parameter named "len=2" */
	{"/v1/sinusoidal?len%3D2&dim=4", "/v1/sinusoidal?len%3D2&dim=4", 400},
	/* a '+' read as a space and a "%2B" read as '+' are told apart */
	{"/v1/sinusoidal?len=2&dim=+4", "/v1/sinusoidal?len=2&dim=%204", 400},
	{"/v1/sinusoidal?len=2&dim=%2B4", "/v1/sinusoidal?len=2&dim=%2B4", 400},
	/* a '%' the router left as it was (no escape) is logged as a '%', not as an escape */
	{"/v1/sinusoidal?len=2&dim=4%zz", "/v1/sinusoidal?len=2&dim=4%25zz", 400},
	{"/v1/sinusoidal?len=2%00&dim=4", "/v1/sinusoidal?len=2%2500&dim=4", 400},
	/* a newline and an escape byte stay escaped in the line (the quote is the log's JSON's) */
	{"/v1/sinusoidal?len=2&dim=4&format=%0A%22%1B", "/v1/sinusoidal?len=2&dim=4&format=%0A\"%1B", 400},
	/* a '?' decoded in the path is not logged as the query's start */
	{"/v1/sinus%3Foidal?len=2", "/v1/sinus%3Foidal?len=2", 404},
};

START_TEST(logged_path_reads_as_the_router_read_it)
{
	char rid[32];
	snprintf(rid, sizeof rid, "logpath-%d", _i);
	ck_assert_int_eq(exchange(cases[_i].target, rid, NULL), cases[_i].status);
	char *path = logged_path(rid);
	ck_assert_str_eq(path, cases[_i].logged);
	free(path);
}
END_TEST

static const char *const absolute[][2] = {
	{"http://127.0.0.1/v1/sinusoidal?len=2&dim=4", "/v1/sinusoidal?len=2&dim=4"},
	{"HTTP://x:1/v1/sinusoidal?len=2&dim=4&format=csv", "/v1/sinusoidal?len=2&dim=4&format=csv"},
	{"https://u@x/v1/sinusoidal?len=2&bogus=1", "/v1/sinusoidal?len=2&bogus=1"},
	{"http://x/nowhere?len=2", "/nowhere?len=2"},
};

START_TEST(absolute_form_is_answered_as_its_path)
{
	char *a, *b;
	int got = exchange(absolute[_i][0], "absolute", &a), want = exchange(absolute[_i][1], "origin", &b);
	ck_assert_int_eq(got, want);
	ck_assert_str_eq(a, b);
	free(a);
	free(b);
}
END_TEST

/* A query of PE_QUERY_MAX_PARAMS parameters and a trailing '&' (a last empty piece, which is no
 * parameter) is read as the same query without it, not refused as one parameter too many. */
START_TEST(trailing_amp_is_no_parameter_at_the_limit)
{
	char target[1024] = "/v1/sinusoidal?len=2&dim=4", with[1030];
	for (int i = 2; i < 64; i++)
		strcat(target, "&offset=0");
	snprintf(with, sizeof with, "%s&", target);
	char *a, *b;
	int got = exchange(with, "amp", &a), want = exchange(target, "no-amp", &b);
	ck_assert_int_eq(want, 400);
	ck_assert_msg(strstr(b, "offset is given more than once") != NULL, "%s", b);
	ck_assert_int_eq(got, want);
	ck_assert_str_eq(a, b);
	free(a);
	free(b);
}
END_TEST

/* A query refused for its size (65 parameters: 400; a request line over max_header_bytes: 414)
 * is still in its log line, its first parameters after the path (the line is cut at 511 bytes). */
START_TEST(refused_query_is_logged)
{
	static char target[40000];
	strcpy(target, "/v1/sinusoidal?len=2&dim=4");
	size_t n = strlen(target);
	if (_i == 0)
		for (int k = 2; k < 65; k++)
			n += (size_t)sprintf(target + n, "&offset=%d", k);
	else {
		strcpy(target + n, "&format=");
		memset(target + n + 8, 'a', 33000);
		target[n + 8 + 33000] = 0;
	}
	char rid[32];
	snprintf(rid, sizeof rid, "refused-%d", _i);
	ck_assert_int_eq(exchange(target, rid, NULL), _i == 0 ? 400 : 414);
	char *path = logged_path(rid);
	ck_assert_uint_eq(strlen(path), 511);
	ck_assert_msg(!strncmp(path, target, 511), "logged %s", path);
	free(path);
}
END_TEST

static Suite *attack_query_suite(void)
{
	Suite *s = suite_create("e2e_attack_query");
	TCase *tc = tcase_create("query");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, start, stop);
	tcase_add_loop_test(tc, logged_path_reads_as_the_router_read_it, 0, (int)(sizeof cases / sizeof cases[0]));
	tcase_add_loop_test(tc, absolute_form_is_answered_as_its_path, 0, (int)(sizeof absolute / sizeof absolute[0]));
	tcase_add_test(tc, trailing_amp_is_no_parameter_at_the_limit);
	tcase_add_loop_test(tc, refused_query_is_logged, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(attack_query_suite)
