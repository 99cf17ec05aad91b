/* Float32 functions with PyTorch's CPU results (see torchmath.c). Thread-safe. */
#ifndef PE_CORE_TORCHMATH_H
#define PE_CORE_TORCHMATH_H

float pe_torch_expf(float x);

#endif
