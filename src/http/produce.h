/* One path from a GET to its cached answer, for every handler whose answers are cached (tables,
 * learned tables): key -> If-None-Match -> cache lookup -> single flight -> job on the pool ->
 * suspend -> resume -> serve the shared response; or, for a job estimated small, job on this
 * thread -> serve, with no suspension.
 *
 * A handler parses and validates the request, forms the cache key (everything that shapes the
 * bytes, output options included) and calls pe_produce_answer with its producer. Only the
 * request that misses makes a job (job_new_cb); the job's produce_cb runs on a worker (or on the
 * HTTP thread, when estimate_cb says at most inline_max_us) under job_timeout (pe_cancelled) and
 * writes the encoded answer; every request waiting on the key is answered from the one body. */
#ifndef PE_HTTP_PRODUCE_H
#define PE_HTTP_PRODUCE_H

#include "http/internal.h"

/* What a producer tells about its answer besides the bytes: response headers. */
struct pe_body_info {
	char shape[160];           /* X-PE-Shape, "2048,512" */
	char extra_name[40];       /* a header of the table's own ("X-PE-Attention-Scaling"), "" for none */
	char extra[PE_NUM_MAX + 1];
};

struct pe_producer {
	const char *cache_control; /* of every answer, 304s included */
	/* A miss (MHD thread): the job that computes the key, or NULL with err set (the request is
	 * answered with err, and so is every request that waits on the key). ctx: the handler's. */
	void *(*job_new_cb)(void *ctx, struct pe_err *err);
	/* Compute and encode the answer into out (appended), fill info (worker thread). */
	int (*produce_cb)(void *job, struct pe_buf *out, struct pe_body_info *info, struct pe_err *err);
	void (*job_free_cb)(void *job);
	/* Optional: the job leaves the HTTP thread (the pool computes it), so it must own what it
	 * borrowed from the request (job_new_cb's ctx) until now; 0, or PE_ENOMEM. Not called for a
	 * job computed inline, which ends before the call that made it returns. */
	int (*job_keep_cb)(void *job);
	/* The job's work in estimated nanoseconds (pe_produce_estimate_ns): at most inline_max_us and
	 * it is computed on the HTTP thread, without suspending. NULL: always on the pool. */
	uint64_t (*estimate_cb)(void *job);
	/* The most the job holds on the response budget at once (what its 413 check added up). With
	 * it, a pooled job takes all of it at once before produce_cb runs, waiting for it as
	 * pe_produce_share_open says, and produce_cb reserves on out->budget (the job's share).
	 * NULL: produce_cb reserves on opt.budget as it goes. */
	uint64_t (*need_cb)(void *job);
	/* The problem a waiting request gets when the job failed with code and left no problem of
	 * its own for it (err not set, or set for another code): fills err. When it did, every
	 * request on the key gets the job's (produce.c, pe_cache_fail_err). */
	void (*failure_cb)(int code, struct pe_err *err);
	/* Optional (NULL: never): 1 when the job's answer streams (its first bytes are sent after its
	 * first block, see pe_produce_progress), 0 when it is computed whole. Asked on a miss that
	 * goes to the pool (MHD thread). */
	int (*stream_cb)(void *job);
	/* 1: produce_cb's 5xx details are written for any client (the store's: no host, no path) and
	 * are answered as they are; 0: a 5xx is worded by failure_cb alone. */
	int client_details;
};

/* The per-server state of this module (scratch blocks kept between jobs); NULL when out of memory. */
struct pe_produce *pe_produce_new(void);
void pe_produce_free(struct pe_produce *p); /* when no job runs any more */

/* Scratch blocks for producers that compute a table before encoding it (JSON, CSV, PNG, gzip):
 * up to two blocks of at most 2 MiB are kept between jobs, already faulted in. take gives a block
 * of at least n bytes (p NULL when out of memory); give keeps or frees it. Any thread. */
struct pe_scratch {
	void *p;
	size_t cap;
};
struct pe_scratch pe_produce_scratch_take(struct pe_http *h, size_t n);
void pe_produce_scratch_give(struct pe_http *h, struct pe_scratch s);

/* ---- the response budget, decided before a job ----
 * A job reserves on opt.budget before it allocates: its output buffer as it grows, and every
 * intermediate (scratch tables, the core's own arrays, a learned table's file and float64 copy).
 * So that a response which could never fit is refused at once (413) instead of after the work, a
 * producer's job_new_cb adds up the most its job will hold at once from the parameters, with the
 * bound below for the output, and asks pe_produce_budget_check. */

/* The most the output buffer of a job reserves for t's shape and dtype encoded as o says: the
 * writers' own bound (pe_out_bound; gzip: the text and its compressed copy together). head: the
 * most a JSON document's encoding and parameters take (ignored by other formats); png: the
 * picture's layout (format=png only, else NULL). Saturates at UINT64_MAX. */
uint64_t pe_produce_out_bound(const struct pe_out *o, const struct pe_shape *s, size_t head,
			      const struct pe_png_layout *png);
/* Saturating sums and products for these estimates. */
uint64_t pe_produce_add(uint64_t a, uint64_t b);
uint64_t pe_produce_mul(uint64_t a, uint64_t b);
/* A block of n elements of `size` bytes as the budget counts it once allocated (pe_budget_malloc):
 * with its usable size's rounding, up to a mapping's last page. A job's share that counted blocks
 * by their request came up a few KiB short, and its last block spilled whole to a parent that had
 * no room (a 503 at a budget of exactly the job's need). Saturates. */
uint64_t pe_produce_block(uint64_t n, uint64_t size);
/* 0 when need bytes fit in the whole response budget (or there is none); else PE_ETOOBIG naming
 * param (counted as a refusal, like a reservation over the limit). */
int pe_produce_budget_check(struct pe_http *h, uint64_t need, const char *param, struct pe_err *err);
/* A job's share of the response budget (pe_budget_share_open): n bytes taken at once before the
 * job allocates, so that a job that started has its memory and two jobs cannot each hold part of
 * the budget and refuse the other. When it does not fit now the job waits for it on its worker, up
 * to PE_PRODUCE_SHARE_WAIT_S and never past its thread's deadline (pe_cancel_deadline), one job at
 * a time (its bytes kept back from other takes of 64 KiB or more); any other is refused at once.
 * *share NULL without a budget. 0, or PE_EBUSY / PE_ETIMEOUT / PE_EDRAINING / PE_ENOMEM with err
 * set. Worker threads only. */
#define PE_PRODUCE_SHARE_WAIT_S 2.0
/* Work estimated over this (ns) goes to the pool through hooks.submit_heavy: a 512x768 JSON table
 * is ~6 ms, a gzip'd small one ~0.3 ms. */
#define PE_PRODUCE_HEAVY_NS 1000000u
int pe_produce_share_open(struct pe_http *h, uint64_t n, struct pe_budget **share, struct pe_err *err);
/* A job's answer buffer counted on budget (its share, or opt.budget), its first block of 2 MiB or
 * more taken from the warm reserve when one fits (opt.warm): every job that writes an answer. */
void pe_produce_answer_buf(struct pe_http *h, struct pe_buf *out, struct pe_budget *budget);

/* ---- inline work ----
 * The time a job would take, estimated from its element count and format with the per-element
 * costs tests/bench/bench_inline.c measures, plus work (nanoseconds: pe_produce_compute_ns).
 * Saturates. */
uint64_t pe_produce_estimate_ns(const struct pe_out *o, uint64_t elements, uint64_t work);
/* The computation's time in the worst case over the tables: elements of dtype dt, rows
 * (innermost vectors: every one has a fixed cost, which dominates narrow tables), intermediate
 * elements and multiply-adds (the core's pe_cost). Saturates. */
uint64_t pe_produce_compute_ns(enum pe_dtype dt, uint64_t elements, uint64_t rows, uint64_t intermediate,
			       uint64_t madds);

/* A /v1/<table> job's estimate for params p (finished) and output o: what decides whether it runs
 * on the HTTP thread (table.c; UINT64_MAX when the table cannot be sized). */
uint64_t pe_table_estimate_ns(const struct pe_params *p, const struct pe_out *o);
/* ---- streamed answers ----
 * A job whose producer said it streams (stream_cb) runs produce_cb with a stream to feed: the
 * producer reserves out for the whole answer at once (out->data never moves after), fills info
 * first, and after each block calls pe_produce_progress with out->len the bytes now final, in
 * order. The request that made the job is answered at the first call (headers from info, the key's
 * ETag, Content-Length total, or chunked transfer coding when total is PE_PRODUCE_LENGTH_UNKNOWN:
 * text, whose length is known at its end) and reads the rest as it comes; so do requests for the
 * key that arrive meanwhile; on completion out becomes the cache's body as for any job (stream.c). */
#define PE_PRODUCE_STREAM_MIN ((uint64_t)8 << 20) /* answers streamed past this size */
#define PE_PRODUCE_LENGTH_UNKNOWN SIZE_MAX
/* 1 while the calling thread's job has a stream to feed. */
int pe_produce_streaming(void);
/* The first out->len bytes of out (total in all) are final. 0, or an error with err set when the
 * job should stop: every reader went away and no other request waits. No-op without a stream. */
int pe_produce_progress(const struct pe_buf *out, size_t total, const struct pe_body_info *info,
			struct pe_err *err);

/* Streams begun and streams called off (every reader gone) since start, for /metrics. */
void pe_produce_stream_stats(struct pe_http *h, uint64_t *begun, uint64_t *cancelled);

/* The strong ETag of a cache key, from the key and PE_OUTPUT_EPOCH only: equal on every replica
 * and across restarts. */
void pe_produce_etag(const char *key, size_t keylen, char out[40]);

/* Answer r from the cache entry for key, or compute it. o: the negotiated output (the key's
 * output part). ctx is passed to job_new_cb on a miss. */
enum MHD_Result pe_produce_answer(struct req *r, struct MHD_Connection *conn, const struct pe_producer *pr,
				  const struct pe_out *o, const char *key, size_t keylen, void *ctx);

#endif
