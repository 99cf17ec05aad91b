/* The HTTP layer's face to the daemon: start a libmicrohttpd server over the core, tensor and
 * cache layers. The daemon supplies limits, the cache, and hooks for what lives above this layer
 * (the worker pool, metrics, readiness), so nothing here reaches up into src/daemon.
 *
 * Threads: MHD runs http_threads internal epoll threads (the daemon's default: one per two CPUs)
 * that accept, parse, route and answer cache hits; a connection stays on the thread that
 * accepted it, and everything they share (cache, waiters, budget, metrics, the connection guard,
 * the access log) is locked or atomic. Misses whose work is estimated under inline_max_us are
 * computed right there; the others suspend their connection and become jobs through hooks.submit;
 * the job runs on a pool thread, fills the cache, and the cache's waiter callback resumes every
 * connection waiting on that key (another HTTP thread's too). */
#ifndef PE_HTTP_HTTP_H
#define PE_HTTP_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include "posenc/cache.h"
#include "posenc/store.h"
#include "posenc/tensor.h"

struct pe_http;

/* Routes as metric labels: the fixed ones below, then one per table of the core's registry
 * (PE_ROUTE_TABLE0 + its index), named by the table's path ("sinusoidal", "rope/inv_freq"). */
#define PE_HTTP_ROUTES(X)                                                                         \
	X(OTHER, "other") X(HEALTHZ, "healthz") X(READYZ, "readyz") X(METRICS, "metrics")          \
	X(OPENAPI, "openapi") X(DASHBOARD, "dashboard") X(CATALOGUE, "catalogue") X(LEARNED, "learned") \
	X(PLAN, "plan")

enum pe_http_route {
#define PE_HTTP_ROUTE_ENUM_(id, name) PE_ROUTE_##id,
	PE_HTTP_ROUTES(PE_HTTP_ROUTE_ENUM_)
#undef PE_HTTP_ROUTE_ENUM_
	PE_ROUTE_TABLE0
};
#define PE_ROUTE_MAX (PE_ROUTE_TABLE0 + 64)
const char *pe_http_route_name(int route);

struct pe_http_request_info {
	int route, status;
	const char *method, *path; /* path with the query string */
	const char *request_id;    /* from X-Request-Id, or generated */
	uint64_t bytes;
	double seconds;
	int cache_hit; /* 1 hit, 0 miss, -1 not a cached resource */
	int cut_short; /* a streamed answer that ended before its last byte (its 200 had gone) */
};

struct pe_http_hooks {
	void *ctx;
	/* Run work(arg) on a worker thread. 0, PE_EBUSY (queue full) or PE_EDRAINING. Thread: MHD. */
	int (*submit)(void *ctx, void (*work)(void *arg), void *arg);
	/* The same for work estimated heavy (a large table: PE_PRODUCE_HEAVY_NS), which the daemon may
	 * hold back while the HTTP threads are busy; NULL: submit. */
	int (*submit_heavy)(void *ctx, void (*work)(void *arg), void *arg);
	/* A computation ran on the HTTP thread instead (produce.h: inline work), for the job metrics. */
	void (*ran_inline)(void *ctx);
	/* A request finished (any thread that completes requests: the MHD thread). */
	void (*observe)(void *ctx, const struct pe_http_request_info *info);
	/* Prometheus text for /metrics into out. */
	int (*render_metrics)(void *ctx, struct pe_buf *out);
	/* Once on each HTTP thread, on its first request, before it is handled (may be NULL): the
	 * daemon sets the thread's scheduling there. Thread: that MHD thread. */
	void (*http_thread_started)(void *ctx);
};

/* A file embedded in the daemon, served at path with its media type. */
struct pe_http_static {
	const char *path, *mime;
	const char *data;
	size_t len;
	int route; /* metric label */
};

struct pe_http_options {
	const char *bind;
	uint16_t port;              /* 0 = any free port */
	uint64_t max_elements, max_body_bytes, max_response_bytes;
	uint64_t max_analysis_cost; /* work of one analysis request (pe_table_cost), multiply-adds */
	size_t max_header_bytes; /* libmicrohttpd's per-connection pool: request line + headers */
	unsigned max_connections, max_connections_per_ip, connection_timeout_s, job_timeout_s;
	unsigned inline_max_us; /* work estimated at most this is computed on the HTTP thread (produce.h) */
	unsigned http_threads;  /* libmicrohttpd threads; 0 or 1: one */
	/* A request refused before its body is read (413 from Content-Length, 405, 415, 401/403) is
	 * answered once the body is read and dropped, up to linger_bytes in linger_timeout_s; past
	 * either, the connection is cut. Declared bodies past linger_bytes, and clients that sent
	 * Expect: 100-continue, are answered at once. */
	uint64_t linger_bytes;
	unsigned linger_timeout_s;
	const char *cors_origins;   /* "*" or a comma list */
	const char *tls_cert_pem, *tls_key_pem; /* PEM text (NUL-terminated); NULL = plain HTTP */
	const struct pe_http_static *statics; /* files served as they are (/openapi.yaml, the dashboard) */
	size_t nstatics;
	struct pe_cache *cache;
	struct pe_budget *budget;   /* response bytes being built or sent (NULL: unbounded) */
	struct pe_warm *warm;       /* where answers of 2 MiB or more are first written (NULL: none) */
	struct pe_store *store;     /* learned tables (/v1/learned) */
	struct pe_parallel parallel; /* the workers' help for big encodes (run NULL: one thread) */
	const char *auth_token;     /* bearer token for writes; "" or NULL: loopback clients only */
	struct pe_http_hooks hooks;
};

/* Start serving. Returns NULL with err filled when the socket cannot be bound. */
struct pe_http *pe_http_start(const struct pe_http_options *opt, struct pe_err *err);
uint16_t pe_http_port(const struct pe_http *h);
/* Answer jobs that passed their deadline with 503 (called periodically, any thread). With
 * expire_all, every waiting request is answered now (shutdown). */
void pe_http_tick(struct pe_http *h, int expire_all);
/* Draining: /readyz answers 503, new table requests get 503 draining, no new connections. */
void pe_http_drain(struct pe_http *h);
/* Requests suspended and waiting for a computation. */
size_t pe_http_waiting(struct pe_http *h);
/* Requests begun and not yet completed (answer fully sent or connection gone). */
size_t pe_http_active(struct pe_http *h);
/* Stop the server (after pe_http_tick(h, 1) so nothing is suspended) and free it. */
void pe_http_stop(struct pe_http *h);

#endif
