/* /v1/rope2d: 2-D rotary tables of vision transformers as Qwen2-VL's vision tower builds them,
 * shape [2, height*width, dim]: data[0] = cos, data[1] = sin.
 *
 * Qwen2-VL's VisionRotaryEmbedding(head_dim/2) has q = dim/4 frequencies
 * w_k = 1/base^(2k/(dim/2)); rot_pos_emb gathers f = [row*w | col*w] for every patch and the
 * attention applies cos/sin of cat(f, f) with rotate_half, so a row here is
 * [cos(row*w) | cos(col*w) | cos(row*w) | cos(col*w)] (sin alike). Patches are in plain row-major
 * order (row r, column c is patch r*width + c); Qwen2-VL itself permutes them into 2x2
 * spatial-merge windows before attention, which a client does with the grid it already has.
 *
 * compat=exact: double (angles.h), one rounding. compat=hf: torch float32 frequencies, angles and
 * cos/sin, as the model computes them. Sin/cos of each coordinate are computed once and rounded
 * once into the dtype (a width x dim/2 table for the columns, dim/2 values per row); output rows
 * are copies of those blocks. A block of rows (compute_rows, which the whole table goes through
 * too) tabulates only the columns and grid rows it covers: the CLI streams a table of any size
 * through a small buffer. */
#include "core/angles.h"
#include "core/tables.h"

#include <stdlib.h>
#include <string.h>

#define MAX_GRID 1048576.0 /* patches per side */

static const struct pe_param_spec params[] = {
	{"height", PE_PT_INT, NULL, 1, MAX_GRID, NULL, "patch rows of the grid"},
	{"width", PE_PT_INT, NULL, 1, MAX_GRID, NULL, "patch columns of the grid"},
	{"dim", PE_PT_INT, NULL, 4, PE_MAX_DIM, NULL, "rotary head dimension (multiple of 4)"},
	{"base", PE_PT_REAL, "10000", 1e-300, 1e300, NULL, "wavelength base, theta (> 0)"},
	{"compat", PE_PT_ENUM, "exact", 0, 0, pe_compat_exact_hf, "arithmetic: exact (double) or hf (PyTorch float32)"},
};

static int check(struct pe_params *p, struct pe_err *err)
{
	if (pe_param_int(p, "dim") % 4 != 0)
		return pe_err_set(err, PE_EINVAL, "dim", "dim must be a multiple of 4 for rope2d");
	return pe_check_float32_range(p, "base", err);
}

static int shape(const struct pe_params *p, struct pe_shape *s)
{
	s->rank = 3;
	s->dim[0] = 2;
	s->dim[1] = (size_t)(pe_param_int(p, "height") * pe_param_int(p, "width"));
	s->dim[2] = (size_t)pe_param_int(p, "dim");
	return 0;
}

/* One patch row of a plane: [row | col | row | col], each blk bytes. */
static void copy_row(char *o, size_t blk, const char *row, const char *col)
{
	for (int b = 0; b < 4; b++)
		memcpy(o + b * blk, (b & 1) ? col : row, blk);
}

/* Rows [r0, r0 + n) of the cos plane into out[0] and of the sin plane into out[1] (either may be
 * NULL). Only the columns the block's patches use are tabulated (all width of them once the block
 * spans a grid row, else at most n), entry t holding column (x0 + t) % width; each grid row's
 * values are made once per block. Every value comes from its coordinate alone, so a block is byte
 * for byte the whole table's rows wherever it starts. */
static int compute_rows(const struct pe_params *p, enum pe_dtype dt, size_t r0, size_t n, void *const *out,
			struct pe_err *err)
{
	size_t width = (size_t)pe_param_int(p, "width"), dim = (size_t)pe_param_int(p, "dim"), q = dim / 4;
	int hf = pe_param_enum(p, "compat") == PE_COMPAT_HF;
	size_t esz = pe_dtype_size(dt), blk = q * esz, x0 = r0 % width, ncols = n < width ? n : width;
	double *buf = malloc(sizeof(double) * 4 * q);
	char *tab = malloc(blk * (2 * ncols + 2)); /* column sin, column cos, row sin, row cos, in dt */
	if (!buf || !tab) {
		free(buf);
		free(tab);
		return pe_err_set(err, PE_ENOMEM, "", "out of memory");
	}
	double *w = buf, *ang = w + q, *s = ang + q, *c = s + q;
	char *cs = tab, *cc = cs + blk * ncols, *rs = cc + blk * ncols, *rc = rs + blk;
	char *oc = out[0], *os = out[1];
	pe_inv_freq_pow(pe_param_real(p, "base"), q, 2, (double)(dim / 2), hf, w);
	for (size_t t = 0; t < ncols; t++) {
		pe_sincos_at((double)((x0 + t) % width), w, q, hf, ang, s, c);
		pe_store_f64(dt, cs + t * blk, s, q);
		pe_store_f64(dt, cc + t * blk, c, q);
	}
	size_t j1 = r0 + n, at = 0;
	for (size_t r = r0 / width; r * width < j1; r++) {
		pe_sincos_at((double)r, w, q, hf, ang, s, c);
		pe_store_f64(dt, rs, s, q);
		pe_store_f64(dt, rc, c, q);
		size_t xa = r * width < r0 ? r0 - r * width : 0, xb = j1 - r * width < width ? j1 - r * width : width;
		for (size_t x = xa; x < xb; x++, at += 4 * blk) {
			size_t t = (x + width - x0) % width;
			if (oc)
				copy_row(oc + at, blk, rc, cc + t * blk);
			if (os)
				copy_row(os + at, blk, rs, cs + t * blk);
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
	void *planes[2] = {out, (char *)out + sh.dim[1] * sh.dim[2] * pe_dtype_size(dt)};
	return compute_rows(p, dt, 0, sh.dim[1], planes, err);
}

const struct pe_table_def pe_table_rope2d = {
	.name = "rope2d",
	.summary = "2-D rotary cos/sin tables of vision transformers (Qwen2-VL vision tower)",
	.params = params,
	.nparams = sizeof params / sizeof params[0],
	.fixed_dtype = PE_DTYPE_COUNT_,
	.check = check,
	.shape = shape,
	.compute = compute,
	.compute_rows = compute_rows,
	.panel_labels = pe_cos_sin_labels,
};
