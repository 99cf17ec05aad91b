/* posenc element types, shapes and rounding into the output dtype.
 *
 * The core computes each value either in double (compat=exact) or in float (compat=hf/ggml) and
 * rounds it once into the requested dtype with these helpers (round to nearest, ties to even,
 * straight from the source precision: no double rounding through float). All functions are pure
 * and thread-safe. */
#ifndef POSENC_DTYPE_H
#define POSENC_DTYPE_H

#include <stddef.h>
#include <stdint.h>

enum pe_dtype { PE_F32, PE_F64, PE_F16, PE_BF16, PE_I32, PE_DTYPE_COUNT_ };

#define PE_MAX_RANK 8

struct pe_shape {
	int rank;
	size_t dim[PE_MAX_RANK];
};

/* A tensor the caller may write: the working form of transforms. */
struct pe_tensor_mut {
	struct pe_shape shape;
	enum pe_dtype dtype;
	void *data;
};

size_t pe_dtype_size(enum pe_dtype dt);
const char *pe_dtype_name(enum pe_dtype dt); /* "f32", "f64", "f16", "bf16", "i32" */
int pe_dtype_parse(const char *s, enum pe_dtype *out); /* 0 or PE_EINVAL */
int pe_dtype_is_float(enum pe_dtype dt);

/* Element count, or 0 with *overflow set when the product does not fit in size_t. */
size_t pe_shape_count(const struct pe_shape *s, int *overflow);
/* "512,768" into buf; returns the length written (truncated safely). */
size_t pe_shape_format(const struct pe_shape *s, char *buf, size_t cap);

/* Scalar conversions, round to nearest even. */
uint16_t pe_f64_to_f16(double x);
uint16_t pe_f64_to_bf16(double x);
uint16_t pe_f32_to_f16(float x);
uint16_t pe_f32_to_bf16(float x);
float pe_f16_to_f32(uint16_t h);
float pe_bf16_to_f32(uint16_t h);
float pe_f64_to_f32(double x); /* plain (float)x, named for symmetry */

/* Store n values into dst (of dtype dt) at element index 0, rounding once.
 * PE_I32 is not a float destination: the integer tables write their own output. */
void pe_store_f64(enum pe_dtype dt, void *dst, const double *src, size_t n);
void pe_store_f32(enum pe_dtype dt, void *dst, const float *src, size_t n);

/* Lowest finite value of a float dtype (torch.finfo(dtype).min), as double. */
double pe_dtype_lowest(enum pe_dtype dt);

#endif
