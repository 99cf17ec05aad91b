/* The libmicrohttpd server: start/stop, the access handler that routes each request, the
 * operations endpoints, and the bookkeeping of suspended requests.
 *
 * One internal epoll thread runs every handler. Table requests that miss the cache are suspended
 * (MHD_suspend_connection, always inside the handler, before the waiter can complete) and resumed
 * exactly once by whichever comes first: the cache's waiter callback (on a worker thread) or the
 * deadline tick. Both transitions happen under wait_lock, so a resume never precedes its suspend
 * and never happens twice. Suspended connections must all be resumed before MHD_stop_daemon.
 *
 * The first handler call checks the head's framing (framing.c; refused heads are answered and the
 * connection closed, the body unread) and lets the handler decide whether it wants the body. A
 * refusal decided then (pe_http_refuse) is answered here for every handler alike: at once when no
 * body byte would be sent in vain, else after the body is read and dropped within linger_bytes
 * and linger_timeout, since clients without Expect: 100-continue send it regardless and would
 * otherwise see a reset instead of the answer. Connections past max_connections are closed at
 * accept (accept_cb), and libmicrohttpd's own Content-Length errors are answered through its log
 * (answer_length_errors). */
#include "http/internal.h"
#include "http/framing.h"
#include "http/problem.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static const char *const route_names[] = {
#define PE_HTTP_ROUTE_NAME_(id, name) name,
	PE_HTTP_ROUTES(PE_HTTP_ROUTE_NAME_)
#undef PE_HTTP_ROUTE_NAME_
};

/* Route labels past PE_ROUTE_TABLE0: the tables of the registry, then its transforms. */
const char *pe_http_route_name(int route)
{
	size_t nt, nx;
	const struct pe_table_def *const *tables = pe_table_all(&nt);
	const struct pe_table_def *const *transforms = pe_transform_all(&nx);
	if (route >= 0 && route < PE_ROUTE_TABLE0)
		return route_names[route];
	size_t i = (size_t)(route - PE_ROUTE_TABLE0);
	if (route >= PE_ROUTE_TABLE0 && i < nt)
		return tables[i]->name;
	if (route >= PE_ROUTE_TABLE0 && i - nt < nx)
		return transforms[i - nt]->name;
	return "other";
}

int pe_http_def_route(const struct pe_table_def *def)
{
	size_t nt, nx;
	const struct pe_table_def *const *tables = pe_table_all(&nt);
	const struct pe_table_def *const *transforms = pe_transform_all(&nx);
	for (size_t i = 0; i < nt + nx && i < PE_ROUTE_MAX - PE_ROUTE_TABLE0; i++)
		if ((i < nt ? tables[i] : transforms[i - nt]) == def)
			return PE_ROUTE_TABLE0 + (int)i;
	return PE_ROUTE_OTHER;
}

double pe_http_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- CORS ---- */

int pe_http_cors_static(const struct pe_http *h) { return strcmp(h->cors_origins, "*") == 0; }

static int origin_listed(const char *list, const char *origin)
{
	size_t olen = strlen(origin);
	for (const char *p = list; *p;) {
		while (*p == ' ' || *p == ',')
			p++;
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		while (len && p[len - 1] == ' ')
			len--;
		if (len && len == olen && memcmp(p, origin, len) == 0)
			return 1;
		p += len;
		if (e)
			p = e + 1;
	}
	return 0;
}

/* With a list of origins the headers depend on the request's Origin, so every response that
 * passes here says Vary: Origin, also when this Origin is absent or not listed: otherwise a
 * shared cache could hand the answer without Access-Control-Allow-Origin to a listed origin. */
void pe_http_add_cors(struct pe_http *h, struct MHD_Connection *conn, struct MHD_Response *resp)
{
	const char *origin = conn ? MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin") : NULL;
	if (pe_http_cors_static(h))
		MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
	else {
		if (*h->cors_origins)
			MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Origin");
		if (!origin || !origin_listed(h->cors_origins, origin))
			return;
		MHD_add_response_header(resp, "Access-Control-Allow-Origin", origin);
	}
	MHD_add_response_header(resp, "Access-Control-Expose-Headers",
				"ETag, X-PE-Shape, X-PE-Dtype, X-PE-Cache, X-PE-Attention-Scaling, X-Request-Id");
}

/* ---- responses ---- */

enum MHD_Result pe_http_queue(struct req *r, struct MHD_Connection *conn, int status, struct MHD_Response *resp)
{
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, "X-Request-Id", r->request_id);
	if (r->close)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
	r->status = status;
	enum MHD_Result rc = MHD_queue_response(conn, (unsigned)status, resp);
	MHD_destroy_response(resp);
	return rc;
}

enum MHD_Result pe_http_not_modified(struct req *r, struct MHD_Connection *conn, const char *etag,
				      const char *cache_control)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, etag);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, cache_control);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Accept, Accept-Encoding");
	pe_http_add_cors(r->h, conn, resp);
	return pe_http_queue(r, conn, 304, resp);
}

enum MHD_Result pe_http_problem(struct req *r, struct MHD_Connection *conn, const struct pe_err *err)
{
	int status;
	size_t len = 0;
	struct MHD_Response *resp = pe_problem_response(err, r->allow ? r->allow : "GET, HEAD", &status, &len);
	r->bytes = len;
	if (resp)
		pe_http_add_cors(r->h, conn, resp);
	return pe_http_queue(r, conn, status, resp);
}

static struct MHD_Response *text_response(const char *body, size_t len, const char *type, int copy)
{
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(len, (void *)body, copy ? MHD_RESPMEM_MUST_COPY : MHD_RESPMEM_PERSISTENT);
	if (resp)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	return resp;
}

/* ---- waiters ---- */

struct waiter *pe_waiter_new(struct pe_http *h, struct MHD_Connection *conn)
{
	struct waiter *w = calloc(1, sizeof *w);
	if (!w)
		return NULL;
	atomic_init(&w->refs, 2); /* the request's and the cache callback's */
	w->state = W_NEW;
	w->h = h;
	w->conn = conn;
	w->deadline = pe_http_now() + (double)h->opt.job_timeout_s;
	return w;
}

void pe_waiter_unref(struct waiter *w)
{
	if (w && atomic_fetch_sub(&w->refs, 1) == 1) {
		pe_cache_release(w->entry);
		if (w->result && w->result_free)
			w->result_free(w->result);
		free(w);
	}
}

static void link_waiting(struct pe_http *h, struct waiter *w)
{
	w->next = h->waiting.next;
	w->prev = &h->waiting;
	h->waiting.next->prev = w;
	h->waiting.next = w;
	h->nwaiting++;
}

static void unlink_waiting(struct pe_http *h, struct waiter *w)
{
	w->prev->next = w->next;
	w->next->prev = w->prev;
	w->prev = w->next = NULL;
	h->nwaiting--;
}

void pe_waiter_ready_cb(void *arg, struct pe_cache_entry *entry, int code) { pe_waiter_complete(arg, entry, NULL, code); }

void pe_waiter_complete(struct waiter *w, struct pe_cache_entry *entry, void *result, int code)
{
	struct pe_http *h = w->h;
	pthread_mutex_lock(&h->wait_lock);
	if (w->state == W_EXPIRED) { /* the client was already answered */
		pe_cache_release(entry);
		if (result && w->result_free)
			w->result_free(result);
	} else {
		w->entry = entry;
		w->result = result;
		w->code = code;
		if (w->state == W_SUSPENDED) {
			unlink_waiting(h, w);
			MHD_resume_connection(w->conn);
		}
		w->state = W_DONE;
	}
	pthread_mutex_unlock(&h->wait_lock);
	pe_waiter_unref(w);
}

void pe_waiter_suspend(struct waiter *w)
{
	struct pe_http *h = w->h;
	MHD_suspend_connection(w->conn);
	pthread_mutex_lock(&h->wait_lock);
	if (w->state == W_NEW) {
		w->state = W_SUSPENDED;
		link_waiting(h, w);
	} else {
		MHD_resume_connection(w->conn); /* completed before we got here */
	}
	pthread_mutex_unlock(&h->wait_lock);
}

/* ---- slow readers ---- */

/* Headers must be complete within connection_timeout of the connection's start (or of the end of
 * its previous request), a body must average at least 1 KiB/s once that time has passed, and a
 * refused request's body must be dropped within linger_timeout: otherwise the socket is shut
 * down (MHD then closes the connection). Answers are not timed. */
#define MIN_BODY_RATE 1024.0

static void notify_connection_cb(void *cls, struct MHD_Connection *conn, void **socket_context,
				 enum MHD_ConnectionNotificationCode toe)
{
	struct pe_http *h = cls;
	struct ctrack *ct = *socket_context;
	pthread_mutex_lock(&h->track_lock);
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		atomic_fetch_add(&h->nconns, 1);
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		ct = calloc(1, sizeof *ct);
		if (ct && ci) {
			*ct = (struct ctrack){.fd = ci->connect_fd, .phase = PH_HEADERS, .since = pe_http_now(),
					      .conn = conn, .prev = &h->tracks, .next = h->tracks.next};
			h->tracks.next->prev = ct;
			h->tracks.next = ct;
		} else {
			free(ct);
			ct = NULL;
		}
		*socket_context = ct;
	} else {
		atomic_fetch_sub(&h->nconns, 1);
		if (ct) {
			ct->prev->next = ct->next;
			ct->next->prev = ct->prev;
			free(ct);
			*socket_context = NULL;
		}
	}
	pthread_mutex_unlock(&h->track_lock);
}

static void track_phase(struct pe_http *h, struct MHD_Connection *conn, int phase, size_t bytes)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct ctrack *ct = ci ? ci->socket_context : NULL;
	if (!ct)
		return;
	pthread_mutex_lock(&h->track_lock);
	if (ct->phase != phase) {
		ct->phase = phase;
		ct->since = pe_http_now();
		ct->bytes = 0;
	}
	ct->bytes += bytes;
	pthread_mutex_unlock(&h->track_lock);
}

static void cut_slow_readers(struct pe_http *h, double now)
{
	double limit = (double)h->opt.connection_timeout_s;
	pthread_mutex_lock(&h->track_lock);
	for (struct ctrack *ct = h->tracks.next; ct != &h->tracks; ct = ct->next) {
		double age = now - ct->since;
		int slow = (ct->phase == PH_HEADERS && age > limit) ||
			   (ct->phase == PH_BODY && age > limit && (double)ct->bytes < age * MIN_BODY_RATE) ||
			   (ct->phase == PH_DISCARD && age > (double)h->opt.linger_timeout_s);
		if (slow)
			shutdown(ct->fd, SHUT_RDWR);
	}
	pthread_mutex_unlock(&h->track_lock);
}

void pe_http_tick(struct pe_http *h, int expire_all)
{
	double now = pe_http_now();
	cut_slow_readers(h, now);
	pthread_mutex_lock(&h->wait_lock);
	for (struct waiter *w = h->waiting.next, *next; w != &h->waiting; w = next) {
		next = w->next;
		if (!expire_all && w->deadline > now)
			continue;
		unlink_waiting(h, w);
		w->state = W_EXPIRED;
		MHD_resume_connection(w->conn);
	}
	pthread_mutex_unlock(&h->wait_lock);
}

size_t pe_http_waiting(struct pe_http *h)
{
	pthread_mutex_lock(&h->wait_lock);
	size_t n = h->nwaiting;
	pthread_mutex_unlock(&h->wait_lock);
	return n;
}

/* ---- operations endpoints ---- */

static enum MHD_Result serve_healthz(struct req *r, struct MHD_Connection *conn)
{
	static const char body[] = "{\"status\":\"ok\"}\n";
	return pe_http_queue(r, conn, 200, text_response(body, sizeof body - 1, "application/json", 0));
}

static enum MHD_Result serve_readyz(struct req *r, struct MHD_Connection *conn)
{
	if (atomic_load(&r->h->draining)) {
		static const char body[] = "{\"status\":\"draining\"}\n";
		struct MHD_Response *resp = text_response(body, sizeof body - 1, "application/json", 0);
		if (resp)
			MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, PE_HTTP_RETRY_AFTER);
		return pe_http_queue(r, conn, 503, resp);
	}
	static const char body[] = "{\"status\":\"ready\"}\n";
	return pe_http_queue(r, conn, 200, text_response(body, sizeof body - 1, "application/json", 0));
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

static int static_index(const struct pe_http *h, const char *url)
{
	for (size_t i = 0; i < h->opt.nstatics; i++)
		if (!strcmp(url, h->opt.statics[i].path))
			return (int)i;
	return -1;
}

/* An embedded file: the shared response, or a fresh one over the same bytes when this request's
 * headers must differ (an echoed X-Request-Id). */
static enum MHD_Result serve_static(struct req *r, struct MHD_Connection *conn, int i)
{
	const struct pe_http_static *f = &r->h->opt.statics[i];
	r->bytes = f->len;
	if (r->request_id_given) {
		struct MHD_Response *resp = text_response(f->data, f->len, f->mime, 0);
		if (resp)
			MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
		return pe_http_queue(r, conn, 200, resp);
	}
	r->status = 200;
	return MHD_queue_response(conn, 200, r->h->statics[i]);
}

/* GET /v1: every table and transform with its parameters (name, type, default, range, choices,
 * help), from the registry: what the dashboard builds its controls from. */
static json_t *param_json(const struct pe_param_spec *sp)
{
	static const char *const types[] = {"integer", "number", "enum", "boolean", "list"};
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

/* ---- CORS preflight ---- */

/* Methods a browser on another origin may use here: reads everywhere, POST for transforms. Writes
 * to learned tables are never opened by CORS: their preflight gets no Allow-Origin. */
static const char *cors_methods(const char *url)
{
	if (strncmp(url, "/v1/", 4) == 0 && pe_transform_find(url + 4))
		return "POST, OPTIONS";
	return "GET, HEAD, OPTIONS";
}

/* Is method one of the comma-separated list's entries, exactly (case-sensitive, as methods are)? */
static int method_listed(const char *list, const char *method)
{
	size_t mlen = strlen(method);
	for (const char *p = list; *p;) {
		while (*p == ' ' || *p == ',')
			p++;
		size_t len = strcspn(p, ", ");
		if (len && len == mlen && memcmp(p, method, len) == 0)
			return 1;
		p += len;
	}
	return 0;
}

static int route_of(const struct pe_http *h, const char *url, const struct pe_table_def **def, int *stat);

static enum MHD_Result serve_preflight(struct req *r, struct MHD_Connection *conn, const char *url)
{
	const struct pe_table_def *def;
	int stat;
	int learned = !strcmp(url, "/v1/learned") || !strncmp(url, "/v1/learned/", 12);
	int transform = strncmp(url, "/v1/", 4) == 0 && pe_transform_find(url + 4);
	if (!learned && !transform && route_of(r->h, url, &def, &stat) < 0) {
		struct pe_err err = {0};
		pe_err_set(&err, PE_ENOTFOUND, "", "no resource at this path");
		return pe_http_problem(r, conn, &err);
	}
	struct MHD_Response *resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
	if (!resp)
		return MHD_NO;
	const char *want = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Access-Control-Request-Method");
	const char *methods = cors_methods(url);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, learned ? "GET, HEAD, PUT, DELETE, OPTIONS" : methods);
	if (want && method_listed(methods, want)) {
		pe_http_add_cors(r->h, conn, resp);
		MHD_add_response_header(resp, "Access-Control-Allow-Methods", methods);
		MHD_add_response_header(resp, "Access-Control-Allow-Headers",
					"Accept, Accept-Encoding, Content-Type, If-None-Match, X-Request-Id");
		MHD_add_response_header(resp, "Access-Control-Max-Age", "600");
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Origin, Access-Control-Request-Method");
	return pe_http_queue(r, conn, 204, resp);
}

/* ---- routing ---- */

static int route_of(const struct pe_http *h, const char *url, const struct pe_table_def **def, int *stat)
{
	*def = NULL;
	*stat = static_index(h, url);
	if (*stat >= 0)
		return h->opt.statics[*stat].route;
	if (!strcmp(url, "/v1"))
		return PE_ROUTE_CATALOGUE;
	if (strncmp(url, "/v1/", 4) == 0) {
		*def = pe_table_find(url + 4);
		return *def ? pe_http_def_route(*def) : -1;
	}
	if (!strcmp(url, "/healthz"))
		return PE_ROUTE_HEALTHZ;
	if (!strcmp(url, "/readyz"))
		return PE_ROUTE_READYZ;
	if (!strcmp(url, "/metrics"))
		return PE_ROUTE_METRICS;
	return -1;
}

static enum MHD_Result dispatch(struct req *r, struct MHD_Connection *conn, const char *url, const char *method)
{
	struct pe_err err = {0};
	const struct pe_table_def *def;
	int stat;
	int route = route_of(r->h, url, &def, &stat);
	r->route = route < 0 ? PE_ROUTE_OTHER : route;
	if (route < 0) {
		pe_err_set(&err, PE_ENOTFOUND, "", "no resource at this path");
		return pe_http_problem(r, conn, &err);
	}
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
		pe_err_set(&err, PE_EMETHOD, "", "%s is not allowed here; use GET", method);
		return pe_http_problem(r, conn, &err);
	}
	const char *enc = def && !strcmp(def->name, "analysis/similarity")
				  ? MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "encoding")
				  : NULL;
	if (enc && !strncmp(enc, "learned:", 8)) /* the table lives in the store, not the core */
		return pe_learned_similarity(r, conn, enc + 8);
	if (def)
		return pe_table_request(r, conn, def);
	if (stat >= 0)
		return serve_static(r, conn, stat);
	switch (route) {
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

/* ---- request identity ---- */

static int printable_token(const char *s, size_t max)
{
	size_t n = 0;
	for (; s[n]; n++)
		if (n >= max || s[n] <= 0x20 || s[n] >= 0x7f || s[n] == '"' || s[n] == '\\')
			return 0;
	return n > 0;
}

/* The client's X-Request-Id when it is a sane token (≤ 64 printable bytes), else a new one:
 * 16 hex digits from a per-process random seed and a counter (unique, not guessable in order). */
static void assign_request_id(struct pe_http *h, struct req *r, struct MHD_Connection *conn)
{
	const char *given = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Request-Id");
	if (given && printable_token(given, 64)) {
		snprintf(r->request_id, sizeof r->request_id, "%s", given);
		r->request_id_given = 1;
		return;
	}
	uint64_t x = h->rid_seed + 0x9e3779b97f4a7c15ull * (atomic_fetch_add(&h->rid_counter, 1) + 1);
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	x ^= x >> 31;
	snprintf(r->request_id, sizeof r->request_id, "%016llx", (unsigned long long)x);
}

/* Path and query as the client asked, for the log (MHD has already split and decoded them). */
static enum MHD_Result append_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct req *r = cls;
	size_t len = strlen(r->path);
	snprintf(r->path + len, sizeof r->path - len, "%s%s%s%s", strchr(r->path, '?') ? "&" : "?", key,
		 value ? "=" : "", value ? value : "");
	return MHD_YES;
}

static void begin_request(struct pe_http *h, struct req *r, struct MHD_Connection *conn, const char *url,
			  const char *method)
{
	r->h = h;
	r->t0 = pe_http_now();
	r->cache_hit = -1;
	snprintf(r->method, sizeof r->method, "%s", method);
	snprintf(r->path, sizeof r->path, "%s", url);
	MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, append_arg, r);
	assign_request_id(h, r, conn);
}

/* ---- framing and refusals ---- */

static enum MHD_Result framing_field(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	pe_framing_header(cls, key, strlen(key), value ? value : "", value ? strlen(value) : 0);
	return MHD_YES;
}

/* Framing a proxy and this server could read differently (request smuggling), transfer codings
 * other than chunked and a missing Host: answered at once, and the connection closed with the
 * body unread (framing.c). 0 when the request may go on, with its body described in r. */
static int read_framing(struct req *r, struct MHD_Connection *conn, const char *version, struct pe_err *err)
{
	struct pe_framing f;
	pe_framing_init(&f);
	MHD_get_connection_values(conn, MHD_HEADER_KIND, framing_field, &f);
	int rc = pe_framing_finish(&f, version, err);
	r->has_body = f.body != PE_BODY_NONE;
	r->chunked = f.body == PE_BODY_CHUNKED;
	r->declared = f.length;
	r->expect_continue = f.expect_continue;
	return rc;
}

static int takes_no_body(const char *method)
{
	return !strcmp(method, "GET") || !strcmp(method, "HEAD") || !strcmp(method, "DELETE") || !strcmp(method, "OPTIONS");
}

/* A body on a route that reads none (all but transforms and /v1/learned): 404 or 405, decided
 * before the body is read. */
static int unwanted_body(struct req *r, const char *url, const char *method, struct pe_err *err)
{
	const struct pe_table_def *def;
	int stat;
	if (route_of(r->h, url, &def, &stat) < 0)
		return pe_err_set(err, PE_ENOTFOUND, "", "no resource at this path");
	return pe_err_set(err, PE_EMETHOD, "", "%s is not allowed here; use GET", method);
}

enum MHD_Result pe_http_refuse(struct req *r, const struct pe_err *err,
			       enum MHD_Result (*answer)(struct req *r, struct MHD_Connection *conn, const struct pe_err *err))
{
	r->refusal = *err;
	r->refusal_answer = answer;
	return MHD_YES;
}

static enum MHD_Result answer_refusal(struct req *r, struct MHD_Connection *conn)
{
	r->answered = 1;
	return r->refusal_answer ? r->refusal_answer(r, conn, &r->refusal) : pe_http_problem(r, conn, &r->refusal);
}

/* The refusal now, when no body byte will be sent in vain (none follows, the client waits for
 * 100 Continue, which MHD then does not send) or the declared body is past what we would drop:
 * MHD closes the connection after it. Otherwise the body is read and dropped first (nginx's
 * lingering close), within linger_bytes and linger_timeout. */
static enum MHD_Result refuse_early(struct pe_http *h, struct req *r, struct MHD_Connection *conn)
{
	int now = !r->has_body || r->expect_continue || h->opt.linger_bytes == 0 ||
		  (!r->chunked && r->declared > h->opt.linger_bytes);
	if (now) {
		r->close = r->has_body;
		return answer_refusal(r, conn);
	}
	track_phase(h, conn, PH_DISCARD, 0);
	return MHD_YES;
}

static enum MHD_Result first_call(struct pe_http *h, struct req *r, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version)
{
	struct pe_err err = {0};
	if (read_framing(r, conn, version, &err) != 0) {
		r->answered = r->close = 1;
		return pe_http_problem(r, conn, &err);
	}
	enum MHD_Result rc = MHD_YES;
	if (r->has_body && takes_no_body(method)) {
		pe_err_set(&err, PE_EBODY, "body", "%s takes no body", method);
		pe_http_refuse(r, &err, NULL);
	} else if (!strcmp(method, "OPTIONS"))
		return MHD_YES; /* a CORS preflight: answered once the request is read */
	else if (strncmp(url, "/v1/", 4) == 0 && (r->transform = pe_transform_find(url + 4)) != NULL)
		rc = pe_transform_begin(r, conn);
	else if (!strcmp(url, "/v1/learned") || !strncmp(url, "/v1/learned/", 12)) {
		r->learned = 1;
		rc = pe_learned_begin(r, conn);
	} else if (r->has_body) {
		unwanted_body(r, url, method, &err);
		pe_http_refuse(r, &err, NULL);
	}
	if (rc != MHD_YES)
		return rc;
	if (r->refusal.code)
		return refuse_early(h, r, conn);
	/* Answer on a later call, once MHD has read the whole request: a response queued on the
	 * first call makes MHD close the connection instead of keeping it alive. */
	return MHD_YES;
}

/* Body bytes: collected for transforms and learned PUTs, dropped after a refusal or past
 * max_body_bytes (a 413 once the body ends), but no more than linger_bytes of them: past that the
 * connection is cut (MHD_NO). */
static enum MHD_Result body_bytes(struct pe_http *h, struct req *r, struct MHD_Connection *conn, const char *data,
				  size_t n)
{
	if (!r->refusal.code && !r->body_too_big && (r->transform || r->learned)) {
		track_phase(h, conn, PH_BODY, n);
		if (pe_buf_append(&r->body, data, n) == 0)
			return MHD_YES;
		r->body_too_big = 1; /* keep reading (and dropping) to answer 413 at the end */
	}
	track_phase(h, conn, PH_DISCARD, n);
	r->dropped += n;
	return r->dropped > h->opt.linger_bytes ? MHD_NO : MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
				  const char *version, const char *upload_data, size_t *upload_data_size,
				  void **con_cls)
{
	struct pe_http *h = cls;
	struct req *r = *con_cls;
	if (!r) {
		r = calloc(1, sizeof *r);
		if (!r)
			return MHD_NO;
		begin_request(h, r, conn, url, method);
		*con_cls = r;
		atomic_fetch_add(&h->active, 1);
		track_phase(h, conn, PH_BODY, 0);
		return first_call(h, r, conn, url, method, version);
	}
	if (r->on_resume)
		return r->on_resume(r, conn);
	if (*upload_data_size != 0) {
		size_t n = *upload_data_size;
		*upload_data_size = 0;
		return body_bytes(h, r, conn, upload_data, n);
	}
	track_phase(h, conn, PH_ANSWER, 0);
	if (r->answered)
		return MHD_YES;
	if (r->refusal.code) {
		r->close = 1;
		return answer_refusal(r, conn);
	}
	if (!strcmp(method, "OPTIONS"))
		return serve_preflight(r, conn, url);
	if (r->transform)
		return pe_transform_request(r, conn);
	if (r->learned)
		return pe_learned_request(r, conn);
	return dispatch(r, conn, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	struct pe_http *h = cls;
	struct req *r = *con_cls;
	if (!r)
		return;
	if (h->opt.hooks.observe) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_HTTP_STATUS);
		struct pe_http_request_info info = {
			.route = r->route,
			.status = r->status ? r->status : (ci ? (int)ci->http_status : 0),
			.method = r->method,
			.path = r->path,
			.request_id = r->request_id,
			.bytes = r->bytes,
			.seconds = pe_http_now() - r->t0,
			.cache_hit = r->cache_hit,
		};
		if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && !info.status)
			info.status = 499;
		h->opt.hooks.observe(h->opt.hooks.ctx, &info);
	}
	track_phase(h, conn, PH_HEADERS, 0);
	pe_waiter_unref(r->w);
	pe_buf_destroy(&r->body);
	free(r);
	*con_cls = NULL;
	atomic_fetch_sub(&h->active, 1);
}

/* ---- connection limits ---- */

/* libmicrohttpd stops accepting at its CONNECTION_LIMIT, so clients past it wait in the listen
 * backlog until one closes (or time out there). Instead MHD's limit is set CONN_SLACK above ours
 * (closed connections are counted until MHD cleans them up) and this accept policy closes a
 * connection past max_connections at once. The per-IP limit is MHD's, checked before this. */
#define CONN_SLACK 64
#define FD_RESERVE 128 /* listening socket, epoll, ITC, log and store files, libuv */

static enum MHD_Result accept_cb(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
	struct pe_http *h = cls;
	return atomic_load(&h->nconns) < h->conn_limit ? MHD_YES : MHD_NO;
}

/* The connections admitted: want, or fewer when the process may not open that many descriptors
 * (accept() would fail, and MHD stop accepting: the backlog again). The soft limit is raised
 * towards the hard one first. */
static unsigned fit_fd_limit(unsigned want)
{
	struct rlimit rl;
	rlim_t need = (rlim_t)want + CONN_SLACK + FD_RESERVE;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
		return want;
	rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need ? rl.rlim_max : need;
	setrlimit(RLIMIT_NOFILE, &rl);
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= need)
		return want;
	unsigned fit = rl.rlim_cur > CONN_SLACK + FD_RESERVE + 1 ? (unsigned)(rl.rlim_cur - CONN_SLACK - FD_RESERVE) : 1;
	fprintf(stderr, "posencd: max_connections %u lowered to %u to fit the open-file limit (%llu)\n", want, fit,
		(unsigned long long)rl.rlim_cur);
	return fit;
}

/* ---- libmicrohttpd's own answers ---- */

/* A problem+json answer written straight to a socket (plain HTTP only), for the one case below. */
static void write_problem(int fd, const struct pe_err *err)
{
	int status;
	size_t len = 0;
	char *body = pe_problem_json(err, &status, &len);
	char head[512];
	const char *reason = MHD_get_reason_phrase_for((unsigned)status);
	int n = body ? snprintf(head, sizeof head, "HTTP/1.1 %d %s\r\nContent-Type: application/problem+json\r\n"
				"Cache-Control: no-store\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n",
				status, reason ? reason : "Error", len)
		     : -1;
	char *all = n > 0 && (size_t)n < sizeof head ? malloc((size_t)n + len) : NULL;
	if (all) {
		memcpy(all, head, (size_t)n);
		memcpy(all + n, body, len);
		ssize_t w = send(fd, all, (size_t)n + len, MSG_NOSIGNAL | MSG_DONTWAIT);
		(void)w;
	}
	free(all);
	free(body);
}

/* libmicrohttpd 0.9.75 answers a Content-Length that is not a number, or past 64 bits, itself,
 * before any callback of ours, with an HTML page and its status line and headers sent twice.
 * Its log line is the only sign. The connection it concerns is the one whose head has been
 * parsed (MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE is known) without our handler having seen the
 * request (still PH_HEADERS), and whose Content-Length framing.c refuses: it gets the 400 / 413
 * problem+json written to its socket (with TLS, nothing), then the socket is shut down, so that
 * MHD's own answer fails to go out and MHD closes the connection. */
static void answer_length_errors(struct pe_http *h)
{
	pthread_mutex_lock(&h->track_lock);
	for (struct ctrack *ct = h->tracks.next; ct != &h->tracks; ct = ct->next) {
		if (ct->phase != PH_HEADERS || !ct->conn ||
		    !MHD_get_connection_info(ct->conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE))
			continue;
		const char *cl = MHD_lookup_connection_value(ct->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
		struct pe_framing f;
		struct pe_err err = {0};
		pe_framing_init(&f);
		if (cl)
			pe_framing_header(&f, MHD_HTTP_HEADER_CONTENT_LENGTH, strlen(MHD_HTTP_HEADER_CONTENT_LENGTH), cl,
					  strlen(cl));
		if (!cl || (!f.length_bad && !f.length_overflow))
			continue;
		pe_framing_finish(&f, "HTTP/1.1", &err);
		if (!h->opt.tls_cert_pem)
			write_problem(ct->fd, &err);
		shutdown(ct->fd, SHUT_RDWR);
		ct->phase = PH_ANSWER;
	}
	pthread_mutex_unlock(&h->track_lock);
}

/* MHD's messages go to stderr as with its default logger. */
static void mhd_log_cb(void *cls, const char *fmt, va_list ap)
{
	vfprintf(stderr, fmt, ap);
	if (strstr(fmt, "Content-Length"))
		answer_length_errors(cls);
}

/* ---- lifecycle ---- */

static int hex_value(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Percent-decoding of paths and query values, as MHD's own, except that %00 and %2F stay as they
 * are: a decoded NUL would silently cut a C string (a table name, a number) short, and a decoded
 * '/' would route /v1%2Fsinusoidal as /v1/sinusoidal; the literals are refused by every route and
 * parser instead (404, or a 400 naming the parameter). */
static size_t unescape_cb(void *cls, struct MHD_Connection *c, char *s)
{
	char *w = s;
	for (const char *p = s; *p;) {
		int hi, lo;
		if (p[0] == '%' && (hi = hex_value(p[1])) >= 0 && (lo = hex_value(p[2])) >= 0 && (hi | lo) &&
		    hi * 16 + lo != '/') {
			*w++ = (char)(hi * 16 + lo);
			p += 3;
		} else
			*w++ = *p++;
	}
	*w = 0;
	return (size_t)(w - s);
}

/* Called with the raw request target before MHD parses it. libmicrohttpd 0.9.75 stores every
 * query argument in the connection's fixed pool and, when thousands of them exhaust it, answers
 * nothing and leaves the connection hanging: such a target is cut off here at once. */
#define MAX_QUERY_ARGS 256

static void *uri_cb(void *cls, const char *uri, struct MHD_Connection *conn)
{
	size_t amps = 0;
	for (const char *q = strchr(uri, '?'); q && *q; q++)
		amps += *q == '&' || *q == ';';
	if (amps > MAX_QUERY_ARGS) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		if (ci)
			shutdown(ci->connect_fd, SHUT_RDWR);
	}
	return NULL;
}

static struct MHD_Response **make_statics(const struct pe_http_options *opt)
{
	struct MHD_Response **a = calloc(opt->nstatics + 1, sizeof *a);
	for (size_t i = 0; a && i < opt->nstatics; i++) {
		a[i] = text_response(opt->statics[i].data, opt->statics[i].len, opt->statics[i].mime, 0);
		if (a[i])
			MHD_add_response_header(a[i], MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
	}
	return a;
}

static void free_statics(struct pe_http *h)
{
	for (size_t i = 0; h->statics && i < h->opt.nstatics; i++)
		if (h->statics[i])
			MHD_destroy_response(h->statics[i]);
	free(h->statics);
	h->statics = NULL;
}

static int make_addr(const char *bind, uint16_t port, struct sockaddr_storage *ss, int *ipv6, struct pe_err *err)
{
	memset(ss, 0, sizeof *ss);
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, bind, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons(port);
		*ipv6 = 0;
		return 0;
	}
	if (inet_pton(AF_INET6, bind, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons(port);
		*ipv6 = 1;
		return 0;
	}
	return pe_err_set(err, PE_EINVAL, "bind", "bind is not an IP address literal");
}

/* HTTPS through libmicrohttpd's GnuTLS backend when a certificate is configured. */
static struct MHD_OptionItem *tls_options(const struct pe_http_options *opt, struct MHD_OptionItem items[3])
{
	int n = 0;
	if (opt->tls_cert_pem && opt->tls_key_pem) {
		items[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)opt->tls_cert_pem};
		items[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)opt->tls_key_pem};
	}
	items[n] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
	return items;
}

static uint16_t bound_port(struct MHD_Daemon *d)
{
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	return di ? di->port : 0;
}

struct pe_http *pe_http_start(const struct pe_http_options *opt, struct pe_err *err)
{
	struct pe_http *h = calloc(1, sizeof *h);
	if (!h) {
		pe_err_set(err, PE_ENOMEM, "", "out of memory");
		return NULL;
	}
	h->opt = *opt;
	h->cors_origins = strdup(opt->cors_origins ? opt->cors_origins : "*");
	pthread_mutex_init(&h->wait_lock, NULL);
	h->waiting.next = h->waiting.prev = &h->waiting;
	pthread_mutex_init(&h->track_lock, NULL);
	pthread_mutex_init(&h->scratch_lock, NULL);
	h->tracks.next = h->tracks.prev = &h->tracks;
	h->statics = make_statics(opt);
	struct sockaddr_storage ss;
	int ipv6 = 0;
	if (!h->cors_origins || !h->statics || make_addr(opt->bind, opt->port, &ss, &ipv6, err) != 0)
		goto fail;
	struct MHD_OptionItem tls[3];
	unsigned flags = (opt->tls_cert_pem ? MHD_USE_TLS : 0) | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC |
			 MHD_USE_ERROR_LOG | (ipv6 ? MHD_USE_IPv6 : 0);
	h->conn_limit = fit_fd_limit(opt->max_connections ? opt->max_connections : 1);
	h->mhd = MHD_start_daemon(flags, opt->port, accept_cb, h, on_request, h,
				  MHD_OPTION_EXTERNAL_LOGGER, mhd_log_cb, h, /* first, to see every message */
				  MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
				  MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
				  MHD_OPTION_CONNECTION_LIMIT, h->conn_limit + CONN_SLACK,
				  MHD_OPTION_PER_IP_CONNECTION_LIMIT, opt->max_connections_per_ip,
				  MHD_OPTION_CONNECTION_TIMEOUT, opt->connection_timeout_s,
				  /* MHD clears the pool on every keep-alive request: the default 32 KiB holds
				   * the longest query (factor lists) at half the cost of 64 KiB */
				  MHD_OPTION_CONNECTION_MEMORY_LIMIT, opt->max_header_bytes ? opt->max_header_bytes : (size_t)32768,
				  MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u,
				  MHD_OPTION_UNESCAPE_CALLBACK, unescape_cb, NULL,
				  MHD_OPTION_URI_LOG_CALLBACK, uri_cb, NULL,
				  MHD_OPTION_NOTIFY_CONNECTION, notify_connection_cb, h,
				  MHD_OPTION_ARRAY, tls_options(opt, tls),
				  MHD_OPTION_END);
	if (!h->mhd) {
		if (opt->tls_cert_pem)
			pe_err_set(err, PE_EIO, "tls_cert", "cannot start HTTPS on %s port %u: port in use, or tls_cert / "
				   "tls_key not a valid PEM certificate and key", opt->bind, (unsigned)opt->port);
		else
			pe_err_set(err, PE_EIO, "port", "cannot listen on %s port %u", opt->bind, (unsigned)opt->port);
		goto fail;
	}
	h->port = bound_port(h->mhd);
	h->rid_seed = ((uint64_t)getpid() << 32) ^ (uint64_t)(pe_http_now() * 1e9);
	h->listen_fd = -1;
	return h;
fail:
	free_statics(h);
	free(h->cors_origins);
	pthread_mutex_destroy(&h->wait_lock);
	pthread_mutex_destroy(&h->track_lock);
	pthread_mutex_destroy(&h->scratch_lock);
	free(h);
	return NULL;
}

uint16_t pe_http_port(const struct pe_http *h) { return h->port; }

/* Readiness goes 503 and the listening socket stops accepting; open connections are served on.
 * The socket MHD hands back is closed only after MHD_stop_daemon (its rule for threaded modes). */
void pe_http_drain(struct pe_http *h)
{
	if (atomic_exchange(&h->draining, 1))
		return;
	h->listen_fd = (int)MHD_quiesce_daemon(h->mhd);
	/* quiescing only stops accepting: without this, connections queued in the kernel would wait
	 * for the exit and be reset then; shut down, they are refused at once */
	if (h->listen_fd >= 0)
		shutdown(h->listen_fd, SHUT_RDWR);
}

size_t pe_http_active(struct pe_http *h) { return atomic_load(&h->active); }

void pe_http_stop(struct pe_http *h)
{
	if (!h)
		return;
	pe_http_tick(h, 1);
	MHD_stop_daemon(h->mhd);
	if (h->listen_fd >= 0)
		close(h->listen_fd);
	free_statics(h);
	pe_table_free_scratch(h);
	pthread_mutex_destroy(&h->wait_lock);
	pthread_mutex_destroy(&h->track_lock);
	pthread_mutex_destroy(&h->scratch_lock);
	free(h->cors_origins);
	free(h);
}
