/* POST /v1/sinusoidal/apply: x·xscale + PE (mode=add) or [x | PE] (mode=concat) along the last
 * axis of a [..., seq, dim] tensor, PE being /v1/sinusoidal with len = seq and dim = the last axis
 * (add) or pe_dim (concat, default the last axis), every other sinusoidal parameter as given.
 *
 * The table is computed once in the working dtype (rounded once from double for compat=exact, or
 * in PyTorch's float32 order for compat=hf) and reused across the leading axes. The arithmetic is
 * then PyTorch's: x * xscale rounded, + pe rounded (no fused multiply-add; C11 mode keeps
 * contraction off). */
#include "core/tables.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MODE_ADD, MODE_CONCAT };
static const char *const modes[] = {"add", "concat", NULL};
static const char *const variants[] = {"vaswani", "concat", "t2t", NULL};

static const struct pe_param_spec params[] = {
	{"base", PE_PT_REAL, "10000", 1e-300, 1e300, NULL, "wavelength base (> 0)"},
	{"offset", PE_PT_INT, "0", 0, PE_MAX_POSITION, NULL, "position of the first row of the sequence axis"},
	{"variant", PE_PT_ENUM, "vaswani", 0, 0, variants, "column layout of the table"},
	{"compat", PE_PT_ENUM, "exact", 0, 0, pe_compat_exact_hf, "how the table is computed"},
	{"min_timescale", PE_PT_REAL, "", 1e-300, 1e300, NULL, "t2t: shortest timescale"},
	{"max_timescale", PE_PT_REAL, "", 1e-300, 1e300, NULL, "t2t: longest timescale (default: base)"},
	{"mode", PE_PT_ENUM, "add", 0, 0, modes, "add: x*xscale + PE; concat: [x | PE]"},
	{"pe_dim", PE_PT_INT, "", 1, PE_MAX_DIM, NULL, "concat: width of PE (default: the last axis)"},
	{"xscale", PE_PT_REAL, "1", -1e300, 1e300, NULL, "add: x is multiplied by this first (e.g. sqrt(d_model))"},
};

static int check(struct pe_params *p, struct pe_err *err)
{
	int mode = pe_param_enum(p, "mode");
	if (mode == MODE_CONCAT && p->v[pe_param_index(p->def, "xscale")].given)
		return pe_err_set(err, PE_EINVAL, "xscale", "xscale applies to mode=add only");
	return 0;
}

static size_t pe_width(const struct pe_params *p, size_t last)
{
	return pe_param_isset(p, "pe_dim") ? (size_t)pe_param_int(p, "pe_dim") : last;
}

static int out_shape(const struct pe_params *p, const struct pe_shape *in, struct pe_shape *out, struct pe_err *err)
{
	if (in->rank < 2)
		return pe_err_set(err, PE_EINVAL, "shape", "the body must be [..., seq, dim] (rank >= 2)");
	size_t last = in->dim[in->rank - 1];
	*out = *in;
	if (pe_param_enum(p, "mode") == MODE_ADD) {
		if (pe_param_isset(p, "pe_dim") && (size_t)pe_param_int(p, "pe_dim") != last)
			return pe_err_set(err, PE_EINVAL, "pe_dim", "mode=add needs pe_dim equal to the last axis (%zu)", last);
		return 0;
	}
	out->dim[out->rank - 1] = last + pe_width(p, last);
	return 0;
}

/* The PE table [seq, width] in the working dtype (caller frees). */
static void *make_table(const struct pe_params *p, size_t seq, size_t width, enum pe_dtype dt, struct pe_err *err)
{
	char len[32], dim[32];
	snprintf(len, sizeof len, "%zu", seq);
	snprintf(dim, sizeof dim, "%zu", width);
	const char *const kv[] = {"len", len, "dim", dim, NULL};
	return pe_table_derived(p, &pe_table_sinusoidal, kv, dt, NULL, err);
}

/* add: in place allowed. concat: out is a separate buffer (the shapes differ). */
#define DEFINE_KERNELS(T)                                                                                   \
	static void add_##T(const T *x, T *out, const T *pe, size_t rows, size_t seq, size_t d, T xscale)  \
	{                                                                                                   \
		for (size_t r = 0; r < rows; r++) {                                                         \
			const T *xr = x + r * d, *pr = pe + (r % seq) * d;                                  \
			T *o = out + r * d;                                                                 \
			for (size_t c = 0; c < d; c++) {                                                    \
				T scaled = xr[c] * xscale;                                                  \
				o[c] = scaled + pr[c];                                                      \
			}                                                                                   \
		}                                                                                           \
	}                                                                                                   \
	static void concat_##T(const T *x, T *out, const T *pe, size_t rows, size_t seq, size_t d, size_t w) \
	{                                                                                                   \
		for (size_t r = 0; r < rows; r++) {                                                         \
			memcpy(out + r * (d + w), x + r * d, d * sizeof(T));                                \
			memcpy(out + r * (d + w) + d, pe + (r % seq) * w, w * sizeof(T));                   \
		}                                                                                           \
	}
DEFINE_KERNELS(float)
DEFINE_KERNELS(double)

static int apply(const struct pe_params *p, const struct pe_tensor_mut *x, struct pe_tensor_mut *out,
		 enum pe_dtype final_dt, struct pe_err *err)
{
	const struct pe_shape *s = &x->shape;
	size_t d = s->dim[s->rank - 1], seq = s->dim[s->rank - 2], w = pe_width(p, d), rows = 1;
	for (int i = 0; i < s->rank - 1; i++)
		rows *= s->dim[i];
	if (rows == 0 || d == 0)
		return 0;
	void *pe = make_table(p, seq, w, x->dtype, err);
	if (!pe)
		return err && err->code ? err->code : PE_ENOMEM;
	int f64 = x->dtype == PE_F64;
	double xs = pe_param_real(p, "xscale");
	if (!f64 && isinf((float)xs)) { /* float32 work would scale by infinity */
		free(pe);
		return pe_err_set(err, PE_EINVAL, "xscale",
				  "xscale must fit float32 (|xscale| <= 3.4e38) for a float body; send f64 for more");
	}
	if (pe_param_enum(p, "mode") == MODE_CONCAT) {
		if (f64)
			concat_double(x->data, out->data, pe, rows, seq, d, w);
		else
			concat_float(x->data, out->data, pe, rows, seq, d, w);
	} else if (f64)
		add_double(x->data, out->data, pe, rows, seq, d, xs);
	else
		add_float(x->data, out->data, pe, rows, seq, d, (float)xs);
	free(pe);
	return 0;
}

const struct pe_table_def pe_transform_sinusoidal_apply = {
	.name = "sinusoidal/apply",
	.summary = "Add a sinusoidal table to, or concatenate it with, a posted [..., seq, dim] tensor",
	.params = params,
	.nparams = sizeof params / sizeof params[0],
	.fixed_dtype = PE_DTYPE_COUNT_,
	.check = check,
	.out_shape = out_shape,
	.apply = apply,
	.grows = "pe_dim",
};
