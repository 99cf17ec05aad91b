/* Model plans (src/plan/): the config reader's bounds and refusals, the family rules'
 * decisions and errors (which key a 422 names), len and its cap, the JSON answer (read back with
 * jansson) and the CLI's pick. The tables the urls name are checked end to end in
 * tests/e2e/test_plan_configs.c against tests/ref/gen_plan.py. */
#include "plan/cfg.h"
#include "posenc/core.h"
#include "posenc/output.h"
#include "posenc/plan.h"
#include "support/pe_check.h"
#include "support/pe_table.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct pe_plan_opts defaults = {.len = 0, .max_elements = (uint64_t)1 << 26};

static int build(const char *json, const struct pe_plan_opts *o, struct pe_plan *plan, struct pe_err *err)
{
	memset(err, 0, sizeof *err);
	return pe_plan_build(json, strlen(json), o ? o : &defaults, plan, err);
}

static void expect_error(const char *json, int code, const char *param)
{
	struct pe_plan plan;
	struct pe_err err;
	int rc = build(json, NULL, &plan, &err);
	ck_assert_msg(rc == code, "%s: %d (%s: %s), expected %d", json, rc, err.param, err.detail, code);
	ck_assert_msg(!strcmp(err.param, param), "%s: names '%s', expected '%s'", json, err.param, param);
}

static char *read_fixture(const char *name, size_t *len)
{
	char path[256];
	snprintf(path, sizeof path, "tests/data/configs/%s", name);
	return pe_test_read_file(path, len);
}

static void plan_fixture(const char *name, const struct pe_plan_opts *o, struct pe_plan *plan)
{
	size_t len;
	struct pe_err err = {0};
	char *text = read_fixture(name, &len);
	int rc = pe_plan_build(text, len, o ? o : &defaults, plan, &err);
	free(text);
	ck_assert_msg(rc == 0, "%s: %s: %s", name, err.param, err.detail);
}

START_TEST(json_reader_reads_what_configs_hold)
{
	struct pe_err err = {0};
	const char *text = " {\"a\": [1, -2.5e3, true, null, \"x\\u00e9\\ud83d\\ude00\\n\"], \"b\": {}} ";
	json_t *v = plan_parse(text, strlen(text), &err);
	ck_assert_ptr_nonnull(v);
	const json_t *a = json_object_get(v, "a");
	ck_assert(json_is_array(a));
	ck_assert_uint_eq(json_array_size(a), 5);
	ck_assert(json_number_value(json_array_get(a, 1)) == -2500);
	ck_assert_str_eq(json_string_value(json_array_get(a, 4)), "x\xc3\xa9\xf0\x9f\x98\x80\n");
	ck_assert(json_is_object(json_object_get(v, "b")));
	ck_assert_ptr_null(json_object_get(v, "c"));
	json_decref(v);
}
END_TEST

static void reader_refuses(const char *text, int code)
{
	struct pe_err err = {0};
	json_t *v = plan_parse(text, strlen(text), &err);
	ck_assert_msg(v == NULL, "%s parsed", text);
	ck_assert_msg(err.code == code, "%s: %d %s", text, err.code, err.detail);
	ck_assert_str_eq(err.param, "body");
}

START_TEST(json_reader_refuses_broken_json)
{
	static const char *const bad[] = {
		"", "{", "{\"a\" 1}", "{\"a\": 1,}", "[1 2]", "01", "1.", "nul", "\"abc", "{\"a\": 1} x",
		"{\"a\": 1, \"a\": 2}", "\"\\q\"", "\"\\u12\"", "\"\\udc00\"", "\"\\ud800x\"", "\"\\u0000\"",
		"\"a\tb\"", "1e999", "NaN", "1.", "-", ".5", "1e", "+1", "-01",
		/* a high surrogate, its low half in the next string */
		"[\"\\ud800\", \"\\udc00\"]",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		reader_refuses(bad[i], PE_EBODY);
}
END_TEST

START_TEST(json_reader_is_bounded)
{
	char deep[201];
	memset(deep, '[', 100);
	memset(deep + 100, ']', 100);
	deep[200] = 0;
	reader_refuses(deep, PE_ETOOBIG); /* depth 100 > 64 */
	size_t n = 2 * (PE_PLAN_MAX_NODES + 1) + 2;
	char *wide = malloc(n + 1);
	wide[0] = '[';
	for (size_t i = 0; i <= PE_PLAN_MAX_NODES; i++)
		memcpy(wide + 1 + 2 * i, "0,", 2);
	wide[n - 2] = '0';
	wide[n - 1] = ']';
	wide[n] = 0;
	reader_refuses(wide, PE_ETOOBIG);
	free(wide);
}
END_TEST

/* Strings are UTF-8 as RFC 8259 asks: ill-formed bytes are refused (they reached the answer's
 * JSON raw, e.g. through a rope_type/type warning), well-formed ones kept as they are. */
START_TEST(json_reader_refuses_ill_formed_utf8)
{
	static const char *const bad[] = {
		"\"\xff\"", "\"\xc0\xaf\"", "\"\xc1\xbf\"", "\"\xe0\x80\xaf\"", "\"\xed\xa0\x80\"", "\"\xe2\x82\"",
		"\"\xf0\x8f\xbf\xbf\"", "\"\xf4\x90\x80\x80\"", "\"\xf5\x80\x80\x80\"", "\"\x80\"", "{\"\xfe\": 1}",
		"\"\xe2\x82\"x", "\"ab\xc3",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		reader_refuses(bad[i], PE_EBODY);
	struct pe_err err = {0};
	const char *ok = "[\"\xc2\x80\xdf\xbf\", \"\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\", \"\xf0\x90\x80\x80\xf4\x8f\xbf\xbf\"]";
	json_t *v = plan_parse(ok, strlen(ok), &err);
	ck_assert_msg(v != NULL, "%s", err.detail);
	ck_assert_str_eq(json_string_value(json_array_get(v, 1)), "\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80");
	json_decref(v);
}
END_TEST

/* A number's length is not bounded by the grammar: 70 digits read like 1. */
START_TEST(json_reader_reads_long_numbers)
{
	char text[256] = "[1.";
	memset(text + 3, '0', 70);
	strcpy(text + 73, "1e-3, 1");
	memset(text + strlen(text), '0', 80);
	strcat(text, "]");
	struct pe_err err = {0};
	json_t *v = plan_parse(text, strlen(text), &err);
	ck_assert_msg(v != NULL, "%s", err.detail);
	ck_assert(json_number_value(json_array_get(v, 0)) == 1e-3);
	ck_assert(json_number_value(json_array_get(v, 1)) == 1e80);
	json_decref(v);
}
END_TEST

/* An object with PE_PLAN_MAX_NODES - 1 members (within the bounds) is read, and one duplicate
 * among them found, without comparing every key with every other (that took minutes). */
static char *many_keys(size_t n, int dup)
{
	char *s = malloc(n * 12 + 3), *o = s;
	*o++ = '{';
	for (size_t i = 0; i < n; i++)
		o += sprintf(o, "%s\"%07zu\":0", i ? "," : "", dup && i == n - 1 ? (size_t)0 : i);
	strcpy(o, "}");
	return s;
}

START_TEST(json_reader_many_members)
{
	struct pe_err err = {0};
	char *s = many_keys(PE_PLAN_MAX_NODES - 1, 0);
	json_t *v = plan_parse(s, strlen(s), &err);
	ck_assert_msg(v != NULL, "%s", err.detail);
	ck_assert_uint_eq(json_object_size(v), PE_PLAN_MAX_NODES - 1);
	json_decref(v);
	free(s);
	s = many_keys(PE_PLAN_MAX_NODES - 1, 1);
	reader_refuses(s, PE_EBODY);
	free(s);
	reader_refuses("{\"a\": {\"b\": 1, \"c\": [{\"d\": 1, \"d\": 1}]}}", PE_EBODY);
}
END_TEST

/* Numbers that become an int, a square root or a divisor are checked first: out of range they
 * are a 422 naming the key (before: NaN softmax scales, silently truncated channels, or a cast
 * of 1e300 to int, which is undefined). */
#define LLAMA "{\"model_type\": \"llama\", \"num_attention_heads\": 8, \"hidden_size\": 512, "
#define DSV3 "{\"model_type\": \"deepseek_v3\", \"num_attention_heads\": 8, \"hidden_size\": 512, "
START_TEST(out_of_range_numbers_name_the_key)
{
	expect_error("{\"model_type\": \"gemma2\", \"num_attention_heads\": 8, \"hidden_size\": 512, "
		     "\"query_pre_attn_scalar\": -1}", PE_EUNPROCESSABLE, "query_pre_attn_scalar");
	expect_error("{\"model_type\": \"gemma3_text\", \"num_attention_heads\": 8, \"hidden_size\": 512, "
		     "\"num_hidden_layers\": 4, \"query_pre_attn_scalar\": 0}", PE_EUNPROCESSABLE, "query_pre_attn_scalar");
	expect_error(LLAMA "\"partial_rotary_factor\": -0.5}", PE_EUNPROCESSABLE, "partial_rotary_factor");
	expect_error(LLAMA "\"rotary_dim\": 1e300}", PE_EUNPROCESSABLE, "rotary_dim");
	expect_error(LLAMA "\"rotary_dim\": 31.5}", PE_EUNPROCESSABLE, "rotary_dim");
	expect_error(DSV3 "\"qk_rope_head_dim\": 2.5, \"qk_nope_head_dim\": 62}", PE_EUNPROCESSABLE, "qk_rope_head_dim");
	expect_error(DSV3 "\"qk_rope_head_dim\": 64, \"qk_nope_head_dim\": 1e300}", PE_EUNPROCESSABLE, "qk_nope_head_dim");
	expect_error(LLAMA "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4, "
		     "\"original_max_position_embeddings\": 0.5}}", PE_EUNPROCESSABLE, "rope_scaling.original_max_position_embeddings");
	expect_error("{\"model_type\": \"vit\", \"num_attention_heads\": 8, \"hidden_size\": 512, \"image_size\": 1e300, "
		     "\"patch_size\": 16}", PE_EUNPROCESSABLE, "image_size");
	/* a pattern past the layers: every layer sliding, as with a pattern of layers + 1 */
	struct pe_plan plan;
	struct pe_err err;
	int rc = build("{\"model_type\": \"gemma3_text\", \"num_attention_heads\": 8, \"hidden_size\": 512, "
		       "\"num_hidden_layers\": 4, \"sliding_window_pattern\": 1e300}", NULL, &plan, &err);
	ck_assert_msg(rc == 0, "%s", err.detail);
	ck_assert_uint_eq(plan.nenc, 1);
	ck_assert_str_eq(plan.enc[0].layers, "sliding_attention");
	pe_plan_destroy(&plan);
}
END_TEST

static const char *param_of(const struct pe_plan_enc *e, const char *key)
{
	for (size_t k = 0; k < e->nparams; k++)
		if (!strcmp(e->params[k].key, key))
			return e->params[k].value;
	return NULL;
}

/* What transformers' config classes default to when config.json leaves a key out: Gemma 2 and 3
 * query_pre_attn_scalar = 256 (Gemma 1 has none: head_dim^-1/2), Gemma 3 rope_theta = 1e6 (its
 * sliding layers' rope_local_base_freq = 10000). head_dim here is 64, so 256 is visible. */
START_TEST(gemma_defaults_are_transformers)
{
	struct pe_plan plan;
	struct pe_err err;
	int rc = build("{\"model_type\": \"gemma3_text\", \"num_attention_heads\": 8, \"hidden_size\": 512, "
		       "\"num_hidden_layers\": 6}", NULL, &plan, &err);
	ck_assert_msg(rc == 0, "%s", err.detail);
	ck_assert_uint_eq(plan.nenc, 2);
	for (size_t i = 0; i < 2; i++) {
		const struct pe_plan_enc *e = &plan.enc[i];
		int global = !strcmp(e->layers, "full_attention");
		ck_assert_str_eq(param_of(e, "base"), global ? "1000000" : "10000");
		ck_assert(e->softmax_scale == 1.0 / 16);
	}
	pe_plan_destroy(&plan);
	rc = build("{\"model_type\": \"gemma2\", \"num_attention_heads\": 8, \"hidden_size\": 512}", NULL, &plan, &err);
	ck_assert_msg(rc == 0, "%s", err.detail);
	ck_assert(plan.enc[0].softmax_scale == 1.0 / 16);
	ck_assert_str_eq(param_of(&plan.enc[0], "base"), "10000");
	pe_plan_destroy(&plan);
	rc = build("{\"model_type\": \"gemma\", \"num_attention_heads\": 8, \"hidden_size\": 512}", NULL, &plan, &err);
	ck_assert_msg(rc == 0, "%s", err.detail);
	ck_assert(plan.enc[0].softmax_scale == 1.0 / 8);
	pe_plan_destroy(&plan);
}
END_TEST

START_TEST(unknown_families_and_types_name_the_key)
{
	expect_error("{\"model_type\": \"resnet\"}", PE_EUNPROCESSABLE, "model_type");
	expect_error("{\"model_type\": 3}", PE_EUNPROCESSABLE, "model_type");
	expect_error("[]", PE_EBODY, "body");
	expect_error("{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_attention_heads\": 4, "
		     "\"rope_scaling\": {\"type\": \"fancy\"}}", PE_EUNPROCESSABLE, "rope_scaling.type");
	expect_error("{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_attention_heads\": 4, "
		     "\"rope_scaling\": {\"rope_type\": \"yarn\"}}", PE_EUNPROCESSABLE, "rope_scaling.factor");
	expect_error("{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_attention_heads\": \"4\"}", PE_EUNPROCESSABLE,
		     "num_attention_heads");
	expect_error("{\"model_type\": \"llama\", \"hidden_size\": 65, \"num_attention_heads\": 4}", PE_EUNPROCESSABLE,
		     "hidden_size");
	expect_error("{\"model_type\": \"phi3\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"max_position_embeddings\": 8,"
		     "\"rope_scaling\": {\"type\": \"longrope\", \"short_factor\": [1], \"long_factor\": [1]}}",
		     PE_EUNPROCESSABLE, "rope_scaling.short_factor");
	expect_error("{\"model_type\": \"qwen2_vl\", \"hidden_size\": 64, \"num_attention_heads\": 4,"
		     "\"rope_scaling\": {\"type\": \"mrope\", \"mrope_section\": [1, 2, 3]}}",
		     PE_EUNPROCESSABLE, "rope_scaling.mrope_section");
	expect_error("{\"model_type\": \"deepseek_v3\", \"hidden_size\": 64, \"num_attention_heads\": 4}", PE_EUNPROCESSABLE,
		     "qk_rope_head_dim");
}
END_TEST

/* head_dim given wins over hidden_size / num_attention_heads; rope_type over the legacy type. */
START_TEST(given_head_dim_and_rope_type_win)
{
	struct pe_plan plan;
	struct pe_err err;
	ck_assert_int_eq(build("{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"head_dim\": 8,"
			       "\"max_position_embeddings\": 16, \"rope_scaling\": {\"type\": \"dynamic\", \"rope_type\": "
			       "\"linear\", \"factor\": 2}}", NULL, &plan, &err), 0);
	ck_assert_int_eq(plan.enc[0].head_dim, 8);
	ck_assert_int_eq(plan.enc[0].rotary_dim, 8);
	ck_assert(strstr(plan.enc[0].url, "scaling=linear") != NULL);
	ck_assert(strstr(plan.enc[0].url, "len=16&") != NULL);
	ck_assert_uint_eq(plan.nwarnings, 1);
	ck_assert(strstr(plan.warnings[0], "rope_type is used") != NULL);
	pe_plan_destroy(&plan);
}
END_TEST

/* The YaRN factor decision is named when the two readings disagree (Qwen2.5's README config). */
START_TEST(yarn_factor_disagreement_is_a_warning)
{
	struct pe_plan plan;
	plan_fixture("qwen2.5-7b-instruct-yarn.json", NULL, &plan);
	ck_assert(strstr(plan.enc[0].url, "factor=4&") != NULL);
	ck_assert_uint_eq(plan.nwarnings, 1);
	ck_assert(strstr(plan.warnings[0], "factor (4) is used") != NULL);
	pe_plan_destroy(&plan);
	plan_fixture("deepseek-v3.json", NULL, &plan); /* 163840 / 4096 = 40 = factor: nothing to say */
	ck_assert_uint_eq(plan.nwarnings, 0);
	pe_plan_destroy(&plan);
}
END_TEST

/* Gemma 3: sliding_window_pattern and layer_types give the same two tables. */
START_TEST(gemma3_local_and_global)
{
	struct pe_plan a, b;
	plan_fixture("gemma3-4b.json", NULL, &a);
	plan_fixture("gemma3-1b-layer-types.json", NULL, &b);
	ck_assert_uint_eq(a.nenc, 2);
	ck_assert_uint_eq(b.nenc, 2);
	for (size_t i = 0; i < 2; i++) {
		ck_assert_str_eq(a.enc[i].layers, b.enc[i].layers);
		ck_assert(a.enc[i].softmax_scale == 0.0625);
	}
	ck_assert(strstr(a.enc[0].url, "base=1e%2B04&scaling=none&") != NULL); /* canonical, '+' escaped */
	ck_assert(strstr(a.enc[1].url, "base=1e%2B06&scaling=linear&factor=8&") != NULL);
	pe_plan_destroy(&a);
	pe_plan_destroy(&b);
}
END_TEST

/* len: the given one, capped so the table fits max_elements (bisection over the table's shape). */
START_TEST(len_is_capped_to_fit)
{
	struct pe_plan plan;
	struct pe_plan_opts o = {.len = 0, .max_elements = 1000};
	plan_fixture("llama2-7b.json", &o, &plan); /* 2 * len * 128 <= 1000: len 3 */
	ck_assert_int_eq(plan.enc[0].len, 3);
	ck_assert(strstr(plan.warnings[0], "len 4096 capped to 3") != NULL);
	pe_plan_destroy(&plan);
	plan_fixture("bloom-560m.json", &o, &plan); /* 16 * q_len^2 <= 1000: 7; no context length: 2048 warned */
	ck_assert_int_eq(plan.enc[0].len, 7);
	ck_assert_uint_eq(plan.nwarnings, 2);
	pe_plan_destroy(&plan);
	o.len = 5;
	o.max_elements = 0;
	plan_fixture("llama4-scout.json", &o, &plan);
	ck_assert_int_eq(plan.enc[0].len, 5);
	ck_assert_uint_eq(plan.enc[0].nlayers + plan.enc[1].nlayers, 48);
	ck_assert_str_eq(plan.enc[1].kind, "none");
	pe_plan_destroy(&plan);
	struct pe_err err;
	o.len = -1;
	ck_assert_int_eq(build("{}", &o, &plan, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "len");
}
END_TEST

/* A fixture without rope_theta (removed from text_config when it is there, else from the top)
 * gets its transformers config class's default (read in transformers' configuration_<model>.py:
 * default_theta, or the rope_theta default of the text config's __init__), and a warning names it. */
/* The plan of fixture name with the key removed (from text_config when it is there, else the
 * top level). */
static void plan_without(const char *name, const char *key, struct pe_plan *plan)
{
	size_t len;
	json_error_t jerr;
	char *text = read_fixture(name, &len);
	json_t *root = json_loadb(text, len, 0, &jerr);
	free(text);
	ck_assert_ptr_nonnull(root);
	json_t *tc = json_object_get(root, "text_config");
	ck_assert_int_eq(json_object_del(tc && json_object_get(tc, key) ? tc : root, key), 0);
	char *copy = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	struct pe_err err = {0};
	int rc = pe_plan_build(copy, strlen(copy), &defaults, plan, &err);
	free(copy);
	ck_assert_msg(rc == 0, "%s: %s: %s", name, err.param, err.detail);
}

static void plan_without_theta(const char *name, struct pe_plan *plan) { plan_without(name, "rope_theta", plan); }

static int warned(const struct pe_plan *plan, const char *needle)
{
	for (size_t i = 0; i < plan->nwarnings; i++)
		if (strstr(plan->warnings[i], needle))
			return 1;
	return 0;
}

START_TEST(missing_rope_theta_is_the_class_default)
{
	static const struct {
		const char *fixture, *base;
	} cases[] = {
		{"llama4-scout.json", "500000"},     /* Llama4TextConfig.default_theta */
		{"mixtral-8x7b.json", "1000000"},    /* MixtralConfig.default_theta */
		{"qwen2-vl-7b.json", "1000000"},     /* Qwen2VLTextConfig: rope_theta 1000000.0 */
		{"qwen2.5-vl-7b.json", "1000000"},   /* Qwen2_5_VLTextConfig: rope_theta 1000000.0 */
		{"qwen3-vl-8b.json", "500000"},      /* Qwen3VLTextConfig.default_theta */
		{"mistral-7b-v0.1.json", "10000"},   /* the PreTrainedConfig default, unchanged */
		{"deepseek-v3.json", "10000"},
		{"phi3-mini-128k.json", "10000"},
		{"qwen2.5-7b-instruct-yarn.json", "10000"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct pe_plan plan;
		plan_without_theta(cases[i].fixture, &plan);
		const char *base = param_of(&plan.enc[0], "base");
		ck_assert_msg(base && !strcmp(base, cases[i].base), "%s: base %s, expected %s", cases[i].fixture,
			      base ? base : "(none)", cases[i].base);
		int want_warning = strcmp(cases[i].base, "10000") != 0;
		ck_assert_msg(warned(&plan, "no rope_theta") == want_warning, "%s: warning %s", cases[i].fixture,
			      want_warning ? "missing" : "unexpected");
		pe_plan_destroy(&plan);
		plan_fixture(cases[i].fixture, NULL, &plan); /* as published: no such warning */
		ck_assert_msg(!warned(&plan, "no rope_theta"), "%s", cases[i].fixture);
		pe_plan_destroy(&plan);
	}
}
END_TEST

/* A config without its rotary share gets its class's default: GPT-NeoX rotary_pct 0.25, Phi
 * partial_rotary_factor 0.5 (a warning names it); Phi-3, publishing none, rotates whole heads. */
START_TEST(missing_rotary_share_is_the_class_default)
{
	static const struct {
		const char *fixture, *key;
		int head_dim, rotary_dim;
	} cases[] = {
		{"pythia-160m.json", "rotary_pct", 64, 16},             /* GPTNeoXConfig rotary_pct=0.25 */
		{"phi-2.json", "partial_rotary_factor", 80, 40},         /* PhiConfig partial_rotary_factor=0.5 */
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct pe_plan plan;
		plan_without(cases[i].fixture, cases[i].key, &plan);
		ck_assert_int_eq(plan.enc[0].head_dim, cases[i].head_dim);
		ck_assert_msg(plan.enc[0].rotary_dim == cases[i].rotary_dim, "%s: rotary_dim %d, expected %d",
			      cases[i].fixture, plan.enc[0].rotary_dim, cases[i].rotary_dim);
		int want_warning = cases[i].rotary_dim != cases[i].head_dim;
		ck_assert_msg(warned(&plan, "no rotary_pct / partial_rotary_factor") == want_warning, "%s: warning %s",
			      cases[i].fixture, want_warning ? "missing" : "unexpected");
		pe_plan_destroy(&plan);
		plan_fixture(cases[i].fixture, NULL, &plan); /* as published: no such warning */
		ck_assert_msg(!warned(&plan, "no rotary_pct"), "%s", cases[i].fixture);
		pe_plan_destroy(&plan);
	}
	struct pe_plan plan; /* Phi-3 publishes no share: Phi3Config's 1.0, whole heads, no warning */
	plan_fixture("phi3-mini-128k.json", NULL, &plan);
	ck_assert_int_eq(plan.enc[0].rotary_dim, plan.enc[0].head_dim);
	ck_assert(!warned(&plan, "no rotary_pct"));
	pe_plan_destroy(&plan);
}
END_TEST

/* The need of the table of a plan's url (its format= passed over) with its length key at len,
 * answered as fmt (json: with gzip), from the writers' own bounds; *bound: the output's. */
static uint64_t need_at(const char *url, const char *len_key, int64_t len, enum pe_format fmt, uint64_t *bound)
{
	char table[64], lenbuf[32], query[4096], *w = query;
	const char *q = strchr(url, '?');
	const char *const skip[] = {"format", len_key, "k_len", NULL}; /* k_len follows q_len */
	struct pe_params p;
	struct pe_err err = {0};
	ck_assert_ptr_nonnull(q);
	snprintf(table, sizeof table, "%.*s", (int)(q - url - 4), url + 4);
	ck_assert_uint_lt(strlen(q), sizeof query);
	for (const char *r = q + 1; *r; r++) /* the url's only escape: '+' as %2B */
		*w++ = !strncmp(r, "%2B", 3) ? (r += 2, '+') : *r;
	*w = 0;
	pe_params_init(&p, pe_table_find(table));
	snprintf(lenbuf, sizeof lenbuf, "%lld", (long long)len);
	ck_assert_int_eq(pe_query_set(&p, query, skip, &err), 0);
	ck_assert_int_eq(pe_params_set(&p, len_key, lenbuf, &err), 0);
	ck_assert_int_eq(pe_params_finish(&p, &err), 0);
	struct pe_out o = {.fmt = fmt, .gzip = fmt == PE_FMT_JSON, .dt = PE_F32};
	uint64_t b, need = pe_out_table_need(&p, &o, bound ? bound : &b);
	pe_params_destroy(&p);
	return need;
}

static int fits(const struct pe_plan_opts *o, const char *url, const char *len_key, int64_t len, enum pe_format fmt)
{
	uint64_t bound, need = need_at(url, len_key, len, fmt, &bound);
	return need <= o->budget_bytes && bound <= o->max_response_bytes;
}

/* The response limits: a table whose JSON would be over them is planned as npy (a note says so)
 * at the same len; when npy would be over them too, len is capped to the most positions npy fits
 * (a warning names the cap). The limits here: the JSON answer of llama2-7b's table at len 3. */
START_TEST(urls_fit_the_response_limits)
{
	struct pe_plan plan;
	struct pe_plan_opts o = {.len = 3, .max_elements = 0};
	plan_fixture("llama2-7b.json", &o, &plan);
	o.budget_bytes = need_at(plan.enc[0].url, "len", 3, PE_FMT_JSON, &o.max_response_bytes);
	pe_plan_destroy(&plan);
	plan_fixture("llama2-7b.json", &o, &plan); /* 2 * 3 * 128 = 768: JSON */
	ck_assert_ptr_null(plan.enc[0].format);
	ck_assert_ptr_null(strstr(plan.enc[0].url, "format="));
	pe_plan_destroy(&plan);
	o.len = 10; /* 2560: npy at the same len */
	plan_fixture("llama2-7b.json", &o, &plan);
	ck_assert_str_eq(plan.enc[0].format, "npy");
	ck_assert_int_eq(plan.enc[0].len, 10);
	ck_assert_msg(strstr(plan.enc[0].url, "&format=npy") != NULL, "%s", plan.enc[0].url);
	ck_assert(strstr(plan.enc[0].notes[plan.enc[0].nnotes - 1], "format=npy") != NULL);
	ck_assert(!warned(&plan, "capped"));
	pe_plan_destroy(&plan);
	o.len = 100; /* npy holds fewer: the most that fit */
	plan_fixture("llama2-7b.json", &o, &plan);
	ck_assert_str_eq(plan.enc[0].format, "npy");
	int64_t n = plan.enc[0].len;
	ck_assert_msg(n > 10 && n < 100, "len %lld", (long long)n);
	ck_assert(fits(&o, plan.enc[0].url, "len", n, PE_FMT_NPY) && !fits(&o, plan.enc[0].url, "len", n + 1, PE_FMT_NPY));
	char want[64];
	snprintf(want, sizeof want, "len 100 capped to %lld", (long long)n);
	ck_assert(warned(&plan, want));
	ck_assert(warned(&plan, "response limits"));
	pe_plan_destroy(&plan);
	o.len = 0; /* MPT's ALiBi: 32 heads * q_len^2 */
	plan_fixture("mpt-7b.json", &o, &plan);
	ck_assert_str_eq(plan.enc[0].format, "npy");
	n = plan.enc[0].len;
	ck_assert(fits(&o, plan.enc[0].url, "q_len", n, PE_FMT_NPY) && !fits(&o, plan.enc[0].url, "q_len", n + 1, PE_FMT_NPY));
	pe_plan_destroy(&plan);
}
END_TEST

/* The answer is JSON with the fields of the contract; a url is escaped ('+' as %2B). */
START_TEST(json_answer_reads_back)
{
	struct pe_plan plan;
	struct pe_plan_opts o = {.len = 1 << 20, .max_elements = 0};
	plan_fixture("t5-small.json", &o, &plan);
	size_t n;
	char *s = pe_plan_json(&plan, &n);
	json_error_t jerr;
	json_t *j = json_loadb(s, n, 0, &jerr);
	ck_assert_msg(j != NULL, "%s: %s", jerr.text, s);
	ck_assert_str_eq(json_string_value(json_object_get(j, "model_type")), "t5");
	json_t *e = json_array_get(json_object_get(j, "encodings"), 1);
	ck_assert_str_eq(json_string_value(json_object_get(e, "layers")), "decoder");
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(e, "params"), "bidirectional")), 0);
	ck_assert(json_is_null(json_object_get(e, "rotary_dim")));
	ck_assert(json_real_value(json_object_get(e, "softmax_scale")) == 1 ||
		  json_integer_value(json_object_get(e, "softmax_scale")) == 1);
	json_decref(j);
	free(s);
	pe_plan_destroy(&plan);
	o.len = 8;
	plan_fixture("deepseek-v2-lite.json", &o, &plan);
	ck_assert(strchr(plan.enc[0].url, '+') == NULL);
	pe_plan_destroy(&plan);
}
END_TEST

START_TEST(pick_one_encoding)
{
	struct pe_plan plan;
	struct pe_err err = {0};
	plan_fixture("gemma3-4b.json", NULL, &plan);
	ck_assert_ptr_null(pe_plan_pick(&plan, "rope", NULL, &err));
	ck_assert_str_eq(err.param, "layers");
	ck_assert_ptr_eq(pe_plan_pick(&plan, "rope", "full_attention", &err), &plan.enc[1]);
	ck_assert_ptr_null(pe_plan_pick(&plan, "alibi", NULL, &err));
	ck_assert_int_eq(err.code, PE_ENOTFOUND);
	pe_plan_destroy(&plan);
	plan_fixture("llama4-scout.json", NULL, &plan);
	ck_assert_ptr_eq(pe_plan_pick(&plan, "rope", NULL, &err), &plan.enc[0]);
	ck_assert_ptr_eq(pe_plan_pick(&plan, "rope", "5", &err), &plan.enc[0]);
	ck_assert_ptr_null(pe_plan_pick(&plan, "rope", "3", &err)); /* a NoPE layer */
	pe_plan_destroy(&plan);
}
END_TEST

static Suite *plan_suite(void)
{
	Suite *s = suite_create("plan");
	TCase *tc = tcase_create("plan");
	tcase_add_test(tc, json_reader_reads_what_configs_hold);
	tcase_add_test(tc, json_reader_refuses_broken_json);
	tcase_add_test(tc, json_reader_is_bounded);
	tcase_add_test(tc, json_reader_refuses_ill_formed_utf8);
	tcase_add_test(tc, json_reader_reads_long_numbers);
	tcase_add_test(tc, json_reader_many_members);
	tcase_add_test(tc, out_of_range_numbers_name_the_key);
	tcase_add_test(tc, gemma_defaults_are_transformers);
	tcase_add_test(tc, unknown_families_and_types_name_the_key);
	tcase_add_test(tc, given_head_dim_and_rope_type_win);
	tcase_add_test(tc, yarn_factor_disagreement_is_a_warning);
	tcase_add_test(tc, gemma3_local_and_global);
	tcase_add_test(tc, len_is_capped_to_fit);
	tcase_add_test(tc, missing_rope_theta_is_the_class_default);
	tcase_add_test(tc, missing_rotary_share_is_the_class_default);
	tcase_add_test(tc, urls_fit_the_response_limits);
	tcase_add_test(tc, json_answer_reads_back);
	tcase_add_test(tc, pick_one_encoding);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(plan_suite)
