/* Model plans: the rules that turn a Hugging Face config.json into the positional encodings the
 * model uses, family by family (model_type), with the quirks of the published configs spelled
 * out where they are read.
 *
 * Where this lives: the plan layer (src/plan/), above core and tensor, below http and the CLI,
 * which make the same plan from the same bytes; the config is read with jansson (cfg.c).
 *
 * Decisions the configs leave open (each named in the plan's warnings when it applies):
 * - YaRN's factor: rope_scaling.factor is used as written (what the model authors and vLLM use);
 *   recent transformers replace it by max_position_embeddings / original_max_position_embeddings
 *   when the config has the latter: when the two differ, a warning gives the other value.
 * - rope_type and the legacy type both given and different: rope_type wins.
 * - A multimodal config (text_config): the text model's keys are read there first, then at the top.
 * - No context length in the config (BLOOM, T5 without n_positions): len is 2048.
 * - Gemma 3 without layer_types or sliding_window_pattern: every 6th layer is global (its default).
 * - mscale without mscale_all_dim (or the reverse): transformers ignores the lone one, and so do we.
 * - No rope_theta: the default of the model's transformers config class (the family's
 *   row; warned when it is not the usual 10000).
 * - A table whose JSON the server would refuse as too large (pe_plan_opts' limits): format=npy,
 *   len capped only when even npy would be refused (out.c's fit_response says why).
 * Everything else a family needs and does not find is a 422 naming the key, and so is a key of the
 * wrong JSON type (true is not a number; a rope_scaling that is not an object is not "none") and a
 * value the table of its url refuses: every url is checked by the table's own parameter code, the
 * code the server runs on a GET of it, and a refusal names the config key the value came from.
 *
 * Files: cfg.c reads the config (errors naming the key, dimensions, len), rope.c holds the RoPE
 * families and scaling.c their rope_scaling / rope_parameters, out.c builds urls and the answer; this file the other families and the table that picks a family by model_type. */
#include "plan/cfg.h"
#include "plan/diffusers.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- ALiBi, T5, learned, 2-D sin-cos ---- */

/* bias_key: the config key max_bias was read from, or NULL when it is the family's constant. */
/* bias_scale: Falcon adds the table to q·k and scales the sum by head_dim^-1/2; BLOOM and MPT
 * add it after the scale (1). */
static int add_alibi(struct cfg *c, const struct dims *d, double max_bias, const char *bias_key, const char *note,
		     double bias_scale)
{
	struct pe_plan_enc *e = pe_plan_enc_add(c->plan, "alibi", "alibi", "q_len", "all");
	if (!e)
		return pe_err_set(c->err, PE_EINTERNAL, "", "too many encodings");
	e->head_dim = d->head_dim;
	e->softmax_scale = 1 / sqrt((double)d->head_dim);
	e->bias_scale = bias_scale;
	pe_plan_param(e, "heads", "%d", d->heads);
	pe_plan_source(e, "heads", d->heads_key);
	pe_plan_param_real(e, "max_bias", max_bias);
	pe_plan_source(e, "max_bias", bias_key);
	pe_plan_note(e, "the bias times bias_scale is added to the scaled scores; the causal mask is applied separately "
		     "(mask=causal gives both); the slopes alone: /v1/alibi/slopes?heads=%d&max_bias=%g", d->heads, max_bias);
	if (note)
		pe_plan_note(e, "%s", note);
	return plan_finish_all(c);
}

static int family_bloom(struct cfg *c)
{
	struct dims d;
	int rc = plan_read_dims(c, &d);
	if (rc < 0)
		return rc;
	plan_choose_len(c, &d);
	return add_alibi(c, &d, 8, NULL, NULL, 1); /* baddbmm(alibi, q, k, alpha=1/sqrt(head_dim)): after the scale */
}


static int family_mpt(struct cfg *c)
{
	struct dims d;
	int rc = plan_read_dims(c, &d);
	if (rc < 0)
		return rc;
	plan_choose_len(c, &d);
	const json_t *ac;
	if ((rc = plan_object_of(c, plan_get(c, "attn_config"), "attn_config", &ac)) < 0)
		return rc;
	int alibi = 0;
	if ((rc = plan_bool_of(c, plan_member(ac, "alibi"), "attn_config.alibi", &alibi)) < 0)
		return rc;
	if (!alibi) {
		plan_learned_enc(c, &d, d.max_pos, "wpe (learned_pos_emb)");
		return plan_finish_all(c);
	}
	double mb = 8, ss = 0;
	if ((rc = plan_num_of(c, plan_member(ac, "alibi_bias_max"), "attn_config.alibi_bias_max", &mb)) < 0)
		return rc;
	int has_ss = plan_num_of(c, plan_member(ac, "softmax_scale"), "attn_config.softmax_scale", &ss);
	if (has_ss < 0)
		return has_ss;
	if (has_ss && !(ss > 0))
		return plan_bad(c, "attn_config.softmax_scale", "attn_config.softmax_scale must be > 0");
	rc = add_alibi(c, &d, mb, "attn_config.alibi_bias_max", "MPT's bias is -(k_len - 1 - key) per head, equal to ALiBi's -(query - key) up to a "
			   "per-row constant the softmax ignores", 1);
	if (rc == 0 && has_ss)
		c->plan->enc[c->plan->nenc - 1].softmax_scale = ss;
	return rc;
}

static int family_falcon(struct cfg *c)
{
	int alibi = 0, rc = plan_bool(c, "alibi", &alibi);
	if (rc < 0)
		return rc;
	if (!alibi)
		return plan_family_rope(c);
	struct dims d;
	if ((rc = plan_read_dims(c, &d)) < 0)
		return rc;
	plan_choose_len(c, &d);
	return add_alibi(c, &d, 8, NULL, "Falcon adds the bias to q·k before the scale: bias_scale is head_dim^-1/2",
			 1 / sqrt((double)d.head_dim));
}

static int family_t5(struct cfg *c)
{
	struct dims d;
	double nb = 32, md = 128, dkv = 0;
	int rc = plan_read_dims(c, &d);
	if (rc < 0)
		return rc;
	if ((rc = plan_int(c, "d_kv", 1, 65536, &dkv)) < 0)
		return rc;
	if (rc > 0)
		d.head_dim = (int)dkv; /* T5's head width, not d_model / num_heads */
	if ((rc = plan_num(c, "relative_attention_num_buckets", &nb)) < 0 || (rc = plan_num(c, "relative_attention_max_distance", &md)) < 0)
		return rc;
	if (rc == 0)
		pe_plan_warn(c->plan, "no relative_attention_max_distance: 128 (T5's value)");
	plan_choose_len(c, &d);
	static const char *const stacks[] = {"encoder", "decoder"};
	for (int k = 0; k < 2; k++) {
		struct pe_plan_enc *e = pe_plan_enc_add(c->plan, "relative/t5", "relative/t5", "q_len", stacks[k]);
		if (!e)
			return pe_err_set(c->err, PE_EINTERNAL, "", "too many encodings");
		e->head_dim = d.head_dim;
		e->softmax_scale = 1;
		pe_plan_param_real(e, "num_buckets", nb);
		pe_plan_source(e, "num_buckets", "relative_attention_num_buckets");
		pe_plan_param_real(e, "max_distance", md);
		pe_plan_source(e, "max_distance", "relative_attention_max_distance");
		pe_plan_param(e, "bidirectional", "%d", k == 0);
		pe_plan_note(e, "bucket indices into the learned relative_attention_bias [num_buckets, %d heads] of the "
			     "first %s layer, shared by the stack", d.heads, stacks[k]);
		pe_plan_note(e, "T5 does not scale q·k: softmax_scale is 1");
	}
	return plan_finish_all(c);
}


static int family_learned(struct cfg *c)
{
	struct dims d;
	double img = 0, patch = 0;
	int rc = plan_read_dims(c, &d);
	if (rc < 0)
		return rc;
	int64_t positions = d.max_pos, side = 0;
	const char *what = "position_embeddings";
	int has_img = plan_int(c, "image_size", 1, 1 << 24, &img), has_patch = 0;
	if (has_img < 0 || (has_patch = plan_int(c, "patch_size", 1, 1 << 24, &patch)) < 0)
		return has_img < 0 ? has_img : has_patch;
	if (has_img && has_patch) {
		if (img < patch || img / patch > 65536)
			return plan_bad(c, img < patch ? "patch_size" : "image_size",
					"image_size / patch_size must be from 1 to 65536");
		side = (int64_t)(img / patch);
		positions = side * side + 1;
		what = "a [1, patches + 1, hidden] parameter with the class token";
	}
	struct pe_plan_enc *e = plan_learned_enc(c, &d, positions, what);
	if (!e)
		return pe_err_set(c->err, PE_ENOMEM, "", "out of memory");
	if (has_img && has_patch) {
		pe_plan_param(e, "grid", "%lldx%lld", (long long)side, (long long)side);
		pe_plan_param(e, "class_tokens", "1");
	}
	return 0;
}

/* ViT-MAE: fixed 2-D sin-cos tables with a leading class-token row, in the encoder and decoder. */
static int family_vit_mae(struct cfg *c)
{
	struct dims d;
	double img = 0, patch = 0, dec = 0, dec_heads = 0;
	int rc = plan_read_dims(c, &d);
	if (rc < 0)
		return rc;
	if ((rc = plan_int(c, "image_size", 1, 1 << 24, &img)) <= 0)
		return rc < 0 ? rc : plan_bad(c, "image_size", "ViT-MAE needs image_size");
	if ((rc = plan_int(c, "patch_size", 1, 1 << 24, &patch)) <= 0)
		return rc < 0 ? rc : plan_bad(c, "patch_size", "ViT-MAE needs patch_size");
	if (img < patch || img / patch > 65536)
		return plan_bad(c, img < patch ? "patch_size" : "image_size", "image_size / patch_size must be from 1 to 65536");
	if ((rc = plan_int(c, "decoder_hidden_size", 0, 1 << 24, &dec)) < 0 ||
	    (rc = plan_int(c, "decoder_num_attention_heads", 0, 65536, &dec_heads)) < 0)
		return rc;
	int side = (int)(img / patch);
	for (int k = 0; k < 2; k++) {
		int dim = k ? (int)dec : d.hidden;
		if (k && !dim)
			break;
		struct pe_plan_enc *e = pe_plan_enc_add(c->plan, "sinusoidal2d", "sinusoidal2d", NULL, k ? "decoder" : "encoder");
		if (!e)
			return pe_err_set(c->err, PE_EINTERNAL, "", "too many encodings");
		e->head_dim = !k ? d.head_dim : dec_heads >= 1 ? (int)(dec / dec_heads) : 0;
		e->softmax_scale = e->head_dim ? 1 / sqrt((double)e->head_dim) : NAN;
		pe_plan_param(e, "height", "%d", side);
		pe_plan_source(e, "height", "image_size");
		pe_plan_param(e, "width", "%d", side);
		pe_plan_source(e, "width", "image_size");
		pe_plan_param(e, "dim", "%d", dim);
		pe_plan_source(e, "dim", k ? "decoder_hidden_size" : d.hidden_key);
		pe_plan_param(e, "cls_token", "1");
		pe_plan_param(e, "variant", "mae");
		pe_plan_note(e, "fixed 2-D sin-cos over the %dx%d patch grid, added to the %s's input", side, side,
			     k ? "decoder" : "encoder");
	}
	c->len = 0;
	return plan_finish_all(c);
}

/* ---- families: one row each ---- */

#define GEMMA3_DEFAULTS "{\"num_attention_heads\": 8, \"head_dim\": 256, \"max_position_embeddings\": 131072}"

static const struct plan_family families[] = {
	/* RoPE over whole heads, one table for every layer */
	{.names = {"llama", "mistral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe"}, .build = plan_family_rope},
	{.names = {"olmo", "olmo2", "starcoder2", "phimoe"}, .build = plan_family_rope},
	{.names = {"internlm2"}, .build = plan_family_rope, .softmax_rsqrt = 1},
	{.names = {"mixtral"}, .build = plan_family_rope, .theta = 1000000},
	{.names = {"cohere", "ernie4_5"}, .build = plan_family_rope, .layout = "interleaved"},
	{.names = {"gptj", "codegen"}, .build = plan_family_rope, .layout = "interleaved"},
	{.names = {"hunyuan_v1_dense", "hunyuan_v1_moe"}, .build = plan_family_rope},
	{.names = {"dbrx"}, .build = plan_family_rope},
	{.names = {"granite", "granitemoe"}, .build = plan_family_rope, .softmax_key = "attention_multiplier"},
	/* partial rotary: the class's share when the config gives none */
	{.names = {"phi"}, .build = plan_family_rope, .rotary_share = 0.5},
	{.names = {"phi3"}, .build = plan_family_rope},
	{.names = {"gpt_neox"}, .build = plan_family_rope, .rotary_share = 0.25},
	{.names = {"stablelm"}, .build = plan_family_rope, .rotary_share = 0.25},
	{.names = {"nemotron", "persimmon"}, .build = plan_family_rope, .rotary_share = 0.5},
	{.names = {"glm", "glm4"}, .build = plan_family_rope, .layout = "interleaved", .rotary_share = 0.5},
	{.names = {"glm4_moe"}, .build = plan_family_rope, .rotary_share = 0.5},
	{.names = {"chatglm"}, .build = plan_family_chatglm, .softmax_rsqrt = 1},
	/* layer types */
	{.names = {"gpt_oss"}, .build = plan_family_typed, .theta = 150000},
	{.names = {"olmo3"}, .build = plan_family_typed, .plain_types = "sliding_attention"},
	{.names = {"cohere2"}, .build = plan_family_typed, .layout = "interleaved", .nope_types = "full_attention", .nope_needs_window = 1},
	{.names = {"exaone4"}, .build = plan_family_typed, .nope_types = "full_attention", .nope_needs_window = 1},
	{.names = {"smollm3"}, .build = plan_family_typed, .theta = 2000000},
	{.names = {"qwen3_next"}, .build = plan_family_typed, .rotary_share = 0.25, .nope_types = "linear_attention"},
	{.names = {"granitemoehybrid"}, .build = plan_family_typed, .nope_types = "mamba", .softmax_key = "attention_multiplier"},
	{.names = {"gemma", "gemma2"}, .build = plan_family_gemma},
	{.names = {"gemma3", "gemma3_text"}, .build = plan_family_gemma3, .defaults = GEMMA3_DEFAULTS, .vision = 1},
	{.names = {"llama4", "llama4_text"}, .build = plan_family_llama4, .layout = "interleaved", .theta = 500000,
	 .vision = 1},
	/* M-RoPE */
	{.names = {"qwen2_vl"}, .build = plan_family_qwen_vl, .theta = 1000000, .vision = 1},
	/* videos' time positions scaled by tokens_per_second */
	{.names = {"qwen2_5_vl"}, .build = plan_family_qwen_vl, .theta = 1000000, .vision = 1, .mrope_variant = "qwen25vl"},
	/* videos as timestamped frames, one per temporal patch */
	{.names = {"qwen3_vl", "qwen3_vl_moe"}, .build = plan_family_qwen_vl, .theta = 500000, .vision = 1,
	 .mrope_variant = "qwen3vl"},
	{.names = {"deepseek_v2", "deepseek_v3"}, .build = plan_family_deepseek, .layout = "interleaved"},
	/* ALiBi, relative, learned, 2-D sin-cos */
	{.names = {"falcon", "RefinedWeb", "RefinedWebModel"}, .build = family_falcon},
	{.names = {"bloom"}, .build = family_bloom},
	{.names = {"mpt"}, .build = family_mpt},
	{.names = {"t5", "mt5"}, .build = family_t5},
	{.names = {"bert", "gpt2", "gpt_bigcode", "clip_text_model", "siglip_text_model"}, .build = family_learned},
	{.names = {"vit", "dinov2"}, .build = family_learned, .tower = "vision"},
	{.names = {"vit_mae"}, .build = family_vit_mae, .tower = "vision"},
	{.names = {"umt5"}, .build = family_t5},
	/* encoders */
	{.names = {"roberta", "xlm-roberta", "distilbert", "mpnet"}, .build = plan_family_encoder},
	{.names = {"bart", "mbart", "opt"}, .build = plan_family_seq2seq},
	{.names = {"whisper"}, .build = plan_family_whisper},
	{.names = {"deberta-v2"}, .build = plan_family_deberta},
	{.names = {"modernbert"}, .build = plan_family_typed, .theta = 160000, .plain_types = "sliding_attention",
	 .local_theta_key = "local_rope_theta"},
	/* a text model and a vision tower: each planned by its own row */
	{.names = {"llava", "llava_next", "llava_onevision", "mistral3", "paligemma", "idefics3"}, .build = plan_family_multimodal},
	{.names = {"smolvlm", "internvl", "mllama", "clip", "siglip", "gemma3n"}, .build = plan_family_multimodal},
	{.names = {"gemma4"}, .build = plan_family_multimodal},
	/* q and k are RMS-normalised: the attention scales q·k by 1 */
	{.names = {"gemma4_text"}, .build = plan_family_typed, .theta = 1000000, .softmax_fixed = 1},
	{.names = {"mllama_text_model"}, .build = plan_family_typed, .theta = 500000, .nope_types = "cross_attention"},
	/* videos as frames, each a group of its own after its <|begin_of_image|> */
	{.names = {"glm4v", "glm4v_text"}, .build = plan_family_qwen_vl, .layout = "interleaved", .rotary_share = 0.5,
	 .vision = 1, .mrope_variant = "glm4v"},
	/* GLM-4.5V: GLM-4.1V's positions, its text rotated in rotate_half layout (Glm4vMoeTextAttention) */
	{.names = {"glm4v_moe", "glm4v_moe_text"}, .build = plan_family_qwen_vl, .rotary_share = 0.5, .vision = 1,
	 .mrope_variant = "glm4v"},
	{.names = {"ministral3"}, .build = plan_family_rope},
	{.names = {"gemma3n_text"}, .build = plan_family_typed, .theta = 1000000, .plain_types = "sliding_attention",
	 .softmax_fixed = 1}, /* q and k RMS-normalised: scale 1 */
};

static const struct plan_family *plan_find_family(const char *model_type)
{
	for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
		for (size_t k = 0; k < sizeof families[i].names / sizeof families[i].names[0] && families[i].names[k]; k++)
			if (!strcmp(families[i].names[k], model_type))
				return &families[i];
	return NULL;
}

static int build(struct cfg *c)
{
	if (plan_is_generator(c->root))
		return plan_generator(c);
	const json_t *mt = plan_member(c->root, "model_type");
	if (!mt || !json_is_string(mt))
		return plan_bad(c, "model_type", "the config has no model_type string");
	snprintf(c->plan->model_type, sizeof c->plan->model_type, "%s", json_string_value(mt));
	const json_t *tc;
	int rc = plan_object_of(c, plan_member(c->root, "text_config"), "text_config", &tc);
	if (rc < 0)
		return rc;
	c->text = tc ? tc : c->root;
	const struct plan_family *fam = plan_find_family(json_string_value(mt));
	if (!fam)
		return plan_bad(c, "model_type", "model_type '%.40s' is not a family posenc knows", json_string_value(mt));
	if ((rc = plan_use_family(c, fam)) < 0)
		return rc;
	c->find = plan_find_family;
	if ((rc = plan_family_build(c)) == 0 && fam->vision)
		rc = plan_vision_tower(c);
	if (rc < 0 && c->err->code == PE_EUNPROCESSABLE)
		plan_name_text(c, c->err);
	for (size_t i = 0; rc == 0 && i < c->plan->nenc; i++)
		if (!c->plan->enc[i].tower)
			c->plan->enc[i].tower = fam->tower ? fam->tower : "text";
	return rc;
}


int pe_plan_build(const char *json, size_t n, const struct pe_plan_opts *o, struct pe_plan *plan,
		  struct pe_err *err)
{
	memset(plan, 0, sizeof *plan);
	if (n > PE_PLAN_MAX_BODY)
		return pe_err_set(err, PE_ETOOBIG, "body", "the config is %zu bytes; the limit is %zu", n, PE_PLAN_MAX_BODY);
	if (o->len < 0 || o->len > PE_PLAN_MAX_LEN)
		return pe_err_set(err, PE_EINVAL, "len", "len must be from 1 to %lld", (long long)PE_PLAN_MAX_LEN);
	struct pe_err local = {0};
	struct pe_err *e = err ? err : &local;
	json_t *root = plan_parse(json, n, e);
	if (!root)
		return e->code ? e->code : PE_EBODY;
	int rc = 0;
	if (!json_is_object(root))
		rc = pe_err_set(e, PE_EBODY, "body", "the config must be a JSON object");
	else {
		struct cfg c = {.root = root, .text = root, .plan = plan, .opt = o, .err = e};
		e->code = 0;
		rc = build(&c);
		json_decref(c.defaults);
		/* an error set is the answer even when a caller dropped its return value: a plan is
		 * never made past a refusal */
		if (rc < 0 && !e->code)
			rc = pe_err_set(e, PE_EINTERNAL, "", "the plan failed");
		else
			rc = e->code;
	}
	json_decref(root);
	if (rc != 0)
		pe_plan_destroy(plan);
	return rc;
}
