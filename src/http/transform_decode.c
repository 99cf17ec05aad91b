/* Decoding for the transform handler, on the worker (see transform.h): the body in its format
 * (npy, raw with shape=, JSON) as a tensor, the positions part, and the conversions into the
 * working dtype and back. */
#include "http/transform.h"
#include "http/produce.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- decoding (worker) ---- */

/* The body as a tensor; *owned is set when t->data was allocated (JSON), else it points into the
 * body buffer. */
int pe_tjob_decode(struct tjob *j, struct pe_tensor_mut *t, int *owned, struct pe_err *err)
{
	size_t max = j->os.h->opt.max_elements;
	*owned = 0;
	if (j->kind == BODY_JSON) {
		*owned = 1;
		return pe_json_tensor_parse(j->body.data, j->body.len, max, t, err);
	}
	if (j->kind == BODY_NPY) {
		struct pe_tensor_view v;
		int rc = pe_npy_parse(j->body.data, j->body.len, max, &v, err);
		if (rc != 0)
			return rc;
		*t = (struct pe_tensor_mut){.shape = v.shape, .dtype = v.dtype, .data = (void *)v.data};
		if ((uintptr_t)t->data % pe_dtype_size(t->dtype) != 0) { /* odd hand-made header */
			int of;
			memmove(j->body.data, t->data, pe_shape_count(&t->shape, &of) * pe_dtype_size(t->dtype));
			t->data = j->body.data; /* the buffer start is malloc-aligned */
		}
	} else {
		if (!j->has_shape)
			return pe_err_set(err, PE_EINVAL, "shape", "an application/octet-stream body needs shape=");
		t->dtype = PE_F32;
		if (j->dtype && (pe_dtype_parse(j->dtype, &t->dtype) != 0 || t->dtype == PE_I32))
			return pe_err_set(err, PE_EINVAL, "dtype", "dtype must be one of: f32, f64, f16, bf16");
		int overflow;
		t->shape = j->raw_shape;
		size_t n = pe_shape_count(&t->shape, &overflow);
		if (overflow || n > max)
			return pe_err_set(err, PE_ETOOBIG, "shape", "the tensor has more than %zu elements", max);
		if (n * pe_dtype_size(t->dtype) != j->body.len)
			return pe_err_set(err, PE_EBODY, "body", "shape and dtype say %zu bytes but the body has %zu",
					  n * pe_dtype_size(t->dtype), j->body.len);
		t->data = j->body.data;
	}
	if (t->dtype == PE_I32)
		return pe_err_set(err, PE_EBODY, "body", "transforms take float tensors (f32, f64, f16, bf16)");
	return 0;
}

/* The positions part: an npy int32/int64 tensor (with axes_dim, axial ids: any float dtype too),
 * aligned for its elements, errors naming it. */
int pe_tjob_decode_positions(struct tjob *j, struct pe_positions *pos, struct pe_err *err)
{
	struct pe_tensor_view v;
	int axial = pe_param_index(j->params.def, "axes_dim") >= 0 && pe_param_isset(&j->params, "axes_dim");
	int wide = 0, rc = pe_npy_parse_index(j->pos.data, j->pos.len, j->os.h->opt.max_elements, &v, &wide, err);
	if (rc == 0 && v.dtype != PE_I32 && !axial)
		rc = pe_err_set(err, PE_EBODY, "positions", "positions must be integers: an npy '<i4' or '<i8' array, "
				"not %s", pe_dtype_name(v.dtype));
	if (rc != 0) {
		snprintf(err->param, sizeof err->param, "positions");
		return rc;
	}
	size_t esz = wide ? 8 : pe_dtype_size(v.dtype);
	int of;
	if ((uintptr_t)v.data % esz != 0) { /* odd hand-made header */
		memmove(j->pos.data, v.data, pe_shape_count(&v.shape, &of) * esz);
		v.data = j->pos.data;
	}
	*pos = (struct pe_positions){.shape = v.shape, .wide = wide, .data = v.data, .dtype = v.dtype};
	return 0;
}

/* Element i of t as double (any float dtype). */
static double elem(const struct pe_tensor_mut *t, size_t i)
{
	switch (t->dtype) {
	case PE_F64:
		return ((const double *)t->data)[i];
	case PE_F16:
		return pe_f16_to_f32(((const uint16_t *)t->data)[i]);
	case PE_BF16:
		return pe_bf16_to_f32(((const uint16_t *)t->data)[i]);
	default:
		return ((const float *)t->data)[i];
	}
}

/* t in the working dtype wd: t itself when it already is (in place), else a converted copy. */
int pe_tjob_to_work(const struct pe_tensor_mut *t, enum pe_dtype wd, size_t n, struct pe_tensor_mut *x,
		   void **alloc, struct pe_budget *bg, struct pe_err *err)
{
	*x = *t;
	*alloc = NULL;
	if (t->dtype == wd)
		return 0;
	int rc;
	void *buf = pe_budget_malloc(bg, (n ? n : 1) * pe_dtype_size(wd), &rc);
	if (!buf)
		return pe_err_set(err, rc, "body", "out of memory");
	for (size_t i = 0; i < n; i++) {
		double v = elem(t, i);
		if (wd == PE_F64)
			((double *)buf)[i] = v;
		else
			((float *)buf)[i] = (float)v; /* f16/bf16 widen exactly; f64 (JSON) rounds once */
	}
	x->dtype = wd;
	x->data = *alloc = buf;
	return 0;
}

/* Round the working result into the output dtype in place (narrower or equal) or into a new buffer. */
int pe_tjob_to_output(struct pe_tensor_mut *y, enum pe_dtype dt, size_t n, void **alloc, struct pe_budget *bg,
		     struct pe_err *err)
{
	*alloc = NULL;
	if (y->dtype == dt)
		return 0;
	void *dst = y->data;
	if (pe_dtype_size(dt) > pe_dtype_size(y->dtype)) {
		int rc;
		dst = *alloc = pe_budget_malloc(bg, (n ? n : 1) * pe_dtype_size(dt), &rc);
		if (!dst)
			return pe_err_set(err, rc, "", "out of memory");
	}
	/* front to back is safe in place: element i is written at or before where it was read */
	if (y->dtype == PE_F64)
		pe_store_f64(dt, dst, y->data, n);
	else if (dt == PE_F64)
		pe_store_f32(dt, dst, y->data, n);
	else
		for (size_t i = 0; i < n; i++) {
			float v = ((float *)y->data)[i];
			pe_store_f32(dt, (char *)dst + i * pe_dtype_size(dt), &v, 1);
		}
	y->data = dst;
	y->dtype = dt;
	return 0;
}
