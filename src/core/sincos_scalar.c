/* Scalar sin/cos kernels: glibc's sincos (correctly rounded in almost all cases, < 1 ulp). */
#include "core/kernels.h"

#include <math.h>

void pe_sincos_f64_scalar(const double *x, double *s, double *c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sincos(x[i], &s[i], &c[i]);
}
