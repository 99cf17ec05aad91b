/* The power-of-ten tables of the shortest printer (contract in tensor/pow10.h), computed on first
 * use with a small exact bignum rather than shipped as 600 lines of constants: Schubfach's
 * g(p) = floor(10^p * 2^-r) + 1 scaled into [2^125, 2^126), from 10^p built by exact
 * multiplication (p >= 0) and floor(2^1152 / 10^-p) by exact repeated division (p < 0); Dragonbox's
 * float32 cache is the ceiling of the same numbers' top 64 bits. Building them takes well under a
 * millisecond, once per process. */
#include "tensor/pow10.h"

#include <pthread.h>
#include <string.h>

typedef unsigned __int128 u128;

#define M63 ((1ull << 63) - 1)
#define P_MIN PE_POW10_P_MIN
#define K32_MIN PE_POW10_K32_MIN
#define K32_MAX PE_POW10_K32_MAX

struct pe_pow10_mult pe_pow10_mult[PE_POW10_P_MAX - PE_POW10_P_MIN + 1];
uint64_t pe_pow10_phi32[PE_POW10_K32_MAX - PE_POW10_K32_MIN + 1];
int pe_pow10_ek32[PE_POW10_K32_MAX - PE_POW10_K32_MIN + 1];
atomic_int pe_pow10_built;
static pthread_once_t build_once = PTHREAD_ONCE_INIT;

#define BIG_LIMBS 40 /* 1280 bits: 10^324 < 2^1077, and 2^1152 */

static int big_bitlen(const uint32_t *a)
{
	for (int i = BIG_LIMBS - 1; i >= 0; i--)
		if (a[i])
			return 32 * i + 32 - __builtin_clz(a[i]);
	return 0;
}

static void big_mul10(uint32_t *a)
{
	uint64_t carry = 0;
	for (int i = 0; i < BIG_LIMBS; i++) {
		uint64_t t = (uint64_t)a[i] * 10 + carry;
		a[i] = (uint32_t)t;
		carry = t >> 32;
	}
}

static void big_div10(uint32_t *a)
{
	uint64_t rem = 0;
	for (int i = BIG_LIMBS - 1; i >= 0; i--) {
		uint64_t t = rem << 32 | a[i];
		a[i] = (uint32_t)(t / 10);
		rem = t % 10;
	}
}

/* floor(a / 2^shift) for a result below 2^126; shift may be negative (then a is shifted up). */
static u128 big_bits(const uint32_t *a, int shift)
{
	u128 r = 0;
	for (int i = 125; i >= 0; i--) {
		int j = shift + i;
		int bit = j >= 0 && j < 32 * BIG_LIMBS ? (int)(a[j / 32] >> (j % 32) & 1) : 0;
		r = r << 1 | (u128)bit;
	}
	return r;
}

/* Whether a has a 1 bit below bit `below`. */
static int big_any_below(const uint32_t *a, int below)
{
	for (int j = 0; j < below && j < 32 * BIG_LIMBS; j++)
		if (a[j / 32] >> (j % 32) & 1)
			return 1;
	return 0;
}

/* x is 10^p * 2^scale, exactly or (p < 0) rounded down; both keep floor() exact. */
static void set_mult(int p, const uint32_t *x, int scale)
{
	int len = big_bitlen(x);
	u128 g = big_bits(x, len - 126) + 1;
	pe_pow10_mult[p - P_MIN] = (struct pe_pow10_mult){(uint64_t)(g >> 63), (uint64_t)g & M63, len - 1 - scale};
	if (p >= K32_MIN && p <= K32_MAX) { /* ceil of the top 64 bits: +1 unless exact (p < 0 never is) */
		uint64_t top = (uint64_t)big_bits(x, len - 64);
		top += p < 0 || big_any_below(x, len - 64);
		pe_pow10_phi32[p - K32_MIN] = top;
		pe_pow10_ek32[p - K32_MIN] = len - 1 - scale;
	}
}

static void build_tables(void)
{
	uint32_t x[BIG_LIMBS] = {1};
	for (int p = 0; p <= PE_POW10_P_MAX; p++) {
		set_mult(p, x, 0);
		big_mul10(x);
	}
	memset(x, 0, sizeof x);
	x[1152 / 32] = 1;
	for (int p = -1; p >= P_MIN; p--) {
		big_div10(x); /* floor(floor(a / 10^n) / 10) = floor(a / 10^(n+1)) */
		set_mult(p, x, 1152);
	}
	atomic_store_explicit(&pe_pow10_built, 1, memory_order_release);
}

void pe_pow10_build(void) { pthread_once(&build_once, build_tables); }
