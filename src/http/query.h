/* The one query parser of every route that declares its parameters (contract.h): one key=value
 * at a time, against the route's parameters (a struct pe_table_def: a table's own, or a route's
 * declaration), the output options (pe_out_is_param) when the route takes them, and the route's
 * extras (a second parameter list: transform's shape=, similarity's encoding=). Pure: no MHD
 * types, so the unit tests (tests/http/test_query_parse.c) drive what the server runs.
 *
 * Every fault is PE_EINVAL (400) with err->param naming the parameter, the same for every route:
 * an empty name (param ""), a NUL byte in the name or value ("%00"), a name the route does not
 * declare, a name given twice, an empty value, a value that is not of the declared type or out
 * of its range (the core's pe_params_set). */
#ifndef PE_HTTP_QUERY_H
#define PE_HTTP_QUERY_H

#include <stddef.h>
#include "posenc/core.h"
#include "posenc/output.h"

/* The most parameters a query may carry (a route takes far fewer; each given once): more is a 400
 * naming "query", answered before libmicrohttpd keeps a record of each in its connection pool. */
#define PE_QUERY_MAX_PARAMS 64

struct pe_query {
	struct pe_params params; /* the route's parameters */
	struct pe_params extras; /* the route's extras */
	struct pe_out_query out; /* the output options (values point into the request) */
	int output;              /* the output options are parameters here */
	const char *route;       /* for "unknown parameter 'x' for <route>" */
	struct pe_err late;      /* a refusal held until the body is read (contract.c) */
};

/* params / extras NULL: none. route is kept (not copied). */
void pe_query_init(struct pe_query *q, const struct pe_table_def *params, const struct pe_table_def *extras,
		   int output, const char *route);
/* One parameter, as the request carries it once percent-decoded: key_len and value_len are the
 * decoded lengths (a decoded %00 makes them longer than the strings); value NULL: "key" alone. */
int pe_query_take(struct pe_query *q, const char *key, size_t key_len, const char *value, size_t value_len,
		  struct pe_err *err);
/* The number of parameters in query (the text after '?'): its '&'-separated pieces, a last
 * empty one none, as pe_query_split counts them. */
size_t pe_query_count(const char *query);
/* The percent-decoding of paths and query parameters, in place (query.c): the decoded length. */
size_t pe_query_unescape(char *s);
/* One parameter of a query split by pe_query_split: name and value point into the query's text,
 * decoded in place; value NULL for a name without '='. */
struct pe_query_arg {
	const char *key, *value;
	size_t key_len, value_len;
};
/* Split query (the text after '?', rewritten in place) into at most max parameters, as
 * libmicrohttpd 0.9.75 splits a request's query: the pieces between '&' (a last empty piece is
 * none), the name up to the piece's first '=', '+' as a space, then unescape (the server's
 * percent-decoding, returning the decoded length) on the name and on the value. Their count. */
size_t pe_query_split(char *query, struct pe_query_arg *args, size_t max, size_t (*unescape)(char *s));
/* The text of extra name, or NULL when it was not given. */
const char *pe_query_extra(const struct pe_query *q, const char *name);
void pe_query_destroy(struct pe_query *q);

#endif
