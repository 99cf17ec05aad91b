/* Known-answer test helpers: read a tests/data/<dir>/cases.json manifest written by
 * tests/ref/kat.py, drive a table through the core exactly as a client's query would (find, init,
 * set every key=value, finish, shape, compute: support/pe_table.h), and track ulp distances per
 * comparison. The loops the KAT tests share are here once: a table against a reference file over
 * every case that has both (pe_kat_compare, with scaled cases held apart), and the scalar path
 * against the AVX2 path (pe_kat_paths); tests keep only what is particular to them.
 *
 * Header-only (static inline): every check program links pe_check.o and pe_table.o, which is all
 * it needs. Every failure is a check assertion. */
#ifndef PE_TEST_KAT_H
#define PE_TEST_KAT_H

#include "posenc/core.h"
#include "support/pe_check.h"
#include "support/pe_table.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pe_kat {
	char dir[256];
	json_t *root, *cases;
};

static inline void pe_kat_load(struct pe_kat *k, const char *dir)
{
	char path[300];
	json_error_t jerr;
	snprintf(k->dir, sizeof k->dir, "%s", dir);
	snprintf(path, sizeof path, "%s/cases.json", dir);
	k->root = json_load_file(path, 0, &jerr);
	ck_assert_msg(k->root != NULL, "%s: %s (line %d)", path, jerr.text, jerr.line);
	k->cases = json_object_get(k->root, "cases");
	ck_assert_msg(json_array_size(k->cases) > 0, "%s: no cases", path);
}

static inline void pe_kat_free(struct pe_kat *k)
{
	json_decref(k->root);
	k->root = k->cases = NULL;
}

static inline size_t pe_kat_count(const struct pe_kat *k) { return json_array_size(k->cases); }
static inline json_t *pe_kat_case(const struct pe_kat *k, size_t i) { return json_array_get(k->cases, i); }
static inline int pe_kat_has(json_t *c, const char *field) { return json_object_get(c, field) != NULL; }

static inline const char *pe_kat_str(json_t *c, const char *field)
{
	const char *s = json_string_value(json_object_get(c, field));
	ck_assert_msg(s != NULL, "cases.json: case without \"%s\"", field);
	return s;
}

/* The case's shape; returns its element count. */
static inline size_t pe_kat_shape(json_t *c, struct pe_shape *s)
{
	json_t *a = json_object_get(c, "shape");
	size_t n = 1;
	memset(s, 0, sizeof *s);
	s->rank = (int)json_array_size(a);
	ck_assert_int_gt(s->rank, 0);
	ck_assert_int_le(s->rank, PE_MAX_RANK);
	for (int i = 0; i < s->rank; i++) {
		s->dim[i] = (size_t)json_integer_value(json_array_get(a, (size_t)i));
		n *= s->dim[i];
	}
	ck_assert_uint_gt(n, 0);
	return n;
}

/* The file named by the case's field (e.g. "ref_f64"), which must hold exactly `bytes` bytes. */
static inline void *pe_kat_file(const struct pe_kat *k, json_t *c, const char *field, size_t bytes)
{
	char path[600];
	size_t len;
	snprintf(path, sizeof path, "%s/%s", k->dir, pe_kat_str(c, field));
	void *p = pe_test_read_file(path, &len);
	ck_assert_msg(len == bytes, "%s: %zu bytes, expected %zu", path, len, bytes);
	return p;
}

/* Compute a table for a valid query as dtype dt; its shape must equal want. Caller frees. */
static inline void *pe_kat_run(const char *table, const char *query, enum pe_dtype dt, const struct pe_shape *want)
{
	struct pe_shape s;
	void *out = pe_query_table(table, query, dt, &s);
	ck_assert_int_eq(s.rank, want->rank);
	for (int i = 0; i < s.rank; i++)
		ck_assert_msg(s.dim[i] == want->dim[i], "%s: axis %d is %zu, expected %zu", query, i, s.dim[i], want->dim[i]);
	return out;
}

/* An M-RoPE positions case: the core's int32 [3, seq] ids equal the reference file's exactly, and
 * the table's extra value is the case's mrope_position_delta. */
static inline void pe_kat_positions_case(const struct pe_kat *k, json_t *c)
{
	struct pe_shape s;
	size_t n = pe_kat_shape(c, &s);
	const char *query = pe_kat_str(c, "query");
	int32_t *ref = pe_kat_file(k, c, "ref_i32", n * 4);
	int32_t *got = pe_kat_run("rope/mrope/positions", query, PE_I32, &s);
	for (size_t j = 0; j < n; j++)
		PE_CHECK(got[j] == ref[j], "%s [%zu]: %d, expected %d", query, j, got[j], ref[j]);
	struct pe_params p;
	struct pe_err err;
	ck_assert_int_eq(pe_query_params(&p, "rope/mrope/positions", query, &err), 0);
	ck_assert_double_eq(p.def->extra(&p), (double)json_integer_value(json_object_get(c, "mrope_position_delta")));
	pe_params_destroy(&p);
	free(ref);
	free(got);
}

/* The query must be refused with PE_EINVAL naming param (err.param) and mentioning it in the detail. */
static inline void pe_kat_rejects(const char *table, const char *query, const char *param)
{
	struct pe_params p;
	struct pe_err err;
	int rc = pe_query_params(&p, table, query, &err);
	pe_params_destroy(&p);
	ck_assert_msg(rc == PE_EINVAL, "/v1/%s?%s: accepted (rc %d), expected an error naming %s", table, query, rc,
		      param);
	ck_assert_msg(strcmp(err.param, param) == 0, "/v1/%s?%s: error names '%s', expected '%s' (%s)", table, query,
		      err.param, param, err.detail);
	ck_assert_msg(strstr(err.detail, param) != NULL, "/v1/%s?%s: detail does not mention %s: %s", table, query,
		      param, err.detail);
}

/* A query the core must refuse, and the parameter its error names. */
struct pe_kat_refusal {
	const char *table, *query, *param;
};

/* pe_kat_rejects for each of n refusals. */
static inline void pe_kat_rejects_all(const struct pe_kat_refusal *bad, size_t n)
{
	for (size_t i = 0; i < n; i++)
		pe_kat_rejects(bad[i].table, bad[i].query, bad[i].param);
}

/* Force kernel path i (0 scalar, 1 AVX2, 2 AVX-512); 0 when the CPU lacks it (the caller skips,
 * said on stderr). The AVX-512 path differs from AVX2 only in the fused sinusoidal row
 * (src/core/kernels.c): tests of other tables loop over 0..1. */
static inline int pe_kat_use_isa(int i)
{
	static const char *const names[] = {"scalar", "AVX2+FMA", "AVX-512"};
	ck_assert_int_ge(i, 0);
	ck_assert_int_le(i, 2);
	if (pe_isa_force(i == 0 ? PE_ISA_SCALAR : i == 1 ? PE_ISA_AVX2 : PE_ISA_AVX512) != 0) {
		ck_assert_msg(i != 0, "the scalar path was refused");
		fprintf(stderr, "no %s on this CPU: %s path not tested\n", names[i], names[i]);
		return 0;
	}
	return 1;
}

/* Element i of a float buffer of dtype dt, as double. */
static inline double pe_kat_get(enum pe_dtype dt, const void *buf, size_t i)
{
	switch (dt) {
	case PE_F64:
		return ((const double *)buf)[i];
	case PE_F32:
		return ((const float *)buf)[i];
	case PE_F16:
		return pe_f16_to_f32(((const uint16_t *)buf)[i]);
	case PE_BF16:
		return pe_bf16_to_f32(((const uint16_t *)buf)[i]);
	default:
		return ((const int32_t *)buf)[i];
	}
}

/* Ordered distance of two 16-bit sign-magnitude floats (f16 or bf16), in ulps. */
static inline uint64_t pe_kat_ulp16(uint16_t a, uint16_t b)
{
	int32_t x = (a & 0x8000) ? -(int32_t)(a & 0x7fff) : (int32_t)(a & 0x7fff);
	int32_t y = (b & 0x8000) ? -(int32_t)(b & 0x7fff) : (int32_t)(b & 0x7fff);
	return (uint64_t)(x > y ? x - y : y - x);
}

/* Ulps between element i of buf (dtype dt) and the double ref rounded once to dt. */
static inline uint64_t pe_kat_ulp(enum pe_dtype dt, const void *buf, size_t i, double ref)
{
	switch (dt) {
	case PE_F64:
		return pe_ulp_f64(((const double *)buf)[i], ref);
	case PE_F32:
		return pe_ulp_f32(((const float *)buf)[i], (float)ref);
	case PE_F16:
		return pe_kat_ulp16(((const uint16_t *)buf)[i], pe_f64_to_f16(ref));
	case PE_BF16:
		return pe_kat_ulp16(((const uint16_t *)buf)[i], pe_f64_to_bf16(ref));
	default:
		return ((const int32_t *)buf)[i] == (int32_t)ref ? 0 : UINT64_MAX;
	}
}

/* The largest ulp distance of one comparison over many cases, with where it happened. */
struct pe_kat_max {
	const char *what;
	uint64_t max, differ, count;
	char where[160];
};

static inline void pe_kat_max_add(struct pe_kat_max *m, uint64_t ulps, const char *query, size_t i)
{
	if (ulps > m->max || m->count == 0) {
		m->max = ulps;
		snprintf(m->where, sizeof m->where, "%.120s [%zu]", query, i);
	}
	m->differ += ulps != 0;
	m->count++;
}

/* Print the measured maximum (so accuracy regressions show before a bound fails) and check it. */
static inline void pe_kat_max_check(const struct pe_kat_max *m, uint64_t bound)
{
	fprintf(stderr, "%-7s %-40s max %llu ulp (bound %llu), %llu of %llu differ; worst %s\n", pe_isa_name(), m->what,
		(unsigned long long)m->max, (unsigned long long)bound, (unsigned long long)m->differ,
		(unsigned long long)m->count, m->where);
	ck_assert_msg(m->count > 0, "%s: nothing compared", m->what);
	ck_assert_msg(m->max <= bound, "%s: %llu ulp > %llu at %s (%s path)", m->what, (unsigned long long)m->max,
		      (unsigned long long)bound, m->where, pe_isa_name());
}

/* One comparison over the cases of a KAT directory: the table each case names, computed from the
 * case's query_field as dt, against the reference file the case names in `file`. */
struct pe_kat_cmp {
	const char *table;       /* only cases of this table; NULL: every case */
	const char *query_field; /* "query", "hf_query", "ggml_query" */
	const char *file;        /* "ref_f64", "mp_f64" (doubles) or "torch_f32", "ggml_f32" (floats) */
	enum pe_dtype dt;
	const char *scale_field; /* cases where it is present and not 1 count as scaled; NULL: none */
	int f64_is_f32;          /* also compute as f64: it must carry the dt (f32) output exactly */
};

static inline int pe_kat_wanted(json_t *c, const char *table)
{
	return !table || strcmp(pe_kat_str(c, "table"), table) == 0;
}

static inline int pe_kat_scaled(json_t *c, const char *field)
{
	json_t *v = field ? json_object_get(c, field) : NULL;
	return v && json_real_value(v) != 1.0;
}

/* The ulps of element j of got (dtype dt) from element j of a reference file of doubles or floats.
 * Float references against f64 output: the f64 must be a float (carried exactly), compared as one. */
static inline uint64_t pe_kat_ref_ulp(enum pe_dtype dt, const void *got, const void *ref, int f64file, size_t j,
				      const char *query)
{
	double r = f64file ? ((const double *)ref)[j] : ((const float *)ref)[j];
	if (f64file || dt != PE_F64)
		return pe_kat_ulp(dt, got, j, r);
	double g = ((const double *)got)[j];
	PE_CHECK(g == (double)(float)g, "%s [%zu]: f64 is not a float", query, j);
	return pe_ulp_f32((float)g, (float)r);
}

/* For every case having cmp's query field and file: each element's ulps into m (scaled cases into
 * scaled, which may be m). */
static inline void pe_kat_compare(const struct pe_kat *k, const struct pe_kat_cmp *cmp, struct pe_kat_max *m,
				  struct pe_kat_max *scaled)
{
	int f64file = strstr(cmp->file, "f64") != NULL;
	for (size_t i = 0; i < pe_kat_count(k); i++) {
		json_t *c = pe_kat_case(k, i);
		if (!pe_kat_wanted(c, cmp->table) || !pe_kat_has(c, cmp->query_field) || !pe_kat_has(c, cmp->file))
			continue;
		struct pe_shape s;
		size_t n = pe_kat_shape(c, &s);
		const char *query = pe_kat_str(c, cmp->query_field), *table = pe_kat_str(c, "table");
		void *ref = pe_kat_file(k, c, cmp->file, n * (f64file ? 8 : 4));
		void *got = pe_kat_run(table, query, cmp->dt, &s);
		double *wide = cmp->f64_is_f32 ? pe_kat_run(table, query, PE_F64, &s) : NULL;
		struct pe_kat_max *into = pe_kat_scaled(c, cmp->scale_field) ? scaled : m;
		for (size_t j = 0; j < n; j++) {
			pe_kat_max_add(into, pe_kat_ref_ulp(cmp->dt, got, ref, f64file, j, query), query, j);
			if (wide)
				PE_CHECK(wide[j] == pe_kat_get(cmp->dt, got, j), "%s: f64 is not the %s value at %zu", query,
				         pe_dtype_name(cmp->dt), j);
		}
		free(ref);
		free(got);
		free(wide);
	}
}

/* pe_kat_compare over the cases of dir, checked against bound (scaled cases against bound_scaled). */
static inline void pe_kat_compare_dir(const char *dir, const struct pe_kat_cmp *cmp, const char *what, uint64_t bound,
				      uint64_t bound_scaled)
{
	struct pe_kat k;
	struct pe_kat_max m = {.what = what}, ms = {.what = "  (scaled cases)"};
	pe_kat_load(&k, dir);
	pe_kat_compare(&k, cmp, &m, &ms);
	pe_kat_free(&k);
	pe_kat_max_check(&m, bound);
	if (ms.count)
		pe_kat_max_check(&ms, bound_scaled);
}

/* pe_kat_compare_dir once per float dtype (f64, f32, f16, bf16), cmp->dt set to each; `label` is a
 * printf format whose %s is the dtype's name. Scaled cases are held to bound_scaled, in f64 to
 * bound_scaled_f64 (the product with attention_scaling rounds once more there). */
static inline void pe_kat_compare_dtypes(const char *dir, const struct pe_kat_cmp *cmp, const char *label,
					 uint64_t bound, uint64_t bound_scaled, uint64_t bound_scaled_f64)
{
	static const enum pe_dtype dts[] = {PE_F64, PE_F32, PE_F16, PE_BF16};
	for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++) {
		struct pe_kat_cmp one = *cmp;
		char what[64];
		one.dt = dts[t];
		snprintf(what, sizeof what, label, pe_dtype_name(dts[t]));
		pe_kat_compare_dir(dir, &one, what, bound, dts[t] == PE_F64 ? bound_scaled_f64 : bound_scaled);
	}
}

/* 1 when the AVX2 path can be forced; else 0, said on stderr (the caller skips). */
static inline int pe_kat_have_avx2(const char *who)
{
	if (pe_isa_force(PE_ISA_AVX2) == 0)
		return 1;
	fprintf(stderr, "%sno AVX2+FMA on this CPU: path comparison not run\n", who);
	return 0;
}

/* For every case having cmp's query field: the table as dt on the scalar path against the AVX2
 * path, each element's ulps into m (scaled cases into scaled). cmp->file is not read. */
static inline void pe_kat_paths(const struct pe_kat *k, const struct pe_kat_cmp *cmp, struct pe_kat_max *m,
				struct pe_kat_max *scaled)
{
	for (size_t i = 0; i < pe_kat_count(k); i++) {
		json_t *c = pe_kat_case(k, i);
		if (!pe_kat_wanted(c, cmp->table) || !pe_kat_has(c, cmp->query_field))
			continue;
		struct pe_shape s;
		size_t n = pe_kat_shape(c, &s);
		const char *query = pe_kat_str(c, cmp->query_field), *table = pe_kat_str(c, "table");
		ck_assert_int_eq(pe_isa_force(PE_ISA_SCALAR), 0);
		void *a = pe_kat_run(table, query, cmp->dt, &s);
		ck_assert_int_eq(pe_isa_force(PE_ISA_AVX2), 0);
		void *b = pe_kat_run(table, query, cmp->dt, &s);
		struct pe_kat_max *into = pe_kat_scaled(c, cmp->scale_field) ? scaled : m;
		for (size_t j = 0; j < n; j++)
			pe_kat_max_add(into, pe_kat_ulp(cmp->dt, a, j, pe_kat_get(cmp->dt, b, j)), query, j);
		free(a);
		free(b);
	}
}

/* The usual path comparison of a directory's cases (of table, or all): exact f64 and hf f32,
 * scalar against AVX2, each within 1 ulp; `name` starts the printed labels. */
static inline void pe_kat_paths_agree(const char *const *dirs, size_t ndirs, const char *table, const char *name)
{
	char w64[64], w32[64];
	snprintf(w64, sizeof w64, "%s exact f64 scalar~avx2", name);
	snprintf(w32, sizeof w32, "%s hf f32 scalar~avx2", name);
	struct pe_kat_max m64 = {.what = w64}, m32 = {.what = w32};
	const struct pe_kat_cmp c64 = {.table = table, .query_field = "query", .dt = PE_F64},
				c32 = {.table = table, .query_field = "hf_query", .dt = PE_F32};
	for (size_t d = 0; d < ndirs; d++) {
		struct pe_kat k;
		pe_kat_load(&k, dirs[d]);
		pe_kat_paths(&k, &c64, &m64, &m64);
		pe_kat_paths(&k, &c32, &m32, &m32);
		pe_kat_free(&k);
	}
	pe_kat_max_check(&m64, 1);
	pe_kat_max_check(&m32, 1);
}


#endif
