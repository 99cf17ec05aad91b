/* Internal kernel table of the core: each operation has a scalar and an AVX2 twin with the same
 * contract; pe_kernels() returns the table for the active ISA (see isa.c). Tables (sinusoidal.c,
 * rope.c, ...) call only through it. */
#ifndef PE_CORE_KERNELS_H
#define PE_CORE_KERNELS_H

#include <stddef.h>

struct pe_kernel_table {
	/* s[i] = sin(x[i]), c[i] = cos(x[i]) in double, each within 1 ulp (x finite). */
	void (*sincos_f64)(const double *x, double *s, double *c, size_t n);
};

const struct pe_kernel_table *pe_kernels(void);

void pe_sincos_f64_scalar(const double *x, double *s, double *c, size_t n);
void pe_sincos_f64_avx2(const double *x, double *s, double *c, size_t n);

#endif
