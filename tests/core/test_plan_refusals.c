/* Model plans refuse what their urls' tables would refuse (src/core/plan_out.c, plan_cfg.c,
 * plan_scaling.c): a config value the table of its url refuses is a 422 naming the config key it
 * came from, with the table's own reason (the same pe_params_set / pe_params_finish a GET runs);
 * a rope_scaling / rope_parameters / text_config / attn_config of another JSON type is a 422
 * naming it; true and false are not numbers. The same refusals over every published fixture,
 * with every url fetched from a daemon, are tests/e2e/test_plan_mutations.c. */
#include "posenc/core.h"
#include "posenc/plan.h"
#include "support/pe_check.h"

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

#define DEEPSEEK(scaling)                                                                               \
	"{\"model_type\":\"deepseek_v3\",\"num_attention_heads\":16,\"hidden_size\":2048,\"num_hidden_layers\":2," \
	"\"max_position_embeddings\":163840,\"qk_rope_head_dim\":64,\"qk_nope_head_dim\":128,\"rope_theta\":10000," \
	"\"rope_scaling\":" scaling "}"

struct refusal {
	const char *config;
	const char *param; /* the config key the 422 names */
};

static void expect_refusal(const struct refusal *c)
{
	struct pe_plan plan;
	struct pe_err err = {0};
	int rc = pe_plan_build(c->config, strlen(c->config), &defaults, &plan, &err);
	ck_assert_msg(rc == PE_EUNPROCESSABLE, "%s: %d (%s: %s), expected a 422 naming %s", c->config, rc, err.param,
		      err.detail, c->param);
	ck_assert_msg(!strcmp(err.param, c->param), "%s: names '%s' (%s), expected '%s'", c->config, err.param,
		      err.detail, c->param);
	ck_assert_msg(err.detail[0], "%s: no detail", c->config);
	ck_assert_uint_eq(plan.nenc, 0); /* nothing to free */
}

/* Values the rope, alibi, relative/t5 tables refuse, each named by the key it came from. */
static const struct refusal table_refusals[] = {
	{LLAMA("500000", L3("0", "1", "4")), "rope_scaling.factor"},
	{LLAMA("500000", L3("-0", "1", "4")), "rope_scaling.factor"},
	{LLAMA("500000", L3("-1", "1", "4")), "rope_scaling.factor"},
	{LLAMA("500000", L3("1e-310", "1", "4")), "rope_scaling.factor"},
	{LLAMA("500000", L3("1e308", "1", "4")), "rope_scaling.factor"},
	{LLAMA("500000", L3("8", "0", "4")), "rope_scaling.low_freq_factor"},
	{LLAMA("500000", L3("8", "1e-310", "4")), "rope_scaling.low_freq_factor"},
	{LLAMA("500000", L3("8", "1", "-1")), "rope_scaling.high_freq_factor"},
	{LLAMA("500000", L3("8", "1", "1e308")), "rope_scaling.high_freq_factor"},
	{LLAMA("10000", YARN(",\"beta_fast\":-1")), "rope_scaling.beta_fast"},
	{LLAMA("10000", YARN(",\"beta_slow\":0")), "rope_scaling.beta_slow"},
	{LLAMA("10000", YARN(",\"mscale\":0,\"mscale_all_dim\":1")), "rope_scaling.mscale"},
	{LLAMA("10000", YARN(",\"mscale\":1,\"mscale_all_dim\":1e308")), "rope_scaling.mscale_all_dim"},
	{LLAMA("10000", YARN(",\"attention_factor\":-1")), "rope_scaling.attention_factor"},
	{LLAMA("10000", YARN(",\"attention_factor\":1e300")), "rope_scaling.attention_factor"},
	{LLAMA("1", YARN("")), "rope_theta"}, /* YaRN's correction range divides by ln base */
	{PARAMS("{\"rope_type\":\"llama3\",\"rope_theta\":500000,\"factor\":0,\"low_freq_factor\":1,"
		"\"high_freq_factor\":4,\"original_max_position_embeddings\":8192}"),
	 "rope_parameters.factor"},
	{PARAMS("{\"rope_type\":\"yarn\",\"rope_theta\":1,\"factor\":4,\"original_max_position_embeddings\":8192}"),
	 "rope_parameters.rope_theta"},
	{GEMMA3("1e-310"), "rope_local_base_freq"},
	{T5("0"), "relative_attention_num_buckets"},
	{T5("1e308"), "relative_attention_num_buckets"},
	{MPT("{\"alibi\":true,\"alibi_bias_max\":100}"), "attn_config.alibi_bias_max"},
	{MPT("{\"alibi\":true,\"alibi_bias_max\":-1}"), "attn_config.alibi_bias_max"},
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
	{LLAMA("500000", "\"llama3\""), "rope_scaling"},
	{LLAMA("500000", "[8, 1, 4]"), "rope_scaling"},
	{LLAMA("500000", "8"), "rope_scaling"},
	{LLAMA("500000", "true"), "rope_scaling"},
	{PARAMS("\"default\""), "rope_parameters"},
	{PARAMS("[]"), "rope_parameters"},
	{QWEN_VL("\"x\""), "text_config"},
	{QWEN_VL("3"), "text_config"},
	{MPT("\"alibi\""), "attn_config"},
	{"{\"model_type\":\"gemma3_text\",\"num_attention_heads\":8,\"hidden_size\":2560,\"head_dim\":256,"
	 "\"num_hidden_layers\":6,\"max_position_embeddings\":131072,\"rope_parameters\":{\"full_attention\":\"x\","
	 "\"sliding_attention\":{\"rope_type\":\"default\",\"rope_theta\":10000}}}",
	 "rope_parameters.full_attention"},
	/* booleans are not numbers, at the top and inside the scaling */
	{LLAMA("true", L3_OK), "rope_theta"},
	{LLAMA("false", L3_OK), "rope_theta"},
	{LLAMA("500000", L3("true", "1", "4")), "rope_scaling.factor"},
	{LLAMA("500000", L3("8", "true", "4")), "rope_scaling.low_freq_factor"},
	{LLAMA("10000", YARN(",\"beta_fast\":true")), "rope_scaling.beta_fast"},
	{T5("true"), "relative_attention_num_buckets"},
	{GEMMA3("false"), "rope_local_base_freq"},
	{DEEPSEEK(YARN(",\"mscale_all_dim\":true")), "rope_scaling.mscale_all_dim"}, /* its softmax scale's */
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

static Suite *suite(void)
{
	Suite *s = suite_create("plan_refusals");
	TCase *tc = tcase_create("core");
	tcase_add_loop_test(tc, a_value_the_table_refuses_names_its_config_key, 0,
			    (int)(sizeof table_refusals / sizeof table_refusals[0]));
	tcase_add_test(tc, the_reason_is_the_tables_own);
	tcase_add_loop_test(tc, a_mistyped_key_names_itself, 0, (int)(sizeof type_refusals / sizeof type_refusals[0]));
	tcase_add_test(tc, good_values_still_plan);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
