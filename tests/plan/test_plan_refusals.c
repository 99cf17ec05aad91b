/* Model plans refuse what their urls' tables would refuse (src/plan/out.c, cfg.c,
 * scaling.c): a config value the table of its url refuses is a 422 naming the config key it
 * came from, with the table's own reason (the same pe_params_set / pe_params_finish a GET runs);
 * a rope_scaling / rope_parameters / text_config / attn_config of another JSON type is a 422
 * naming it; true and false are not numbers. The same refusals over every published fixture,
 * with every url fetched from a daemon, are tests/e2e/test_plan_mutations.c. */
#include "posenc/core.h"
#include "posenc/output.h"
#include "posenc/plan.h"
#include "support/pe_check.h"
#include "support/pe_table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct pe_plan_opts defaults = {.len = 8, .max_elements = (uint64_t)1 << 26};

/* A Llama config with rope_theta THETA and rope_scaling SCALING (JSON texts). */
#define LLAMA(theta, scaling)                                                                           \
	"{\"model_type\":\"llama\",\"num_attention_heads\":32,\"hidden_size\":4096,\"num_hidden_layers\":2," \
	"\"max_position_embeddings\":131072,\"rope_theta\":" theta ",\"rope_scaling\":" scaling "}"
#define L3(factor, low, high)                                                                        \
	"{\"rope_type\":\"llama3\",\"factor\":" factor ",\"low_freq_factor\":" low ",\"high_freq_factor\":" high \
	",\"original_max_position_embeddings\":8192}"
#define L3_OK L3("8", "1", "4")
#define YARN(extra) "{\"rope_type\":\"yarn\",\"factor\":4,\"original_max_position_embeddings\":32768" extra "}"
/* The newer spelling: everything inside rope_parameters. */
#define PARAMS(inner)                                                                                   \
	"{\"model_type\":\"llama\",\"num_attention_heads\":32,\"hidden_size\":4096,\"num_hidden_layers\":2," \
	"\"max_position_embeddings\":131072,\"rope_parameters\":" inner "}"
#define T5(buckets)                                                                                   \
	"{\"model_type\":\"t5\",\"num_heads\":8,\"d_model\":512,\"d_kv\":64,\"num_layers\":6,"          \
	"\"relative_attention_num_buckets\":" buckets ",\"relative_attention_max_distance\":128}"
#define MPT(attn)                                                                                       \
	"{\"model_type\":\"mpt\",\"n_heads\":32,\"d_model\":4096,\"n_layers\":2,\"max_seq_len\":2048," \
	"\"attn_config\":" attn "}"
#define GEMMA3(local)                                                                                  \
	"{\"model_type\":\"gemma3_text\",\"num_attention_heads\":8,\"hidden_size\":2560,\"head_dim\":256," \
	"\"num_hidden_layers\":6,\"max_position_embeddings\":131072,\"rope_theta\":1000000,"             \
	"\"rope_local_base_freq\":" local ",\"sliding_window_pattern\":6,\"query_pre_attn_scalar\":256}"
#define QWEN_VL(text)                                                                                 \
	"{\"model_type\":\"qwen2_vl\",\"text_config\":" text ",\"num_attention_heads\":28,"           \
	"\"hidden_size\":3584,\"num_hidden_layers\":2,\"max_position_embeddings\":32768,"              \
	"\"rope_scaling\":{\"type\":\"mrope\",\"mrope_section\":[16,24,24]}}"

/* Qwen3-VL and Llama 4 vision towers, Gemma 3n's audio tower: the tower config as given. */
#define QWEN3_VISION(vision)                                                                              \
	"{\"model_type\":\"qwen3_vl\",\"text_config\":{\"num_attention_heads\":32,\"hidden_size\":4096,"   \
	"\"num_hidden_layers\":2,\"max_position_embeddings\":8192,\"rope_scaling\":{\"rope_type\":\"default\","     \
	"\"mrope_section\":[24,20,20],\"mrope_interleaved\":true}},\"vision_config\":" vision "}"
#define QWEN3_V(extra)                                                                                    \
	QWEN3_VISION("{\"model_type\":\"qwen3_vl\",\"hidden_size\":1152,\"num_heads\":16,\"patch_size\":16" extra "}")
#define LLAMA4_VISION(extra)                                                                              \
	"{\"model_type\":\"llama4\",\"text_config\":{\"num_attention_heads\":40,\"hidden_size\":5120,"      \
	"\"head_dim\":128,\"num_hidden_layers\":4,\"max_position_embeddings\":8192},"                         \
	"\"vision_config\":{\"model_type\":\"llama4_vision_model\",\"hidden_size\":1408,"                     \
	"\"num_attention_heads\":16,\"rope_theta\":10000" extra "}}"
#define GEMMA3N_AUDIO(audio)                                                                              \
	"{\"model_type\":\"gemma3n\",\"text_config\":{\"model_type\":\"gemma3n_text\",\"num_attention_heads\":8," \
	"\"hidden_size\":2048,\"head_dim\":256,\"num_hidden_layers\":2,\"max_position_embeddings\":32768,"    \
	"\"layer_types\":[\"sliding_attention\",\"full_attention\"]},"                                         \
	"\"audio_config\":{\"model_type\":\"gemma3n_audio\"" audio "}}"

#define DEEPSEEK(scaling)                                                                               \
	"{\"model_type\":\"deepseek_v3\",\"num_attention_heads\":16,\"hidden_size\":2048,\"num_hidden_layers\":2," \
	"\"max_position_embeddings\":163840,\"qk_rope_head_dim\":64,\"qk_nope_head_dim\":128,\"rope_theta\":10000," \
	"\"rope_scaling\":" scaling "}"

/* A Qwen2 config with layer_types TYPES and rope_parameters PARAMS (as transformers 5 writes them). */
#define PER_TYPE(types, params)                                                                        \
	"{\"model_type\":\"qwen2\",\"num_attention_heads\":28,\"hidden_size\":3584,\"num_hidden_layers\":2," \
	"\"max_position_embeddings\":32768,\"layer_types\":" types ",\"rope_parameters\":" params "}"
#define PER_TYPE_FULL "{\"rope_type\":\"linear\",\"factor\":4,\"rope_theta\":1000000}"
#define PER_TYPE_SLIDING "{\"rope_type\":\"default\",\"rope_theta\":10000}"

struct refusal {
	const char *config;
	const char *param; /* the config key the 422 names */
	const char *detail; /* a part of the detail, or NULL */
	const struct pe_plan_opts *opts; /* NULL: defaults */
};

static void expect_refusal(const struct refusal *c)
{
	struct pe_plan plan;
	struct pe_err err = {0};
	int rc = pe_plan_build(c->config, strlen(c->config), c->opts ? c->opts : &defaults, &plan, &err);
	ck_assert_msg(rc == PE_EUNPROCESSABLE, "%s: %d (%s: %s), expected a 422 naming %s", c->config, rc, err.param,
		      err.detail, c->param);
	ck_assert_msg(!strcmp(err.param, c->param), "%s: names '%s' (%s), expected '%s'", c->config, err.param,
		      err.detail, c->param);
	ck_assert_msg(err.detail[0], "%s: no detail", c->config);
	ck_assert_msg(!c->detail || strstr(err.detail, c->detail), "%s: '%s' lacks '%s'", c->config, err.detail, c->detail);
	ck_assert_uint_eq(plan.nenc, 0); /* nothing to free */
}

/* Values the rope, alibi, relative/t5 tables refuse, each named by the key it came from. */
static const struct refusal table_refusals[] = {
	{LLAMA("500000", L3("0", "1", "4")), "rope_scaling.factor", NULL, NULL},
	{LLAMA("500000", L3("-0", "1", "4")), "rope_scaling.factor", NULL, NULL},
	{LLAMA("500000", L3("-1", "1", "4")), "rope_scaling.factor", NULL, NULL},
	{LLAMA("500000", L3("1e-310", "1", "4")), "rope_scaling.factor", NULL, NULL},
	{LLAMA("500000", L3("1e308", "1", "4")), "rope_scaling.factor", NULL, NULL},
	{LLAMA("500000", L3("8", "0", "4")), "rope_scaling.low_freq_factor", NULL, NULL},
	{LLAMA("500000", L3("8", "1e-310", "4")), "rope_scaling.low_freq_factor", NULL, NULL},
	{LLAMA("500000", L3("8", "1", "-1")), "rope_scaling.high_freq_factor", NULL, NULL},
	{LLAMA("500000", L3("8", "1", "1e308")), "rope_scaling.high_freq_factor", NULL, NULL},
	{LLAMA("10000", YARN(",\"beta_fast\":-1")), "rope_scaling.beta_fast", NULL, NULL},
	{LLAMA("10000", YARN(",\"beta_slow\":0")), "rope_scaling.beta_slow", NULL, NULL},
	{LLAMA("10000", YARN(",\"mscale\":0,\"mscale_all_dim\":1")), "rope_scaling.mscale", NULL, NULL},
	{LLAMA("10000", YARN(",\"mscale\":1,\"mscale_all_dim\":1e308")), "rope_scaling.mscale_all_dim", NULL, NULL},
	{LLAMA("10000", YARN(",\"attention_factor\":-1")), "rope_scaling.attention_factor", NULL, NULL},
	{LLAMA("10000", YARN(",\"attention_factor\":1e300")), "rope_scaling.attention_factor", NULL, NULL},
	{LLAMA("1", YARN("")), "rope_theta", NULL, NULL}, /* YaRN's correction range divides by ln base */
	{PARAMS("{\"rope_type\":\"llama3\",\"rope_theta\":500000,\"factor\":0,\"low_freq_factor\":1,"
		"\"high_freq_factor\":4,\"original_max_position_embeddings\":8192}"),
	 "rope_parameters.factor", NULL, NULL},
	{PARAMS("{\"rope_type\":\"yarn\",\"rope_theta\":1,\"factor\":4,\"original_max_position_embeddings\":8192}"),
	 "rope_parameters.rope_theta", NULL, NULL},
	{GEMMA3("1e-310"), "rope_local_base_freq", NULL, NULL},
	{T5("0"), "relative_attention_num_buckets", NULL, NULL},
	{T5("1e308"), "relative_attention_num_buckets", NULL, NULL},
	{MPT("{\"alibi\":true,\"alibi_bias_max\":100}"), "attn_config.alibi_bias_max", NULL, NULL},
	{MPT("{\"alibi\":true,\"alibi_bias_max\":-1}"), "attn_config.alibi_bias_max", NULL, NULL},
};

START_TEST(a_value_the_table_refuses_names_its_config_key)
{
	expect_refusal(&table_refusals[_i]);
}
END_TEST

/* The plan's reason is the table's own: the detail carries what /v1/rope says of the same value. */
START_TEST(the_reason_is_the_tables_own)
{
	const struct pe_table_def *def = pe_table_find("rope");
	struct pe_params p;
	struct pe_err table = {0}, err = {0};
	struct pe_plan plan;
	ck_assert_ptr_nonnull(def);
	pe_params_init(&p, def);
	int rc = pe_params_set(&p, "dim", "128", &table);
	if (rc == 0)
		rc = pe_params_set(&p, "scaling", "llama3", &table);
	if (rc == 0)
		rc = pe_params_set(&p, "factor", "0", &table);
	if (rc == 0)
		rc = pe_params_set(&p, "original_max_position_embeddings", "8192", &table);
	if (rc == 0)
		rc = pe_params_set(&p, "len", "8", &table);
	if (rc == 0)
		rc = pe_params_finish(&p, &table);
	pe_params_destroy(&p);
	ck_assert_msg(rc != 0 && !strcmp(table.param, "factor"), "/v1/rope takes factor=0 (%d %s)", rc, table.param);
	const char *config = LLAMA("500000", L3("0", "1", "4"));
	ck_assert_int_eq(pe_plan_build(config, strlen(config), &defaults, &plan, &err), PE_EUNPROCESSABLE);
	ck_assert_msg(strstr(err.detail, table.detail) != NULL, "'%s' lacks the table's '%s'", err.detail, table.detail);
	ck_assert_msg(strstr(err.detail, "rope_scaling.factor = 0") != NULL, "%s", err.detail);
}
END_TEST

/* A scaling object, text model or attention config of another JSON type is not dropped. */
static const struct refusal type_refusals[] = {
	{LLAMA("500000", "\"llama3\""), "rope_scaling", NULL, NULL},
	{LLAMA("500000", "[8, 1, 4]"), "rope_scaling", NULL, NULL},
	{LLAMA("500000", "8"), "rope_scaling", NULL, NULL},
	{LLAMA("500000", "true"), "rope_scaling", NULL, NULL},
	{PARAMS("\"default\""), "rope_parameters", NULL, NULL},
	{PARAMS("[]"), "rope_parameters", NULL, NULL},
	{QWEN_VL("\"x\""), "text_config", NULL, NULL},
	{QWEN_VL("3"), "text_config", NULL, NULL},
	{MPT("\"alibi\""), "attn_config", NULL, NULL},
	{"{\"model_type\":\"gemma3_text\",\"num_attention_heads\":8,\"hidden_size\":2560,\"head_dim\":256,"
	 "\"num_hidden_layers\":6,\"max_position_embeddings\":131072,\"rope_parameters\":{\"full_attention\":\"x\","
	 "\"sliding_attention\":{\"rope_type\":\"default\",\"rope_theta\":10000}}}",
	 "rope_parameters.full_attention", NULL, NULL},
	/* booleans are not numbers, at the top and inside the scaling */
	{LLAMA("true", L3_OK), "rope_theta", NULL, NULL},
	{LLAMA("false", L3_OK), "rope_theta", NULL, NULL},
	{LLAMA("500000", L3("true", "1", "4")), "rope_scaling.factor", NULL, NULL},
	{LLAMA("500000", L3("8", "true", "4")), "rope_scaling.low_freq_factor", NULL, NULL},
	{LLAMA("10000", YARN(",\"beta_fast\":true")), "rope_scaling.beta_fast", NULL, NULL},
	{T5("true"), "relative_attention_num_buckets", NULL, NULL},
	{GEMMA3("false"), "rope_local_base_freq", NULL, NULL},
	{DEEPSEEK(YARN(",\"mscale_all_dim\":true")), "rope_scaling.mscale_all_dim", NULL, NULL}, /* its softmax scale's */
};

START_TEST(a_mistyped_key_names_itself)
{
	expect_refusal(&type_refusals[_i]);
}
END_TEST

/* The refusals above are about the type and the value, not the keys: null is still "absent", and
 * the same configs with good values plan. */
START_TEST(good_values_still_plan)
{
	static const char *const ok[] = {
		LLAMA("500000", "null"), LLAMA("500000", L3_OK), LLAMA("10000", YARN(",\"beta_fast\":32,\"beta_slow\":1")),
		T5("32"), MPT("{\"alibi\":true,\"alibi_bias_max\":8}"), GEMMA3("10000"), QWEN_VL("{}"),
		DEEPSEEK(YARN(",\"mscale\":1,\"mscale_all_dim\":1")),
	};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		struct pe_plan plan;
		struct pe_err err = {0};
		int rc = pe_plan_build(ok[i], strlen(ok[i]), &defaults, &plan, &err);
		ck_assert_msg(rc == 0, "%s: %d (%s: %s)", ok[i], rc, err.param, err.detail);
		ck_assert_uint_ge(plan.nenc, 1);
		for (size_t k = 0; k < plan.nwarnings; k++)
			ck_assert_msg(!strstr(plan.warnings[k], "refuses"), "%s: %s", ok[i], plan.warnings[k]);
		pe_plan_destroy(&plan);
	}
}
END_TEST

#define VIT_MAE(image)                                                                                  \
	"{\"model_type\":\"vit_mae\",\"hidden_size\":768,\"num_attention_heads\":12,\"num_hidden_layers\":12," \
	"\"image_size\":" image ",\"patch_size\":16,\"decoder_hidden_size\":512,\"decoder_num_attention_heads\":16}"
#define LLAMA_HEAD(head_dim)                                                                             \
	"{\"model_type\":\"llama\",\"num_attention_heads\":32,\"hidden_size\":2048,\"head_dim\":" head_dim \
	",\"num_hidden_layers\":16,\"max_position_embeddings\":131072,\"rope_theta\":500000}"

static const struct pe_plan_opts small = {.max_elements = 65536}, tiny = {.max_elements = 1000};

/* A table that cannot fit max_elements at its smallest (ViT-MAE's fixed grid, RoPE at len 1) is
 * a 422 naming the key that sizes it, not a url the server answers 413 or a len "capped to 1". */
static const struct refusal size_refusals[] = {
	{VIT_MAE("8192"), "image_size", "max_elements", NULL},      /* 513 x 512 x 768 elements */
	{VIT_MAE("224"), "image_size", "max_elements", &small},     /* the encoder's 197 x 768 */
	{LLAMA_HEAD("65536"), "head_dim", "len 1", &small},         /* 2 x 1 x 65536 */
	{"{\"model_type\":\"bloom\",\"n_head\":2048,\"hidden_size\":2048,\"n_layer\":2}", "n_head", "max_elements", &tiny},
};

START_TEST(a_table_too_large_at_its_smallest_names_its_size_key)
{
	expect_refusal(&size_refusals[_i]);
}
END_TEST

/* Below the bound the same configs plan, and a len is capped only to a length that fits. */
START_TEST(a_table_that_fits_is_planned)
{
	static const char *const ok[] = {VIT_MAE("224"), LLAMA_HEAD("16384")};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		struct pe_plan plan;
		struct pe_err err = {0};
		struct pe_plan_opts o = {.max_elements = i ? 65536 : (uint64_t)1 << 26};
		ck_assert_msg(pe_plan_build(ok[i], strlen(ok[i]), &o, &plan, &err) == 0, "%s: %s %s", ok[i], err.param, err.detail);
		for (size_t k = 0; k < plan.nenc; k++) {
			const struct pe_plan_enc *e = &plan.enc[k];
			int64_t per = !strcmp(e->kind, "rope") ? 2 * (int64_t)e->rotary_dim : 0;
			if (per)
				ck_assert_msg(e->len >= 1 && e->len * per <= 65536, "%s: len %lld", e->url, (long long)e->len);
		}
		pe_plan_destroy(&plan);
	}
}
END_TEST

/* A server whose response limits hold the npy answer of a 4096-element rope table (dim 64, 32
 * positions) and no more, from the writers' own bounds (none as JSON: its head alone is larger). */
static void small_responses(struct pe_plan_opts *o)
{
	struct pe_params p;
	struct pe_err err = {0};
	struct pe_out out = {.fmt = PE_FMT_NPY, .dt = PE_F32};
	ck_assert_int_eq(pe_query_params(&p, "rope", "dim=64&base=500000&layout=half&len=32", &err), 0);
	o->budget_bytes = pe_out_table_need(&p, &out, &o->max_response_bytes);
	pe_params_destroy(&p);
}

/* The response limits too: npy at the largest len that fits, or a 422 when even the smallest
 * table would be over them (never a url the server answers 413). */
START_TEST(a_table_over_the_response_limits_at_its_smallest_names_its_size_key)
{
	struct pe_plan_opts o = {.max_elements = (uint64_t)1 << 26};
	struct pe_plan plan;
	small_responses(&o);
	struct pe_err err = {0};
	const char *config = VIT_MAE("224"); /* 197 x 768 */
	ck_assert_int_eq(pe_plan_build(config, strlen(config), &o, &plan, &err), PE_EUNPROCESSABLE);
	ck_assert_str_eq(err.param, "image_size");
	ck_assert_msg(strstr(err.detail, "response limits") != NULL, "%s", err.detail);
	config = LLAMA_HEAD("4096"); /* 2 x len x 4096: len 1 is 8192 elements */
	ck_assert_int_eq(pe_plan_build(config, strlen(config), &o, &plan, &err), PE_EUNPROCESSABLE);
	ck_assert_str_eq(err.param, "head_dim");
	config = LLAMA_HEAD("64"); /* len 32 fits: capped, as npy */
	ck_assert_int_eq(pe_plan_build(config, strlen(config), &o, &plan, &err), 0);
	ck_assert_int_eq(plan.enc[0].len, 32);
	ck_assert_str_eq(plan.enc[0].format, "npy");
	pe_plan_destroy(&plan);
}
END_TEST

/* A phi3 config whose factor lists make a url longer than max_url: opts.max_url, or the default
 * (PE_PLAN_MAX_URL, posencd's default max_header_bytes less PE_PLAN_URL_ROOM). */
static char *long_lists(int head_dim)
{
	size_t cap = 64 * 1024, n = 0;
	char *s = malloc(cap);
	ck_assert_ptr_nonnull(s);
	n += (size_t)snprintf(s + n, cap - n, "{\"model_type\":\"phi3\",\"num_attention_heads\":32,\"hidden_size\":3072,"
			      "\"head_dim\":%d,\"num_hidden_layers\":2,\"max_position_embeddings\":131072,"
			      "\"original_max_position_embeddings\":4096,\"rope_scaling\":{\"type\":\"longrope\"", head_dim);
	static const char *const lists[] = {"short_factor", "long_factor"};
	for (int l = 0; l < 2; l++) {
		n += (size_t)snprintf(s + n, cap - n, ",\"%s\":[", lists[l]);
		for (int k = 0; k < head_dim / 2; k++)
			n += (size_t)snprintf(s + n, cap - n, "%s1.%016d", k ? "," : "", 1000 + k);
		n += (size_t)snprintf(s + n, cap - n, "]");
	}
	snprintf(s + n, cap - n, "}}");
	return s;
}

START_TEST(a_url_past_the_request_line_names_the_long_key)
{
	char *config = long_lists(2048); /* two lists of 1024 17-digit values: a url of about 39 KB */
	struct pe_plan plan;
	struct pe_err err = {0};
	struct pe_plan_opts o = defaults;
	ck_assert_int_eq(pe_plan_build(config, strlen(config), &o, &plan, &err), PE_EUNPROCESSABLE);
	ck_assert_str_eq(err.param, "rope_scaling.short_factor");
	ck_assert_msg(strstr(err.detail, "28672") != NULL, "%s", err.detail); /* PE_PLAN_MAX_URL */
	free(config);
	config = long_lists(128); /* 2 x 64 values: about 2.5 KB */
	ck_assert_int_eq(pe_plan_build(config, strlen(config), &o, &plan, &err), 0);
	size_t n = strlen(plan.enc[0].url);
	pe_plan_destroy(&plan);
	o.max_url = n - 1; /* a server whose request line is one byte shorter */
	ck_assert_int_eq(pe_plan_build(config, strlen(config), &o, &plan, &err), PE_EUNPROCESSABLE);
	ck_assert_str_eq(err.param, "rope_scaling.short_factor");
	o.max_url = n;
	ck_assert_int_eq(pe_plan_build(config, strlen(config), &o, &plan, &err), 0);
	pe_plan_destroy(&plan);
	free(config);
}
END_TEST

#define MISTRAL(window)                                                                                 \
	"{\"model_type\":\"mistral\",\"num_attention_heads\":32,\"hidden_size\":4096,\"num_hidden_layers\":2," \
	"\"max_position_embeddings\":32768,\"rope_theta\":10000,\"sliding_window\":" window "}"
#define GEMMA2(window)                                                                                  \
	"{\"model_type\":\"gemma2\",\"num_attention_heads\":16,\"hidden_size\":3584,\"head_dim\":256,"      \
	"\"num_hidden_layers\":2,\"max_position_embeddings\":8192,\"sliding_window\":" window "}"
#define QWEN2(use)                                                                                      \
	"{\"model_type\":\"qwen2\",\"num_attention_heads\":28,\"hidden_size\":3584,\"num_hidden_layers\":2," \
	"\"max_position_embeddings\":32768,\"sliding_window\":131072,\"use_sliding_window\":" use "}"
#define VIT(image, patch)                                                                               \
	"{\"model_type\":\"vit\",\"hidden_size\":768,\"num_attention_heads\":12,\"num_hidden_layers\":12," \
	"\"image_size\":" image ",\"patch_size\":" patch "}"
#define FALCON(alibi)                                                                                   \
	"{\"model_type\":\"falcon\",\"num_attention_heads\":32,\"hidden_size\":2048,\"num_hidden_layers\":2," \
	"\"max_position_embeddings\":2048,\"alibi\":" alibi "}"
#define QWEN3_VL(il)                                                                                    \
	"{\"model_type\":\"qwen3_vl\",\"text_config\":{\"num_attention_heads\":32,\"hidden_size\":4096,"    \
	"\"head_dim\":128,\"num_hidden_layers\":2,\"max_position_embeddings\":262144,\"rope_theta\":5000000,"   \
	"\"rope_scaling\":{\"rope_type\":\"default\",\"mrope_section\":[24,20,20],\"mrope_interleaved\":" il "}}}"
#define LLAMA4(nr)                                                                                      \
	"{\"model_type\":\"llama4_text\",\"num_attention_heads\":40,\"hidden_size\":5120,\"head_dim\":128,"  \
	"\"num_hidden_layers\":4,\"max_position_embeddings\":8192,\"rope_theta\":500000,\"no_rope_layers\":" nr "}"
#define T5_DKV(dkv)                                                                                     \
	"{\"model_type\":\"t5\",\"num_heads\":8,\"d_model\":512,\"d_kv\":" dkv ",\"num_layers\":6,"        \
	"\"relative_attention_num_buckets\":32,\"relative_attention_max_distance\":128}"
#define GEMMA3_RP(rp)                                                                                   \
	"{\"model_type\":\"gemma3_text\",\"num_attention_heads\":4,\"hidden_size\":1152,\"head_dim\":256,"   \
	"\"num_hidden_layers\":6,\"max_position_embeddings\":32768,\"rope_parameters\":" rp "}"
#define NEOX(pct)                                                                                       \
	"{\"model_type\":\"gpt_neox\",\"num_attention_heads\":12,\"hidden_size\":768,\"num_hidden_layers\":2," \
	"\"max_position_embeddings\":2048,\"rotary_pct\":" pct "}"

/* Keys read as a number, a boolean, a list or an object are that JSON type or a 422 naming them,
 * whichever family reads them; no read error is dropped on the way to a plan. */
static const struct refusal typed_refusals[] = {
	{MISTRAL("\"4096\""), "sliding_window", NULL, NULL},
	{MISTRAL("true"), "sliding_window", NULL, NULL},
	{MISTRAL("false"), "sliding_window", NULL, NULL},
	{MISTRAL("[4096]"), "sliding_window", NULL, NULL},
	{MISTRAL("{}"), "sliding_window", NULL, NULL},
	{GEMMA2("\"4096\""), "sliding_window", NULL, NULL},
	{GEMMA3("10000") /* no window there: */, NULL, NULL, NULL},
	{QWEN2("\"false\""), "use_sliding_window", "true or false", NULL},
	{QWEN2("0"), "use_sliding_window", "true or false", NULL},
	{VIT("\"224\"", "16"), "image_size", NULL, NULL},
	{VIT("224", "true"), "patch_size", NULL, NULL},
	{VIT("224", "0"), "patch_size", NULL, NULL},
	{VIT_MAE("\"224\""), "image_size", NULL, NULL},
	{MPT("{\"alibi\":true,\"softmax_scale\":true}"), "attn_config.softmax_scale", NULL, NULL},
	{MPT("{\"alibi\":true,\"softmax_scale\":0}"), "attn_config.softmax_scale", NULL, NULL},
	{MPT("{\"alibi\":1}"), "attn_config.alibi", "true or false", NULL},
	{QWEN3_VL("\"true\""), "text_config.rope_scaling.mrope_interleaved", "true or false", NULL},
	{QWEN3_VL("1"), "text_config.rope_scaling.mrope_interleaved", "true or false", NULL},
	{FALCON("\"true\""), "alibi", "true or false", NULL},
	{FALCON("1"), "alibi", "true or false", NULL},
	{LLAMA4("\"x\""), "no_rope_layers", "a list", NULL},
	{LLAMA4("{}"), "no_rope_layers", "a list", NULL},
	{LLAMA4("[1,1,1,2]"), "no_rope_layers", NULL, NULL},
	{GEMMA3_RP("{\"full_attention\":{\"rope_type\":\"linear\",\"factor\":8}}"), "rope_parameters.sliding_attention", NULL, NULL},
	{GEMMA3_RP("{\"full_attention\":{\"rope_type\":\"linear\",\"factor\":0},\"sliding_attention\":{}}"),
	 "rope_parameters.full_attention.factor", NULL, NULL},
	{T5_DKV("0"), "d_kv", NULL, NULL},
	{T5_DKV("1.5"), "d_kv", NULL, NULL},
	{T5_DKV("1e308"), "d_kv", NULL, NULL},
	{LLAMA("500000", "{\"rope_type\":\"llama3\",\"type\":8,\"factor\":8,\"original_max_position_embeddings\":8192}"),
	 "rope_scaling.type", NULL, NULL},
};

START_TEST(a_key_of_another_json_type_names_itself)
{
	if (typed_refusals[_i].param)
		expect_refusal(&typed_refusals[_i]);
}
END_TEST

/* DeepSeek's softmax scale reads mscale_all_dim and factor whatever the url carries: each passes
 * /v1/rope's own check of that parameter, and the scale is a finite number or a 422. */
static const struct refusal deepseek_refusals[] = {
	{DEEPSEEK("{\"rope_type\":\"yarn\",\"factor\":40,\"original_max_position_embeddings\":4096,\"attention_factor\":1,"
		  "\"mscale\":1,\"mscale_all_dim\":1e308}"),
	 "rope_scaling.mscale_all_dim", "/v1/rope refuses it", NULL},
	{DEEPSEEK("{\"rope_type\":\"yarn\",\"factor\":40,\"original_max_position_embeddings\":4096,\"attention_factor\":1,"
		  "\"mscale\":1,\"mscale_all_dim\":-1000}"),
	 "rope_scaling.mscale_all_dim", "/v1/rope refuses it", NULL},
	{DEEPSEEK("{\"type\":\"default\",\"factor\":1e308,\"mscale_all_dim\":1}"), "rope_scaling.factor", "/v1/rope refuses it", NULL},
	{DEEPSEEK("{\"rope_type\":\"yarn\",\"factor\":1e300,\"original_max_position_embeddings\":4096,\"attention_factor\":1,"
		  "\"mscale\":1,\"mscale_all_dim\":1e299}"),
	 "rope_scaling.mscale_all_dim", "not a finite scale", NULL},
};

START_TEST(deepseeks_softmax_scale_is_from_checked_values)
{
	expect_refusal(&deepseek_refusals[_i]);
}
END_TEST

/* The 422 names the key the value was read from, text_config's prefix included. */
static const struct refusal named_refusals[] = {
	{LLAMA("500000", "{\"rope_type\":\"default\",\"partial_rotary_factor\":true}"), "rope_scaling.partial_rotary_factor", NULL, NULL},
	{PARAMS("{\"rope_type\":\"default\",\"partial_rotary_factor\":2}"), "rope_parameters.partial_rotary_factor", NULL, NULL},
	{NEOX("2"), "rotary_pct", NULL, NULL},
	{NEOX("0.001"), "rotary_pct", "at least 2", NULL},
	{QWEN_VL("{\"rope_theta\":true}"), "text_config.rope_theta", NULL, NULL},
	{QWEN_VL("{\"num_attention_heads\":\"28\"}"), "text_config.num_attention_heads", NULL, NULL},
	{DEEPSEEK(YARN("")) /* qk_rope_head_dim 64: plans */, NULL, NULL, NULL},
	{QWEN3_V(",\"num_position_embeddings\":2300"), "vision_config.num_position_embeddings", "square", NULL},
	{QWEN3_V(",\"num_position_embeddings\":\"2304\""), "vision_config.num_position_embeddings", NULL, NULL},
	{LLAMA4_VISION(""), "vision_config.image_size", NULL, NULL},
	{LLAMA4_VISION(",\"image_size\":336,\"patch_size\":0"), "vision_config.patch_size", NULL, NULL},
	{GEMMA3N_AUDIO(",\"hidden_size\":\"1536\""), "audio_config.hidden_size", NULL, NULL},
	{GEMMA3N_AUDIO(",\"conf_attention_context_left\":0"), "audio_config.conf_attention_context_left", NULL, NULL},
	{"{\"model_type\":\"deepseek_v3\",\"num_attention_heads\":16,\"hidden_size\":2048,\"num_hidden_layers\":2,"
	 "\"max_position_embeddings\":163840,\"qk_rope_head_dim\":0,\"qk_nope_head_dim\":128}",
	 "qk_rope_head_dim", "at least 2", NULL},
	/* rope_parameters keyed by layer type: a family with one rotation for every layer refuses it,
	 * and a layer type without its own entry is named */
	{DEEPSEEK("null,\"rope_parameters\":{\"full_attention\":" PER_TYPE_FULL "}"), "rope_parameters.full_attention",
	 "keyed by layer type", NULL},
	{"{\"model_type\":\"gemma2\",\"num_attention_heads\":8,\"hidden_size\":2304,\"head_dim\":256,"
	 "\"num_hidden_layers\":2,\"rope_parameters\":{\"sliding_attention\":{\"rope_type\":\"default\"}}}",
	 "rope_parameters.sliding_attention", "keyed by layer type", NULL},
	{PER_TYPE("[\"full_attention\",\"sliding_attention\"]", "{\"full_attention\":" PER_TYPE_FULL "}"),
	 "rope_parameters.sliding_attention", "layer 1", NULL},
};

START_TEST(the_422_names_the_key_as_the_config_spells_it)
{
	if (named_refusals[_i].param)
		expect_refusal(&named_refusals[_i]);
}
END_TEST

/* A plain-RoPE family with rope_parameters keyed by layer type plans each type's own base and
 * scaling on its layers, not the class default 10000 for all of them. */
START_TEST(rope_parameters_per_layer_type_reach_their_layers)
{
	const char *config = PER_TYPE("[\"sliding_attention\",\"full_attention\"]",
				      "{\"full_attention\":" PER_TYPE_FULL ",\"sliding_attention\":" PER_TYPE_SLIDING "}");
	struct pe_plan plan;
	struct pe_err err = {0};
	ck_assert_int_eq(pe_plan_build(config, strlen(config), &defaults, &plan, &err), 0);
	ck_assert_uint_eq(plan.nenc, 2);
	for (size_t i = 0; i < 2; i++) {
		const struct pe_plan_enc *e = &plan.enc[i];
		int full = !strcmp(e->layers, "full_attention");
		ck_assert_msg(full || !strcmp(e->layers, "sliding_attention"), "layers %s", e->layers);
		ck_assert_uint_eq(e->nlayers, 1);
		ck_assert_int_eq(e->layer_list[0], full ? 1 : 0);
		ck_assert_msg(strstr(e->url, full ? "base=1e%2B06" : "base=1e%2B04"), "%s", e->url);
		ck_assert_msg(!strstr(e->url, "scaling=linear") == !full, "%s", e->url);
	}
	pe_plan_destroy(&plan);
}
END_TEST

/* Llama 4's query-scale table covers the positions of its rotary table, capped alike. */
START_TEST(a_query_scale_has_its_rope_tables_len)
{
	const char *config = "{\"model_type\":\"llama4_text\",\"num_attention_heads\":40,\"hidden_size\":5120,"
			     "\"head_dim\":128,\"num_hidden_layers\":4,\"max_position_embeddings\":10485760,"
			     "\"attn_temperature_tuning\":true}";
	struct pe_plan plan;
	struct pe_err err = {0};
	ck_assert_int_eq(pe_plan_build(config, strlen(config), &defaults, &plan, &err), 0);
	int64_t rope = 0, qs = 0;
	for (size_t i = 0; i < plan.nenc; i++) {
		if (!strcmp(plan.enc[i].kind, "rope"))
			rope = plan.enc[i].len;
		if (!strcmp(plan.enc[i].kind, "query_scale"))
			qs = plan.enc[i].len;
	}
	ck_assert_int_lt(rope, 10485760); /* capped by max_elements */
	ck_assert_int_eq(qs, rope);
	pe_plan_destroy(&plan);
}
END_TEST

/* len is 1 to 2^30, as ?len= of POST /v1/plan. */
START_TEST(len_past_2_30_is_refused)
{
	const char *config = LLAMA("500000", L3_OK);
	struct pe_plan plan;
	struct pe_err err = {0};
	struct pe_plan_opts o = {.len = PE_PLAN_MAX_LEN + 1, .max_elements = (uint64_t)1 << 26};
	ck_assert_int_eq(pe_plan_build(config, strlen(config), &o, &plan, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "len");
	o.len = PE_PLAN_MAX_LEN;
	ck_assert_int_eq(pe_plan_build(config, strlen(config), &o, &plan, &err), 0);
	pe_plan_destroy(&plan);
}
END_TEST

#define NELEM(a) (int)(sizeof a / sizeof a[0])

static Suite *suite(void)
{
	Suite *s = suite_create("plan_refusals");
	TCase *tc = tcase_create("core");
	tcase_add_loop_test(tc, a_value_the_table_refuses_names_its_config_key, 0,
			    (int)(sizeof table_refusals / sizeof table_refusals[0]));
	tcase_add_test(tc, the_reason_is_the_tables_own);
	tcase_add_loop_test(tc, a_mistyped_key_names_itself, 0, (int)(sizeof type_refusals / sizeof type_refusals[0]));
	tcase_add_test(tc, good_values_still_plan);
	tcase_add_loop_test(tc, a_table_too_large_at_its_smallest_names_its_size_key, 0, NELEM(size_refusals));
	tcase_add_test(tc, a_table_that_fits_is_planned);
	tcase_add_test(tc, a_url_past_the_request_line_names_the_long_key);
	tcase_add_test(tc, a_table_over_the_response_limits_at_its_smallest_names_its_size_key);
	tcase_add_loop_test(tc, a_key_of_another_json_type_names_itself, 0, NELEM(typed_refusals));
	tcase_add_loop_test(tc, deepseeks_softmax_scale_is_from_checked_values, 0, NELEM(deepseek_refusals));
	tcase_add_loop_test(tc, the_422_names_the_key_as_the_config_spells_it, 0, NELEM(named_refusals));
	tcase_add_test(tc, len_past_2_30_is_refused);
	tcase_add_test(tc, rope_parameters_per_layer_type_reach_their_layers);
	tcase_add_test(tc, a_query_scale_has_its_rope_tables_len);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
