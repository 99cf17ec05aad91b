/* Unit tests of the access log's request lines (daemon/log.c): each line is one JSON object with
 * the fields in order, strings escaped, duration_ms as %.3f prints it, and no line is cut or broken
 * by the longest path, request id or method a client can send. */
#include "support/pe_check.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/log.h"
#include "http/http.h"

/* The lines pe_log_request writes for info, read back from a temporary stdout. */
static char *log_lines(const struct pe_http_request_info *info, int n)
{
	char path[] = "/tmp/posenc-log-XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	fflush(stdout);
	int saved = dup(1);
	ck_assert_int_ge(saved, 0);
	ck_assert_int_eq(dup2(fd, 1), 1);
	for (int i = 0; i < n; i++)
		pe_log_request(&info[i]);
	pe_log_flush();
	fflush(stdout);
	dup2(saved, 1);
	close(saved);
	off_t len = lseek(fd, 0, SEEK_END);
	char *text = calloc(1, (size_t)len + 1);
	ck_assert_ptr_nonnull(text);
	ck_assert_int_eq(pread(fd, text, (size_t)len, 0), len);
	close(fd);
	unlink(path);
	return text;
}

static json_t *parse_line(const char *line, size_t len)
{
	json_error_t e;
	json_t *j = json_loadb(line, len, 0, &e);
	ck_assert_msg(j != NULL, "not JSON (%s): %.*s", e.text, (int)len, line);
	return j;
}

START_TEST(fields_in_order_and_escaped)
{
	struct pe_http_request_info info = {.status = 404, .method = "GET", .path = "/v1/x?a=\"b\\c\"&\x01",
					    .request_id = "id-1", .bytes = 9223372036854775807ull,
					    .seconds = 0.0123456, .cache_hit = 0};
	char *text = log_lines(&info, 1);
	const char *want_tail = "\",\"level\":\"info\",\"event\":\"request\",\"method\":\"GET\","
				"\"path\":\"/v1/x?a=\\\"b\\\\c\\\"&\\u0001\",\"status\":404,"
				"\"bytes\":9223372036854775807,\"duration_ms\":12.346,\"cache\":\"miss\","
				"\"request_id\":\"id-1\"}\n";
	ck_assert_msg(strncmp(text, "{\"time\":\"", 9) == 0, "%s", text);
	ck_assert_msg(strlen(text) > strlen(want_tail) && strcmp(text + strlen(text) - strlen(want_tail), want_tail) == 0,
		      "%s", text);
	json_decref(parse_line(text, strlen(text) - 1));
	free(text);
}
END_TEST

/* duration_ms as printf's %.3f gives it, away from ties; cache hit / not cached. */
START_TEST(durations_like_printf)
{
	static const double secs[] = {0, 1e-7, 0.0004, 0.001, 0.0123456, 2.5, 61.0001234, 86400.25};
	enum { N = sizeof secs / sizeof secs[0] };
	struct pe_http_request_info info[N];
	for (int i = 0; i < N; i++)
		info[i] = (struct pe_http_request_info){.status = 200, .method = "GET", .path = "/", .request_id = "r",
							.seconds = secs[i], .cache_hit = i % 2 ? 1 : -1};
	char *text = log_lines(info, N);
	char *line = text;
	for (int i = 0; i < N; i++) {
		char *nl = strchr(line, '\n');
		ck_assert_ptr_nonnull(nl);
		char want[64];
		snprintf(want, sizeof want, "\"duration_ms\":%.3f,\"cache\":\"%s\"", secs[i] * 1e3, i % 2 ? "hit" : "-");
		*nl = 0;
		ck_assert_msg(strstr(line, want) != NULL, "%s not in %s", want, line);
		line = nl + 1;
	}
	free(text);
}
END_TEST

/* The longest values a request can carry still make one whole, valid line each. */
START_TEST(long_values_stay_one_valid_line)
{
	size_t big = 64 * 1024;
	char *path = malloc(big + 1), *method = malloc(big + 1), *rid = malloc(big + 1);
	ck_assert(path && method && rid);
	memset(path, '"', big);
	memset(method, 'M', big);
	memset(rid, '\x7f', big);
	path[big] = method[big] = rid[big] = 0;
	struct pe_http_request_info info[2] = {
		{.status = 200, .method = method, .path = path, .request_id = rid, .seconds = 1, .cache_hit = 1},
		{.status = 200, .method = "GET", .path = "/after", .request_id = "next", .seconds = 0, .cache_hit = 1},
	};
	char *text = log_lines(info, 2);
	char *nl = strchr(text, '\n');
	ck_assert_ptr_nonnull(nl);
	json_t *j = parse_line(text, (size_t)(nl - text));
	ck_assert_int_eq(json_integer_value(json_object_get(j, "status")), 200);
	ck_assert_str_eq(json_string_value(json_object_get(j, "cache")), "hit");
	json_decref(j);
	j = parse_line(nl + 1, strlen(nl + 1) - 1);
	ck_assert_str_eq(json_string_value(json_object_get(j, "path")), "/after");
	json_decref(j);
	free(text);
	free(path);
	free(method);
	free(rid);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("log");
	TCase *tc = tcase_create("log");
	tcase_add_test(tc, fields_in_order_and_escaped);
	tcase_add_test(tc, durations_like_printf);
	tcase_add_test(tc, long_values_stay_one_valid_line);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
