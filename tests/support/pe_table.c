/* A table from a query, for tests (see pe_table.h). */
#include "support/pe_table.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static int skipped(const char *key, const char *const *skip)
{
	for (int i = 0; skip && skip[i]; i++)
		if (strcmp(key, skip[i]) == 0)
			return 1;
	return 0;
}

int pe_query_set(struct pe_params *p, const char *query, const char *const *skip, struct pe_err *err)
{
	char *q = strdup(query), *save = NULL;
	int rc = 0;
	ck_assert_ptr_nonnull(q);
	for (char *kv = strtok_r(q, "&", &save); kv && rc == 0; kv = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(kv, '=');
		ck_assert_msg(eq != NULL, "%s: no '=' in '%s'", query, kv);
		*eq = 0;
		if (!skipped(kv, skip))
			rc = pe_params_set(p, kv, eq + 1, err);
	}
	free(q);
	return rc;
}

static int params_skip(struct pe_params *p, const char *table, const char *query, const char *const *skip,
		       struct pe_err *err)
{
	const struct pe_table_def *def = pe_table_find(table);
	ck_assert_msg(def != NULL, "no table %s", table);
	pe_params_init(p, def);
	pe_err_clear(err);
	int rc = pe_query_set(p, query, skip, err);
	return rc ? rc : pe_params_finish(p, err);
}

int pe_query_params(struct pe_params *p, const char *table, const char *query, struct pe_err *err)
{
	return params_skip(p, table, query, NULL, err);
}

void *pe_query_table(const char *table, const char *query, enum pe_dtype dt, struct pe_shape *s)
{
	static const char *const http_only[] = {"format", "dtype", NULL};
	struct pe_params p;
	struct pe_err err;
	struct pe_shape shape;
	int overflow;
	int rc = params_skip(&p, table, query, http_only, &err);
	ck_assert_msg(rc == 0, "/v1/%s?%s rejected: %s: %s", table, query, err.param, err.detail);
	ck_assert_int_eq(pe_table_shape(&p, &shape), 0);
	size_t n = pe_shape_count(&shape, &overflow);
	ck_assert_msg(!overflow, "/v1/%s?%s: the element count overflows", table, query);
	void *out = malloc(n ? n * pe_dtype_size(dt) : 1);
	ck_assert_ptr_nonnull(out);
	rc = pe_table_compute(&p, dt, out, &err);
	ck_assert_msg(rc == 0, "/v1/%s?%s: %s", table, query, err.detail);
	pe_params_destroy(&p);
	if (s)
		*s = shape;
	return out;
}
