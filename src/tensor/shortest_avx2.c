/* The float32 list printer's AVX2 tier: eight numbers at a time, as two vectors of four 64-bit
 * lanes, byte for byte what the scalar printer in shortest.c writes (test-exhaustive compares the
 * two on every 2^32 pattern). The design is shortest_avx512.c's: the scalar's Dragonbox decimal
 * (float32 parameters) per 64-bit lane with divisions by constants, trailing zeros dropped while
 * any lane has one, and a 16-byte slot per number laid out by one byte shuffle and OR-ed with the
 * fixed characters from the table shortest.c derives from its own writer (build_layouts). Up to
 * 15 bytes past the last number are scratch.
 *
 * What AVX2 lacks, and what stands in for it: masks are lanes of all ones (compare results),
 * combined with and/or/andnot and applied with blendv, or added as -1 where the scalar code adds
 * or subtracts a condition. There is no unsigned 64-bit compare, but every compared quantity is
 * below 2^32, so the signed one (cmpgt_epi64) gives the same answer. There is no 64-bit mullo:
 * every product is 32 x 32 -> 64 bits (mul_epu32), as in the AVX-512 file. There is no 64-bit
 * arithmetic shift: the small integer quantities (k, beta, the cache index) are computed in eight
 * 32-bit lanes, whose exponents fit, and widened. No lzcnt: the digit count is one plus the number
 * of powers of ten not above the value (eight compares). _mm256_shuffle_epi8 stays within 128-bit
 * lanes, which is all a 16-byte slot needs; each slot is shuffled alone.
 *
 * A block of eight goes back to the scalar printer (return 0) when a lane is not a normal value
 * with a symmetric interval (zero, subnormal, a power of two, non-finite). Needs AVX2
 * (pe_isa_active() == PE_ISA_AVX2 guarantees it). */
#include "tensor/internal.h"

#include <immintrin.h>
#include <stdint.h>

#define V __m256i
#define C(x) _mm256_set1_epi64x((long long)(x))
#define C32(x) _mm256_set1_epi32((int)(x))

/* floor(a / d) for 32-bit a held in 64-bit lanes: a * m >> s (exact for every a < 2^32). */
static inline V div_const(V a, uint32_t m, int s) { return _mm256_srli_epi64(_mm256_mul_epu32(a, C(m)), s); }

/* floor(a * phi / 2^32) for a < 2^32 and a 64-bit phi: bits 32..95 of the 96-bit product. */
static inline V mul_phi_mid(V a, V phi_hi, V phi)
{
	return _mm256_add_epi64(_mm256_mul_epu32(a, phi_hi), _mm256_srli_epi64(_mm256_mul_epu32(a, phi), 32));
}

static inline V low32(V a) { return _mm256_and_si256(a, C(0xffffffffu)); }

/* All ones in the lanes where a's low 32 bits are zero. */
static inline V low32_zero(V a) { return _mm256_cmpeq_epi64(low32(a), _mm256_setzero_si256()); }

/* All ones in the lanes where (a & bit) is set. */
static inline V has_bit(V a, uint64_t bit) { return _mm256_cmpeq_epi64(_mm256_and_si256(a, C(bit)), C(bit)); }

/* Eight ASCII digits of lo < 10^8 per lane, the most significant in the lowest byte (the scalar
 * ascii_8digits's bytes): lo splits into two halves below 10^4 at 32-bit offsets, each half into
 * two 16-bit fields below 100, each field into a byte pair, with 16-bit multiplications
 * (w * 5243 >> 19 = w / 100 for w < 10^4, u * 6554 >> 16 = u / 10 for u < 100). */
static inline V ascii8(V lo)
{
	V a = div_const(lo, 3518437209u, 45); /* lo / 10^4 */
	V x = _mm256_or_si256(a, _mm256_slli_epi64(_mm256_sub_epi64(lo, _mm256_mul_epu32(a, C(10000))), 32));
	V h = _mm256_srli_epi16(_mm256_mulhi_epu16(x, _mm256_set1_epi16(5243)), 3);
	V y = _mm256_or_si256(h, _mm256_slli_epi64(_mm256_sub_epi16(x, _mm256_mullo_epi16(h, _mm256_set1_epi16(100))), 16));
	V t = _mm256_mulhi_epu16(y, _mm256_set1_epi16(6554));
	V d = _mm256_or_si256(t, _mm256_slli_epi16(_mm256_sub_epi16(y, _mm256_mullo_epi16(t, _mm256_set1_epi16(10))), 8));
	return _mm256_add_epi64(d, C(0x3030303030303030ull));
}

/* Four lanes' inputs to Dragonbox: the significand with its hidden bit, beta, -k (signed) and
 * the cache entry. */
struct lanes {
	V fc, beta, minus_k, phi;
};

/* Dragonbox per lane (to_decimal32_dragonbox in shortest.c): f and the exponent of f * 10^exp. */
static inline void decimals(const struct lanes *in, V *f_out, V *exp_out)
{
	V fc = in->fc, beta = in->beta, phi = in->phi;
	V phi_hi = _mm256_srli_epi64(phi, 32);
	V two_fc = _mm256_slli_epi64(fc, 1);
	V deltai = low32(_mm256_srlv_epi64(phi, _mm256_sub_epi64(C(63), beta)));
	V zmid = mul_phi_mid(_mm256_sllv_epi64(_mm256_or_si256(two_fc, C(1)), beta), phi_hi, phi);
	V zi = _mm256_srli_epi64(zmid, 32);
	V open = has_bit(fc, 1);
	V sig = div_const(zi, 1374389535u, 37); /* zi / 100 */
	V r = _mm256_sub_epi64(zi, _mm256_mul_epu32(sig, C(100)));
	V excluded = _mm256_and_si256(_mm256_and_si256(_mm256_cmpeq_epi64(r, _mm256_setzero_si256()), low32_zero(zmid)), open);
	V big = _mm256_andnot_si256(excluded, _mm256_cmpgt_epi64(deltai, r)); /* r < deltai, both < 2^32 */
	V tie = _mm256_cmpeq_epi64(r, deltai);
	if (!_mm256_testz_si256(tie, tie)) { /* compare the fractional parts at the left end */
		V xmid = mul_phi_mid(_mm256_sllv_epi64(_mm256_sub_epi64(two_fc, C(1)), beta), phi_hi, phi);
		V x_big = _mm256_or_si256(has_bit(xmid, 1ull << 32), _mm256_andnot_si256(open, low32_zero(xmid)));
		big = _mm256_blendv_epi8(big, x_big, tie);
	}
	/* the small divisor: sig * 10 + the digit nearest to y, ties to even (uint32 arithmetic) */
	V rr = _mm256_blendv_epi8(r, C(100), excluded);
	V dist = low32(_mm256_add_epi64(_mm256_sub_epi64(rr, _mm256_srli_epi64(deltai, 1)), C(5)));
	V approx_parity = _mm256_and_si256(_mm256_xor_si256(dist, C(5)), C(1));
	V q = div_const(dist, 3435973837u, 35); /* dist / 10 */
	V sig_x = _mm256_add_epi64(sig, excluded); /* sig - 1 where excluded */
	V small = _mm256_add_epi64(_mm256_mul_epu32(sig_x, C(10)), q);
	V ymid = mul_phi_mid(_mm256_sllv_epi64(two_fc, beta), phi_hi, phi);
	V y_parity = _mm256_and_si256(_mm256_srli_epi64(ymid, 32), C(1));
	V exact_mid = _mm256_cmpeq_epi64(_mm256_mul_epu32(q, C(10)), dist);
	V parity_same = _mm256_cmpeq_epi64(y_parity, approx_parity);
	V y_int_odd = _mm256_and_si256(low32_zero(ymid), has_bit(small, 1));
	V down = _mm256_and_si256(exact_mid, _mm256_or_si256(_mm256_xor_si256(parity_same, C(-1)), y_int_odd));
	small = low32(_mm256_add_epi64(small, down)); /* small - 1 where down */
	*f_out = _mm256_blendv_epi8(small, sig, big);
	*exp_out = _mm256_sub_epi64(_mm256_add_epi64(in->minus_k, C(1)), big); /* + 1 where big */
}

/* Drop one trailing zero from the lanes of f that have one; nonzero when some lane had one. */
static inline int drop_zero(V *f, V *exp)
{
	V q = div_const(*f, 3435973837u, 35);
	V z = _mm256_cmpeq_epi64(_mm256_mul_epu32(q, C(10)), *f);
	*f = _mm256_blendv_epi8(*f, q, z);
	*exp = _mm256_sub_epi64(*exp, z);
	return !_mm256_testz_si256(z, z);
}

/* All trailing zeros of both vectors' f (never 0 for a normal value), counted into exp: one step
 * without a branch, then a loop for the rarer second zeros. */
static inline void drop_zeros(V f[2], V exp[2])
{
	int more = drop_zero(&f[0], &exp[0]) | drop_zero(&f[1], &exp[1]);
	while (more)
		more = drop_zero(&f[0], &exp[0]) | drop_zero(&f[1], &exp[1]);
}

/* The number of decimal digits of every lane's 0 < f < 10^9: one plus the count of 10^i <= f
 * (each compare adds -1 where true). */
static inline V digit_count(V f)
{
	V n = C(1);
	for (uint64_t p = 9; p < 100000000u; p = p * 10 + 9)
		n = _mm256_sub_epi64(n, _mm256_cmpgt_epi64(f, C(p)));
	return n;
}

/* Eight lanes' exponents and cache indices in 32-bit arithmetic, split into two sets of four. */
static inline void prepare(V b, V t, const struct pe_f32_vec_tables *tb, struct lanes out[2])
{
	V e = _mm256_sub_epi32(_mm256_and_si256(_mm256_srli_epi32(b, 23), C32(0xff)), C32(150));
	V minus_k = _mm256_sub_epi32(_mm256_srai_epi32(_mm256_mullo_epi32(e, C32(1262611)), 22), C32(1));
	V k = _mm256_sub_epi32(_mm256_setzero_si256(), minus_k);
	/* e(k) = floor(k * log2 10): floor(k * 1741647 / 2^19), exact for |k| < 1233 */
	V beta = _mm256_add_epi32(e, _mm256_srai_epi32(_mm256_mullo_epi32(k, C32(1741647)), 19));
	V idx = _mm256_sub_epi32(k, C32(tb->kmin));
	V fc = _mm256_or_si256(t, C32(1u << 23));
	for (int h = 0; h < 2; h++) {
		__m128i ih = h ? _mm256_extracti128_si256(idx, 1) : _mm256_castsi256_si128(idx);
		out[h].phi = _mm256_i32gather_epi64((const long long *)tb->phi, ih, 8);
#define HALF(v) (h ? _mm256_extracti128_si256(v, 1) : _mm256_castsi256_si128(v))
		out[h].fc = _mm256_cvtepu32_epi64(HALF(fc));
		out[h].beta = _mm256_cvtepi32_epi64(HALF(beta));
		out[h].minus_k = _mm256_cvtepi32_epi64(HALF(minus_k));
#undef HALF
	}
}

/* Four numbers' layout entries ((sign, digit count, exponent), as internal.h numbers them) and
 * 16-byte slots: digits 2-9 of the zero-padded nine, then the first digit; 0 when an exponent is
 * outside the table. */
static inline int slots4(V f, V exp, __m128i neg32, uint64_t entries[4], __m128i slot[4])
{
	V n = digit_count(f);
	V x = _mm256_add_epi64(exp, _mm256_sub_epi64(n, C(1))); /* the scientific exponent */
	V out = _mm256_or_si256(_mm256_cmpgt_epi64(C(PE_F32_X_MIN), x), _mm256_cmpgt_epi64(x, C(PE_F32_X_MAX)));
	if (!_mm256_testz_si256(out, out))
		return 0;
	V neg = _mm256_cvtepu32_epi64(neg32);
	V entry = _mm256_add_epi64(
		_mm256_mul_epu32(_mm256_add_epi64(_mm256_mul_epu32(neg, C(9)), _mm256_sub_epi64(n, C(1))),
				 C(PE_F32_X_MAX - PE_F32_X_MIN + 1)),
		_mm256_sub_epi64(x, C(PE_F32_X_MIN)));
	_mm256_storeu_si256((V *)entries, entry);
	V hi = div_const(f, 1441151881u, 57); /* f / 10^8 */
	V lo8 = ascii8(_mm256_sub_epi64(f, _mm256_mul_epu32(hi, C(100000000))));
	V hi1 = _mm256_add_epi64(hi, C('0'));
	V s02 = _mm256_unpacklo_epi64(lo8, hi1), s13 = _mm256_unpackhi_epi64(lo8, hi1);
	slot[0] = _mm256_castsi256_si128(s02);
	slot[1] = _mm256_castsi256_si128(s13);
	slot[2] = _mm256_extracti128_si256(s02, 1);
	slot[3] = _mm256_extracti128_si256(s13, 1);
	return 1;
}

size_t pe_fmt_f32x8_avx2(const void *values, char *out, const struct pe_f32_vec_tables *tb)
{
	V b = _mm256_loadu_si256((const V *)values);
	V be = _mm256_and_si256(_mm256_srli_epi32(b, 23), C32(0xff));
	V t = _mm256_and_si256(b, C32(0x7fffff));
	V zero = _mm256_setzero_si256();
	/* zero or subnormal, non-finite, or a power of two above the lowest binade */
	V refuse = _mm256_or_si256(_mm256_or_si256(_mm256_cmpeq_epi32(be, zero), _mm256_cmpeq_epi32(be, C32(0xff))),
				   _mm256_andnot_si256(_mm256_cmpeq_epi32(be, C32(1)), _mm256_cmpeq_epi32(t, zero)));
	if (!_mm256_testz_si256(refuse, refuse))
		return 0;
	struct lanes in[2];
	prepare(b, t, tb, in);
	V f[2], exp[2];
	decimals(&in[0], &f[0], &exp[0]);
	decimals(&in[1], &f[1], &exp[1]);
	drop_zeros(f, exp);
	V neg = _mm256_srli_epi32(b, 31);
	uint64_t entries[8];
	__m128i slot[8];
	if (!slots4(f[0], exp[0], _mm256_castsi256_si128(neg), entries, slot) ||
	    !slots4(f[1], exp[1], _mm256_extracti128_si256(neg, 1), entries + 4, slot + 4))
		return 0;
	char *p = out;
	for (int k = 0; k < 8; k++) {
		const struct pe_f32_layout *l = &tb->layout[entries[k]];
		__m128i s = _mm_or_si128(_mm_shuffle_epi8(slot[k], _mm_loadu_si128((const __m128i *)l->shuffle)),
					 _mm_loadu_si128((const __m128i *)l->fixed));
		_mm_storeu_si128((__m128i *)p, s);
		p += l->len;
	}
	return (size_t)(p - out);
}
