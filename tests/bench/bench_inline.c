/* The per-element cost of a small table's computation and encoding, per output format: what
 * produce.c's inline estimate (ns per element of each format) is taken from. Each line:
 *   sample <format> <len>x<dim> <ns per element> <µs per table>
 * the median of 201 repetitions of compute + encode of a distinct sinusoidal table (a new
 * offset each), one thread, as the HTTP thread would run it. Diagnostic only: nothing asserts.
 * Build (after make all) and run:
 *   cc -O3 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -o build/bench_inline tests/bench/bench_inline.c \
 *      build/libposenc.a -ljansson -lnettle -lpng -ldeflate -lsleef -lm && build/bench_inline */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "posenc/core.h"
#include "posenc/output.h"
#include "posenc/tensor.h"

#define REPS 201

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double one(const char *len, const char *dim, long offset, const struct pe_out *o)
{
	struct pe_params p;
	struct pe_err err = {0};
	struct pe_shape s;
	struct pe_buf out;
	char off[32];
	snprintf(off, sizeof off, "%ld", offset);
	double t0 = now();
	pe_params_init(&p, pe_table_find("sinusoidal"));
	if (pe_params_set(&p, "len", len, &err) || pe_params_set(&p, "dim", dim, &err) ||
	    pe_params_set(&p, "offset", off, &err) || pe_params_finish(&p, &err) || pe_table_shape(&p, &s)) {
		fprintf(stderr, "bench_inline: %s\n", err.detail);
		exit(1);
	}
	int overflow;
	size_t n = pe_shape_count(&s, &overflow);
	struct pe_tensor_view t = {.shape = s, .dtype = o->dt};
	void *data = malloc(n * pe_dtype_size(o->dt));
	t.data = data;
	pe_buf_init(&out, (size_t)1 << 30);
	if (!data || pe_table_compute(&p, o->dt, data, &err) || pe_out_encode(o, NULL, &p, &t, &out, &err)) {
		fprintf(stderr, "bench_inline: %s\n", err.detail);
		exit(1);
	}
	pe_buf_destroy(&out);
	free(data);
	pe_params_destroy(&p);
	return now() - t0;
}

int main(void)
{
	static const struct {
		const char *name;
		struct pe_out o;
	} fmts[] = {
		{"bin", {.fmt = PE_FMT_BIN, .dt = PE_F32}},
		{"npy", {.fmt = PE_FMT_NPY, .dt = PE_F32}},
		{"json", {.fmt = PE_FMT_JSON, .dt = PE_F32}},
		{"json-gzip", {.fmt = PE_FMT_JSON, .dt = PE_F32, .gzip = 1}},
		{"csv", {.fmt = PE_FMT_CSV, .dt = PE_F32}},
		{"png", {.fmt = PE_FMT_PNG, .dt = PE_F32}},
	};
	static const char *sizes[][2] = {{"16", "16"}, {"32", "32"}, {"64", "64"}, {"128", "128"}};
	long offset = 1000;
	for (size_t f = 0; f < sizeof fmts / sizeof fmts[0]; f++)
		for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
			double t[REPS];
			for (int i = 0; i < REPS; i++)
				t[i] = one(sizes[z][0], sizes[z][1], offset++, &fmts[f].o);
			qsort(t, REPS, sizeof t[0], cmp);
			double el = atof(sizes[z][0]) * atof(sizes[z][1]);
			printf("sample %s %sx%s %.2f %.2f\n", fmts[f].name, sizes[z][0], sizes[z][1], t[REPS / 2] * 1e9 / el,
			       t[REPS / 2] * 1e6);
		}
	return 0;
}
