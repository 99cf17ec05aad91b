/* /v1/sinusoidal: the fixed sin/cos tables of "Attention Is All You Need" and its variants.
 *
 *   vaswani  column 2i = sin(p*w_i), 2i+1 = cos(p*w_i), w_i = base^(-2i/dim) (odd dim: last is sin)
 *   concat   [sin(p*w_0..w_{h-1}) | cos(...)], same w, h = dim/2 (dim even)
 *   t2t      tensor2tensor / fairseq: [sin | cos] with w_k = min_ts*exp(-k*ln(max_ts/min_ts)/max(h-1,1)),
 *            a zero column last when dim is odd
 *
 * compat=exact: frequencies and angles in double (w as libm pow/exp give it, the angle p*w one
 * double product, as a float64 NumPy reference computes them), sin/cos within 1 ulp in double,
 * one rounding to the dtype. compat=hf: PyTorch's float32 order: w = expf(float(2i) *
 * float(-ln(base)/dim)) (fairseq: expf(float(k) * float(-log_inc))), angle = float(p) * w rounded to
 * float, then sin/cos of that float angle, rounded to float.
 *
 * Rows are built one at a time in a small double buffer (in L1) and rounded into the output. */
#include "core/kernels.h"
#include "core/tables.h"
#include "core/torchmath.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { V_VASWANI, V_CONCAT, V_T2T };
static const char *const variants[] = {"vaswani", "concat", "t2t", NULL};

static const struct pe_param_spec params[] = {
	{"len", PE_PT_INT, NULL, 1, PE_MAX_LEN, NULL, "number of positions (rows)"},
	{"dim", PE_PT_INT, NULL, 1, PE_MAX_DIM, NULL, "embedding width (columns)"},
	{"base", PE_PT_REAL, "10000", 1e-300, 1e300, NULL, "wavelength base (> 0)"},
	{"offset", PE_PT_INT, "0", 0, PE_MAX_POSITION, NULL, "position of the first row"},
	{"variant", PE_PT_ENUM, "vaswani", 0, 0, variants, "column layout"},
	{"compat", PE_PT_ENUM, "exact", 0, 0, pe_compat_exact_hf, "arithmetic: exact (double) or hf (PyTorch float32)"},
	{"min_timescale", PE_PT_REAL, "1", 1e-300, 1e300, NULL, "t2t: shortest timescale"},
	{"max_timescale", PE_PT_REAL, "", 1e-300, 1e300, NULL, "t2t: longest timescale (default: base)"},
};

static int check(struct pe_params *p, struct pe_err *err)
{
	int variant = pe_param_enum(p, "variant");
	int64_t dim = pe_param_int(p, "dim");
	if (variant == V_CONCAT && (dim & 1))
		return pe_err_set(err, PE_EINVAL, "dim", "dim must be even for variant=concat");
	if (variant != V_T2T && (pe_param_isset(p, "max_timescale") &&
				 p->v[pe_param_index(p->def, "max_timescale")].given))
		return pe_err_set(err, PE_EINVAL, "max_timescale", "max_timescale applies to variant=t2t only");
	if (variant != V_T2T && p->v[pe_param_index(p->def, "min_timescale")].given)
		return pe_err_set(err, PE_EINVAL, "min_timescale", "min_timescale applies to variant=t2t only");
	if (variant == V_T2T && !pe_param_isset(p, "max_timescale")) {
		int i = pe_param_index(p->def, "max_timescale");
		p->v[i].set = 1;
		p->v[i].r = pe_param_real(p, "base");
	}
	if (variant != V_T2T) { /* keep the canonical key free of parameters that do not apply */
		p->v[pe_param_index(p->def, "min_timescale")].set = 0;
	}
	return 0;
}

static int shape(const struct pe_params *p, struct pe_shape *s)
{
	s->rank = 2;
	s->dim[0] = (size_t)pe_param_int(p, "len");
	s->dim[1] = (size_t)pe_param_int(p, "dim");
	return 0;
}

/* Frequencies, h = number of sin/cos pairs. */
static void freqs_exact(const struct pe_params *p, int variant, size_t h, double *w)
{
	double dim = (double)pe_param_int(p, "dim"), base = pe_param_real(p, "base");
	if (variant == V_T2T) {
		double mn = pe_param_real(p, "min_timescale"), mx = pe_param_real(p, "max_timescale");
		double inc = log(mx / mn) / (double)(h > 1 ? h - 1 : 1);
		for (size_t k = 0; k < h; k++)
			w[k] = mn * exp(-(double)k * inc);
	} else {
		for (size_t i = 0; i < h; i++)
			w[i] = pow(base, -(double)(2 * i) / dim);
	}
}

static void freqs_hf(const struct pe_params *p, int variant, size_t h, float *w)
{
	double dim = (double)pe_param_int(p, "dim"), base = pe_param_real(p, "base");
	if (variant == V_T2T) {
		double mn = pe_param_real(p, "min_timescale"), mx = pe_param_real(p, "max_timescale");
		float neg_inc = (float)(-(log(mx / mn) / (double)(h > 1 ? h - 1 : 1)));
		for (size_t k = 0; k < h; k++) {
			float e = pe_torch_expf((float)k * neg_inc);
			w[k] = mn == 1.0 ? e : (float)mn * e;
		}
	} else {
		float scale = (float)(-log(base) / dim);
		for (size_t i = 0; i < h; i++)
			w[i] = pe_torch_expf((float)(2 * i) * scale);
	}
}

/* Place sin/cos of the h angles into a row of width dim by the variant's layout. */
static void layout_row(int variant, size_t dim, size_t h, const double *s, const double *c, double *row)
{
	if (variant == V_VASWANI) {
		for (size_t i = 0; i < h; i++) {
			row[2 * i] = s[i];
			row[2 * i + 1] = c[i];
		}
		if (dim & 1)
			row[dim - 1] = s[h];
	} else {
		memcpy(row, s, h * sizeof *row);
		memcpy(row + h, c, h * sizeof *row);
		if (dim & 1)
			row[dim - 1] = 0.0;
	}
}

static int compute(const struct pe_params *p, enum pe_dtype dt, void *out, struct pe_err *err)
{
	size_t len = (size_t)pe_param_int(p, "len"), dim = (size_t)pe_param_int(p, "dim");
	int64_t offset = pe_param_int(p, "offset");
	int variant = pe_param_enum(p, "variant"), hf = pe_param_enum(p, "compat") == PE_COMPAT_HF;
	/* vaswani with odd dim has one extra sin column with its own frequency */
	size_t h = dim / 2, nf = (variant == V_VASWANI) ? (dim + 1) / 2 : h;
	size_t esz = pe_dtype_size(dt);
	double *buf = malloc(sizeof(double) * (4 * nf + dim + 4));
	float *wf = malloc(sizeof(float) * (nf + 1));
	if (!buf || !wf) {
		free(buf);
		free(wf);
		return pe_err_set(err, PE_ENOMEM, "", "out of memory");
	}
	double *w = buf, *ang = w + nf, *s = ang + nf, *c = s + nf, *row = c + nf;
	if (hf)
		freqs_hf(p, variant, nf, wf);
	else
		freqs_exact(p, variant, nf, w);
	const struct pe_kernel_table *k = pe_kernels();
	for (size_t r = 0; r < len; r++) {
		int64_t pos = offset + (int64_t)r;
		if (hf) {
			float pf = (float)pos;
			for (size_t i = 0; i < nf; i++)
				ang[i] = (double)(pf * wf[i]);
		} else {
			double pd = (double)pos;
			for (size_t i = 0; i < nf; i++)
				ang[i] = pd * w[i];
		}
		k->sincos_f64(ang, s, c, nf);
		layout_row(variant, dim, h, s, c, row);
		if (hf) /* hf rounds sin/cos to float first, as PyTorch's float32 tensors do */
			for (size_t i = 0; i < dim; i++)
				row[i] = (double)(float)row[i];
		pe_store_f64(dt, (char *)out + r * dim * esz, row, dim);
	}
	free(buf);
	free(wf);
	return 0;
}

const struct pe_table_def pe_table_sinusoidal = {
	.name = "sinusoidal",
	.summary = "Fixed sinusoidal position encodings (Vaswani, concat, tensor2tensor/fairseq)",
	.params = params,
	.nparams = sizeof params / sizeof params[0],
	.fixed_dtype = PE_DTYPE_COUNT_,
	.check = check,
	.shape = shape,
	.compute = compute,
};
