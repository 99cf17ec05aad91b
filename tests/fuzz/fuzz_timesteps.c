/* libFuzzer target: POST /v1/sinusoidal/timestep's body (pe_vector_parse, src/tensor/vector.c, over
 * the npy and JSON parsers), the value check and the table it feeds (src/core/timestep.c).
 *
 * Input: one byte of options (bit 0: the body is JSON, else npy; bit 1: compat=hf; bit 2:
 * flip_sin_to_cos; bits 3-7: dim 1..32), then the body. A failure must be a known code naming
 * "body" (PE_ENOMEM excepted) with a detail and leave *out NULL. What parses is a vector of n >= 1
 * doubles, n within the element bound; values the check accepts give a table of n x dim values in
 * [-1, 1], each finite, an odd dim's last column 0. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/timestep.h"
#include "tensor/vector.h"

#define MAX_ELEMENTS 65536

#define FAIL(...)                                                \
	do {                                                     \
		fprintf(stderr, "fuzz_timesteps: " __VA_ARGS__); \
		fputc('\n', stderr);                             \
		abort();                                         \
	} while (0)

static void table(const double *t, size_t n, uint8_t opt)
{
	struct pe_params p;
	struct pe_err err = {0};
	char dim[8];
	snprintf(dim, sizeof dim, "%d", 1 + (opt >> 3));
	pe_params_init(&p, &pe_timestep_body_def);
	if (pe_params_set(&p, "dim", dim, &err) || pe_params_set(&p, "compat", opt & 2 ? "hf" : "exact", &err) ||
	    pe_params_set(&p, "flip_sin_to_cos", opt & 4 ? "1" : "0", &err) ||
	    pe_params_set(&p, "downscale_freq_shift", "0.5", &err) || pe_params_finish(&p, &err))
		FAIL("parameters refused: %s %s", err.param, err.detail);
	size_t d = (size_t)(1 + (opt >> 3)), count = n * d;
	float *out = malloc(count * sizeof *out);
	if (!out)
		abort();
	if (pe_timestep_compute(&p, t, n, PE_F32, out, &err) != 0)
		FAIL("compute failed: %s", err.detail);
	for (size_t i = 0; i < count; i++)
		if (!(fabsf(out[i]) <= 1.0f) || (d % 2 && i % d == d - 1 && out[i] != 0))
			FAIL("element %zu of [%zu, %zu] is %g", i, n, d, out[i]);
	free(out);
	pe_params_destroy(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t opt = data[0];
	size_t len = size - 1;
	uint8_t *body = malloc(len ? len : 1); /* an exact-size copy: ASan sees any overread */
	if (!body)
		abort();
	memcpy(body, data + 1, len);
	double *t = (double *)1;
	size_t n = 7;
	struct pe_err err = {0};
	int rc = pe_vector_parse(body, len, opt & 1, MAX_ELEMENTS, "timesteps", &t, &n, &err);
	if (rc != 0) {
		if (t != NULL || (rc != PE_ENOMEM && (rc != PE_EBODY && rc != PE_ETOOBIG)) || err.code != rc || !err.detail[0] ||
		    (rc != PE_ENOMEM && strcmp(err.param, "body")))
			FAIL("failure %d with err {%d, '%s', '%s'}, out %p", rc, err.code, err.param, err.detail, (void *)t);
		free(body);
		return 0;
	}
	if (!t || n < 1 || n > MAX_ELEMENTS)
		FAIL("accepted %zu values", n);
	int ok = 1;
	for (size_t i = 0; i < n && ok; i++) {
		struct pe_err e = {0};
		ok = pe_timestep_check_value(t[i], i, &e) == 0;
		if (!ok && (e.code != PE_EBODY || strcmp(e.param, "body")))
			FAIL("value check failed without naming the body");
	}
	if (ok && n * (size_t)(1 + (opt >> 3)) <= 16384)
		table(t, n, opt);
	free(t);
	free(body);
	return 0;
}
