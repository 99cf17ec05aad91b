/* The router: handlers register (handlers.c), the router matches and dispatches (handler.h).
 * It names no handler: a URL goes to the first handler whose match_cb claims it, and every
 * decision that depends on the endpoint (methods, body, answer) is that handler's, declared
 * (contract.h) and enforced here for all alike before the handler runs. What is the same for all
 * is here too: 404 for a URL no one claims, 405 for methods other than GET and HEAD on handlers
 * without a declaration, and CORS preflights from each handler's declared methods. */
#include "http/router.h"
#include "http/handler.h"

#include <stdlib.h>
#include <string.h>

struct pe_router {
	size_t n;
	void *hctx[]; /* per handler, in pe_http_handlers' order */
};

struct pe_router *pe_router_new(struct pe_http *h)
{
	struct pe_router *rt = calloc(1, sizeof *rt + pe_http_nhandlers * sizeof rt->hctx[0]);
	for (size_t i = 0; rt && i < pe_http_nhandlers; i++, rt->n = i) {
		const struct pe_handler *hd = pe_http_handlers[i];
		if (hd->init_cb && !(rt->hctx[i] = hd->init_cb(h))) {
			pe_router_free(rt);
			return NULL;
		}
	}
	return rt;
}

void pe_router_free(struct pe_router *rt)
{
	for (size_t i = 0; rt && i < rt->n; i++)
		if (pe_http_handlers[i]->destroy_cb)
			pe_http_handlers[i]->destroy_cb(rt->hctx[i]);
	free(rt);
}

void pe_router_match(struct pe_router *rt, struct req *r, const char *url)
{
	for (size_t i = 0; i < pe_http_nhandlers; i++) {
		const void *target = NULL;
		int route = pe_http_handlers[i]->match_cb(rt->hctx[i], url, &target);
		if (route >= 0) {
			r->handler = pe_http_handlers[i];
			r->hctx = rt->hctx[i];
			r->target = target;
			r->matched_route = route;
			return;
		}
	}
}

static int declared(const struct pe_handler *hd) { return hd->contract || hd->contract_cb; }

/* The 405 of a handler without a declaration: its Allow is the handler's. */
static void method_refused(struct req *r, const char *method, struct pe_err *err)
{
	r->allow = r->handler->allow;
	pe_err_set(err, PE_EMETHOD, "", "%s is not allowed here; use GET", method);
}

enum MHD_Result pe_router_begin(struct req *r, struct MHD_Connection *conn, const char *url, const char *method)
{
	struct pe_err err = {0};
	if (r->handler && declared(r->handler)) {
		r->route = r->matched_route;
		return pe_contract_begin(r, conn, url);
	}
	if (r->handler && r->handler->begin_cb) {
		r->route = r->matched_route;
		return r->handler->begin_cb(r, conn, url);
	}
	if (!r->has_body)
		return MHD_YES;
	if (!r->handler)
		pe_err_set(&err, PE_ENOTFOUND, "", "no resource at this path");
	else
		method_refused(r, method, &err);
	return pe_http_refuse(r, &err, NULL);
}

void pe_router_allow(struct req *r, struct MHD_Connection *conn, const char *url)
{
	if (r->handler && declared(r->handler))
		pe_contract_allow(r, conn, url);
	else if (r->handler)
		r->allow = r->handler->allow;
}

int pe_router_body(struct req *r, const char *data, size_t n)
{
	if (!r->body_wanted || !r->handler)
		return -1;
	if (r->handler->body_cb)
		return r->handler->body_cb(r, data, n);
	return declared(r->handler) ? pe_http_body_collect(r, data, n) : -1;
}

/* A CORS preflight: Allow for the route (pe_router_allow: from its declaration, as a 405's), and
 * the CORS headers when the method asked for is one a browser on another origin may use there. */
static enum MHD_Result preflight(struct req *r, struct MHD_Connection *conn)
{
	const struct pe_handler *hd = r->handler;
	struct MHD_Response *resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
	if (!resp)
		return MHD_NO;
	const char *want = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Access-Control-Request-Method");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->allow ? r->allow : hd->allow);
	if (want && pe_http_method_listed(hd->cors_methods, want)) {
		pe_http_add_cors(r->h, conn, resp);
		MHD_add_response_header(resp, "Access-Control-Allow-Methods", hd->cors_methods);
		MHD_add_response_header(resp, "Access-Control-Allow-Headers",
					"Accept, Accept-Encoding, Content-Type, If-None-Match, X-Request-Id");
		MHD_add_response_header(resp, "Access-Control-Max-Age", "600");
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Origin, Access-Control-Request-Method");
	return pe_http_queue(r, conn, 204, resp);
}

enum MHD_Result pe_router_finish(struct req *r, struct MHD_Connection *conn, const char *method)
{
	struct pe_err err = {0};
	if (!r->handler) {
		r->route = PE_ROUTE_OTHER;
		pe_err_set(&err, PE_ENOTFOUND, "", "no resource at this path");
		return pe_http_problem(r, conn, &err);
	}
	if (!strcmp(method, "OPTIONS"))
		return preflight(r, conn);
	if (!r->handler->begin_cb && !declared(r->handler)) {
		r->route = r->matched_route;
		if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
			method_refused(r, method, &err);
			return pe_http_problem(r, conn, &err);
		}
	}
	int answered;
	enum MHD_Result rc = pe_contract_finish(r, conn, &answered);
	return answered ? rc : r->handler->finish_cb(r, conn);
}

void pe_router_end(struct req *r)
{
	if (r->ctx && r->handler && r->handler->req_free_cb)
		r->handler->req_free_cb(r->ctx);
	r->ctx = NULL;
	pe_contract_end(r);
}

/* ---- paths ---- */

size_t pe_router_unescape_cb(void *cls, struct MHD_Connection *c, char *s) { return pe_query_unescape(s); }
