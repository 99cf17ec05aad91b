/* POST /v1/plan end to end: every config under tests/data/configs/ is posted with ?len=8, and each
 * encoding of its plan is checked against tests/data/plan/ (tests/ref/gen_plan.py: an independent
 * reading of the config and independent float64 references of the tables):
 *   - kind, layers, head_dim, rotary_dim, softmax_scale and attention_scaling;
 *   - its url is fetched (bin, f64; T5's i32 buckets) and compared in ulps with the reference:
 *     2 ulp (RoPE scaled by attention_scaling rounds once more, see test_rope.c), 0 for buckets;
 *   - the hand-written query of the same table has the same ETag as the url (the url is canonical).
 * M-RoPE's /v1/rope/mrope (Qwen2-VL, 2.5-VL, 3-VL) and Llama 4's llama3 step (low_freq_factor =
 * high_freq_factor) included: no plan may say its table cannot be served.
 * Then the refusals: 400 for broken JSON, 422 naming model_type or the rope_type key, 413 past
 * 1 MiB, 415 without application/json, 405 for GET; len caps and defaults. */
#include "support/pe_check.h"
#include "support/pe_daemon.h"
#include "support/pe_kat.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc/plan.h"
#include "posenc/posenc.h"

#define DATA "tests/data/plan"
#define CONFIGS "tests/data/configs"

static const char *const json_ct[] = {"Content-Type: application/json", NULL};

static char *read_config(const char *name, size_t *len)
{
	char path[256];
	snprintf(path, sizeof path, CONFIGS "/%s", name);
	return pe_test_read_file(path, len);
}

static json_t *post_plan(const struct pe_daemon *d, const char *query, const char *body, size_t len)
{
	struct pe_resp r;
	char path[128];
	snprintf(path, sizeof path, "/v1/plan%s", query);
	pe_request(d, "POST", path, json_ct, body, len, &r);
	ck_assert_msg(r.status == 200, "%s: %ld %s", path, r.status, r.body ? r.body : "");
	json_t *j = pe_resp_json(&r);
	pe_resp_free(&r);
	return j;
}

static int has_warning(json_t *plan, const char *needle)
{
	size_t i;
	json_t *w;
	json_array_foreach(json_object_get(plan, "warnings"), i, w)
		if (strstr(json_string_value(w), needle))
			return 1;
	return 0;
}

static void check_number(json_t *c, json_t *e, const char *field, const char *name)
{
	json_t *want = json_object_get(c, field);
	if (!want)
		return;
	double w = json_number_value(want), g = json_number_value(json_object_get(e, field));
	ck_assert_msg(fabs(g - w) <= 1e-14 * fabs(w), "%s: %s %.17g, expected %.17g", name, field, g, w);
}

/* The url's table equals the reference (bin, f64 or the fixed i32); returns its ETag in etag. */
static void check_table(const struct pe_daemon *d, const struct pe_kat *k, json_t *c, const char *url, char *etag,
			size_t cap)
{
	struct pe_shape s;
	struct pe_resp r;
	char path[16384];
	int ints = pe_kat_has(c, "torch_i32");
	snprintf(path, sizeof path, "%s&format=bin%s", url, ints ? "" : "&dtype=f64");
	pe_get(d, path, &r);
	ck_assert_msg(r.status == 200, "%s: %ld %s", path, r.status, r.body ? r.body : "");
	ck_assert_ptr_nonnull(pe_resp_header(&r, "ETag", etag, cap));
	size_t n = pe_kat_shape(c, &s);
	json_t *rows = json_object_get(c, "rows");
	size_t row = rows ? s.dim[1] : 0;
	void *want = pe_kat_file(k, c, ints ? "torch_i32" : "ref_f64", n * (ints ? 4 : 8));
	for (size_t i = 0; i < n; i++) {
		size_t at = rows ? (size_t)json_integer_value(json_array_get(rows, i / row)) * row + i % row : i;
		ck_assert_msg((at + 1) * (ints ? 4 : 8) <= r.len, "%s: %zu bytes", path, r.len);
		if (ints) {
			ck_assert_int_eq(((const int32_t *)(const void *)r.body)[at], ((const int32_t *)want)[i]);
		} else {
			double g, w = ((const double *)want)[i];
			memcpy(&g, r.body + at * 8, 8);
			ck_assert_msg(pe_ulp_f64(g, w) <= 2, "%s [%zu]: %.17g, expected %.17g", pe_kat_str(c, "name"), at, g, w);
		}
	}
	free(want);
	pe_resp_free(&r);
}

static void same_etag(const struct pe_daemon *d, json_t *c, const char *etag)
{
	struct pe_resp r;
	char path[16384], tag[64];
	snprintf(path, sizeof path, "/v1/%s?%s&format=bin%s", pe_kat_str(c, "table"), pe_kat_str(c, "query"),
		 pe_kat_has(c, "torch_i32") ? "" : "&dtype=f64");
	pe_get(d, path, &r);
	ck_assert_msg(r.status == 200, "%s: %ld %s", path, r.status, r.body ? r.body : "");
	ck_assert_ptr_nonnull(pe_resp_header(&r, "ETag", tag, sizeof tag));
	ck_assert_msg(!strcmp(tag, etag), "%s: ETag %s, the plan's url has %s", pe_kat_str(c, "name"), tag, etag);
	pe_resp_free(&r);
}

static void check_case(const struct pe_daemon *d, const struct pe_kat *k, json_t *c, json_t *plan)
{
	const char *name = pe_kat_str(c, "name");
	json_t *e = json_array_get(json_object_get(plan, "encodings"), (size_t)json_integer_value(json_object_get(c, "index")));
	ck_assert_msg(e != NULL, "%s: no such encoding", name);
	ck_assert_str_eq(json_string_value(json_object_get(e, "kind")), pe_kat_str(c, "kind"));
	ck_assert_msg(json_equal(json_object_get(e, "layers"), json_object_get(c, "layers")), "%s: layers", name);
	ck_assert_int_eq(json_integer_value(json_object_get(e, "head_dim")), json_integer_value(json_object_get(c, "head_dim")));
	if (json_object_get(c, "rotary_dim"))
		ck_assert_int_eq(json_integer_value(json_object_get(e, "rotary_dim")),
				 json_integer_value(json_object_get(c, "rotary_dim")));
	check_number(c, e, "softmax_scale", name);
	check_number(c, e, "attention_scaling", name);
	const char *url = json_string_value(json_object_get(e, "url"));
	if (!*pe_kat_str(c, "table")) {
		ck_assert_msg(!url || !strcmp(url, "/v1/learned"), "%s: url %s", name, url);
		return;
	}
	ck_assert_msg(url && !strncmp(url, "/v1/", 4), "%s: no url", name);
	ck_assert_msg(!has_warning(plan, "refuses the planned parameters") && !has_warning(plan, "has no /v1/"),
		      "%s: the plan says this posenc cannot serve it", name);
	char etag[64];
	check_table(d, k, c, url, etag, sizeof etag);
	same_etag(d, c, etag);
}

START_TEST(every_fixture_matches_its_reference)
{
	struct pe_daemon d;
	struct pe_kat k;
	size_t checked = 0;
	pe_daemon_start(&d, NULL);
	pe_kat_load(&k, DATA);
	for (size_t i = 0; i < pe_kat_count(&k); i++) {
		json_t *c = pe_kat_case(&k, i);
		size_t len;
		char *body = read_config(pe_kat_str(c, "config"), &len);
		json_t *plan = post_plan(&d, "?len=8", body, len);
		free(body);
		check_case(&d, &k, c, plan);
		checked++;
		json_decref(plan);
	}
	ck_assert_uint_eq(checked, pe_kat_count(&k));
	pe_kat_free(&k);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* Both spellings of the scaling (rope_scaling, rope_parameters) make the same url. */
START_TEST(rope_parameters_spelling_is_the_same_plan)
{
	struct pe_daemon d;
	size_t n1, n2;
	pe_daemon_start(&d, NULL);
	char *a = read_config("llama3.1-8b.json", &n1), *b = read_config("llama3.1-8b-rope-parameters.json", &n2);
	json_t *pa = post_plan(&d, "", a, n1), *pb = post_plan(&d, "", b, n2);
	json_t *ea = json_array_get(json_object_get(pa, "encodings"), 0), *eb = json_array_get(json_object_get(pb, "encodings"), 0);
	ck_assert_str_eq(json_string_value(json_object_get(ea, "url")), json_string_value(json_object_get(eb, "url")));
	/* len defaults to max_position_embeddings (131072; 2*131072*128 fits the default max_elements) */
	ck_assert(strstr(json_string_value(json_object_get(ea, "url")), "len=131072") != NULL);
	json_decref(pa);
	json_decref(pb);
	free(a);
	free(b);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* len is capped by max_elements (named in a warning), and the capped url is still served. */
START_TEST(len_is_capped_by_max_elements)
{
	struct pe_daemon d;
	size_t n;
	static const char *const args[] = {"--max-elements", "65536", NULL};
	pe_daemon_start(&d, args);
	char *body = read_config("llama2-7b.json", &n);
	json_t *plan = post_plan(&d, "", body, n);
	const char *url = json_string_value(json_object_get(json_array_get(json_object_get(plan, "encodings"), 0), "url"));
	ck_assert_msg(strstr(url, "len=256&") != NULL, "%s", url); /* 2 * 256 * 128 = 65536 */
	ck_assert(has_warning(plan, "capped to 256"));
	struct pe_resp r;
	pe_get(&d, url, &r);
	ck_assert_int_eq(r.status, 200);
	pe_resp_free(&r);
	json_decref(plan);
	free(body);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* Every url a plan hands out at the default len is answered as given (200) by a daemon with the
 * default limits: MPT's ALiBi (32 heads x 1448^2 once capped by max_elements) is over
 * response_budget_bytes as JSON, so its url asks for npy (and says so in its notes). */
static size_t fetch_every_url(const struct pe_daemon *d, const char *name)
{
	size_t len, fetched = 0, i;
	json_t *e;
	char *body = read_config(name, &len);
	json_t *plan = post_plan(d, "", body, len);
	free(body);
	json_array_foreach(json_object_get(plan, "encodings"), i, e) {
		const char *url = json_string_value(json_object_get(e, "url"));
		if (!url || strncmp(url, "/v1/", 4) || !strcmp(url, "/v1/learned"))
			continue;
		struct pe_resp r;
		pe_get(d, url, &r);
		ck_assert_msg(r.status == 200, "%s: %s: %ld %.300s", name, url, r.status, r.body ? r.body : "");
		pe_resp_free(&r);
		fetched++;
	}
	if (!strcmp(name, "mpt-7b.json")) {
		e = json_array_get(json_object_get(plan, "encodings"), 0);
		const char *url = json_string_value(json_object_get(e, "url"));
		ck_assert_msg(strstr(url, "q_len=1448") && strstr(url, "&format=npy"), "%s", url);
		json_t *notes = json_object_get(e, "notes");
		ck_assert_str_eq(json_string_value(json_object_get(e, "format")), "npy");
		ck_assert(strstr(json_string_value(json_array_get(notes, json_array_size(notes) - 1)), "format=npy"));
	}
	json_decref(plan);
	return fetched;
}

START_TEST(every_url_is_served_as_given)
{
	static const char *const configs[] = {
		"bloom-560m.json", "deepseek-v2-lite.json", "deepseek-v3.json", "falcon-7b.json", "falcon-rw-1b.json",
		"gemma2-9b.json", "gemma3-1b-layer-types.json", "gemma3-4b.json", "gpt-j-6b.json", "llama2-7b.json",
		"llama3.1-8b.json", "llama3.2-1b.json", "llama4-scout.json", "mistral-7b-v0.1.json", "mixtral-8x7b.json",
		"mpt-7b.json", "phi-2.json", "phi3-mini-128k.json", "phi4-mini-instruct.json", "pythia-160m.json",
		"qwen2-vl-7b.json", "qwen2.5-7b-instruct-yarn.json", "qwen2.5-vl-7b.json", "qwen3-vl-8b.json",
		"t5-small.json", "vit-mae-base.json",
	};
	struct pe_daemon d;
	size_t fetched = 0;
	pe_daemon_start(&d, NULL);
	for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++)
		fetched += fetch_every_url(&d, configs[i]);
	ck_assert_uint_ge(fetched, sizeof configs / sizeof configs[0]);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

static void expect_problem(const struct pe_daemon *d, const char *method, const char *path, const char *const *hdr,
			   const char *body, long status, const char *param)
{
	struct pe_resp r;
	pe_request(d, method, path, hdr, body, body ? strlen(body) : 0, &r);
	ck_assert_msg(r.status == status, "%s %s: %ld %s", method, body ? body : "", r.status, r.body ? r.body : "");
	pe_assert_problem(&r, status, param);
	pe_resp_free(&r);
}

START_TEST(refusals_name_what_is_wrong)
{
	struct pe_daemon d;
	pe_daemon_start(&d, NULL);
	expect_problem(&d, "POST", "/v1/plan", json_ct, "{\"model_type\": \"llama\",", 400, "body");
	expect_problem(&d, "POST", "/v1/plan", json_ct, "[1, 2]", 400, "body");
	expect_problem(&d, "POST", "/v1/plan", json_ct, "{\"model_type\": \"resnet\"}", 422, "model_type");
	expect_problem(&d, "POST", "/v1/plan", json_ct, "{\"hidden_size\": 64}", 422, "model_type");
	expect_problem(&d, "POST", "/v1/plan", json_ct,
		       "{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_attention_heads\": 4, "
		       "\"rope_scaling\": {\"rope_type\": \"fancy\", \"factor\": 2}}",
		       422, "rope_scaling.rope_type");
	expect_problem(&d, "POST", "/v1/plan", json_ct,
		       "{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_attention_heads\": 4, "
		       "\"rope_parameters\": {\"type\": \"fancy\"}}",
		       422, "rope_parameters.type");
	expect_problem(&d, "POST", "/v1/plan", json_ct, "{\"model_type\": \"llama\", \"hidden_size\": 64}", 422,
		       "num_attention_heads");
	expect_problem(&d, "POST", "/v1/plan?len=0", json_ct, "{\"model_type\": \"bert\"}", 400, "len");
	expect_problem(&d, "POST", "/v1/plan?dim=4", json_ct, "{\"model_type\": \"bert\"}", 400, "dim");
	static const char *const text[] = {"Content-Type: text/plain", NULL};
	expect_problem(&d, "POST", "/v1/plan", text, "{}", 415, "Content-Type");
	expect_problem(&d, "GET", "/v1/plan", NULL, NULL, 405, NULL);
	/* past 1 MiB: 413 from Content-Length, before the body */
	size_t big = PE_PLAN_MAX_BODY + 2;
	char *body = malloc(big + 1);
	memset(body, ' ', big);
	body[0] = '{';
	body[big - 1] = '}';
	body[big] = 0;
	expect_problem(&d, "POST", "/v1/plan", json_ct, body, 413, "body");
	free(body);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

static Suite *plan_suite(void)
{
	Suite *s = suite_create("e2e_plan_configs");
	TCase *tc = tcase_create("plan");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, every_fixture_matches_its_reference);
	tcase_add_test(tc, rope_parameters_spelling_is_the_same_plan);
	tcase_add_test(tc, len_is_capped_by_max_elements);
	tcase_add_test(tc, every_url_is_served_as_given);
	tcase_add_test(tc, refusals_name_what_is_wrong);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(plan_suite)
