/* /v1/sinusoidal against the committed known answers of tests/ref/gen_sinusoidal.py, in ulps.
 *
 * Each case of tests/data/sinusoidal/cases.json is driven through the core exactly as a client's
 * query would be (find, init, set every key=value, finish, shape, compute) on every kernel path
 * (scalar, and AVX2 and AVX-512 where the CPU has them), and compared with:
 *   (a) float64 NumPy (libm sin/cos of the same float64 angle): compat=exact in f32, f16 and bf16
 *       must be within 1 ulp of (a) rounded once to that type; f64 within F64_VS_NUMPY_ULP;
 *   (b) mpmath's correctly rounded value of the same angle: f64 within 1 ulp (the kernel contract);
 *   (c) PyTorch float32: compat=hf within HF_VS_TORCH_ULP, and at positions >= 1e6 far closer to
 *       PyTorch than compat=exact is (the point of the mode).
 * The scalar and AVX2 paths are also compared with each other, and the fused f32 rows of all three
 * bit for bit. Every comparison prints its measured maximum so a regression in accuracy shows up
 * before it reaches a bound. */
#include "core/kernels.h"
#include "posenc/core.h"
#include "support/pe_check.h"
#include "support/pe_kat.h" /* pe_kat_ulp16 */
#include "support/pe_table.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define DATA_DIR "tests/data/sinusoidal/"

/* Both (a) and the core's exact mode are within 1 ulp of the true sine of the same double angle
 * (glibc's sin/cos: measured < 0.51 ulp; SLEEF's u10 kernels on the AVX2 path: <= 1 ulp), so they
 * are less than 2 ulp apart, which is at most one step between doubles. Measured: 0 on the scalar
 * path (the same glibc), 1 on the AVX2 path. */
#define F64_VS_NUMPY_ULP 1
/* compat=hf rounds its float angle's double sine once to float; PyTorch uses SLEEF's float sinf/cosf
 * (<= 1 ulp). With bit-identical frequencies and angles the two are at most 1 ulp apart; a frequency
 * 1 ulp off shows up as thousands of ulps at large positions. */
#define HF_VS_TORCH_ULP 1
/* Positions from which compat=exact must differ visibly from PyTorch while compat=hf does not. */
#define LARGE_POSITION 1000000

struct kcase {
	char name[96], query[256], hf_query[256];
	size_t len, dim, n;
	int64_t offset;
	double *ref, *mp; /* mp is NULL for cases without an mpmath file */
	float *torch;
};

static struct kcase *cases;
static size_t ncases;

static void *read_exact(const char *file, size_t want)
{
	char path[512];
	size_t len;
	snprintf(path, sizeof path, DATA_DIR "%s", file);
	void *p = pe_test_read_file(path, &len);
	ck_assert_msg(len == want, "%s: %zu bytes, expected %zu", path, len, want);
	return p;
}

static const char *str_field(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	ck_assert_msg(s != NULL, "cases.json: missing \"%s\"", k);
	return s;
}

static void load_cases(void)
{
	json_error_t jerr;
	json_t *root = json_load_file(DATA_DIR "cases.json", 0, &jerr);
	ck_assert_msg(root != NULL, "cases.json: %s (line %d)", jerr.text, jerr.line);
	json_t *arr = json_object_get(root, "cases");
	ncases = json_array_size(arr);
	ck_assert_uint_gt(ncases, 0);
	cases = calloc(ncases, sizeof *cases);
	ck_assert_ptr_nonnull(cases);
	for (size_t i = 0; i < ncases; i++) {
		json_t *o = json_array_get(arr, i);
		struct kcase *c = &cases[i];
		snprintf(c->name, sizeof c->name, "%s", str_field(o, "name"));
		snprintf(c->query, sizeof c->query, "%s", str_field(o, "query"));
		snprintf(c->hf_query, sizeof c->hf_query, "%s", str_field(o, "hf_query"));
		json_t *shape = json_object_get(o, "shape");
		ck_assert_uint_eq(json_array_size(shape), 2);
		c->len = (size_t)json_integer_value(json_array_get(shape, 0));
		c->dim = (size_t)json_integer_value(json_array_get(shape, 1));
		c->n = c->len * c->dim;
		ck_assert_uint_gt(c->n, 0);
		c->ref = read_exact(str_field(o, "ref_f64"), c->n * 8);
		c->torch = read_exact(str_field(o, "torch_f32"), c->n * 4);
		c->mp = json_object_get(o, "mp_f64") ? read_exact(str_field(o, "mp_f64"), c->n * 8) : NULL;
	}
	json_decref(root);
}

static void free_cases(void)
{
	for (size_t i = 0; i < ncases; i++) {
		free(cases[i].ref);
		free(cases[i].mp);
		free(cases[i].torch);
	}
	free(cases);
	cases = NULL;
	ncases = 0;
}

/* Drive the core like a client: every key=value of the query, then finish, shape and compute.
 * Returns the table (count(shape) elements of dt); *offset gets the parsed first position. */
static void *run(const char *query, enum pe_dtype dt, size_t want_n, int64_t *offset)
{
	struct pe_shape s;
	int ov;
	void *out = pe_query_table("sinusoidal", query, dt, &s);
	ck_assert_int_eq(s.rank, 2);
	ck_assert_uint_eq(pe_shape_count(&s, &ov), want_n);
	if (offset) {
		struct pe_params p;
		struct pe_err err;
		ck_assert_int_eq(pe_query_params(&p, "sinusoidal", query, &err), 0);
		*offset = pe_param_int(&p, "offset");
		pe_params_destroy(&p);
	}
	return out;
}

/* The kernel paths, by loop index (tcase_add_loop_test(tc, t, 0, NISA)). */
static const struct {
	enum pe_isa isa;
	const char *name;
} isas[] = {{PE_ISA_SCALAR, "scalar"}, {PE_ISA_AVX2, "AVX2+FMA"}, {PE_ISA_AVX512, "AVX-512"}};
#define NISA (int)(sizeof isas / sizeof isas[0])

/* Force path i. Returns 0 when the CPU lacks it (the test passes, said on stderr). */
static int use_isa(int i)
{
	ck_assert_int_lt(i, NISA);
	if (pe_isa_force(isas[i].isa) != 0) {
		ck_assert_msg(isas[i].isa != PE_ISA_SCALAR, "the scalar path was refused");
		fprintf(stderr, "sinusoidal: no %s on this CPU, %s path not tested\n", isas[i].name, isas[i].name);
		return 0;
	}
	ck_assert_int_eq(pe_isa_active(), isas[i].isa);
	return 1;
}

struct stat {
	uint64_t max, nonzero, count;
	size_t at; /* flat index of the first maximum */
};

static void stat_add(struct stat *st, uint64_t u, size_t i)
{
	if (u > st->max) {
		st->max = u;
		st->at = i;
	}
	st->nonzero += u != 0;
	st->count++;
}

/* One comparison over every case: the worst case is kept to be named when the bound fails. */
struct total {
	const char *what;
	struct stat all;
	const struct kcase *worst;
	size_t worst_at;
};

/* Fold one case's stat into the total; print the case when anything differs. */
static void total_add(struct total *t, const struct kcase *c, const struct stat *st)
{
	if (st->nonzero)
		fprintf(stderr, "%-7s %-22s %-34s max %llu ulp (row %zu col %zu), %llu of %llu differ\n",
			pe_isa_name(), t->what, c->name, (unsigned long long)st->max, st->at / c->dim,
			st->at % c->dim, (unsigned long long)st->nonzero, (unsigned long long)st->count);
	if (!t->worst || st->max > t->all.max) {
		t->worst = c;
		t->worst_at = st->at;
	}
	t->all.max = st->max > t->all.max ? st->max : t->all.max;
	t->all.nonzero += st->nonzero;
	t->all.count += st->count;
}

/* Print the summary over all cases and check it against the bound. */
static void total_check(const struct total *t, uint64_t bound, int hf)
{
	fprintf(stderr, "%-7s %-22s ALL CASES: max %llu ulp (bound %llu), %llu of %llu differ\n", pe_isa_name(),
		t->what, (unsigned long long)t->all.max, (unsigned long long)bound,
		(unsigned long long)t->all.nonzero, (unsigned long long)t->all.count);
	ck_assert_uint_gt(t->all.count, 0);
	ck_assert_msg(t->all.max <= bound, "%s: %llu ulp > %llu for %s at row %zu col %zu (%s path)", t->what,
		      (unsigned long long)t->all.max, (unsigned long long)bound,
		      hf ? t->worst->hf_query : t->worst->query, t->worst_at / t->worst->dim,
		      t->worst_at % t->worst->dim, pe_isa_name());
}

/* Element i of got (dt) against the value x rounded once to dt, in ulps of dt. */
static uint64_t ulp_vs(enum pe_dtype dt, const void *got, size_t i, double x)
{
	switch (dt) {
	case PE_F64:
		return pe_ulp_f64(((const double *)got)[i], x);
	case PE_F16:
		return pe_kat_ulp16(((const uint16_t *)got)[i], pe_f64_to_f16(x));
	case PE_BF16:
		return pe_kat_ulp16(((const uint16_t *)got)[i], pe_f64_to_bf16(x));
	default:
		return pe_ulp_f32(((const float *)got)[i], (float)x);
	}
}

/* compat=exact in dt over every case against NumPy's f64 (vs_mp: mpmath's, in the cases that have
 * it), within bound ulps. */
static void exact_vs(enum pe_dtype dt, int vs_mp, const char *what, uint64_t bound)
{
	struct total t = {.what = what};
	for (size_t k = 0; k < ncases; k++) {
		const struct kcase *c = &cases[k];
		const double *want = vs_mp ? c->mp : c->ref;
		if (!want)
			continue;
		void *got = run(c->query, dt, c->n, NULL);
		struct stat st = {0};
		for (size_t i = 0; i < c->n; i++)
			stat_add(&st, ulp_vs(dt, got, i, want[i]), i);
		total_add(&t, c, &st);
		free(got);
	}
	total_check(&t, bound, 0);
}

/* compat=exact against the references, each on every kernel path (iteration i: comparison i / NISA
 * on path i % NISA). */
static const struct exact_cmp {
	enum pe_dtype dt;
	int vs_mp;
	const char *what;
	uint64_t bound;
} exact_cmps[] = {
	{PE_F32, 0, "exact f32 vs numpy", 1},
	{PE_F64, 0, "exact f64 vs numpy", F64_VS_NUMPY_ULP},
	{PE_F64, 1, "exact f64 vs mpmath", 1},
	{PE_F16, 0, "exact f16 vs numpy", 1},
	{PE_BF16, 0, "exact bf16 vs numpy", 1},
};
#define NEXACT ((int)(sizeof exact_cmps / sizeof exact_cmps[0]))

START_TEST(exact_vs_references)
{
	const struct exact_cmp *e = &exact_cmps[_i / NISA];
	if (!use_isa(_i % NISA))
		return;
	load_cases();
	exact_vs(e->dt, e->vs_mp, e->what, e->bound);
	free_cases();
}
END_TEST

/* The reference itself: glibc's sin/cos, < 1 ulp from mpmath (no kernel involved). */
START_TEST(numpy_f64_vs_mpmath)
{
	load_cases();
	struct total nm = {.what = "(numpy f64 vs mpmath)"};
	for (size_t k = 0; k < ncases; k++) {
		const struct kcase *c = &cases[k];
		if (!c->mp)
			continue;
		struct stat st = {0};
		for (size_t i = 0; i < c->n; i++)
			stat_add(&st, pe_ulp_f64(c->ref[i], c->mp[i]), i);
		total_add(&nm, c, &st);
	}
	total_check(&nm, 1, 0);
	free_cases();
}
END_TEST

START_TEST(hf_vs_torch)
{
	if (!use_isa(_i))
		return;
	load_cases();
	struct total t = {.what = "hf f32 vs torch"};
	for (size_t k = 0; k < ncases; k++) {
		const struct kcase *c = &cases[k];
		float *got = run(c->hf_query, PE_F32, c->n, NULL);
		double *wide = run(c->hf_query, PE_F64, c->n, NULL);
		struct stat st = {0};
		for (size_t i = 0; i < c->n; i++) {
			stat_add(&st, pe_ulp_f32(got[i], c->torch[i]), i);
			/* hf's values are floats: f64 carries the same float exactly */
			ck_assert_msg(wide[i] == (double)got[i], "%s: hf f64 is not the hf float at %zu", c->hf_query, i);
		}
		total_add(&t, c, &st);
		free(got);
		free(wide);
	}
	total_check(&t, HF_VS_TORCH_ULP, 1);
	free_cases();
}
END_TEST

/* At large positions float32 angles lose the low bits of p*w, so PyTorch's table drifts far from the
 * true one; compat=hf must follow PyTorch there, and compat=exact must not. */
START_TEST(hf_follows_torch_at_large_positions)
{
	if (!use_isa(_i))
		return;
	load_cases();
	struct total th = {.what = "hf f32 vs torch, big p"}, te = {.what = "exact f32 vs torch, big p"};
	double hf_abs = 0, ex_abs = 0;
	for (size_t k = 0; k < ncases; k++) {
		const struct kcase *c = &cases[k];
		int64_t offset;
		float *h = run(c->hf_query, PE_F32, c->n, &offset);
		float *e = run(c->query, PE_F32, c->n, NULL);
		struct stat sh = {0}, se = {0};
		for (size_t r = 0; r < c->len; r++) {
			if (offset + (int64_t)r < LARGE_POSITION)
				continue;
			for (size_t j = 0; j < c->dim; j++) {
				size_t i = r * c->dim + j;
				stat_add(&sh, pe_ulp_f32(h[i], c->torch[i]), i);
				stat_add(&se, pe_ulp_f32(e[i], c->torch[i]), i);
				hf_abs = fmax(hf_abs, fabs((double)h[i] - c->torch[i]));
				ex_abs = fmax(ex_abs, fabs((double)e[i] - c->torch[i]));
			}
		}
		if (sh.count) {
			total_add(&th, c, &sh);
			total_add(&te, c, &se);
		}
		free(h);
		free(e);
	}
	fprintf(stderr, "%-7s positions >= %d: max |hf - torch| %.3g, max |exact - torch| %.3g, exact differs in "
		"%llu of %llu\n", pe_isa_name(), LARGE_POSITION, hf_abs, ex_abs, (unsigned long long)te.all.nonzero,
		(unsigned long long)te.all.count);
	ck_assert_uint_gt(th.all.count, 1000); /* the data has enough large-position rows */
	total_check(&th, HF_VS_TORCH_ULP, 1);
	/* exact is off by whole units somewhere (angles apart by radians), and differs in most entries */
	ck_assert_msg(ex_abs > 0.5, "exact vs torch at large positions: max abs %g", ex_abs);
	ck_assert_uint_gt(te.all.nonzero, te.all.count / 2);
	free_cases();
}
END_TEST

/* The scalar and AVX2 kernels agree within 1 ulp in f64 (both are within 1 ulp of the true value)
 * and in f32. */
START_TEST(scalar_and_avx2_agree)
{
	if (pe_isa_force(PE_ISA_AVX2) != 0) {
		fprintf(stderr, "sinusoidal: no AVX2+FMA on this CPU, path comparison not run\n");
		return;
	}
	load_cases();
	for (int m = 0; m < 2; m++) {
		struct total t64 = {.what = m ? "hf f64 scalar~avx2" : "exact f64 scalar~avx2"},
			     t32 = {.what = m ? "hf f32 scalar~avx2" : "exact f32 scalar~avx2"};
		for (size_t k = 0; k < ncases; k++) {
			const struct kcase *c = &cases[k];
			const char *q = m ? c->hf_query : c->query;
			ck_assert_int_eq(pe_isa_force(PE_ISA_SCALAR), 0);
			double *s64 = run(q, PE_F64, c->n, NULL);
			float *s32 = run(q, PE_F32, c->n, NULL);
			ck_assert_int_eq(pe_isa_force(PE_ISA_AVX2), 0);
			double *a64 = run(q, PE_F64, c->n, NULL);
			float *a32 = run(q, PE_F32, c->n, NULL);
			struct stat d64 = {0}, d32 = {0};
			for (size_t i = 0; i < c->n; i++) {
				stat_add(&d64, pe_ulp_f64(s64[i], a64[i]), i);
				stat_add(&d32, pe_ulp_f32(s32[i], a32[i]), i);
			}
			total_add(&t64, c, &d64);
			total_add(&t32, c, &d32);
			free(s64);
			free(s32);
			free(a64);
			free(a32);
		}
		total_check(&t64, 1, m);
		total_check(&t32, 1, m);
	}
	free_cases();
}
END_TEST

/* Tables of the recurrence (kernels.h): long ones (many anchors), odd widths (kernel tails), both
 * layouts, exact angles in the first-order and the series range, and hf angles. */
static const struct rec_query {
	const char *query;
	size_t len, dim;
} rec_queries[] = {
	{"len=1000&dim=768", 1000, 768},
	{"len=1000&dim=768&compat=hf", 1000, 768},
	{"len=300&dim=37&offset=1073741824", 300, 37},
	{"len=300&dim=62&variant=concat&base=100&offset=5000&compat=hf", 300, 62},
	{"len=300&dim=45&variant=t2t&min_timescale=0.5&max_timescale=20000&offset=3", 300, 45},
	{"len=130&dim=10&variant=t2t&min_timescale=0.01&max_timescale=100&offset=16777000&compat=hf", 130, 10},
	/* the fused f32 kernel (kernels.h sin_row_f32): halves over many anchors; frequencies
	 * rising above 1 (base < 1: the corrected columns are a suffix); sin(64 w) = sin(pi) near
	 * zero in a row between anchors (recomputed directly); cos w < 0 (not fused) */
	{"len=5000&dim=128&variant=concat", 5000, 128},
	{"len=700&dim=66&base=0.9", 700, 66},
	{"len=300&dim=12&variant=t2t&min_timescale=0.04908738521234052&max_timescale=1&offset=1", 300, 12},
	{"len=200&dim=20&base=0.01", 200, 20},
	/* angles past 2^26: the fused kernel's second-order correction, up to 2^37 (2^36.5
	 * here), and past it (not fused) */
	{"len=1100&dim=768&offset=900000000", 1100, 768},
	{"len=300&dim=64&variant=concat&offset=99999999700", 300, 64},
	{"len=100&dim=16&offset=140000000000", 100, 16},
	/* the fused kernel with AVX-512 tails (n % 8 = 5 interleaved, 7 in halves) and groups of
	 * eight straddling the corrected columns' end (first order: [0, 3) of 13; second order:
	 * [0, 33) of 45, 2^34.8); a near-zero value within the first eight columns */
	{"len=300&dim=26", 300, 26},
	{"len=300&dim=46&variant=concat&offset=100000", 300, 46},
	{"len=200&dim=90&base=1000000000000&offset=30000000000", 200, 90},
	{"len=300&dim=16&variant=t2t&min_timescale=0.04908738521234052&max_timescale=1&offset=1", 300, 16},
};
#define NREC (sizeof rec_queries / sizeof rec_queries[0])

/* f32/f16/bf16 tables come from the recurrence, f64 ones from sin/cos of every angle: rounding the
 * f64 table to float is within 1 ulp of the f32 table (the recurrence is within 2^-44 of the true
 * value, 2^-16 from zero). */
START_TEST(recurrence_matches_direct)
{
	const struct rec_query *q = rec_queries;
	if (!use_isa(_i))
		return;
	for (size_t k = 0; k < NREC; k++) {
		size_t n = q[k].len * q[k].dim;
		float *f = run(q[k].query, PE_F32, n, NULL);
		double *d = run(q[k].query, PE_F64, n, NULL);
		struct stat st = {0};
		for (size_t i = 0; i < n; i++)
			stat_add(&st, pe_ulp_f32(f[i], (float)d[i]), i);
		fprintf(stderr, "%-7s recurrence f32 vs direct f64 %-60s max %llu ulp, %llu of %llu differ\n",
			pe_isa_name(), q[k].query, (unsigned long long)st.max, (unsigned long long)st.nonzero,
			(unsigned long long)st.count);
		ck_assert_msg(st.max <= 1, "%s: %llu ulp at row %zu col %zu (%s path)", q[k].query,
			      (unsigned long long)st.max, st.at / q[k].dim, st.at % q[k].dim, pe_isa_name());
		free(f);
		free(d);
	}
}
END_TEST

/* The recurrence queries' f32 tables on the three paths, bit for bit. The fused rows (kernels.h
 * sin_row_f32) do the same operations per column on every path, in the same order; the queries
 * that are not fused run AVX2's kernels on the AVX-512 path. Two things are not the same by
 * construction, each a rounding flip in about one of 2^22 values it touches or fewer, and none
 * flips in these tables: a vector kernel also corrects the neighbours of [lo, hi) in its group of
 * four or eight (a change below 2^-47), and the anchors and cos w, sin w come from glibc on the
 * scalar path and from SLEEF on the others (1 ulp of a double apart). */
START_TEST(fused_paths_bit_identical)
{
	if (pe_isa_force(PE_ISA_AVX512) != 0) {
		fprintf(stderr, "sinusoidal: no AVX-512 on this CPU, its fused rows not compared bit for bit\n");
		return;
	}
	for (size_t k = 0; k < NREC; k++) {
		const struct rec_query *q = &rec_queries[k];
		size_t n = q->len * q->dim;
		float *t[NISA];
		for (int i = 0; i < NISA; i++) {
			ck_assert_int_eq(pe_isa_force(isas[i].isa), 0);
			t[i] = run(q->query, PE_F32, n, NULL);
		}
		for (int i = 0; i < NISA - 1; i++) {
			size_t differ = 0, first = 0;
			for (size_t e = n; e-- > 0;)
				if (memcmp(&t[NISA - 1][e], &t[i][e], sizeof(float)) != 0) {
					differ++;
					first = e;
				}
			fprintf(stderr, "avx512  f32 vs %-8s %-60s %zu of %zu differ in bits\n", isas[i].name,
				q->query, differ, n);
			ck_assert_msg(differ == 0, "%s: AVX-512 %a, %s %a at row %zu col %zu (%zu values differ)",
				      q->query, t[NISA - 1][first], isas[i].name, t[i][first], first / q->dim,
				      first % q->dim, differ);
		}
		for (int i = 0; i < NISA; i++)
			free(t[i]);
	}
}
END_TEST

/* The columns a vector kernel with groups of g corrects when asked for [lo, hi) (kernels.h): the
 * range widened to whole groups within its n / g * g vector columns, plus [lo, hi) itself in the
 * scalar tail past them; one range [*elo, *ehi). */
static void corrected_range(size_t n, size_t g, size_t lo, size_t hi, size_t *elo, size_t *ehi)
{
	size_t ng = n / g * g, a = lo / g * g, b = (hi + g - 1) / g * g;
	a = a < ng ? a : ng;
	b = b < ng ? b : ng;
	if (a < b) {
		*elo = a;
		*ehi = hi > ng ? hi : b;
	} else {
		*elo = lo > ng ? lo : ng;
		*ehi = hi > *elo ? hi : *elo;
	}
}

/* The sin_row_f32 kernels called directly, row after row from the same state: the AVX2 and AVX-512
 * kernels must leave the state (c, s in double) and write the row (float32) bit for bit as the
 * scalar kernel does when it is asked for the columns they correct (corrected_range). The angle
 * offsets d0 are made large (up to 2^-8, where the caller's are below 2^-15) so that every
 * operation of the first- and second-order corrections shows in the floats; every fifth column
 * has d0 = 0 and some of those turn through multiples of pi / 2 (w = pi / 64), where values below
 * 2^-16 are recomputed directly. Widths cover tails of each group size and less than one group. */
START_TEST(fused_kernels_bit_identical)
{
	static const size_t widths[] = {1, 3, 4, 7, 8, 13, 16, 23, 45, 64, 101};
	static const struct {
		enum pe_isa isa;
		size_t group;
		void (*row)(struct pe_rope_rec *, double, size_t, size_t, int, float *);
	} vec[] = {{PE_ISA_AVX2, 4, pe_sin_row_f32_avx2}, {PE_ISA_AVX512, 8, pe_sin_row_f32_avx512}};
	enum { ROWS = 200, NVEC = sizeof vec / sizeof vec[0] };
	int have[NVEC], any = 0;
	for (size_t v = 0; v < NVEC; v++) {
		have[v] = pe_isa_force(vec[v].isa) == 0;
		any |= have[v];
		if (!have[v])
			fprintf(stderr, "sinusoidal: no %s on this CPU, its sin_row_f32 kernel not compared\n",
				vec[v].isa == PE_ISA_AVX2 ? "AVX2+FMA" : "AVX-512");
	}
	if (!any)
		return;
	uint64_t compared = 0;
	for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
		size_t n = widths[wi];
		const size_t ranges[][2] = {{0, 0}, {0, n}, {3, 11}, {8, 16}, {9, n}, {n / 2, n}, {1, n - n / 3}};
		double *w = malloc(sizeof(double) * 4 * n), *cw = w + n, *sw = cw + n, *tw = sw + n;
		double *d0 = malloc(sizeof(double) * n), *st = malloc(sizeof(double) * 2 * n * (1 + NVEC));
		float *o = malloc(sizeof(float) * 2 * n * (1 + NVEC));
		ck_assert(w && d0 && st && o);
		for (size_t i = 0; i < n; i++) {
			w[i] = i % 5 == 2 && i % 3 != 0 ? M_PI / 64 : 1.5 * pow(10.0, -5.0 * (double)i / (double)n);
			sincos(w[i], &sw[i], &cw[i]);
			tw[i] = sw[i] / (1 + cw[i]);
			d0[i] = ldexp((double)((int)(i % 5) - 2), -9); /* -2^-8 .. 2^-8 */
		}
		for (size_t rg = 0; rg < sizeof ranges / sizeof ranges[0]; rg++)
			for (int layout = 0; layout < 2; layout++)
				for (int first = 0; first < 2; first++) {
					size_t lo = ranges[rg][0] < n ? ranges[rg][0] : n;
					size_t hi = ranges[rg][1] < n ? ranges[rg][1] : n;
					/* the state of the scalar reference for kernel v, then kernel v's own */
					struct pe_rope_rec rec[2 * NVEC];
					for (size_t k = 0; k < 2 * NVEC; k++) {
						double *c = k % 2 ? st + 2 * n * (1 + k / 2) : st;
						rec[k] = (struct pe_rope_rec){n, w, cw, sw, c, c + n, d0, first, NULL, tw};
					}
					for (size_t v = 0; v < NVEC; v++) {
						if (!have[v])
							continue;
						size_t elo, ehi;
						corrected_range(n, vec[v].group, lo, hi, &elo, &ehi);
						for (size_t i = 0; i < n; i++) { /* both start at angle 0 */
							st[i] = st[2 * n * (1 + v) + i] = 1;
							st[n + i] = st[2 * n * (1 + v) + n + i] = 0;
						}
						float *ref = o, *got = o + 2 * n * (1 + v);
						for (int r = 1; r <= ROWS; r++) {
							pe_sin_row_f32_scalar(&rec[2 * v], r, elo, ehi, layout, ref);
							vec[v].row(&rec[2 * v + 1], r, lo, hi, layout, got);
							ck_assert_msg(memcmp(ref, got, sizeof(float) * 2 * n) == 0 &&
									      memcmp(st, st + 2 * n * (1 + v),
										     sizeof(double) * 2 * n) == 0,
								      "%s sin_row_f32, n %zu, [%zu, %zu) (scalar: [%zu, %zu)), "
								      "%s, %s order: row %d differs from scalar",
								      vec[v].isa == PE_ISA_AVX2 ? "AVX2" : "AVX-512", n, lo,
								      hi, elo, ehi, layout ? "interleaved" : "halves",
								      first ? "first" : "second", r);
							compared += 2 * n;
						}
					}
				}
		free(w);
		free(d0);
		free(st);
		free(o);
	}
	fprintf(stderr, "sin_row_f32 kernels vs scalar: %llu values compared bit for bit\n",
		(unsigned long long)compared);
}
END_TEST

/* The committed data covers what the comparisons are meant to: every variant, odd and even dim,
 * bases other than 10000, offsets of at least 2^31. */
START_TEST(known_answers_cover_the_cases)
{
	load_cases();
	int vaswani = 0, concat = 0, t2t = 0, odd = 0, base = 0, big = 0, ts = 0;
	for (size_t k = 0; k < ncases; k++) {
		const struct kcase *c = &cases[k];
		int64_t offset;
		free(run(c->query, PE_F32, c->n, &offset));
		vaswani += !strstr(c->query, "variant=") || strstr(c->query, "variant=vaswani");
		concat += strstr(c->query, "variant=concat") != NULL;
		t2t += strstr(c->query, "variant=t2t") != NULL;
		odd += c->dim & 1;
		base += strstr(c->query, "base=") != NULL;
		ts += strstr(c->query, "max_timescale=") != NULL;
		big += offset >= 2147483648LL;
		ck_assert_msg(strstr(c->query, "compat=") == NULL, "%s: query must default to compat=exact", c->name);
	}
	ck_assert(vaswani && concat && t2t && odd && base && ts && big);
	free_cases();
}
END_TEST

/* The frequency memo (one per thread) never changes a table: each query of a sequence that
 * alternates memo hits (same dim and base, another offset or length) and misses (another base,
 * variant, timescale or width) gives the same bits as when it runs alone on a fresh thread. */
static const char *const memo_seq[] = {
	"len=300&dim=128",
	"len=200&dim=128&offset=5000",             /* hit */
	"len=200&dim=128&offset=5000&base=500",    /* miss: base */
	"len=300&dim=128&offset=77",               /* miss, then the old key again */
	"len=300&dim=128&variant=concat&offset=7", /* miss: variant */
	"len=150&dim=130&variant=t2t&offset=3",    /* miss: width */
	"len=150&dim=130&variant=t2t&offset=3&min_timescale=2", /* miss: timescale */
	"len=150&dim=130&variant=t2t&offset=900",  /* hit of the t2t set before */
};
#define NMEMO (sizeof memo_seq / sizeof memo_seq[0])

static size_t memo_count(const char *q)
{
	size_t len = strtoul(strstr(q, "len=") + 4, NULL, 10), dim = strtoul(strstr(q, "dim=") + 4, NULL, 10);
	return len * dim;
}

static void *memo_alone(void *arg)
{
	const char *q = arg;
	return run(q, PE_F32, memo_count(q), NULL);
}

START_TEST(frequency_memo_is_invisible)
{
	if (!use_isa(_i))
		return;
	float *seq[NMEMO];
	for (size_t k = 0; k < NMEMO; k++)
		seq[k] = run(memo_seq[k], PE_F32, memo_count(memo_seq[k]), NULL);
	for (size_t k = 0; k < NMEMO; k++) {
		pthread_t t;
		void *alone = NULL;
		ck_assert_int_eq(pthread_create(&t, NULL, memo_alone, (void *)memo_seq[k]), 0);
		ck_assert_int_eq(pthread_join(t, &alone), 0);
		ck_assert_msg(memcmp(seq[k], alone, memo_count(memo_seq[k]) * sizeof(float)) == 0,
			      "%s: differs after the queries before it (%s path)", memo_seq[k], pe_isa_name());
		free(alone);
		free(seq[k]);
	}
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("sinusoidal");
	TCase *tc = tcase_create("known answers");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, known_answers_cover_the_cases);
	tcase_add_loop_test(tc, exact_vs_references, 0, NEXACT * NISA);
	tcase_add_test(tc, numpy_f64_vs_mpmath);
	tcase_add_loop_test(tc, hf_vs_torch, 0, NISA);
	tcase_add_loop_test(tc, hf_follows_torch_at_large_positions, 0, NISA);
	tcase_add_test(tc, scalar_and_avx2_agree);
	tcase_add_loop_test(tc, recurrence_matches_direct, 0, NISA);
	tcase_add_test(tc, fused_paths_bit_identical);
	tcase_add_test(tc, fused_kernels_bit_identical);
	tcase_add_loop_test(tc, frequency_memo_is_invisible, 0, NISA);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
