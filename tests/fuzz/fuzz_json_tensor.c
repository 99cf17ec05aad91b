/* libFuzzer target: the JSON tensor body parser (pe_json_tensor_parse, src/tensor/json_in.c),
 * checked against a reference built on jansson.
 *
 * The input is a whole request body, held in an exactly-sized heap copy (ASan sees any overread).
 * The reference reads it with jansson (one JSON value and nothing else) and applies the
 * contract: a bare nested array of finite numbers (a bare number is rank 0), or an object with
 * "data" (required) and "shape" (non-negative integers; other members are ignored), "data" nested
 * exactly as "shape" says or flat (rank <= 1) with count(shape) numbers; arrays rectangular, rank
 * at most 8, count at most max_elements (else PE_ETOOBIG).
 *
 * Checks: failures are PE_EBODY / PE_ETOOBIG (PE_ENOMEM tolerated) naming "body" or "shape" with
 * a detail. Whatever the parser accepts, the reference accepts with the same shape and the same
 * numbers, bit for bit; whatever the reference accepts, the parser accepts too. Bodies where the
 * two may differ by design are only checked for the first part (error codes): escapes and
 * non-ASCII bytes (the parser matches member names byte for byte and does not validate UTF-8 in
 * members it skips), repeated member names, nesting deeper than 60, numbers written with 400
 * or more characters, and numbers beyond a double's range (jansson refuses them anywhere; the
 * parser accepts them in members it skips). Whatever the parser accepts is finite, in scope or
 * not. */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc/posenc.h"

#define MAX_ELEMENTS ((size_t)4096)

#define FAIL(...)                                                  \
	do {                                                       \
		fprintf(stderr, "fuzz_json_tensor: " __VA_ARGS__); \
		fputc('\n', stderr);                               \
		abort();                                           \
	} while (0)

/* ---- the reference ---- */

struct ref {
	struct pe_shape shape;
	double *vals;
	size_t n, cap;
};

/* Shape of a JSON value as a tensor: numbers rank 0, arrays [len, shape of the elements], all
 * elements of the same shape. 0 or -1. */
static int value_shape(const json_t *v, struct pe_shape *s, int depth)
{
	if (json_is_number(v)) {
		s->rank = 0;
		return isfinite(json_number_value(v)) ? 0 : -1;
	}
	if (!json_is_array(v) || depth >= PE_MAX_RANK)
		return -1;
	size_t n = json_array_size(v);
	struct pe_shape inner = {0}, first = {0};
	if (n == 0) {
		s->rank = 1;
		s->dim[0] = 0;
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		if (value_shape(json_array_get(v, i), &inner, depth + 1) != 0)
			return -1;
		if (i == 0)
			first = inner;
		else if (inner.rank != first.rank ||
			 memcmp(inner.dim, first.dim, sizeof inner.dim[0] * (size_t)inner.rank) != 0)
			return -1;
	}
	if (first.rank + 1 > PE_MAX_RANK)
		return -1;
	s->rank = first.rank + 1;
	s->dim[0] = n;
	memcpy(s->dim + 1, first.dim, sizeof first.dim[0] * (size_t)first.rank);
	return 0;
}

static void collect(const json_t *v, struct ref *r)
{
	if (json_is_number(v)) {
		if (r->n == r->cap) {
			r->cap = r->cap ? 2 * r->cap : 64;
			r->vals = realloc(r->vals, r->cap * sizeof *r->vals);
			if (!r->vals)
				abort();
		}
		r->vals[r->n++] = json_number_value(v);
		return;
	}
	for (size_t i = 0; i < json_array_size(v); i++)
		collect(json_array_get(v, i), r);
}

static int same_shape(const struct pe_shape *a, const struct pe_shape *b)
{
	return a->rank == b->rank && memcmp(a->dim, b->dim, sizeof a->dim[0] * (size_t)a->rank) == 0;
}

/* 0 accepted (r filled), PE_EBODY, or PE_ETOOBIG. */
static int reference(const uint8_t *data, size_t size, struct ref *r)
{
	json_error_t e;
	json_t *root = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL, &e);
	int rc = PE_EBODY, overflow;
	const json_t *dv = root;
	struct pe_shape declared = {0};
	int have_declared = 0;
	if (!root)
		return PE_EBODY;
	if (memchr(data, 0, size)) /* jansson stops at a NUL byte; JSON has none outside escapes */
		goto out;
	if (json_is_object(root)) {
		dv = json_object_get(root, "data");
		const json_t *sv = json_object_get(root, "shape");
		if (!dv)
			goto out;
		if (sv) {
			if (!json_is_array(sv) || json_array_size(sv) > PE_MAX_RANK)
				goto out;
			declared.rank = (int)json_array_size(sv);
			for (size_t i = 0; i < json_array_size(sv); i++) {
				const json_t *d = json_array_get(sv, i);
				double x = json_is_number(d) ? json_number_value(d) : -1;
				if (!(x >= 0 && x <= 1e15 && x == floor(x)))
					goto out;
				declared.dim[i] = (size_t)x;
			}
			have_declared = 1;
		}
	}
	if (value_shape(dv, &r->shape, 0) != 0)
		goto out;
	size_t count = pe_shape_count(&r->shape, &overflow);
	if (have_declared) {
		size_t dcount = pe_shape_count(&declared, &overflow);
		if (overflow || !(same_shape(&declared, &r->shape) || (r->shape.rank <= 1 && dcount == count)))
			goto out;
		r->shape = declared;
	}
	if (count > MAX_ELEMENTS) {
		rc = PE_ETOOBIG;
		goto out;
	}
	collect(dv, r);
	if (r->n != count)
		FAIL("reference: %zu numbers for %zu elements", r->n, count);
	rc = 0;
out:
	json_decref(root);
	return rc;
}

/* Bodies where parser and reference may differ by design (see the top). */
static int out_of_scope(const uint8_t *d, size_t n)
{
	size_t run = 0;
	int depth = 0;
	json_error_t e;
	for (size_t i = 0; i < n; i++) {
		if (d[i] == '\\' || d[i] >= 0x80)
			return 1;
		run = strchr("0123456789.eE+-", d[i]) && d[i] ? run + 1 : 0;
		depth += (d[i] == '[' || d[i] == '{') - (d[i] == ']' || d[i] == '}');
		if (run >= 400 || depth > 60)
			return 1;
	}
	json_t *j = json_loadb((const char *)d, n, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL, &e);
	if (!j && (strstr(e.text, "duplicate") || strstr(e.text, "overflow")))
		return 1;
	json_decref(j);
	return 0;
}

static void shape_text(const struct pe_shape *s, char *buf, size_t cap)
{
	pe_shape_format(s, buf, cap);
	if (s->rank == 0)
		snprintf(buf, cap, "(scalar)");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *body = malloc(size ? size : 1);
	if (!body)
		abort();
	memcpy(body, data, size);
	struct pe_tensor_mut t = {0};
	struct pe_err err = {0};
	int rc = pe_json_tensor_parse(body, size, MAX_ELEMENTS, &t, &err);
	struct ref r = {0};
	int want = reference(data, size, &r);
	char a[200], b[200];
	int compare = !out_of_scope(data, size);
	if (rc != 0) {
		if ((rc != PE_EBODY && rc != PE_ETOOBIG && rc != PE_ENOMEM) || err.code != rc || !err.detail[0] ||
		    (strcmp(err.param, "body") != 0 && strcmp(err.param, "shape") != 0))
			FAIL("failure %d with err {%d, '%s', '%s'}", rc, err.code, err.param, err.detail);
		if (want == 0 && compare) {
			shape_text(&r.shape, b, sizeof b);
			FAIL("valid body refused (%s); the reference reads shape %s", err.detail, b);
		}
		if (want == PE_ETOOBIG && rc == PE_EBODY && compare)
			FAIL("body over the element limit refused as invalid: %s", err.detail);
	} else if (!compare) {
		int overflow;
		size_t n = pe_shape_count(&t.shape, &overflow);
		for (size_t i = 0; i < n; i++)
			if (!isfinite(((const double *)t.data)[i]))
				FAIL("a number that is not finite accepted at element %zu", i);
		free(t.data);
	} else {
		if (want != 0)
			FAIL("invalid body accepted (the reference says %s)", want == PE_ETOOBIG ? "too big" : "invalid");
		int overflow;
		size_t n = pe_shape_count(&t.shape, &overflow);
		if (t.dtype != PE_F64 || !same_shape(&t.shape, &r.shape) || n != r.n) {
			shape_text(&t.shape, a, sizeof a);
			shape_text(&r.shape, b, sizeof b);
			FAIL("shape %s (%zu elements) but the reference reads %s (%zu numbers)", a, n, b, r.n);
		}
		/* The whole buffer is read: ASan catches a buffer shorter than count(shape). */
		if (n && memcmp(t.data, r.vals, n * sizeof(double)) != 0)
			FAIL("numbers differ from the reference");
		free(t.data);
	}
	free(r.vals);
	free(body);
	return 0;
}
