/* /v1/sinusoidal3d: diffusers' get_3d_sincos_pos_embed (CogVideoX-2B, Latte-style video models),
 * shape [frames, height*width, dim].
 *
 * Token (t, r, c) of frame t, patch row r, column c (row r*width + c of plane t) is
 *     [sin t·u | cos t·u | sin c·v | cos c·v | sin r·v | cos r·v]
 * with dim/8 temporal frequencies u_k = 1/10000^(k/(dim/8)) and 3·dim/16 spatial ones
 * v_k = 1/10000^(k/(3·dim/16)): a quarter of the channels for time, three quarters for the 2-D grid
 * in MAE's layout (the column first: diffusers' meshgrid puts w first). dim is therefore a multiple
 * of 16. Coordinates are t / temporal_interpolation_scale, c and r / spatial_interpolation_scale.
 *
 * compat=exact: double throughout, one rounding to the dtype. compat=hf: diffusers divides its
 * float32 arange by the scale in torch float32 (scale rounded to float, each quotient too), then
 * computes the frequencies, products and sin/cos in float64 and copies the table into a float32
 * parameter: hf is the double math on float coordinates, rounded to float.
 *
 * A row is a permutation of per-coordinate blocks, so each block is computed once per coordinate
 * and rounded once into the dtype; rows are copies. A block of rows tabulates only the columns it
 * covers, so any block is byte for byte the whole table's rows. */
#include "core/angles.h"
#include "core/tables.h"

#include <stdlib.h>
#include <string.h>

#define MAX_SIDE 1048576.0 /* patches per side */
#define MAX_FRAMES 65536.0

static const struct pe_param_spec params[] = {
	{"frames", PE_PT_INT, NULL, 1, MAX_FRAMES, NULL, "latent frames T (after temporal compression)"},
	{"height", PE_PT_INT, NULL, 1, MAX_SIDE, NULL, "patch rows H"},
	{"width", PE_PT_INT, NULL, 1, MAX_SIDE, NULL, "patch columns W"},
	{"dim", PE_PT_INT, NULL, 16, PE_MAX_DIM, NULL, "embedding width (multiple of 16)"},
	{"spatial_interpolation_scale", PE_PT_REAL, "1", 1e-6, 1e6, NULL, "rows and columns are divided by it (CogVideoX: 1.875)"},
	{"temporal_interpolation_scale", PE_PT_REAL, "1", 1e-6, 1e6, NULL, "frames are divided by it"},
	{"compat", PE_PT_ENUM, "exact", 0, 0, pe_compat_exact_hf, "arithmetic: exact (double) or hf (diffusers' float32 coordinates, float32 table)"},
};

static int check(struct pe_params *p, struct pe_err *err)
{
	if (pe_param_int(p, "dim") % 16 != 0)
		return pe_err_set(err, PE_EINVAL, "dim", "dim must be a multiple of 16 for sinusoidal3d (a quarter temporal, three eighths per spatial axis, each of sin and cos)");
	return 0;
}

static int shape(const struct pe_params *p, struct pe_shape *s)
{
	s->rank = 3;
	s->dim[0] = (size_t)pe_param_int(p, "frames");
	s->dim[1] = (size_t)(pe_param_int(p, "height") * pe_param_int(p, "width"));
	s->dim[2] = (size_t)pe_param_int(p, "dim");
	return 0;
}

/* Index i divided by the scale: in double, or (hf) as torch's float32 division. */
static double scaled(size_t i, double scale, int hf)
{
	return hf ? (double)((float)i / (float)scale) : (double)i / scale;
}

/* The [sin | cos] block of q frequencies w at coordinate x, stored as dt at dst (2q elements);
 * hf rounds to float first. scratch: 3q doubles. */
static void block(double x, const double *w, size_t q, int hf, enum pe_dtype dt, char *dst, double *scratch)
{
	double *ang = scratch, *s = ang + q, *c = s + q;
	pe_sincos_at(x, w, q, 0, ang, s, c);
	if (hf)
		for (size_t k = 0; k < q; k++) {
			s[k] = (double)(float)s[k];
			c[k] = (double)(float)c[k];
		}
	size_t esz = pe_dtype_size(dt);
	pe_store_f64(dt, dst, s, q);
	pe_store_f64(dt, dst + q * esz, c, q);
}

/* Rows [r0, r0 + n) of every plane k with out[k] set (see compute_rows in core.h). */
static int compute_rows(const struct pe_params *p, enum pe_dtype dt, size_t r0, size_t n, void *const *out,
			struct pe_err *err)
{
	size_t frames = (size_t)pe_param_int(p, "frames"), width = (size_t)pe_param_int(p, "width");
	size_t dim = (size_t)pe_param_int(p, "dim"), qt = dim / 8, qs = 3 * dim / 16, esz = pe_dtype_size(dt);
	double ss = pe_param_real(p, "spatial_interpolation_scale"), ts = pe_param_real(p, "temporal_interpolation_scale");
	int hf = pe_param_enum(p, "compat") == PE_COMPAT_HF, rc = 0;
	size_t x0 = r0 % width, ncols = n < width ? n : width, tb = 2 * qt * esz, sb = 2 * qs * esz;
	double *wbuf = malloc(sizeof(double) * (qt + 4 * qs));
	char *tab = malloc(sb * (ncols + 1) + tb); /* columns, one row, one frame */
	if (!wbuf || !tab) {
		rc = pe_err_set(err, PE_ENOMEM, "", "out of memory");
		goto out;
	}
	double *u = wbuf, *v = u + qt, *scratch = v + qs;
	char *cols = tab, *row = cols + sb * ncols, *frame = row + sb;
	pe_inv_freq_pow(10000.0, qt, 1, (double)qt, 0, u);
	pe_inv_freq_pow(10000.0, qs, 1, (double)qs, 0, v);
	for (size_t t = 0; t < ncols; t++)
		block(scaled((x0 + t) % width, ss, hf), v, qs, hf, dt, cols + t * sb, scratch);
	for (size_t f = 0; f < frames; f++) {
		if (!out[f])
			continue;
		if ((rc = pe_cancelled()) != 0) {
			pe_cancel_err(rc, err);
			goto out;
		}
		block(scaled(f, ts, hf), u, qt, hf, dt, frame, scratch);
		char *o = out[f];
		size_t cur = (size_t)-1;
		for (size_t j = r0; j < r0 + n; j++, o += dim * esz) {
			if (j / width != cur) {
				cur = j / width;
				block(scaled(cur, ss, hf), v, qs, hf, dt, row, scratch);
			}
			memcpy(o, frame, tb);
			memcpy(o + tb, cols + ((j % width) + width - x0) % width * sb, sb);
			memcpy(o + tb + sb, row, sb);
		}
	}
out:
	free(wbuf);
	free(tab);
	return rc;
}

static int compute(const struct pe_params *p, enum pe_dtype dt, void *out, struct pe_err *err)
{
	struct pe_shape sh;
	shape(p, &sh);
	void **planes = malloc(sh.dim[0] * sizeof *planes);
	if (!planes)
		return pe_err_set(err, PE_ENOMEM, "", "out of memory");
	for (size_t f = 0; f < sh.dim[0]; f++)
		planes[f] = (char *)out + f * sh.dim[1] * sh.dim[2] * pe_dtype_size(dt);
	int rc = compute_rows(p, dt, 0, sh.dim[1], planes, err);
	free(planes);
	return rc;
}

const struct pe_table_def pe_table_sinusoidal3d = {
	.name = "sinusoidal3d",
	.summary = "Fixed 3-D sin/cos position encodings of a video's patch grid (diffusers' get_3d_sincos_pos_embed)",
	.params = params,
	.nparams = sizeof params / sizeof params[0],
	.fixed_dtype = PE_DTYPE_COUNT_,
	.check = check,
	.shape = shape,
	.compute = compute,
	.compute_rows = compute_rows,
};
