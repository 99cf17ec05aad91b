/* Internal to src/tensor: helpers shared by several format writers. */
#ifndef PE_TENSOR_INTERNAL_H
#define PE_TENSOR_INTERNAL_H

#include "posenc/tensor.h"

/* pe_first_nonfinite is public (tensor.h). */

#endif
