/* bin: the raw elements of a view, little-endian, C order, no header (the shape travels in
 * X-PE-Shape). A view already holds exactly those bytes, so this is one bounded copy; posenc only
 * builds for little-endian hosts, which the check below makes a compile error elsewhere. */
#include "posenc/tensor.h"
#include "tensor/internal.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "posenc assumes a little-endian host"
#endif

int pe_bin_write(struct pe_buf *b, const struct pe_tensor_view *t)
{
	int overflow;
	size_t n = pe_shape_count(&t->shape, &overflow), size = pe_dtype_size(t->dtype);
	if (overflow || size == 0)
		return PE_EINVAL;
	if (n > SIZE_MAX / size)
		return PE_ETOOBIG;
	return pe_buf_append(b, t->data, n * size);
}

size_t pe_bin_bound(const struct pe_shape *s, enum pe_dtype dt)
{
	size_t size = pe_dtype_size(dt);
	return size ? pe_sat_mul(pe_shape_count_sat(s), size) : SIZE_MAX;
}
