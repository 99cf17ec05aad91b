/* /v1/sinusoidal/timestep: diffusers' get_timestep_embedding, the sin/cos encoding of a diffusion
 * step (every UNet and DiT), shape [N, dim] for N timesteps (fractional allowed).
 *
 * With h = dim/2 (rounded down), f_k = exp(-ln(max_period) · k / (h - downscale_freq_shift)) for
 * k < h and a_k = scale · (t · f_k), a row is [sin a | cos a] ([cos a | sin a] with
 * flip_sin_to_cos), and a zero column when dim is odd.
 *
 * compat=exact: double throughout, one rounding to the dtype (each value within 1 ulp of the
 * float64 formula). compat=hf: the reference is torch float32 end to end: the exponent is
 * float(-ln max_period) · float(k), then divided by float(h - shift); f = exp of that; the angles
 * float(t) · f_k, then float(scale) · that; sin and cos of the [N, h] angle tensor. PyTorch's AVX2
 * kernels run SLEEF's 8-lane u10 functions over a contiguous tensor in groups of 8 from its first
 * element (the last group padded with zeros), and SLEEF's vector sinf/cosf take their slower,
 * more precise reduction for all 8 lanes when any lane is past 125: an angle's result depends on
 * the other angles of its group. So the angles are taken in that tensor's order and grouped the
 * same way: bit for bit torch's table where torch runs the op as one piece (at most 2048 elements, or
 * one thread); past that torch splits the tensor among its threads, which may regroup lanes at a
 * split (1 ulp there). Without AVX2+FMA, SLEEF's portable u10 functions per element (within 1
 * ulp of torch's). exp has no lane-dependent path: the scalar FMA build is torch's exp. */
#include "core/isa.h"
#include "core/tables.h"
#include "core/timestep.h"
#include "core/torchmath.h"

#include <float.h>
#include <math.h>
#include <sleef.h>
#include <stdlib.h>
#include <string.h>

#define TIMESTEP_TABLE_PARAMS                                                                                        \
	{"dim", PE_PT_INT, NULL, 1, PE_MAX_DIM, NULL, "embedding width (odd: the last column is zero)"},               \
	{"flip_sin_to_cos", PE_PT_BOOL, "0", 0, 1, NULL, "1: [cos | sin], 0: [sin | cos] (diffusers' default 0)"},    \
	{"downscale_freq_shift", PE_PT_REAL, "1", -1e6, 1e6, NULL, "exponents are divided by dim/2 - shift (diffusers' default 1)"}, \
	{"scale", PE_PT_REAL, "1", -1e30, 1e30, NULL, "angles are multiplied by it"},                                  \
	{"max_period", PE_PT_REAL, "10000", 1e-30, 1e30, NULL, "the longest wavelength's base (> 0)"},                \
	{"compat", PE_PT_ENUM, "exact", 0, 0, pe_compat_exact_hf, "arithmetic: exact (double) or hf (torch float32, bit for bit)"}

static const struct pe_param_spec table_params[] = {
	{"timesteps", PE_PT_LIST, NULL, -PE_TIMESTEP_MAX, PE_TIMESTEP_MAX, NULL, "the timesteps, comma-separated (fractional allowed)"},
	TIMESTEP_TABLE_PARAMS,
};
static const struct pe_param_spec body_params[] = {TIMESTEP_TABLE_PARAMS};

/* Frequency k of h: double (exact) or torch's float32 (hf). */
static double freq_k(const struct pe_params *p, size_t h, int hf, size_t k)
{
	double lnp = log(pe_param_real(p, "max_period")), den = (double)h - pe_param_real(p, "downscale_freq_shift");
	return hf ? (double)pe_torch_expf((float)((float)-lnp * (float)k) / (float)den) : exp(-lnp * (double)k / den);
}

int pe_timestep_check_angles(const struct pe_params *p, const double *t, size_t n, const char *who, struct pe_err *err)
{
	size_t h = (size_t)pe_param_int(p, "dim") / 2;
	int hf = pe_param_enum(p, "compat") == PE_COMPAT_HF;
	if (h == 0)
		return 0;
	/* the exponent is linear in k: the first or the last frequency is the largest */
	double f0 = freq_k(p, h, hf, 0), f1 = freq_k(p, h, hf, h - 1), f = f0 > f1 ? f0 : f1, tmax = 0;
	double scale = fabs(pe_param_real(p, "scale")), limit = hf ? FLT_MAX / 2 : DBL_MAX / 2;
	if (!(f <= limit))
		return pe_err_set(err, PE_EINVAL, "downscale_freq_shift",
				  "max_period and downscale_freq_shift give a frequency of %g, past the %s range", f,
				  hf ? "float32" : "float64");
	for (size_t i = 0; i < n; i++)
		tmax = fabs(t[i]) > tmax ? fabs(t[i]) : tmax;
	if (!(tmax * f * (scale > 1 ? scale : 1) <= limit))
		return pe_err_set(err, PE_EINVAL, who, "%s: timestep x frequency x scale reaches %g, past the %s range (angles must be finite)",
				  who, tmax * f * (scale > 1 ? scale : 1), hf ? "float32" : "float64");
	return 0;
}

static int check(struct pe_params *p, struct pe_err *err)
{
	double d = (double)(pe_param_int(p, "dim") / 2) - pe_param_real(p, "downscale_freq_shift");
	size_t n = 0;
	const double *t = pe_param_index(p->def, "timesteps") >= 0 ? pe_param_list(p, "timesteps", &n) : NULL;
	if (pe_param_int(p, "dim") >= 2 && (d == 0 || (float)d == 0))
		return pe_err_set(err, PE_EINVAL, "downscale_freq_shift",
				  "downscale_freq_shift must differ from dim/2 (exponents are divided by their difference)");
	return pe_timestep_check_angles(p, t, n, "timesteps", err);
}

static int shape(const struct pe_params *p, struct pe_shape *s)
{
	size_t n = 0;
	pe_param_list(p, "timesteps", &n);
	s->rank = 2;
	s->dim[0] = n;
	s->dim[1] = (size_t)pe_param_int(p, "dim");
	return 0;
}

int pe_timestep_check_value(double t, size_t i, struct pe_err *err)
{
	if (!(fabs(t) <= PE_TIMESTEP_MAX))
		return pe_err_set(err, PE_EBODY, "body", "timestep %zu is not a finite number within +-%g", i, PE_TIMESTEP_MAX);
	return 0;
}

/* The h frequencies: double (exact) or torch's float32 (hf). */
static void frequencies(const struct pe_params *p, size_t h, int hf, double *f)
{
	for (size_t k = 0; k < h; k++)
		f[k] = freq_k(p, h, hf, k);
}

/* sin and cos of one group of 8 angles as PyTorch's AVX2 kernels give them (lanes past the
 * tensor's end hold 0, as its partial load gives). */
static void torch_sincos8(const float *x, float *s, float *c)
{
	if (pe_cpu_has(PE_CPU_AVX2 | PE_CPU_FMA)) {
		pe_timestep_sincos8_avx2(x, s, c);
		return;
	}
	for (int j = 0; j < 8; j++) {
		s[j] = Sleef_sinf_u10(x[j]);
		c[j] = Sleef_cosf_u10(x[j]);
	}
}

/* One value into the table at row i, column col. */
static void put(enum pe_dtype dt, void *out, size_t dim, size_t i, size_t col, double v)
{
	pe_store_f64(dt, (char *)out + (i * dim + col) * pe_dtype_size(dt), &v, 1);
}

/* Row i of the table from its h sines and cosines, placed by flip, an odd dim's last value 0. */
static void put_row(const struct pe_params *p, size_t i, const double *s, const double *c, enum pe_dtype dt, void *out,
		    double *r)
{
	size_t dim = (size_t)pe_param_int(p, "dim"), h = dim / 2;
	int flip = (int)pe_param_int(p, "flip_sin_to_cos");
	memcpy(r + (flip ? h : 0), s, h * sizeof *r);
	memcpy(r + (flip ? 0 : h), c, h * sizeof *r);
	if (dim % 2)
		r[dim - 1] = 0;
	pe_store_f64(dt, (char *)out + i * dim * pe_dtype_size(dt), r, dim);
}

/* compat=exact: each row in double. */
static int exact_rows(const struct pe_params *p, const double *t, size_t n, const double *f, enum pe_dtype dt,
		      void *out, double *r, struct pe_err *err)
{
	size_t dim = (size_t)pe_param_int(p, "dim"), h = dim / 2, every = pe_cancel_rows(dim);
	double scale = pe_param_real(p, "scale"), *s = r + dim, *c = s + h;
	for (size_t i = 0; i < n; i++) {
		int rc = i % every == 0 ? pe_cancelled() : 0;
		if (rc)
			return pe_cancel_err(rc, err);
		for (size_t k = 0; k < h; k++) {
			double a = scale * (t[i] * f[k]);
			s[k] = sin(a);
			c[k] = cos(a);
		}
		put_row(p, i, s, c, dt, out, r);
	}
	return 0;
}

/* compat=hf: the [n, h] float angle tensor in groups of 8 from its first element, each group's
 * angles made when it is reached (no copy of the tensor is held). */
static int hf_rows(const struct pe_params *p, const double *t, size_t n, const double *f, enum pe_dtype dt, void *out,
		   struct pe_err *err)
{
	size_t dim = (size_t)pe_param_int(p, "dim"), h = dim / 2, total = n * h, every = pe_cancel_rows(8);
	size_t so = pe_param_int(p, "flip_sin_to_cos") ? h : 0, co = h - so;
	float scale = (float)pe_param_real(p, "scale");
	for (size_t i0 = 0; i0 < total; i0 += 8) {
		int rc = (i0 / 8) % every == 0 ? pe_cancelled() : 0;
		if (rc)
			return pe_cancel_err(rc, err);
		float x[8] = {0}, ys[8], yc[8];
		size_t m = total - i0 < 8 ? total - i0 : 8;
		for (size_t j = 0; j < m; j++)
			x[j] = scale * ((float)t[(i0 + j) / h] * (float)f[(i0 + j) % h]);
		torch_sincos8(x, ys, yc);
		for (size_t j = 0; j < m; j++) {
			put(dt, out, dim, (i0 + j) / h, so + (i0 + j) % h, ys[j]);
			put(dt, out, dim, (i0 + j) / h, co + (i0 + j) % h, yc[j]);
		}
	}
	for (size_t i = 0; i < n && dim % 2; i++)
		put(dt, out, dim, i, dim - 1, 0);
	return 0;
}

int pe_timestep_compute(const struct pe_params *p, const double *t, size_t n, enum pe_dtype dt, void *out,
			struct pe_err *err)
{
	size_t dim = (size_t)pe_param_int(p, "dim"), h = dim / 2;
	int hf = pe_param_enum(p, "compat") == PE_COMPAT_HF;
	double *buf = malloc(sizeof(double) * (h + 2 * dim));
	if (!buf)
		return pe_err_set(err, PE_ENOMEM, "", "out of memory");
	frequencies(p, h, hf, buf);
	int rc = hf ? hf_rows(p, t, n, buf, dt, out, err) : exact_rows(p, t, n, buf, dt, out, buf + h, err);
	free(buf);
	return rc;
}

static int compute(const struct pe_params *p, enum pe_dtype dt, void *out, struct pe_err *err)
{
	size_t n = 0;
	const double *t = pe_param_list(p, "timesteps", &n);
	return pe_timestep_compute(p, t, n, dt, out, err);
}

const struct pe_table_def pe_table_sinusoidal_timestep = {
	.name = "sinusoidal/timestep",
	.summary = "Sinusoidal timestep embeddings of diffusion models (diffusers' get_timestep_embedding)",
	.params = table_params,
	.nparams = sizeof table_params / sizeof table_params[0],
	.fixed_dtype = PE_DTYPE_COUNT_,
	.check = check,
	.shape = shape,
	.compute = compute,
};

const struct pe_table_def pe_timestep_body_def = {
	.name = "sinusoidal/timestep",
	.summary = "Sinusoidal timestep embeddings of the timesteps given in the body",
	.params = body_params,
	.nparams = sizeof body_params / sizeof body_params[0],
	.fixed_dtype = PE_DTYPE_COUNT_,
	.check = check,
};
