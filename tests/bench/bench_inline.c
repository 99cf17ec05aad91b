/* The per-element cost of a small table's computation and encoding, per output format: what
 * produce.c's inline estimate (ns per element of each format) is taken from. Each line:
 *   sample <format> <len>x<dim> <ns per element> <µs per table>
 * the median of 201 repetitions of compute + encode of a distinct sinusoidal table (a new
 * offset each), one thread, as the HTTP thread would run it. Diagnostic only: nothing asserts.
 *   Then gzip's fixed cost on tiny JSON tables (1x2, 4x4, 16x16), the f32 JSON alone beside it
 * gzip'd (pe_gzip, its compressor kept by the thread) and json-gzip-fresh (a level-6 compressor
 * allocated and freed per table, as pe_gzip did before); each
 *   gzipfixed <format> <len>x<dim> <µs over plain JSON>
 * is the difference of the medians. A fresh compressor's cost depends on where malloc finds its
 * 656 KiB: here, in one thread freeing it each time, mostly the heap's top (cheap); in posencd it
 * was often a fresh mapping, faulted in page by page (produce.c).
 * Build and run: make bench-inline (an -O3 build, as make bench's). */
#include "bench/bench_time.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <libdeflate.h>
#include "posenc/core.h"
#include "posenc/output.h"
#include "posenc/tensor.h"

#define REPS 201

/* o's encoding of t into out; fresh: plain JSON/CSV, then gzip'd with a compressor of its own. */
static int encode(const struct pe_out *o, int fresh, const struct pe_params *p, const struct pe_tensor_view *t,
		  struct pe_buf *out, struct pe_err *err)
{
	if (!fresh)
		return pe_out_encode(o, NULL, p, t, out, err);
	struct pe_out plain_o = *o;
	struct pe_buf plain;
	plain_o.gzip = 0;
	pe_buf_init(&plain, out->max);
	int rc = pe_out_encode(&plain_o, NULL, p, t, &plain, err);
	struct libdeflate_compressor *c = rc ? NULL : libdeflate_alloc_compressor(6);
	if (rc == 0 && !c)
		rc = PE_ENOMEM;
	size_t bound = c ? libdeflate_gzip_compress_bound(c, plain.len) : 0;
	if (rc == 0 && (rc = pe_buf_reserve(out, bound)) == 0) {
		size_t n = libdeflate_gzip_compress(c, plain.data, plain.len, out->data + out->len, bound);
		out->len += n;
		rc = n ? 0 : PE_EINTERNAL;
	}
	libdeflate_free_compressor(c);
	pe_buf_destroy(&plain);
	return rc;
}

static double one(const char *len, const char *dim, long offset, const struct pe_out *o, int fresh)
{
	struct pe_params p;
	struct pe_err err = {0};
	struct pe_shape s;
	struct pe_buf out;
	char off[32];
	snprintf(off, sizeof off, "%ld", offset);
	double t0 = bench_now();
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
	if (!data || pe_table_compute(&p, o->dt, data, &err) || encode(o, fresh, &p, &t, &out, &err)) {
		fprintf(stderr, "bench_inline: %s\n", err.detail);
		exit(1);
	}
	pe_buf_destroy(&out);
	free(data);
	pe_params_destroy(&p);
	return bench_now() - t0;
}

/* The median time of REPS distinct tables of size len x dim in format o, in seconds. */
static double median(const char *len, const char *dim, long *offset, const struct pe_out *o, int fresh)
{
	double t[REPS];
	for (int i = 0; i < REPS; i++)
		t[i] = one(len, dim, (*offset)++, o, fresh);
	qsort(t, REPS, sizeof t[0], bench_cmp_double);
	return t[REPS / 2];
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
			double m = median(sizes[z][0], sizes[z][1], &offset, &fmts[f].o, 0);
			double el = atof(sizes[z][0]) * atof(sizes[z][1]);
			printf("sample %s %sx%s %.2f %.2f\n", fmts[f].name, sizes[z][0], sizes[z][1], m * 1e9 / el, m * 1e6);
		}
	static const char *tiny[][2] = {{"1", "2"}, {"4", "4"}, {"16", "16"}};
	static const struct pe_out json = {.fmt = PE_FMT_JSON, .dt = PE_F32}, gz = {.fmt = PE_FMT_JSON, .dt = PE_F32, .gzip = 1};
	for (size_t z = 0; z < sizeof tiny / sizeof tiny[0]; z++) {
		double el = atof(tiny[z][0]) * atof(tiny[z][1]);
		double plain = median(tiny[z][0], tiny[z][1], &offset, &json, 0);
		double kept = median(tiny[z][0], tiny[z][1], &offset, &gz, 0);
		double fresh = median(tiny[z][0], tiny[z][1], &offset, &gz, 1);
		printf("sample json %sx%s %.2f %.2f\n", tiny[z][0], tiny[z][1], plain * 1e9 / el, plain * 1e6);
		printf("sample json-gzip %sx%s %.2f %.2f\n", tiny[z][0], tiny[z][1], kept * 1e9 / el, kept * 1e6);
		printf("sample json-gzip-fresh %sx%s %.2f %.2f\n", tiny[z][0], tiny[z][1], fresh * 1e9 / el, fresh * 1e6);
		printf("gzipfixed json-gzip %sx%s %.2f\n", tiny[z][0], tiny[z][1], (kept - plain) * 1e6);
		printf("gzipfixed json-gzip-fresh %sx%s %.2f\n", tiny[z][0], tiny[z][1], (fresh - plain) * 1e6);
	}
	return 0;
}
