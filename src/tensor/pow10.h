/* Internal to src/tensor: the power-of-ten tables of the shortest printer (pow10.c builds them,
 * shortest.c and the vector tiers read them).
 *
 * pe_pow10_mult[p - PE_POW10_P_MIN] is Schubfach's multiplier g(p) ~ 10^p * 2^-r in
 * [2^125, 2^126) for every p a double needs; pe_pow10_phi32 and pe_pow10_ek32 are Dragonbox's
 * float32 cache phi(k) = ceil(10^k * 2^(63 - e(k))) and e(k) = floor(log2 10^k). They are
 * computed once, on first use, by whichever thread gets there first (pe_pow10_ready), and are
 * read-only from then on: any thread may read them after pe_pow10_ready() returns. */
#ifndef PE_TENSOR_POW10_H
#define PE_TENSOR_POW10_H

#include <stdatomic.h>
#include <stdint.h>

#define PE_POW10_P_MIN (-292) /* k = floor(log10(2^971)) for the largest double exponent */
#define PE_POW10_P_MAX 324    /* -k for the smallest subnormal double, q = -1074 */
#define PE_POW10_K32_MIN (-31) /* the k a normal float32 needs */
#define PE_POW10_K32_MAX 46

struct pe_pow10_mult {
	uint64_t hi, lo; /* g = hi * 2^63 + lo, both < 2^63 */
	int e2;          /* floor(log2(10^p)) */
};

extern struct pe_pow10_mult pe_pow10_mult[PE_POW10_P_MAX - PE_POW10_P_MIN + 1];
extern uint64_t pe_pow10_phi32[PE_POW10_K32_MAX - PE_POW10_K32_MIN + 1];
extern int pe_pow10_ek32[PE_POW10_K32_MAX - PE_POW10_K32_MIN + 1];

extern atomic_int pe_pow10_built;
void pe_pow10_build(void); /* once per process, whoever calls it first (pthread_once) */

/* The tables are there: one atomic load once they are (the printers call it per number). */
static inline void pe_pow10_ready(void)
{
	if (!atomic_load_explicit(&pe_pow10_built, memory_order_acquire))
		pe_pow10_build();
}

#endif
