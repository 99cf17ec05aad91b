/* Model parts besides a decoder's text model: a multimodal config's text model (planned by the
 * family of text_config.model_type) and its vision tower (by vision_config.model_type: learned
 * patch tables with their grid and class tokens, or Pixtral's / Qwen's 2-D rotary table), and the
 * encoders: Whisper's audio encoder, BART / OPT / RoBERTa learned tables with their position
 * offset, MPNet's relative buckets, DeBERTa-v2's log-bucketed relative positions. Every encoding
 * says its tower. */
#include "plan/rope.h"
#include "posenc/core.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the vision tower ---- */

struct vision;
typedef int (*vision_fn)(struct cfg *c, const struct vision *v);

struct vision {
	const char *names[4];
	vision_fn build;
	int cls;              /* class tokens in a learned table */
	const char *variant;  /* rope2d's variant */
	const char *defaults; /* the vision config class's defaults */
};

/* image_size / patch_size as a grid: numbers or [height, width] lists. 1, 0 when absent, or a 422. */
static int side_of(struct cfg *c, const char *key, int k, double *out)
{
	const json_t *v = plan_get(c, key);
	if (json_is_array(v))
		v = json_array_get(v, json_array_size(v) == 2 ? (size_t)k : 99);
	if (!v)
		return plan_get(c, key) ? plan_bad(c, key, "%s is a number or [height, width]", key) : 0;
	if (!json_is_number(v) || json_number_value(v) < 1 || json_number_value(v) > (1 << 24) ||
	    json_number_value(v) != floor(json_number_value(v)))
		return plan_bad(c, key, "%s must be positive integers", key);
	*out = json_number_value(v);
	return 1;
}

static int grid(struct cfg *c, int *h, int *w)
{
	double img[2] = {0, 0}, patch[2] = {0, 0};
	for (int k = 0; k < 2; k++) {
		int rc = side_of(c, "image_size", k, &img[k]), rp;
		if (rc < 0 || (rp = side_of(c, "patch_size", k, &patch[k])) < 0)
			return -1;
		if (!rc || !rp)
			return 0;
		if (img[k] < patch[k] || img[k] / patch[k] > 65536)
			return plan_bad(c, "image_size", "image_size / patch_size must be from 1 to 65536");
	}
	*h = (int)(img[0] / patch[0]);
	*w = (int)(img[1] / patch[1]);
	return 1;
}

static int vision_learned(struct cfg *c, const struct vision *v)
{
	struct dims d;
	int h = 0, w = 0, rc;
	if ((rc = plan_read_dims(c, &d)) < 0 || (rc = grid(c, &h, &w)) < 0)
		return rc;
	if (!rc)
		return plan_bad(c, "image_size", "the vision tower needs image_size and patch_size");
	struct pe_plan_enc *e = plan_learned_enc(c, &d, (int64_t)h * w + v->cls, "the patch grid's position embedding");
	if (!e)
		return pe_err_set(c->err, PE_EINTERNAL, "", "too many encodings");
	pe_plan_param(e, "grid", "%dx%d", h, w);
	pe_plan_param(e, "class_tokens", "%d", v->cls);
	pe_plan_note(e, "a %dx%d patch grid%s; other image sizes interpolate the grid", h, w,
		     v->cls ? " after one class-token row" : "");
	return 0;
}

static int vision_rope2d(struct cfg *c, const struct vision *v)
{
	struct dims d;
	struct rope r;
	int h = 0, w = 0, rc;
	if ((rc = plan_read_dims(c, &d)) < 0 || (rc = plan_rope_init(c, &r, &d, "half")) < 0 || (rc = grid(c, &h, &w)) < 0)
		return rc;
	if (!rc) { /* dynamic resolution: each image has its own grid */
		pe_plan_warn(c->plan, "vision_config has no image_size: its /v1/rope2d?variant=%s table takes each image's "
			     "height and width in patches", v->variant);
		return 0;
	}
	/* height is the length a plan caps: a table over the limits keeps the grid's first rows */
	struct pe_plan_enc *e = pe_plan_enc_add(c->plan, "rope2d", "rope2d", "height", "all");
	if (!e)
		return pe_err_set(c->err, PE_EINTERNAL, "", "too many encodings");
	e->head_dim = e->rotary_dim = d.head_dim;
	e->softmax_scale = 1 / sqrt((double)d.head_dim);
	pe_plan_param(e, "width", "%d", w);
	pe_plan_source(e, "width", "image_size");
	pe_plan_param(e, "dim", "%d", d.head_dim);
	pe_plan_source(e, "dim", d.head_dim_key);
	pe_plan_param_real(e, "base", r.base);
	pe_plan_source(e, "base", r.base_key);
	pe_plan_param(e, "variant", "%s", v->variant);
	if (!strcmp(v->variant, "pixtral"))
		pe_plan_param(e, "max_patches_per_side", "%d", h > w ? h : w);
	double merge = 0;
	if ((rc = plan_int(c, "spatial_merge_size", 1, 64, &merge)) < 0)
		return rc;
	if (rc > 0 && merge > 1 && strcmp(v->variant, "pixtral")) /* rows stay in raster order: a capped grid is a prefix */
		pe_plan_note(e, "the model orders patches in %gx%g merge blocks (spatial_merge_size): /v1/rope2d with "
			     "spatial_merge_size=%g gives that order for a grid of whole blocks", merge, merge, merge);
	pe_plan_note(e, "the largest image's %dx%d patch grid; a smaller image takes its own height and width", h, w);
	c->len = h;
	return plan_finish_all(c);
}

static int vision_none(struct cfg *c, const struct vision *v)
{
	struct pe_plan_enc *e = pe_plan_enc_add(c->plan, "none", NULL, NULL, "all");
	if (!e)
		return pe_err_set(c->err, PE_EINTERNAL, "", "too many encodings");
	pe_plan_note(e, "a convolutional encoder: no position table");
	return 0;
}

#define SIGLIP_DEFAULTS "{\"image_size\": 224, \"patch_size\": 16}"
static const struct vision visions[] = {
	{{"clip_vision_model", "internvl_vision", "mllama_vision_model"}, vision_learned, 1, NULL, NULL},
	{{"siglip_vision_model", "idefics3_vision", "smolvlm_vision"}, vision_learned, 0, NULL, SIGLIP_DEFAULTS},
	{{"pixtral"}, vision_rope2d, 0, "pixtral", NULL},
	{{"glm4v", "qwen2_vl", "qwen2_5_vl"}, vision_rope2d, 0, "qwen2vl", NULL},
	{{"gemma3n_vision"}, vision_none, 0, NULL, NULL},
};

int plan_vision_tower(struct cfg *c)
{
	const json_t *vc = plan_member(c->root, "vision_config");
	const json_t *mt = plan_member(vc, "model_type");
	const struct vision *v = NULL;
	if (!mt) /* Qwen2-VL's vision_config names no type: the config's own */
		mt = plan_member(c->root, "model_type");
	if (!vc)
		return 0;
	for (size_t i = 0; i < sizeof visions / sizeof visions[0] && !v; i++)
		for (size_t k = 0; k < 4 && visions[i].names[k] && !v; k++)
			if (json_is_string(mt) && !strcmp(visions[i].names[k], json_string_value(mt)))
				v = &visions[i];
	if (!v) {
		pe_plan_warn(c->plan, "vision_config (%.40s): this vision tower is not planned",
			     json_is_string(mt) ? json_string_value(mt) : "no model_type");
		return 0;
	}
	size_t n0 = c->plan->nenc;
	const json_t *text = c->text, *defaults = c->defaults;
	static const struct plan_family tower = {.names = {"vision"}}; /* a vision config's own defaults */
	struct cfg vcfg = *c;
	vcfg.fam = &tower;
	vcfg.text = vc;
	vcfg.prefix = "vision_config";
	vcfg.no_root = 1;
	vcfg.defaults = v->defaults ? json_loads(v->defaults, 0, NULL) : NULL;
	int rc = v->build(&vcfg, v);
	if (rc < 0 && c->err->code == PE_EUNPROCESSABLE)
		plan_name_text(&vcfg, c->err);
	json_decref(vcfg.defaults);
	c->text = text;
	c->defaults = (json_t *)defaults;
	for (size_t i = n0; i < c->plan->nenc; i++)
		c->plan->enc[i].tower = "vision";
	return rc;
}

/* A vision-language config: its text model as the family of text_config.model_type says, then
 * its vision tower. */
int plan_family_multimodal(struct cfg *c)
{
	const json_t *mt = c->text != c->root ? plan_member(c->text, "model_type") : NULL;
	const struct plan_family *tf = json_is_string(mt) ? plan_find_family(json_string_value(mt)) : NULL;
	if (c->text == c->root)
		return plan_bad(c, "text_config", "a %s config plans its text model from text_config", c->plan->model_type);
	if (!tf || tf->build == plan_family_multimodal)
		return plan_bad(c, "text_config.model_type", "text_config.model_type '%.40s' is not a family posenc knows",
				json_is_string(mt) ? json_string_value(mt) : "(none)");
	int rc = plan_use_family(c, tf);
	if (rc < 0 || (rc = tf->build(c)) < 0)
		return rc;
	for (size_t i = 0; i < c->plan->nenc; i++)
		c->plan->enc[i].tower = tf->tower ? tf->tower : "text";
	return plan_vision_tower(c);
}

/* ---- encoders ---- */

/* Where learned positions start: RoBERTa-style models number them from padding_idx + 1 (their
 * pad_token_id, 1 by default), BART / mBART / OPT from 2 (their embedding's offset). */
static int position_offset(struct cfg *c, const char **key)
{
	const char *mt = c->plan->model_type;
	*key = NULL;
	if (!strcmp(mt, "bart") || !strcmp(mt, "mbart") || !strcmp(mt, "opt"))
		return 2;
	if (strcmp(mt, "roberta") && strcmp(mt, "xlm-roberta") && strcmp(mt, "mpnet"))
		return 0;
	double pad = 1;
	*key = "pad_token_id";
	return plan_int(c, "pad_token_id", 0, 1 << 30, &pad) < 0 ? -1 : (int)pad + 1;
}

static struct pe_plan_enc *offset_learned(struct cfg *c, const struct dims *d, int64_t positions, const char *layers)
{
	const char *key;
	int off = position_offset(c, &key);
	if (off < 0)
		return NULL;
	struct pe_plan_enc *e = plan_learned_enc(c, d, positions, "position_embeddings");
	if (!e) {
		pe_err_set(c->err, PE_EINTERNAL, "", "too many encodings");
		return NULL;
	}
	e->layers = layers;
	pe_plan_param(e, "position_offset", "%d", off);
	pe_plan_source(e, "position_offset", key);
	if (off)
		pe_plan_note(e, "position p is row p + %d of the table (%s): its first %d rows are never used for text", off,
			     key ? "padding_idx + 1" : "the embedding's offset", off);
	return e;
}

/* BERT-like encoders: a learned table (RoBERTa's offset), and MPNet's relative buckets. */
int plan_family_encoder(struct cfg *c)
{
	struct dims d;
	int rc = plan_read_dims(c, &d), sin = 0;
	if (rc < 0 || (rc = plan_bool(c, "sinusoidal_pos_embds", &sin)) < 0)
		return rc;
	plan_choose_len(c, &d);
	const char *key;
	int off = position_offset(c, &key);
	if (off < 0)
		return -1;
	if (sin) { /* DistilBERT's fixed table: sin on even columns, cos on odd */
		struct pe_plan_enc *e = pe_plan_enc_add(c->plan, "sinusoidal", "sinusoidal", "len", "all");
		if (!e)
			return pe_err_set(c->err, PE_EINTERNAL, "", "too many encodings");
		e->head_dim = d.head_dim;
		e->softmax_scale = 1 / sqrt((double)d.head_dim);
		pe_plan_param(e, "dim", "%d", d.hidden);
		pe_plan_source(e, "dim", d.hidden_key);
		pe_plan_param(e, "variant", "vaswani");
	} else if (!offset_learned(c, &d, d.max_pos ? d.max_pos - off : c->len, "all")) {
		return -1;
	}
	if (!strcmp(c->plan->model_type, "mpnet")) {
		double nb = 32;
		if ((rc = plan_int(c, "relative_attention_num_buckets", 2, 65536, &nb)) < 0)
			return rc;
		struct pe_plan_enc *e = pe_plan_enc_add(c->plan, "relative/t5", "relative/t5", "q_len", "all");
		if (!e)
			return pe_err_set(c->err, PE_EINTERNAL, "", "too many encodings");
		e->head_dim = d.head_dim;
		e->softmax_scale = 1 / sqrt((double)d.head_dim);
		pe_plan_param_real(e, "num_buckets", nb);
		pe_plan_source(e, "num_buckets", "relative_attention_num_buckets");
		pe_plan_param(e, "max_distance", "128");
		pe_plan_param(e, "bidirectional", "1");
		pe_plan_note(e, "bucket indices into the learned relative_attention_bias [num_buckets, %d heads], shared by the "
			     "layers and added to the scaled scores beside the absolute table", d.heads);
	}
	return plan_finish_all(c);
}

/* BART, mBART (encoder and decoder) and OPT (decoder): learned tables from row 2. */
int plan_family_seq2seq(struct cfg *c)
{
	struct dims d;
	int rc = plan_read_dims(c, &d);
	if (rc < 0)
		return rc;
	plan_choose_len(c, &d);
	int dec_only = !strcmp(c->plan->model_type, "opt");
	for (int k = dec_only; k < 2; k++)
		if (!offset_learned(c, &d, d.max_pos ? d.max_pos : c->len, dec_only ? "all" : k ? "decoder" : "encoder"))
			return -1;
	return 0;
}

/* Whisper: the audio encoder's fixed sinusoids (tensor2tensor's layout: sin of every timescale,
 * then cos) over max_source_positions frames, the text decoder's learned table. */
int plan_family_whisper(struct cfg *c)
{
	struct dims d;
	double src = 1500, tgt = 448;
	int rc = plan_read_dims(c, &d);
	if (rc < 0 || (rc = plan_int(c, "max_source_positions", 1, 1 << 24, &src)) < 0 ||
	    (rc = plan_int(c, "max_target_positions", 1, 1 << 24, &tgt)) < 0)
		return rc;
	struct pe_plan_enc *e = pe_plan_enc_add(c->plan, "sinusoidal", "sinusoidal", "len", "encoder");
	if (!e)
		return pe_err_set(c->err, PE_EINTERNAL, "", "too many encodings");
	e->tower = "audio";
	e->head_dim = d.head_dim;
	e->softmax_scale = 1 / sqrt((double)d.head_dim);
	pe_plan_param(e, "dim", "%d", d.hidden);
	pe_plan_source(e, "dim", d.hidden_key);
	pe_plan_param(e, "variant", "t2t");
	pe_plan_note(e, "the encoder's fixed table over max_source_positions (%g) frames of 20 ms", src);
	c->len = c->opt->len > 0 && c->opt->len < (int64_t)src ? c->opt->len : (int64_t)src;
	if (c->opt->len > (int64_t)src)
		pe_plan_warn(c->plan, "sinusoidal (encoder): len %lld capped to %lld, max_source_positions (the encoder's "
			     "frames, always that many)", (long long)c->opt->len, (long long)src);
	if ((rc = plan_finish_all(c)) < 0)
		return rc;
	struct pe_plan_enc *l = plan_learned_enc(c, &d, (int64_t)tgt, "the decoder's embed_positions");
	if (!l)
		return pe_err_set(c->err, PE_EINTERNAL, "", "too many encodings");
	l->layers = "decoder";
	l->tower = "text";
	return 0;
}

/* DeBERTa-v2 / v3: log-bucketed relative positions (make_log_bucket_position) indexing the
 * relative embeddings; q·k scaled by (head_dim · (1 + the pos_att_type terms))^-1/2. */
int plan_family_deberta(struct cfg *c)
{
	struct dims d;
	double buckets = -1, maxrel = -1;
	int rc = plan_read_dims(c, &d);
	if (rc < 0 || (rc = plan_int(c, "position_buckets", -1, 1 << 20, &buckets)) < 0 ||
	    (rc = plan_int(c, "max_relative_positions", -1, 1 << 30, &maxrel)) < 0)
		return rc;
	plan_choose_len(c, &d);
	if (maxrel < 1)
		maxrel = d.max_pos ? (double)d.max_pos : 512;
	const json_t *pat = plan_get(c, "pos_att_type");
	int terms = 0;
	if (json_is_string(pat))
		terms = (strstr(json_string_value(pat), "c2p") != NULL) + (strstr(json_string_value(pat), "p2c") != NULL);
	/* the table's url only where this posenc serves it */
	const char *table = pe_table_find("relative/deberta") ? "relative/deberta" : NULL;
	struct pe_plan_enc *e = pe_plan_enc_add(c->plan, "relative/deberta", table, "q_len", "all");
	if (!e)
		return pe_err_set(c->err, PE_EINTERNAL, "", "too many encodings");
	e->head_dim = d.head_dim;
	e->softmax_scale = 1 / sqrt((double)d.head_dim * (1 + terms));
	pe_plan_param(e, "k_len", "%lld", (long long)c->len);
	if (buckets > 0) {
		pe_plan_param_real(e, "position_buckets", buckets);
		pe_plan_source(e, "position_buckets", "position_buckets");
	}
	pe_plan_param_real(e, "max_relative_positions", maxrel);
	pe_plan_source(e, "max_relative_positions", "max_relative_positions");
	pe_plan_note(e, "int32 relative positions (log-bucketed past position_buckets / 2) indexing rel_embeddings; "
		     "softmax_scale counts the %d position terms of pos_att_type", terms);
	if (!table)
		pe_plan_note(e, "this posenc does not serve GET /v1/relative/deberta: no url");
	return plan_finish_all(c);
}
