/* /v1/rope2d: 2-D rotary tables of vision transformers, shape [2, rows, dim]: data[0] = cos,
 * data[1] = sin, one row per patch in the order the model visits its patches. Four models'
 * constructions, each as its Hugging Face code builds it (q = dim/4 frequencies per coordinate):
 *
 *   qwen2vl  (default) Qwen2-VL's VisionRotaryEmbedding(head_dim/2): w_k = 1/base^(2k/(dim/2));
 *            rot_pos_emb gathers f = [row*w | col*w] and the attention uses cat(f, f) with
 *            rotate_half, so a row is [cos(row*w) | cos(col*w) | cos(row*w) | cos(col*w)]. Patch
 *            order: spatial_merge_size m windows (m x m patches each, row-major inside, windows
 *            row-major), as rot_pos_emb's reshape(h/m, m, w/m, m).permute(0, 2, 1, 3) visits them;
 *            m = 1 (the default) is plain row-major, the table this endpoint has always served.
 *            Qwen2-VL / 2.5-VL / 3-VL checkpoints use m = 2.
 *   pixtral  PixtralRotaryEmbedding: f_j = 1/base^(2j/dim), j < dim/2; rows turn the even ones
 *            (row*f_2k), columns the odd ones (col*f_2k+1), cat(inv, inv) with rotate_half:
 *            [cos(row*f_even) | cos(col*f_odd) | same again]. Row-major patches
 *            (position_ids_in_meshgrid); max_patches_per_side (image_size / patch_size) bounds
 *            the grid as HF's precomputed table does.
 *   llama4   Llama4VisionRotaryEmbedding: w_k = 1/base^(2k/(dim/2)), angles (col+1)*w then
 *            (row+1)*w, as a complex freqs_ci that multiplies adjacent pairs of the head: the
 *            interleaved layout [cos a0, cos a0, cos a1, cos a1, ...]. A square grid, row-major,
 *            then the class token as the last row with every angle 0 (cos 1, sin 0).
 *   gemma4   Gemma4VisionRotaryEmbedding: qwen2vl's frequencies (dim/2 per axis), each axis's
 *            half of the head rotated in half layout of its own, the column's first:
 *            [cos(col*w) | cos(col*w) | cos(row*w) | cos(row*w)]. Row-major patches.
 *
 * compat=exact: double (angles.h), one rounding. compat=hf: torch float32 frequencies (pow over the
 * vector the model builds: dim/4 values, or Pixtral's dim/2), float angles, cos/sin, as the model
 * computes them. Sin/cos of each coordinate are computed once and rounded once into the dtype;
 * output rows are copies of those blocks. A block of rows (compute_rows, which the whole table goes
 * through too) walks bands of m grid rows: it tabulates the band's m rows and the columns its
 * patches use (all width of them once it spans a band, else the range its windows cover), so the
 * CLI streams a table of any size through a small buffer, and every value comes from its
 * coordinate alone: a block is byte for byte the whole table's rows wherever it starts. */
#include "core/angles.h"
#include "core/rope.h"
#include "core/tables.h"
#include "core/torchmath.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_GRID 1048576.0 /* patches per side */
#define MAX_MERGE 64.0     /* spatial_merge_size */

enum { V_QWEN2VL, V_PIXTRAL, V_LLAMA4, V_GEMMA4 };
static const char *const variants[] = {"qwen2vl", "pixtral", "llama4", "gemma4", NULL};

static const struct pe_param_spec params[] = {
	{"height", PE_PT_INT, NULL, 1, MAX_GRID, NULL, "patch rows of the grid"},
	{"width", PE_PT_INT, NULL, 1, MAX_GRID, NULL, "patch columns of the grid"},
	{"dim", PE_PT_INT, NULL, 4, PE_MAX_DIM, NULL, "rotary head dimension (multiple of 4)"},
	{"base", PE_PT_REAL, "10000", 1e-300, 1e300, NULL, "wavelength base, theta (> 0)"},
	{"variant", PE_PT_ENUM, "qwen2vl", 0, 0, variants,
	 "model: qwen2vl (Qwen2-VL vision tower), pixtral (even/odd frequency split), llama4 (interleaved, class token), "
	 "gemma4 (column half, then row half)"},
	{"spatial_merge_size", PE_PT_INT, "1", 1, MAX_MERGE, NULL,
	 "qwen2vl: patch order in m x m merge windows (1: row-major; Qwen2-VL checkpoints: 2)"},
	{"max_patches_per_side", PE_PT_INT, "", 1, MAX_GRID, NULL, "pixtral: image_size / patch_size, the largest grid side"},
	{"compat", PE_PT_ENUM, "exact", 0, 0, pe_compat_exact_hf, "arithmetic: exact (double) or hf (PyTorch float32)"},
};

static struct pe_param_val *val(struct pe_params *p, const char *name)
{
	return &p->v[pe_param_index(p->def, name)];
}

/* A variant's own parameter given to another is a 400; not given, it leaves the canonical key. */
static int only_for(struct pe_params *p, const char *name, int variant, struct pe_err *err)
{
	int v = pe_param_enum(p, "variant");
	if (v == variant)
		return 0;
	if (val(p, name)->given)
		return pe_err_set(err, PE_EINVAL, name, "%s does not apply to variant=%s", name, variants[v]);
	val(p, name)->set = 0;
	return 0;
}

static int check_grid(struct pe_params *p, struct pe_err *err)
{
	int64_t h = pe_param_int(p, "height"), w = pe_param_int(p, "width");
	switch (pe_param_enum(p, "variant")) {
	case V_QWEN2VL: {
		int64_t m = pe_param_int(p, "spatial_merge_size");
		if (h % m || w % m)
			return pe_err_set(err, PE_EINVAL, h % m ? "height" : "width",
					  "%s (%lld) must be a multiple of spatial_merge_size (%lld)", h % m ? "height" : "width",
					  (long long)(h % m ? h : w), (long long)m);
		break;
	}
	case V_PIXTRAL:
		if (pe_param_isset(p, "max_patches_per_side")) {
			int64_t mx = pe_param_int(p, "max_patches_per_side");
			if (h > mx || w > mx)
				return pe_err_set(err, PE_EINVAL, h > mx ? "height" : "width",
						  "%s (%lld) exceeds max_patches_per_side (%lld)", h > mx ? "height" : "width",
						  (long long)(h > mx ? h : w), (long long)mx);
		}
		break;
	case V_LLAMA4:
		if (h != w)
			return pe_err_set(err, PE_EINVAL, "width",
					  "variant=llama4 builds a square grid (image_size / patch_size per side): width (%lld) must equal height (%lld)",
					  (long long)w, (long long)h);
		break;
	}
	return 0;
}

static int check_angles(const struct pe_params *p, struct pe_err *err);

static int check(struct pe_params *p, struct pe_err *err)
{
	int rc;
	if (pe_param_int(p, "dim") % 4 != 0)
		return pe_err_set(err, PE_EINVAL, "dim", "dim must be a multiple of 4 for rope2d");
	if ((rc = only_for(p, "spatial_merge_size", V_QWEN2VL, err)) || (rc = only_for(p, "max_patches_per_side", V_PIXTRAL, err)) ||
	    (rc = check_grid(p, err)))
		return rc;
	/* The row-major Qwen2-VL table keeps the key it had before variants existed (its ETag, its cache entries). */
	if (pe_param_enum(p, "variant") == V_QWEN2VL && pe_param_int(p, "spatial_merge_size") == 1)
		val(p, "variant")->set = val(p, "spatial_merge_size")->set = 0;
	if ((rc = pe_check_float32_range(p, "base", err)) != 0)
		return rc;
	return check_angles(p, err);
}

static int shape(const struct pe_params *p, struct pe_shape *s)
{
	s->rank = 3;
	s->dim[0] = 2;
	s->dim[1] = (size_t)(pe_param_int(p, "height") * pe_param_int(p, "width")) +
		    (pe_param_enum(p, "variant") == V_LLAMA4 ? 1 : 0);
	s->dim[2] = (size_t)pe_param_int(p, "dim");
	return 0;
}

/* One table's geometry and the per-coordinate blocks of a block of rows. */
struct grid {
	size_t width, npatch, q, m, esz, blk; /* blk: bytes of one coordinate's block in a row */
	int variant, hf;
	double off;       /* added to both coordinates (Llama 4 counts from 1) */
	double *wr, *wc;  /* row and column frequencies, q each */
	double *ang, *s, *c, *tmp;
	char *rs, *rc;    /* m grid rows' sin and cos blocks */
	char *cs, *cc;    /* columns [clo, chi)'s sin and cos blocks */
	size_t clo, chi, ccap;
	enum pe_dtype dt;
};

/* sin and cos of coordinate pos into one block each (interleaved for llama4), rounded to dt. */
static void tabulate(struct grid *g, double pos, const double *w, char *sdst, char *cdst)
{
	size_t q = g->q;
	pe_sincos_at(pos + g->off, w, q, g->hf, g->ang, g->s, g->c);
	if (g->variant != V_LLAMA4) {
		pe_store_f64(g->dt, sdst, g->s, q);
		pe_store_f64(g->dt, cdst, g->c, q);
		return;
	}
	for (size_t k = 0; k < q; k++)
		g->tmp[2 * k] = g->tmp[2 * k + 1] = g->s[k];
	pe_store_f64(g->dt, sdst, g->tmp, 2 * q);
	for (size_t k = 0; k < q; k++)
		g->tmp[2 * k] = g->tmp[2 * k + 1] = g->c[k];
	pe_store_f64(g->dt, cdst, g->tmp, 2 * q);
}

/* Columns [lo, hi) tabulated, unless they already are. */
static void need_columns(struct grid *g, size_t lo, size_t hi)
{
	if (lo >= g->clo && hi <= g->chi)
		return;
	if (hi - lo < g->ccap && lo + g->ccap <= g->width)
		hi = lo + g->ccap; /* tabulate ahead while the room is there: the next band reuses them */
	else if (hi - lo < g->ccap) {
		lo = g->width - g->ccap;
		hi = g->width;
	}
	for (size_t x = lo; x < hi; x++)
		tabulate(g, (double)x, g->wc, g->cs + (x - lo) * g->blk, g->cc + (x - lo) * g->blk);
	g->clo = lo;
	g->chi = hi;
}

/* One output row from its row and column blocks: [R | C | R | C], llama4's [C | R], gemma4's
 * [C | C | R | R]. */
static void copy_row(const struct grid *g, char *o, const char *row, const char *col)
{
	if (g->variant == V_LLAMA4) {
		memcpy(o, col, g->blk);
		memcpy(o + g->blk, row, g->blk);
		return;
	}
	for (int b = 0; b < 4; b++)
		memcpy(o + b * g->blk, (g->variant == V_GEMMA4 ? b < 2 : (b & 1)) ? col : row, g->blk);
}

/* Patches [j0, j1) of band b (grid rows b*m .. b*m+m-1) into the planes at row offset `at`. */
static void band(struct grid *g, size_t b, size_t j0, size_t j1, char *oc, char *os, size_t at)
{
	size_t m = g->m, mm = m * m, base = b * m * g->width, pa = j0 - base, pb = j1 - base;
	for (size_t i = 0; i < m; i++)
		tabulate(g, (double)(b * m + i), g->wr, g->rs + i * g->blk, g->rc + i * g->blk);
	size_t hi = (pb - 1) / mm * m + m;
	need_columns(g, pa / mm * m, hi < g->width ? hi : g->width);
	size_t row_bytes = (g->variant == V_LLAMA4 ? 2 : 4) * g->blk;
	for (size_t p = pa; p < pb; p++, at += row_bytes) {
		size_t k = p % mm, x = p / mm * m + k % m, i = k / m;
		if (oc)
			copy_row(g, oc + at, g->rc + i * g->blk, g->cc + (x - g->clo) * g->blk);
		if (os)
			copy_row(g, os + at, g->rs + i * g->blk, g->cs + (x - g->clo) * g->blk);
	}
}

/* Llama 4's class token: every angle 0. */
static void cls_row(const struct grid *g, char *oc, char *os, size_t dim)
{
	for (size_t k = 0; k < dim; k++)
		g->tmp[k] = 1.0;
	if (oc)
		pe_store_f64(g->dt, oc, g->tmp, dim);
	memset(g->tmp, 0, dim * sizeof *g->tmp);
	if (os)
		pe_store_f64(g->dt, os, g->tmp, dim);
}

static void frequencies(const struct pe_params *p, struct grid *g, double *full)
{
	double base = pe_param_real(p, "base");
	size_t q = g->q;
	if (g->variant != V_PIXTRAL) {
		pe_inv_freq_pow(base, q, 2, (double)(2 * q), g->hf, g->wr);
		memcpy(g->wc, g->wr, q * sizeof *g->wr);
		return;
	}
	pe_inv_freq_pow(base, 2 * q, 2, (double)(4 * q), g->hf, full); /* freqs of all dim/2 pairs, then split */
	for (size_t k = 0; k < q; k++) {
		g->wr[k] = full[2 * k];
		g->wc[k] = full[2 * k + 1];
	}
}

/* Frequency k of the n that pe_inv_freq_pow(base, n, 2, den, hf) makes, alone. */
static double freq_at(double base, size_t k, size_t n, double den, int hf)
{
	double num = (double)(2 * k);
	if (hf)
		return (double)(1.0f / pe_torch_powf((float)base, (float)num / (float)den, k, n));
	return 1.0 / pow(base, num / den);
}

/* Cheap verdict of check_angles from the two end frequencies (the list 1/base^x over increasing x
 * is monotone; each computed value is within 2^-22 of the true one while base^x is a normal
 * number, so none exceeds the larger end by more than BOUND_SLACK): 1 refused (an end itself
 * fails), 0 accepted, -1 not decided (the frequencies are scanned). */
#define BOUND_SLACK (1 + 0x1p-16)
static int angles_bound(const struct pe_params *p, const struct grid *g, double last, double lim)
{
	size_t n = g->variant == V_PIXTRAL ? 2 * g->q : g->q;
	double den = (double)(g->variant == V_PIXTRAL ? 4 * g->q : 2 * g->q), base = pe_param_real(p, "base");
	double e0 = freq_at(base, 0, n, den, g->hf), e1 = freq_at(base, n - 1, n, den, g->hf), m = fmax(e0, e1);
	if (!(e0 * last < lim) || !(e1 * last < lim))
		return 1;
	if (m <= (g->hf ? 0x1p125 : 0x1p1021) && (m * BOUND_SLACK + 1e-30) * last < lim)
		return 0;
	return -1;
}

/* Every angle finite in the mode's arithmetic (as /v1/rope's check): with compat=hf a base near
 * float's smallest makes frequencies near 1e38, and coordinate * frequency is infinity in float,
 * its cos and sin NaN. The largest angle is the largest frequency times the largest coordinate.
 * Decided from the end frequencies where angles_bound can (this runs on the HTTP thread). */
static int check_angles(const struct pe_params *p, struct pe_err *err)
{
	struct grid g = {0};
	size_t q = (size_t)pe_param_int(p, "dim") / 4;
	g.q = q;
	g.variant = pe_param_enum(p, "variant");
	g.hf = pe_param_enum(p, "compat") == PE_COMPAT_HF;
	int64_t h = pe_param_int(p, "height"), wd = pe_param_int(p, "width");
	double last = (double)(h > wd ? h : wd) - (g.variant == V_LLAMA4 ? 0 : 1), lim = (g.hf ? FLT_MAX : DBL_MAX) / 4;
	int v = pe_rope_freq_force_scanning() ? -1 : angles_bound(p, &g, last, lim);
	if (v < 0) {
		double *w = malloc(4 * q * sizeof *w), amax = 0;
		if (!w)
			return pe_err_set(err, PE_ENOMEM, "", "out of memory");
		g.wr = w;
		g.wc = w + q;
		frequencies(p, &g, w + 2 * q);
		for (size_t k = 0; k < 2 * q; k++)
			amax = w[k] * last > amax || w[k] != w[k] ? w[k] * last : amax;
		free(w);
		v = !(amax < lim);
	}
	if (v)
		return pe_err_set(err, PE_EINVAL, "base", "base makes the rotation angles overflow");
	return 0;
}

/* Rows [r0, r0 + n) of the cos plane into out[0] and of the sin plane into out[1] (either may be
 * NULL). */
static int compute_rows(const struct pe_params *p, enum pe_dtype dt, size_t r0, size_t n, void *const *out,
			struct pe_err *err)
{
	struct grid g = {0};
	size_t dim = (size_t)pe_param_int(p, "dim"), q = dim / 4;
	g.width = (size_t)pe_param_int(p, "width");
	g.npatch = (size_t)pe_param_int(p, "height") * g.width;
	g.q = q;
	g.variant = pe_param_enum(p, "variant");
	g.m = g.variant == V_QWEN2VL ? (size_t)pe_param_int(p, "spatial_merge_size") : 1;
	g.hf = pe_param_enum(p, "compat") == PE_COMPAT_HF;
	g.off = g.variant == V_LLAMA4 ? 1.0 : 0.0;
	g.dt = dt;
	g.esz = pe_dtype_size(dt);
	g.blk = (g.variant == V_LLAMA4 ? 2 * q : q) * g.esz;
	g.ccap = n + 2 * g.m < g.width ? n + 2 * g.m : g.width;
	double *buf = malloc(sizeof(double) * (6 * q + 2 * q + dim));
	char *tab = malloc(g.blk * 2 * (g.ccap + g.m));
	if (!buf || !tab) {
		free(buf);
		free(tab);
		return pe_err_set(err, PE_ENOMEM, "", "out of memory");
	}
	g.wr = buf;
	g.wc = g.wr + q;
	g.ang = g.wc + q;
	g.s = g.ang + q;
	g.c = g.s + q;
	g.tmp = g.c + q;                 /* dim doubles */
	double *full = g.tmp + dim;      /* 2q doubles */
	g.cs = tab;
	g.cc = g.cs + g.blk * g.ccap;
	g.rs = g.cc + g.blk * g.ccap;
	g.rc = g.rs + g.blk * g.m;
	frequencies(p, &g, full);
	char *oc = out[0], *os = out[1];
	size_t j1 = r0 + n, pend = j1 < g.npatch ? j1 : g.npatch, bandn = g.m * g.width, at = 0;
	for (size_t j = r0; j < pend;) {
		size_t b = j / bandn, e = (b + 1) * bandn < pend ? (b + 1) * bandn : pend;
		band(&g, b, j, e, oc, os, at);
		at += (e - j) * dim * g.esz;
		j = e;
	}
	if (j1 > g.npatch) /* llama4's class token (npatch + 1 rows) */
		cls_row(&g, oc ? oc + at : NULL, os ? os + at : NULL, dim);
	free(buf);
	free(tab);
	return 0;
}

static int compute(const struct pe_params *p, enum pe_dtype dt, void *out, struct pe_err *err)
{
	struct pe_shape sh;
	shape(p, &sh);
	void *planes[2] = {out, (char *)out + sh.dim[1] * sh.dim[2] * pe_dtype_size(dt)};
	return compute_rows(p, dt, 0, sh.dim[1], planes, err);
}

const struct pe_table_def pe_table_rope2d = {
	.name = "rope2d",
	.summary = "2-D rotary cos/sin tables of vision transformers (Qwen2-VL, Pixtral, Llama 4, Gemma 4 vision)",
	.params = params,
	.nparams = sizeof params / sizeof params[0],
	.fixed_dtype = PE_DTYPE_COUNT_,
	.check = check,
	.shape = shape,
	.compute = compute,
	.compute_rows = compute_rows,
	.panel_labels = pe_cos_sin_labels,
};
