/* Known answers over HTTP: every case of a tests/data/<dir> manifest (tests/ref/kat.py) fetched
 * from a running daemon as raw bytes of one dtype and compared with the case's reference file,
 * X-PE-Shape included. Header-only (static inline), for e2e programs (pe_daemon and pe_kat). */
#ifndef PE_TEST_KAT_HTTP_H
#define PE_TEST_KAT_HTTP_H

#include "support/pe_daemon.h"
#include "support/pe_kat.h"

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
				ck_assert_msg(got == ((int32_t *)ref)[j], "%s [%zu]: %d, the reference %d", path, j, got,
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

#endif
