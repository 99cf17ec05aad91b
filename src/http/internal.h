/* Internal to src/http: the server and per-request state shared by server.c (lifecycle, routing,
 * operations endpoints, suspended requests) and table.c (table requests and their jobs). */
#ifndef PE_HTTP_INTERNAL_H
#define PE_HTTP_INTERNAL_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include "http/http.h"
#include "posenc/output.h"
#include "posenc/posenc.h"

/* A request waiting for a computation. Shared between the request (MHD thread) and the cache's
 * waiter callback (a worker thread), hence refcounted; state moves under h->wait_lock. */
enum waiter_state { W_NEW, W_SUSPENDED, W_DONE, W_EXPIRED };

struct waiter {
	atomic_int refs;
	int state;
	struct pe_cache_entry *entry; /* a table's result when state == W_DONE and code == 0 */
	void *result;                 /* or a transform's (freed with result_free if never served) */
	void (*result_free)(void *);
	int code;
	double deadline;
	struct pe_http *h;
	struct MHD_Connection *conn;
	struct waiter *prev, *next; /* in h->waiting while W_SUSPENDED */
};

/* A TCP connection, watched for requests that are read too slowly (slowloris): libmicrohttpd's
 * connection timeout only catches silence, not a byte every second. Fields under track_lock. */
enum { PH_HEADERS, PH_BODY, PH_DISCARD, PH_ANSWER };
struct ctrack {
	int fd, phase;
	double since;   /* when the current phase began */
	uint64_t bytes; /* body bytes read in PH_BODY */
	struct MHD_Connection *conn;
	struct ctrack *prev, *next;
};

struct pe_http {
	struct MHD_Daemon *mhd;
	struct pe_http_options opt;
	char *cors_origins;
	uint16_t port;
	atomic_int draining;
	atomic_size_t active; /* requests begun and not yet completed */
	uint64_t rid_seed;
	atomic_uint_fast64_t rid_counter;
	int listen_fd; /* returned by MHD_quiesce_daemon, -1 before */
	pthread_mutex_t wait_lock;
	struct waiter waiting; /* list head */
	pthread_mutex_t track_lock;
	struct ctrack tracks; /* list head of open connections */
	atomic_uint nconns;   /* open connections (accepted, not yet closed) */
	unsigned conn_limit;  /* max_connections, lowered to what the fd limit allows */
	size_t nwaiting;
	struct MHD_Response **statics; /* one shared response per opt.statics[i] */
	pthread_mutex_t scratch_lock;
	struct pe_scratch {
		void *p;
		size_t cap;
	} scratch[2]; /* table.c's scratch tables kept between jobs, faulted in (cap 0: none) */
};

struct req {
	struct pe_http *h;
	int route, status, cache_hit;
	double t0;
	uint64_t bytes;
	struct waiter *w;
	char etag[40];
	char method[8];
	char path[512];          /* path and query, as logged (truncated past 511 bytes) */
	char request_id[72];
	const char *allow;       /* Allow header for a 405 (default "GET, HEAD") */
	/* Set while suspended: what answers when the connection resumes. */
	enum MHD_Result (*on_resume)(struct req *r, struct MHD_Connection *conn);
	const void *resume_arg;  /* for on_resume */
	/* Requests with a body (transforms): collected here, bounded by max_body_bytes. */
	const struct pe_table_def *transform;
	int learned;             /* a /v1/learned request: learned.c answers */
	struct pe_buf body;
	int body_too_big, answered;
	int request_id_given;   /* the client sent X-Request-Id: every response must echo it */
	/* Framing (framing.h) and a refusal decided before the body is read (code 0: none). */
	int has_body, chunked, expect_continue;
	uint64_t declared;      /* Content-Length */
	struct pe_err refusal;
	enum MHD_Result (*refusal_answer)(struct req *r, struct MHD_Connection *conn, const struct pe_err *err);
	uint64_t dropped;       /* body bytes read and dropped after a refusal or past max_body_bytes */
	int close;              /* answer with Connection: close */
};

double pe_http_now(void);
/* Metric route label index of a table or transform. */
int pe_http_def_route(const struct pe_table_def *def);

/* Queue a response and record its status; destroys resp. */
enum MHD_Result pe_http_queue(struct req *r, struct MHD_Connection *conn, int status,
			      struct MHD_Response *resp);
enum MHD_Result pe_http_problem(struct req *r, struct MHD_Connection *conn, const struct pe_err *err);
/* Record a refusal decided on the first call, before the body is read (413 from Content-Length,
 * 405, 415, 401/403, 400 on the query). server.c answers it, with answer (NULL: pe_http_problem):
 * at once when no body follows, the client waits for 100 Continue, or the declared body is past
 * linger_bytes; otherwise once the body has been read and dropped, so that clients that send
 * their whole body before reading (Python's http.client) see the answer, not a reset. MHD_YES. */
enum MHD_Result pe_http_refuse(struct req *r, const struct pe_err *err,
			       enum MHD_Result (*answer)(struct req *r, struct MHD_Connection *conn,
							 const struct pe_err *err));
/* 304 Not Modified for a representation with this ETag and Cache-Control. */
enum MHD_Result pe_http_not_modified(struct req *r, struct MHD_Connection *conn, const char *etag,
				      const char *cache_control);
/* CORS headers for a response to this connection (per cors_origins). */
void pe_http_add_cors(struct pe_http *h, struct MHD_Connection *conn, struct MHD_Response *resp);
int pe_http_cors_static(const struct pe_http *h); /* 1 when the CORS headers are request-independent */

/* Tensor output (response.c): negotiation from the request's Accept and Accept-Encoding, and the
 * content headers (Content-Type, Content-Encoding, Vary) of the chosen output. */
int pe_http_out_resolve(struct pe_out *o, const struct pe_out_query *q, struct MHD_Connection *conn,
			enum pe_dtype fixed_dtype, unsigned offered, struct pe_err *err);
void pe_http_out_headers(const struct pe_out *o, struct MHD_Response *resp);

/* Waiters (server.c). */
struct waiter *pe_waiter_new(struct pe_http *h, struct MHD_Connection *conn);
void pe_waiter_unref(struct waiter *w);
void pe_waiter_ready_cb(void *arg, struct pe_cache_entry *entry, int code); /* the cache callback */
/* Complete w with a result (or code != 0) from any thread; drops the completer's reference. */
void pe_waiter_complete(struct waiter *w, struct pe_cache_entry *entry, void *result, int code);
/* Suspend conn until w completes (or resume at once if it already has). */
void pe_waiter_suspend(struct waiter *w);

/* Transforms (transform.c). */
/* Decide on the first call whether the body is wanted: refuses (pe_http_refuse) 405 / 413 / 415. */
enum MHD_Result pe_transform_begin(struct req *r, struct MHD_Connection *conn);
enum MHD_Result pe_transform_request(struct req *r, struct MHD_Connection *conn);

/* Learned tables (learned.c): /v1/learned and /v1/learned/{name}, every method. begin runs on the
 * first handler call (may refuse: 401/403/405/413/415, pe_http_refuse), request once the body (if any) is
 * complete in r->body. */
enum MHD_Result pe_learned_begin(struct req *r, struct MHD_Connection *conn);
enum MHD_Result pe_learned_request(struct req *r, struct MHD_Connection *conn);
/* /v1/analysis/similarity?encoding=learned:{name}: the stored table's position similarity. */
enum MHD_Result pe_learned_similarity(struct req *r, struct MHD_Connection *conn, const char *name);

/* Tables (table.c). */
enum MHD_Result pe_table_request(struct req *r, struct MHD_Connection *conn, const struct pe_table_def *def);
void pe_table_free_scratch(struct pe_http *h); /* when no job runs any more */
/* The response header of a table's extra value: "X-PE-" and its JSON name (extra_name) in
 * header case ("attention_scaling": "X-PE-Attention-Scaling"). */
void pe_table_extra_header(const struct pe_table_def *def, char *out, size_t cap);

#endif
