/* The connection guard (see conn_guard.h).
 *
 * Slow clients: headers must be complete within connection_timeout of the connection's start (or
 * of the end of its previous request), a body must average at least 1 KiB/s once that time has
 * passed, and a refused request's body must be dropped within linger_timeout: otherwise the
 * socket is shut down (MHD then closes the connection). libmicrohttpd's connection timeout only
 * catches silence, not a byte every second.
 *
 * Slow readers: an answer's memory is held until its last byte is taken, so readers taking a few
 * KB a second of large answers could hold the whole response budget for hours while every other
 * large answer is refused. Answers are not timed while the budget has room (a slow link is no
 * fault). While it is pressed (a reservation refused since the last tick, or a job waiting for
 * room), one answer is cut, at most one a second (CUT_SETTLE: the memory of the last comes back
 * first): of the answers over PE_HTTP_SEND_BOUND sent for more than connection_timeout, the one
 * whose reader, at its pace over the last connection_timeout / 2 (the bytes its peer acknowledged,
 * TCP_INFO), would need the longest before the rest fits in the kernel's send buffer (when
 * libmicrohttpd lets the answer go), when that is more than connection_timeout. A chunked answer's
 * length is what its stream tells as it sends (pe_conn_guard_stream_state: the bytes computed so
 * far, then the whole), UNKNOWN_REST of rest until it tells. An answer sent from a cache entry the
 * cache still keeps holds no budget and is not judged (the guard keeps a reference to the entry to
 * ask); one the cache let go of while it was sent is counted on the budget and judged. So is a
 * stream's answer, as its stream tells at each block it sends: on the budget while its job
 * computes it, then as its table's cache entry is. Readers of one table (a cache entry or a
 * stream) share its memory, which goes only when the last of them does: cutting one frees nothing
 * while the others read, so with the slowest are cut, at once, the other readers of its table that
 * are too slow by the same rule (the rest finish within connection_timeout). The next answer is
 * cut if the refusals go on.
 *
 * Limits: connections past max_connections are closed at accept (pe_conn_guard_admit).
 *
 * libmicrohttpd's own Content-Length errors are answered with problem+json through its log
 * (answer_length_errors). */
#include "http/conn_guard.h"
#include "http/framing.h"
#include "http/problem.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#define MIN_BODY_RATE 1024.0
#define UNKNOWN_REST (8.0 * 1024 * 1024) /* bytes a chunked answer not told of is taken to have left */
#define CUT_SETTLE 1.0 /* seconds after a slow reader's cut before the next: its memory comes back */
/* MHD's CONNECTION_LIMIT is set CONN_SLACK above ours (closed connections are counted until MHD
 * cleans them up), and the accept thread (acceptor.c) closes a connection past max_connections at
 * once (pe_conn_guard_admit). The per-IP limit is MHD's, checked after this. */
#define CONN_SLACK 64
#define FD_RESERVE 128 /* listening socket and its eventfd, epoll, ITC, log and store files, libuv */

/* A TCP connection, watched for requests that are read too slowly. Fields under lock. */
struct ctrack {
	int fd, phase;
	double since;   /* when the current phase began */
	uint64_t bytes; /* body bytes read in PH_BODY */
	uint64_t size;   /* PH_SEND: the answer's body bytes, or PE_GUARD_SIZE_UNKNOWN */
	atomic_uint_fast64_t known; /* PH_SEND, chunked: its body bytes known so far; 0: not told */
	atomic_int kept;            /* PH_SEND, a stream's: its table is the cache's now, off the budget */
	uint64_t acked0; /* PH_SEND: bytes the peer had acknowledged when it was queued */
	/* PH_SEND: the reader's pace over its last whole window (bytes/s; < 0: none yet), and where
	 * the window under way began */
	double pace, mark_t;
	uint64_t mark_acked;
	struct pe_cache_entry *entry; /* PH_SEND: the cache entry sent (a reference of ours), or NULL */
	const void *shared; /* PH_SEND: the memory other answers are sent from too (entry or stream), or NULL */
	double finish;      /* pe_conn_guard_cut's judgement in its last pass (time_to_finish) */
	struct MHD_Connection *conn;
	pthread_t owner; /* the libmicrohttpd thread that serves it: only that one may look inside */
	struct ctrack *prev, *next;
};

struct pe_conn_guard {
	pthread_mutex_t lock;
	struct ctrack tracks; /* list head of open connections */
	atomic_uint nconns;   /* open connections (admitted, not yet closed) */
	unsigned conn_limit;  /* max_connections, lowered to what the fd limit allows */
	unsigned connection_timeout_s, linger_timeout_s;
	int tls;
	atomic_uint_fast64_t answers_cut;
	double last_answer_cut; /* when (pe_monotonic) */
};

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

struct pe_conn_guard *pe_conn_guard_new(const struct pe_http_options *opt)
{
	struct pe_conn_guard *g = calloc(1, sizeof *g);
	if (!g)
		return NULL;
	pthread_mutex_init(&g->lock, NULL);
	g->tracks.next = g->tracks.prev = &g->tracks;
	g->conn_limit = fit_fd_limit(opt->max_connections ? opt->max_connections : 1);
	g->connection_timeout_s = opt->connection_timeout_s;
	g->linger_timeout_s = opt->linger_timeout_s;
	g->tls = opt->tls_cert_pem != NULL;
	return g;
}

void pe_conn_guard_free(struct pe_conn_guard *g)
{
	if (!g)
		return;
	pthread_mutex_destroy(&g->lock);
	free(g);
}

unsigned pe_conn_guard_mhd_limit(const struct pe_conn_guard *g) { return g->conn_limit + CONN_SLACK; }

/* A connection is counted when the accept thread admits it, before it hands it to libmicrohttpd,
 * not when an HTTP thread starts it: a burst handed over before any is started cannot pass
 * max_connections. One that libmicrohttpd refuses in MHD_add_connection (the per-IP limit) is
 * given back (pe_conn_guard_unadmit); one it drops after queueing it and before starting it (its
 * memory pool not allocated: out of memory) keeps its count, one place fewer. */
int pe_conn_guard_admit(struct pe_conn_guard *g)
{
	unsigned n = atomic_load(&g->nconns);
	do {
		if (n >= g->conn_limit)
			return -1;
	} while (!atomic_compare_exchange_weak(&g->nconns, &n, n + 1));
	return 0;
}

void pe_conn_guard_unadmit(struct pe_conn_guard *g) { atomic_fetch_sub(&g->nconns, 1); }

void pe_conn_guard_notify_cb(void *cls, struct MHD_Connection *conn, void **socket_context,
			     enum MHD_ConnectionNotificationCode toe)
{
	struct pe_conn_guard *g = cls;
	struct ctrack *ct = *socket_context;
	struct pe_cache_entry *gone = NULL;
	pthread_mutex_lock(&g->lock);
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) { /* counted by pe_conn_guard_admit */
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		ct = calloc(1, sizeof *ct);
		if (ct && ci) {
			*ct = (struct ctrack){.fd = ci->connect_fd, .phase = PH_HEADERS, .since = pe_monotonic(),
					      .conn = conn, .owner = pthread_self(), .prev = &g->tracks,
					      .next = g->tracks.next};
			g->tracks.next->prev = ct;
			g->tracks.next = ct;
		} else {
			free(ct);
			ct = NULL;
		}
		*socket_context = ct;
	} else {
		atomic_fetch_sub(&g->nconns, 1);
		if (ct) {
			ct->prev->next = ct->next;
			ct->next->prev = ct->prev;
			gone = ct->entry;
			free(ct);
			*socket_context = NULL;
		}
	}
	pthread_mutex_unlock(&g->lock);
	pe_cache_release(gone); /* outside the lock: it may free the answer */
}

void pe_conn_guard_phase(struct pe_conn_guard *g, struct MHD_Connection *conn, int phase, size_t bytes)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct ctrack *ct = ci ? ci->socket_context : NULL;
	if (!ct)
		return;
	struct pe_cache_entry *gone = NULL;
	pthread_mutex_lock(&g->lock);
	if (ct->phase != phase) {
		ct->phase = phase;
		ct->since = pe_monotonic();
		ct->bytes = 0;
		gone = ct->entry;
		ct->entry = NULL;
		ct->shared = NULL;
	}
	ct->bytes += bytes;
	pthread_mutex_unlock(&g->lock);
	pe_cache_release(gone);
}

/* Bytes the peer of fd has acknowledged over the connection's life; -1 when not TCP. */
static int tcp_acked(int fd, uint64_t *acked)
{
	struct tcp_info ti;
	socklen_t len = sizeof ti;
	memset(&ti, 0, sizeof ti);
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
	    len < offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof ti.tcpi_bytes_acked)
		return -1;
	*acked = ti.tcpi_bytes_acked;
	return 0;
}

void pe_conn_guard_sending(struct pe_conn_guard *g, struct MHD_Connection *conn, uint64_t size,
			   struct pe_cache_entry *entry, const void *shared)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct ctrack *ct = ci ? ci->socket_context : NULL;
	uint64_t acked;
	if (!ct || tcp_acked(ct->fd, &acked) != 0)
		return; /* not watched: never cut */
	if (entry)
		pe_cache_retain(entry);
	pthread_mutex_lock(&g->lock);
	struct pe_cache_entry *gone = ct->entry;
	ct->phase = PH_SEND;
	ct->since = ct->mark_t = pe_monotonic();
	ct->size = size;
	atomic_store_explicit(&ct->known, 0, memory_order_relaxed);
	atomic_store_explicit(&ct->kept, 0, memory_order_relaxed);
	ct->acked0 = ct->mark_acked = acked;
	ct->pace = -1;
	ct->entry = entry;
	ct->shared = shared ? shared : entry;
	pthread_mutex_unlock(&g->lock);
	pe_cache_release(gone);
}

void pe_conn_guard_stream_state(struct MHD_Connection *conn, uint64_t known, int kept)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct ctrack *ct = ci ? ci->socket_context : NULL;
	if (!ct)
		return;
	atomic_store_explicit(&ct->known, known, memory_order_relaxed);
	atomic_store_explicit(&ct->kept, kept, memory_order_relaxed);
}

/* The pace of ct's reader (acked: bytes its peer acknowledged now) over the last window of
 * `window` seconds, updated when one has passed. */
static void measure_pace(struct ctrack *ct, uint64_t acked, double now, double window)
{
	if (now - ct->mark_t < window)
		return;
	ct->pace = (double)(acked > ct->mark_acked ? acked - ct->mark_acked : 0) / (now - ct->mark_t);
	ct->mark_t = now;
	ct->mark_acked = acked;
}

/* Seconds ct's reader would need, at its pace over the last window, until the rest of its answer
 * is in the kernel's send buffer and its memory goes (HUGE_VAL when it took nothing); 0 when the
 * answer is not judged (sent for grace seconds or less). The buffer is PE_HTTP_SEND_BOUND, doubled
 * by the kernel for its bookkeeping; it was seen to hold 0.65 to 1.2 MB of an answer when
 * libmicrohttpd let it go, so the rest counted is what lies past PE_HTTP_SEND_BOUND. The last
 * window, not the whole answer's average: a reader that took most of its answer fast and then
 * trickles would otherwise hold it for minutes unjudged. */
static double time_to_finish(const struct ctrack *ct, uint64_t acked, double now, double grace)
{
	if (ct->pace < 0 || now - ct->since <= grace || (ct->entry && !pe_cache_entry_on_budget(ct->entry)) ||
	    atomic_load_explicit(&ct->kept, memory_order_relaxed))
		return 0; /* an answer the cache keeps holds no budget: cutting it frees nothing */
	double taken = acked > ct->acked0 ? (double)(acked - ct->acked0) : 0, kernel = PE_HTTP_SEND_BOUND;
	uint64_t known = atomic_load_explicit(&ct->known, memory_order_relaxed);
	double size = ct->size != PE_GUARD_SIZE_UNKNOWN ? (double)ct->size : known ? (double)known : -1;
	double rest = size < 0 ? UNKNOWN_REST : size - taken - kernel;
	return rest <= 0 ? 0 : ct->pace <= 0 ? HUGE_VAL : rest / ct->pace;
}

/* Cut ct's answer (under the lock): its socket shut down, its entry reference added to *gone. */
static void cut_answer(struct pe_conn_guard *g, struct ctrack *ct, struct pe_cache_entry **gone)
{
	shutdown(ct->fd, SHUT_RDWR);
	ct->phase = PH_ANSWER; /* cut once */
	*gone = ct->entry;
	ct->entry = NULL;
	ct->shared = NULL;
	atomic_fetch_add(&g->answers_cut, 1);
}

void pe_conn_guard_cut(struct pe_conn_guard *g, double now, int budget_pressed)
{
	double limit = (double)g->connection_timeout_s, slowest_finish = limit;
	struct ctrack *slowest = NULL;
	pthread_mutex_lock(&g->lock);
	int judge = budget_pressed && now - g->last_answer_cut >= CUT_SETTLE;
	double window = limit / 2 > 1 ? limit / 2 : 1;
	for (struct ctrack *ct = g->tracks.next; ct != &g->tracks; ct = ct->next) {
		double age = now - ct->since;
		ct->finish = 0;
		int slow = (ct->phase == PH_HEADERS && age > limit) ||
			   (ct->phase == PH_BODY && age > limit && (double)ct->bytes < age * MIN_BODY_RATE) ||
			   (ct->phase == PH_DISCARD && age > (double)g->linger_timeout_s);
		if (slow)
			shutdown(ct->fd, SHUT_RDWR);
		uint64_t acked; /* read once a window, or when judging */
		if (ct->phase != PH_SEND || (!judge && now - ct->mark_t < window) || tcp_acked(ct->fd, &acked) != 0)
			continue;
		measure_pace(ct, acked, now, window);
		ct->finish = judge ? time_to_finish(ct, acked, now, limit) : 0;
		if (ct->finish > slowest_finish) {
			slowest_finish = ct->finish;
			slowest = ct;
		}
	}
	if (!slowest) {
		pthread_mutex_unlock(&g->lock);
		return;
	}
	g->last_answer_cut = now;
	const void *shared = slowest->shared;
	struct pe_cache_entry *gone = NULL, *also = NULL;
	cut_answer(g, slowest, &gone);
	for (struct ctrack *ct = g->tracks.next; shared && ct != &g->tracks; ct = ct->next) {
		if (ct->phase != PH_SEND || ct->shared != shared || ct->finish <= limit)
			continue;
		cut_answer(g, ct, &also);
		pe_cache_release(also); /* not the last reference: slowest's is still in gone */
	}
	pthread_mutex_unlock(&g->lock);
	pe_cache_release(gone);
}

uint64_t pe_conn_guard_answers_cut(const struct pe_conn_guard *g)
{
	return atomic_load(&((struct pe_conn_guard *)g)->answers_cut);
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
 * MHD's own answer fails to go out and MHD closes the connection. MHD logs from the thread that
 * serves the connection, so only that thread's connections are looked at: another thread's may be
 * mid-parse (http_threads > 1). */
static void answer_length_errors(struct pe_conn_guard *g)
{
	pthread_mutex_lock(&g->lock);
	for (struct ctrack *ct = g->tracks.next; ct != &g->tracks; ct = ct->next) {
		if (ct->phase != PH_HEADERS || !ct->conn || !pthread_equal(ct->owner, pthread_self()) ||
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
		if (!g->tls)
			write_problem(ct->fd, &err);
		shutdown(ct->fd, SHUT_RDWR);
		ct->phase = PH_ANSWER;
	}
	pthread_mutex_unlock(&g->lock);
}

/* MHD's messages go to stderr as with its default logger. (The NULL check: gcc -O1 with the
 * sanitizers otherwise refuses vfprintf's format as possibly null, -Werror=format-overflow.) */
void pe_conn_guard_log_cb(void *cls, const char *fmt, va_list ap)
{
	if (!fmt)
		return;
	vfprintf(stderr, fmt, ap);
	if (strstr(fmt, "Content-Length"))
		answer_length_errors(cls);
}
