/* The float32 list printer's AVX-512 tier: eight numbers at a time, byte for byte what the scalar
 * printer in shortest.c writes (test-exhaustive compares the two on every 2^32 pattern).
 *
 * The decimal is the scalar's Dragonbox (the same paper, the same float32 parameters), one number
 * per 64-bit lane: the 64-bit cache entry (gathered) times a significand shifted by beta, which
 * stays below 2^29, is two 32x32->64 products, and every division is by a constant (multiply and
 * shift, exact over 32-bit values). The rare tie at the interval's left end is decided per lane as
 * the scalar code does. Trailing zeros go in masked steps while any lane still has one. The text
 * is then assembled in a 16-byte slot per number: the decimal's nine digits (right-aligned, with
 * leading zeros) are laid out by one byte shuffle, and the fixed characters ("-", "0.", ".", "e-",
 * the exponent's digits, the ',' after the number) are OR-ed in. Shuffle, fixed characters and
 * length depend only on the sign, the digit count and the decimal exponent; shortest.c derives
 * that table from its own writer (build_layouts), so the layout rules live in one place. Each slot
 * is stored whole and the write pointer advances by its length, so up to 15 bytes past the last
 * number are scratch.
 *
 * A block of eight goes back to the scalar printer (return 0) when a lane is not a normal value
 * with a symmetric interval (zero, subnormal, a power of two, non-finite). Needs AVX-512 F, DQ, CD
 * and BW (pe_isa_active() == PE_ISA_AVX512 guarantees them). */
#include "tensor/internal.h"

#include <immintrin.h>
#include <stdint.h>

#define V __m512i
#define C(x) _mm512_set1_epi64((long long)(x))

/* floor(a / d) for 32-bit a held in 64-bit lanes: a * m >> s (exact for every a < 2^32). */
static inline V div_const(V a, uint32_t m, int s) { return _mm512_srli_epi64(_mm512_mul_epu32(a, C(m)), s); }

/* floor(a * phi / 2^32) for a < 2^32 and a 64-bit phi: bits 32..95 of the 96-bit product. */
static inline V mul_phi_mid(V a, V phi_hi, V phi)
{
	return _mm512_add_epi64(_mm512_mul_epu32(a, phi_hi), _mm512_srli_epi64(_mm512_mul_epu32(a, phi), 32));
}

static inline V low32(V a) { return _mm512_and_si512(a, C(0xffffffffu)); }

/* Eight ASCII digits of lo < 10^8 per lane, the most significant in the lowest byte (the scalar
 * ascii_8digits's bytes): lo splits into two halves below 10^4 at 32-bit offsets, each half into
 * two 16-bit fields below 100, each field into a byte pair, with 16-bit multiplications
 * (w * 5243 >> 19 = w / 100 for w < 10^4, u * 6554 >> 16 = u / 10 for u < 100). */
static inline V ascii8(V lo)
{
	V a = div_const(lo, 3518437209u, 45); /* lo / 10^4 */
	V x = _mm512_or_si512(a, _mm512_slli_epi64(_mm512_sub_epi64(lo, _mm512_mul_epu32(a, C(10000))), 32));
	V h = _mm512_srli_epi16(_mm512_mulhi_epu16(x, _mm512_set1_epi16(5243)), 3);
	V y = _mm512_or_si512(h, _mm512_slli_epi64(_mm512_sub_epi16(x, _mm512_mullo_epi16(h, _mm512_set1_epi16(100))), 16));
	V t = _mm512_mulhi_epu16(y, _mm512_set1_epi16(6554));
	V d = _mm512_or_si512(t, _mm512_slli_epi16(_mm512_sub_epi16(y, _mm512_mullo_epi16(t, _mm512_set1_epi16(10))), 8));
	return _mm512_add_epi64(d, C(0x3030303030303030ull));
}

/* Dragonbox per lane (to_decimal32_dragonbox in shortest.c): f and the exponent of f * 10^exp. */
static inline void decimals(V fc, V e, const struct pe_f32_vec_tables *tb, V *f_out, V *exp_out)
{
	V minus_k = _mm512_sub_epi64(_mm512_srai_epi64(_mm512_mul_epi32(e, C(1262611)), 22), C(1));
	V idx = _mm512_sub_epi64(C(-tb->kmin), minus_k);
	V phi = _mm512_i64gather_epi64(idx, (const void *)tb->phi, 8);
	/* e(k) = floor(k * log2 10), k = -minus_k: floor(k * 1741647 / 2^19), exact for |k| < 1233 */
	V beta = _mm512_add_epi64(e, _mm512_srai_epi64(_mm512_mul_epi32(_mm512_sub_epi64(C(0), minus_k), C(1741647)), 19));
	V phi_hi = _mm512_srli_epi64(phi, 32);
	V two_fc = _mm512_slli_epi64(fc, 1);
	V deltai = low32(_mm512_srlv_epi64(phi, _mm512_sub_epi64(C(63), beta)));
	V zmid = mul_phi_mid(_mm512_sllv_epi64(_mm512_or_si512(two_fc, C(1)), beta), phi_hi, phi);
	V zi = _mm512_srli_epi64(zmid, 32);
	__mmask8 z_integer = _mm512_testn_epi64_mask(zmid, C(0xffffffffu));
	__mmask8 open = _mm512_test_epi64_mask(fc, C(1));
	V sig = div_const(zi, 1374389535u, 37); /* zi / 100 */
	V r = _mm512_sub_epi64(zi, _mm512_mul_epu32(sig, C(100)));
	__mmask8 excluded = _mm512_cmpeq_epi64_mask(r, C(0)) & z_integer & open;
	__mmask8 big = _mm512_cmplt_epu64_mask(r, deltai) & (__mmask8)~excluded;
	__mmask8 tie = _mm512_cmpeq_epi64_mask(r, deltai);
	if (tie) { /* compare the fractional parts at the left end */
		V xmid = mul_phi_mid(_mm512_sllv_epi64(_mm512_sub_epi64(two_fc, C(1)), beta), phi_hi, phi);
		__mmask8 x_integer = _mm512_testn_epi64_mask(xmid, C(0xffffffffu));
		__mmask8 x_odd = _mm512_test_epi64_mask(xmid, C(1ull << 32));
		big = (big & (__mmask8)~tie) | (tie & (x_odd | (x_integer & (__mmask8)~open)));
	}
	/* the small divisor: sig * 10 + the digit nearest to y, ties to even (uint32 arithmetic) */
	V rr = _mm512_mask_mov_epi64(r, excluded, C(100));
	V dist = low32(_mm512_add_epi64(_mm512_sub_epi64(rr, _mm512_srli_epi64(deltai, 1)), C(5)));
	V approx_parity = _mm512_and_si512(_mm512_xor_si512(dist, C(5)), C(1));
	V q = div_const(dist, 3435973837u, 35); /* dist / 10 */
	V sig_x = _mm512_mask_sub_epi64(sig, excluded, sig, C(1));
	V small = low32(_mm512_add_epi64(_mm512_mul_epu32(sig_x, C(10)), q));
	V ymid = mul_phi_mid(_mm512_sllv_epi64(two_fc, beta), phi_hi, phi);
	V y_parity = _mm512_and_si512(_mm512_srli_epi64(ymid, 32), C(1));
	__mmask8 y_integer = _mm512_testn_epi64_mask(ymid, C(0xffffffffu));
	__mmask8 exact_mid = _mm512_cmpeq_epi64_mask(_mm512_mul_epu32(q, C(10)), dist);
	__mmask8 parity_differs = _mm512_cmpneq_epi64_mask(y_parity, approx_parity);
	__mmask8 odd = _mm512_test_epi64_mask(small, C(1));
	small = low32(_mm512_mask_sub_epi64(small, exact_mid & (parity_differs | (y_integer & odd)), small, C(1)));
	*f_out = _mm512_mask_mov_epi64(small, big, sig);
	*exp_out = _mm512_mask_add_epi64(_mm512_add_epi64(minus_k, C(1)), big, _mm512_add_epi64(minus_k, C(1)), C(1));
}

/* Drop one trailing zero from the lanes of f that have one; the mask of those lanes. */
static inline __mmask8 drop_zero(V *f, V *exp)
{
	V q = div_const(*f, 3435973837u, 35);
	__mmask8 z = _mm512_cmpeq_epi64_mask(_mm512_mul_epu32(q, C(10)), *f);
	*f = _mm512_mask_mov_epi64(*f, z, q);
	*exp = _mm512_mask_add_epi64(*exp, z, *exp, C(1));
	return z;
}

/* Drop all trailing zeros from every lane's f (never 0 for a normal value), counting them into
 * exp: one step without a branch (some lane of eight has a zero about half the time), then a loop
 * for the rarer second zeros. */
static inline void drop_zeros(V *f, V *exp)
{
	drop_zero(f, exp);
	while (drop_zero(f, exp))
		;
}

/* The number of decimal digits of every lane's f > 0 (count_digits32 in shortest.c). */
static inline V digit_count(V f)
{
	static const uint64_t pow10[16] = {1u, 10u, 100u, 1000u, 10000u, 100000u, 1000000u, 10000000u,
					   100000000u, 1000000000u};
	V bits = _mm512_sub_epi64(C(64), _mm512_lzcnt_epi64(f));
	V t = _mm512_srli_epi64(_mm512_mul_epu32(bits, C(1233)), 12);
	V p = _mm512_permutex2var_epi64(_mm512_loadu_si512(pow10), t, _mm512_loadu_si512(pow10 + 8));
	return _mm512_mask_add_epi64(t, _mm512_cmpge_epu64_mask(f, p), t, C(1));
}

size_t pe_fmt_f32x8_avx512(const void *values, char *out, const struct pe_f32_vec_tables *tb)
{
	V b = _mm512_cvtepu32_epi64(_mm256_loadu_si256((const __m256i *)values));
	V be = _mm512_and_si512(_mm512_srli_epi64(b, 23), C(0xff));
	V t = _mm512_and_si512(b, C(0x7fffff));
	__mmask8 normal = _mm512_cmpneq_epi64_mask(be, C(0)) & _mm512_cmpneq_epi64_mask(be, C(0xff));
	__mmask8 symmetric = _mm512_test_epi64_mask(t, t) | _mm512_cmpeq_epi64_mask(be, C(1));
	if ((__mmask8)(normal & symmetric) != 0xff)
		return 0;
	V f, exp;
	decimals(_mm512_or_si512(t, C(1u << 23)), _mm512_sub_epi64(be, C(150)), tb, &f, &exp);
	drop_zeros(&f, &exp);
	V n = digit_count(f);
	V x = _mm512_add_epi64(exp, _mm512_sub_epi64(n, C(1))); /* the scientific exponent */
	if (_mm512_cmplt_epi64_mask(x, C(PE_F32_X_MIN)) | _mm512_cmpgt_epi64_mask(x, C(PE_F32_X_MAX)))
		return 0;
	/* the layout entry: (sign, digit count, exponent) */
	V neg = _mm512_srli_epi64(b, 31);
	V entry = _mm512_add_epi64(
		_mm512_mul_epu32(_mm512_add_epi64(_mm512_mul_epu32(neg, C(9)), _mm512_sub_epi64(n, C(1))),
				 C(PE_F32_X_MAX - PE_F32_X_MIN + 1)),
		_mm512_sub_epi64(x, C(PE_F32_X_MIN)));
	/* nine digits: the first alone, the other eight as ASCII; slot k = [eight, first, 0...] */
	V hi = div_const(f, 1441151881u, 57); /* f / 10^8 */
	V lo8 = ascii8(_mm512_sub_epi64(f, _mm512_mul_epu32(hi, C(100000000))));
	V hi1 = _mm512_add_epi64(hi, C('0'));
	uint64_t slots[16], entries[8];
	_mm512_storeu_si512(slots, _mm512_permutex2var_epi64(lo8, _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0), hi1));
	_mm512_storeu_si512(slots + 8, _mm512_permutex2var_epi64(lo8, _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4), hi1));
	_mm512_storeu_si512(entries, entry);
	char *p = out;
	for (int k = 0; k < 8; k++) {
		const struct pe_f32_layout *l = &tb->layout[entries[k]];
		__m128i s = _mm_loadu_si128((const __m128i *)(slots + 2 * k));
		s = _mm_or_si128(_mm_shuffle_epi8(s, _mm_loadu_si128((const __m128i *)l->shuffle)),
				 _mm_loadu_si128((const __m128i *)l->fixed));
		_mm_storeu_si128((__m128i *)p, s);
		p += l->len;
	}
	return (size_t)(p - out);
}
