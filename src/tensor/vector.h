/* Internal: a vector of numbers from a request body (vector.c), for endpoints whose body is a
 * list of values rather than a tensor to transform (POST /v1/sinusoidal/timestep). */
#ifndef PE_TENSOR_VECTOR_H
#define PE_TENSOR_VECTOR_H

#include <stddef.h>
#include <stdint.h>

#include "posenc/err.h"

/* The body as n >= 1 doubles into *out (caller frees; NULL on failure): json = 0, an npy vector
 * [N] of float64/32/16, bfloat16 has no npy dtype, int32 or int64 (NumPy's defaults); json = 1, a
 * JSON array of numbers (pe_json_tensor_parse's forms, rank 1). N at most max_elements (PE_ETOOBIG
 * naming "body", checked before the doubles are allocated); other faults PE_EBODY naming "body"
 * with what is wrong (`what` names the values in details: "timesteps"). */
int pe_vector_parse(const void *data, size_t len, int json, uint64_t max_elements, const char *what, double **out,
		    size_t *n, struct pe_err *err);

#endif
