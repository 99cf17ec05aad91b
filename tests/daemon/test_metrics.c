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

/* Each status of include/posenc/err.h's table gets its own label. */
START_TEST(error_statuses_have_labels)
{
	static const int statuses[] = {
#define STATUS_(name, status, slug, title) status,
		PE_ERRNO_MAP(STATUS_)
#undef STATUS_
	};
	for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++) {
		struct pe_buf out;
		char want[96];
		render_one_request(statuses[i], &out);
		snprintf(want, sizeof want, "posenc_requests_total{route=\"healthz\",status=\"%d\"} 1\n", statuses[i]);
		ck_assert_msg(strstr(out.data, want) != NULL, "no line %s", want);
		pe_buf_destroy(&out);
	}
}
END_TEST

/* The answers that are not errors, and a client gone before its answer (499). */
START_TEST(other_statuses)
{
	static const int known[] = {200, 201, 204, 304, 499};
	for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
		struct pe_buf out;
		char want[96];
		render_one_request(known[i], &out);
		snprintf(want, sizeof want, "posenc_requests_total{route=\"healthz\",status=\"%d\"} 1\n", known[i]);
		ck_assert_msg(strstr(out.data, want) != NULL, "no line %s", want);
		pe_buf_destroy(&out);
	}
	struct pe_buf out;
	render_one_request(418, &out);
	ck_assert_ptr_nonnull(strstr(out.data, "posenc_requests_total{route=\"healthz\",status=\"other\"} 1\n"));
	pe_buf_destroy(&out);
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
