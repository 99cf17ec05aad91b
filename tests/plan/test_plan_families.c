/* The plans of issue #34's families against their known answers (tests/data/plan_families/, from
 * tests/ref/gen_plan_families.py, which re-implements each model's transformers code in float32
 * torch): for every published config under tests/data/configs/ with an answer, each answered
 * encoding is in the plan with its tower, kind and layers, its softmax_scale, layout, rotary width
 * and base, an M-RoPE url's variant, a learned table's position offset (a vision table's grid, or
 * its axes), ALiBi's bias_scale; and the cos/sin of each rope
 * table, fetched from the plan's own url with compat=hf at the answer's positions (offset= one
 * row each, seq_len= the answer's sequence), within 1 float32 ulp of the answer (YaRN and LongRoPE
 * multiply by attention_scaling after cos: docs/models.md). */
#include "posenc/core.h"
#include "posenc/plan.h"
#include "support/pe_check.h"
#include "support/pe_table.h"

#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DIR_ANSWERS "tests/data/plan_families"
#define ULPS 1

static float f32_of_hex(const char *hex)
{
	uint32_t u = (uint32_t)strtoul(hex, NULL, 16);
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

/* The plan's layers as the answers write them: a name ("all", "encoder") or the index list. */
static int same_layers(const struct pe_plan_enc *e, const json_t *want)
{
	if (json_is_string(want))
		return e->layers && !strcmp(e->layers, json_string_value(want));
	if (!json_is_array(want) || json_array_size(want) != e->nlayers || (e->layers && !strcmp(e->layers, "all")))
		return 0;
	for (size_t k = 0; k < e->nlayers; k++)
		if (json_integer_value(json_array_get(want, k)) != e->layer_list[k])
			return 0;
	return 1;
}

static const char *plan_kind(const json_t *x)
{
	const char *k = json_string_value(json_object_get(x, "kind"));
	return !strcmp(k, "t5") ? "relative/t5" : !strcmp(k, "deberta") ? "relative/deberta" : k;
}

/* The encoding of the plan that answers x (unused so far), or NULL. An answer's rope with
 * mrope_section is the plan's mrope (text alone: the same table). */
static const struct pe_plan_enc *find(const struct pe_plan *plan, const json_t *x, int *used)
{
	const char *kind = plan_kind(x), *tower = json_string_value(json_object_get(x, "tower"));
	int mrope = !strcmp(kind, "rope") && json_object_get(x, "mrope_section");
	for (size_t i = 0; i < plan->nenc; i++) {
		const struct pe_plan_enc *e = &plan->enc[i];
		if (used[i] || strcmp(e->tower, tower) || (strcmp(e->kind, kind) && !(mrope && !strcmp(e->kind, "mrope"))))
			continue;
		if (same_layers(e, json_object_get(x, "layers"))) {
			used[i] = 1;
			return e;
		}
	}
	return NULL;
}

/* The last of plan's encodings of kind (any when NULL) in tower (any when NULL), or NULL. */
static const struct pe_plan_enc *enc_of(const struct pe_plan *plan, const char *kind, const char *tower)
{
	const struct pe_plan_enc *found = NULL;
	for (size_t i = 0; i < plan->nenc; i++)
		if ((!kind || !strcmp(plan->enc[i].kind, kind)) && (!tower || !strcmp(plan->enc[i].tower, tower)))
			found = &plan->enc[i];
	return found;
}

static const char *param(const struct pe_plan_enc *e, const char *key)
{
	for (size_t k = 0; k < e->nparams; k++)
		if (!strcmp(e->params[k].key, key))
			return e->params[k].value;
	return NULL;
}

/* The plan's url as a query with key=value replaced or added (the table's own parameter names). */
static void set_query(char *q, size_t cap, const char *url, const char *const *kv)
{
	const char *s = strchr(url, '?') + 1;
	size_t n = 0;
	q[0] = 0;
	while (*s) {
		size_t len = strcspn(s, "&"), klen = strcspn(s, "=");
		int drop = 0;
		for (int i = 0; kv[i]; i += 2)
			drop |= klen == strlen(kv[i]) && !strncmp(s, kv[i], klen);
		if (!drop && strncmp(s, "format=", 7))
			for (size_t k = 0; k < len && n + 4 < cap; k++)
				n += (size_t)snprintf(q + n, cap - n, "%s", !strncmp(s + k, "%2B", 3) ? (k += 2, "+") : (char[2]){s[k], 0});
		if (!drop && strncmp(s, "format=", 7))
			q[n++] = '&';
		s += len + (s[len] == '&');
	}
	for (int i = 0; kv[i]; i += 2)
		n += (size_t)snprintf(q + n, cap - n, "%s=%s&", kv[i], kv[i + 1]);
	q[n ? n - 1 : 0] = 0;
}

/* Each table of a rope answer against the plan's url at the same positions. */
static void check_rope_tables(const char *cfg, const struct pe_plan_enc *e, const json_t *x)
{
	const json_t *tables = json_object_get(x, "tables"), *t;
	const char *layout = json_string_value(json_object_get(x, "layout"));
	size_t ti;
	if (!e->url || strncmp(e->url, "/v1/rope?", 9))
		return; /* mrope's text table is rope's; checked by test_mrope */
	json_array_foreach(tables, ti, t) {
		const json_t *pos = json_object_get(t, "positions"), *cos = json_object_get(t, "cos"), *sin = json_object_get(t, "sin");
		char seq[32], off[32], query[16384];
		snprintf(seq, sizeof seq, "%lld", (long long)json_integer_value(json_object_get(t, "seq_len")));
		for (size_t pi = 0; pi < json_array_size(pos); pi++) {
			snprintf(off, sizeof off, "%lld", (long long)json_integer_value(json_array_get(pos, pi)));
			int seqd = strstr(e->url, "seq_len=") != NULL;
			const char *const kv[] = {"len", "1", "offset", off, "compat", "hf", seqd ? "seq_len" : NULL, seq, NULL};
			set_query(query, sizeof query, e->url, kv);
			struct pe_shape s;
			float *v = pe_query_table("rope", query, PE_F32, &s);
			size_t dim = s.dim[s.rank - 1], half = json_array_size(json_array_get(cos, pi));
			/* a proportional table spans the whole head; its first pairs are the answer's */
			ck_assert(half * 2 == dim || (half * 2 < dim && strstr(query, "scaling=proportional")));
			for (size_t i = 0; i < half; i++) {
				size_t ch = !strcmp(layout, "half") ? i : 2 * i;
				float wc = f32_of_hex(json_string_value(json_array_get(json_array_get(cos, pi), i)));
				float ws = f32_of_hex(json_string_value(json_array_get(json_array_get(sin, pi), i)));
				ck_assert_msg(pe_ulp_f32(v[ch], wc) <= ULPS && pe_ulp_f32(v[dim + ch], ws) <= ULPS,
					      "%s: %s pos %s pair %zu: cos %a sin %a, answer %a %a", cfg, query, off, i, v[ch],
					      v[dim + ch], wc, ws);
			}
			free(v);
		}
	}
}

/* A table per axis (Gemma 4's vision): the axes in the answer's order, comma-separated in the
 * plan, and the answer's shape [axes, positions, dim]; a table of one axis names none. */
static void check_per_axis(const char *cfg, const struct pe_plan_enc *e, const json_t *x)
{
	const json_t *axes = json_object_get(x, "per_axis"), *shape = json_object_get(x, "shape"), *a;
	const char *got = param(e, "per_axis");
	char want[64] = "";
	size_t i, n = 0;
	json_array_foreach(axes, i, a)
		n += (size_t)snprintf(want + n, sizeof want - n, "%s%s", i ? "," : "", json_string_value(a));
	ck_assert_msg(axes ? got && !strcmp(got, want) : !got, "%s: per_axis %s, answer %s", cfg, got ? got : "none",
		      axes ? want : "none");
	if (!shape)
		return;
	ck_assert_int_eq(json_integer_value(json_array_get(shape, 0)), (json_int_t)json_array_size(axes));
	ck_assert_int_eq(json_integer_value(json_array_get(shape, 1)), atoll(param(e, "positions")));
	ck_assert_msg(param(e, "dim") && json_integer_value(json_array_get(shape, 2)) == atoll(param(e, "dim")), "%s: dim %s",
		      cfg, param(e, "dim") ? param(e, "dim") : "none");
}

/* A learned table's size, its position offset, a table per axis, and a vision table's grid and
 * class tokens. */
static void check_learned(const char *cfg, const struct pe_plan_enc *e, const json_t *x)
{
	const char *off = param(e, "position_offset"), *grid = param(e, "grid"), *cls = param(e, "class_tokens");
	const json_t *g = json_object_get(x, "grid");
	ck_assert_msg(param(e, "positions") && atoll(param(e, "positions")) == json_integer_value(json_object_get(x, "num_positions")),
		      "%s: learned positions %s", cfg, param(e, "positions"));
	ck_assert_msg(json_integer_value(json_object_get(x, "offset")) == (off ? atoi(off) : 0), "%s: offset %s", cfg,
		      off ? off : "0");
	check_per_axis(cfg, e, x);
	if (!g)
		return;
	char want[48];
	snprintf(want, sizeof want, "%lldx%lld", (long long)json_integer_value(json_array_get(g, 0)),
		 (long long)json_integer_value(json_array_get(g, 1)));
	ck_assert_msg(grid && !strcmp(grid, want), "%s: grid %s, answer %s", cfg, grid ? grid : "none", want);
	ck_assert_msg(json_integer_value(json_object_get(x, "cls_tokens")) == (cls ? atoi(cls) : 0), "%s: class tokens %s",
		      cfg, cls ? cls : "0");
}

static void check_encoding(const char *cfg, const struct pe_plan_enc *e, const json_t *x)
{
	const json_t *sm = json_object_get(x, "softmax_scale");
	if (json_is_number(sm))
		ck_assert_msg(fabs(e->softmax_scale - json_number_value(sm)) <= 1e-12 * fabs(json_number_value(sm)),
			      "%s %s: softmax_scale %.17g, answer %.17g", cfg, e->kind, e->softmax_scale, json_number_value(sm));
	const char *kind = plan_kind(x);
	if (!strcmp(kind, "rope")) {
		const char *layout = json_string_value(json_object_get(x, "layout"));
		ck_assert_msg(!layout || (e->layout && !strcmp(e->layout, layout)), "%s: layout %s, answer %s", cfg, e->layout,
			      layout);
		if (!e->url)
			return; /* no url (a table this posenc lacks): nothing to fetch */
		const json_t *base = json_object_get(x, "base");
		if (json_is_number(base) && param(e, "base"))
			ck_assert_msg(fabs(strtod(param(e, "base"), NULL) - json_number_value(base)) <= 1e-9 * json_number_value(base),
				      "%s: base %s, answer %.17g", cfg, param(e, "base"), json_number_value(base));
		check_rope_tables(cfg, e, x);
	}
	if (!strcmp(kind, "mrope")) {
		const char *layout = json_string_value(json_object_get(x, "layout"));
		ck_assert_msg(e->layout && !strcmp(e->layout, layout), "%s: mrope layout %s, answer %s", cfg, e->layout, layout);
		ck_assert_msg(!strcmp(layout, "half") == !strstr(e->url, "layout=interleaved"), "%s: %s", cfg, e->url);
		/* how its videos are numbered: the answer's variant, none for Qwen2-VL's (the default) */
		const char *v = json_string_value(json_object_get(x, "variant")), *got = param(e, "variant");
		ck_assert_msg(v ? got && !strcmp(got, v) : !got || !strcmp(got, "qwen2vl"), "%s: mrope variant %s, answer %s", cfg,
			      got ? got : "none", v ? v : "none");
	}
	if (!strcmp(kind, "learned"))
		check_learned(cfg, e, x);
	if (!strcmp(kind, "rope2d")) {
		const char *v = param(e, "variant");
		ck_assert_int_eq(e->head_dim, json_integer_value(json_object_get(x, "head_dim")));
		ck_assert_msg(v && (!strcmp(v, json_string_value(json_object_get(x, "variant"))) ||
				    (!strcmp(v, "qwen2vl") && json_object_get(x, "variant") &&
				     !strcmp(json_string_value(json_object_get(x, "variant")), "glm4v"))),
			      "%s: rope2d variant %s", cfg, v ? v : "none");
	}
	if (!strcmp(kind, "alibi") && json_object_get(x, "bias_scale"))
		ck_assert(fabs(e->bias_scale - json_number_value(json_object_get(x, "bias_scale"))) < 1e-12);
}

static void check_answer(const char *name)
{
	char path[512];
	snprintf(path, sizeof path, DIR_ANSWERS "/%s", name);
	json_t *ans = json_load_file(path, 0, NULL), *x;
	ck_assert_msg(ans != NULL, "%s", path);
	const char *cfg = json_string_value(json_object_get(ans, "config"));
	snprintf(path, sizeof path, "tests/data/configs/%s", cfg);
	size_t n, i;
	char *text = pe_test_read_file(path, &n);
	struct pe_plan plan;
	struct pe_err err = {0};
	struct pe_plan_opts o = {.len = 8, .max_elements = (uint64_t)1 << 26};
	ck_assert_msg(pe_plan_build(text, n, &o, &plan, &err) == 0, "%s: %s: %s", cfg, err.param, err.detail);
	int used[PE_PLAN_MAX_ENC] = {0};
	json_array_foreach(json_object_get(ans, "encodings"), i, x) {
		const struct pe_plan_enc *e = find(&plan, x, used);
		const char *tower = json_string_value(json_object_get(x, "tower"));
		ck_assert_msg(e != NULL, "%s: no %s %s encoding on its layers", cfg, tower, plan_kind(x));
		check_encoding(cfg, e, x);
	}
	for (size_t k = 0; k < plan.nenc; k++)
		ck_assert_msg(used[k] || !strcmp(plan.enc[k].kind, "query_scale"), "%s: %s %s (%s) is not in the answer", cfg,
			      plan.enc[k].tower, plan.enc[k].kind, plan.enc[k].layers ? plan.enc[k].layers : "listed");
	pe_plan_destroy(&plan);
	free(text);
	json_decref(ans);
}

static void plan_of(const char *config, const char *patch_key, const char *patch, struct pe_plan *plan)
{
	char path[256];
	size_t n;
	snprintf(path, sizeof path, "tests/data/configs/%s", config);
	char *text = pe_test_read_file(path, &n);
	json_t *root = json_loadb(text, n, 0, NULL);
	ck_assert_ptr_nonnull(root);
	json_t *where = json_is_object(json_object_get(root, "text_config")) ? json_object_get(root, "text_config") : root;
	if (patch_key) /* in the text model's keys */
		json_object_set_new(where, patch_key, json_loads(patch, JSON_DECODE_ANY, NULL));
	char *body = json_dumps(root, JSON_COMPACT);
	struct pe_err err = {0};
	struct pe_plan_opts o = {.len = 8, .max_elements = (uint64_t)1 << 26};
	ck_assert_msg(pe_plan_build(body, strlen(body), &o, plan, &err) == 0, "%s: %s: %s", config, err.param, err.detail);
	free(body);
	free(text);
	json_decref(root);
}

/* Falcon adds ALiBi before the 1/sqrt(head_dim) scale, BLOOM and MPT after. */
START_TEST(alibi_says_its_bias_scale)
{
	static const struct {
		const char *config;
		double bias_scale;
	} cases[] = {{"falcon-rw-1b.json", 0.125}, {"bloom-560m.json", 1}, {"mpt-7b.json", 1}};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct pe_plan plan;
		plan_of(cases[i].config, NULL, NULL, &plan);
		ck_assert_str_eq(plan.enc[0].kind, "alibi");
		ck_assert_msg(plan.enc[0].bias_scale == cases[i].bias_scale, "%s: %g", cases[i].config, plan.enc[0].bias_scale);
		size_t n;
		char *json = pe_plan_json(&plan, &n);
		ck_assert_ptr_nonnull(strstr(json, "\"bias_scale\":"));
		free(json);
		pe_plan_destroy(&plan);
	}
}
END_TEST

/* Query scaling is named with the endpoint's parameter names, on the layers it applies to. */
START_TEST(query_scale_is_planned_where_the_config_turns_it_on)
{
	struct pe_plan plan;
	plan_of("ministral-3-8b-instruct-2512.json", NULL, NULL, &plan);
	const struct pe_plan_enc *q = enc_of(&plan, "query_scale", NULL);
	ck_assert_ptr_nonnull(q);
	ck_assert_str_eq(param(q, "variant"), "ministral3");
	ck_assert_str_eq(param(q, "beta"), "0.1");
	ck_assert_str_eq(param(q, "original_max_position_embeddings"), "16384");
	ck_assert_str_eq(q->layers, "all");
	ck_assert(!q->url || !strncmp(q->url, "/v1/rope/query-scale?", 21));
	pe_plan_destroy(&plan);
	plan_of("llama4-scout.json", NULL, NULL, &plan);
	q = enc_of(&plan, "query_scale", NULL);
	ck_assert_ptr_nonnull(q);
	ck_assert_str_eq(param(q, "variant"), "llama4");
	ck_assert_str_eq(param(q, "attn_scale"), "0.1");
	ck_assert_str_eq(param(q, "floor_scale"), "8192");
	ck_assert_uint_eq(q->nlayers, 12); /* the NoPE layers: every 4th of 48 */
	ck_assert_int_eq(q->layer_list[0], 3);
	pe_plan_destroy(&plan);
	plan_of("llama4-scout.json", "attn_temperature_tuning", "false", &plan);
	ck_assert_ptr_null(enc_of(&plan, "query_scale", NULL));
	pe_plan_destroy(&plan);
}
END_TEST

/* Gemma 3n's audio conformer: the t2t sinusoid of relative positions 0 .. context_left - 1; one
 * looking ahead (negative positions) has no table posenc serves, and says so. */
START_TEST(gemma3n_audio_tower_is_its_relative_sinusoid)
{
	size_t n;
	char *text = pe_test_read_file("tests/data/configs/gemma-3n-e4b-it.json", &n);
	json_t *root = json_loadb(text, n, 0, NULL);
	ck_assert_ptr_nonnull(root);
	for (int ahead = 0; ahead < 2; ahead++) {
		json_object_set_new(json_object_get(root, "audio_config"), "conf_attention_context_right", json_integer(ahead));
		char *body = json_dumps(root, JSON_COMPACT);
		struct pe_plan plan;
		struct pe_err err = {0};
		struct pe_plan_opts o = {.len = 8, .max_elements = (uint64_t)1 << 26};
		ck_assert_msg(pe_plan_build(body, strlen(body), &o, &plan, &err) == 0, "%s: %s", err.param, err.detail);
		const struct pe_plan_enc *a = enc_of(&plan, NULL, "audio");
		ck_assert_ptr_nonnull(a);
		ck_assert_str_eq(a->kind, "sinusoidal");
		ck_assert_str_eq(param(a, "variant"), "t2t");
		ck_assert_str_eq(param(a, "dim"), "1536");
		ck_assert(isnan(a->softmax_scale));
		if (!ahead) {
			ck_assert_ptr_nonnull(a->url);
			ck_assert_ptr_nonnull(strstr(a->url, "len=13&"));
		} else {
			int warned = 0;
			ck_assert_ptr_null(a->url);
			for (size_t k = 0; k < plan.nwarnings; k++)
				warned |= strstr(plan.warnings[k], "conf_attention_context_right") != NULL;
			ck_assert(warned);
		}
		pe_plan_destroy(&plan);
		free(body);
	}
	json_decref(root);
	free(text);
}
END_TEST

/* DeepSeek-V2's code never reads rope_interleave; V3's does. */
START_TEST(rope_interleave_is_read_by_deepseek_v3_only)
{
	struct pe_plan plan;
	plan_of("deepseek-v2-lite.json", "rope_interleave", "false", &plan);
	ck_assert_str_eq(plan.enc[0].layout, "interleaved");
	pe_plan_destroy(&plan);
	plan_of("deepseek-v3.json", "rope_interleave", "false", &plan);
	ck_assert_str_eq(plan.enc[0].layout, "half");
	pe_plan_destroy(&plan);
}
END_TEST

/* gemma-3-4b-it's text_config omits num_attention_heads and head_dim: Gemma3TextConfig's. */
START_TEST(class_defaults_fill_what_a_text_config_omits)
{
	struct pe_plan plan;
	plan_of("gemma-3-4b-it.json", NULL, NULL, &plan);
	ck_assert_int_eq(plan.enc[0].head_dim, 256);
	int warned = 0;
	for (size_t k = 0; k < plan.nwarnings; k++)
		warned |= strstr(plan.warnings[k], "no num_attention_heads: 8") != NULL;
	ck_assert(warned);
	ck_assert_str_eq(plan.enc[plan.nenc - 1].tower, "vision");
	pe_plan_destroy(&plan);
}
END_TEST

/* Gemma 4's vision table per axis: its axes are a JSON list of names in the plan's answer (a comma
 * list of words is not numbers), the table [2, position_embedding_size, hidden], scaled by 1. */
START_TEST(gemma4_vision_learned_per_axis)
{
	struct pe_plan plan;
	plan_of("gemma-4-e2b-it.json", NULL, NULL, &plan);
	const struct pe_plan_enc *l = enc_of(&plan, "learned", "vision");
	ck_assert_ptr_nonnull(l);
	ck_assert_str_eq(param(l, "positions"), "10240");
	ck_assert_str_eq(param(l, "dim"), "768");
	ck_assert_double_eq(l->softmax_scale, 1);
	size_t n;
	char *text = pe_plan_json(&plan, &n);
	json_error_t jerr;
	json_t *j = json_loadb(text, n, 0, &jerr), *e, *axes = NULL;
	ck_assert_msg(j != NULL, "the plan is not JSON: %s", jerr.text);
	size_t i;
	json_array_foreach(json_object_get(j, "encodings"), i, e)
		if (!strcmp(json_string_value(json_object_get(e, "kind")), "learned"))
			axes = json_object_get(json_object_get(e, "params"), "per_axis");
	ck_assert_uint_eq(json_array_size(axes), 2);
	ck_assert_str_eq(json_string_value(json_array_get(axes, 0)), "col");
	ck_assert_str_eq(json_string_value(json_array_get(axes, 1)), "row");
	json_decref(j);
	free(text);
	pe_plan_destroy(&plan);
}
END_TEST

static char **names;
static size_t nnames;

START_TEST(every_family_plans_as_its_model_computes)
{
	check_answer(names[_i]);
}
END_TEST

/* The answers exist: a missing directory must not pass as an empty loop. */
START_TEST(the_answers_are_there)
{
	ck_assert_uint_ge(nnames, 60);
}
END_TEST

int main(void)
{
	DIR *d = opendir(DIR_ANSWERS);
	struct dirent *de;
	while (d && (de = readdir(d)) != NULL) {
		size_t l = strlen(de->d_name);
		if (l < 6 || strcmp(de->d_name + l - 5, ".json"))
			continue;
		names = realloc(names, (nnames + 1) * sizeof *names);
		names[nnames++] = strdup(de->d_name);
	}
	if (d)
		closedir(d);
	Suite *s = suite_create("plan_families");
	TCase *tc = tcase_create("families");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, the_answers_are_there);
	tcase_add_test(tc, alibi_says_its_bias_scale);
	tcase_add_test(tc, query_scale_is_planned_where_the_config_turns_it_on);
	tcase_add_test(tc, rope_interleave_is_read_by_deepseek_v3_only);
	tcase_add_test(tc, gemma3n_audio_tower_is_its_relative_sinusoid);
	tcase_add_test(tc, class_defaults_fill_what_a_text_config_omits);
	tcase_add_test(tc, gemma4_vision_learned_per_axis);
	tcase_add_loop_test(tc, every_family_plans_as_its_model_computes, 0, (int)nnames);
	suite_add_tcase(s, tc);
	return pe_test_run(s);
}
