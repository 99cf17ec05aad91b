/* A table computed from a query string, as a client's request would have it (find the table,
 * init, set every key=value, finish, shape, compute), for unit and e2e tests. Failures are check
 * assertions. */
#ifndef PE_TEST_TABLE_H
#define PE_TEST_TABLE_H

#include "posenc/core.h"

/* Set every key=value of query ("a=1&b=2") on p, passing over the keys in skip (NULL-terminated,
 * may be NULL); returns the first error (err filled) or 0. */
int pe_query_set(struct pe_params *p, const char *query, const char *const *skip, struct pe_err *err);

/* Parse and validate a query for a table (init, set, finish): 0, or the error code with err
 * filled. p must be destroyed by the caller either way. Fails the test if there is no such table. */
int pe_query_params(struct pe_params *p, const char *table, const char *query, struct pe_err *err);

/* The table of a valid query as dtype dt (caller frees); its shape into *s when s is not NULL. The
 * keys only the HTTP layer reads (format, dtype) are passed over, so an HTTP query works as is. */
void *pe_query_table(const char *table, const char *query, enum pe_dtype dt, struct pe_shape *s);

#endif
