/* Operations endpoints: /healthz (the process answers), /readyz (503 while draining, or while the
 * learned-table store cannot serve: its reason in "store", with Retry-After only when the reason is
 * transient, "store-error" when it is the database's configuration; 200 with the reason when it
 * serves reads only), /metrics
 * (Prometheus text from the daemon's hook) and /v1 (the catalogue: every table and transform with
 * its parameters, from the registry: what the dashboard builds its controls from). */
#include "http/conn_guard.h"
#include "http/handler.h"
#include "http/problem.h"
#include "http/produce.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static enum MHD_Result serve_healthz(struct req *r, struct MHD_Connection *conn)
{
	static const char body[] = "{\"status\":\"ok\"}\n";
	return pe_http_queue(r, conn, 200, pe_http_text(body, sizeof body - 1, "application/json", 0));
}

static enum MHD_Result serve_readyz(struct req *r, struct MHD_Connection *conn)
{
	if (atomic_load(&r->h->draining)) {
		static const char body[] = "{\"status\":\"draining\"}\n";
		struct MHD_Response *resp = pe_http_text(body, sizeof body - 1, "application/json", 0);
		if (resp)
			MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, PE_HTTP_RETRY_AFTER);
		return pe_http_queue(r, conn, 503, resp);
	}
	struct pe_err why;
	int rc = r->h->opt.store ? pe_store_ready(r->h->opt.store, &why) : 0;
	if (rc == 0) {
		static const char body[] = "{\"status\":\"ready\"}\n";
		return pe_http_queue(r, conn, 200, pe_http_text(body, sizeof body - 1, "application/json", 0));
	}
	int down = rc == PE_EUNAVAIL || rc == PE_ESTORE;
	json_t *o = json_pack("{s:s, s:s}", "status", rc == PE_EUNAVAIL ? "store-unavailable" : down ? "store-error" : "ready",
			      "store", why.detail);
	char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	struct MHD_Response *resp = body ? MHD_create_response_from_buffer_with_free_callback(strlen(body), body, free) : NULL;
	if (!resp) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	if (rc == PE_EUNAVAIL)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, PE_HTTP_RETRY_AFTER);
	return pe_http_queue(r, conn, down ? 503 : 200, resp);
}

static enum MHD_Result serve_metrics(struct req *r, struct MHD_Connection *conn)
{
	struct pe_buf b;
	pe_buf_init(&b, 16u << 20);
	struct pe_err err = {0};
	if (!r->h->opt.hooks.render_metrics || r->h->opt.hooks.render_metrics(r->h->opt.hooks.ctx, &b) != 0) {
		pe_buf_destroy(&b);
		pe_err_set(&err, PE_EINTERNAL, "", "metrics unavailable");
		return pe_http_problem(r, conn, &err);
	}
	uint64_t begun, cancelled;
	pe_produce_stream_stats(r->h, &begun, &cancelled);
	pe_buf_printf(&b,
		      "# HELP posenc_streams_total Answers sent while their job computed them (produce.h).\n"
		      "# TYPE posenc_streams_total counter\nposenc_streams_total %" PRIu64 "\n"
		      "# HELP posenc_streams_cancelled_total Streamed jobs called off because every reader went away.\n"
		      "# TYPE posenc_streams_cancelled_total counter\nposenc_streams_cancelled_total %" PRIu64 "\n"
		      "# HELP posenc_slow_answers_cut_total Answers cut because the response budget was full and their "
		      "reader the slowest to finish.\n"
		      "# TYPE posenc_slow_answers_cut_total counter\nposenc_slow_answers_cut_total %" PRIu64 "\n",
		      begun, cancelled, pe_conn_guard_answers_cut(r->h->guard));
	size_t len;
	char *body = pe_buf_steal(&b, &len);
	struct MHD_Response *resp = MHD_create_response_from_buffer_with_free_callback(len, body, free);
	if (!resp) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	return pe_http_queue(r, conn, 200, resp);
}

/* ---- the catalogue ---- */

static json_t *param_json(const struct pe_param_spec *sp)
{
	static const char *const types[] = {"integer", "number", "enum", "boolean", "list", "string"};
	json_t *o = json_pack("{s:s, s:s, s:b, s:s}", "name", sp->name, "type", types[sp->type], "required",
			      sp->def == NULL, "help", sp->help ? sp->help : "");
	if (sp->def && *sp->def)
		json_object_set_new(o, "default", json_string(sp->def));
	if (sp->type == PE_PT_INT || sp->type == PE_PT_REAL || sp->type == PE_PT_LIST) {
		json_object_set_new(o, "minimum", json_real(sp->min));
		json_object_set_new(o, "maximum", json_real(sp->max));
	}
	if (sp->type == PE_PT_ENUM) {
		json_t *c = json_array();
		for (int k = 0; sp->choices[k]; k++)
			json_array_append_new(c, json_string(sp->choices[k]));
		json_object_set_new(o, "choices", c);
	}
	return o;
}

static json_t *defs_json(const struct pe_table_def *const *defs, size_t n, const char *method)
{
	json_t *a = json_array();
	for (size_t i = 0; i < n; i++) {
		json_t *ps = json_array();
		for (int k = 0; k < defs[i]->nparams; k++)
			json_array_append_new(ps, param_json(&defs[i]->params[k]));
		char path[96];
		snprintf(path, sizeof path, "/v1/%s", defs[i]->name);
		json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:s, s:o}", "name", defs[i]->name, "path", path,
						   "method", method, "summary", defs[i]->summary, "params", ps));
	}
	return a;
}

static enum MHD_Result serve_catalogue(struct req *r, struct MHD_Connection *conn)
{
	size_t nt, nx;
	const struct pe_table_def *const *t = pe_table_all(&nt);
	const struct pe_table_def *const *x = pe_transform_all(&nx);
	json_t *o = json_pack("{s:s, s:o, s:o}", "version", PE_VERSION, "tables", defs_json(t, nt, "GET"),
			      "transforms", defs_json(x, nx, "POST"));
	char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (!body)
		return MHD_NO;
	struct MHD_Response *resp = MHD_create_response_from_buffer_with_free_callback(strlen(body), body, free);
	if (!resp) {
		free(body);
		return MHD_NO;
	}
	r->bytes = strlen(body);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
	pe_http_add_cors(r->h, conn, resp);
	return pe_http_queue(r, conn, 200, resp);
}

/* ---- the handler ---- */

static int match_cb(void *hctx, const char *url, const void **target)
{
	if (!strcmp(url, "/v1"))
		return PE_ROUTE_CATALOGUE;
	if (!strcmp(url, "/healthz"))
		return PE_ROUTE_HEALTHZ;
	if (!strcmp(url, "/readyz"))
		return PE_ROUTE_READYZ;
	if (!strcmp(url, "/metrics"))
		return PE_ROUTE_METRICS;
	return -1;
}

static enum MHD_Result finish_cb(struct req *r, struct MHD_Connection *conn)
{
	switch (r->matched_route) {
	case PE_ROUTE_HEALTHZ:
		return serve_healthz(r, conn);
	case PE_ROUTE_READYZ:
		return serve_readyz(r, conn);
	case PE_ROUTE_METRICS:
		return serve_metrics(r, conn);
	default:
		return serve_catalogue(r, conn);
	}
}

const struct pe_handler pe_ops_handler = {
	.name = "operations",
	.match_cb = match_cb,
	.allow = "GET, HEAD, OPTIONS",
	.cors_methods = "GET, HEAD, OPTIONS",
	.finish_cb = finish_cb,
};
