/* POST /v1/plan?height&width&frames with a diffusers transformer config: for every fixture under
 * tests/data/configs/diffusers/ at two sizes, the plan's encodings and latent geometry hold the
 * parameters tests/ref/gen_generator_plans.py derives from diffusers' code
 * (tests/data/generator_plans/plans.json), and every url is answered 200. Sizes the latent grid
 * cannot take are 400s naming height, width or frames; an unknown _class_name a 422 naming it. */
#include "support/pe_check.h"
#include "support/pe_daemon.h"
#include "cli/run.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DIR_ "tests/data/configs/diffusers/"

static const char *const json_ct[] = {"Content-Type: application/json", NULL};

/* Does the plan's value equal the known answer? Numbers by value (1e4 == 10000), lists item by
 * item, objects key by key over the answer's keys. */
static int same(json_t *want, json_t *got)
{
	if (json_is_number(want))
		return json_is_number(got) && json_number_value(want) == json_number_value(got);
	if (json_is_array(want)) {
		size_t i;
		json_t *v;
		if (!json_is_array(got) || json_array_size(got) != json_array_size(want))
			return 0;
		json_array_foreach(want, i, v) if (!same(v, json_array_get(got, i))) return 0;
		return 1;
	}
	if (json_is_object(want)) {
		const char *k;
		json_t *v;
		json_object_foreach(want, k, v) if (!same(v, json_object_get(got, k))) return 0;
		return 1;
	}
	return json_equal(want, got);
}

static json_t *post_plan(const struct pe_daemon *d, const char *config, const char *query, long *status)
{
	char path[300], url[200];
	size_t n;
	struct pe_resp r;
	snprintf(path, sizeof path, DIR_ "%s", config);
	char *body = pe_test_read_file(path, &n);
	ck_assert_ptr_nonnull(body);
	snprintf(url, sizeof url, "/v1/plan?%s", query);
	pe_request(d, "POST", url, json_ct, body, n, &r);
	free(body);
	*status = r.status;
	json_t *j = pe_resp_json(&r);
	pe_resp_free(&r);
	ck_assert_ptr_nonnull(j);
	return j;
}

static void served(const struct pe_daemon *d, const char *what, const char *url)
{
	struct pe_resp r;
	pe_request(d, "GET", url, NULL, NULL, 0, &r);
	ck_assert_msg(r.status == 200, "%s: %s: %ld %.300s", what, url, r.status, r.body ? r.body : "");
	pe_resp_free(&r);
}

static void check_case(const struct pe_daemon *d, json_t *c)
{
	char query[128], what[256];
	const char *config = json_string_value(json_object_get(c, "config"));
	json_t *fr = json_object_get(c, "frames");
	int n = snprintf(query, sizeof query, "height=%lld&width=%lld", (long long)json_integer_value(json_object_get(c, "height")),
			 (long long)json_integer_value(json_object_get(c, "width")));
	if (json_is_integer(fr))
		snprintf(query + n, sizeof query - (size_t)n, "&frames=%lld", (long long)json_integer_value(fr));
	snprintf(what, sizeof what, "%s %s", config, query);
	long status;
	json_t *plan = post_plan(d, config, query, &status);
	ck_assert_msg(status == 200, "%s: %ld", what, status);
	ck_assert_msg(same(json_object_get(c, "generator"), json_object_get(plan, "generator")), "%s: generator %s", what,
		      json_dumps(json_object_get(plan, "generator"), JSON_COMPACT));
	json_t *want = json_object_get(c, "encodings"), *got = json_object_get(plan, "encodings");
	ck_assert_uint_eq(json_array_size(got), json_array_size(want));
	size_t i;
	json_t *w;
	json_array_foreach(want, i, w) {
		json_t *e = json_array_get(got, i);
		ck_assert_str_eq(json_string_value(json_object_get(e, "kind")), json_string_value(json_object_get(w, "kind")));
		char *ps = json_dumps(json_object_get(e, "params"), JSON_COMPACT);
		ck_assert_msg(same(json_object_get(w, "params"), json_object_get(e, "params")), "%s: %s params %s", what,
			      json_string_value(json_object_get(w, "kind")), ps);
		free(ps);
		served(d, what, json_string_value(json_object_get(e, "url")));
	}
	json_decref(plan);
}

START_TEST(every_generator_at_two_sizes)
{
	size_t n;
	char *text = pe_test_read_file("tests/data/generator_plans/plans.json", &n);
	ck_assert_ptr_nonnull(text);
	json_t *cases = json_loadb(text, n, 0, NULL);
	free(text);
	ck_assert_uint_eq(json_array_size(cases), 18);
	struct pe_daemon d;
	pe_daemon_start(&d, NULL);
	size_t i;
	json_t *c;
	json_array_foreach(cases, i, c) check_case(&d, c);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
	json_decref(cases);
}
END_TEST

/* Each refusal names the parameter the client must change. */
START_TEST(sizes_the_latent_cannot_take_are_refused)
{
	static const struct {
		const char *config, *query, *param;
		long status;
	} cases[] = {
		{"FLUX.1-dev.json", "width=1024", "height", 400},
		{"FLUX.1-dev.json", "height=1024", "width", 400},
		{"FLUX.1-dev.json", "height=1000&width=1024", "height", 400},  /* not a multiple of 8 x 2 */
		{"DiT-XL-2-256.json", "height=256&width=264", "width", 400},    /* 8 x patch 2 */
		{"FLUX.1-dev.json", "height=1024&width=1024&frames=5", "frames", 400},
		{"Wan2.1-T2V-1.3B.json", "height=480&width=832&frames=80", "frames", 400}, /* not 4k + 1 */
		{"stable-diffusion-3.5-medium.json", "height=6400&width=1024", "height", 400}, /* past pos_embed_max_size */
		{"FLUX.1-dev.json", "height=0&width=1024", "height", 400},
		{"Wan2.1-T2V-1.3B.json", "height=16&width=16&frames=262145", "frames", 400},   /* 65537 latent frames */
		{"Wan2.1-T2V-1.3B.json", "height=480&width=832&frames=43021", "frames", 400},  /* 10756 x 30 x 52 tokens */
		{"CogVideoX-2b.json", "height=480&width=720&frames=1048573", "frames", 400}, /* sin-cos 3-D: 262144 frames */
	};
	struct pe_daemon d;
	pe_daemon_start(&d, NULL);
	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
		long status;
		json_t *p = post_plan(&d, cases[k].config, cases[k].query, &status);
		ck_assert_msg(status == cases[k].status, "%s %s: %ld", cases[k].config, cases[k].query, status);
		ck_assert_str_eq(json_string_value(json_object_get(p, "param")), cases[k].param);
		json_decref(p);
	}
	struct pe_resp r;
	static const char unknown[] = "{\"_class_name\": \"UNet2DConditionModel\", \"sample_size\": 64}";
	pe_request(&d, "POST", "/v1/plan?height=512&width=512", json_ct, unknown, sizeof unknown - 1, &r);
	ck_assert_int_eq(r.status, 422);
	ck_assert_ptr_nonnull(strstr(r.body, "\"param\":\"_class_name\""));
	pe_resp_free(&r);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* `posenc plan --height --width --frames` prints what the daemon answers for the same query, and
 * a size the latent cannot take is status 2 naming the option. */
START_TEST(the_cli_plans_as_the_daemon_does)
{
	struct pe_daemon d;
	struct crun c;
	struct crun_opts o = {0};
	long status;
	pe_daemon_start(&d, NULL);
	json_t *want = post_plan(&d, "CogVideoX-5b.json", "height=768&width=1360&frames=85", &status);
	ck_assert_int_eq(status, 200);
	crun(&c, &o, "plan", "--height", "768", "--width", "1360", "--frames", "85", DIR_ "CogVideoX-5b.json", NULL);
	crun_expect_ok(&c);
	json_t *got = json_loadb(c.out, c.nout, 0, NULL);
	ck_assert_msg(got && json_equal(want, got), "%.*s", (int)c.nout, c.out);
	json_decref(got);
	json_decref(want);
	crun_free(&c);
	crun(&c, &o, "plan", "--height", "1000", "--width", "1024", DIR_ "FLUX.1-dev.json", NULL);
	ck_assert_int_eq(c.status, 2);
	ck_assert_ptr_nonnull(strstr(c.err, "--height"));
	crun_free(&c);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

static Suite *plan_generators_suite(void)
{
	Suite *s = suite_create("plan_generators");
	TCase *tc = tcase_create("e2e");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, sizes_the_latent_cannot_take_are_refused);
	tcase_add_test(tc, every_generator_at_two_sizes);
	tcase_add_test(tc, the_cli_plans_as_the_daemon_does);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(plan_generators_suite)
