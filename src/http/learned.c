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
 * Flow: the declaration (contract_cb) routes by method; writes are authorised and their name
 * checked (guard_cb), then the query, type and length, before a byte of body is read
 * (401/403/400/405/413/415 at once). The final call answers
 * the list and cache hits on the MHD thread; everything that touches the disk runs on the pool,
 * the connection suspended on a waiter like a transform (PUT, DELETE) or a table miss (GET).
 *
 * GET of a table: learned_get.c (through the cache, produce.c).
 *
 * Writes and job_timeout: a PUT or DELETE answered 503 at job_timeout must not land afterwards.
 * The job asks just before its change becomes visible (the store's commit callback, under the
 * store's lock): if the request already expired, the write is called off and nothing changes;
 * if not, the waiter's deadline is lifted under wait_lock (so the tick can no longer expire it)
 * and the answer waits for the outcome, which is only a rename and an fsync away.
 *
 * Access control (auth.c): writes need "Authorization: Bearer <auth_token>" when a token is
 * configured, else a loopback client. Reads are open.
 *
 * The path: begin_cb keeps the request's URL (decoded by MHD, without the query) as the handler's
 * state for the request (r->ctx). MHD decodes %2F into '/' and stops at %00: the name is checked
 * after decoding, so neither reaches the file system. */
#include "http/auth.h"
#include "http/handler.h"
#include "http/learned_get.h"
#include "http/oneshot.h"
#include "http/problem.h"
#include "http/test_hooks.h"
#include "posenc/store.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
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

/* ---- parameters: strict parsing through the core's parameter machinery ---- */

static int put_check(struct pe_params *p, struct pe_err *err);
static int given(const struct pe_params *p, const char *name) { return p->v[pe_param_index(p->def, name)].given; }

static const struct pe_param_spec put_specs[] = {
	{"prefix_tokens", PE_PT_INT, "", 0, 1048576, NULL, "rows before the grid (class / register tokens)"},
	{"grid", PE_PT_LIST, "", 1, 1048576, PE_LIST_INTEGERS, "the patch grid as height,width"},
};
static const struct pe_table_def put_def = {.name = "learned", .params = put_specs, .nparams = 2,
					    .fixed_dtype = PE_DTYPE_COUNT_, .check = put_check};
static const struct pe_table_def list_def = {.name = "learned", .fixed_dtype = PE_DTYPE_COUNT_};

static int put_check(struct pe_params *p, struct pe_err *err)
{
	size_t n;
	const double *g = pe_param_list(p, "grid", &n);
	if (g && n != 2)
		return pe_err_set(err, PE_EINVAL, "grid", "grid must be two positive integers: height,width");
	if (given(p, "prefix_tokens") && !g)
		return pe_err_set(err, PE_EINVAL, "prefix_tokens", "prefix_tokens describes a ViT table: give grid too");
	return 0;
}

/* ---- the path ---- */

/* 0: the list; 1: an item, *name (not NUL-terminated) of *len bytes. */
static int target(const struct req *r, const char **name, size_t *len)
{
	const char *url = r->ctx;
	*name = url + strlen(PREFIX) + 1;
	*len = strlen(url) - strlen(PREFIX);
	if (*len == 0)
		return 0;
	(*len)--; /* the '/' */
	return 1;
}

/* The item's name, checked, into buf. */
static int item_name(const struct req *r, char buf[PE_STORE_NAME_MAX + 1],
		     struct pe_err *err)
{
	const char *name;
	size_t len;
	target(r, &name, &len);
	int rc = pe_store_name_check(name, len, err);
	if (rc == 0) {
		memcpy(buf, name, len);
		buf[len] = 0;
	}
	return rc;
}

/* ---- answers ---- */

/* A problem, with the Bearer challenge on a 401 (auth.c). */
static enum MHD_Result problem(struct req *r, struct MHD_Connection *conn, const struct pe_err *err)
{
	return pe_auth_problem(r, conn, err);
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
	pe_learned_hex(m->sha256, 32, sha);
	gmtime_r(&sec, &tm);
	size_t n = strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(created + n, sizeof created - n, ".%03dZ", (int)(m->created_ms % 1000));
	json_t *grid = m->grid_h ? json_pack("[I, I]", (json_int_t)m->grid_h, (json_int_t)m->grid_w) : json_null();
	return json_pack("{s:s, s:[I, I], s:s, s:o, s:I, s:I, s:s, s:s}", "name", m->name, "shape",
			 (json_int_t)m->rows, (json_int_t)m->cols, "dtype", pe_dtype_name(m->dtype), "grid", grid,
			 "prefix_tokens", (json_int_t)m->prefix_tokens, "bytes", (json_int_t)m->bytes, "sha256", sha,
			 "created", created);
}

/* ---- the first call ---- */

static uint64_t body_limit(const struct pe_http *h)
{
	uint64_t max_bytes, max_table;
	pe_store_limits(h->opt.store, &max_bytes, &max_table);
	return max_table + pe_npy_header_max();
}

static const struct pe_contract list_contract = {.methods = "GET, HEAD", .params = &list_def, .finish = 1};
static const struct pe_contract put_contract = {
	.methods = "PUT", .params = &put_def, .finish = 1, .media = "application/x-npy, application/octet-stream",
	.body_limit_cb = body_limit, .limit_name = "max_table_bytes plus an npy header", .query_first = 1};
static const struct pe_contract delete_contract = {.methods = "DELETE"};

/* The declaration for the list or an item, by method (NULL: 405 with the methods of either). */
static const struct pe_contract *contract_cb(struct req *r, struct MHD_Connection *conn, const char *url)
{
	static const struct pe_contract *const item[] = {&pe_learned_get_contract, &put_contract, &delete_contract};
	int list = strlen(url) == strlen(PREFIX);
	if (list && pe_http_method_listed(list_contract.methods, r->method))
		return &list_contract;
	for (size_t i = 0; !list && i < 3; i++)
		if (pe_http_method_listed(item[i]->methods, r->method))
			return item[i];
	r->allow = list ? ALLOW_LIST : ALLOW_ITEM;
	return NULL;
}

/* Before the query is read: keep the URL (the name, for finish_cb); writes are authorised and
 * their name checked. */
static enum MHD_Result guard_cb(struct req *r, struct MHD_Connection *conn, const char *url)
{
	struct pe_err err = {0};
	char checked[PE_STORE_NAME_MAX + 1];
	if (!(r->ctx = strdup(url)))
		return MHD_NO;
	if (!strcmp(r->method, "PUT") || !strcmp(r->method, "DELETE"))
		if (pe_auth_check(r, conn, &err) == 0)
			item_name(r, checked, &err);
	return err.code ? answer_now(r, conn, &err) : MHD_YES;
}

/* ---- the list: a job on the pool ---- */

/* The fewest bytes one table's entry takes in the list's JSON (a one-letter name, [1, 1], no grid;
 * 193 with its comma): with the store's copy of the list, what the budget must be able to hold. */
#define LIST_ENTRY_MIN 190
/* The most the list's end takes: four counts of at most 20 digits and their keys. */
#define LIST_TAIL_MAX 160

/* The problem of a list the response budget refused (pe_budget_take / pe_buf's codes). */
static void list_refused(int rc, struct pe_err *err)
{
	if (rc == PE_EBUSY)
		pe_err_set(err, rc, "", "the response memory budget is full; retry shortly");
	else if (rc == PE_ETOOBIG)
		pe_err_set(err, rc, "", "the list needs more than the whole response memory budget (response_budget_bytes)");
	else
		pe_err_set(err, rc ? rc : PE_ENOMEM, "", "out of memory");
}

/* The list as JSON into res, written entry by entry into a buffer reserved on the response budget
 * as it grows (so what a client that does not read keeps is counted: 64 such clients of a
 * 68k-table store held 1 GB outside the budget before, and a jansson tree of the whole list took
 * ~2 KB a table besides), checked against the request's deadline every 4096 tables. copy: what the
 * job holds on the budget besides; limit: the budget's whole limit (0: no budget). The buffer never
 * grows past what the limit leaves it, and a list that cannot fit in it even at LIST_ENTRY_MIN a
 * table still to come is 413 (a 503 would have it retried for ever). */
static void list_json(struct pe_budget *budget, size_t copy, size_t limit, const struct pe_store_meta *all, size_t n,
		      uint64_t max_bytes, uint64_t max_table, struct pe_oneshot_result *res)
{
	struct pe_buf out;
	char one[1024];
	uint64_t bytes = 0;
	size_t room = limit > copy ? limit - copy : limit ? 0 : SIZE_MAX;
	pe_buf_init(&out, (size_t)1 << 40);
	pe_buf_set_budget(&out, budget);
	int rc = pe_buf_puts(&out, "{\"tables\":[");
	for (size_t i = 0; i < n && rc == 0; i++) {
		if (i % 4096 == 4095 && (rc = pe_cancelled()) != 0) {
			pe_cancel_err(rc, &res->err);
			break;
		}
		json_t *e = meta_json(&all[i]);
		one[0] = ','; /* the entry after its comma; the first goes without */
		size_t d = e ? json_dumpb(e, one + 1, sizeof one - 1, JSON_COMPACT) : 0;
		json_decref(e);
		const char *entry = i ? one : one + 1;
		size_t k = d + (i ? 1 : 0);
		if (d == 0 || d > sizeof one - 1)
			rc = PE_ENOMEM;
		else if (limit && out.len + k + (n - i - 1) * LIST_ENTRY_MIN + LIST_TAIL_MAX > room)
			rc = PE_ETOOBIG;
		else if ((rc = pe_buf_reserve_within(&out, k, room)) == 0)
			rc = pe_buf_append(&out, entry, k);
		bytes += all[i].bytes;
	}
	if (rc == 0 && (rc = pe_buf_reserve_within(&out, LIST_TAIL_MAX, room)) == 0)
		rc = pe_buf_printf(&out, "],\"count\":%zu,\"bytes\":%" PRIu64 ",\"max_bytes\":%" PRIu64
				   ",\"max_table_bytes\":%" PRIu64 "}",
				   n, bytes, max_bytes, max_table);
	if (rc == 0 && (res->data = pe_buf_steal(&out, &res->len)) != NULL) {
		res->budget = budget;
		res->held = budget ? pe_mem_size(res->data) : 0;
	} else if (!res->err.code) {
		list_refused(rc, &res->err);
	}
	pe_buf_destroy(&out);
}

/* The catalogue is listed on a worker (oneshot.c), not on the HTTP thread: the file store checks
 * every table's file and the document grows with the tables (68k of them: ~385 ms and 13.5 MB),
 * and on the HTTP thread every other connection on it would wait that long. The
 * store's copy of the list is reserved on the budget first, from its count, so a list the budget
 * cannot hold (413: the copy and the least its JSON can take pass the whole budget; 503: not now)
 * is refused before the store is scanned. */
static void run_list(struct pe_oneshot *os, struct pe_oneshot_result *res)
{
	struct pe_store *store = os->h->opt.store;
	struct pe_budget *budget = os->h->opt.budget;
	struct pe_store_stats st;
	struct pe_store_meta *all = NULL;
	size_t n = 0;
	uint64_t max_bytes, max_table;
	struct pe_budget_stats bs = {0};
	pe_store_stats(store, &st);
	size_t copy = (st.tables + 64) * sizeof *all; /* tables put meanwhile: charged below */
	int rc = 0;
	if (budget) {
		pe_budget_stats(budget, &bs);
		rc = copy + st.tables * LIST_ENTRY_MIN > bs.limit ? PE_ETOOBIG : pe_budget_take(budget, copy);
	}
	if (rc != 0) {
		list_refused(rc, &res->err);
		return;
	}
	if ((rc = pe_store_list(store, &all, &n)) == PE_ENOMEM) {
		pe_err_set(&res->err, PE_ENOMEM, "", "out of memory");
	} else if (rc != 0) { /* the store has never been read: its reason, as the items answer it */
		pe_store_unready(store, rc, &res->err);
	} else {
		if (budget && n * sizeof *all > copy) {
			pe_budget_charge(budget, n * sizeof *all - copy);
			copy = n * sizeof *all;
		}
		pe_store_limits(store, &max_bytes, &max_table);
		list_json(budget, copy, bs.limit, all, n, max_bytes, max_table, res);
	}
	free(all);
	if (budget)
		pe_budget_give(budget, copy);
}

static void list_job_free(struct pe_oneshot *os) { free(os); }

static const struct pe_oneshot_answer list_answer = {.noun = "the list", .content_type = "application/json"};

static enum MHD_Result serve_list(struct req *r, struct MHD_Connection *conn)
{
	struct pe_err err = {0};
	struct pe_oneshot *j = calloc(1, sizeof *j);
	if (!j) {
		pe_err_set(&err, PE_ENOMEM, "", "out of memory");
		return problem(r, conn, &err);
	}
	*j = (struct pe_oneshot){.h = r->h, .run = run_list, .free = list_job_free};
	return pe_oneshot_start(r, conn, j, &list_answer);
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
static int pin_waiter_cb(void *arg) { return pe_waiter_pin(arg); }

static void wjob_run(void *arg)
{
	struct wjob *j = arg;
	struct wresult *res = pe_waiter_expired(j->w) ? NULL : calloc(1, sizeof *res);
	struct pe_store *st = j->h->opt.store;
	const void *data = NULL;
	if (res)
		pe_hook_write_gate(); /* test builds only */
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
	else if (w->state == W_EXPIRED && w->shut_down)
		pe_err_set(&err, PE_EDRAINING, "", "the service is shutting down: the write was called off: nothing "
			   "changed; retry");
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
	const struct pe_params *p = &pe_contract_query(r)->params;
	int del = !strcmp(r->method, "DELETE");
	struct wjob *j = calloc(1, sizeof *j);
	if (!j)
		return MHD_NO;
	*j = (struct wjob){.h = r->h, .del = del};
	snprintf(j->meta.name, sizeof j->meta.name, "%s", name);
	if (!del) {
		size_t n;
		const double *g = pe_param_list(p, "grid", &n);
		j->meta.grid_h = g ? (uint64_t)g[0] : 0;
		j->meta.grid_w = g ? (uint64_t)g[1] : 0;
		if (pe_param_isset(p, "prefix_tokens"))
			j->meta.prefix_tokens = (uint64_t)pe_param_int(p, "prefix_tokens");
		j->body = pe_buf_steal(&r->body, &j->len);
	}
	return start_write(r, conn, j);
}

/* ---- the handler ---- */

static int match_cb(void *hctx, const char *url, const void **target)
{
	return !strcmp(url, PREFIX) || !strncmp(url, PREFIX "/", strlen(PREFIX) + 1) ? PE_ROUTE_LEARNED : -1;
}

/* The request is complete (a PUT's body in r->body). */
static enum MHD_Result finish_cb(struct req *r, struct MHD_Connection *conn)
{
	struct pe_err err = {0};
	char name[PE_STORE_NAME_MAX + 1];
	const char *n;
	size_t len;
	if (target(r, &n, &len) == 0)
		return serve_list(r, conn);
	if (item_name(r, name, &err) != 0)
		return problem(r, conn, &err);
	if (!strcmp(r->method, "GET") || !strcmp(r->method, "HEAD"))
		return pe_learned_get(r, conn, name);
	return write_item(r, conn, name);
}

/* Writes to learned tables are never opened by CORS: their preflight gets no Allow-Origin. */
const struct pe_handler pe_learned_handler = {
	.name = "learned tables",
	.match_cb = match_cb,
	.cors_methods = "GET, HEAD, OPTIONS",
	.contract_cb = contract_cb,
	.guard_cb = guard_cb,
	.finish_cb = finish_cb,
	.req_free_cb = free,
};
