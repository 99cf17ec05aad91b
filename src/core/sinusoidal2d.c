/* /v1/sinusoidal2d: fixed 2-D sin/cos tables of ViT patch grids, shape [cls_token + height*width, dim].
 *
 *   mae   MAE's get_2d_sincos_pos_embed: [sin w | cos w | sin h | cos h]. MAE builds its grid with
 *         np.meshgrid(grid_w, grid_h), so the first half of the channels, which its code calls
 *         emb_h, encodes the column (w) coordinate; we follow the code, not its variable names.
 *   timm  timm's build_sincos2d_pos_embed: [sin h | sin w | cos h | cos w].
 * Both have q = dim/4 frequencies w_k = 1/base^(k/q). Patches are row-major (row r, column c is
 * row cls_token + r*width + c); the cls_token leading rows are zeros (MAE uses one).
 *
 * diffusers' get_2d_sincos_pos_embed (SD3, PixArt, DiT, Hunyuan-DiT) is the mae layout on a scaled
 * grid: on a grid of G_h x G_w patches, row i sits at i / (G_h / base_size) / interpolation_scale
 * (columns alike with G_w). With pos_embed_max_size M (SD3's PatchEmbed), the grid is the M x M
 * square and the table is its centre height x width crop (cropped_pos_embed: top (M - height) / 2,
 * left (M - width) / 2). Without these parameters a coordinate is its integer index, so the table
 * is byte for byte the one without them; base_size alone defaults to the grid's own size.
 *
 * compat=exact: double throughout (angles.h), one rounding to the dtype. compat=hf: the float32
 * table a model holds. MAE computes in float64 NumPy and copies the result into a float32
 * parameter, so mae+hf is the exact table rounded to float; timm computes in torch float32, so
 * timm+hf uses float frequencies and angles (angles.h). diffusers divides its grid in torch float32
 * (each quotient rounded to float, the divisors too) and computes the rest in float64: with the
 * scaled grid, hf takes those float coordinates, exact the double quotients.
 *
 * A patch row is a permutation of the sin/cos of its row and column coordinates, so those are
 * computed once per coordinate and rounded once into the dtype (a width x dim/2 table for the
 * columns, dim/2 values per row); output rows are copies of those blocks. A block of rows
 * (compute_rows, which the whole table goes through too) tabulates only the columns and grid rows
 * it covers: the CLI streams a table of any size through a small buffer. */
#include "core/angles.h"
#include "core/tables.h"

#include <stdlib.h>
#include <string.h>

#define MAX_GRID 1048576.0 /* patches per side */
#define MAX_CLS 65536.0    /* leading zero rows (cls and register tokens) */

enum { V_MAE, V_TIMM };
static const char *const variants[] = {"mae", "timm", NULL};

static const struct pe_param_spec params[] = {
	{"height", PE_PT_INT, NULL, 1, MAX_GRID, NULL, "patch rows of the grid"},
	{"width", PE_PT_INT, NULL, 1, MAX_GRID, NULL, "patch columns of the grid"},
	{"dim", PE_PT_INT, NULL, 4, PE_MAX_DIM, NULL, "embedding width (multiple of 4)"},
	{"base", PE_PT_REAL, "10000", 1e-300, 1e300, NULL, "wavelength base (timm: temperature; > 0)"},
	{"cls_token", PE_PT_INT, "0", 0, MAX_CLS, NULL, "number of leading zero rows (MAE: 1)"},
	{"variant", PE_PT_ENUM, "mae", 0, 0, variants, "channel layout: mae [sin w|cos w|sin h|cos h], timm [sin h|sin w|cos h|cos w]"},
	{"compat", PE_PT_ENUM, "exact", 0, 0, pe_compat_exact_hf, "arithmetic: exact (double) or hf (the reference's float32 table)"},
	{"base_size", PE_PT_REAL, "", 1e-6, MAX_GRID, NULL, "diffusers' base_size: coordinates are index / (grid / base_size) (default: the grid's size)"},
	{"interpolation_scale", PE_PT_REAL, "", 1e-6, 1e6, NULL, "diffusers' interpolation_scale: coordinates are divided by it (default 1)"},
	{"pos_embed_max_size", PE_PT_INT, "", 1, MAX_GRID, NULL, "SD3: compute on this square and crop its centre height x width"},
};

/* The grid a coordinate is scaled on: the max square (SD3) or the table's own rows / columns. */
struct axis {
	int scaled, hf;
	double offset, grid, base, interp;
};

static struct axis axis_of(const struct pe_params *p, const char *size)
{
	struct axis a = {.scaled = pe_param_isset(p, "base_size") || pe_param_isset(p, "interpolation_scale") ||
				   pe_param_isset(p, "pos_embed_max_size"),
			 .hf = pe_param_enum(p, "compat") == PE_COMPAT_HF};
	double n = (double)pe_param_int(p, size);
	a.grid = pe_param_isset(p, "pos_embed_max_size") ? (double)pe_param_int(p, "pos_embed_max_size") : n;
	a.offset = (double)(((int64_t)a.grid - (int64_t)n) / 2);
	a.base = pe_param_isset(p, "base_size") ? pe_param_real(p, "base_size") : a.grid;
	a.interp = pe_param_isset(p, "interpolation_scale") ? pe_param_real(p, "interpolation_scale") : 1.0;
	return a;
}

/* The coordinate of index i of the table's rows or columns (float32 quotients under hf). */
static double axis_coord(const struct axis *a, size_t i)
{
	double g = (double)i + a->offset;
	if (!a->scaled)
		return g;
	if (a->hf)
		return (double)((float)((float)g / (float)(a->grid / a->base)) / (float)a->interp);
	return g / (a->grid / a->base) / a->interp;
}

static int check(struct pe_params *p, struct pe_err *err)
{
	if (pe_param_int(p, "dim") % 4 != 0)
		return pe_err_set(err, PE_EINVAL, "dim", "dim must be a multiple of 4 for sinusoidal2d");
	if (pe_param_isset(p, "pos_embed_max_size"))
		for (int k = 0; k < 2; k++) {
			const char *side = k ? "width" : "height";
			if (pe_param_int(p, side) > pe_param_int(p, "pos_embed_max_size"))
				return pe_err_set(err, PE_EINVAL, side, "%s must be at most pos_embed_max_size (%lld) to crop it",
						  side, (long long)pe_param_int(p, "pos_embed_max_size"));
		}
	return pe_check_float32_range(p, "base", err);
}

static int shape(const struct pe_params *p, struct pe_shape *s)
{
	s->rank = 2;
	s->dim[0] = (size_t)(pe_param_int(p, "cls_token") + pe_param_int(p, "height") * pe_param_int(p, "width"));
	s->dim[1] = (size_t)pe_param_int(p, "dim");
	return 0;
}

/* sin and cos of q angles at one coordinate; mae+hf rounds the exact values to float. */
static void coord(double pos, const double *w, size_t q, int float_angles, int round_float, double *ang,
		  double *s, double *c)
{
	pe_sincos_at(pos, w, q, float_angles, ang, s, c);
	if (round_float && !float_angles)
		for (size_t k = 0; k < q; k++) {
			s[k] = (double)(float)s[k];
			c[k] = (double)(float)c[k];
		}
}

/* Rows [r0, r0 + n) of the table: the cls zero rows the block holds, then its patches. Only the
 * columns the block's patches use are tabulated (all width of them once the block spans a grid
 * row, else at most n), entry t holding column (x0 + t) % width; each grid row's values are made
 * once per block. Every value comes from its coordinate alone, so a block is byte for byte the
 * whole table's rows wherever it starts. */
static int compute_rows(const struct pe_params *p, enum pe_dtype dt, size_t r0, size_t n, void *const *out,
			struct pe_err *err)
{
	size_t width = (size_t)pe_param_int(p, "width"), dim = (size_t)pe_param_int(p, "dim"), q = dim / 4;
	size_t cls = (size_t)pe_param_int(p, "cls_token"), esz = pe_dtype_size(dt), blk = q * esz;
	int timm = pe_param_enum(p, "variant") == V_TIMM, hf = pe_param_enum(p, "compat") == PE_COMPAT_HF;
	int float_angles = hf && timm;
	size_t zeros = r0 < cls ? (cls - r0 < n ? cls - r0 : n) : 0;
	memset(out[0], 0, zeros * dim * esz); /* all-zero bits are 0.0 in every float dtype */
	if (zeros == n)
		return 0;
	size_t j0 = r0 + zeros - cls, j1 = r0 + n - cls, x0 = j0 % width;
	size_t ncols = j1 - j0 < width ? j1 - j0 : width;
	double *buf = malloc(sizeof(double) * 4 * q);
	char *tab = malloc(blk * (2 * ncols + 2)); /* column sin, column cos, row sin, row cos, in dt */
	if (!buf || !tab) {
		free(buf);
		free(tab);
		return pe_err_set(err, PE_ENOMEM, "", "out of memory");
	}
	double *w = buf, *ang = w + q, *s = ang + q, *c = s + q;
	char *cs = tab, *cc = cs + blk * ncols, *rs = cc + blk * ncols, *rc = rs + blk;
	struct axis ax_row = axis_of(p, "height"), ax_col = axis_of(p, "width");
	pe_inv_freq_pow(pe_param_real(p, "base"), q, 1, (double)q, float_angles, w);
	for (size_t t = 0; t < ncols; t++) {
		coord(axis_coord(&ax_col, (x0 + t) % width), w, q, float_angles, hf, ang, s, c);
		pe_store_f64(dt, cs + t * blk, s, q);
		pe_store_f64(dt, cc + t * blk, c, q);
	}
	char *o = (char *)out[0] + zeros * dim * esz;
	for (size_t r = j0 / width; r * width < j1; r++) {
		coord(axis_coord(&ax_row, r), w, q, float_angles, hf, ang, s, c);
		pe_store_f64(dt, rs, s, q);
		pe_store_f64(dt, rc, c, q);
		size_t xa = r * width < j0 ? j0 - r * width : 0, xb = j1 - r * width < width ? j1 - r * width : width;
		for (size_t x = xa; x < xb; x++, o += 4 * blk) {
			size_t t = (x + width - x0) % width;
			const char *mae[4] = {cs + t * blk, cc + t * blk, rs, rc};
			const char *tim[4] = {rs, cs + t * blk, rc, cc + t * blk};
			for (int b = 0; b < 4; b++)
				memcpy(o + b * blk, (timm ? tim : mae)[b], blk);
		}
	}
	free(buf);
	free(tab);
	return 0;
}

static int compute(const struct pe_params *p, enum pe_dtype dt, void *out, struct pe_err *err)
{
	struct pe_shape sh;
	shape(p, &sh);
	return compute_rows(p, dt, 0, sh.dim[0], &out, err);
}

const struct pe_table_def pe_table_sinusoidal2d = {
	.name = "sinusoidal2d",
	.summary = "Fixed 2-D sin/cos position encodings of a ViT patch grid (MAE, timm; diffusers' scaled and cropped grids)",
	.params = params,
	.nparams = sizeof params / sizeof params[0],
	.fixed_dtype = PE_DTYPE_COUNT_,
	.check = check,
	.shape = shape,
	.compute = compute,
	.compute_rows = compute_rows,
};
