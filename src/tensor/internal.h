/* Internal to src/tensor: helpers shared by several format writers. */
#ifndef PE_TENSOR_INTERNAL_H
#define PE_TENSOR_INTERNAL_H

#include "posenc/tensor.h"

/* Index of the first NaN or infinity of t's first count elements, or count if there is none. */
size_t pe_first_nonfinite(const struct pe_tensor_view *t, size_t count);

#endif
