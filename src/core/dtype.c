/* Element types, shapes, and rounding into the output dtype (round to nearest, ties to even).
 *
 * f16 and bf16 are rounded straight from the source precision with integer arithmetic on the bit
 * pattern, so a double is rounded once (a trip through float would round twice). */
#include "posenc/dtype.h"
#include "posenc/err.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static const struct {
	const char *name;
	size_t size;
} dtypes[PE_DTYPE_COUNT_] = {
	[PE_F32] = {"f32", 4}, [PE_F64] = {"f64", 8}, [PE_F16] = {"f16", 2},
	[PE_BF16] = {"bf16", 2}, [PE_I32] = {"i32", 4},
};

size_t pe_dtype_size(enum pe_dtype dt) { return dt < PE_DTYPE_COUNT_ ? dtypes[dt].size : 0; }

const char *pe_dtype_name(enum pe_dtype dt) { return dt < PE_DTYPE_COUNT_ ? dtypes[dt].name : "?"; }

int pe_dtype_is_float(enum pe_dtype dt) { return dt != PE_I32 && dt < PE_DTYPE_COUNT_; }

int pe_dtype_parse(const char *s, enum pe_dtype *out)
{
	for (int i = 0; i < PE_DTYPE_COUNT_; i++)
		if (strcmp(s, dtypes[i].name) == 0) {
			*out = (enum pe_dtype)i;
			return 0;
		}
	return PE_EINVAL;
}

size_t pe_shape_count(const struct pe_shape *s, int *overflow)
{
	size_t n = 1;
	*overflow = 0;
	for (int i = 0; i < s->rank; i++) {
		if (s->dim[i] != 0 && n > SIZE_MAX / s->dim[i]) {
			*overflow = 1;
			return 0;
		}
		n *= s->dim[i];
	}
	return n;
}

size_t pe_shape_format(const struct pe_shape *s, char *buf, size_t cap)
{
	size_t len = 0;
	if (cap)
		buf[0] = 0;
	for (int i = 0; i < s->rank && len < cap; i++) { /* "%s%zu" without the format parser */
		char d[24];
		size_t k = sizeof d, w;
		size_t v = s->dim[i];
		do
			d[--k] = (char)('0' + v % 10);
		while ((v /= 10) != 0);
		if (i)
			d[--k] = ',';
		w = sizeof d - k;
		size_t fit = w < cap - len ? w : cap - len - 1; /* cut as snprintf cuts, NUL included */
		memcpy(buf + len, d + k, fit);
		buf[len + fit] = 0;
		len += w;
	}
	return len < cap ? len : (cap ? cap - 1 : 0);
}

/* Round the magnitude m (an integer scaled so the kept bits are above `shift` low bits) to
 * nearest even, dropping `shift` bits. */
static uint64_t round_shift_rne(uint64_t m, int shift)
{
	if (shift <= 0)
		return m << -shift;
	if (shift >= 64)
		return 0;
	uint64_t kept = m >> shift, rem = m & ((1ull << shift) - 1), half = 1ull << (shift - 1);
	if (rem > half || (rem == half && (kept & 1)))
		kept++;
	return kept;
}

/* Generic binary64 -> small binary format with `mant` stored bits and exponent bias `bias`,
 * `emax` the largest unbiased exponent. Returns the bit pattern (sign in bit 15). */
static uint16_t f64_to_small(double x, int mant, int bias, int ebits)
{
	uint64_t b;
	memcpy(&b, &x, 8);
	uint16_t sign = (uint16_t)((b >> 48) & 0x8000);
	int e = (int)((b >> 52) & 0x7ff);
	uint64_t f = b & 0xfffffffffffffull;
	uint16_t inf = (uint16_t)(((1u << ebits) - 1) << mant);
	if (e == 0x7ff)
		return f ? (uint16_t)(sign | inf | (1u << (mant - 1))) : (uint16_t)(sign | inf);
	if (e == 0)
		return sign; /* double subnormals are far below any small format's range */
	int ue = e - 1023;
	uint64_t sig = f | (1ull << 52); /* 53 bits */
	int te = ue + bias;              /* target biased exponent */
	int shift;
	if (te >= 1)
		shift = 52 - mant;
	else
		shift = 52 - mant + (1 - te), te = 0; /* subnormal in the target */
	uint64_t r = round_shift_rne(sig, shift);
	/* r includes the implicit bit for normals; carry may bump the exponent. */
	if (te == 0) {
		/* subnormal: r < 2^mant unless rounding reached the smallest normal */
		if (r >> mant)
			return (uint16_t)(sign | (1u << mant) | (r & ((1u << mant) - 1)));
		return (uint16_t)(sign | r);
	}
	if (r >> (mant + 1)) {
		r >>= 1;
		te++;
	}
	if (te >= (1 << ebits) - 1)
		return (uint16_t)(sign | inf);
	return (uint16_t)(sign | ((unsigned)te << mant) | (r & ((1u << mant) - 1)));
}

uint16_t pe_f64_to_f16(double x) { return f64_to_small(x, 10, 15, 5); }
uint16_t pe_f64_to_bf16(double x) { return f64_to_small(x, 7, 127, 8); }
/* A float widens to double exactly, so one rounding still happens. */
uint16_t pe_f32_to_f16(float x) { return f64_to_small((double)x, 10, 15, 5); }
uint16_t pe_f32_to_bf16(float x) { return f64_to_small((double)x, 7, 127, 8); }
float pe_f64_to_f32(double x) { return (float)x; }

float pe_f16_to_f32(uint16_t h)
{
	int e = (h >> 10) & 0x1f, m = h & 0x3ff;
	float v;
	if (e == 0)
		v = ldexpf((float)m, -24);
	else if (e == 31)
		v = m ? NAN : INFINITY;
	else
		v = ldexpf((float)(m | 0x400), e - 25);
	return (h & 0x8000) ? -v : v;
}

float pe_bf16_to_f32(uint16_t h)
{
	uint32_t b = (uint32_t)h << 16;
	float v;
	memcpy(&v, &b, 4);
	return v;
}

void pe_store_f64(enum pe_dtype dt, void *dst, const double *src, size_t n)
{
	switch (dt) {
	case PE_F64:
		memcpy(dst, src, n * 8);
		break;
	case PE_F32:
		for (size_t i = 0; i < n; i++)
			((float *)dst)[i] = (float)src[i];
		break;
	case PE_F16:
		for (size_t i = 0; i < n; i++)
			((uint16_t *)dst)[i] = pe_f64_to_f16(src[i]);
		break;
	case PE_BF16:
		for (size_t i = 0; i < n; i++)
			((uint16_t *)dst)[i] = pe_f64_to_bf16(src[i]);
		break;
	default:
		break;
	}
}

void pe_store_f32(enum pe_dtype dt, void *dst, const float *src, size_t n)
{
	switch (dt) {
	case PE_F32:
		memcpy(dst, src, n * 4);
		break;
	case PE_F64:
		for (size_t i = 0; i < n; i++)
			((double *)dst)[i] = src[i];
		break;
	case PE_F16:
		for (size_t i = 0; i < n; i++)
			((uint16_t *)dst)[i] = pe_f32_to_f16(src[i]);
		break;
	case PE_BF16:
		for (size_t i = 0; i < n; i++)
			((uint16_t *)dst)[i] = pe_f32_to_bf16(src[i]);
		break;
	default:
		break;
	}
}

double pe_dtype_lowest(enum pe_dtype dt)
{
	switch (dt) {
	case PE_F64:
		return -DBL_MAX;
	case PE_F16:
		return -65504.0;
	case PE_BF16:
		return -0x1.fep127;
	default:
		return -FLT_MAX;
	}
}
