/* The float32 list printer per SIMD tier, side by side in one run: scalar, AVX2 and (where the
 * CPU has it) AVX-512, forced in turn with pe_isa_force, alternating within each round so that
 * drift hits every tier alike. Two table sizes: 64 distinct 16x16 sinusoidal tables (offsets 0,
 * 16, ..., as a stream of cold small misses would print them) and one 1024x64 table. Two rows
 * each: pe_fmt_list over the values alone (the printer) and pe_json_write_table (the document, a
 * fresh buffer per table as a job takes it). Each line:
 *   <what> <table> <tier> <median ns per number> <ratio: scalar's median / this tier's>
 * the median of ROUNDS rounds. Every tier's text is compared with the scalar's first (exit 1 on a
 * difference). Diagnostic only: nothing asserts a speed. A few seconds.
 * Build (after make all) and run:
 *   make build/tests/bench/bench_printer && build/tests/bench/bench_printer */
#include "bench/bench_time.h"
#include "posenc/core.h"
#include "posenc/tensor.h"
#include "tensor/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROUNDS 101
#define MAX_TABLES 64

struct set {
	const char *name;
	int count;
	struct pe_params p[MAX_TABLES];
	struct pe_tensor_view t[MAX_TABLES];
	size_t numbers; /* over all tables */
};

/* count sinusoidal len x dim tables at offsets 0, len, 2 len, ... */
static void set_init(struct set *s, const char *name, const char *len, const char *dim, int count)
{
	s->name = name;
	s->count = count;
	s->numbers = 0;
	for (int i = 0; i < count; i++) {
		struct pe_err err = {0};
		struct pe_shape shape;
		char off[32];
		int overflow;
		snprintf(off, sizeof off, "%d", i * atoi(len));
		pe_params_init(&s->p[i], pe_table_find("sinusoidal"));
		if (pe_params_set(&s->p[i], "len", len, &err) || pe_params_set(&s->p[i], "dim", dim, &err) ||
		    pe_params_set(&s->p[i], "offset", off, &err) || pe_params_finish(&s->p[i], &err) ||
		    pe_table_shape(&s->p[i], &shape)) {
			fprintf(stderr, "bench_printer: %s\n", err.detail);
			exit(1);
		}
		size_t n = pe_shape_count(&shape, &overflow);
		float *v = malloc(n * sizeof *v);
		if (!v || pe_table_compute(&s->p[i], PE_F32, v, &err) != 0) {
			fprintf(stderr, "bench_printer: compute: %s\n", err.detail);
			exit(1);
		}
		s->t[i] = (struct pe_tensor_view){.shape = shape, .dtype = PE_F32, .data = v};
		s->numbers += n;
	}
}

static void set_destroy(struct set *s)
{
	for (int i = 0; i < s->count; i++) {
		free((void *)s->t[i].data);
		pe_params_destroy(&s->p[i]);
	}
}

/* Every table of s through pe_fmt_list into out (one after the other); the bytes written. */
static size_t print_lists(const struct set *s, char *out)
{
	size_t w = 0;
	for (int i = 0; i < s->count; i++)
		w += pe_fmt_list(&s->t[i], 0, s->t[i].shape.dim[0] * s->t[i].shape.dim[1], out + w);
	return w;
}

/* Every table of s as a JSON document, a fresh buffer each; the seconds. */
static double time_json(const struct set *s)
{
	double total = 0;
	for (int i = 0; i < s->count; i++) {
		struct pe_err err = {0};
		struct pe_buf b;
		size_t n = s->t[i].shape.dim[0] * s->t[i].shape.dim[1];
		pe_buf_init(&b, n * 32 + (1u << 20));
		double t0 = bench_now();
		int rc = pe_json_write_table(&b, &s->p[i], &s->t[i], &err);
		total += bench_now() - t0;
		pe_buf_destroy(&b);
		if (rc != 0) {
			fprintf(stderr, "bench_printer: pe_json_write_table: %s\n", err.detail);
			exit(1);
		}
	}
	return total;
}

static const struct {
	enum pe_isa isa;
	const char *name;
} tiers[] = {{PE_ISA_SCALAR, "scalar"}, {PE_ISA_AVX2, "avx2"}, {PE_ISA_AVX512, "avx512"}};
#define NTIERS 3

static void run(const struct set *s, char *out, char *ref)
{
	double list[NTIERS][ROUNDS], json[NTIERS][ROUNDS];
	int have[NTIERS];
	size_t want = 0;
	for (int k = 0; k < NTIERS; k++) {
		have[k] = pe_isa_force(tiers[k].isa) == 0;
		if (!have[k])
			continue;
		size_t w = print_lists(s, k ? out : ref);
		if (k == 0)
			want = w;
		else if (w != want || memcmp(out, ref, w) != 0) {
			fprintf(stderr, "bench_printer: %s %s differs from scalar\n", s->name, tiers[k].name);
			exit(1);
		}
	}
	for (int r = 0; r < ROUNDS; r++)
		for (int k = 0; k < NTIERS; k++) {
			if (!have[k])
				continue;
			pe_isa_force(tiers[k].isa);
			double t0 = bench_now();
			print_lists(s, out);
			list[k][r] = bench_now() - t0;
			json[k][r] = time_json(s);
		}
	for (int k = 0; k < NTIERS; k++) {
		qsort(list[k], ROUNDS, sizeof list[k][0], bench_cmp_double);
		qsort(json[k], ROUNDS, sizeof json[k][0], bench_cmp_double);
	}
	for (int k = 0; k < NTIERS; k++) {
		if (!have[k]) {
			printf("skip %s %s: this CPU lacks it\n", s->name, tiers[k].name);
			continue;
		}
		double l = list[k][ROUNDS / 2], j = json[k][ROUNDS / 2];
		printf("list %s %s %.2f %.2f\n", s->name, tiers[k].name, l * 1e9 / (double)s->numbers,
		       list[0][ROUNDS / 2] / l);
		printf("json %s %s %.2f %.2f\n", s->name, tiers[k].name, j * 1e9 / (double)s->numbers,
		       json[0][ROUNDS / 2] / j);
	}
}

int main(void)
{
	static struct set small, large;
	enum pe_isa was = pe_isa_active();
	set_init(&small, "16x16", "16", "16", 64);
	set_init(&large, "1024x64", "1024", "64", 1);
	size_t cap = (large.numbers > small.numbers ? large.numbers : small.numbers) * pe_fmt_width(PE_F32) + PE_NUM_MAX;
	char *out = malloc(cap), *ref = malloc(cap);
	if (!out || !ref) {
		fprintf(stderr, "bench_printer: out of memory\n");
		return 1;
	}
	printf("info active tier %s; rows: what table tier ns/number scalar/tier\n", pe_isa_name());
	run(&small, out, ref);
	run(&large, out, ref);
	pe_isa_force(was);
	free(out);
	free(ref);
	set_destroy(&small);
	set_destroy(&large);
	return 0;
}
