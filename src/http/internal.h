/* Internal to src/http: the server and one request's state, and the modules every handler uses.
 *
 *   server.c      lifecycle and libmicrohttpd's callbacks: framing, refusals, body bytes
 *   router.c      matches a URL to a registered handler (handlers.c) and dispatches to it
 *   contract.c    the begin phase every declared route shares (contract.h; query.c, media.c)
 *   routes.c      metric route labels
 *   response.c    queueing answers: problem+json, 304, tensor content headers, early refusals
 *   cors.c        CORS headers
 *   waiter.c      requests suspended while a job computes their answer
 *   conn_guard.c  slow clients and readers, connection limits, libmicrohttpd's own error answers
 *   produce.c     the cached GET path (produce.h)
 *   stream.c      answers sent while their job computes them (stream.h)
 *   oneshot.c     the uncached POST job: deadline, result, resumed answer (oneshot.h)
 *   auth.c        who may write: bearer token or loopback (auth.h)
 * and one file per endpoint family (handler.h). Handlers call these modules; none of them calls
 * a handler except through the callbacks of struct pe_handler. */
#ifndef PE_HTTP_INTERNAL_H
#define PE_HTTP_INTERNAL_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include "http/http.h"
#include "http/query.h"
#include "posenc/output.h"
#include "posenc/posenc.h"

/* A request waiting for a computation. Shared between the request (MHD thread) and whoever
 * completes it (the cache's waiter callback or a job, on a worker thread), hence refcounted;
 * state moves under h->wait_lock. */
enum waiter_state { W_NEW, W_SUSPENDED, W_DONE, W_EXPIRED };

struct waiter {
	atomic_int refs;
	int state;
	struct pe_cache_entry *entry; /* a cached answer when state == W_DONE and code == 0 */
	void *result;                 /* or a job's own result (freed with result_free if never served) */
	void (*result_free)(void *);
	int code;
	double deadline;
	int shut_down; /* W_EXPIRED by the drain's end (shutdown_timeout), not by its own deadline */
	struct pe_http *h;
	struct MHD_Connection *conn;
	struct waiter *prev, *next; /* in h->waiting while W_SUSPENDED */
	struct waiter *early_next;  /* in a stream's list of requests to answer at its first block */
};

struct pe_conn_guard;
struct pe_router;
struct pe_produce;

struct pe_http {
	struct MHD_Daemon *mhd;
	struct pe_http_options opt;
	char *cors_origins;
	uint16_t port;
	atomic_int draining;
	atomic_size_t active; /* requests begun and not yet completed */
	uint64_t rid_seed;
	atomic_uint_fast64_t rid_counter;
	struct pe_acceptor *acceptor;
	pthread_mutex_t wait_lock;
	struct waiter waiting; /* list head */
	size_t nwaiting;
	struct pe_conn_guard *guard;
	atomic_uint_fast64_t budget_refused_seen; /* the budget's refusals at the last tick (server.c) */
	struct pe_router *router;
	struct pe_produce *produce;
};

struct pe_handler;
struct pe_contract;
struct pe_query;

struct req {
	struct pe_http *h;
	/* From the URI callback (server.c uri_cb), before the access handler's first call (begun). */
	size_t target_bytes;     /* the raw request target */
	int query_over, begun;
	/* The query's text, kept from libmicrohttpd, which is handed an empty one so that it keeps no
	 * record per parameter in the connection's pool: its first byte (cut to NUL in MHD's
	 * buffer) and a pointer to it there; split into args at the first call (nargs). */
	char *query_text;
	char query_first;
	size_t nargs;
	int route, status, cache_hit;
	double t0;
	uint64_t bytes;
	struct waiter *w;
	char etag[40];
	char method[8];
	int http10;              /* an HTTP/1.0 request: no chunked coding, only the close ends a body */
	char path[512];          /* path and query, as logged (truncated past 511 bytes) */
	char request_id[72];
	const char *allow;       /* Allow header for a 405 (default "GET, HEAD") */
	/* The handler that serves the URL (NULL: none, 404), what its match found (a table's
	 * definition), its metric label, and its own state for this request (freed by its
	 * req_free_cb when the request ends). */
	const struct pe_handler *handler;
	const void *target;
	int matched_route;
	void *ctx;
	void *hctx;              /* the handler's context (one per server) */
	/* What the route declared for this request and its parsed query (contract.h): query is
	 * &query_store once the begin phase has read it, NULL before. */
	const struct pe_contract *contract;
	struct pe_query *query;
	char allow_buf[48];      /* r->allow of a 405, from the declaration's methods */
	/* Set while suspended: what answers when the connection resumes. */
	enum MHD_Result (*on_resume)(struct req *r, struct MHD_Connection *conn);
	const void *resume_arg;  /* for on_resume */
	/* A body the handler wants (begin_cb set body_wanted): collected through its body_cb. */
	int body_wanted;
	struct pe_buf body;
	size_t body_held;       /* reserved on opt.budget for body's memory (server.c), until the end */
	int body_sized;         /* body's buffer was sized from Content-Length by the handler: its pages
				 * count as they are written (server.c, body_resident) */
	int body_too_big, answered;
	int observed;           /* counted and logged (server.c: once its answer is queued) */
	int observe_at_end;     /* a streamed answer: counted and logged when it ends, bytes as sent */
	int request_id_given;   /* the client sent X-Request-Id: every response must echo it */
	/* Framing (framing.h) and a refusal decided before the body is read (code 0: none). */
	int has_body, chunked, expect_continue;
	uint64_t declared;      /* Content-Length */
	struct pe_err refusal;
	enum MHD_Result (*refusal_answer)(struct req *r, struct MHD_Connection *conn, const struct pe_err *err);
	uint64_t dropped;       /* body bytes read and dropped after a refusal or past max_body_bytes */
	uint64_t body_seen;     /* body bytes handed to the handler (held by it or by r->body) */
	int body_past_budget;   /* refused as past the whole budget (server.c): its 413 names the
				 * body's whole size (declared, or body_seen + dropped) */
	int close;              /* answer with Connection: close */
	/* The cache entry whose shared response is this request's answer: held until the request
	 * ends (on_completed), so an entry evicted while its bytes are still being sent is counted
	 * by the budget (lru.c), as one behind a response of the request's own is. */
	struct pe_cache_entry *sending;
	struct pe_cache_entry *answer_entry; /* the entry pe_http_queue's answer is sent from, or NULL */
	/* Last, and left out of the zeroing of a new request (server.c req_new): 3.4 KB that
	 * pe_query_init sets whole when the begin phase reads the query. */
	struct pe_query query_store;
	struct pe_query_arg args[PE_QUERY_MAX_PARAMS]; /* the query's parameters, in order (nargs) */
};

/* ---- response.c ---- */

/* The largest send buffer a connection keeps once it carries a larger body (pe_http_large_answer). */
#define PE_HTTP_SEND_BOUND (512 * 1024)
/* Before an answer of body_len bytes (PE_GUARD_SIZE_UNKNOWN: chunked) is queued on conn, from the
 * cache entry `entry` or (NULL) memory on the budget, shared with other answers when `shared` (a
 * stream; see pe_conn_guard_sending): over PE_HTTP_SEND_BOUND, bounds conn's send buffer
 * (response.c says why) and has the connection guard watch its reader's pace. */
#define PE_GUARD_SIZE_UNKNOWN UINT64_MAX
void pe_http_large_answer(struct pe_http *h, struct MHD_Connection *conn, uint64_t body_len,
			  struct pe_cache_entry *entry, const void *shared);
/* Queue a response and record its status (after pe_http_large_answer for r->bytes); destroys resp. */
enum MHD_Result pe_http_queue(struct req *r, struct MHD_Connection *conn, int status,
			      struct MHD_Response *resp);
enum MHD_Result pe_http_problem(struct req *r, struct MHD_Connection *conn, const struct pe_err *err);
/* A response over body (len bytes, not copied unless copy) with this Content-Type. */
struct MHD_Response *pe_http_text(const char *body, size_t len, const char *type, int copy);
/* Record a refusal decided on the first call, before the body is read (413 from Content-Length,
 * 405, 415, 401/403, 400 on the query). server.c answers it, with answer (NULL: pe_http_problem):
 * at once when no body follows, the client waits for 100 Continue, or the declared body is past
 * linger_bytes; otherwise once the body has been read and dropped, so that clients that send
 * their whole body before reading (Python's http.client) see the answer, not a reset. MHD_YES. */
enum MHD_Result pe_http_refuse(struct req *r, const struct pe_err *err,
			       enum MHD_Result (*answer)(struct req *r, struct MHD_Connection *conn,
							 const struct pe_err *err));
/* A complete request body a job holds: its bytes (a NUL after len) and the budget its block is
 * reserved on (opt.budget; NULL without one), until pe_http_release_body. */
struct pe_held_body {
	char *data;
	size_t len;
	struct pe_budget *budget;
};
/* The complete body, handed to a job with its reservation: the server reserved it as it arrived
 * (a chunked body's whole doubled block, no larger than the budget, a sized one rounded up to
 * 64 KiB: up to twice its length); from here exactly the block it occupies, shrunk to its length,
 * is held on b->budget until the job releases it. A job that counts its body by what it holds
 * then never waits for room its own body keeps. */
void pe_http_take_body(struct req *r, struct pe_held_body *b);
/* Free b's block and give back its reservation; b is empty after (releasing it again is a no-op). */
void pe_http_release_body(struct pe_held_body *b);
/* The body's memory (body_budget.c). After the handler's begin_cb wanted the body: a declared
 * length the whole budget can never hold is a 413 now; anything else is reserved as it arrives. */
void pe_http_reserve_declared(struct req *r);
/* n body bytes in: reserved on the budget, then handed to the handler. 0 when taken; otherwise the
 * caller drops them: refused on the budget (the request's refusal set, the body released), or by
 * the handler past its limit (r->body_too_big, a 413 once the body ends). */
int pe_http_body_hold(struct req *r, const char *data, size_t n);
/* Before a refusal is answered: a body past the whole budget named by its whole size. */
void pe_http_body_refusal_final(struct req *r);
/* After pe_http_refuse: the refusal is that the body can never fit the whole response budget; its
 * 413 then names the body's whole size (Content-Length, or every chunk once the body has ended),
 * the same answer for both framings (a handler that holds the body's parts itself). */
void pe_http_body_past_budget(struct req *r);
/* A held body (or body part) as a need told to clients counts it: the most a block of its length
 * can take (pe_mem_bound), so the 413 figure is the same for every request of that size and a
 * budget set to it always holds the job; its block's real size when that is more. */
size_t pe_http_body_figure(const struct pe_held_body *b);
/* 304 Not Modified for a representation with this ETag and Cache-Control. */
enum MHD_Result pe_http_not_modified(struct req *r, struct MHD_Connection *conn, const char *etag,
				      const char *cache_control);
/* Tensor output: negotiation from the request's Accept and Accept-Encoding, and the content
 * headers (Content-Type, Content-Encoding, Vary) of the chosen output. */
int pe_http_out_resolve(struct pe_out *o, const struct pe_out_query *q, struct MHD_Connection *conn,
			enum pe_dtype fixed_dtype, unsigned offered, struct pe_err *err);
void pe_http_out_headers(const struct pe_out *o, struct MHD_Response *resp);
/* A body_cb for handlers that take the body whole into r->body (bounded by the limit they gave
 * pe_buf_init in begin_cb): 0, or -1 once it is past that limit. */
int pe_http_body_collect(struct req *r, const char *data, size_t n);

/* ---- cors.c ---- */

/* CORS headers for a response to this connection (per cors_origins; conn NULL: none listed). */
void pe_http_add_cors(struct pe_http *h, struct MHD_Connection *conn, struct MHD_Response *resp);
int pe_http_cors_static(const struct pe_http *h); /* 1 when the CORS headers are request-independent */
/* Is method one of the comma-separated list's entries, exactly (case-sensitive)? */
int pe_http_method_listed(const char *list, const char *method);

/* ---- waiter.c ---- */

struct waiter *pe_waiter_new(struct pe_http *h, struct MHD_Connection *conn);
void pe_waiter_unref(struct waiter *w);
/* The request's end (NULL is fine): what a completion brought and the request never used (a
 * stream's reader place, a cache entry) is given back now, not when the last completer lets go of
 * w; then the request's reference goes. */
void pe_waiter_end(struct waiter *w);
void pe_waiter_ready_cb(void *arg, struct pe_cache_entry *entry, int code); /* the cache callback */
/* Complete w with a result (or code != 0) from any thread; drops the completer's reference. Once
 * w is done or expired, what a completion brings is given back (first completion wins). */
void pe_waiter_complete(struct waiter *w, struct pe_cache_entry *entry, void *result, int code);
/* Suspend conn until w completes (or resume at once if it already has). */
void pe_waiter_suspend(struct waiter *w);
/* Has w been completed (its entry, result or code are set) without being suspended? */
int pe_waiter_done(struct waiter *w);
/* Any thread: has w's request been answered 503 at its deadline? */
int pe_waiter_expired(struct waiter *w);
/* Any thread: PE_ETIMEOUT if w expired; else 0, and w can no longer expire (its deadline is
 * lifted): for a change that must not land once its request was answered 503. */
int pe_waiter_pin(struct waiter *w);
/* Resume every suspended request past its deadline (all of them with expire_all). */
void pe_waiter_expire(struct pe_http *h, int expire_all);

/* ---- routes.c ---- */

/* Metric route label index of a table or transform. */
int pe_http_def_route(const struct pe_table_def *def);

#endif
