/* Internal: inverse frequencies of the form 1/base^(num/den) and sin/cos of position * frequency,
 * in the two arithmetics the tables offer. Shared by sinusoidal2d.c, rope2d.c and relative.c (XL),
 * whose references all build their frequencies as `1 / base ** (arange(0, n, step) / den)`.
 *
 *   exact  double: w_k = 1.0 / pow(base, (double)(step*k) / den), angle = pos * w_k, sin/cos within
 *          1 ulp (the kernel table), exactly the operations of a float64 NumPy reference.
 *   hf     PyTorch float32: w_k = 1.0f / powf((float)base, (float)(step*k) / (float)den) with powf
 *          as PyTorch's AVX2 kernels compute it (SLEEF for blocks of 16, glibc for the tail: the two
 *          differ in the last bit for about one exponent in sixty), angle = (float)pos * w_k rounded
 *          to float, sin/cos of that float angle rounded to float (within 1 ulp of torch's). */
#ifndef PE_CORE_ANGLES_H
#define PE_CORE_ANGLES_H

#include <stddef.h>

/* w[k] for k < n as above; hf = 1 gives the float32 value (held exactly in the double). */
void pe_inv_freq_pow(double base, size_t n, unsigned step, double den, int hf, double *w);

/* s[k] = sin(pos * w[k]), c[k] = cos(pos * w[k]) for k < n, ang is n doubles of scratch.
 * hf = 1: the angle is a float product and s, c are rounded to float. */
void pe_sincos_at(double pos, const double *w, size_t n, int hf, double *ang, double *s, double *c);

#endif
