/* Unit tests of the Prometheus metrics (src/daemon/metrics.c): every status the error table can
 * answer with is counted under its own label, not under "other". */
#include "support/pe_check.h"

#include <stdio.h>
#include <string.h>

#include "daemon/metrics.h"

/* The rendered metrics of one request with this status. */
static void render_one_request(int status, struct pe_buf *out)
{
	struct pe_metrics *m = pe_metrics_new();
	ck_assert_ptr_nonnull(m);
	struct pe_http_request_info info = {.route = PE_ROUTE_HEALTHZ, .status = status, .method = "GET",
					    .path = "/healthz", .request_id = "t", .seconds = 0.001, .cache_hit = -1};
	pe_metrics_observe(m, &info);
	pe_buf_init(out, 1u << 20);
	ck_assert_int_eq(pe_metrics_render(m, NULL, NULL, out), 0);
	ck_assert_int_eq(pe_buf_append(out, "", 1), 0); /* NUL-terminated for strstr */
	pe_metrics_free(m);
}

/* One request answered with status is counted under label. */
static void expect_label(int status, const char *label)
{
	struct pe_buf out;
	char want[96];
	render_one_request(status, &out);
	snprintf(want, sizeof want, "posenc_requests_total{route=\"healthz\",status=\"%s\"} 1\n", label);
	ck_assert_msg(strstr(out.data, want) != NULL, "status %d: no line %s", status, want);
	pe_buf_destroy(&out);
}

static void expect_own_labels(const int *statuses, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char label[16];
		snprintf(label, sizeof label, "%d", statuses[i]);
		expect_label(statuses[i], label);
	}
}

/* Each status of include/posenc/err.h's table gets its own label. */
START_TEST(error_statuses_have_labels)
{
	static const int statuses[] = {
#define STATUS_(name, status, slug, title) status,
		PE_ERRNO_MAP(STATUS_)
#undef STATUS_
	};
	expect_own_labels(statuses, sizeof statuses / sizeof statuses[0]);
}
END_TEST

/* The answers that are not errors, and a client gone before its answer (499). */
START_TEST(other_statuses)
{
	static const int known[] = {200, 201, 204, 304, 499};
	expect_own_labels(known, sizeof known / sizeof known[0]);
	expect_label(418, "other");
}
END_TEST

static Suite *metrics_suite(void)
{
	Suite *s = suite_create("metrics");
	TCase *tc = tcase_create("metrics");
	tcase_add_test(tc, error_statuses_have_labels);
	tcase_add_test(tc, other_statuses);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(metrics_suite)
