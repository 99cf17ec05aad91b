/* GET /v1/<table>: parameters, negotiation, ETag and 304, the cache, and the job that computes
 * and encodes a table on a worker thread.
 *
 * A cached table is a struct table_body: the encoded bytes plus one MHD_Response built once with
 * every header ("X-PE-Cache: hit"), queued as is on any number of connections (MHD refcounts it
 * and sends the buffer without copying). The body's bytes belong to that shared response and are
 * freed by its free callback when MHD drops its last use; the cache owns the response. Requests
 * that need their own headers (a miss, a listed CORS origin) get a response over the same bytes
 * that holds a cache reference until MHD is done with it.
 *
 * Memory: the job builds under the response budget (opt.budget): its scratch table and its output
 * buffer are reserved before they are allocated, and a reservation that does not fit fails the
 * key with PE_EBUSY (503 + Retry-After). The finished body's reservation ends when the cache takes
 * it: from then on the cache counts it (by its allocation sizes), and if it leaves the cache while
 * still being sent, the cache charges it back to the budget until MHD lets go of it. */
#include "http/internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_MAX (PE_MAX_LIST * 26 + 4096)
/* The shared MHD_Response of a cached body and its headers, counted with the body. */
#define RESPONSE_OVERHEAD 1024
#define OFFERED                                                                                  \
	(PE_FMT_BIT(PE_FMT_JSON) | PE_FMT_BIT(PE_FMT_NPY) | PE_FMT_BIT(PE_FMT_BIN) | PE_FMT_BIT(PE_FMT_CSV) | \
	 PE_FMT_BIT(PE_FMT_PNG))

struct table_body {
	char *data;
	size_t len;
	struct MHD_Response *shared;
	struct pe_out out;
	char shape[160];
	char etag[40];
	char extra_name[32];
	char extra[PE_NUM_MAX + 1]; /* header value, "" if the table reports none */
};

struct job {
	struct pe_http *h;
	struct pe_params params;
	double deadline; /* pe_monotonic() time past which the computation stops (job_timeout) */
	struct pe_out out;
	char etag[40];
	size_t keylen;
	char key[]; /* the cache key */
};

/* ---- keys and ETags ---- */

static uint64_t fnv1a(const char *s, size_t n, uint64_t h)
{
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* A strong ETag from the canonical key only: equal on every replica and across restarts. */
static void make_etag(const char *key, size_t len, char out[40])
{
	uint64_t a = fnv1a(PE_OUTPUT_EPOCH, strlen(PE_OUTPUT_EPOCH), 0xcbf29ce484222325ull);
	a = fnv1a(key, len, a);
	uint64_t b = fnv1a(key, len, 0x84222325cbf29ce4ull ^ (uint64_t)len);
	snprintf(out, 40, "\"%016" PRIx64 "%016" PRIx64 "\"", a, b);
}

/* ---- query parsing ---- */

struct query {
	struct pe_params *params;
	struct pe_out_query out;
	struct pe_err *err;
	int failed;
};

static enum MHD_Result query_arg(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
				 const char *value, size_t value_size)
{
	struct query *q = cls;
	/* MHD decodes %00 into a NUL: C strings would silently cut the value there */
	if (strlen(key) != key_size || (value && strlen(value) != value_size)) {
		q->failed = pe_err_set(q->err, PE_EINVAL, key, "%s contains a NUL byte", key);
		return MHD_NO;
	}
	if (!*key) {
		q->failed = pe_err_set(q->err, PE_EINVAL, "", "a query parameter has an empty name");
		return MHD_NO;
	}
	if (pe_out_is_param(key))
		q->failed = pe_out_take(&q->out, key, value, q->err);
	else
		q->failed = pe_params_set(q->params, key, value ? value : "", q->err);
	return q->failed ? MHD_NO : MHD_YES;
}

/* Everything a request would cost, from its parameters, before anything is allocated: the table
 * and any intermediate table against max_elements, an analysis' work against max_analysis_cost. */
static int check_size(const struct pe_http *h, const struct pe_params *p, struct pe_err *err)
{
	struct pe_shape s;
	struct pe_cost c;
	int rc = pe_table_shape(p, &s), overflow;
	if (rc == 0)
		rc = pe_table_cost(p, &c);
	if (rc != 0)
		return pe_err_set(err, rc, "", "cannot size this table");
	size_t n = pe_shape_count(&s, &overflow);
	if (overflow || n > h->opt.max_elements)
		return pe_err_set(err, PE_ETOOBIG, *c.work_param ? c.work_param : p->def->params[0].name,
				  "the table would have %s elements; the limit is %" PRIu64,
				  overflow ? "too many" : "more", h->opt.max_elements);
	if (c.intermediate > h->opt.max_elements)
		return pe_err_set(err, PE_ETOOBIG, c.intermediate_param,
				  "the table this needs would have %" PRIu64 " elements; the limit is %" PRIu64,
				  c.intermediate, h->opt.max_elements);
	if (c.work > h->opt.max_analysis_cost)
		return pe_err_set(err, PE_ETOOBIG, c.work_param,
				  "this would cost %" PRIu64 " multiply-adds; max_analysis_cost is %" PRIu64, c.work,
				  h->opt.max_analysis_cost);
	return 0;
}

/* What can only fail once the table exists is decided here from the parameters, so the client
 * gets a problem naming the parameter (a job's failure reaches its waiters as a bare code): a
 * dtype too narrow for the values, a picture that cannot be drawn. Run on a miss only (a cached
 * key passed it already; rope/inv_freq's check makes its dim/2 frequencies, ~1 ms at dim 65536). */
static int check_output(const struct pe_params *p, const struct pe_out *o, struct pe_err *err)
{
	int rc = pe_table_check_dtype(p, o->dt, err);
	if (rc != 0 || o->fmt != PE_FMT_PNG)
		return rc;
	struct pe_tensor_view v = {.dtype = o->dt, .data = NULL}; /* NULL: lay out the shape only */
	struct pe_png_options po;
	struct pe_png_layout lay;
	pe_table_shape(p, &v.shape);
	pe_png_options_init(&po);
	po.cmap = (enum pe_cmap)o->cmap;
	po.scale = o->scale;
	po.labels = p->def->panel_labels;
	return pe_png_plan(&v, &po, &lay, err);
}

/* Parse and validate everything; fills params and the output options. */
static int parse_request(struct pe_http *h, struct MHD_Connection *conn, const struct pe_table_def *def,
			 struct pe_params *p, struct pe_out *o, struct pe_err *err)
{
	struct query q = {.params = p, .err = err};
	MHD_get_connection_values_n(conn, MHD_GET_ARGUMENT_KIND, query_arg, &q);
	if (q.failed)
		return q.failed;
	int rc = pe_http_out_resolve(o, &q.out, conn, def->fixed_dtype, OFFERED, err);
	if (rc == 0)
		rc = pe_params_finish(p, err);
	if (rc == 0)
		rc = check_size(h, p, err);
	return rc;
}

static int make_key(const struct pe_params *p, const struct pe_out *o, char *key, size_t cap)
{
	int n = snprintf(key, cap, "v1/%s?", p->def->name);
	if (n < 0 || (size_t)n >= cap)
		return -1;
	int c = pe_params_canonical(p, key + n, cap - (size_t)n);
	if (c < 0)
		return -1;
	n += c;
	int t = pe_out_key(o, key + n, cap - (size_t)n);
	return t < 0 ? -1 : n + t;
}

/* ---- responses ---- */

static void add_table_headers(const struct table_body *b, struct MHD_Response *resp, const char *cache)
{
	pe_http_out_headers(&b->out, resp);
	MHD_add_response_header(resp, "X-PE-Shape", b->shape);
	MHD_add_response_header(resp, "X-PE-Dtype", pe_dtype_name(b->out.dt));
	MHD_add_response_header(resp, "X-PE-Cache", cache);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, b->etag);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "public, max-age=31536000, immutable");
	if (b->extra[0])
		MHD_add_response_header(resp, b->extra_name, b->extra);
}

static void release_entry_cb(void *cls) { pe_cache_release(cls); }

/* Answer from a cache entry; takes over the caller's reference. */
static enum MHD_Result serve_entry(struct req *r, struct MHD_Connection *conn, struct pe_cache_entry *e, int hit)
{
	struct table_body *b = pe_cache_value(e);
	r->cache_hit = hit;
	r->bytes = b->len;
	if (hit && pe_http_cors_static(r->h) && !r->request_id_given) {
		r->status = 200;
		enum MHD_Result rc = MHD_queue_response(conn, 200, b->shared);
		pe_cache_release(e);
		return rc;
	}
	struct MHD_Response *resp =
		MHD_create_response_from_buffer_with_free_callback_cls(b->len, b->data, release_entry_cb, e);
	if (!resp) {
		pe_cache_release(e);
		return MHD_NO;
	}
	add_table_headers(b, resp, hit ? "hit" : "miss");
	pe_http_add_cors(r->h, conn, resp);
	return pe_http_queue(r, conn, 200, resp);
}


/* ---- the job: compute, encode, fill the cache (worker thread) ---- */

static void body_free_cb(void *cls)
{
	struct table_body *b = cls;
	free(b->data);
	free(b);
}

/* The cache's destructor: drop the cache's use of the shared response; MHD frees the body when
 * the last connection sending it is done. */
static void body_release_cb(void *value) { MHD_destroy_response(((struct table_body *)value)->shared); }

/* ---- scratch tables ----
 * The tables of the formats that are not computed in place (JSON, CSV, PNG, gzip'd, bf16 npy) go
 * through a scratch block. Up to two blocks of at most SCRATCH_KEEP bytes are kept between jobs,
 * already faulted in: a fresh 1.5 MiB block for a 512x768 f32 table cost ~0.5 ms of page faults
 * per request, before the encoding can start (measured A/B on the cold JSON request: 7.4-7.6 ms
 * against 7.8-8.2). So at most 4 MiB stay resident for them. */

#define SCRATCH_KEEP ((size_t)2 << 20)

/* A block of at least n bytes: a kept one when one is big enough, else a new one, faulted in. */
static struct pe_scratch scratch_take(struct pe_http *h, size_t n)
{
	struct pe_scratch s = {0};
	pthread_mutex_lock(&h->scratch_lock);
	for (size_t i = 0; i < sizeof h->scratch / sizeof h->scratch[0] && !s.p; i++)
		if (h->scratch[i].cap >= n) {
			s = h->scratch[i];
			h->scratch[i] = (struct pe_scratch){0};
		}
	pthread_mutex_unlock(&h->scratch_lock);
	if (!s.p && (s.p = malloc(n)) != NULL) {
		s.cap = n;
		pe_mem_prefault(s.p, n);
	}
	return s;
}

/* Keep the block for the next job if it is small enough and a place is free (else the smaller
 * kept one makes way); free what is not kept. */
static void scratch_give(struct pe_http *h, struct pe_scratch s)
{
	if (s.cap <= SCRATCH_KEEP) {
		pthread_mutex_lock(&h->scratch_lock);
		for (size_t i = 0; i < sizeof h->scratch / sizeof h->scratch[0]; i++)
			if (h->scratch[i].cap < s.cap) {
				struct pe_scratch out = h->scratch[i];
				h->scratch[i] = s;
				s = out;
			}
		pthread_mutex_unlock(&h->scratch_lock);
	}
	free(s.p);
}

void pe_table_free_scratch(struct pe_http *h)
{
	for (size_t i = 0; i < sizeof h->scratch / sizeof h->scratch[0]; i++) {
		free(h->scratch[i].p);
		h->scratch[i] = (struct pe_scratch){0};
	}
}

/* Compute the table and encode it into out. bin and npy are computed straight into the response
 * buffer (after npy's header); the others go through a scratch table. */
static int encode(struct job *j, const struct pe_shape *s, struct pe_buf *out, struct pe_err *err)
{
	int overflow, rc;
	size_t n = pe_shape_count(s, &overflow), raw = n * pe_dtype_size(j->out.dt);
	struct pe_tensor_view t = {.shape = *s, .dtype = j->out.dt};
	if (pe_out_raw_direct(&j->out) || (j->out.fmt == PE_FMT_NPY && j->out.dt != PE_BF16)) {
		size_t hdr = j->out.fmt == PE_FMT_NPY ? pe_npy_header_len(&t) : 0; /* 64-aligned data */
		if ((rc = pe_buf_reserve(out, hdr + raw)) != 0)
			return pe_err_set(err, rc, "", "the response would exceed the size limit");
		if (hdr)
			pe_npy_write_header(out->data, &t);
		rc = pe_table_compute(&j->params, j->out.dt, out->data + hdr, err);
		if (rc == 0)
			out->len = hdr + raw;
		return rc;
	}
	if ((rc = pe_budget_take(j->h->opt.budget, raw ? raw : 1)) != 0)
		return pe_err_set(err, rc, "", "the response memory budget is full");
	struct pe_scratch tmp = scratch_take(j->h, raw ? raw : 1);
	if (!tmp.p)
		rc = pe_err_set(err, PE_ENOMEM, "", "out of memory");
	else if ((rc = pe_table_compute(&j->params, j->out.dt, tmp.p, err)) == 0) {
		t.data = tmp.p;
		rc = pe_out_encode(&j->out, &j->params, &t, out, err);
	}
	scratch_give(j->h, tmp);
	pe_budget_give(j->h->opt.budget, raw ? raw : 1);
	return rc;
}

static struct table_body *make_body(struct job *j, const struct pe_shape *s, struct pe_buf *out)
{
	struct table_body *b = calloc(1, sizeof *b);
	if (!b)
		return NULL;
	b->out = j->out;
	pe_shape_format(s, b->shape, sizeof b->shape);
	memcpy(b->etag, j->etag, sizeof b->etag);
	const struct pe_table_def *def = j->params.def;
	if (def->extra && def->extra_name) {
		snprintf(b->extra_name, sizeof b->extra_name, "X-PE-%s", "Attention-Scaling");
		b->extra[pe_fmt_f64(def->extra(&j->params), b->extra)] = 0;
	}
	b->data = pe_buf_steal(out, &b->len);
	b->shared = MHD_create_response_from_buffer_with_free_callback_cls(b->len, b->data, body_free_cb, b);
	if (!b->shared) {
		pe_budget_free_block(j->h->opt.budget, b->data);
		free(b);
		return NULL;
	}
	add_table_headers(b, b->shared, "hit");
	if (pe_http_cors_static(j->h))
		pe_http_add_cors(j->h, NULL, b->shared);
	return b;
}

static void job_free(struct job *j)
{
	pe_params_destroy(&j->params);
	free(j);
}

static void job_run(void *arg)
{
	struct job *j = arg;
	struct pe_err err = {0};
	struct pe_shape s;
	struct pe_buf out;
	pe_buf_init(&out, j->h->opt.max_response_bytes);
	pe_buf_set_budget(&out, j->h->opt.budget);
	pe_cancel_set_deadline(j->deadline); /* the waiters have been answered 503 by then */
	int rc = pe_cancelled(); /* expired while queued, or shutting down: no work at all */
	if (rc != 0)
		pe_cancel_err(rc, &err);
	else
		rc = pe_table_shape(&j->params, &s);
	if (rc == 0)
		rc = encode(j, &s, &out, &err);
	pe_cancel_set_deadline(0);
	struct table_body *b = rc == 0 ? make_body(j, &s, &out) : NULL;
	pe_buf_destroy(&out);
	if (b) {
		size_t held = pe_mem_size(b->data); /* reserved by out; the cache counts it from here */
		pe_cache_fill(j->h->opt.cache, j->key, j->keylen, b, held + pe_mem_size(b) + RESPONSE_OVERHEAD,
			      body_release_cb);
		pe_budget_give(j->h->opt.budget, held);
	} else
		pe_cache_fail(j->h->opt.cache, j->key, j->keylen, rc ? rc : PE_ENOMEM);
	job_free(j);
}

static struct job *job_new(struct pe_http *h, struct pe_params *p, const struct pe_out *o, const char *key,
			   size_t keylen, const char *etag)
{
	struct job *j = malloc(sizeof *j + keylen + 1);
	if (!j)
		return NULL;
	j->h = h;
	j->deadline = pe_monotonic() + (double)h->opt.job_timeout_s;
	j->params = *p; /* takes over the list allocations */
	memset(p, 0, sizeof *p);
	j->out = *o;
	memcpy(j->etag, etag, sizeof j->etag);
	memcpy(j->key, key, keylen + 1);
	j->keylen = keylen;
	return j;
}

/* ---- the request ---- */

/* A miss: this request computes. Submission failures fail the key, which answers every waiter. */
static void start_job(struct pe_http *h, struct pe_params *p, const struct pe_out *o, const char *key, size_t keylen,
		      const char *etag)
{
	struct job *j = job_new(h, p, o, key, keylen, etag);
	int rc = j ? h->opt.hooks.submit(h->opt.hooks.ctx, job_run, j) : PE_ENOMEM;
	if (rc != 0) {
		if (j)
			job_free(j);
		pe_cache_fail(h->opt.cache, key, keylen, rc);
	}
}

static enum MHD_Result lookup(struct req *r, struct MHD_Connection *conn, struct pe_params *p,
			      const struct pe_out *o, const char *key, size_t keylen)
{
	struct pe_http *h = r->h;
	struct pe_err err = {0};
	struct waiter *w = pe_waiter_new(h, conn);
	struct pe_cache_entry *e = NULL;
	int rc = w ? pe_cache_acquire(h->opt.cache, key, keylen, pe_waiter_ready_cb, w, &e) : PE_ENOMEM;
	if (rc == PE_CACHE_HIT) {
		pe_waiter_unref(w);
		pe_waiter_unref(w);
		return serve_entry(r, conn, e, 1);
	}
	if (rc < 0) {
		if (w) {
			pe_waiter_unref(w);
			pe_waiter_unref(w);
		}
		pe_err_set(&err, PE_ENOMEM, "", "out of memory");
		return pe_http_problem(r, conn, &err);
	}
	if (rc == PE_CACHE_MISS && check_output(p, o, &err) != 0) {
		pe_cache_fail(h->opt.cache, key, keylen, err.code); /* completes w: drops the cache's reference */
		pe_waiter_unref(w);
		return pe_http_problem(r, conn, &err);
	}
	r->w = w;
	r->on_resume = pe_table_resume;
	if (rc == PE_CACHE_MISS)
		start_job(h, p, o, key, keylen, r->etag);
	pe_waiter_suspend(w);
	return MHD_YES;
}

enum MHD_Result pe_table_request(struct req *r, struct MHD_Connection *conn, const struct pe_table_def *def)
{
	struct pe_http *h = r->h;
	struct pe_err err = {0};
	struct pe_params p;
	struct pe_out o;
	enum MHD_Result ret;
	char *key = NULL;
	pe_params_init(&p, def);
	if (atomic_load(&h->draining)) {
		pe_err_set(&err, PE_EDRAINING, "", "the service is shutting down");
		ret = pe_http_problem(r, conn, &err);
		goto out;
	}
	if (parse_request(h, conn, def, &p, &o, &err) != 0) {
		ret = pe_http_problem(r, conn, &err);
		goto out;
	}
	char small[4096]; /* most keys fit; long factor lists take the heap */
	int keylen = make_key(&p, &o, small, sizeof small);
	if (keylen < 0 && (key = malloc(KEY_MAX)) != NULL)
		keylen = make_key(&p, &o, key, KEY_MAX);
	const char *k = key ? key : small;
	if (keylen < 0) {
		pe_err_set(&err, PE_EINTERNAL, "", "cannot form the cache key");
		ret = pe_http_problem(r, conn, &err);
		goto out;
	}
	make_etag(k, (size_t)keylen, r->etag);
	const char *inm = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_NONE_MATCH);
	if (inm && pe_etag_matches(inm, r->etag))
		ret = pe_http_not_modified(r, conn, r->etag, "public, max-age=31536000, immutable");
	else
		ret = lookup(r, conn, &p, &o, k, (size_t)keylen);
out:
	free(key);
	pe_params_destroy(&p);
	return ret;
}

/* What a waiter is told when the job it waited for failed (the job's detail does not reach it). */
static const char *failure_text(int code)
{
	switch (code) {
	case PE_EBUSY:
		return "the job queue or the response memory budget is full; retry shortly";
	case PE_ETOOBIG:
		return "building the response needs more memory than response_budget_bytes";
	case PE_ETIMEOUT:
		return "the computation was stopped at job_timeout";
	case PE_EDRAINING:
		return "the service is shutting down";
	default:
		return "the computation failed";
	}
}

enum MHD_Result pe_table_resume(struct req *r, struct MHD_Connection *conn)
{
	struct waiter *w = r->w;
	struct pe_err err = {0};
	if (w->state == W_EXPIRED) {
		pe_err_set(&err, PE_ETIMEOUT, "", "the table was not ready within job_timeout");
		return pe_http_problem(r, conn, &err);
	}
	if (w->code != 0 || !w->entry) {
		pe_err_set(&err, w->code ? w->code : PE_EINTERNAL, "", "%s", failure_text(w->code));
		return pe_http_problem(r, conn, &err);
	}
	struct pe_cache_entry *e = w->entry;
	w->entry = NULL; /* serve_entry takes the reference */
	return serve_entry(r, conn, e, 0);
}
