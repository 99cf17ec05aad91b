/* multipart/form-data bodies for the rope/apply tests with per-token positions
 * (test_apply_positions.c, test_apply_positions_kat.c), built byte for byte as curl -F builds
 * them, npy files of int32 / int64 positions and of floats. Header-only (static). */
#ifndef PE_TEST_APPLY_POSITIONS_FORM_H
#define PE_TEST_APPLY_POSITIONS_FORM_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc/posenc.h"

#define FORM_BOUNDARY "------------------------pe7f3a9c2d41"

struct form_part {
	const char *name;
	const char *type; /* NULL: no Content-Type line */
	const void *data;
	size_t len;
};

/* The body of parts (curl's layout: a filename and a type per file part); caller frees. */
static inline char *form_body(const struct form_part *parts, size_t n, size_t *len)
{
	size_t cap = 256;
	for (size_t i = 0; i < n; i++)
		cap += parts[i].len + 256;
	char *b = malloc(cap);
	size_t at = 0;
	for (size_t i = 0; i < n; i++) {
		at += (size_t)snprintf(b + at, cap - at, "--%s\r\nContent-Disposition: form-data; name=\"%s\"; "
				       "filename=\"%s.npy\"\r\n", FORM_BOUNDARY, parts[i].name, parts[i].name);
		if (parts[i].type)
			at += (size_t)snprintf(b + at, cap - at, "Content-Type: %s\r\n", parts[i].type);
		at += (size_t)snprintf(b + at, cap - at, "\r\n");
		memcpy(b + at, parts[i].data, parts[i].len);
		at += parts[i].len;
		at += (size_t)snprintf(b + at, cap - at, "\r\n");
	}
	at += (size_t)snprintf(b + at, cap - at, "--%s--\r\n", FORM_BOUNDARY);
	*len = at;
	return b;
}

static const char *const form_headers[] = {"Content-Type: multipart/form-data; boundary=" FORM_BOUNDARY, NULL};

/* An npy file of integers (int64 when wide, else int32) of this shape; caller frees. */
static inline char *npy_ints(const int64_t *v, const size_t *shape, int rank, int wide, size_t *len)
{
	char dict[256], dims[160] = "";
	size_t n = 1, at = 0;
	for (int i = 0; i < rank; i++) {
		at += (size_t)snprintf(dims + at, sizeof dims - at, "%zu%s", shape[i], rank == 1 ? "," : i + 1 < rank ? ", " : "");
		n *= shape[i];
	}
	int dl = snprintf(dict, sizeof dict, "{'descr': '<i%d', 'fortran_order': False, 'shape': (%s), }", wide ? 8 : 4, dims);
	size_t hlen = ((size_t)10 + (size_t)dl + 1 + 63) / 64 * 64, esz = wide ? 8 : 4;
	char *b = malloc(hlen + n * esz);
	memcpy(b, "\x93NUMPY\x01\x00", 8);
	b[8] = (char)((hlen - 10) & 0xff);
	b[9] = (char)((hlen - 10) >> 8);
	memset(b + 10, ' ', hlen - 10);
	memcpy(b + 10, dict, (size_t)dl);
	b[hlen - 1] = '\n';
	for (size_t i = 0; i < n; i++) {
		if (wide)
			memcpy(b + hlen + i * 8, &v[i], 8);
		else {
			int32_t x = (int32_t)v[i];
			memcpy(b + hlen + i * 4, &x, 4);
		}
	}
	*len = hlen + n * esz;
	return b;
}

/* An npy file of floats (f32 or f64) of this shape, element i being 0.25 * (i % 7); caller frees. */
static inline char *npy_reals(enum pe_dtype dt, const size_t *shape, int rank, size_t *len)
{
	struct pe_tensor_view v = {.dtype = dt};
	size_t n = 1;
	v.shape.rank = rank;
	for (int i = 0; i < rank; i++)
		n *= v.shape.dim[i] = shape[i];
	char *x = calloc(n ? n : 1, 8);
	for (size_t i = 0; i < n; i++) {
		double d = 0.25 * (double)(i % 7);
		float f = (float)d;
		memcpy(x + i * pe_dtype_size(dt), dt == PE_F64 ? (const void *)&d : (const void *)&f, pe_dtype_size(dt));
	}
	v.data = x;
	struct pe_buf b;
	pe_buf_init(&b, (size_t)1 << 24);
	int rc = pe_npy_write(&b, &v, NULL);
	free(x);
	if (rc != 0)
		abort();
	return pe_buf_steal(&b, len);
}

#endif
