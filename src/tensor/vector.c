/* A vector of numbers from an npy or JSON body (vector.h): the tensor parsers do the format, this
 * checks the rank and widens each element to double (int64 exactly up to 2^53, as NumPy's
 * float64 conversion rounds beyond). */
#include "tensor/vector.h"
#include "posenc/tensor.h"

#include <stdlib.h>
#include <string.h>

/* Element i of an npy view as a double; wide: '<i8' data (the view says PE_I32). */
static double element(const struct pe_tensor_view *v, int wide, size_t i)
{
	const char *p = (const char *)v->data;
	union {
		int64_t i8;
		int32_t i4;
		double f8;
		float f4;
		uint16_t h;
	} u;
	if (v->dtype == PE_I32 && wide)
		return memcpy(&u.i8, p + 8 * i, 8), (double)u.i8;
	switch (v->dtype) {
	case PE_I32:
		return memcpy(&u.i4, p + 4 * i, 4), (double)u.i4;
	case PE_F64:
		return memcpy(&u.f8, p + 8 * i, 8), u.f8;
	case PE_F32:
		return memcpy(&u.f4, p + 4 * i, 4), (double)u.f4;
	case PE_F16:
		return memcpy(&u.h, p + 2 * i, 2), (double)pe_f16_to_f32(u.h);
	default:
		return memcpy(&u.h, p + 2 * i, 2), (double)pe_bf16_to_f32(u.h);
	}
}

static int not_a_vector(double **out, const char *what, struct pe_err *err)
{
	free(*out);
	*out = NULL;
	return pe_err_set(err, PE_EBODY, "body", "%s are a vector [N] with N >= 1", what);
}

int pe_vector_parse(const void *data, size_t len, int json, uint64_t max_elements, const char *what, double **out,
		    size_t *n, struct pe_err *err)
{
	struct pe_tensor_view v;
	struct pe_tensor_mut m = {0};
	int wide = 0, rc;
	*out = NULL;
	*n = 0;
	size_t max = max_elements > SIZE_MAX / 8 ? SIZE_MAX / 8 : (size_t)max_elements;
	if (json) {
		if ((rc = pe_json_tensor_parse(data, len, max, &m, err)) != 0)
			return rc;
		*out = m.data;
		if (m.shape.rank != 1 || m.shape.dim[0] == 0)
			return not_a_vector(out, what, err);
		*n = m.shape.dim[0];
		return 0;
	}
	if ((rc = pe_npy_parse_index(data, len, max, &v, &wide, err)) != 0)
		return rc;
	if (v.shape.rank != 1 || v.shape.dim[0] == 0)
		return not_a_vector(out, what, err);
	if (!(*out = malloc(v.shape.dim[0] * sizeof **out)))
		return pe_err_set(err, PE_ENOMEM, "", "out of memory");
	*n = v.shape.dim[0];
	for (size_t i = 0; i < *n; i++)
		(*out)[i] = element(&v, wide, i);
	return 0;
}
