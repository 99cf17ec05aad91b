/* Files embedded in the daemon (opt.statics: /openapi.yaml, the dashboard), served as they are.
 * The handler's context holds one shared response per file, built once with every header. */
#include "http/handler.h"

#include <stdlib.h>
#include <string.h>

struct files {
	const struct pe_http_static *list;
	size_t n;
	struct MHD_Response *shared[]; /* one per file */
};

static void destroy_cb(void *hctx)
{
	struct files *f = hctx;
	for (size_t i = 0; f && i < f->n; i++)
		if (f->shared[i])
			MHD_destroy_response(f->shared[i]);
	free(f);
}

static void *init_cb(struct pe_http *h)
{
	struct files *f = calloc(1, sizeof *f + (h->opt.nstatics + 1) * sizeof f->shared[0]);
	if (!f)
		return NULL;
	f->list = h->opt.statics;
	f->n = h->opt.nstatics;
	for (size_t i = 0; i < f->n; i++) {
		f->shared[i] = pe_http_text(f->list[i].data, f->list[i].len, f->list[i].mime, 0);
		if (f->shared[i])
			MHD_add_response_header(f->shared[i], MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
	}
	return f;
}

static int match_cb(void *hctx, const char *url, const void **target)
{
	const struct files *f = hctx;
	for (size_t i = 0; i < f->n; i++) /* the first two bytes before a call: every URL passes here */
		if (url[0] == f->list[i].path[0] && url[0] && url[1] == f->list[i].path[1] && !strcmp(url, f->list[i].path)) {
			*target = &f->list[i];
			return f->list[i].route;
		}
	return -1;
}

/* The shared response, or a fresh one over the same bytes when this request's headers must
 * differ (an echoed X-Request-Id). */
static enum MHD_Result finish_cb(struct req *r, struct MHD_Connection *conn)
{
	const struct files *f = r->hctx;
	const struct pe_http_static *file = r->target;
	r->bytes = file->len;
	if (r->request_id_given) {
		struct MHD_Response *resp = pe_http_text(file->data, file->len, file->mime, 0);
		if (resp)
			MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
		return pe_http_queue(r, conn, 200, resp);
	}
	r->status = 200;
	return MHD_queue_response(conn, 200, f->shared[file - f->list]);
}

const struct pe_handler pe_static_handler = {
	.name = "static files",
	.init_cb = init_cb,
	.destroy_cb = destroy_cb,
	.match_cb = match_cb,
	.allow = "GET, HEAD, OPTIONS",
	.cors_methods = "GET, HEAD, OPTIONS",
	.finish_cb = finish_cb,
};
