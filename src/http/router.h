/* The router: the registered handlers (handlers.c), matched in order against a request's URL and
 * called through their callbacks (handler.h); CORS preflights for every route; metric labels. */
#ifndef PE_HTTP_ROUTER_H
#define PE_HTTP_ROUTER_H

#include "http/internal.h"

/* Every handler's context (init_cb); NULL when one cannot be made. */
struct pe_router *pe_router_new(struct pe_http *h);
void pe_router_free(struct pe_router *rt);

/* First call: which handler serves url (r->handler NULL: none). */
void pe_router_match(struct pe_router *rt, struct req *r, const char *url);
/* First call of a request not refused yet and not a preflight: the handler's begin_cb, or a
 * refusal of a body that no one reads (404 or 405). */
enum MHD_Result pe_router_begin(struct req *r, struct MHD_Connection *conn, const char *url, const char *method);
/* First call of an OPTIONS request: r->allow, the methods of the route (its declaration's, and
 * OPTIONS; a handler without one: its allow). */
void pe_router_allow(struct req *r, struct MHD_Connection *conn, const char *url);
/* Body bytes for the handler that wanted them: 0, or -1 past its limit. */
int pe_router_body(struct req *r, const char *data, size_t n);
/* The request is complete: a preflight, or the handler's answer (404, 405 when none applies). */
enum MHD_Result pe_router_finish(struct req *r, struct MHD_Connection *conn, const char *method);
/* The request is over: its handler's state goes. */
void pe_router_end(struct req *r);

/* pe_query_unescape as libmicrohttpd's unescape callback (MHD_OPTION_UNESCAPE_CALLBACK), which
 * decodes the request's path with it. */
size_t pe_router_unescape_cb(void *cls, struct MHD_Connection *c, char *s);

#endif
