/* The plans of diffusion transformers: a Hugging Face diffusers transformer config.json (read by
 * its _class_name) and the pixel size of the image or video to generate in; out, the model's
 * positional encoding at that size (axial RoPE, or a 2-D / 3-D sin-cos grid) and its timestep
 * embedding, each with the url of its table, and the latent geometry the plan assumes.
 *
 * What the configs do not hold is each model's pipeline's, written per row of the table below
 * as diffusers' pipelines and transformers compute it:
 * - the VAE's downsampling: 8 spatial for every model here, 4 temporal for the video models, so a
 *   video of F frames has (F - 1) / 4 + 1 latent frames;
 * - FLUX and Qwen-Image pack 2x2 latent pixels into one token before the transformer (FLUX's
 *   config says patch_size 1, Qwen-Image's patch_size 2 is that packing), so a token is 16 pixels;
 * - the text tokens the RoPE positions cover (FLUX, Qwen-Image): the pipeline's
 *   max_sequence_length, 512;
 * - the timesteps the model embeds: FLUX multiplies its sigma by 1000 before the embedding,
 *   Qwen-Image embeds sigma with scale 1000, the others embed the scheduler's 0 .. 999.
 * A size the latent grid cannot take (not a multiple of VAE x packing x patch, frames not 4k + 1)
 * is a 400 naming height, width or frames; the pipelines round such sizes down, the plan states
 * the size it plans and does not pick another. */
#include "plan/diffusers.h"
#include "core/axial.h"
#include "core/tables.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum gen_pe { GEN_AXIAL, GEN_SINCOS2D, GEN_COGVIDEOX };

/* One diffusers transformer class. */
struct gen_model {
	const char *class_name;
	enum gen_pe pe;
	int vae, vae_t;             /* the VAE's spatial and temporal downsampling (vae_t 0: images) */
	int packing;                /* latent pixels per token side packed by the pipeline (1: none) */
	int patch_is_packing;       /* the config's patch_size is that packing (Qwen-Image) */
	int default_frames;         /* the pipeline's num_frames when ?frames is not given */
	const char *axes_key;       /* the config key of axes_dim (NULL: derived from the head) */
	const char *theta_key;      /* the config key of theta (NULL: the preset's) */
	const char *ts_dim_key;     /* the config key of the timestep width (NULL: 256) */
	int ts_shift;               /* downscale_freq_shift (DiT: 1) */
	const char *ts_list;        /* timesteps the url names */
	const char *ts_scale;       /* the embedding's scale (Qwen-Image: 1000) */
	const char *ts_note;
};

#define DDPM_STEPS "0,250,500,750,999"

static const struct gen_model models[] = {
	{"FluxTransformer2DModel", GEN_AXIAL, 8, 0, 2, 0, 0, "axes_dims_rope", NULL, NULL, 0, "0,250,500,750,1000", "1",
	 "the transformer multiplies the pipeline's sigma (0 .. 1) by 1000 before the embedding; guidance_embeds "
	 "embeds the guidance x 1000 with the same table"},
	{"SD3Transformer2DModel", GEN_SINCOS2D, 8, 0, 1, 0, 0, NULL, NULL, NULL, 0, "0,250,500,750,1000", "1",
	 "the scheduler's sigma x 1000"},
	{"PixArtTransformer2DModel", GEN_SINCOS2D, 8, 0, 1, 0, 0, NULL, NULL, NULL, 0, DDPM_STEPS, "1",
	 "the scheduler's timesteps (0 .. 999)"},
	{"DiTTransformer2DModel", GEN_SINCOS2D, 8, 0, 1, 0, 0, NULL, NULL, NULL, 1, DDPM_STEPS, "1",
	 "the scheduler's timesteps (0 .. 999); DiT's embedding has downscale_freq_shift 1"},
	{"HunyuanVideoTransformer3DModel", GEN_AXIAL, 8, 4, 1, 0, 129, "rope_axes_dim", "rope_theta", NULL, 0,
	 "0,250,500,750,1000", "1", "the scheduler's sigma x 1000"},
	{"WanTransformer3DModel", GEN_AXIAL, 8, 4, 1, 0, 81, NULL, NULL, "freq_dim", 0, "0,250,500,750,1000", "1",
	 "the scheduler's sigma x 1000"},
	{"CogVideoXTransformer3DModel", GEN_COGVIDEOX, 8, 4, 1, 0, 49, NULL, NULL, NULL, 0, DDPM_STEPS, "1",
	 "the scheduler's timesteps (0 .. 999)"},
	{"QwenImageTransformer2DModel", GEN_AXIAL, 8, 0, 1, 1, 0, "axes_dims_rope", NULL, NULL, 0, "0,0.25,0.5,0.75,1",
	 "1000", "the pipeline's sigma (0 .. 1), scaled by 1000 inside the embedding"},
};

#define TEXT_TOKENS 512 /* FluxPipeline's and QwenImagePipeline's max_sequence_length */

/* What the plan reads and derives. */
struct gen {
	const struct gen_model *m;
	int preset;
	int64_t heads, head_dim, hidden;
	int64_t patch, patch_t;         /* the transformer's own patch (Wan's [t, h, w]; CogVideoX's patch_size_t) */
	int64_t height, width, frames;  /* pixels (frames 0: an image model) */
	int64_t lt, lh, lw;             /* the latent */
	struct pe_axial_grid grid;      /* tokens */
	int64_t text;                   /* text tokens with RoPE positions */
};

static const struct gen_model *find_model(const char *name)
{
	for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
		if (!strcmp(models[i].class_name, name))
			return &models[i];
	return NULL;
}

int plan_is_generator(const json_t *root)
{
	return !json_object_get(root, "model_type") && json_object_get(root, "_class_name");
}

/* An integer key in [lo, hi]; absent or null: def (a 422 naming the key when def < 0). */
static int read_int(struct cfg *c, const char *key, double lo, double hi, int64_t def, int64_t *out)
{
	double v = 0;
	const json_t *j = plan_get(c, key);
	int rc = j && !json_is_null(j) ? plan_int(c, key, lo, hi, &v) : 0;
	if (rc < 0)
		return rc;
	if (rc == 0 && def < 0)
		return plan_bad(c, key, "a %s config needs %s", c->plan->model_type, key);
	*out = rc ? (int64_t)v : def;
	return 0;
}

/* patch_size: an integer, or Wan's [t, h, w]. */
static int read_patch(struct cfg *c, struct gen *g)
{
	const json_t *ps = plan_get(c, "patch_size");
	if (json_is_array(ps)) {
		double v[3];
		if (json_array_size(ps) != 3)
			return plan_bad(c, "patch_size", "patch_size must be an integer or [t, h, w]");
		for (size_t k = 0; k < 3; k++) {
			const json_t *x = json_array_get(ps, k);
			v[k] = json_is_number(x) ? json_number_value(x) : 0;
			if (v[k] != floor(v[k]) || v[k] < 1 || v[k] > 64)
				return plan_bad(c, "patch_size", "patch_size entries must be integers from 1 to 64");
		}
		if (v[1] != v[2])
			return plan_bad(c, "patch_size", "patch_size [t, h, w] must have h = w");
		g->patch_t = (int64_t)v[0];
		g->patch = (int64_t)v[1];
		return 0;
	}
	int rc = read_int(c, "patch_size", 1, 64, -1, &g->patch);
	if (rc == 0 && g->m->vae_t)
		rc = read_int(c, "patch_size_t", 1, 64, 1, &g->patch_t);
	return rc;
}

/* The size from the query, against the latent and token grid: 0, or a 400 naming it. */
static int size_of(struct cfg *c, struct gen *g)
{
	const struct pe_plan_opts *o = c->opt;
	const struct gen_model *m = g->m;
	if (!o->height || !o->width)
		return pe_err_set(c->err, PE_EINVAL, !o->height ? "height" : "width",
				  "a generator's plan needs the image's height and width in pixels (?height=&width=)");
	int64_t stride = m->vae * (m->patch_is_packing ? 1 : m->packing) * g->patch;
	const char *side[2] = {"height", "width"};
	int64_t px[2] = {o->height, o->width};
	for (int k = 0; k < 2; k++)
		if (px[k] % stride)
			return pe_err_set(c->err, PE_EINVAL, side[k], "%s %lld is not a multiple of %lld (VAE %d x %s%lld)", side[k],
					  (long long)px[k], (long long)stride, m->vae,
					  m->packing > 1 && !m->patch_is_packing ? "packing 2 x patch " : "patch ", (long long)g->patch);
	g->height = o->height;
	g->width = o->width;
	g->lh = o->height / m->vae;
	g->lw = o->width / m->vae;
	g->grid = (struct pe_axial_grid){.rank = 2, .t = 1, .h = o->height / stride, .w = o->width / stride};
	g->lt = 1;
	if (g->grid.h > PE_AXIAL_MAX_SIDE || g->grid.w > PE_AXIAL_MAX_SIDE)
		return pe_err_set(c->err, PE_EINVAL, g->grid.h > g->grid.w ? "height" : "width", "at most %d tokens a side",
				  PE_AXIAL_MAX_SIDE);
	if (!m->vae_t) {
		if (o->frames > 1)
			return pe_err_set(c->err, PE_EINVAL, "frames", "%s makes images: frames must be 1 or absent", m->class_name);
		return 0;
	}
	g->frames = o->frames ? o->frames : m->default_frames;
	if (!o->frames)
		pe_plan_warn(c->plan, "no ?frames: %lld, the pipeline's num_frames", (long long)g->frames);
	if ((g->frames - 1) % m->vae_t)
		return pe_err_set(c->err, PE_EINVAL, "frames", "frames %lld is not %d k + 1 (the VAE compresses time by %d)",
				  (long long)g->frames, m->vae_t, m->vae_t);
	g->lt = (g->frames - 1) / m->vae_t + 1;
	if (g->lt % g->patch_t)
		return pe_err_set(c->err, PE_EINVAL, "frames", "%lld latent frames are not a multiple of patch_size_t %lld",
				  (long long)g->lt, (long long)g->patch_t);
	g->grid.rank = 3;
	g->grid.t = g->lt / g->patch_t;
	if (g->grid.t > PE_AXIAL_MAX_SIDE)
		return pe_err_set(c->err, PE_EINVAL, "frames", "frames %lld make %lld latent frames of tokens; at most %d",
				  (long long)g->frames, (long long)g->grid.t, PE_AXIAL_MAX_SIDE);
	return 0;
}

static struct pe_plan_enc *add_enc(struct cfg *c, const char *kind, const char *table, const char *layers)
{
	struct pe_plan_enc *e = pe_plan_enc_add(c->plan, kind, table, NULL, layers);
	if (e)
		e->tower = "transformer";
	else
		pe_err_set(c->err, PE_EINTERNAL, "", "too many encodings");
	return e;
}

/* A list of even integers (axes_dims_rope) as "16,56,56" into buf. */
static int axes_list(struct cfg *c, const char *key, char *buf, size_t cap, int64_t *sum)
{
	const json_t *l;
	int rc = plan_list_of(c, plan_get(c, key), key, &l);
	if (rc <= 0)
		return rc < 0 ? rc : plan_bad(c, key, "a %s config needs %s", c->plan->model_type, key);
	size_t n = 0, i;
	const json_t *x;
	*sum = 0;
	buf[0] = 0;
	json_array_foreach(l, i, x) {
		double v = json_is_number(x) ? json_number_value(x) : -1;
		if (v != floor(v) || v < 2 || v > PE_MAX_DIM || i >= PE_AXIAL_MAX_AXES)
			return plan_bad(c, key, "%s must list integers from 2 to %.0f", key, PE_MAX_DIM);
		n += (size_t)snprintf(buf + n, cap > n ? cap - n : 0, "%s%.0f", i ? "," : "", v);
		*sum += (int64_t)v;
	}
	return 1;
}

/* The axial RoPE: the preset at the token grid, axes and theta from the config or its head. */
static int add_axial(struct cfg *c, const struct gen *g)
{
	const struct gen_model *m = g->m;
	char axes[128], grid[64];
	int64_t sum = 0, ax[3];
	const char *axes_src = m->axes_key;
	if (m->axes_key) {
		int rc = axes_list(c, m->axes_key, axes, sizeof axes, &sum);
		if (rc < 0)
			return rc;
	} else {
		if (pe_axial_head_split(g->preset, g->head_dim, ax) != 0)
			return plan_bad(c, "attention_head_dim", "attention_head_dim %lld cannot be split into even axes",
					(long long)g->head_dim);
		snprintf(axes, sizeof axes, "%lld,%lld,%lld", (long long)ax[0], (long long)ax[1], (long long)ax[2]);
		sum = ax[0] + ax[1] + ax[2];
		axes_src = "attention_head_dim";
	}
	int64_t image = g->grid.h * g->grid.w; /* each side <= PE_AXIAL_MAX_SIDE: no overflow */
	if (g->grid.rank == 3 && image + g->text <= PE_AXIAL_MAX_TOKENS &&
	    (double)g->grid.t * (double)image + (double)g->text > PE_AXIAL_MAX_TOKENS)
		return pe_err_set(c->err, PE_EINVAL, "frames", "frames %lld: %lld x %lld x %lld tokens, more than %u",
				  (long long)g->frames, (long long)g->grid.t, (long long)g->grid.h, (long long)g->grid.w,
				  PE_AXIAL_MAX_TOKENS);
	struct pe_plan_enc *e = add_enc(c, "rope_axial", "rope/axial", "all");
	if (!e)
		return PE_EINTERNAL;
	const struct pe_axial_preset *pr = pe_axial_preset(g->preset);
	pe_axial_grid_format(&g->grid, grid, sizeof grid);
	pe_plan_param(e, "preset", "%s", pr->name);
	pe_plan_param(e, "grid", "%s", grid);
	pe_plan_source(e, "grid", "height");
	if (pr->text)
		pe_plan_param(e, "text_tokens", "%lld", (long long)g->text);
	pe_plan_param(e, "axes_dim", "%s", axes);
	pe_plan_source(e, "axes_dim", axes_src);
	double theta = pr->theta;
	if (m->theta_key) {
		int rc = plan_num(c, m->theta_key, &theta);
		if (rc < 0)
			return rc;
	}
	pe_plan_param_real(e, "theta", theta);
	pe_plan_source(e, "theta", m->theta_key);
	if (g->preset == PE_AXIAL_COGVIDEOX) {
		int64_t sh = 0, sw = 0;
		int rc = read_int(c, "sample_height", 1, 1 << 20, -1, &sh);
		if (rc < 0 || (rc = read_int(c, "sample_width", 1, 1 << 20, -1, &sw)) < 0)
			return rc;
		pe_plan_param(e, "base_width", "%lld", (long long)(sw / g->patch));
		pe_plan_source(e, "base_width", "sample_width");
		pe_plan_param(e, "base_height", "%lld", (long long)(sh / g->patch));
		pe_plan_source(e, "base_height", "sample_height");
		pe_plan_note(e, "CogVideoX rotates the video tokens only; the crop region is sample_width x sample_height "
			     "latent pixels over patch_size");
	}
	e->head_dim = (int)g->head_dim;
	e->rotary_dim = (int)sum;
	e->layout = "interleaved";
	e->softmax_scale = 1 / sqrt((double)g->head_dim);
	if (sum != g->head_dim)
		pe_plan_warn(c->plan, "the axes_dim sum %lld is not attention_head_dim %lld", (long long)sum, (long long)g->head_dim);
	pe_plan_note(e, "cos and sin [2, tokens, %lld] in the model's token order%s; q and k of every attention "
		     "layer are rotated in interleaved pairs", (long long)sum, pr->text ? " (text first)" : "");
	pe_plan_note(e, "the position ids: /v1/rope/axial/positions with the same preset, grid%s", pr->text ? " and text_tokens" : "");
	return 0;
}

/* A sin-cos grid's size (frames when the grid is a video's) and width: the hidden size. */
static void grid_params(struct pe_plan_enc *e, const struct gen *g)
{
	if (g->grid.rank == 3) {
		pe_plan_param(e, "frames", "%lld", (long long)g->grid.t);
		pe_plan_source(e, "frames", "frames");
	}
	pe_plan_param(e, "height", "%lld", (long long)g->grid.h);
	pe_plan_source(e, "height", "height");
	pe_plan_param(e, "width", "%lld", (long long)g->grid.w);
	pe_plan_source(e, "width", "width");
	pe_plan_param(e, "dim", "%lld", (long long)g->hidden);
	pe_plan_source(e, "dim", "attention_head_dim");
	e->head_dim = (int)g->head_dim;
	e->softmax_scale = 1 / sqrt((double)g->head_dim);
}

/* SD3, PixArt, DiT: the 2-D sin-cos of PatchEmbed at the token grid. */
static int add_sincos2d(struct cfg *c, const struct gen *g)
{
	int64_t sample = 0, maxsz = 0;
	int rc = read_int(c, "sample_size", 1, 1 << 20, -1, &sample);
	if (rc < 0 || (rc = read_int(c, "pos_embed_max_size", 1, 1 << 20, 0, &maxsz)) < 0)
		return rc;
	double interp = 1;
	const char *interp_src = NULL;
	if (!strcmp(g->m->class_name, "PixArtTransformer2DModel")) {
		/* PixArt: the config's, else max(sample_size / 64, 1) */
		const json_t *j = plan_get(c, "interpolation_scale");
		interp = (double)(sample / 64 > 1 ? sample / 64 : 1);
		if (j && !json_is_null(j) && (rc = plan_num(c, "interpolation_scale", &interp)) < 0)
			return rc;
		interp_src = j && !json_is_null(j) ? "interpolation_scale" : "sample_size";
	}
	if (maxsz && (g->grid.h > maxsz || g->grid.w > maxsz))
		return pe_err_set(c->err, PE_EINVAL, g->grid.h > maxsz ? "height" : "width",
				  "%lld x %lld tokens: the model's position table is %lld tokens a side (pos_embed_max_size)",
				  (long long)g->grid.h, (long long)g->grid.w, (long long)maxsz);
	struct pe_plan_enc *e = add_enc(c, "sinusoidal2d", "sinusoidal2d", "input");
	if (!e)
		return PE_EINTERNAL;
	grid_params(e, g);
	pe_plan_param(e, "base_size", "%lld", (long long)(sample / g->patch));
	pe_plan_source(e, "base_size", "sample_size");
	pe_plan_param_real(e, "interpolation_scale", interp);
	pe_plan_source(e, "interpolation_scale", interp_src);
	if (maxsz) {
		pe_plan_param(e, "pos_embed_max_size", "%lld", (long long)maxsz);
		pe_plan_source(e, "pos_embed_max_size", "pos_embed_max_size");
	}
	pe_plan_note(e, "[tokens, %lld] added to the patch embeddings; base_size is sample_size / patch_size%s", (long long)g->hidden,
		     maxsz ? "; computed on the pos_embed_max_size square and cropped at its centre" : "");
	return 0;
}

/* CogVideoX: axial RoPE (5B) or the 3-D sin-cos of its patch embedding (2B). */
static int add_cogvideox(struct cfg *c, const struct gen *g)
{
	int rotary = 0, learned = 0;
	int rc = plan_bool(c, "use_rotary_positional_embeddings", &rotary);
	if (rc < 0 || (rc = plan_bool(c, "use_learned_positional_embeddings", &learned)) < 0)
		return rc;
	if (rotary)
		return add_axial(c, g);
	if (learned)
		return plan_bad(c, "use_learned_positional_embeddings", "CogVideoX's learned positions are the checkpoint's");
	double si = 1.875, ti = 1;
	if ((rc = plan_num(c, "spatial_interpolation_scale", &si)) < 0 ||
	    (rc = plan_num(c, "temporal_interpolation_scale", &ti)) < 0)
		return rc;
	struct pe_plan_enc *e = add_enc(c, "sinusoidal3d", "sinusoidal3d", "input");
	if (!e)
		return PE_EINTERNAL;
	grid_params(e, g);
	pe_plan_param_real(e, "spatial_interpolation_scale", si);
	pe_plan_source(e, "spatial_interpolation_scale", "spatial_interpolation_scale");
	pe_plan_param_real(e, "temporal_interpolation_scale", ti);
	pe_plan_source(e, "temporal_interpolation_scale", "temporal_interpolation_scale");
	pe_plan_note(e, "[frames, height x width, %lld] added to the video tokens' embeddings; the text tokens before "
		     "them get zeros", (long long)g->hidden);
	return 0;
}

/* The timestep embedding: diffusers' Timesteps of the model's conditioning. */
static int add_timestep(struct cfg *c, const struct gen *g)
{
	const struct gen_model *m = g->m;
	int64_t dim = 256;
	int flip = 1;
	double shift = m->ts_shift;
	const char *dim_src = m->ts_dim_key;
	int rc = 0;
	if (m->ts_dim_key && (rc = read_int(c, m->ts_dim_key, 1, PE_MAX_DIM, 256, &dim)) < 0)
		return rc;
	if (m->pe == GEN_COGVIDEOX) { /* Timesteps(inner_dim, flip_sin_to_cos, freq_shift) */
		dim = g->hidden;
		dim_src = "attention_head_dim";
		if ((rc = plan_bool(c, "flip_sin_to_cos", &flip)) < 0 || (rc = plan_num(c, "freq_shift", &shift)) < 0)
			return rc;
	}
	struct pe_plan_enc *e = add_enc(c, "timestep", "sinusoidal/timestep", "conditioning");
	if (!e)
		return PE_EINTERNAL;
	pe_plan_param(e, "timesteps", "%s", m->ts_list);
	pe_plan_param(e, "dim", "%lld", (long long)dim);
	pe_plan_source(e, "dim", dim_src);
	pe_plan_param(e, "flip_sin_to_cos", "%d", flip);
	pe_plan_source(e, "flip_sin_to_cos", m->pe == GEN_COGVIDEOX ? "flip_sin_to_cos" : NULL);
	pe_plan_param_real(e, "downscale_freq_shift", shift);
	pe_plan_source(e, "downscale_freq_shift", m->pe == GEN_COGVIDEOX ? "freq_shift" : NULL);
	pe_plan_param(e, "scale", "%s", m->ts_scale);
	e->softmax_scale = NAN;
	pe_plan_note(e, "[timesteps, %lld] into the time embedding's MLP; timesteps: %s", (long long)dim, m->ts_note);
	return 0;
}

/* The plan's latent geometry as a JSON object (plan->generator). */
static int describe(struct cfg *c, const struct gen *g)
{
	const struct gen_model *m = g->m;
	json_t *o = json_pack("{s:s, s:I, s:I, s:i, s:I, s:i, s:{s:I, s:I}, s:{s:I, s:I, s:I}}", "class_name", m->class_name,
			      "height", (json_int_t)g->height, "width", (json_int_t)g->width, "vae_scale_factor", m->vae,
			      "patch_size", (json_int_t)(m->patch_is_packing ? 1 : g->patch), "packing",
			      m->patch_is_packing ? (int)g->patch : m->packing, "latent", "height", (json_int_t)g->lh, "width",
			      (json_int_t)g->lw, "tokens", "height", (json_int_t)g->grid.h, "width", (json_int_t)g->grid.w,
			      "count", (json_int_t)(g->grid.t * g->grid.h * g->grid.w));
	int bad = !o;
	if (!bad && m->vae_t) {
		bad |= json_object_set_new(o, "frames", json_integer(g->frames));
		bad |= json_object_set_new(o, "vae_temporal_scale_factor", json_integer(m->vae_t));
		bad |= json_object_set_new(o, "patch_size_t", json_integer(g->patch_t));
		bad |= json_object_set_new(json_object_get(o, "latent"), "frames", json_integer(g->lt));
		bad |= json_object_set_new(json_object_get(o, "tokens"), "frames", json_integer(g->grid.t));
	}
	if (!bad && g->text)
		bad |= json_object_set_new(o, "text_tokens", json_integer(g->text));
	if (!bad)
		bad = !(c->plan->generator = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER));
	json_decref(o);
	return bad ? pe_err_set(c->err, PE_ENOMEM, "", "out of memory") : 0;
}

int plan_generator(struct cfg *c)
{
	const json_t *cn = plan_member(c->root, "_class_name");
	if (!json_is_string(cn))
		return plan_bad(c, "_class_name", "_class_name must be a string");
	snprintf(c->plan->model_type, sizeof c->plan->model_type, "%s", json_string_value(cn));
	struct gen g = {.m = find_model(json_string_value(cn)), .patch_t = 1};
	if (!g.m)
		return plan_bad(c, "_class_name", "_class_name '%.60s' is not a generator posenc knows", json_string_value(cn));
	g.preset = pe_axial_preset_of_class(g.m->class_name);
	int rc = read_int(c, "num_attention_heads", 1, 65536, -1, &g.heads);
	if (rc < 0 || (rc = read_int(c, "attention_head_dim", 1, PE_MAX_DIM, -1, &g.head_dim)) < 0 ||
	    (rc = read_patch(c, &g)) < 0 || (rc = size_of(c, &g)) < 0)
		return rc;
	g.hidden = g.heads * g.head_dim;
	if (g.preset && pe_axial_preset(g.preset)->text)
		g.text = TEXT_TOKENS;
	rc = g.m->pe == GEN_SINCOS2D ? add_sincos2d(c, &g) : g.m->pe == GEN_COGVIDEOX ? add_cogvideox(c, &g) : add_axial(c, &g);
	if (rc < 0 || (rc = add_timestep(c, &g)) < 0 || (rc = describe(c, &g)) < 0)
		return rc;
	for (size_t i = 0; i < c->plan->nenc; i++)
		if ((rc = pe_plan_finish_enc(c->plan, &c->plan->enc[i], 0, c->opt, c->err)) != 0)
			return rc;
	return 0;
}
