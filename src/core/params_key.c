/* The canonical key text of table parameters (pe_params_canonical): "name=value" for every set
 * parameter in spec order, '&'-separated, each value in one form whatever the client wrote, so
 * equal parameters make equal cache keys, ETags and plan urls (pe_params_derive copies parameters
 * through the same text). Split from params.c (parsing and checks), which uses it; it uses nothing
 * of params.c. */
#include "core/tables.h"
#include "posenc/core.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const pe_list_integers[] = {NULL};

/* Shortest %.*g form of a double that reads back exactly, by printf and strtod: the reference
 * (and the path for values the fast path below does not decide).
 * A form cut short by cap is reported by its full length (the caller fails): never read back the
 * truncated text, which would make the key depend on the buffer ("1000" for "1e+03"). */
static int canonical_real_printf(double x, char *buf, size_t cap)
{
	if (x == 0)
		return snprintf(buf, cap, "0");
	for (int prec = 1; prec <= 17; prec++) {
		int n = snprintf(buf, cap, "%.*g", prec, x);
		if (n < 0 || (size_t)n >= cap)
			return n;
		if (strtod(buf, NULL) == x)
			return n;
	}
	return snprintf(buf, cap, "%.17g", x);
}

/* 10^0 .. 10^22: the powers of ten a double holds exactly. */
static const double pow10_exact[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
				     1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* The decimal d * 10^-j (d > 0, no trailing zero unless j == 0) as printf's %.*g writes it at a
 * precision of d's digit count: d.ddde+XX when the exponent X is below -4 or not below that
 * count, else plain. Returns the length written to out (at most 24 bytes with the sign). */
static size_t format_g(int neg, uint64_t d, int j, char *out)
{
	char dig[20];
	int n = 0;
	for (uint64_t v = d; v; v /= 10)
		dig[19 - n++] = (char)('0' + v % 10);
	const char *s = dig + 20 - n;
	int z = 0; /* trailing zeros of an integer: not significant */
	while (z < n - 1 && s[n - 1 - z] == '0')
		z++;
	int prec = n - z, x = n - 1 - j; /* significant digits; the exponent of the first */
	char *p = out;
	if (neg)
		*p++ = '-';
	if (x < -4 || x >= prec) {
		*p++ = s[0];
		if (prec > 1) {
			*p++ = '.';
			memcpy(p, s + 1, (size_t)prec - 1);
			p += prec - 1;
		}
		*p++ = 'e';
		*p++ = x < 0 ? '-' : '+';
		int ax = x < 0 ? -x : x;
		if (ax >= 100)
			*p++ = (char)('0' + ax / 100);
		*p++ = (char)('0' + ax / 10 % 10);
		*p++ = (char)('0' + ax % 10);
	} else if (x >= 0) { /* ddd or dd.ddd: n - j integer digits (all of them when j == 0) */
		memcpy(p, s, (size_t)(x + 1));
		p += x + 1;
		if (j > 0) {
			*p++ = '.';
			memcpy(p, s + x + 1, (size_t)j);
			p += j;
		}
	} else { /* 0.000ddd */
		*p++ = '0';
		*p++ = '.';
		for (int i = 0; i < -x - 1; i++)
			*p++ = '0';
		memcpy(p, s, (size_t)n);
		p += n;
	}
	return (size_t)(p - out);
}

/* canonical_real_printf's text without printf, for the values parameters usually hold: integers
 * below 2^53, and numbers that read back from a decimal d * 10^-j with d < 2^50, j <= 22 (0.1,
 * 1.5, 1e-4); 0 for any other (the caller asks printf).
 * Why it is the same text: the loop stops at the first precision whose correctly rounded decimal
 * reads back as x, i.e. lies in x's rounding interval. An integer below 2^53 has neighbours at
 * most 1 apart, so no decimal with fewer significant digits than its own reads back as it. For
 * the others, the least j for which the decimal nearest x with j fractional digits reads back is
 * found (d / 10^j of two exact doubles is one correctly rounded division: strtod's result; d is
 * the nearest because x * 10^j is within an ulp of it); with a symmetric interval (every x but a
 * power of two, whose interval below is half as wide), a decimal with fewer digits reading back
 * would put the nearest one with fewer fractional digits in the interval too, and at d's own
 * digit count the correctly rounded decimal is d's. A power of two is taken only when d * 10^-j
 * is x exactly and d < 10^15: other decimals of at most 15 digits are then more than x's interval
 * away. tests/core/test_canonical_real.c compares both on many thousands of values. */
static size_t canonical_real_fast(double x, char *out)
{
	int neg = x < 0;
	double a = neg ? -x : x;
	if (a < 0x1p53 && a == (double)(uint64_t)a)
		return format_g(neg, (uint64_t)a, 0, out);
	if (a < 1e-22 || a >= 0x1p52)
		return 0;
	int exp2;
	int pow2 = frexp(a, &exp2) == 0.5;
	for (int j = 1; j <= 22; j++) {
		double m = a * pow10_exact[j];
		if (m >= 0x1p50) /* below it, m is within 3/16 of the decimal when that reads back */
			return 0;
		double d = nearbyint(m);
		if (d == 0 || d / pow10_exact[j] != a)
			continue;
		if (pow2 && (d >= 1e15 || fma(a, pow10_exact[j], -d) != 0))
			return 0;
		return format_g(neg, (uint64_t)d, j, out);
	}
	return 0;
}

/* The shortest %.*g form of x that reads back exactly (canonical_real_printf's text, faster). */
static int canonical_real(double x, char *buf, size_t cap)
{
	char tmp[32];
	size_t n = x != 0 && isfinite(x) ? canonical_real_fast(x, tmp) : 0;
	if (n == 0)
		return canonical_real_printf(x, buf, cap);
	if (n < cap) {
		memcpy(buf, tmp, n);
		buf[n] = 0;
	} else if (cap) {
		memcpy(buf, tmp, cap - 1); /* as snprintf would have cut it */
		buf[cap - 1] = 0;
	}
	return (int)n;
}

/* snprintf(buf, cap, "%s", s) for a string of known length n, without the format parser (keys are
 * built for every request): n, with buf holding s only when it fits. */
static int put_text(char *buf, size_t cap, const char *s, size_t n)
{
	if (n < cap) {
		memcpy(buf, s, n);
		buf[n] = 0;
	}
	return n > INT_MAX ? -1 : (int)n;
}

/* snprintf(buf, cap, "%lld", v) likewise. */
static int put_int(char *buf, size_t cap, long long v)
{
	char digits[24];
	size_t i = sizeof digits;
	unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
	do
		digits[--i] = (char)('0' + u % 10);
	while ((u /= 10) != 0);
	if (v < 0)
		digits[--i] = '-';
	return put_text(buf, cap, digits + i, sizeof digits - i);
}

int pe_param_value_text(const struct pe_param_spec *sp, const struct pe_param_val *v, char *buf, size_t cap)
{
	switch (sp->type) {
	case PE_PT_INT:
	case PE_PT_BOOL:
		return put_int(buf, cap, (long long)v->i);
	case PE_PT_REAL:
		return canonical_real(v->r, buf, cap);
	case PE_PT_ENUM:
		return put_text(buf, cap, sp->choices[v->i], strlen(sp->choices[v->i]));
	case PE_PT_TEXT:
		return put_text(buf, cap, v->text, strlen(v->text));
	case PE_PT_LIST: {
		size_t len = 0;
		for (size_t k = 0; k < v->nlist; k++) {
			if (k && len + 1 < cap)
				buf[len++] = ',';
			if (len >= cap)
				return -1;
			int w = sp->choices == PE_LIST_INTEGERS ? put_int(buf + len, cap - len, (long long)v->list[k])
								: canonical_real(v->list[k], buf + len, cap - len);
			if (w < 0 || (size_t)w >= cap - len)
				return -1;
			len += (size_t)w;
		}
		if (len < cap)
			buf[len] = 0;
		return (int)len;
	}
	}
	return -1;
}

int pe_params_canonical(const struct pe_params *p, char *buf, size_t cap)
{
	size_t len = 0;
	if (cap == 0)
		return -1;
	buf[0] = 0;
	for (int i = 0; i < p->def->nparams; i++) {
		const struct pe_param_spec *sp = &p->def->params[i];
		if (!p->v[i].set)
			continue;
		size_t name_len = strlen(sp->name);
		if (len + (len ? 1 : 0) + name_len + 1 >= cap) /* "&name=" and the NUL, as snprintf needed */
			return -1;
		if (len)
			buf[len++] = '&';
		memcpy(buf + len, sp->name, name_len);
		len += name_len;
		buf[len++] = '=';
		buf[len] = 0;
		int w = pe_param_value_text(sp, &p->v[i], buf + len, cap - len);
		if (w < 0 || (size_t)w >= cap - len)
			return -1;
		len += (size_t)w;
	}
	return (int)len;
}
