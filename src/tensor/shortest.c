/* Shortest round-trip printing of f64, f32, f16 and bf16 values (and i32 elements of a view).
 *
 * Algorithm: Schubfach, R. Giulietti, "The Schubfach way to render doubles" (2020), written
 * here from the paper. For v = c * 2^q it picks k with 10^k no wider than the rounding interval
 * of v, computes 4 * v / 10^k and the two interval ends to two fractional bits plus a sticky bit
 * with one table multiplier g ~ 10^-k (126 bits for f64; its top 63 bits + 1 for the float-sized
 * formats, as in the paper's float variant), then takes the one multiple of 10^(k+1) inside the
 * interval if there is one, else the member of {s, s + 1} * 10^k inside it, the closer one (ties
 * to even) when both are. One departure: when s has a single digit (only tiny subnormals), the
 * 10^(k+1) candidate is no shorter than s, so closeness decides (the paper, written for Java's
 * two-digit minimum, never meets that case). f16 and bf16 run the f32 kernel with their own c, q
 * and interval; the tests check all 65536 values of each for round trip, shortness and closeness,
 * which is the proof for those two types, and test-exhaustive does the same for all 2^32 f32.
 * Normal float32 values whose rounding interval is symmetric (all but the powers of two above
 * the lowest binade) take Dragonbox instead (J. Jeon, "Dragonbox: A New Floating-Point
 * Binary-to-Decimal Conversion Algorithm", 2020; its float32 parameters, kappa = 1 and a 64-bit
 * cache ceil(10^k * 2^(63 - floor(log2 10^k))), written here from the paper), made branch-free:
 * whether the interval holds a multiple of 10^(k+1) is close to a coin toss, so both of its
 * outcomes are computed (two multiplications where Schubfach takes three) and one is selected.
 * pe_fmt_list computes two numbers' decimals side by side, so that the long dependency chain of
 * one overlaps the other's; on the AVX-512 and AVX2 tiers it prints eight at a time
 * (shortest_avx512.c, shortest_avx2.c, fed with this file's cache and with layouts derived from
 * write_decimal). During development the
 * Dragonbox decimal was checked equal to Schubfach's for all 2^31 such positive patterns;
 * test-exhaustive checks every printed float32, and the AVX-512 and AVX2 lists against the scalar
 * printer.
 *
 * Hand-written because no Debian library offers shortest round-trip printing for C (printf only
 * has fixed precisions; %.17g is long and not shortest, and snprintf is far too slow for 400k
 * numbers per table). The multipliers and Dragonbox's cache are tensor/pow10.c's tables, built
 * once on first use.
 *
 * Output style (one rule for every type): plain decimal when it is not longer than scientific,
 * else d.ddde-N / d.dddeN (no '+', no leading zeros in the exponent); "-0" keeps its sign. So
 * 0.5, 100, 1024, 0.00123, but 1e3, 1e-7, 1.2345e-4, 3.4028235e38. Non-finite values print as
 * NaN, Infinity, -Infinity (not JSON: callers that need JSON check first). Digits are stored in
 * 8- and 16-byte words, so any of buf's PE_NUM_MAX bytes past the returned length may be
 * overwritten (with NULs, or left as they were). */
#include "posenc/tensor.h"
#include "tensor/internal.h"
#include "tensor/pow10.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

typedef unsigned __int128 u128;

#define M63 ((1ull << 63) - 1)

/* ---- the tables (tensor/pow10.h) ---- */

#define K32_MIN PE_POW10_K32_MIN

static const struct pe_pow10_mult *mult_for(int k)
{
	pe_pow10_ready();
	return &pe_pow10_mult[-k - PE_POW10_P_MIN];
}

/* floor(q * log10(2)) and floor(log10(3/4 * 2^q)), exact for |q| <= 1200 (checked against long
 * double logs over that range; the tests also cover every binary exponent). */
static int floor_log10_pow2(int q) { return (q * 1262611) >> 22; }
static int floor_log10_3q_pow2(int q) { return (q * 1262611 - 524031) >> 22; }

/* ---- Schubfach ---- */

struct decimal {
	uint64_t f; /* value = f * 10^e */
	int e;
};

/* floor(g * cp / 2^127) with bit 0 forced to 1 when the fraction is not zero. */
static inline uint64_t round_odd64(const struct pe_pow10_mult *g, uint64_t cp)
{
	uint64_t x1 = (uint64_t)(((u128)g->lo * cp) >> 64);
	u128 y = (u128)g->hi * cp;
	uint64_t y0 = (uint64_t)y, y1 = (uint64_t)(y >> 64);
	uint64_t z = (y0 >> 1) + x1;
	return (y1 + (z >> 63)) | ((z & M63) != 0);
}

/* floor(g * cp / 2^95) likewise, g the top 63 bits of the multiplier plus one. */
static inline uint32_t round_odd32(uint64_t g, uint64_t cp)
{
	uint64_t x1 = (uint64_t)(((u128)g * cp) >> 64);
	return (uint32_t)(x1 >> 31) | ((x1 & ((1ull << 31) - 1)) != 0);
}

/* Pick among the candidates: vb, vbl, vbr are 4 * (v, lower end, upper end) / 10^k to two
 * fractional bits plus sticky; open is 1 when the interval excludes its ends (odd c). Written
 * with masks rather than branches: which case applies is data-dependent and would mispredict. */
static inline struct decimal choose(uint64_t vb, uint64_t vbl, uint64_t vbr, uint64_t open, int k)
{
	uint64_t s = vb >> 2, s10 = s / 10;
	uint64_t upin = vbl + open <= s10 * 40; /* s10 * 10^(k+1) is inside */
	uint64_t wpin = s10 * 40 + 40 + open <= vbr; /* (s10 + 1) * 10^(k+1) is inside */
	uint64_t uin = vbl + open <= s << 2;     /* s * 10^k is inside */
	uint64_t win = (s << 2) + 4 + open <= vbr; /* (s + 1) * 10^k is inside */
	uint64_t mid = (s << 2) + 2, above_mid = (vb > mid) | ((vb == mid) & s);
	/* One of s, s + 1 is always inside; the closer one (ties to even) when both are. */
	uint64_t in_k = s + (win & ((uin ^ 1) | above_mid));
	/* At most one multiple of 10^(k+1) fits; when one does, it is shorter, unless s has one
	 * digit (tiny subnormals): then 10^(k+1) is as long as s, and the closer one must win. */
	uint64_t shorter = (upin ^ wpin) & (s >= 10), mask = 0 - shorter;
	uint64_t f = ((s10 + (upin ^ 1)) & mask) | (in_k & ~mask);
	return (struct decimal){f, k + (int)shorter};
}

/* v = c * 2^q > 0; asym when c is the smallest significand of a binade above the lowest one, so
 * the gap below v is half the gap above. */
static struct decimal to_decimal64(uint64_t c, int q, int asym)
{
	uint64_t cb = c << 2, cbl = asym ? cb - 1 : cb - 2, cbr = cb + 2;
	int k = asym ? floor_log10_3q_pow2(q) : floor_log10_pow2(q);
	const struct pe_pow10_mult *g = mult_for(k);
	int h = q + g->e2 + 2;
	return choose(round_odd64(g, cb << h), round_odd64(g, cbl << h), round_odd64(g, cbr << h),
		      c & 1, k);
}

/* The same for significands of up to 24 bits and float-range exponents (f32, f16, bf16). */
static struct decimal to_decimal32(uint32_t c, int q, int asym)
{
	uint64_t cb = (uint64_t)c << 2, cbl = asym ? cb - 1 : cb - 2, cbr = cb + 2;
	int k = asym ? floor_log10_3q_pow2(q) : floor_log10_pow2(q);
	const struct pe_pow10_mult *m = mult_for(k);
	uint64_t g = m->hi + 1;
	int h = q + m->e2 + 33;
	return choose(round_odd32(g, cb << h), round_odd32(g, cbl << h), round_odd32(g, cbr << h),
		      c & 1, k);
}

/* Dragonbox (J. Jeon, "Dragonbox: A New Floating-Point Binary-to-Decimal Conversion Algorithm",
 * 2020), its float32 parameters (kappa = 1, 64-bit cache), round to nearest, ties to even; for
 * normal values whose interval is symmetric (t != 0 or the lowest binade): one multiplication in
 * the common case. Written from the paper; the shorter-interval case stays with Schubfach. */
static inline struct decimal to_decimal32_dragonbox(uint32_t fc, int e)
{
	int minus_k = floor_log10_pow2(e) - 1;
	int beta = e + pe_pow10_ek32[-minus_k - K32_MIN];
	uint64_t phi = pe_pow10_phi32[-minus_k - K32_MIN];
	uint32_t two_fc = fc << 1, deltai = (uint32_t)(phi >> (63 - beta));
	u128 zp = (u128)((uint64_t)(two_fc | 1) << beta) * phi; /* z = floor(zp / 2^64) */
	uint32_t zi = (uint32_t)(zp >> 64);
	int z_integer = (uint32_t)(zp >> 32) == 0, closed = (fc & 1) == 0;
	uint32_t sig = zi / 100, r = zi - 100 * sig;
	/* Which case applies is data-dependent (r against deltai is close to a coin toss), so both
	 * results are computed and one is selected, as in choose(). */
	int excluded = (r == 0) & z_integer & !closed; /* the right end, exact and excluded */
	int big = (r < deltai) & !excluded;
	if (__builtin_expect(r == deltai, 0)) { /* compare the fractional parts at the left end */
		u128 xp = (u128)((uint64_t)(two_fc - 1) << beta) * phi; /* x = floor(xp / 2^64) */
		big = (int)(xp >> 64 & 1) | (((uint32_t)(xp >> 32) == 0) & closed);
	}
	/* the small divisor: sig * 10 + the digit nearest to y, ties to even */
	uint32_t dist = (excluded ? 100 : r) - deltai / 2 + 5, approx_y_parity = (dist ^ 5) & 1, q = dist / 10;
	uint32_t small = (sig - (uint32_t)excluded) * 10 + q;
	u128 yp = (u128)((uint64_t)two_fc << beta) * phi; /* y = floor(yp / 2^64) */
	uint32_t y_parity = (uint32_t)(yp >> 64 & 1), y_integer = (uint32_t)(yp >> 32) == 0;
	small -= (q * 10 == dist) & ((y_parity != approx_y_parity) | (y_integer & small & 1));
	uint32_t mask = 0u - (uint32_t)big; /* a select the compiler keeps branch-free */
	return (struct decimal){(sig & mask) | (small & ~mask), minus_k + 1 + big};
}

/* ---- writing ---- */

static const uint64_t pow10_u64[20] = {
	1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull, 100000000ull,
	1000000000ull, 10000000000ull, 100000000000ull, 1000000000000ull, 10000000000000ull,
	100000000000000ull, 1000000000000000ull, 10000000000000000ull, 100000000000000000ull,
	1000000000000000000ull, 10000000000000000000ull,
};

static const uint32_t pow10_u32[10] = {1u, 10u, 100u, 1000u, 10000u, 100000u, 1000000u, 10000000u,
				       100000000u, 1000000000u};

static inline int count_digits32(uint32_t f)
{
	int t = ((32 - __builtin_clz(f)) * 1233) >> 12; /* floor(log10 f) is t or t - 1; f > 0 */
	return t + (f >= pow10_u32[t]);
}

static inline int count_digits(uint64_t f)
{
	if (f < 10)
		return 1;
	int t = ((64 - __builtin_clzll(f)) * 1233) >> 12; /* floor(log10 f) is t or t - 1 */
	return t + (f >= pow10_u64[t]);
}

/* v < 10^8 as eight ASCII digits with leading zeros, first digit in the lowest byte (memory
 * order on little-endian x86-64). Lanes are split 4+4, then 2+2, then 1+1 with multiply-shift
 * divisions (w * 10486 >> 20 = w / 100 for w < 10^4, u * 103 >> 10 = u / 10 for u < 100). */
static inline uint64_t ascii_8digits(uint32_t v)
{
	uint64_t x = v / 10000 | (uint64_t)(v % 10000) << 32;
	uint64_t h = (x * 10486 >> 20) & 0x0000007f0000007full;
	uint64_t y = h | (x - h * 100) << 16;
	uint64_t t = (y * 103 >> 10) & 0x000f000f000f000full;
	return (t | (y - t * 10) << 8) + 0x3030303030303030ull;
}

/* The n digits of f (n its digit count) at p, written from registers in wide stores; the bytes
 * after the digits are scratch. The same work for every value: no loop, and no branch on the
 * digit count for f32. put_digits9 takes f < 10^9, put_digits17 f < 10^17. */
static inline void put_digits9(char *p, uint32_t f, int n)
{
	int nine = n > 8;
	uint64_t z = ascii_8digits(f % 100000000) >> 8 * (8 - n + nine);
	p[0] = (char)('0' + f / 100000000); /* the ninth digit; overwritten when n <= 8 */
	memcpy(p + nine, &z, 8);
}

static inline void put_digits17(char *p, uint64_t f, int n)
{
	int seventeen = n > 16;
	uint64_t r = f % 10000000000000000ull;
	u128 x = ascii_8digits((uint32_t)(r / 100000000)) |
		 (u128)ascii_8digits((uint32_t)(r % 100000000)) << 64;
	x >>= 8 * (16 - n + seventeen); /* drop the leading zeros */
	p[0] = (char)('0' + f / 10000000000000000ull); /* overwritten when n <= 16 */
	memcpy(p + seventeen, &x, 16);
}

static inline void put_digits(char *p, uint64_t f, int n, int wide)
{
	if (wide)
		put_digits17(p, f, n);
	else
		put_digits9(p, (uint32_t)f, n);
}

static size_t put_special(char *buf, const char *s)
{
	size_t n = strlen(s);
	memcpy(buf, s, n);
	return n;
}

/* One step without a branch (it is taken about one time in ten, unpredictably), then a loop
 * for the rare longer runs (integers, short decimals). Defined for 64-bit f and, with cheaper
 * divisions by 10, for 32-bit f (the float-sized types). */
#define DROP_TRAILING_ZEROS(T, name)                                                                       \
	static inline T name(T f, int *e)                                                                  \
	{                                                                                                  \
		T q = f / 10;                                                                              \
		int z = q * 10 == f;                                                                       \
		f = z ? q : f;                                                                             \
		*e += z;                                                                                   \
		while (f % 10 == 0) {                                                                      \
			f /= 10;                                                                           \
			(*e)++;                                                                            \
		}                                                                                          \
		return f;                                                                                  \
	}
DROP_TRAILING_ZEROS(uint64_t, drop_trailing_zeros)
DROP_TRAILING_ZEROS(uint32_t, drop_trailing_zeros32)

static char *put_exponent(char *p, int x)
{
	unsigned ax = (unsigned)(x < 0 ? -x : x);
	*p++ = 'e';
	*p = '-';
	p += x < 0;
	if (ax >= 100) {
		*p++ = (char)('0' + ax / 100);
		ax %= 100;
		*p++ = (char)('0' + ax / 10);
	} else if (ax >= 10) {
		*p++ = (char)('0' + ax / 10);
	}
	*p++ = (char)('0' + ax % 10);
	return p;
}

/* f * 10^e with f > 0, in the shorter of plain and scientific notation (plain on a tie).
 * Digits go out in wide stores from registers, so bytes of buf past the returned length (within
 * PE_NUM_MAX) may be overwritten, with NULs or left as they were.
 * wide (a constant at each call, which is inlined and specialised): f may have 17 digits and
 * |exponents| up to 324 (f64), else f < 10^9 and |exponents| below 100, in 32-bit arithmetic. */
static inline __attribute__((always_inline)) size_t write_decimal(char *buf, int neg, struct decimal d, int wide)
{
	int e = d.e; /* only a multiple of 10^(k+1) can have trailing zeros */
	uint64_t f = wide ? drop_trailing_zeros(d.f, &e) : drop_trailing_zeros32((uint32_t)d.f, &e);
	int n = wide ? count_digits(f) : count_digits32((uint32_t)f), x = e + n - 1; /* x: scientific exponent */
	int ax = x < 0 ? -x : x;
	int plain = e >= 0 ? n + e : x >= 0 ? n + 1 : n + 1 - x;
	int sci = n + (n > 1) + 2 + (x < 0) + (ax >= 10) + (wide && ax >= 100);
	char *p = buf + neg;
	buf[0] = '-';
	/* Plain wins only for short zero runs: e <= 5 in ddd000, -x - 1 <= 2 in 0.00ddd. */
	if (plain <= sci) {
		if (x < 0) { /* 0.00ddd */
			memcpy(p, "0.000000", 8);
			put_digits(p + 1 - x, f, n, wide);
		} else if (e < 0) { /* dd.ddd: digits one to the right, the integer part moved back */
			put_digits(p + 1, f, n, wide);
			for (int i = 0; i <= x; i++)
				p[i] = p[i + 1];
			p[x + 1] = '.';
		} else { /* ddd000 */
			uint64_t zeros = e ? 0x3030303030303030ull >> 8 * (8 - e) : 0; /* e '0's, NULs */
			put_digits(p, f, n, wide);
			memcpy(p + n, &zeros, 8);
		}
		return (size_t)(neg + plain);
	}
	/* d.ddde-x: the digits one to the right, the first moved back before the point */
	put_digits(p + 1, f, n, wide);
	p[0] = p[1];
	p[1] = '.';
	return (size_t)(put_exponent(p + n + (n > 1), x) - buf);
}

/* ---- the AVX-512 and AVX2 tiers' layouts, derived from write_decimal ----
 * write_decimal lays a decimal out by its sign, digit count and exponent only. Printing the
 * stand-in decimal 123456789 cut to n digits shows where each digit goes (the characters '1' to
 * '9' before any 'e' are digits 1 to n) and which characters are fixed. */

#define LAYOUT_X (PE_F32_X_MAX - PE_F32_X_MIN + 1)
static struct pe_f32_layout layouts[2 * 9 * LAYOUT_X];

static void build_layout(struct pe_f32_layout *l, int neg, int n, int x)
{
	char text[PE_NUM_MAX + 8];
	size_t len = write_decimal(text, neg, (struct decimal){123456789u / pow10_u32[9 - n], x - n + 1}, 0);
	int exponent = 0;
	memset(l, 0, sizeof *l);
	for (size_t i = 0; i < len; i++) {
		char c = text[i];
		exponent |= c == 'e';
		int digit = !exponent && c >= '1' && c <= '9' ? c - '1' : -1; /* 0 = the first of n */
		int pos = 9 - n + digit; /* among the nine zero-padded digits */
		l->shuffle[i] = digit < 0 ? 0x80 : (uint8_t)(pos == 0 ? 8 : pos - 1);
		l->fixed[i] = digit < 0 ? (uint8_t)c : 0;
	}
	l->shuffle[len] = 0x80;
	l->fixed[len] = ',';
	for (size_t i = len + 1; i < 16; i++)
		l->shuffle[i] = 0x80;
	l->len = (uint8_t)(len + 1);
}

static atomic_int layouts_built;
static pthread_once_t layouts_once = PTHREAD_ONCE_INIT;

static void build_layouts(void)
{
	for (int neg = 0; neg < 2; neg++)
		for (int n = 1; n <= 9; n++)
			for (int x = PE_F32_X_MIN; x <= PE_F32_X_MAX; x++)
				build_layout(&layouts[(neg * 9 + n - 1) * LAYOUT_X + x - PE_F32_X_MIN], neg, n, x);
	atomic_store_explicit(&layouts_built, 1, memory_order_release);
}

/* Built once, on the first list, as the power tables are. */
static void layouts_ready(void)
{
	if (!atomic_load_explicit(&layouts_built, memory_order_acquire))
		pthread_once(&layouts_once, build_layouts);
}

/* ---- the public functions: decode the bits, then the common path ---- */

/* A finite binary value (be the biased exponent field, t the fraction field) of a format with
 * `mant` fraction bits and exponent bias `bias`. */
static size_t write_small(char *buf, int neg, int be, uint32_t t, int mant, int bias)
{
	if (be == 0 && t == 0)
		return neg ? put_special(buf, "-0") : put_special(buf, "0");
	uint32_t c = be ? t | 1u << mant : t;
	int q = (be ? be : 1) - bias - mant;
	return write_decimal(buf, neg, to_decimal32(c, q, be > 1 && t == 0), 0);
}

static size_t write_nonfinite(char *buf, int neg, int nan)
{
	if (nan)
		return put_special(buf, "NaN");
	return put_special(buf, neg ? "-Infinity" : "Infinity");
}

size_t pe_fmt_f64(double x, char *buf)
{
	uint64_t bits;
	memcpy(&bits, &x, sizeof bits);
	int neg = (int)(bits >> 63), be = (int)(bits >> 52 & 0x7ff);
	uint64_t t = bits & ((1ull << 52) - 1);
	if (be == 0x7ff)
		return write_nonfinite(buf, neg, t != 0);
	if (be == 0 && t == 0)
		return neg ? put_special(buf, "-0") : put_special(buf, "0");
	uint64_t c = be ? t | 1ull << 52 : t;
	int q = (be ? be : 1) - 1075;
	if (q < 0 && q > -53 && (c & ((1ull << -q) - 1)) == 0) /* an integer below 2^53: exact */
		return write_decimal(buf, neg, (struct decimal){c >> -q, 0}, 1);
	return write_decimal(buf, neg, to_decimal64(c, q, be > 1 && t == 0), 1);
}

/* A normal float32 with a symmetric interval: the Dragonbox path. */
static inline int f32_plain(uint32_t bits)
{
	uint32_t be = bits >> 23 & 0xff, t = bits & 0x7fffff;
	return be != 0 && be != 0xff && (t != 0 || be == 1);
}

static inline __attribute__((always_inline)) size_t fmt_f32(float x, char *buf)
{
	uint32_t bits;
	memcpy(&bits, &x, sizeof bits);
	int neg = (int)(bits >> 31), be = (int)(bits >> 23 & 0xff);
	uint32_t t = bits & ((1u << 23) - 1);
	if (__builtin_expect(!f32_plain(bits), 0))
		return be == 0xff ? write_nonfinite(buf, neg, t != 0) : write_small(buf, neg, be, t, 23, 127);
	pe_pow10_ready();
	return write_decimal(buf, neg, to_decimal32_dragonbox(t | 1u << 23, be - 150), 0);
}

size_t pe_fmt_f32(float x, char *buf) { return fmt_f32(x, buf); }

size_t pe_fmt_f16(uint16_t h, char *buf)
{
	int neg = h >> 15, be = h >> 10 & 0x1f;
	uint32_t t = h & 0x3ffu;
	if (be == 0x1f)
		return write_nonfinite(buf, neg, t != 0);
	return write_small(buf, neg, be, t, 10, 15);
}

size_t pe_fmt_bf16(uint16_t h, char *buf)
{
	int neg = h >> 15, be = h >> 7 & 0xff;
	uint32_t t = h & 0x7fu;
	if (be == 0xff)
		return write_nonfinite(buf, neg, t != 0);
	return write_small(buf, neg, be, t, 7, 127);
}

static size_t write_i32(int32_t v, char *buf)
{
	uint64_t u = (uint64_t)(v < 0 ? -(int64_t)v : v);
	int n = count_digits(u);
	buf[0] = '-';
	put_digits17(buf + (v < 0), u, n);
	return (size_t)((v < 0) + n);
}

/* Unknown dtypes write nothing (length 0). */
size_t pe_fmt_elem(const struct pe_tensor_view *t, size_t i, char *buf)
{
	const unsigned char *base = t->data;
	switch (t->dtype) {
	case PE_F32: {
		float v;
		memcpy(&v, base + 4 * i, 4);
		return pe_fmt_f32(v, buf);
	}
	case PE_F64: {
		double v;
		memcpy(&v, base + 8 * i, 8);
		return pe_fmt_f64(v, buf);
	}
	case PE_F16:
	case PE_BF16: {
		uint16_t v;
		memcpy(&v, base + 2 * i, 2);
		return t->dtype == PE_F16 ? pe_fmt_f16(v, buf) : pe_fmt_bf16(v, buf);
	}
	case PE_I32: {
		int32_t v;
		memcpy(&v, base + 4 * i, 4);
		return write_i32(v, buf);
	}
	default:
		return 0;
	}
}

size_t pe_fmt_width(enum pe_dtype dt)
{
	switch (dt) {
	case PE_F64:
		return 25; /* -2.2250738585072014e-308, */
	case PE_F32:
		return 16; /* -1.17549435e-38, */
	default:
		return 12; /* -2147483648, (i32; f16 and bf16 are shorter) */
	}
}

/* Values of f32 as "a,b,...," (a comma after each): two numbers' decimals side by side. */
static size_t list_f32(const unsigned char *base, size_t n, char *buf)
{
	char *p = buf;
	size_t i = 0;
	for (; i + 2 <= n; i += 2) {
		uint32_t b0, b1;
		memcpy(&b0, base + 4 * i, 4);
		memcpy(&b1, base + 4 * i + 4, 4);
		if (!f32_plain(b0) || !f32_plain(b1))
			break;
		struct decimal d0 = to_decimal32_dragonbox((b0 & 0x7fffff) | 1u << 23, (int)(b0 >> 23 & 0xff) - 150);
		struct decimal d1 = to_decimal32_dragonbox((b1 & 0x7fffff) | 1u << 23, (int)(b1 >> 23 & 0xff) - 150);
		p += write_decimal(p, (int)(b0 >> 31), d0, 0);
		*p++ = ',';
		p += write_decimal(p, (int)(b1 >> 31), d1, 0);
		*p++ = ',';
	}
	for (; i < n; i++) {
		float v;
		memcpy(&v, base + 4 * i, 4);
		p += fmt_f32(v, p);
		*p++ = ',';
	}
	return (size_t)(p - buf);
}

/* The same, eight at a time by the AVX-512 or AVX2 tier (fmt8) where it runs; blocks it declines,
 * and the tail, by list_f32. */
static size_t list_f32_x8(const unsigned char *base, size_t n, char *buf,
			  size_t (*fmt8)(const void *, char *, const struct pe_f32_vec_tables *))
{
	static const struct pe_f32_vec_tables tb = {pe_pow10_phi32, K32_MIN, layouts};
	char *p = buf;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		size_t w = fmt8(base + 4 * i, p, &tb);
		p += w ? w : list_f32(base + 4 * i, 8, p);
	}
	return (size_t)(p - buf) + list_f32(base + 4 * i, n - i, p);
}

size_t pe_fmt_list(const struct pe_tensor_view *t, size_t start, size_t n, char *buf)
{
	char *p = buf;
	if (t->dtype == PE_F32) { /* the default output: the printer inlined, no dispatch per value */
		const unsigned char *base = (const unsigned char *)t->data + 4 * start;
		pe_pow10_ready();
		layouts_ready();
		enum pe_isa isa = pe_isa_active();
		size_t len = isa == PE_ISA_AVX512 ? list_f32_x8(base, n, buf, pe_fmt_f32x8_avx512)
			     : isa == PE_ISA_AVX2 ? list_f32_x8(base, n, buf, pe_fmt_f32x8_avx2)
						  : list_f32(base, n, buf);
		return len - (n != 0); /* the last comma is scratch */
	}
	for (size_t i = 0; i < n; i++) {
		*p = ',';
		p += i != 0;
		p += pe_fmt_elem(t, start + i, p);
	}
	return (size_t)(p - buf);
}
