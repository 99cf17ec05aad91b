/* Known answers over HTTP: every case of a tests/data/<dir> manifest (tests/ref/kat.py) fetched
 * from a running daemon as raw bytes of one dtype and compared with the case's reference file,
 * X-PE-Shape included; and the walk a test with checks of its own takes through a manifest's cases
 * against one daemon. Header-only (static inline), for e2e programs (pe_daemon and pe_kat). */
#ifndef PE_TEST_KAT_HTTP_H
#define PE_TEST_KAT_HTTP_H

#include "support/pe_daemon.h"
#include "support/pe_kat.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline void pe_kat_http_shape(const struct pe_resp *r, const struct pe_shape *s, const char *path)
{
	char want[96] = "", got[96];
	size_t at = 0;
	for (int i = 0; i < s->rank; i++)
		at += (size_t)snprintf(want + at, sizeof want - at, "%s%zu", i ? "," : "", s->dim[i]);
	ck_assert_msg(pe_resp_header(r, "X-PE-Shape", got, sizeof got) != NULL, "%s: no X-PE-Shape", path);
	ck_assert_msg(strcmp(got, want) == 0, "%s: X-PE-Shape %s, expected %s", path, got, want);
}

/* Every case of dir having query_field and file, fetched from d as format=bin in dt: i32 entries
 * equal to the file's, float ones within 1 ulp of it (f64 or f32 file). Returns the cases. */
static inline size_t pe_kat_http_compare(const struct pe_daemon *d, const char *dir, const char *query_field,
					 const char *file, enum pe_dtype dt, const char *what)
{
	struct pe_kat k;
	struct pe_kat_max m = {.what = what};
	size_t cases = 0;
	pe_kat_load(&k, dir);
	for (size_t i = 0; i < pe_kat_count(&k); i++) {
		json_t *c = pe_kat_case(&k, i);
		if (!pe_kat_has(c, query_field) || !pe_kat_has(c, file))
			continue;
		struct pe_shape s;
		size_t n = pe_kat_shape(c, &s);
		int f64file = strstr(file, "f64") != NULL;
		void *ref = pe_kat_file(&k, c, file, n * (f64file ? 8 : 4));
		char path[600];
		snprintf(path, sizeof path, "/v1/%s?%s&format=bin&dtype=%s", pe_kat_str(c, "table"),
			 pe_kat_str(c, query_field), pe_dtype_name(dt));
		struct pe_resp r;
		pe_get(d, path, &r);
		ck_assert_msg(r.status == 200, "%s: %ld %s", path, r.status, r.body ? r.body : "");
		ck_assert_msg(r.len == n * pe_dtype_size(dt), "%s: %zu bytes", path, r.len);
		pe_kat_http_shape(&r, &s, path);
		for (size_t j = 0; j < n; j++) {
			if (dt == PE_I32) {
				int32_t got;
				memcpy(&got, r.body + 4 * j, 4);
				PE_CHECK(got == ((int32_t *)ref)[j], "%s [%zu]: %d, the reference %d", path, j, got,
				         ((int32_t *)ref)[j]);
				continue;
			}
			pe_kat_max_add(&m, pe_kat_ulp(dt, r.body, j, f64file ? ((double *)ref)[j] : ((float *)ref)[j]), path, j);
		}
		pe_resp_free(&r);
		free(ref);
		cases++;
	}
	pe_kat_free(&k);
	if (dt != PE_I32)
		pe_kat_max_check(&m, 1);
	return cases;
}

/* A daemon and a manifest walked case by case: the start, the filter on "table" and the end that
 * every known-answer e2e test with checks of its own shares. */
struct pe_kat_walk {
	struct pe_daemon d; /* every case is fetched from it (default settings) */
	struct pe_kat k;    /* the manifest being walked */
	json_t *c;          /* the current case */
	struct pe_shape s;  /* its shape */
	size_t n;           /* its number of elements */
	size_t at;          /* the index of the case after it */
	size_t checked;     /* what the test counted, held against a minimum at the end */
};

/* Walk dir's manifest from its first case; the daemon stays. */
static inline void pe_kat_walk_load(struct pe_kat_walk *w, const char *dir)
{
	if (w->k.cases)
		pe_kat_free(&w->k);
	pe_kat_load(&w->k, dir);
	w->at = 0;
}

/* Start a daemon and walk dir's manifest. */
static inline void pe_kat_walk_start(struct pe_kat_walk *w, const char *dir)
{
	memset(w, 0, sizeof *w);
	pe_daemon_start(&w->d, NULL);
	pe_kat_walk_load(w, dir);
}

/* The next case whose "table" is one of tables (NULL-terminated; NULL: any) into c, s and n: 1, or
 * 0 past the last. */
static inline int pe_kat_walk_next(struct pe_kat_walk *w, const char *const *tables)
{
	while (w->at < pe_kat_count(&w->k)) {
		json_t *c = pe_kat_case(&w->k, w->at++);
		int match = !tables;
		for (size_t t = 0; !match && tables[t]; t++)
			match = !strcmp(pe_kat_str(c, "table"), tables[t]);
		if (match) {
			w->c = c;
			w->n = pe_kat_shape(c, &w->s);
			return 1;
		}
	}
	return 0;
}

/* The end: at least min counted, the manifest freed, the daemon stopped with status 0. */
static inline void pe_kat_walk_end(struct pe_kat_walk *w, size_t min)
{
	ck_assert_uint_ge(w->checked, min);
	pe_kat_free(&w->k);
	ck_assert_int_eq(pe_daemon_stop(&w->d, SIGTERM), 0);
}

#endif
