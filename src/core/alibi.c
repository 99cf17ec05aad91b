/* /v1/alibi/slopes and /v1/alibi: ALiBi head slopes and bias tensors (Press et al., "Train Short,
 * Test Long").
 *
 * Slopes: with m the largest power of two <= heads, heads 0..m-1 get 2^(-max_bias*(i+1)/m) and the
 * remaining heads take every other slope of 2m heads, 2^(-max_bias*(2j+1)/(2m)): the paper's rule
 * for head counts that are not powers of two (as BLOOM's build_alibi_tensor); max_bias = 8 is the
 * paper's, other values generalise MPT's alibi_bias_max. Each slope is 2^e with the exponent
 * carried exactly (the product max_bias*k as a double pair) and the power taken in long double, so
 * a slope, and a bias entry (its product with the distance taken before rounding), is within 1 ulp
 * in double.
 *
 * Bias: [heads, q_len, k_len], bias = -slope * |q_pos - k| with q_pos = offset + i, the symmetric
 * form of the contract (as MPT's full bias). BLOOM and Hugging Face add slope * k instead, which
 * differs from this by -slope * q_pos, a constant per query row that softmax removes. Distances
 * are integers exact in double, so an entry is one double product rounded once to the dtype; the
 * diagonal is +0. mask=causal puts the dtype's lowest finite value (torch.finfo(dtype).min) where
 * k > q_pos. An entry depends only on the head and k - q_pos, so each head's q_len + k_len - 1
 * values are rounded once into the dtype and every row is a copy of a slice of them. */
#include "core/tables.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HEADS 65536.0
#define MAX_BIAS 64.0
#define CHUNK 1024 /* bias values built in double before rounding into the output */

enum { MASK_NONE, MASK_CAUSAL };
static const char *const masks[] = {"none", "causal", NULL};

static const struct pe_param_spec slope_params[] = {
	{"heads", PE_PT_INT, NULL, 1, MAX_HEADS, NULL, "number of attention heads"},
	{"max_bias", PE_PT_REAL, "8", 0, MAX_BIAS, NULL, "slope of the last head is 2^-max_bias (MPT alibi_bias_max)"},
};

static const struct pe_param_spec bias_params[] = {
	{"heads", PE_PT_INT, NULL, 1, MAX_HEADS, NULL, "number of attention heads"},
	{"q_len", PE_PT_INT, NULL, 1, PE_MAX_LEN, NULL, "number of queries (rows)"},
	{"k_len", PE_PT_INT, "", 1, PE_MAX_LEN, NULL, "number of keys (columns; default q_len)"},
	{"offset", PE_PT_INT, "", -PE_MAX_POSITION, PE_MAX_POSITION, NULL,
	 "position of the first query (default k_len - q_len, a KV cache's length)"},
	{"max_bias", PE_PT_REAL, "8", 0, MAX_BIAS, NULL, "slope of the last head is 2^-max_bias (MPT alibi_bias_max)"},
	{"mask", PE_PT_ENUM, "none", 0, 0, masks, "causal: keys after the query hold the dtype's lowest value"},
};

/* 2^(-max_bias * k / den), den a power of two, in long double: max_bias*k = hi + lo exactly (fma),
 * so the exponent is -(hi + lo)/den without rounding, and 2^(-lo/den) = 1 - t + t^2/2 with
 * t = ln2*lo/den (|t| < 2^-29) corrects exp2l(-hi/den). Within a few long double ulps: rounded to
 * double a slope is within 1 ulp, and so is a bias entry, the product with its integer distance
 * taken before that rounding (a double slope times the distance, rounded again, is 1.3 ulp off
 * for heads=21, max_bias=13.097201819612806, distance 3). */
static long double pow2_scaled(double max_bias, int64_t k, int64_t den)
{
	double kd = (double)k, hi = max_bias * kd, lo = fma(max_bias, kd, -hi);
	long double r = exp2l(-(long double)hi / (long double)den);
	long double t = (long double)lo / (long double)den * 0.693147180559945309417232121458176568L;
	return r - r * t + r * (t * t * 0.5L);
}

static long double slope(int64_t heads, int64_t i, double max_bias)
{
	int64_t m = 1;
	while (m * 2 <= heads)
		m *= 2;
	if (i < m)
		return pow2_scaled(max_bias, i + 1, m);
	return pow2_scaled(max_bias, 2 * (i - m) + 1, 2 * m);
}

static int slopes_shape(const struct pe_params *p, struct pe_shape *s)
{
	s->rank = 1;
	s->dim[0] = (size_t)pe_param_int(p, "heads");
	return 0;
}

static int slopes_compute(const struct pe_params *p, enum pe_dtype dt, void *out, struct pe_err *err)
{
	int64_t heads = pe_param_int(p, "heads");
	double max_bias = pe_param_real(p, "max_bias");
	size_t esz = pe_dtype_size(dt);
	for (int64_t i = 0; i < heads; i++) {
		double s = (double)slope(heads, i, max_bias);
		pe_store_f64(dt, (char *)out + (size_t)i * esz, &s, 1);
	}
	return 0;
}

static void fill_default(struct pe_params *p, const char *name, int64_t v)
{
	struct pe_param_val *pv = &p->v[pe_param_index(p->def, name)];
	if (pv->set)
		return;
	pv->set = 1;
	pv->i = v;
	pv->r = (double)v;
}

static int bias_check(struct pe_params *p, struct pe_err *err)
{
	fill_default(p, "k_len", pe_param_int(p, "q_len"));
	fill_default(p, "offset", pe_param_int(p, "k_len") - pe_param_int(p, "q_len"));
	return 0;
}

static int bias_shape(const struct pe_params *p, struct pe_shape *s)
{
	s->rank = 3;
	s->dim[0] = (size_t)pe_param_int(p, "heads");
	s->dim[1] = (size_t)pe_param_int(p, "q_len");
	s->dim[2] = (size_t)pe_param_int(p, "k_len");
	return 0;
}

/* Bias of rel = k - q_pos for rel = rel0 .. rel0+n-1 into v (n <= CHUNK), each product with the
 * long double slope rounded once to double. */
static void bias_chunk(long double s, int64_t rel0, size_t n, int causal, double lowest, double *v)
{
	for (size_t j = 0; j < n; j++) {
		int64_t rel = rel0 + (int64_t)j;
		if (causal && rel > 0)
			v[j] = lowest;
		else
			v[j] = rel ? (double)-(s * (long double)(rel < 0 ? -rel : rel)) : 0.0;
	}
}

/* Rows [r0, r0 + n) of head h into o. An entry depends on the head and k - q_pos only: lut[j]
 * (scratch of q_len + k_len - 1 entries) holds rel = j + rel_min, and query row i (rel from
 * -(offset + i)) is the slice starting at q_len - 1 - i. */
static void bias_rows(const struct pe_params *p, enum pe_dtype dt, int64_t h, size_t r0, size_t n, char *lut,
		      char *o)
{
	int64_t heads = pe_param_int(p, "heads"), q_len = pe_param_int(p, "q_len");
	int64_t k_len = pe_param_int(p, "k_len"), offset = pe_param_int(p, "offset");
	int causal = pe_param_enum(p, "mask") == MASK_CAUSAL;
	double lowest = pe_dtype_lowest(dt), v[CHUNK];
	long double s = slope(heads, h, pe_param_real(p, "max_bias"));
	size_t esz = pe_dtype_size(dt), nrel = (size_t)(q_len + k_len - 1), row = (size_t)k_len * esz;
	int64_t rel_min = -(offset + q_len - 1);
	for (size_t j = 0; j < nrel; j += CHUNK) {
		size_t m = nrel - j < CHUNK ? nrel - j : CHUNK;
		bias_chunk(s, rel_min + (int64_t)j, m, causal, lowest, v);
		pe_store_f64(dt, lut + j * esz, v, m);
	}
	for (size_t i = r0; i < r0 + n; i++, o += row)
		memcpy(o, lut + ((size_t)q_len - 1 - i) * esz, row);
}

static char *bias_lut(const struct pe_params *p, enum pe_dtype dt)
{
	return malloc((size_t)(pe_param_int(p, "q_len") + pe_param_int(p, "k_len") - 1) * pe_dtype_size(dt));
}

static int bias_compute_rows(const struct pe_params *p, enum pe_dtype dt, size_t r0, size_t n, void *const *out,
			     struct pe_err *err)
{
	char *lut = bias_lut(p, dt);
	if (!lut)
		return pe_err_set(err, PE_ENOMEM, "", "out of memory");
	for (int64_t h = 0; h < pe_param_int(p, "heads"); h++)
		if (out[h])
			bias_rows(p, dt, h, r0, n, lut, out[h]);
	free(lut);
	return 0;
}

static int bias_compute(const struct pe_params *p, enum pe_dtype dt, void *out, struct pe_err *err)
{
	size_t q_len = (size_t)pe_param_int(p, "q_len");
	size_t plane = q_len * (size_t)pe_param_int(p, "k_len") * pe_dtype_size(dt);
	char *lut = bias_lut(p, dt);
	if (!lut)
		return pe_err_set(err, PE_ENOMEM, "", "out of memory");
	for (int64_t h = 0; h < pe_param_int(p, "heads"); h++)
		bias_rows(p, dt, h, 0, q_len, lut, (char *)out + (size_t)h * plane);
	free(lut);
	return 0;
}

/* The largest |bias| of the unmasked entries: the largest slope (head 0, or head m, the first of
 * the interleaved ones, when heads is not a power of two) times the largest |k - q_pos| that is
 * not masked, the same long double product the table rounds. */
static double bias_max_abs(const struct pe_params *p)
{
	int64_t heads = pe_param_int(p, "heads"), q_len = pe_param_int(p, "q_len");
	int64_t k_len = pe_param_int(p, "k_len"), offset = pe_param_int(p, "offset");
	double max_bias = pe_param_real(p, "max_bias");
	long double s = slope(heads, 0, max_bias);
	int64_t m = 1;
	while (m * 2 <= heads)
		m *= 2;
	if (heads > m && slope(heads, m, max_bias) > s)
		s = slope(heads, m, max_bias);
	int64_t rel_min = -(offset + q_len - 1), rel_max = k_len - 1 - offset; /* rel = k - q_pos */
	if (pe_param_enum(p, "mask") == MASK_CAUSAL) {
		if (rel_min > 0)
			return 0; /* every entry masked */
		rel_max = rel_max < 0 ? rel_max : 0;
	}
	int64_t a = rel_min < 0 ? -rel_min : rel_min, b = rel_max < 0 ? -rel_max : rel_max;
	return (double)(s * (long double)(a > b ? a : b));
}

const struct pe_table_def pe_table_alibi_slopes = {
	.name = "alibi/slopes",
	.summary = "ALiBi head slopes (paper / BLOOM rule for any head count; MPT alibi_bias_max)",
	.params = slope_params,
	.nparams = sizeof slope_params / sizeof slope_params[0],
	.fixed_dtype = PE_DTYPE_COUNT_,
	.shape = slopes_shape,
	.compute = slopes_compute,
};

const struct pe_table_def pe_table_alibi = {
	.name = "alibi",
	.summary = "ALiBi attention bias -slope*|q_pos - k| per head, optional causal mask",
	.params = bias_params,
	.nparams = sizeof bias_params / sizeof bias_params[0],
	.fixed_dtype = PE_DTYPE_COUNT_,
	.check = bias_check,
	.shape = bias_shape,
	.compute = bias_compute,
	.max_abs = bias_max_abs,
	.compute_rows = bias_compute_rows,
};
