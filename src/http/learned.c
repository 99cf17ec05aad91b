/* /v1/learned: learned position tables that users upload (BERT, GPT-2, ViT embeddings), kept in
 * the durable store (include/posenc/store.h) and served like any table.
 *
 *   GET /v1/learned                the list (name, shape, dtype, grid, prefix_tokens, bytes, sha256,
 *                                  created), from the store's in-memory index
 *   PUT /v1/learned/{name}         an npy body; 201 created, 200 replaced; durable before answering
 *   GET /v1/learned/{name}         the table in any output format, optionally resampled (len=, or
 *                                  height= & width= [& antialias=1]), through the cache
 *   DELETE /v1/learned/{name}      204
 *
 * Flow: the first handler call routes by method; writes are authorised and their name and query
 * checked before a byte of body is read (401/403/400/405/413/415 at once). The final call answers
 * the list and cache hits on the MHD thread; everything that touches the disk runs on the pool,
 * the connection suspended on a waiter like a transform (PUT, DELETE) or a table miss (GET).
 *
 * Caching: a GET is keyed by "learned/<name>@<version>?<resampling>|<dtype>|<format>...", where the
 * version is everything that shapes the answer (the elements' sha256, dtype, shape, prefix_tokens
 * and grid), so a replaced table is never served from the cache, not even one re-uploaded with the
 * same bytes and another grid; the ETag is a hash of that key (produce.c, as every cached answer's).
 * Learned tables change, so responses say Cache-Control: no-cache (revalidate with If-None-Match)
 * instead of immutable. A miss reads the file with the version it expects; if the table was
 * replaced in between, the request fails with 503 and Retry-After rather than fill the key with
 * another version's bytes.
 *
 * Writes and job_timeout: a PUT or DELETE answered 503 at job_timeout must not land afterwards.
 * The job asks just before its change becomes visible (the store's commit callback, under the
 * store's lock): if the request already expired, the write is called off and nothing changes;
 * if not, the waiter's deadline is lifted under wait_lock (so the tick can no longer expire it)
 * and the answer waits for the outcome, which is only a rename and an fsync away.
 *
 * Access control: writes need "Authorization: Bearer <auth_token>" when a token is configured,
 * compared through SHA-256 digests so that the time taken reveals neither the token nor its
 * length; with no token only loopback clients may write. Reads are open.
 *
 * The path: server.c hands over r->path, the decoded path followed by the query as logged; the
 * query's length is recomputed from the arguments (decoded the same way), so a path holding a '?'
 * (a decoded %3F) is not cut short. MHD decodes %2F into '/' and stops at %00: the name is
 * checked after decoding, so neither reaches the file system. */
#include "http/produce.h"
#include "http/problem.h"
#include "posenc/resample.h"
#include "posenc/store.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PREFIX "/v1/learned"
#define ALLOW_LIST "GET, HEAD"
#define ALLOW_ITEM "GET, HEAD, PUT, DELETE"
#define NPY_HEADER_MAX 65546 /* npy magic, version, length and the longest 1.0 header */
#define KEY_MAX 512
#define OFFERED                                                                                   \
	(PE_FMT_BIT(PE_FMT_JSON) | PE_FMT_BIT(PE_FMT_NPY) | PE_FMT_BIT(PE_FMT_BIN) | PE_FMT_BIT(PE_FMT_CSV) | \
	 PE_FMT_BIT(PE_FMT_PNG))

/* ---- parameters: strict parsing through the core's parameter machinery ---- */

static int get_check(struct pe_params *p, struct pe_err *err);
static int put_check(struct pe_params *p, struct pe_err *err);

static const struct pe_param_spec get_specs[] = {
	{"len", PE_PT_INT, "", 1, 16777216, NULL, "rows to resample a table without a grid to (linear)"},
	{"height", PE_PT_INT, "", 1, 65536, NULL, "grid rows to resample to (bicubic), with width"},
	{"width", PE_PT_INT, "", 1, 65536, NULL, "grid columns to resample to (bicubic), with height"},
	{"antialias", PE_PT_BOOL, "0", 0, 1, NULL, "antialiased bicubic (timm's resample_abs_pos_embed default)"},
};
static const struct pe_param_spec put_specs[] = {
	{"prefix_tokens", PE_PT_INT, "", 0, 1048576, NULL, "rows before the grid (class / register tokens)"},
	{"grid", PE_PT_LIST, "", 1, 1048576, NULL, "the patch grid as height,width"},
};
static const struct pe_table_def get_def = {.name = "learned", .params = get_specs, .nparams = 4,
					    .fixed_dtype = PE_DTYPE_COUNT_, .check = get_check};
static const struct pe_table_def put_def = {.name = "learned", .params = put_specs, .nparams = 2,
					    .fixed_dtype = PE_DTYPE_COUNT_, .check = put_check};
static const struct pe_table_def list_def = {.name = "learned", .fixed_dtype = PE_DTYPE_COUNT_};

static int given(const struct pe_params *p, const char *name) { return p->v[pe_param_index(p->def, name)].given; }

static int get_check(struct pe_params *p, struct pe_err *err)
{
	int len = given(p, "len"), h = given(p, "height"), w = given(p, "width");
	if (h != w)
		return pe_err_set(err, PE_EINVAL, h ? "width" : "height", "height and width resample a grid together: "
				  "give %s too", h ? "width" : "height");
	if (len && h)
		return pe_err_set(err, PE_EINVAL, "len", "len resamples a table without a grid; height and width a grid");
	if (given(p, "antialias") && !h)
		return pe_err_set(err, PE_EINVAL, "antialias", "antialias applies to height and width (bicubic)");
	return 0;
}

static int put_check(struct pe_params *p, struct pe_err *err)
{
	size_t n;
	const double *g = pe_param_list(p, "grid", &n);
	if (g && (n != 2 || g[0] != floor(g[0]) || g[1] != floor(g[1])))
		return pe_err_set(err, PE_EINVAL, "grid", "grid must be two positive integers: height,width");
	if (given(p, "prefix_tokens") && !g)
		return pe_err_set(err, PE_EINVAL, "prefix_tokens", "prefix_tokens describes a ViT table: give grid too");
	return 0;
}

struct query {
	struct pe_params *params;
	struct pe_out_query *out; /* NULL: output options are not parameters here */
	const char *skip;         /* a key answered elsewhere (similarity's "encoding"), or NULL */
	struct pe_err *err;
	int failed;
};

static enum MHD_Result query_arg(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
				 const char *value, size_t value_size)
{
	struct query *q = cls;
	if (strlen(key) != key_size || (value && strlen(value) != value_size))
		q->failed = pe_err_set(q->err, PE_EINVAL, key, "%s contains a NUL byte", key);
	else if (q->skip && !strcmp(key, q->skip))
		return MHD_YES;
	else if (q->out && pe_out_is_param(key))
		q->failed = pe_out_take(q->out, key, value, q->err);
	else
		q->failed = pe_params_set(q->params, key, value ? value : "", q->err);
	return q->failed ? MHD_NO : MHD_YES;
}

/* Parse the query into p (initialised here; the caller destroys it) and out. */
static int parse_query(struct MHD_Connection *conn, const struct pe_table_def *def, struct pe_params *p,
		       struct pe_out_query *out, const char *skip, struct pe_err *err)
{
	struct query q = {.params = p, .out = out, .skip = skip, .err = err};
	pe_params_init(p, def);
	MHD_get_connection_values_n(conn, MHD_GET_ARGUMENT_KIND, query_arg, &q);
	return q.failed ? q.failed : pe_params_finish(p, err);
}

/* ---- the path ---- */

static enum MHD_Result count_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	*(size_t *)cls += 1 + strlen(key) + (value ? 1 + strlen(value) : 0);
	return MHD_YES;
}

/* 0: the list; 1: an item, *name (not NUL-terminated) of *len bytes; -1: the logged path was cut. */
static int target(const struct req *r, struct MHD_Connection *conn, const char **name, size_t *len)
{
	size_t query = 0, n = strlen(r->path);
	MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, count_arg, &query);
	if (n + 1 >= sizeof r->path || query > n || n - query < strlen(PREFIX))
		return -1;
	*name = r->path + strlen(PREFIX) + 1;
	*len = n - query - strlen(PREFIX);
	if (*len == 0)
		return 0;
	(*len)--; /* the '/' */
	return 1;
}

/* The item's name, checked, into buf. */
static int item_name(const struct req *r, struct MHD_Connection *conn, char buf[PE_STORE_NAME_MAX + 1],
		     struct pe_err *err)
{
	const char *name;
	size_t len;
	if (target(r, conn, &name, &len) < 0)
		return pe_err_set(err, PE_EINVAL, "name", "the request target is too long");
	int rc = pe_store_name_check(name, len, err);
	if (rc == 0) {
		memcpy(buf, name, len);
		buf[len] = 0;
	}
	return rc;
}

/* ---- answers ---- */

static void sha256_of(const void *data, size_t len, uint8_t out[32])
{
	struct sha256_ctx c;
	sha256_init(&c);
	sha256_update(&c, len, data);
	sha256_digest(&c, SHA256_DIGEST_SIZE, out);
}

static void hex(const uint8_t *p, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		snprintf(out + 2 * i, 3, "%02x", p[i]);
}

/* pe_http_problem, plus WWW-Authenticate on a 401. */
static enum MHD_Result problem(struct req *r, struct MHD_Connection *conn, const struct pe_err *err)
{
	int status;
	size_t len = 0;
	if (err->code != PE_EUNAUTH)
		return pe_http_problem(r, conn, err);
	struct MHD_Response *resp = pe_problem_response(err, NULL, &status, &len);
	if (resp) {
		MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"posenc\"");
		pe_http_add_cors(r->h, conn, resp);
	}
	r->bytes = len;
	return pe_http_queue(r, conn, status, resp);
}

static enum MHD_Result answer_now(struct req *r, struct MHD_Connection *conn, const struct pe_err *err)
{
	return pe_http_refuse(r, err, problem); /* server.c answers, once any body is dropped */
}

/* A JSON document (stolen), with the given status and extra headers. */
static enum MHD_Result answer_json(struct req *r, struct MHD_Connection *conn, int status, json_t *doc,
				   const char *location)
{
	char *body = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	json_decref(doc);
	struct MHD_Response *resp = body ? MHD_create_response_from_buffer_with_free_callback(strlen(body), body, free)
					  : NULL;
	if (!resp) {
		free(body);
		return MHD_NO;
	}
	r->bytes = strlen(body);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	if (location)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, location);
	pe_http_add_cors(r->h, conn, resp);
	return pe_http_queue(r, conn, status, resp);
}

static json_t *meta_json(const struct pe_store_meta *m)
{
	char sha[65], created[40];
	struct tm tm;
	time_t sec = (time_t)(m->created_ms / 1000);
	hex(m->sha256, 32, sha);
	gmtime_r(&sec, &tm);
	size_t n = strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(created + n, sizeof created - n, ".%03dZ", (int)(m->created_ms % 1000));
	json_t *grid = m->grid_h ? json_pack("[I, I]", (json_int_t)m->grid_h, (json_int_t)m->grid_w) : json_null();
	return json_pack("{s:s, s:[I, I], s:s, s:o, s:I, s:I, s:s, s:s}", "name", m->name, "shape",
			 (json_int_t)m->rows, (json_int_t)m->cols, "dtype", pe_dtype_name(m->dtype), "grid", grid,
			 "prefix_tokens", (json_int_t)m->prefix_tokens, "bytes", (json_int_t)m->bytes, "sha256", sha,
			 "created", created);
}

/* ---- access control ---- */

static int is_loopback(const struct sockaddr *sa)
{
	if (sa && sa->sa_family == AF_INET)
		return ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24 == 127;
	if (sa && sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
	}
	return 0;
}

/* Equal, in time independent of where (and whether) they differ. */
static int token_equal(const char *a, size_t alen, const char *b, size_t blen)
{
	uint8_t da[32], db[32];
	unsigned diff = 0;
	sha256_of(a, alen, da);
	sha256_of(b, blen, db);
	for (int i = 0; i < 32; i++)
		diff |= (unsigned)(da[i] ^ db[i]);
	return diff == 0;
}

/* The credentials of an "Authorization: Bearer <token>" header; 0 if there are none. */
static int bearer(const char *authz, const char **tok, size_t *len)
{
	if (!authz || strncasecmp(authz, "Bearer ", 7) != 0)
		return 0;
	*tok = authz + 7;
	while (**tok == ' ')
		(*tok)++;
	*len = strlen(*tok);
	while (*len && (*tok)[*len - 1] == ' ')
		(*len)--;
	return *len > 0;
}

static int authorize(struct req *r, struct MHD_Connection *conn, struct pe_err *err)
{
	const char *token = r->h->opt.auth_token, *tok;
	size_t len;
	if (!token || !*token) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		return ci && is_loopback(ci->client_addr)
			       ? 0
			       : pe_err_set(err, PE_EFORBIDDEN, "Authorization",
					    "no auth_token is configured: only loopback clients may write");
	}
	const char *authz = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	if (!bearer(authz, &tok, &len))
		return pe_err_set(err, PE_EUNAUTH, "Authorization", "writes need Authorization: Bearer <token>");
	if (!token_equal(tok, len, token, strlen(token)))
		return pe_err_set(err, PE_EFORBIDDEN, "Authorization", "the bearer token is not the configured one");
	return 0;
}

/* ---- the first call ---- */

static uint64_t body_limit(const struct pe_http *h)
{
	uint64_t max_bytes, max_table;
	pe_store_limits(h->opt.store, &max_bytes, &max_table);
	return max_table + NPY_HEADER_MAX;
}

static int npy_content_type(struct MHD_Connection *conn)
{
	const char *ct = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
	size_t n = ct ? strcspn(ct, "; \t") : 0;
	return !ct || (n == 17 && !strncasecmp(ct, "application/x-npy", n)) ||
	       (n == 24 && !strncasecmp(ct, "application/octet-stream", n));
}

/* A PUT about to send its body: refuse it now rather than read it in vain. */
static int begin_put(struct req *r, struct MHD_Connection *conn, struct pe_err *err)
{
	struct pe_params p;
	uint64_t limit = body_limit(r->h);
	const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	unsigned long long declared = cl ? strtoull(cl, NULL, 10) : 0;
	int rc = parse_query(conn, &put_def, &p, NULL, NULL, err);
	pe_params_destroy(&p);
	if (rc != 0)
		return rc;
	if (atomic_load(&r->h->draining))
		return pe_err_set(err, PE_EDRAINING, "", "the service is shutting down");
	if (!npy_content_type(conn))
		return pe_err_set(err, PE_EMEDIATYPE, "Content-Type", "the body must be an .npy file (application/x-npy)");
	if (declared > limit)
		return pe_err_set(err, PE_ETOOBIG, "body", "the body is %llu bytes; the limit is %" PRIu64
				  " (max_table_bytes plus an npy header)", declared, limit);
	pe_buf_init(&r->body, (size_t)limit);
	if (declared && pe_buf_reserve(&r->body, (size_t)declared) != 0)
		return pe_err_set(err, PE_ENOMEM, "body", "out of memory");
	return 0;
}

enum MHD_Result pe_learned_begin(struct req *r, struct MHD_Connection *conn)
{
	struct pe_err err = {0};
	const char *name;
	size_t len;
	int kind = target(r, conn, &name, &len);
	int put = !strcmp(r->method, "PUT"), del = !strcmp(r->method, "DELETE");
	int read = !strcmp(r->method, "GET") || !strcmp(r->method, "HEAD");
	r->route = PE_ROUTE_LEARNED;
	r->allow = kind == 0 ? ALLOW_LIST : ALLOW_ITEM;
	char checked[PE_STORE_NAME_MAX + 1];
	if (!read && (kind == 0 || !(put || del)))
		pe_err_set(&err, PE_EMETHOD, "", "%s is not allowed here; use %s", r->method, r->allow);
	else if ((put || del) && authorize(r, conn, &err) == 0 && item_name(r, conn, checked, &err) == 0 && put)
		begin_put(r, conn, &err);
	return err.code ? answer_now(r, conn, &err) : MHD_YES;
}

/* ---- the list ---- */

static enum MHD_Result serve_list(struct req *r, struct MHD_Connection *conn)
{
	struct pe_err err = {0};
	struct pe_params p;
	struct pe_store_meta *all = NULL;
	size_t n = 0;
	uint64_t bytes = 0, max_bytes, max_table;
	int rc = parse_query(conn, &list_def, &p, NULL, NULL, &err);
	pe_params_destroy(&p);
	if (rc == 0 && pe_store_list(r->h->opt.store, &all, &n) != 0)
		rc = pe_err_set(&err, PE_ENOMEM, "", "out of memory");
	if (rc != 0)
		return problem(r, conn, &err);
	json_t *tables = json_array();
	for (size_t i = 0; i < n; i++) {
		bytes += all[i].bytes;
		json_array_append_new(tables, meta_json(&all[i]));
	}
	free(all);
	pe_store_limits(r->h->opt.store, &max_bytes, &max_table);
	return answer_json(r, conn, 200,
			   json_pack("{s:o, s:I, s:I, s:I, s:I}", "tables", tables, "count", (json_int_t)n, "bytes",
				     (json_int_t)bytes, "max_bytes", (json_int_t)max_bytes,
				     "max_table_bytes", (json_int_t)max_table),
			   NULL);
}

/* ---- PUT and DELETE: jobs on the pool ---- */

struct wjob {
	struct pe_http *h;
	struct waiter *w;
	int del;
	struct pe_store_meta meta; /* name, prefix_tokens, grid from the request */
	char *body;
	size_t len;
};

struct wresult {
	struct pe_err err;
	struct pe_store_meta meta;
	int replaced;
};

static int finite_elements(const struct pe_tensor_view *v, size_t n)
{
	const unsigned char *p = v->data;
	for (size_t i = 0; i < n; i++) {
		if (v->dtype == PE_F16) {
			uint16_t h;
			memcpy(&h, p + 2 * i, 2);
			if ((h & 0x7c00) == 0x7c00)
				return 0;
		} else if (v->dtype == PE_F32) {
			float f;
			memcpy(&f, p + 4 * i, 4);
			if (!isfinite(f))
				return 0;
		} else {
			double d;
			memcpy(&d, p + 8 * i, 8);
			if (!isfinite(d))
				return 0;
		}
	}
	return 1;
}

/* The upload as a table: a 2-D float npy whose header tells the truth, every element finite. */
static int decode_upload(const struct wjob *j, struct pe_store_meta *m, const void **data, struct pe_err *err)
{
	struct pe_tensor_view v;
	uint64_t max_bytes, max_table;
	int of;
	pe_store_limits(j->h->opt.store, &max_bytes, &max_table);
	int rc = pe_npy_parse(j->body, j->len, (size_t)(max_table / 2), &v, err);
	if (rc != 0) {
		if (!err->param[0])
			snprintf(err->param, sizeof err->param, "body");
		return rc;
	}
	if (v.shape.rank != 2)
		return pe_err_set(err, PE_EBODY, "body", "a learned table is 2-D [positions, dim]; this one has rank %d",
				  v.shape.rank);
	if (v.dtype != PE_F16 && v.dtype != PE_F32 && v.dtype != PE_F64)
		return pe_err_set(err, PE_EBODY, "body",
				  "a learned table holds float16, float32 or float64 (<f2, <f4, <f8)");
	if (!finite_elements(&v, pe_shape_count(&v.shape, &of)))
		return pe_err_set(err, PE_EBODY, "body", "the table holds NaN or infinite values");
	m->dtype = v.dtype;
	m->rows = v.shape.dim[0];
	m->cols = v.shape.dim[1];
	*data = v.data;
	return 0;
}

static void wjob_free(struct wjob *j)
{
	free(j->body);
	free(j);
}

/* The store's commit callback: call the write off if its request was already answered 503 (the
 * waiter expired); otherwise make sure it no longer can be, so the answer will be the outcome. */
static int pin_waiter_cb(void *arg)
{
	struct waiter *w = arg;
	int rc = 0;
	pthread_mutex_lock(&w->h->wait_lock);
	if (w->state == W_EXPIRED)
		rc = PE_ETIMEOUT;
	else
		w->deadline = INFINITY;
	pthread_mutex_unlock(&w->h->wait_lock);
	return rc;
}

static int waiter_expired(struct waiter *w)
{
	pthread_mutex_lock(&w->h->wait_lock);
	int expired = w->state == W_EXPIRED;
	pthread_mutex_unlock(&w->h->wait_lock);
	return expired;
}

/* For tests only: while the file POSENC_TEST_WRITE_GATE names exists (at most a minute), writes
 * wait here before they reach the store, so a test can let job_timeout pass first. */
static void test_write_gate(void)
{
	const char *path = getenv("POSENC_TEST_WRITE_GATE");
	struct stat st;
	for (int i = 0; path && *path && i < 6000 && stat(path, &st) == 0; i++)
		usleep(10000);
}

static void wjob_run(void *arg)
{
	struct wjob *j = arg;
	struct wresult *res = waiter_expired(j->w) ? NULL : calloc(1, sizeof *res);
	struct pe_store *st = j->h->opt.store;
	const void *data = NULL;
	if (res)
		test_write_gate();
	if (res && j->del)
		pe_store_delete(st, j->meta.name, pin_waiter_cb, j->w, &res->err);
	else if (res && decode_upload(j, &j->meta, &data, &res->err) == 0 &&
		 pe_store_put(st, &j->meta, data, &res->replaced, pin_waiter_cb, j->w, &res->err) == 0)
		res->meta = j->meta;
	pe_waiter_complete(j->w, NULL, res, res ? 0 : PE_ENOMEM);
	wjob_free(j);
}

static enum MHD_Result write_resume(struct req *r, struct MHD_Connection *conn)
{
	struct waiter *w = r->w;
	struct wresult *res = w->result;
	struct pe_err err = {0};
	char location[sizeof PREFIX + PE_STORE_NAME_MAX + 1];
	if (w->state == W_EXPIRED && w->deadline == INFINITY) /* shutdown overtook a commit */
		pe_err_set(&err, PE_EDRAINING, "", "the service shut down while the write was being committed: whether "
			   "it was applied is unknown (GET /v1/learned tells)");
	else if (w->state == W_EXPIRED)
		pe_err_set(&err, PE_ETIMEOUT, "", "the write did not finish within job_timeout and was called off: "
			   "nothing changed; retry");
	else if (w->code || !res)
		pe_err_set(&err, w->code ? w->code : PE_EINTERNAL, "", "%s", w->code == PE_EBUSY
			   ? "the job queue is full: nothing changed; retry shortly" : "the write failed: nothing changed");
	if (err.code)
		return problem(r, conn, &err);
	if (res->err.code)
		return problem(r, conn, &res->err);
	if (!strcmp(r->method, "DELETE"))
		return pe_http_queue(r, conn, 204, MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT));
	snprintf(location, sizeof location, PREFIX "/%s", res->meta.name);
	return answer_json(r, conn, res->replaced ? 200 : 201, meta_json(&res->meta), location);
}

/* Run a write on the pool; the request is answered by write_resume. j is taken over. */
static enum MHD_Result start_write(struct req *r, struct MHD_Connection *conn, struct wjob *j)
{
	struct waiter *w = pe_waiter_new(r->h, conn);
	struct pe_err err = {0};
	if (!w) {
		wjob_free(j);
		pe_err_set(&err, PE_ENOMEM, "", "out of memory");
		return problem(r, conn, &err);
	}
	w->result_free = free;
	j->w = r->w = w;
	r->on_resume = write_resume;
	int rc = r->h->opt.hooks.submit(r->h->opt.hooks.ctx, wjob_run, j);
	if (rc != 0) {
		wjob_free(j);
		pe_waiter_complete(w, NULL, NULL, rc);
	}
	pe_waiter_suspend(w);
	return MHD_YES;
}

static enum MHD_Result write_item(struct req *r, struct MHD_Connection *conn, const char *name)
{
	struct pe_err err = {0};
	struct pe_params p;
	int del = !strcmp(r->method, "DELETE"), rc = 0;
	struct wjob *j = calloc(1, sizeof *j);
	if (!j)
		return MHD_NO;
	pe_params_init(&p, &put_def);
	*j = (struct wjob){.h = r->h, .del = del};
	snprintf(j->meta.name, sizeof j->meta.name, "%s", name);
	if (r->body_too_big)
		rc = pe_err_set(&err, PE_ETOOBIG, "body", "the body is over %" PRIu64 " bytes", body_limit(r->h));
	else if (!del && (rc = parse_query(conn, &put_def, &p, NULL, NULL, &err)) == 0) {
		size_t n;
		const double *g = pe_param_list(&p, "grid", &n);
		j->meta.grid_h = g ? (uint64_t)g[0] : 0;
		j->meta.grid_w = g ? (uint64_t)g[1] : 0;
		if (pe_param_isset(&p, "prefix_tokens"))
			j->meta.prefix_tokens = (uint64_t)pe_param_int(&p, "prefix_tokens");
		j->body = pe_buf_steal(&r->body, &j->len);
	}
	pe_params_destroy(&p);
	if (rc != 0) {
		wjob_free(j);
		return problem(r, conn, &err);
	}
	return start_write(r, conn, j);
}

/* ---- GET of a table: the cache, and the job that reads, resamples and encodes ---- */

struct gjob {
	struct pe_http *h;
	struct pe_store_meta meta; /* the version the key names */
	struct pe_params params;
	struct pe_out out;
	struct pe_shape shape;     /* of the result */
	int similarity;            /* answer the [rows, rows] dot products instead of the table */
};

static double elem(enum pe_dtype dt, const void *data, size_t i)
{
	if (dt == PE_F64)
		return ((const double *)data)[i];
	if (dt == PE_F16)
		return pe_f16_to_f32(((const uint16_t *)data)[i]);
	return ((const float *)data)[i];
}

/* The table as float64, resampled as the parameters say: [shape] values (caller frees). */
static double *table_values(const struct gjob *j, const void *data, struct pe_err *err)
{
	const struct pe_store_meta *m = &j->meta;
	size_t n = (size_t)(m->rows * m->cols), nout = j->shape.dim[0] * (size_t)m->cols; /* rows x cols */
	struct pe_budget *bg = j->h->opt.budget;
	int rc = 0;
	double *x = pe_budget_malloc(bg, n * sizeof *x, &rc), *y = NULL;
	enum pe_dtype coord = m->dtype == PE_F64 ? PE_F64 : PE_F32;
	if (!x) {
		pe_err_set(err, rc, "", rc == PE_EBUSY ? "the response memory budget is full; retry" : "out of memory");
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		x[i] = elem(m->dtype, data, i);
	if (!given(&j->params, "len") && !given(&j->params, "height"))
		return x;
	y = pe_budget_malloc(bg, nout * sizeof *y, &rc);
	if (y && given(&j->params, "len"))
		rc = pe_resample_linear(x, (size_t)m->rows, (size_t)m->cols, y, nout / (size_t)m->cols, coord);
	else if (y)
		rc = pe_resample_grid(x, (size_t)m->prefix_tokens, (size_t)m->grid_h, (size_t)m->grid_w,
				      (size_t)m->cols, y, (size_t)pe_param_int(&j->params, "height"),
				      (size_t)pe_param_int(&j->params, "width"), (int)pe_param_int(&j->params, "antialias"),
				      coord);
	pe_budget_free_block(bg, x);
	if (rc != 0) {
		pe_budget_free_block(bg, y);
		pe_err_set(err, rc, "", "cannot resample the table");
		return NULL;
	}
	return y;
}

/* Replace the (resampled) table's values [rows, cols] by their dot products [rows, rows]. */
static int similarity_of(const struct gjob *j, double **v, struct pe_err *err)
{
	size_t rows = j->shape.dim[0], cols = (size_t)j->meta.cols;
	int rc;
	double *g = pe_budget_malloc(j->h->opt.budget, rows * rows * sizeof *g, &rc);
	if (!g) {
		pe_budget_free_block(j->h->opt.budget, *v);
		return pe_err_set(err, rc, "", "out of memory");
	}
	pe_gram_f64(*v, rows, cols, g);
	pe_budget_free_block(j->h->opt.budget, *v);
	*v = g;
	return 0;
}

/* The producer: read, resample, round to the output dtype and encode into out. */
static int produce_cb(void *arg, struct pe_buf *out, struct pe_body_info *info, struct pe_err *err)
{
	struct gjob *j = arg;
	struct pe_store_meta m;
	void *data = NULL, *typed = NULL;
	double *v = NULL;
	size_t n = j->shape.dim[0] * j->shape.dim[1];
	int rc = pe_store_read(j->h->opt.store, j->meta.name, &j->meta, &m, &data, err);
	if (rc == 0 && !(v = table_values(j, data, err)))
		rc = err->code ? err->code : PE_ENOMEM;
	if (rc == 0 && j->similarity && (rc = similarity_of(j, &v, err)) != 0)
		v = NULL;
	if (rc == 0 && !(typed = pe_budget_malloc(j->h->opt.budget, n * pe_dtype_size(j->out.dt), &rc)))
		pe_err_set(err, rc, "", "out of memory");
	if (rc == 0) {
		pe_store_f64(j->out.dt, typed, v, n);
		struct pe_tensor_view t = {.shape = j->shape, .dtype = j->out.dt, .data = typed};
		rc = pe_out_encode(&j->out, &j->params, &t, out, err);
	}
	free(data);
	pe_budget_free_block(j->h->opt.budget, v);
	pe_budget_free_block(j->h->opt.budget, typed);
	if (rc == 0)
		pe_shape_format(&j->shape, info->shape, sizeof info->shape);
	return rc;
}

static void gjob_free_cb(void *arg)
{
	struct gjob *j = arg;
	pe_params_destroy(&j->params);
	free(j);
}

static const char *failure_detail(int code)
{
	switch (code) {
	case PE_ENOTFOUND:
		return "the table no longer exists (deleted, or its file removed from data_dir)";
	case PE_EBUSY:
		return "the table was replaced while this request ran, or the job queue or the response memory budget is full; retry";
	case PE_EIO:
		return "the stored table is damaged; it was quarantined";
	case PE_ETOOBIG:
		return "the response would exceed the size limit";
	default:
		return "the table could not be produced";
	}
}

static void failure_cb(int code, struct pe_err *err)
{
	pe_err_set(err, code, code == PE_ENOTFOUND ? "name" : "", "%s", failure_detail(code));
}

/* The shape of the answer for this table and these parameters; errors name the parameter. */
static int result_shape(const struct pe_http *h, const struct pe_store_meta *m, const struct pe_params *p,
			struct pe_shape *s, struct pe_err *err)
{
	uint64_t rows = m->rows, cells, n;
	if (given(p, "len") && m->grid_h)
		return pe_err_set(err, PE_EINVAL, "len", "%s has a %" PRIu64 "x%" PRIu64 " grid: resample it with height "
				  "and width", m->name, m->grid_h, m->grid_w);
	if (given(p, "height") && !m->grid_h)
		return pe_err_set(err, PE_EINVAL, "height", "%s has no grid (upload it with grid=h,w): resample it with "
				  "len", m->name);
	if (given(p, "len"))
		rows = (uint64_t)pe_param_int(p, "len");
	if (given(p, "height") && (__builtin_mul_overflow((uint64_t)pe_param_int(p, "height"),
							  (uint64_t)pe_param_int(p, "width"), &cells) ||
				   __builtin_add_overflow(cells, m->prefix_tokens, &rows)))
		rows = UINT64_MAX;
	if (__builtin_mul_overflow(rows, m->cols, &n) || n > h->opt.max_elements)
		return pe_err_set(err, PE_ETOOBIG, given(p, "len") ? "len" : given(p, "height") ? "height" : "",
				  "the table would have more than %" PRIu64 " elements", h->opt.max_elements);
	*s = (struct pe_shape){.rank = 2, .dim = {(size_t)rows, (size_t)m->cols}};
	return 0;
}

/* The similarity of the (resampled) table: [rows, rows], checked against max_elements. */
static int similarity_shape(const struct pe_http *h, struct pe_shape *s, struct pe_err *err)
{
	uint64_t n;
	if (__builtin_mul_overflow((uint64_t)s->dim[0], (uint64_t)s->dim[0], &n) || n > h->opt.max_elements)
		return pe_err_set(err, PE_ETOOBIG, "encoding", "the similarity matrix would have more than %" PRIu64
				  " elements", h->opt.max_elements);
	s->dim[1] = s->dim[0];
	return 0;
}

/* "learned/<name>@<sha256>:<dtype>:<rows>x<cols>:<prefix_tokens>:<grid_h>x<grid_w>?<canonical
 * parameters>|<dtype>|<format>...": the version part holds every field of the table that
 * shapes an answer (pe_store_same_version), so none can change under a cached key. */
static int make_key(const struct pe_store_meta *m, const struct pe_params *p, const struct pe_out *o, int similarity,
		    char *key)
{
	char sha[65];
	hex(m->sha256, 32, sha);
	int n = snprintf(key, KEY_MAX, "%s/%s@%s:%s:%" PRIu64 "x%" PRIu64 ":%" PRIu64 ":%" PRIu64 "x%" PRIu64 "?",
			 similarity ? "similarity/learned" : "learned", m->name, sha, pe_dtype_name(m->dtype), m->rows,
			 m->cols, m->prefix_tokens, m->grid_h, m->grid_w);
	int c = n > 0 && n < KEY_MAX ? pe_params_canonical(p, key + n, KEY_MAX - (size_t)n) : -1;
	int t = c >= 0 ? pe_out_key(o, key + n + c, KEY_MAX - (size_t)(n + c)) : -1;
	return t < 0 ? -1 : n + c + t;
}

struct miss {
	struct pe_http *h;
	const struct pe_store_meta *meta;
	struct pe_params *params;
	const struct pe_out *out;
	const struct pe_shape *shape;
	int similarity;
};

/* A miss (MHD thread): the job takes over the parameters. */
static void *gjob_new_cb(void *ctx, struct pe_err *err)
{
	struct miss *m = ctx;
	struct gjob *j = malloc(sizeof *j);
	if (!j)
		return NULL;
	*j = (struct gjob){.h = m->h, .meta = *m->meta, .params = *m->params, .out = *m->out, .shape = *m->shape,
			   .similarity = m->similarity};
	memset(m->params, 0, sizeof *m->params);
	return j;
}

static const struct pe_producer producer = {
	.cache_control = "no-cache",
	.job_new_cb = gjob_new_cb,
	.produce_cb = produce_cb,
	.job_free_cb = gjob_free_cb,
	.failure_cb = failure_cb,
};

/* GET a table (similarity 0) or its position similarity (1: /v1/analysis/similarity with
 * encoding=learned:{name}, whose "encoding" parameter was read by the caller). */
static enum MHD_Result get_common(struct req *r, struct MHD_Connection *conn, const char *name, int similarity)
{
	struct pe_err err = {0};
	struct pe_params p;
	struct pe_out_query q = {0};
	struct pe_out o;
	struct pe_store_meta m;
	struct pe_shape s = {0};
	char key[KEY_MAX];
	enum MHD_Result ret;
	int rc = parse_query(conn, &get_def, &p, &q, similarity ? "encoding" : NULL, &err), keylen = -1;
	if (rc == 0)
		rc = pe_http_out_resolve(&o, &q, conn, PE_DTYPE_COUNT_, OFFERED, &err);
	if (rc == 0 && pe_store_stat(r->h->opt.store, name, &m) != 0)
		rc = pe_err_set(&err, PE_ENOTFOUND, "name", "no learned table named %s", name);
	if (rc == 0)
		rc = result_shape(r->h, &m, &p, &s, &err);
	if (rc == 0 && similarity)
		rc = similarity_shape(r->h, &s, &err);
	if (rc == 0 && atomic_load(&r->h->draining))
		rc = pe_err_set(&err, PE_EDRAINING, "", "the service is shutting down");
	if (rc == 0 && (keylen = make_key(&m, &p, &o, similarity, key)) < 0)
		rc = pe_err_set(&err, PE_EINTERNAL, "", "cannot form the cache key");
	struct miss ms = {.h = r->h, .meta = &m, .params = &p, .out = &o, .shape = &s, .similarity = similarity};
	if (rc != 0)
		ret = problem(r, conn, &err);
	else
		ret = pe_produce_answer(r, conn, &producer, &o, key, (size_t)keylen, &ms);
	pe_params_destroy(&p);
	return ret;
}

static enum MHD_Result get_item(struct req *r, struct MHD_Connection *conn, const char *name)
{
	return get_common(r, conn, name, 0);
}

enum MHD_Result pe_learned_similarity(struct req *r, struct MHD_Connection *conn, const char *name)
{
	struct pe_err err = {0}, why = {0};
	if (pe_store_name_check(name, strlen(name), &why) != 0) { /* why, not err: the detail is formatted into err */
		pe_err_set(&err, PE_EINVAL, "encoding", "encoding=learned:{name} needs a valid table name: %s", why.detail);
		return problem(r, conn, &err);
	}
	return get_common(r, conn, name, 1);
}

/* ---- the final call ---- */

enum MHD_Result pe_learned_request(struct req *r, struct MHD_Connection *conn)
{
	struct pe_err err = {0};
	char name[PE_STORE_NAME_MAX + 1];
	const char *n;
	size_t len;
	if (target(r, conn, &n, &len) == 0)
		return serve_list(r, conn);
	if (item_name(r, conn, name, &err) != 0)
		return problem(r, conn, &err);
	if (!strcmp(r->method, "GET") || !strcmp(r->method, "HEAD"))
		return get_item(r, conn, name);
	return write_item(r, conn, name);
}
