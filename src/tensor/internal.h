/* Internal to src/tensor: helpers shared by several format writers. */
#ifndef PE_TENSOR_INTERNAL_H
#define PE_TENSOR_INTERNAL_H

#include "posenc/tensor.h"

#include <stddef.h>
#include <stdint.h>

/* pe_first_nonfinite is public (tensor.h). */

/* Saturating size arithmetic for the writers' bounds. */
static inline size_t pe_sat_add(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }
static inline size_t pe_sat_mul(size_t a, size_t b) { return b && a > SIZE_MAX / b ? SIZE_MAX : a * b; }

/* The elements of s, saturated at SIZE_MAX (a count that overflows is as big as any). */
static inline size_t pe_shape_count_sat(const struct pe_shape *s)
{
	int overflow;
	size_t n = pe_shape_count(s, &overflow);
	return overflow ? SIZE_MAX : n;
}

/* Elements start .. start+n-1 of t, shortest for the dtype, separated by commas, at buf; returns
 * the bytes written. buf needs n * pe_fmt_width(dtype) + PE_NUM_MAX bytes (the printers store
 * digits in wide words past each number). */
size_t pe_fmt_list(const struct pe_tensor_view *t, size_t start, size_t n, char *buf);

/* The table document up to and including "data": (json.c's head, for rows.c's streamed
 * documents; t->data is not read). 0, PE_EINTERNAL (a non-finite extra value) or a buffer error. */
int pe_json_write_head(struct pe_buf *b, const struct pe_params *p, const struct pe_tensor_view *t);

/* The float32 list printer's AVX-512 and AVX2 tiers (shortest_avx512.c, shortest_avx2.c), fed by
 * shortest.c. A layout says
 * how one number's text is laid out from its sign, digit count n and scientific exponent x: byte i
 * of the text is digit shuffle[i] of a 16-byte slot holding the decimal's nine digits (digits 2-9
 * of the zero-padded nine in bytes 0-7, the first in byte 8), OR-ed with fixed[i] (shuffle 0x80
 * gives 0); len counts the text and the ',' after it. Entry (neg * 9 + n - 1) * 77 + x + 38. */
#define PE_F32_X_MIN (-38)
#define PE_F32_X_MAX 38
struct pe_f32_layout {
	uint8_t shuffle[16], fixed[16];
	uint8_t len;
};
struct pe_f32_vec_tables {
	const uint64_t *phi; /* Dragonbox's float32 cache entry for k at [k - kmin] */
	int kmin;
	const struct pe_f32_layout *layout;
};
/* Eight float32 values (bit patterns at values) as "a,b,...,h," at out; returns the bytes written,
 * or 0 (nothing meaningful written) when the block needs the scalar printer. out needs 8 * 16
 * bytes. Only when pe_isa_active() is PE_ISA_AVX512. */
size_t pe_fmt_f32x8_avx512(const void *values, char *out, const struct pe_f32_vec_tables *tb);
/* The same on AVX2; only when pe_isa_active() is PE_ISA_AVX2 (or AVX-512, which includes it). */
size_t pe_fmt_f32x8_avx2(const void *values, char *out, const struct pe_f32_vec_tables *tb);

#endif
