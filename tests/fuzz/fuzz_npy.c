/* libFuzzer target: the .npy parser (pe_npy_parse, src/tensor/npy.c) and its round trip.
 *
 * The input is a whole request body. The parser must never read outside it (the input is an
 * exactly-sized heap copy, so ASan sees any overread) and must fail with PE_EBODY or PE_ETOOBIG
 * and a detail naming "body". What parses must be consistent: the view lies inside the input and
 * holds exactly count(shape) * size bytes up to its end; and it must survive a round trip:
 * pe_npy_write re-encodes it (a header of exactly pe_npy_header_len bytes, a multiple of 64) and
 * pe_npy_parse reads back the same shape, dtype and bytes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc/posenc.h"

#define MAX_ELEMENTS ((size_t)1 << 24)

#define FAIL(...)                                            \
	do {                                                 \
		fprintf(stderr, "fuzz_npy: " __VA_ARGS__);   \
		fputc('\n', stderr);                         \
		abort();                                     \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *body = malloc(size ? size : 1);
	if (!body)
		abort();
	memcpy(body, data, size);
	struct pe_tensor_view v;
	struct pe_err err = {0};
	int rc = pe_npy_parse(body, size, MAX_ELEMENTS, &v, &err);
	if (rc != 0) {
		if ((rc != PE_EBODY && rc != PE_ETOOBIG) || err.code != rc || strcmp(err.param, "body") != 0 ||
		    !err.detail[0])
			FAIL("failure %d with err {%d, '%s', '%s'}", rc, err.code, err.param, err.detail);
		free(body);
		return 0;
	}
	int overflow;
	size_t n = pe_shape_count(&v.shape, &overflow), sz = pe_dtype_size(v.dtype);
	if (overflow || n > MAX_ELEMENTS || v.shape.rank < 0 || v.shape.rank > PE_MAX_RANK)
		FAIL("accepted rank %d, %zu elements (overflow %d)", v.shape.rank, n, overflow);
	if (v.dtype != PE_F32 && v.dtype != PE_F64 && v.dtype != PE_F16 && v.dtype != PE_I32)
		FAIL("accepted dtype %d", (int)v.dtype);
	const uint8_t *d = v.data;
	if (d < body || d > body + size || (size_t)(body + size - d) != n * sz)
		FAIL("view of %zu bytes at offset %td does not end the %zu-byte body", n * sz, d - body, size);

	struct pe_buf b;
	pe_buf_init(&b, (size_t)1 << 30);
	rc = pe_npy_write(&b, &v, &err);
	if (rc != 0)
		FAIL("a parsed tensor cannot be written: %s", err.detail);
	size_t hdr = pe_npy_header_len(&v);
	if (hdr == 0 || hdr % 64 != 0 || b.len != hdr + n * sz)
		FAIL("written %zu bytes, header %zu, data %zu", b.len, hdr, n * sz);
	/* Parse the written file from an exactly-sized copy as well. */
	uint8_t *again = malloc(b.len);
	if (!again)
		abort();
	memcpy(again, b.data, b.len);
	struct pe_tensor_view w;
	rc = pe_npy_parse(again, b.len, MAX_ELEMENTS, &w, &err);
	if (rc != 0)
		FAIL("our own npy does not parse: %s", err.detail);
	if (w.dtype != v.dtype || w.shape.rank != v.shape.rank ||
	    memcmp(w.shape.dim, v.shape.dim, sizeof v.shape.dim[0] * (size_t)v.shape.rank) != 0)
		FAIL("round trip changed dtype or shape");
	if ((const uint8_t *)w.data != again + hdr || (n && memcmp(w.data, v.data, n * sz) != 0))
		FAIL("round trip changed the data");
	free(again);
	pe_buf_destroy(&b);
	free(body);
	return 0;
}
