/* /v1/rope/axial/positions and /v1/rope/axial: the position ids [S, n_axes] of a preset's token grid,
 * and the cos/sin table [2, S, sum(axes_dim)] of a preset's grid or (the POST form,
 * pe_axial_body_def) of ids posted in the body. Band a of a row is axis a's channels, in
 * `layout=interleaved` (diffusers' repeat_interleave_real=True: each value twice in a row) or
 * `layout=half` (repeat_interleave_real=False: the band's values, then the same again).
 * compat=exact is float64 math rounded once to the dtype; compat=hf the preset's own arithmetic
 * (axial.c), whose float32 values any dtype then carries. Tokens are computed a block at a time
 * from their ids, so memory beyond the output is a block's ids and one row. */
#include "core/axial.h"
#include "core/tables.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const freqs_dtypes[] = {"f64", "f32", NULL};
extern const char *const pe_rope_layouts[];

#define AXIAL_PRESET_PARAM(def, help) {"preset", PE_PT_ENUM, def, 0, 0, pe_axial_preset_names, help}
#define AXIAL_ROPE_PARAMS                                                                                         \
	{"axes_dim", PE_PT_LIST, "", 2, PE_MAX_DIM, PE_LIST_INTEGERS,                                                  \
	 "rotary channels per axis, each even (default: the preset's)"},                                             \
	{"theta", PE_PT_REAL, "", 1e-6, 1e300, NULL, "rope theta (default: the preset's, else 10000)"},               \
	{"layout", PE_PT_ENUM, "interleaved", 0, 0, pe_rope_layouts,                                               \
	 "interleaved (diffusers' repeat_interleave_real=True) or half (each band's values, then again)"},          \
	{"compat", PE_PT_ENUM, "exact", 0, 0, pe_compat_exact_hf, "arithmetic: exact (float64) or hf (the model's)"}, \
	{"freqs_dtype", PE_PT_ENUM, "", 0, 0, freqs_dtypes,                                                          \
	 "compat=hf: frequencies in f64 (FLUX, Wan) or f32 (HunyuanVideo, CogVideoX, Qwen-Image); default the preset's, else f64"}

/* grid first: a table too large for max_elements is refused naming it (src/http/table.c). */
static const struct pe_param_spec table_params[] = {
	PE_AXIAL_GRID_PARAMS, AXIAL_PRESET_PARAM("flux", "the model whose grid, axes and theta the table takes"),
	AXIAL_ROPE_PARAMS};
static const struct pe_param_spec body_params[] = {
	AXIAL_PRESET_PARAM("none", "the model whose axes and theta the table takes"), AXIAL_ROPE_PARAMS};
static const struct pe_param_spec positions_params[] = {
	PE_AXIAL_GRID_PARAMS, AXIAL_PRESET_PARAM("flux", "the model whose position ids these are"),
	{"compat", PE_PT_ENUM, "exact", 0, 0, pe_compat_exact_hf,
	 "exact (float64 values) or hf (the model's float32 tensors: CogVideoX's torch.linspace)"}};

/* ---- checks ---- */

/* Fill name from text when the client did not give it (a default that depends on the preset). */
static int fill(struct pe_params *p, const char *name, const char *text, struct pe_err *err)
{
	if (pe_param_isset(p, name))
		return 0;
	int rc = pe_params_set(p, name, text, err);
	p->v[pe_param_index(p->def, name)].given = 0;
	return rc;
}

static int given(const struct pe_params *p, const char *name) { return p->v[pe_param_index(p->def, name)].given; }

/* A model's parameter given for another preset. */
static int only_for(const struct pe_params *p, const char *name, int preset, struct pe_err *err)
{
	if (given(p, name) && pe_param_enum(p, "preset") != preset)
		return pe_err_set(err, PE_EINVAL, name, "%s applies to preset=%s only", name, pe_axial_preset_names[preset]);
	return 0;
}

/* The largest positions a model's precomputed tables hold (Wan's max_seq_len, Qwen-Image's 4096). */
static int model_range(const struct pe_axial_layout *l, struct pe_err *err)
{
	const struct pe_axial_preset *pr = pe_axial_preset(l->preset);
	int64_t h = l->grid.h, w = l->grid.w, m = l->grid.t - 1;
	if (!pr->max_pos)
		return 0;
	int64_t hs = l->scale_rope ? h - h / 2 : h - 1, ws = l->scale_rope ? w - w / 2 : w - 1;
	m = m > hs ? m : hs;
	m = m > ws ? m : ws;
	if (m > pr->max_pos)
		return pe_err_set(err, PE_EINVAL, "grid", "grid: %s's rotary tables hold positions up to %lld", pr->name,
				  (long long)pr->max_pos);
	int64_t start = l->scale_rope ? (h / 2 > w / 2 ? h / 2 : w / 2) : (h > w ? h : w);
	if (pr->text && l->text && start + l->text - 1 > pr->max_pos)
		return pe_err_set(err, PE_EINVAL, "text_tokens", "text_tokens: %s's text positions start at %lld and end by %lld",
				  pr->name, (long long)start, (long long)pr->max_pos);
	return 0;
}

void pe_axial_layout_get(const struct pe_params *p, struct pe_axial_layout *l)
{
	memset(l, 0, sizeof *l);
	l->preset = pe_param_enum(p, "preset");
	pe_axial_grid_parse(p->v[pe_param_index(p->def, "grid")].text, &l->grid, NULL);
	l->text = pe_param_isset(p, "text_tokens") ? pe_param_int(p, "text_tokens") : 0;
	l->base_width = pe_param_isset(p, "base_width") ? pe_param_int(p, "base_width") : 45;
	l->base_height = pe_param_isset(p, "base_height") ? pe_param_int(p, "base_height") : 30;
	l->scale_rope = pe_param_isset(p, "scale_rope") ? (int)pe_param_int(p, "scale_rope") : 1;
	l->scale_rope = l->preset == PE_AXIAL_QWENIMAGE && l->scale_rope;
	l->hf = pe_param_enum(p, "compat") == PE_COMPAT_HF;
}

/* The grid parameters: a preset and its grid, the model's own parameters for that model only. */
static int layout_check(struct pe_params *p, struct pe_err *err)
{
	int preset = pe_param_enum(p, "preset"), rc;
	const struct pe_axial_preset *pr = pe_axial_preset(preset);
	struct pe_axial_grid g;
	char canon[64];
	if (!pr)
		return pe_err_set(err, PE_EINVAL, "preset",
				  "preset names the model (flux, hunyuanvideo, wan, cogvideox, qwenimage); without one, POST the ids");
	if (!pe_param_isset(p, "grid"))
		return pe_err_set(err, PE_EINVAL, "grid", "grid is required with a preset (HxW or TxHxW)");
	char **text = &p->v[pe_param_index(p->def, "grid")].text;
	if ((rc = pe_axial_grid_parse(*text, &g, err)) != 0)
		return rc;
	if (!pr->video && g.t > 1)
		return pe_err_set(err, PE_EINVAL, "grid", "grid: %s takes an image grid HxW", pr->name);
	if (given(p, "text_tokens") && !pr->text)
		return pe_err_set(err, PE_EINVAL, "text_tokens", "text_tokens: %s gives its text tokens no positions", pr->name);
	if ((rc = only_for(p, "base_width", PE_AXIAL_COGVIDEOX, err)) || (rc = only_for(p, "base_height", PE_AXIAL_COGVIDEOX, err)) ||
	    (rc = only_for(p, "scale_rope", PE_AXIAL_QWENIMAGE, err)))
		return rc;
	pe_axial_grid_format(&g, canon, sizeof canon);
	strcpy(*text, canon); /* never longer than what was parsed: equal grids share one cache key */
	struct pe_axial_layout l;
	pe_axial_layout_get(p, &l);
	if (pe_axial_tokens(&l) > PE_AXIAL_MAX_TOKENS)
		return pe_err_set(err, PE_EINVAL, "text_tokens", "text_tokens: the sequence holds more than %u tokens",
				  PE_AXIAL_MAX_TOKENS);
	return model_range(&l, err);
}

/* The rotary parameters: the preset's defaults, then axes_dim against naxes (0: any count). */
static int rope_check(struct pe_params *p, size_t naxes, struct pe_err *err)
{
	const struct pe_axial_preset *pr = pe_axial_preset(pe_param_enum(p, "preset"));
	char theta[32];
	snprintf(theta, sizeof theta, "%.17g", pr ? pr->theta : 10000.0);
	int rc = 0;
	if (given(p, "freqs_dtype") && pe_param_enum(p, "compat") != PE_COMPAT_HF)
		return pe_err_set(err, PE_EINVAL, "freqs_dtype", "freqs_dtype applies to compat=hf");
	if ((pr && (rc = fill(p, "axes_dim", pr->axes_dim, err))) || (rc = fill(p, "theta", theta, err)) ||
	    (pe_param_enum(p, "compat") == PE_COMPAT_HF && (rc = fill(p, "freqs_dtype", pr && pr->freqs_f32 ? "f32" : "f64", err))))
		return rc;
	if ((rc = pe_axial_axes_check(p, naxes ? naxes : pr ? pr->naxes : 0, err)) != 0)
		return rc;
	return pe_param_enum(p, "freqs_dtype") == 1 ? pe_check_float32_range(p, "theta", err) : 0;
}

static int table_check(struct pe_params *p, struct pe_err *err)
{
	int rc = layout_check(p, err);
	return rc ? rc : rope_check(p, 0, err);
}

static int body_check(struct pe_params *p, struct pe_err *err) { return rope_check(p, 0, err); }

int pe_axial_body_check(const struct pe_params *p, size_t naxes, struct pe_err *err)
{
	return pe_axial_axes_check(p, naxes, err);
}

/* ---- the tables ---- */

#define BLOCK 1024 /* tokens whose ids are built at a time */

/* The sum of axes_dim. */
static size_t axes_width(const struct pe_params *p)
{
	size_t n, dim = 0;
	const double *ad = pe_param_list(p, "axes_dim", &n);
	for (size_t a = 0; a < n; a++)
		dim += (size_t)ad[a];
	return dim;
}

static int positions_shape(const struct pe_params *p, struct pe_shape *s)
{
	struct pe_axial_layout l;
	pe_axial_layout_get(p, &l);
	*s = (struct pe_shape){.rank = 2, .dim = {pe_axial_tokens(&l), 3}};
	return 0;
}

static int table_shape(const struct pe_params *p, struct pe_shape *s)
{
	struct pe_axial_layout l;
	pe_axial_layout_get(p, &l);
	*s = (struct pe_shape){.rank = 3, .dim = {2, pe_axial_tokens(&l), axes_width(p)}};
	return 0;
}

/* Ids of tokens [r0, r0 + n) into out[0] (n rows of 3 in dt). */
static int positions_rows(const struct pe_params *p, enum pe_dtype dt, size_t r0, size_t n, void *const *out,
			  struct pe_err *err)
{
	struct pe_axial_layout l;
	double ids[3 * BLOCK];
	size_t esz = pe_dtype_size(dt);
	pe_axial_layout_get(p, &l);
	for (size_t i = 0; i < n; i += BLOCK) {
		size_t c = n - i < BLOCK ? n - i : BLOCK;
		int rc = pe_cancelled();
		if (rc)
			return pe_cancel_err(rc, err);
		pe_axial_positions(&l, r0 + i, c, ids);
		if (out[0])
			pe_store_f64(dt, (char *)out[0] + 3 * i * esz, ids, 3 * c);
	}
	return 0;
}

static int positions_compute(const struct pe_params *p, enum pe_dtype dt, void *out, struct pe_err *err)
{
	struct pe_axial_layout l;
	void *const planes[1] = {out};
	pe_axial_layout_get(p, &l);
	return positions_rows(p, dt, 0, pe_axial_tokens(&l), planes, err);
}

/* Where compat=hf's float32 cos/sin find the ids beside a token's (pe_axial_row_torch). */
struct torch_ctx {
	const struct pe_axial_layout *l;
	const double *ids; /* the posted ids [n][na], or NULL: the layout's */
	size_t na;
};

static double ids_pos(const void *ctx, size_t axis, size_t row)
{
	const struct torch_ctx *t = ctx;
	return t->ids[row * t->na + axis];
}

static double token_pos(const void *ctx, size_t axis, size_t row)
{
	const struct torch_ctx *t = ctx;
	double o[3];
	pe_axial_positions(t->l, row, 1, o);
	return o[axis];
}

/* CogVideoX's per-axis tables: row `row` of axis 0, 1, 2 is the coordinate of frame, row, column `row`. */
static double coord_pos(const void *ctx, size_t axis, size_t row)
{
	const struct torch_ctx *t = ctx;
	size_t hw = (size_t)(t->l->grid.h * t->l->grid.w), w = (size_t)t->l->grid.w;
	return token_pos(ctx, axis, axis == 0 ? row * hw : axis == 1 ? row * w : row);
}

/* Token k's sources: every token's ids as one tensor, or CogVideoX's per-axis tables. */
static void torch_sources(const struct torch_ctx *t, size_t n, size_t k, struct pe_axial_src *src)
{
	const struct pe_axial_grid *g = t->ids ? NULL : &t->l->grid;
	for (size_t a = 0; a < t->na; a++) {
		src[a] = (struct pe_axial_src){.rows = n, .row = k, .pos = t->ids ? ids_pos : token_pos, .ctx = t};
		if (g && t->l->preset == PE_AXIAL_COGVIDEOX) {
			size_t side[3] = {(size_t)g->t, (size_t)g->h, (size_t)g->w}, at[3];
			at[0] = k / (side[1] * side[2]);
			at[1] = k / side[2] % side[1];
			at[2] = k % side[2];
			src[a] = (struct pe_axial_src){.rows = side[a], .row = at[a], .pos = coord_pos, .ctx = t};
		}
	}
}

/* The largest |id|: each axis' coordinates grow with the index along it, so the first and last
 * image tokens and the last text token hold the extremes. */
static double positions_max_abs(const struct pe_params *p)
{
	struct pe_axial_layout l;
	double o[9], m = 0;
	pe_axial_layout_get(p, &l);
	size_t n = pe_axial_tokens(&l), text = n - (size_t)(l.grid.t * l.grid.h * l.grid.w);
	pe_axial_positions(&l, text, 1, o);
	pe_axial_positions(&l, n - 1, 1, o + 3);
	pe_axial_positions(&l, text ? text - 1 : n - 1, 1, o + 6);
	for (int i = 0; i < 9; i++)
		m = fabs(o[i]) > m ? fabs(o[i]) : m;
	return m;
}

/* Rows [r0, r0 + count) of a table of n tokens into oc and os (NULL: a plane not wanted): ids
 * from `ids` ([n][naxes]) or, NULL, from the params' layout. */
static int rows(const struct pe_params *p, const double *ids, size_t n, size_t r0, size_t count, enum pe_dtype dt,
		char *oc, char *os, struct pe_err *err)
{
	struct pe_axial_rope r;
	struct pe_axial_layout l;
	struct pe_axial_src src[PE_AXIAL_MAX_AXES];
	double own[3 * BLOCK];
	if (pe_axial_rope_init(&r, p) != 0)
		return pe_err_set(err, PE_ENOMEM, "", "out of memory");
	double *row = malloc(sizeof(double) * 2 * (r.dim ? r.dim : 1));
	size_t esz = pe_dtype_size(dt), na = r.naxes;
	int rc = row ? 0 : pe_err_set(err, PE_ENOMEM, "", "out of memory");
	if (!ids)
		pe_axial_layout_get(p, &l);
	struct torch_ctx tc = {.l = &l, .ids = ids, .na = na};
	for (size_t i = 0; rc == 0 && i < count; i += BLOCK) {
		size_t c = count - i < BLOCK ? count - i : BLOCK;
		const double *blk = ids ? ids + (r0 + i) * na : own;
		if ((rc = pe_cancelled()) != 0) {
			pe_cancel_err(rc, err);
			break;
		}
		if (!ids)
			pe_axial_positions(&l, r0 + i, c, own);
		for (size_t k = 0; k < c; k++) {
			if (r.torch_vec) {
				torch_sources(&tc, n, r0 + i + k, src);
				pe_axial_row_torch(&r, src, row, row + r.dim);
			} else {
				pe_axial_row(&r, blk + k * na, row, row + r.dim);
			}
			if (oc)
				pe_store_f64(dt, oc + (i + k) * r.dim * esz, row, r.dim);
			if (os)
				pe_store_f64(dt, os + (i + k) * r.dim * esz, row + r.dim, r.dim);
		}
	}
	free(row);
	pe_axial_rope_destroy(&r);
	return rc;
}

static int table_compute_rows(const struct pe_params *p, enum pe_dtype dt, size_t r0, size_t n, void *const *out,
			      struct pe_err *err)
{
	struct pe_axial_layout l;
	pe_axial_layout_get(p, &l);
	return rows(p, NULL, pe_axial_tokens(&l), r0, n, dt, out[0], out[1], err);
}

static int table_compute(const struct pe_params *p, enum pe_dtype dt, void *out, struct pe_err *err)
{
	struct pe_shape s;
	table_shape(p, &s);
	char *cos = out, *sin = cos + s.dim[1] * s.dim[2] * pe_dtype_size(dt);
	return rows(p, NULL, s.dim[1], 0, s.dim[1], dt, cos, sin, err);
}

int pe_axial_table_compute(const struct pe_params *p, const double *ids, size_t n, enum pe_dtype dt, void *out,
			   struct pe_err *err)
{
	return rows(p, ids, n, 0, n, dt, out, (char *)out + n * axes_width(p) * pe_dtype_size(dt), err);
}

const struct pe_table_def pe_table_rope_axial_positions = {
	.name = "rope/axial/positions",
	.summary = "Axial RoPE position ids [S, 3] of an image or video token grid, as diffusers' FLUX, HunyuanVideo, Wan, CogVideoX, Qwen-Image build them",
	.params = positions_params,
	.nparams = sizeof positions_params / sizeof positions_params[0],
	.fixed_dtype = PE_DTYPE_COUNT_,
	.check = layout_check,
	.shape = positions_shape,
	.compute = positions_compute,
	.max_abs = positions_max_abs,
	.compute_rows = positions_rows,
};

const struct pe_table_def pe_table_rope_axial = {
	.name = "rope/axial",
	.summary = "Axial (N-D) RoPE cos/sin [2, S, sum(axes_dim)] of a preset's token grid (POST: of posted ids [S, n_axes])",
	.params = table_params,
	.nparams = sizeof table_params / sizeof table_params[0],
	.fixed_dtype = PE_DTYPE_COUNT_,
	.check = table_check,
	.shape = table_shape,
	.compute = table_compute,
	.compute_rows = table_compute_rows,
	.panel_labels = pe_cos_sin_labels,
};

/* The POST form's parameters; not in the registry (src/http/axial.c serves it). */
const struct pe_table_def pe_axial_body_def = {
	.name = "rope/axial",
	.summary = "Axial RoPE cos/sin of posted ids",
	.params = body_params,
	.nparams = sizeof body_params / sizeof body_params[0],
	.fixed_dtype = PE_DTYPE_COUNT_,
	.check = body_check,
	.panel_labels = pe_cos_sin_labels,
};
