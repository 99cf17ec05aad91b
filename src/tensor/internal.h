/* Internal to src/tensor: helpers shared by several format writers. */
#ifndef PE_TENSOR_INTERNAL_H
#define PE_TENSOR_INTERNAL_H

#include "posenc/tensor.h"

/* pe_first_nonfinite is public (tensor.h). */

/* The widest shortest form of one element of dt plus a separator ("-1.17549435e-38," for f32). */
size_t pe_fmt_width(enum pe_dtype dt);

/* Elements start .. start+n-1 of t, shortest for the dtype, separated by commas, at buf; returns
 * the bytes written. buf needs n * pe_fmt_width(dtype) + PE_NUM_MAX bytes (the printers store
 * digits in wide words past each number). */
size_t pe_fmt_list(const struct pe_tensor_view *t, size_t start, size_t n, char *buf);

#endif
