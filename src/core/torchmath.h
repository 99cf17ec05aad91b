/* Float32 functions with PyTorch's CPU results (see torchmath.c). Thread-safe. */
#ifndef PE_CORE_TORCHMATH_H
#define PE_CORE_TORCHMATH_H

#include <stddef.h>

float pe_torch_expf(float x);
/* PyTorch's float32 torch.log, every element alike (its unary kernel is SLEEF's logf u10 throughout). */
float pe_torch_logf(float x);
/* Element i of n of PyTorch's float32 `base ** x` (a scalar base, a tensor of exponents). */
float pe_torch_powf(float base, float x, size_t i, size_t n);

#endif
