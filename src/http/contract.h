/* What a route accepts, declared: one struct pe_contract per method (or group of methods), that
 * the router enforces in one begin phase (pe_contract_begin), the same way for every handler,
 * before any of the handler's own code runs:
 *
 *   method       not listed by any of the route's entries: 405 with Allow
 *   guard_cb     the handler's own refusals that must come first (learned.c: authorisation)
 *   query        one parser (query.h): empty names, %00, unknown names, repeats, empty values and
 *                mistyped or out-of-range values are a 400 naming the parameter; on a route that
 *                takes a body, answered once the body has been read (the checks below first), on a
 *                connection kept open, unless the entry says query_first
 *   draining     a route that takes a body: 503
 *   Content-Type missing, or not one of media: 415 naming Content-Type (parameters aside; their
 *                names match case-insensitively, media.h)
 *   Content-Length  framing's (server.c), over the body limit: 413 naming body
 *   the body     collected into r->body within the limit (multipart: by the handler's begin_cb)
 *   begin_cb     what is left to the handler (multipart's reader)
 * and, once the body has ended, a body past the limit (chunked) is the same 413 before finish_cb.
 *
 * A handler then reads its parsed query with pe_contract_query and writes no parsing code of its
 * own. Example, a POST route taking JSON with one integer parameter:
 *
 *     static const struct pe_param_spec specs[] = {{"len", PE_PT_INT, "", 1, 1 << 30, NULL, "rows"}};
 *     static const struct pe_table_def params = {.name = "plan", .params = specs, .nparams = 1};
 *     static const struct pe_contract contract[] = {
 *             {.methods = "POST", .params = &params, .finish = 1, .media = "application/json"},
 *             {0}};
 *     const struct pe_handler h = {..., .contract = contract, .finish_cb = finish_cb};
 */
#ifndef PE_HTTP_CONTRACT_H
#define PE_HTTP_CONTRACT_H

#include "http/internal.h"
#include "http/query.h"

struct pe_contract {
	const char *methods; /* "GET, HEAD", "POST", ... (NULL ends an array of entries) */
	/* The query: the parameters of params, or of the table the route matched (target_params:
	 * r->target, a struct pe_table_def), the output options (output: format, dtype, cmap, scale)
	 * and the route's extras (a parameter list of its own). finish: defaults, required values and
	 * the table's cross checks (pe_params_finish) in the begin phase too; 0 when the handler
	 * completes the parameters from the body first. */
	const struct pe_table_def *params;
	int target_params;
	int output;
	const struct pe_table_def *extras;
	int finish;
	/* The body: the media types taken ("application/x-npy, application/json"; NULL: no body
	 * expected, so no Content-Type rule), and its limit in bytes (NULL: max_body_bytes) with
	 * what the limit is, for the 413's detail (NULL: max_body_bytes). */
	const char *media;
	uint64_t (*body_limit_cb)(const struct pe_http *h);
	const char *limit_name;
	/* A bad query refuses the body before it is read (dropped, the connection closed after): a
	 * write whose query says what is stored. 0: the body is read and the query's 400 answered
	 * after it. */
	int query_first;
	/* A parameter that takes forms of the route's own besides its table's choices, and those forms
	 * ("learned:{name}"): a refused choice of it lists them after the table's (NULL: none). */
	const char *more_choices_param, *more_choices;
};

/* The begin phase of a route with a declaration (router.c). MHD_YES, the request refused or its
 * body wanted (r->refusal, r->body_wanted); MHD_NO when out of memory. */
enum MHD_Result pe_contract_begin(struct req *r, struct MHD_Connection *conn, const char *url);
/* The 413 of a body that passed its limit as it arrived (r->body_too_big), else the query's held
 * 400, answered before the handler's finish_cb; MHD_YES with nothing done otherwise and
 * *answered 0. */
enum MHD_Result pe_contract_finish(struct req *r, struct MHD_Connection *conn, int *answered);
/* r->allow for an OPTIONS request: the methods the route's declaration takes, and OPTIONS. */
void pe_contract_allow(struct req *r, struct MHD_Connection *conn, const char *url);
/* The request's parsed query (NULL for a route without a declaration). */
struct pe_query *pe_contract_query(struct req *r);
/* The value of the request's first query parameter named name (ASCII case ignored, as
 * libmicrohttpd's lookup), on any route, before or after the begin phase; NULL when there is none
 * or it has no '='. */
const char *pe_contract_query_value(const struct req *r, const char *name);
/* The request's parameters moved into to (its lists with them), for a job that outlives the
 * request; the query keeps the output options and extras. */
void pe_contract_take_params(struct req *r, struct pe_params *to);
/* For a contract_cb with one entry for this request: c when it lists r->method, else NULL with
 * r->allow set to c's methods (405). */
const struct pe_contract *pe_contract_only(struct req *r, const struct pe_contract *c);
/* The body limit of the request's declaration (max_body_bytes without one). */
uint64_t pe_contract_body_limit(const struct req *r);
/* The request's declaration and query go (router.c, when the request ends). */
void pe_contract_end(struct req *r);

#endif
