/* Kernel benchmarks for `make bench`: each posenc kernel beside an anchor doing comparable work,
 * timed in the same process, alternating A B A B so that drift (turbo, a noisy neighbour) hits
 * both sides alike.
 *
 * The core is driven exactly as the HTTP layer drives it (include/posenc/core.h: params_init,
 * params_set per query key, params_finish, table_shape, table_compute), so a row measures what a
 * cold request computes. Buffers are allocated and touched once before timing: the rows measure
 * the kernels, not first-touch page faults (the HTTP rows include those).
 *
 * Output, one line per measurement, for tests/tools/bench.sh to pool and take medians of:
 *     sample <name> <seconds>
 *     info <name> <text>
 *     skip <name> <reason>
 * Usage: bench_kernels [reps] [json]   (reps per kernel, default 5; "json": only the JSON rows, for
 * bench.sh to alternate jansson with cold HTTP requests) */
#include "bench/bench_time.h"
#include "posenc/core.h"
#include "posenc/tensor.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Keeps the compiler from dropping a memset whose result is never read. */
static volatile unsigned char sink;

/* 64-byte aligned, as the server's response buffers are (pe_buf's first block). */
static void *xalloc(size_t n)
{
	void *p = aligned_alloc(64, (n + 63) / 64 * 64);
	if (!p) {
		fprintf(stderr, "bench_kernels: out of memory (%zu bytes)\n", n);
		exit(1);
	}
	memset(p, 1, n);
	return p;
}

/* Parameters from "k=v&k=v", as the HTTP layer receives them. Returns 0 or prints why not. */
static int params_from(struct pe_params *p, const struct pe_table_def *def, const char *query)
{
	struct pe_err err = {0};
	char *q = strdup(query), *save = NULL;
	int rc = 0;
	pe_params_init(p, def);
	for (char *kv = strtok_r(q, "&", &save); kv && rc == 0; kv = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(kv, '=');
		*eq = 0;
		rc = pe_params_set(p, kv, eq + 1, &err);
	}
	if (rc == 0)
		rc = pe_params_finish(p, &err);
	free(q);
	if (rc != 0) {
		fprintf(stderr, "bench_kernels: %s?%s: %s (%s)\n", def->name, query, err.detail, err.param);
		pe_params_destroy(p);
	}
	return rc;
}

static size_t table_bytes(const struct pe_params *p, struct pe_shape *s)
{
	int overflow;
	pe_table_shape(p, s);
	return pe_shape_count(s, &overflow) * pe_dtype_size(PE_F32);
}

static double time_compute(const struct pe_params *p, void *out)
{
	struct pe_err err = {0};
	double t0 = bench_now();
	int rc = pe_table_compute(p, PE_F32, out, &err);
	double t = bench_now() - t0;
	if (rc != 0) {
		fprintf(stderr, "bench_kernels: compute %s: %s\n", p->def->name, err.detail);
		exit(1);
	}
	return t;
}

static double time_memset(void *out, size_t n, int round)
{
	double t0 = bench_now();
	memset(out, round & 0xff, n);
	double t = bench_now() - t0;
	sink = ((volatile unsigned char *)out)[n / 2];
	return t;
}

/* A table against memset of the same bytes, alternating; one warm-up of each first. The table goes
 * into a 64-byte-aligned buffer, as the server's are (pe_buf). With `aligned`, a third measurement
 * writes into a plain malloc'd buffer (16 mod 32 bytes for large glibc blocks; reported as
 * <name>_aligned for the script's sake) to show what alignment-sensitive kernels lose there. */
static void table_vs_memset(const char *name, const char *anchor, const struct pe_params *p, int reps, int aligned)
{
	struct pe_shape s;
	size_t n = table_bytes(p, &s);
	void *out = xalloc(n), *al = NULL, *al_base = NULL;
	if (aligned) {
		al = al_base = malloc(n + 16);
		if (!al)
			exit(1);
		if ((uintptr_t)al % 32 == 0) /* make sure it is misaligned like a large glibc block */
			al = (char *)al + 16;
		memset(al, 1, n);
		time_compute(p, al);
	}
	time_compute(p, out);
	time_memset(out, n, 0);
	for (int r = 0; r < reps; r++) {
		printf("sample %s %.9f\n", name, time_compute(p, out));
		if (anchor)
			printf("sample %s %.9f\n", anchor, time_memset(out, n, r));
		if (al)
			printf("sample %s_aligned %.9f\n", name, time_compute(p, al));
	}
	printf("info %s %zu bytes, output address %% 64 = %u\n", name, n, (unsigned)((uintptr_t)out % 64));
	free(out);
	free(al_base);
}

/* ---- JSON: pe_json_write_table against a jansson tree + json_dumps ---- */

/* The same document as pe_json_write_table writes (encoding, params, shape, dtype, data), built
 * the way a C service using jansson would: a tree, then json_dumps with 9 significant digits
 * (enough to round-trip a float32) and no whitespace. */
static char *jansson_encode(const struct pe_params *p, const struct pe_shape *s, const float *v)
{
	json_t *doc = json_object(), *params = json_object(), *shape = json_array(), *data = json_array();
	json_object_set_new(params, "len", json_integer((json_int_t)s->dim[0]));
	json_object_set_new(params, "dim", json_integer((json_int_t)s->dim[1]));
	json_object_set_new(doc, "encoding", json_string(p->def->name));
	json_object_set_new(doc, "params", params);
	for (int i = 0; i < s->rank; i++)
		json_array_append_new(shape, json_integer((json_int_t)s->dim[i]));
	json_object_set_new(doc, "shape", shape);
	json_object_set_new(doc, "dtype", json_string("f32"));
	for (size_t r = 0; r < s->dim[0]; r++) {
		json_t *row = json_array();
		for (size_t c = 0; c < s->dim[1]; c++)
			json_array_append_new(row, json_real((double)v[r * s->dim[1] + c]));
		json_array_append_new(data, row);
	}
	json_object_set_new(doc, "data", data);
	char *out = json_dumps(doc, JSON_COMPACT | JSON_REAL_PRECISION(9));
	json_decref(doc);
	return out;
}

/* One pe_json_write_table of t as the job does it: a fresh bounded buffer per request (stolen for
 * the response there). Returns the seconds; *bytes is the document's length. */
static double time_json_pe(const struct pe_params *p, const struct pe_tensor_view *t, size_t n, size_t *bytes)
{
	struct pe_err err = {0};
	struct pe_buf b;
	pe_buf_init(&b, n * 32 + (1u << 20));
	double t0 = bench_now();
	int rc = pe_json_write_table(&b, p, t, &err);
	double ta = bench_now() - t0;
	if (rc != 0) {
		fprintf(stderr, "bench_kernels: pe_json_write_table: %s\n", err.detail);
		exit(1);
	}
	*bytes = b.len;
	pe_buf_destroy(&b);
	return ta;
}

/* scalar_too: also time the scalar printer (pe_isa_force scalar) when the active tier has a SIMD
 * list printer (AVX2, AVX-512), as its comparison. */
static void json_rows(const struct pe_params *p, int reps, int scalar_too)
{
	struct pe_shape s;
	size_t n = table_bytes(p, &s);
	float *v = xalloc(n);
	time_compute(p, v);
	struct pe_tensor_view t = {.shape = s, .dtype = PE_F32, .data = v};
	size_t ours = 0, theirs = 0;
	enum pe_isa isa = pe_isa_active();
	if (scalar_too && isa == PE_ISA_SCALAR) {
		printf("skip json_pe_scalar the active tier (%s) already prints with the scalar printer\n", pe_isa_name());
		scalar_too = 0;
	}
	for (int r = 0; r < reps + 1; r++) {
		double ta = time_json_pe(p, &t, n, &ours), ts = 0;
		if (scalar_too && pe_isa_force(PE_ISA_SCALAR) == 0) {
			size_t same;
			ts = time_json_pe(p, &t, n, &same);
			pe_isa_force(isa);
			if (same != ours) {
				fprintf(stderr, "bench_kernels: the scalar printer wrote %zu bytes, %s %zu\n", same, pe_isa_name(), ours);
				exit(1);
			}
		}
		double t0 = bench_now();
		char *j = jansson_encode(p, &s, v);
		double tb = bench_now() - t0;
		theirs = j ? strlen(j) : 0;
		free(j);
		if (r > 0) { /* the first round warms both up */
			printf("sample json_pe %.9f\n", ta);
			printf("sample json_jansson %.9f\n", tb);
			if (ts > 0)
				printf("sample json_pe_scalar %.9f\n", ts);
		}
	}
	printf("info json_pe %zu bytes\n", ours);
	printf("info json_jansson %zu bytes\n", theirs);
	free(v);
}

/* ---- RoPE apply: in place on a [1, 32, 2048, 128] f32 tensor, as the server applies it to a decoded
 * body, against memcpy of the same bytes into another buffer ---- */

static void apply_rows(int reps)
{
	const struct pe_table_def *def = pe_transform_find("rope/apply");
	struct pe_params p;
	struct pe_err err = {0};
	if (!def) {
		printf("skip rope_apply pe_transform_find(\"rope/apply\") is NULL: not registered yet\n");
		return;
	}
	if (params_from(&p, def, "seq_axis=-2") != 0) {
		printf("skip rope_apply the core refused the default parameters\n");
		return;
	}
	struct pe_tensor_mut x = {.shape = {.rank = 4, .dim = {1, 32, 2048, 128}}, .dtype = PE_F32}, y;
	size_t count = 32u * 2048 * 128, n = count * sizeof(float);
	float *v = xalloc(n), *copy = xalloc(n);
	for (size_t i = 0; i < count; i++)
		v[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
	x.data = v;
	y = x; /* in place, as the server does when the shapes are equal */
	struct pe_shape os;
	if (pe_transform_shape(&p, &x.shape, &os, &err) != 0 || pe_transform_apply(&p, &x, &y, PE_F32, &err) != 0) {
		printf("skip rope_apply %s\n", err.detail);
		goto out;
	}
	memcpy(copy, v, n);
	for (int r = 0; r < reps; r++) {
		double t0 = bench_now();
		pe_transform_apply(&p, &x, &y, PE_F32, &err);
		printf("sample rope_apply %.9f\n", bench_now() - t0);
		t0 = bench_now();
		memcpy(copy, v, n);
		double t = bench_now() - t0;
		sink = ((volatile unsigned char *)copy)[n / 3];
		printf("sample rope_apply_memcpy %.9f\n", t);
	}
	printf("info rope_apply %zu bytes, in place\n", n);
out:
	pe_params_destroy(&p);
	free(v);
	free(copy);
}

int main(int argc, char **argv)
{
	int reps = argc > 1 ? atoi(argv[1]) : 5, only_json = argc > 2 && strcmp(argv[2], "json") == 0;
	if (reps < 1)
		reps = 1;
	struct pe_params p;
	const struct pe_table_def *sdef = pe_table_find("sinusoidal");
	if (!sdef || params_from(&p, sdef, "len=512&dim=768&compat=exact") != 0) {
		printf("skip sin_exact sinusoidal is not registered\n");
	} else if (only_json) {
		json_rows(&p, reps, 0);
		pe_params_destroy(&p);
		return 0;
	} else {
		printf("info isa %s\n", pe_isa_name());
		table_vs_memset("sin_exact", "sin_memset", &p, reps, 0);
		enum pe_isa isa = pe_isa_active();
		if (pe_isa_force(PE_ISA_SCALAR) == 0) {
			table_vs_memset("sin_scalar", "sin_scalar_memset", &p, reps, 0);
			pe_isa_force(isa); /* back to the tier the rows below measure */
		}
		json_rows(&p, reps, 1);
		pe_params_destroy(&p);
	}

	const struct pe_table_def *rope = pe_table_find("rope");
	if (!rope)
		printf("skip rope pe_table_find(\"rope\") is NULL: /v1/rope is not registered yet\n");
	else if (params_from(&p, rope, "len=65536&dim=128") != 0)
		printf("skip rope the core refused len=65536&dim=128\n");
	else {
		table_vs_memset("rope", "rope_memset", &p, reps, 1);
		pe_params_destroy(&p);
	}
	apply_rows(reps);
	fflush(stdout);
	return 0;
}
