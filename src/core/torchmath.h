/* Float32 functions with PyTorch's CPU results (see torchmath.c). Thread-safe. */
#ifndef PE_CORE_TORCHMATH_H
#define PE_CORE_TORCHMATH_H

#include <stddef.h>

float pe_torch_expf(float x);
/* PyTorch's float32 torch.log, every element alike (its unary kernel is SLEEF's logf u10 throughout). */
float pe_torch_logf(float x);
/* Element i of n of PyTorch's float32 `base ** x` (a scalar base, a tensor of exponents). */
float pe_torch_powf(float base, float x, size_t i, size_t n);

/* sin and cos of 8 float32 lanes as PyTorch's CPU kernels compute one vector of a contiguous
 * tensor (torch.cos / torch.sin): SLEEF's 8-lane u10 functions on AVX2 CPUs (bit for bit), else
 * lane by lane (within 1 ulp). Lanes past a tensor's end are zeros, as PyTorch's partial load. */
void pe_torch_sincosf8(const float x[8], float s[8], float c[8]);
void pe_torch_sincosf8_avx2(const float x[8], float s[8], float c[8]);
/* sin and cos of n float32 angles (t holds floats; n a multiple of 8) as PyTorch computes a
 * contiguous tensor whose groups of 8 start at t[0] (pe_torch_sincosf8 per group). */
void pe_torch_sincosf(const double *t, double *s, double *c, size_t n);
/* sin and cos of n float32 angles (t holds floats) by libm's sincosf, one element at a time: what
 * std::sin / std::cos of a float give (torch.polar's complex exponential) and what llama.cpp's
 * rope_yarn takes (sinf, cosf). Bit for bit on the same libm. */
void pe_libm_sincosf(const double *t, double *s, double *c, size_t n);

#endif
