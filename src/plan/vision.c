/* The vision tower of a multimodal config, by vision_config.model_type (its model_type, else the
 * config's): learned patch tables with their grid and class tokens (Gemma 4's: one per axis), or
 * the 2-D rotary table of Pixtral, Qwen2-VL (also Qwen3-VL's and GLM-4.1V's), Llama 4 or Gemma 4. A tower without
 * image_size takes each image at its own size: its plan gives an example grid. Its keys are read
 * in vision_config alone, errors name them under it, and every encoding it adds says tower
 * "vision". */
#include "plan/rope.h"

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
	int unscaled;         /* q·k scaled by 1 (q and k RMS-normalised: Gemma 4) */
};

/* The grid a dynamic-resolution tower's plan shows: 448 px at patch 14, a whole number of 2x2
 * merge blocks. */
#define EXAMPLE_SIDE 32

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

/* A learned table of h x w patch rows and v->cls class-token rows (first; last with last_cls). */
static int learned_grid(struct cfg *c, const struct vision *v, int h, int w, int last_cls)
{
	struct dims d;
	int rc = plan_read_dims(c, &d);
	if (rc < 0)
		return rc;
	struct pe_plan_enc *e = plan_learned_enc(c, &d, (int64_t)h * w + v->cls, "the patch grid's position embedding");
	if (!e)
		return pe_err_set(c->err, PE_EINTERNAL, "", "too many encodings");
	pe_plan_param(e, "grid", "%dx%d", h, w);
	pe_plan_param(e, "class_tokens", "%d", v->cls);
	pe_plan_note(e, "a %dx%d patch grid%s; other image sizes interpolate the grid", h, w,
		     !v->cls ? "" : last_cls ? " then one class-token row" : " after one class-token row");
	return 0;
}

static int vision_learned(struct cfg *c, const struct vision *v)
{
	int h = 0, w = 0, rc;
	if ((rc = grid(c, &h, &w)) < 0)
		return rc;
	if (!rc)
		return plan_bad(c, "image_size", "the vision tower needs image_size and patch_size");
	return learned_grid(c, v, h, w, 0);
}

static int vision_rope2d(struct cfg *c, const struct vision *v)
{
	struct dims d;
	struct rope r;
	int h = 0, w = 0, rc;
	if ((rc = plan_read_dims(c, &d)) < 0 || (rc = plan_rope_init(c, &r, &d, "half")) < 0 || (rc = grid(c, &h, &w)) < 0)
		return rc;
	int example = !rc; /* dynamic resolution: each image has its own grid */
	if (example)
		h = w = EXAMPLE_SIDE;
	/* height is the length a plan caps: a table over the limits keeps the grid's first rows; Llama 4's
	 * square grid and its class token are one table, whole or not at all */
	int square = !strcmp(v->variant, "llama4");
	struct pe_plan_enc *e = pe_plan_enc_add(c->plan, "rope2d", "rope2d", square ? NULL : "height", "all");
	if (!e)
		return pe_err_set(c->err, PE_EINTERNAL, "", "too many encodings");
	if (square) {
		pe_plan_param(e, "height", "%d", h);
		pe_plan_source(e, "height", "image_size");
	}
	e->head_dim = e->rotary_dim = d.head_dim;
	e->softmax_scale = v->unscaled ? 1 : r.softmax_scale;
	pe_plan_param(e, "width", "%d", w);
	if (!example)
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
	if (example)
		pe_plan_note(e, "vision_config has no image_size: an example %dx%d patch grid; each image takes its own "
			     "height and width in patches (its grid_thw)", h, w);
	else
		pe_plan_note(e, "the largest image's %dx%d patch grid; a smaller image takes its own height and width", h, w);
	if (!strcmp(v->variant, "llama4"))
		pe_plan_note(e, "row height x width is the class token's (every angle 0): the model appends it last");
	if (!strcmp(v->variant, "gemma4"))
		pe_plan_note(e, "channels [0, dim/2) turn by the column, [dim/2, dim) by the row, each half in "
			     "rotate_half layout of its own; q·k is scaled by 1 (q and k are RMS-normalised)");
	c->len = h;
	return plan_finish_all(c);
}

static int vision_none(struct cfg *c, const struct vision *v)
{
	pe_plan_warn(c->plan, "vision_config: a convolutional encoder, without a position table");
	return 0;
}

/* GLM-4.1V and GLM-4.5V: the 2-D rotary table and a learned patch table resampled to each image's
 * grid. */
static int vision_glm4v(struct cfg *c, const struct vision *v)
{
	int rc = vision_rope2d(c, v);
	return rc < 0 ? rc : vision_learned(c, v);
}

/* Llama 4: the 2-D rotary table and a learned table of the patches then the class token. */
static int vision_llama4(struct cfg *c, const struct vision *v)
{
	int h = 0, w = 0, rc = grid(c, &h, &w);
	if (rc <= 0)
		return rc < 0 ? rc : plan_bad(c, "image_size", "the Llama 4 vision tower needs image_size and patch_size");
	if ((rc = vision_rope2d(c, v)) < 0)
		return rc;
	return learned_grid(c, v, h, w, 1);
}

/* Qwen3-VL: the 2-D rotary table and a learned num_position_embeddings-row square table,
 * bilinearly resampled to each image's grid. */
static int vision_qwen3vl(struct cfg *c, const struct vision *v)
{
	double n = 0;
	int rc = vision_rope2d(c, v);
	if (rc < 0 || (rc = plan_int(c, "num_position_embeddings", 1, 1 << 24, &n)) <= 0)
		return rc;
	int side = (int)sqrt(n);
	if ((double)side * side != n)
		return plan_bad(c, "num_position_embeddings", "num_position_embeddings must be a square (a grid's rows)");
	rc = learned_grid(c, v, side, side, 0);
	if (rc == 0)
		pe_plan_note(&c->plan->enc[c->plan->nenc - 1], "bilinearly resampled to each image's patch grid");
	return rc;
}

/* Gemma 4: the 2-D rotary table, and a learned table per axis, [2, position_embedding_size,
 * hidden]: a patch at (column x, row y) adds row x of the first and row y of the second
 * (Gemma4VisionPatchEmbedder; padding patches add nothing). Each image has its own grid: the
 * table bounds each side at position_embedding_size patches. */
static int vision_gemma4(struct cfg *c, const struct vision *v)
{
	struct dims d;
	double n = 0;
	int rc = vision_rope2d(c, v);
	if (rc < 0 || (rc = plan_read_dims(c, &d)) < 0 || (rc = plan_int(c, "position_embedding_size", 1, 1 << 24, &n)) < 0)
		return rc;
	if (rc == 0)
		return plan_bad(c, "position_embedding_size", "the Gemma 4 vision tower needs position_embedding_size");
	struct pe_plan_enc *e = plan_learned_enc(c, &d, (int64_t)n, "a table per axis, indexed by the patch's column and row");
	if (!e)
		return pe_err_set(c->err, PE_EINTERNAL, "", "too many encodings");
	e->softmax_scale = v->unscaled ? 1 : e->softmax_scale;
	pe_plan_source(e, "positions", "position_embedding_size");
	pe_plan_param(e, "per_axis", "col,row");
	pe_plan_param(e, "class_tokens", "0");
	pe_plan_note(e, "shape [2, %.0f, %d]: a patch at column x, row y adds table[0][x] + table[1][y]; each image "
		     "takes its own grid, at most %.0f patches a side", n, d.hidden, n);
	return 0;
}

#define GEMMA4_VISION_DEFAULTS "{\"position_embedding_size\": 10240}"
#define SIGLIP_DEFAULTS "{\"image_size\": 224, \"patch_size\": 16}"
static const struct vision visions[] = {
	{{"clip_vision_model", "internvl_vision", "mllama_vision_model"}, vision_learned, 1, NULL, NULL, 0},
	{{"siglip_vision_model", "idefics3_vision", "smolvlm_vision"}, vision_learned, 0, NULL, SIGLIP_DEFAULTS, 0},
	{{"pixtral"}, vision_rope2d, 0, "pixtral", NULL, 0},
	{{"qwen2_vl", "qwen2_5_vl"}, vision_rope2d, 0, "qwen2vl", NULL, 0},
	{{"qwen3_vl", "qwen3_vl_moe"}, vision_qwen3vl, 0, "qwen2vl", NULL, 0},
	{{"glm4v", "glm4v_moe"}, vision_glm4v, 0, "qwen2vl", NULL, 0}, /* Glm4vVisionRotaryEmbedding is Qwen2-VL's */
	{{"llama4_vision_model"}, vision_llama4, 1, "llama4", NULL, 0},
	{{"gemma4_vision"}, vision_gemma4, 0, "gemma4", GEMMA4_VISION_DEFAULTS, 1},
	{{"gemma3n_vision"}, vision_none, 0, NULL, NULL, 0},
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

