/* The produce-and-cache path (see produce.h).
 *
 * A cached answer is a struct body: the encoded bytes plus, from its first hit on, one
 * MHD_Response built once with every header ("X-PE-Cache: hit"), queued as is on any number of
 * connections (MHD refcounts it and sends the buffer without copying). Once it exists the bytes
 * belong to that shared response and are freed by its free callback when MHD drops its last use
 * (the cache owns the response); before, the cache's destructor frees them. Requests that need
 * their own headers (a miss, a listed CORS origin, an echoed X-Request-Id) get a response over
 * the same bytes that holds a cache reference until MHD is done with it; a request answered with
 * the shared response holds one until it ends (req.sending). Either way a table evicted while its
 * bytes are still being sent is counted by the budget until they have gone (lru.c).
 *
 * Memory: a pooled job whose producer tells its need (need_cb) takes all of it from the response
 * budget at once before it runs (pe_produce_share_open; the job's output buffer and intermediates
 * are then reserved on that share). Otherwise the job's output buffer is reserved against the
 * response budget (opt.budget) as it grows. It starts in SMALL_BODY bytes of the job's stack,
 * reserved on the budget only when the
 * answer is copied out of them into a block of its exact size (pe_buf_use): one malloc per small
 * answer, where a block sized from the width bound would cost an aligned allocation and a
 * shrinking realloc on the HTTP thread. The finished body's reservation ends when the cache takes it:
 * from then on the cache counts it (by its allocation sizes), and if it leaves the cache while
 * still being sent, the cache charges it back to the budget until MHD lets go of it.
 *
 * Scratch blocks: the tables of the formats that are not computed in place go through a scratch
 * block. Up to two blocks of at most SCRATCH_KEEP bytes are kept between jobs, already faulted
 * in: a fresh 1.5 MiB block for a 512x768 f32 table costs ~0.5 ms of page faults per request
 * before the encoding can start. So at most 4 MiB stay resident for them.
 *
 * Warm memory: an answer's buffer (pe_produce_answer_buf, for this file's jobs and the POST ones)
 * takes its first block of 2 MiB or more from the daemon's warm reserve when one fits (opt.warm,
 * posenc/warm.h): pages written ahead, off the request's path.
 *
 * Inline work: a miss whose job the producer estimates at most inline_max_us (default 50 us) is
 * computed, encoded and put in the cache on the HTTP thread that parsed it, and answered at once:
 * no suspend, no pool, no resume. Everything else is the pooled path's: the same job (budget,
 * deadline, scratch), the key filled or failed in the cache (single flight: the request's waiter
 * is registered as on the pool path and completed by that fill, before pe_produce_answer returns),
 * the same ETag, headers and "miss", and posenc_jobs_total counts it (hooks.ran_inline; also
 * posenc_jobs_inline_total). The estimate (pe_produce_estimate_ns) is elements x a per-format
 * cost + a fixed part, measured with tests/bench/bench_inline.c (below), + the computation at the
 * worst cost measured over every table (pe_produce_compute_ns: per element, per row, the core's
 * intermediate table and work; a narrow table's rows or a pow per element cost 10-20x what a
 * wide sinusoidal table's elements do, and a client picks its table); PNG is
 * never inline (3-5 ms at any size), gzip'd text not at the default (libdeflate's compressor
 * reset per response: ~30 us), and a producer without an estimate (learned tables, read
 * from the store) never is (the estimates and the memory bounds: produce_cost.c). So the HTTP
 * thread is held at most about inline_max_us per request: a table too large for it always
 * takes the pool and can never block the thread (fault test
 * test_inline holds one on the only worker and gets small tables answered meanwhile).
 *   Why 50 us: a 16x16 f32 JSON table takes ~14 us to compute and encode and a 32x32 ~27 us
 * (bench_inline), while the trip through the pool (suspend, a worker's wake-up, the resume through
 * MHD's ITC, the handler again) costs several times that per request. 50 us keeps f32 JSON up to
 * ~600 elements (24x24) and bin/npy up to ~1300 (32x32) inline, every table's worst case included;
 * past that the work itself dominates and the pool's parallelism pays, and 16 clients each holding
 * the thread 50 us delay another by under 1 ms. Under many concurrent misses on a saturated
 * machine the pool can give more requests/s (its threads against one): inline_max_us 0 chooses
 * that, at the price of small tables queueing behind large ones (docs/architecture.md has the
 * measured figures of both).
 *   Another request for a key being computed inline: on the same HTTP thread it is parsed only
 * once the computation is done (it then hits); on another of the http_threads it finds the key
 * pending in the cache (PE_CACHE_WAIT), suspends on its waiter as for a pooled job, and is resumed
 * by the inline computation's pe_cache_fill like any joiner ("miss": it waited). Single flight
 * holds either way, as the cache, not the thread, owns it (tests/fault/test_http_threads.c).
 *
 * Failures: a job that fails with a problem of its own (its pe_err set for the code it returns)
 * fails the key with it (pe_cache_fail_err), so the request that made the job and every request
 * that joined it answer the same problem+json, detail and param included; a bare code (out of
 * memory before the job ran, a refused submit) is worded by the producer's failure_cb. */
#include "http/produce.h"
#include "http/stream.h"
#include "http/test_hooks.h"
#include "posenc/warm.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A cached body's shared MHD_Response and its headers, charged to its cache entry when built (at
 * its first hit): 1328 bytes in use for a 16x16 JSON table's (mallinfo2 around its creation), a
 * few hundred more with Content-Encoding and an extra header. */
#define SHARED_RESPONSE_BYTES 2048
#define SCRATCH_KEEP ((size_t)2 << 20)
#define NKEPT 2
/* The stack bytes a job's answer starts in: every answer small enough for the HTTP thread fits
 * (a 24x24 f32 JSON table's width bound is ~9.5 KiB, 32x32 f64 bin 8 KiB). */
#define SMALL_BODY 16384

struct pe_produce {
	pthread_mutex_t lock;
	struct pe_scratch kept[NKEPT];
	struct pe_streams *streams;
};

enum { SHARED_NONE, SHARED_BUILDING, SHARED_READY };

struct body {
	char *data;
	size_t len;
	struct MHD_Response *shared; /* built at the first hit that may use it (shared_response) */
	atomic_int shared_state;     /* SHARED_NONE, SHARED_BUILDING (one thread), SHARED_READY */
	const struct pe_producer *pr;
	struct pe_warm *warm; /* where data's block goes when the body is done with (else freed) */
	struct pe_out out;
	struct pe_body_info info;
	char etag[40];
};

struct job {
	struct pe_http *h;
	const struct pe_producer *pr;
	void *job;       /* the producer's */
	double deadline; /* pe_monotonic() time past which the computation stops (job_timeout) */
	struct pe_out out;
	char etag[40];
	struct pe_stream *stream; /* the answer's, when it streams (until the job ends) */
	size_t keylen;
	char key[]; /* the cache key */
};

/* The stream the calling thread's job feeds (job_compute sets it around produce_cb). */
static _Thread_local struct pe_stream *tl_stream;

/* ---- the module's state: scratch blocks ---- */

struct pe_produce *pe_produce_new(void)
{
	struct pe_produce *p = calloc(1, sizeof *p);
	if (p && !(p->streams = pe_streams_new())) {
		free(p);
		p = NULL;
	}
	if (p)
		pthread_mutex_init(&p->lock, NULL);
	return p;
}

void pe_produce_free(struct pe_produce *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < NKEPT; i++)
		free(p->kept[i].p);
	pe_streams_free(p->streams);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

/* A new scratch block of n bytes, faulted in at once: a pe_buf's first block, which from 2 MiB lies
 * on huge pages (buf.c), so a large table's scratch costs a page fault per 2 MiB instead of one per
 * 4 KiB. Freed with free(). */
static void *fresh_block(size_t n)
{
	struct pe_buf b;
	char *p = NULL;
	pe_buf_init(&b, n);
	if (pe_buf_reserve(&b, n) == 0) {
		b.len = n;
		pe_buf_take(&b, &p, NULL);
	}
	pe_buf_destroy(&b);
	if (p)
		pe_mem_prefault(p, n);
	return p;
}

struct pe_scratch pe_produce_scratch_take(struct pe_http *h, size_t n)
{
	struct pe_produce *p = h->produce;
	struct pe_scratch s = {0};
	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < NKEPT && !s.p; i++)
		if (p->kept[i].cap >= n) {
			s = p->kept[i];
			p->kept[i] = (struct pe_scratch){0};
		}
	pthread_mutex_unlock(&p->lock);
	if (!s.p && (s.p = fresh_block(n)) != NULL)
		s.cap = n;
	return s;
}

/* Keep the block if it is small enough and a place is free (else the smaller kept one makes
 * way); free what is not kept. */
void pe_produce_scratch_give(struct pe_http *h, struct pe_scratch s)
{
	struct pe_produce *p = h->produce;
	if (s.cap <= SCRATCH_KEEP) {
		pthread_mutex_lock(&p->lock);
		for (size_t i = 0; i < NKEPT; i++)
			if (p->kept[i].cap < s.cap) {
				struct pe_scratch out = p->kept[i];
				p->kept[i] = s;
				s = out;
			}
		pthread_mutex_unlock(&p->lock);
	}
	free(s.p);
}

/* ---- ETags ---- */

static uint64_t fnv1a(const char *s, size_t n, uint64_t h)
{
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

void pe_produce_etag(const char *key, size_t len, char out[40])
{
	uint64_t a = fnv1a(PE_OUTPUT_EPOCH, strlen(PE_OUTPUT_EPOCH), 0xcbf29ce484222325ull);
	a = fnv1a(key, len, a);
	uint64_t b = fnv1a(key, len, 0x84222325cbf29ce4ull ^ (uint64_t)len);
	static const char hex[] = "0123456789abcdef";
	out[0] = '"';
	for (int i = 0; i < 16; i++) { /* "%016" PRIx64 "%016" PRIx64, without the format parser */
		out[1 + i] = hex[a >> (60 - 4 * i) & 15];
		out[17 + i] = hex[b >> (60 - 4 * i) & 15];
	}
	out[33] = '"';
	out[34] = 0;
}

/* ---- responses ---- */

static void add_headers(const struct body *b, struct MHD_Response *resp, const char *cache)
{
	pe_http_out_headers(&b->out, resp);
	MHD_add_response_header(resp, "X-PE-Shape", b->info.shape);
	MHD_add_response_header(resp, "X-PE-Dtype", pe_dtype_name(b->out.dt));
	MHD_add_response_header(resp, "X-PE-Cache", cache);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, b->etag);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, b->pr->cache_control);
	if (b->info.extra_name[0] && b->info.extra[0])
		MHD_add_response_header(resp, b->info.extra_name, b->info.extra);
}

static void release_entry_cb(void *cls) { pe_cache_release(cls); }

static void body_free_cb(void *cls)
{
	struct body *b = cls;
	if (!pe_warm_give(b->warm, b->data)) /* written to its end: the next large answer's */
		free(b->data);
	free(b);
}

/* b's shared response (every header of a hit, CORS's when it is the same for every origin), e's
 * value: built by the first hit that finds none, by one thread only, and then queued by every hit
 * on any thread; a hit that finds another thread building it waits for it (a few microseconds,
 * yielding), so no hit answers with a response of its own (which would carry a generated
 * X-Request-Id). NULL when memory ran out (that hit answers with its own). Built at the first
 * hit, not with the body, and charged to e then (SHARED_RESPONSE_BYTES): a table asked for once
 * (a new offset each decoding step) never pays for a second response, on its miss, in the cache's
 * bytes or on its eviction (perf, cold 16x16 misses on a full cache: the two responses' headers
 * and the evicted one's destruction ~10% of the HTTP thread). The miss answer's header
 * allocations then no longer reuse the evicted response's freed chunks unless glibc's thread cache
 * holds more than its default 7 a size (docs/configuration.md, Allocator tuning). The
 * caller holds a reference to e, so b outlives this. */
static struct MHD_Response *shared_response(struct pe_http *h, struct pe_cache_entry *e, struct body *b)
{
	for (;;) {
		int state = atomic_load_explicit(&b->shared_state, memory_order_acquire);
		if (state == SHARED_READY)
			return b->shared;
		if (state == SHARED_BUILDING) { /* another HTTP thread, for a few microseconds */
			sched_yield();
			continue;
		}
		if (atomic_compare_exchange_weak_explicit(&b->shared_state, &state, SHARED_BUILDING, memory_order_acquire,
							  memory_order_relaxed))
			break;
	}
	b->shared = MHD_create_response_from_buffer_with_free_callback_cls(b->len, b->data, body_free_cb, b);
	if (!b->shared) {
		atomic_store_explicit(&b->shared_state, SHARED_NONE, memory_order_release);
		return NULL;
	}
	add_headers(b, b->shared, "hit");
	pe_http_add_cors(h, NULL, b->shared);
	atomic_store_explicit(&b->shared_state, SHARED_READY, memory_order_release);
	pe_cache_charge_more(h->opt.cache, e, SHARED_RESPONSE_BYTES);
	return b->shared;
}

/* Answer from a cache entry; takes over the caller's reference. */
static enum MHD_Result serve_entry(struct req *r, struct MHD_Connection *conn, struct pe_cache_entry *e, int hit)
{
	struct body *b = pe_cache_value(e);
	struct MHD_Response *shared;
	r->cache_hit = hit;
	r->bytes = b->len;
	if (hit && pe_http_cors_static(r->h) && !r->request_id_given && (shared = shared_response(r->h, e, b))) {
		r->status = 200;
		pe_http_large_answer(r->h, conn, b->len, e, NULL);
		r->sending = e; /* the reference, until the answer has gone */
		return MHD_queue_response(conn, 200, shared);
	}
	struct MHD_Response *resp =
		MHD_create_response_from_buffer_with_free_callback_cls(b->len, b->data, release_entry_cb, e);
	if (!resp) {
		pe_cache_release(e);
		return MHD_NO;
	}
	add_headers(b, resp, hit ? "hit" : "miss");
	pe_http_add_cors(r->h, conn, resp);
	r->answer_entry = e;
	return pe_http_queue(r, conn, 200, resp);
}

/* ---- the job (worker thread) ---- */

/* The cache's destructor, run when the entry's last reference goes (so no hit is building the
 * shared response): drop the cache's use of the shared response, and MHD frees the body when the
 * last connection sending it is done; without one, the body goes now. */
static void body_release_cb(void *value)
{
	struct body *b = value;
	if (atomic_load_explicit(&b->shared_state, memory_order_acquire) == SHARED_READY)
		MHD_destroy_response(b->shared);
	else
		body_free_cb(b);
}

/* The encoded bytes in out become b's (its shared response comes with its first hit). */
static int make_body(struct job *j, struct body *b, struct pe_buf *out)
{
	b->pr = j->pr;
	b->warm = j->h->opt.warm;
	b->out = j->out;
	memcpy(b->etag, j->etag, sizeof b->etag);
	return pe_buf_take(out, &b->data, &b->len);
}

static void job_free(struct job *j)
{
	if (j->stream) /* never ran */
		pe_stream_abort(j->stream);
	if (j->job)
		j->pr->job_free_cb(j->job);
	free(j);
}

/* Fail a key: with the job's own problem when it tells this failure (its code, with a detail) and
 * the failure is the client's (4xx), or the producer writes its server-side details for clients
 * (pr->client_details), so the request that made the job and every request waiting on the key
 * answer what the job found, param included; else with the code alone (the producer's failure_cb
 * words it). Other server-side details (which may name hosts or paths) stay out of answers. */
static void fail_key(struct pe_http *h, const struct pe_producer *pr, const char *key, size_t keylen, int rc,
		     const struct pe_err *err)
{
	if (rc < 0 && err->code == rc && err->detail[0] && (pe_err_status(rc) < 500 || pr->client_details))
		pe_cache_fail_err(h->opt.cache, key, keylen, err);
	else
		pe_cache_fail(h->opt.cache, key, keylen, rc);
}

/* Compute, encode and publish j's answer (fill or fail its key), on whichever thread runs it. The
 * answer is written on the stack first (SMALL_BODY; 64-byte aligned for the tables computed in
 * place) and copied into a block of its exact size; a larger one moves to the heap as it grows.
 * A pooled job whose producer tells its need reserves all of it first (its share); inline jobs
 * are small and never wait, so they reserve as they go. */
static void job_compute(struct job *j, int pooled)
{
	struct pe_http *h = j->h;
	struct pe_err err = {0};
	struct pe_buf out;
	struct pe_budget *share = NULL;
	_Alignas(64) char small[SMALL_BODY];
	struct body *b = malloc(sizeof *b); /* not calloc: glibc's calloc bypasses its thread cache */
	if (b)
		*b = (struct body){.data = NULL};
	pe_buf_init(&out, h->opt.max_response_bytes);
	pe_cancel_set_deadline(j->deadline); /* the waiters have been answered 503 by then */
	int rc = pe_cancelled();             /* expired while queued, or shutting down: no work at all */
	if (rc != 0)
		pe_cancel_err(rc, &err);
	else if (!b)
		rc = PE_ENOMEM;
	else if (pooled && j->pr->need_cb)
		rc = pe_produce_share_open(h, j->pr->need_cb(j->job), &share, &err);
	pe_produce_answer_buf(h, &out, share ? share : h->opt.budget);
	pe_buf_use(&out, small, sizeof small);
	struct pe_stream *s = j->stream;
	j->stream = NULL;
	tl_stream = s;
	if (rc == 0)
		rc = j->pr->produce_cb(j->job, &out, &b->info, &err);
	tl_stream = NULL;
	pe_cancel_set_deadline(0);
	if (s) /* its readers wait while the bytes change hands */
		pe_stream_hold(s);
	if (rc == 0)
		rc = make_body(j, b, &out);
	pe_buf_destroy(&out);
	if (rc == 0) {
		size_t held = pe_mem_size(b->data); /* reserved by out; the cache counts it from here */
		const char *data = b->data;
		if (pe_cache_fill(h->opt.cache, j->key, j->keylen, b, held + pe_mem_size(b), body_release_cb) != 0)
			data = NULL; /* freed */
		if (s) /* data is held by the stream's entry when the fill gave it one */
			pe_stream_end(s, 0, data, b->len);
		pe_budget_give(share ? share : h->opt.budget, held);
		pe_mem_keep_headroom(); /* the cache keeps b: the next bodies' room, made in one step */
	} else {
		free(b);
		fail_key(h, j->pr, j->key, j->keylen, rc, &err);
		if (s)
			pe_stream_end(s, rc, NULL, 0);
	}
	pe_budget_share_close(share);
}

/* ---- streams (stream.c) ---- */

void pe_produce_answer_buf(struct pe_http *h, struct pe_buf *out, struct pe_budget *budget)
{
	pe_buf_set_budget(out, budget);
	pe_buf_set_warm(out, h->opt.warm);
}

int pe_produce_streaming(void) { return tl_stream != NULL; }

int pe_produce_progress(const struct pe_buf *out, size_t total, const struct pe_body_info *info,
			struct pe_err *err)
{
	return tl_stream ? pe_stream_publish(tl_stream, out->data, out->len, total, info, err) : 0;
}

void pe_produce_stream_stats(struct pe_http *h, uint64_t *begun, uint64_t *cancelled)
{
	pe_streams_stats(h->produce->streams, begun, cancelled);
}

/* Answer from a stream (taking over the caller's reference, reader's place and the reader's bytes
 * on the budget): "miss", the stream's headers, its bytes as they are computed. */
static enum MHD_Result serve_stream(struct req *r, struct MHD_Connection *conn, struct pe_stream *s)
{
	const struct pe_stream_head *hd = pe_stream_head(s);
	struct body b = {.pr = hd->pr, .out = hd->out, .info = hd->info};
	memcpy(b.etag, hd->etag, sizeof b.etag);
	r->cache_hit = 0;
	r->bytes = 0; /* counted as sent; the request is logged when the stream ends (server.c) */
	r->observe_at_end = 1;
	/* r->bytes counts what was sent, so pe_http_queue sees 0: the stream's answer is large */
	pe_http_large_answer(r->h, conn, hd->total == PE_PRODUCE_LENGTH_UNKNOWN ? PE_GUARD_SIZE_UNKNOWN : hd->total,
			     NULL, s);
	struct MHD_Response *resp = pe_stream_response(s, conn, &r->bytes);
	if (!resp)
		return MHD_NO;
	/* libmicrohttpd 0.9.75 sends chunked coding's last chunk after a HEAD's headers, a body the
	 * client does not read, which breaks a kept-alive connection's framing: without chunking the
	 * HEAD answer ends at its headers, and the connection closes after it. */
	if (hd->total == PE_PRODUCE_LENGTH_UNKNOWN && strcmp(r->method, MHD_HTTP_METHOD_HEAD) == 0)
		MHD_set_response_options(resp, MHD_RF_HTTP_1_0_COMPATIBLE_STRICT, MHD_RO_END);
	add_headers(&b, resp, "miss");
	pe_http_add_cors(r->h, conn, resp);
	return pe_http_queue(r, conn, 200, resp);
}

/* A request that found the stream begun: its reader's room is taken from the budget, or it is
 * answered 503 as any answer that does not fit now (readers joining one stream are not bounded by
 * it otherwise: each holds PE_STREAM_READER_BYTES of its own). */
static enum MHD_Result join_stream(struct req *r, struct MHD_Connection *conn, struct pe_stream *s)
{
	struct pe_err err = {0};
	if (pe_budget_take(r->h->opt.budget, PE_STREAM_READER_BYTES) != 0) {
		pe_stream_leave(s);
		pe_err_set(&err, PE_EBUSY, "", "the response memory budget is full; retry shortly");
		return pe_http_problem(r, conn, &err);
	}
	return serve_stream(r, conn, s);
}

/* A job on a worker. */
static void job_run(void *arg)
{
	struct job *j = arg;
	pe_hook_job_gate(j->key, j->keylen); /* test builds only; inline work never waits there */
	job_compute(j, 1);
	job_free(j);
}

/* ---- the request ---- */

static enum MHD_Result produce_resume(struct req *r, struct MHD_Connection *conn)
{
	struct waiter *w = r->w;
	struct pe_err err = {0};
	if (w->state == W_EXPIRED) {
		if (w->shut_down)
			pe_err_set(&err, PE_EDRAINING, "", "the service is shutting down: the table was called off");
		else
			pe_err_set(&err, PE_ETIMEOUT, "", "the table was not ready within job_timeout");
		return pe_http_problem(r, conn, &err);
	}
	if (w->result) { /* answered by the first block of a stream */
		struct pe_stream *s = w->result;
		w->result = NULL;
		return serve_stream(r, conn, s);
	}
	const struct pe_err *failed = pe_cache_entry_err(w->entry); /* the job's own problem, if it left one */
	if (failed)
		return pe_http_problem(r, conn, failed);
	if (w->code != 0 || !w->entry) {
		const struct pe_producer *pr = r->resume_arg;
		pr->failure_cb(w->code ? w->code : PE_EINTERNAL, &err);
		return pe_http_problem(r, conn, &err);
	}
	struct pe_cache_entry *e = w->entry;
	w->entry = NULL; /* serve_entry takes the reference */
	return serve_entry(r, conn, e, 0);
}

/* Where j runs: here when small enough for the HTTP thread (within inline_max_us), else on the
 * pool through submit, or submit_heavy when estimated over PE_PRODUCE_HEAVY_NS (a large table). */
enum where { RUN_HERE, RUN_POOLED, RUN_HEAVY };

static enum where place(const struct pe_http *h, const struct job *j)
{
	if (!j->pr->estimate_cb) /* no estimate: the pool, never heavy */
		return RUN_POOLED;
	uint64_t ns = j->pr->estimate_cb(j->job); /* once per job; UINT64_MAX: too costly to say */
	if (h->opt.inline_max_us && ns <= (uint64_t)h->opt.inline_max_us * 1000)
		return RUN_HERE;
	return ns > PE_PRODUCE_HEAVY_NS && h->opt.hooks.submit_heavy ? RUN_HEAVY : RUN_POOLED;
}

/* A miss: this request computes, here when the work is small (the key is filled or failed before
 * this returns, and *inlined is set), else on the pool. Failures fail the key, which answers
 * every waiter. */
static int start_job(struct req *r, struct waiter *wt, const struct pe_producer *pr, const struct pe_out *o,
		     const char *key, size_t keylen, void *ctx, int *inlined, struct pe_err *err)
{
	struct pe_http *h = r->h;
	struct job *j = malloc(sizeof *j + keylen + 1);
	if (!j)
		return pe_err_set(err, PE_ENOMEM, "", "out of memory");
	*j = (struct job){.h = h, .pr = pr, .deadline = pe_monotonic() + (double)h->opt.job_timeout_s, .out = *o,
			  .keylen = keylen};
	memcpy(j->etag, r->etag, sizeof j->etag);
	memcpy(j->key, key, keylen + 1);
	if (!(j->job = pr->job_new_cb(ctx, err))) {
		free(j);
		return err->code ? err->code : pe_err_set(err, PE_ENOMEM, "", "out of memory");
	}
	enum where w = place(h, j);
	if (w == RUN_HERE) {
		job_compute(j, 0);
		job_free(j);
		if (h->opt.hooks.ran_inline)
			h->opt.hooks.ran_inline(h->opt.hooks.ctx);
		*inlined = 1;
		return 0;
	}
	if (pr->job_keep_cb && pr->job_keep_cb(j->job) != 0) {
		job_free(j);
		return pe_err_set(err, PE_ENOMEM, "", "out of memory");
	}
	/* not for HTTP/1.0, which could not tell a text stream cut short (chunked's last chunk
	 * missing) from a whole one: its answer is computed whole, with a Content-Length */
	if (pr->stream_cb && !r->http10 && pr->stream_cb(j->job)) /* NULL (out of memory): computed whole */
		j->stream = pe_stream_new(h->produce->streams, h->opt.cache, h->opt.budget, wt, pr, o, r->etag, key,
					   keylen);
	int rc = (w == RUN_HEAVY ? h->opt.hooks.submit_heavy : h->opt.hooks.submit)(h->opt.hooks.ctx, job_run, j);
	if (rc != 0) {
		job_free(j);
		pe_cache_fail(h->opt.cache, key, keylen, rc); /* this request hears it on resuming */
	}
	return 0;
}

/* Hit: answer. Under way: wait. Miss: this request computes on the pool. */
static enum MHD_Result lookup(struct req *r, struct MHD_Connection *conn, const struct pe_producer *pr,
			      const struct pe_out *o, const char *key, size_t keylen, void *ctx)
{
	struct pe_http *h = r->h;
	struct pe_err err = {0};
	struct waiter *w = pe_waiter_new(h, conn);
	struct pe_cache_entry *e = NULL;
	int rc = w ? pe_cache_acquire(h->opt.cache, key, keylen, pe_waiter_ready_cb, w, &e) : PE_ENOMEM;
	if (rc == PE_CACHE_HIT || rc < 0) {
		if (w) {
			pe_waiter_unref(w);
			pe_waiter_unref(w);
		}
		if (rc == PE_CACHE_HIT)
			return serve_entry(r, conn, e, 1);
		pe_err_set(&err, PE_ENOMEM, "", "out of memory");
		return pe_http_problem(r, conn, &err);
	}
	struct pe_stream *s;
	if (rc == PE_CACHE_WAIT && (s = pe_stream_join(h->produce->streams, key, keylen, r->http10, w)) != NULL) {
		r->w = w; /* the cache's completion of w comes at the fill, unused */
		return join_stream(r, conn, s);
	}
	int inlined = 0;
	if (rc == PE_CACHE_MISS && !r->etag[0])
		pe_produce_etag(key, keylen, r->etag);
	if (rc == PE_CACHE_MISS && start_job(r, w, pr, o, key, keylen, ctx, &inlined, &err) != 0) {
		fail_key(h, pr, key, keylen, err.code, &err); /* completes w: drops the cache's reference */
		pe_waiter_unref(w);
		return pe_http_problem(r, conn, &err);
	}
	r->w = w;
	r->on_resume = produce_resume;
	r->resume_arg = pr;
	if (inlined && pe_waiter_done(w)) /* filled (or failed) on this thread: answer now */
		return produce_resume(r, conn);
	pe_waiter_suspend(w);
	return MHD_YES;
}

/* The ETag is formed here only for If-None-Match; otherwise by the miss that makes the job (its
 * body keeps it), so a hit, whose headers come with its body, hashes nothing. */
enum MHD_Result pe_produce_answer(struct req *r, struct MHD_Connection *conn, const struct pe_producer *pr,
				  const struct pe_out *o, const char *key, size_t keylen, void *ctx)
{
	const char *inm = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_NONE_MATCH);
	r->etag[0] = 0;
	if (inm) {
		pe_produce_etag(key, keylen, r->etag);
		if (pe_etag_matches(inm, r->etag))
			return pe_http_not_modified(r, conn, r->etag, pr->cache_control);
	}
	return lookup(r, conn, pr, o, key, keylen, ctx);
}
