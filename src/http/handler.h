/* An endpoint family as the router sees it: a struct of callbacks, in the spirit of h2o's on_req.
 * Each handler file defines one (tables, analysis, transforms, learned tables, operations,
 * static files); handlers.c lists them in the order the router tries them. The router and the
 * server call a handler only through these callbacks. See src/http/README.md for an example.
 *
 * All callbacks run on libmicrohttpd's thread. A request's life:
 *   match_cb     does the URL belong here? (first call, before the body)
 *   contract     what the route accepts, declared; the router's begin phase enforces it
 *                (contract.h: method, query, Content-Type, Content-Length, body limit) and
 *                hands the handler the parsed query, so no handler parses a request itself
 *   guard_cb     first call, before the query is read (authorisation): may refuse
 *   begin_cb     first call, once the declaration holds: may refuse (pe_http_refuse), may
 *                read the body itself (multipart)
 *   body_cb      body bytes as they arrive, when wanted (default: collected into r->body)
 *   finish_cb    the request is complete: answer it (at once, or suspend on a waiter)
 * Without a declaration, a handler answers GET and HEAD only, without a body; the router answers
 * other methods 405 and bodies 405 before they are read. */
#ifndef PE_HTTP_HANDLER_H
#define PE_HTTP_HANDLER_H

#include "http/contract.h"
#include "http/internal.h"

struct pe_handler {
	const char *name;
	/* The handler's context, one per server (NULL callbacks: none); r->hctx in every request. */
	void *(*init_cb)(struct pe_http *h);
	void (*destroy_cb)(void *hctx); /* after the server stopped: no request runs */
	/* The metric route label when url (decoded path, no query) is this handler's, else -1.
	 * *target (NULL before) is kept in r->target. */
	int (*match_cb)(void *hctx, const char *url, const void **target);
	const char *allow;        /* without a declaration: its methods, as Allow ("GET, HEAD, OPTIONS") */
	const char *cors_methods; /* those a browser on another origin may use */
	/* What the route accepts (contract.h): entries by method (ended by one with methods NULL),
	 * or contract_cb's choice for a route whose declaration depends on more than the method
	 * (NULL: 405, with r->allow set to the methods it takes). Without either, the handler answers
	 * GET and HEAD without a body and reads no query (static files, operations). */
	const struct pe_contract *contract;
	const struct pe_contract *(*contract_cb)(struct req *r, struct MHD_Connection *conn, const char *url);
	/* Declared routes: refusals that come before the query is read (authorisation), through
	 * pe_http_refuse; MHD_YES. */
	enum MHD_Result (*guard_cb)(struct req *r, struct MHD_Connection *conn, const char *url);
	/* Declared routes: what is left once the declaration holds (multipart's reader); others:
	 * the whole first call. */
	enum MHD_Result (*begin_cb)(struct req *r, struct MHD_Connection *conn, const char *url);
	int (*body_cb)(struct req *r, const char *data, size_t n); /* 0, or -1: too big (413 at the end) */
	enum MHD_Result (*finish_cb)(struct req *r, struct MHD_Connection *conn);
	void (*req_free_cb)(void *ctx); /* r->ctx when the request ends (NULL: nothing to free) */
};

/* What one handler lends another (analysis.c answers its tables through table.c): the table of
 * the request's parsed query (pe_contract_query: its parameters, finished, of def's table, and
 * the output options). */
enum MHD_Result pe_table_request(struct req *r, struct MHD_Connection *conn, const struct pe_table_def *def);
/* The response header of a table's extra value: "X-PE-" and its JSON name (extra_name) in
 * header case ("attention_scaling": "X-PE-Attention-Scaling"). */
void pe_table_extra_header(const struct pe_table_def *def, char *out, size_t cap);

/* handlers.c: every handler, in the order they are matched (the first that claims a URL wins). */
extern const struct pe_handler *const pe_http_handlers[];
extern const size_t pe_http_nhandlers;

#endif
