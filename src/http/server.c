/* The libmicrohttpd server: start/stop/drain, and the access handler that carries each request
 * from its head to its answer. What the request is for is the router's business (router.c, which
 * hands it to a registered handler); what happens here is the same for every request.
 *
 * http_threads internal epoll threads run the callbacks, each for the connections handed to it (a
 * connection's callbacks never run on two threads); the listening socket and the thread that
 * accepts are acceptor.c's. The first call of a request checks its framing
 * (framing.c; refused heads are answered and the connection closed, the body unread), names it
 * (request id, the path for the log) and lets the router match it and the handler decide whether
 * it wants the body. A refusal decided then (pe_http_refuse) is answered here for every handler
 * alike: at once when no body byte would be sent in vain, else after the body is read and
 * dropped within linger_bytes and linger_timeout, since clients without Expect: 100-continue send
 * it regardless and would otherwise see a reset instead of the answer. Requests that wait for a
 * job are suspended on a waiter (waiter.c) and answered by the handler's on_resume.
 *
 * A body a handler keeps is reserved on the response budget before it is held (body_budget.c);
 * refused there, it takes the same path as any refusal, the rest of the body dropped. */
#include "http/internal.h"
#include "http/acceptor.h"
#include "http/conn_guard.h"
#include "http/framing.h"
#include "http/produce.h"
#include "http/query.h"
#include "http/router.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sanitizer/asan_interface.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

/* The budget is pressed when it refused a reservation since the last tick or a job waits on it. */
static int budget_pressed(struct pe_http *h)
{
	struct pe_budget_stats st;
	pe_budget_stats(h->opt.budget, &st);
	uint64_t last = atomic_exchange(&h->budget_refused_seen, st.refused);
	return st.refused != last || st.waiting != 0;
}

void pe_http_tick(struct pe_http *h, int expire_all)
{
	pe_conn_guard_cut(h->guard, pe_monotonic(), budget_pressed(h));
	pe_waiter_expire(h, expire_all);
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

/* Write s into dst[cap] from offset at (at < cap), cut to fit, NUL-terminated, as snprintf would
 * (snprintf's format parsing is a visible share of a small request); returns the new length. */
static size_t put_text(char *dst, size_t cap, size_t at, const char *s)
{
	size_t n = strlen(s), room = cap - 1 - at;
	n = n < room ? n : room;
	memcpy(dst + at, s, n);
	dst[at + n] = 0;
	return at + n;
}

/* The client's X-Request-Id when it is a sane token (≤ 64 printable bytes), else a new one:
 * 16 hex digits from a per-process random seed and a counter (unique, not guessable in order). */
static void assign_request_id(struct pe_http *h, struct req *r, struct MHD_Connection *conn)
{
	const char *given = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Request-Id");
	if (given && printable_token(given, 64)) {
		put_text(r->request_id, sizeof r->request_id, 0, given);
		r->request_id_given = 1;
		return;
	}
	uint64_t x = h->rid_seed + 0x9e3779b97f4a7c15ull * (atomic_fetch_add(&h->rid_counter, 1) + 1);
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	x ^= x >> 31;
	for (int i = 15; i >= 0; i--, x >>= 4) /* 16 hex digits, as %016llx */
		r->request_id[i] = "0123456789abcdef"[x & 15];
	r->request_id[16] = 0;
}

/* s into dst[cap] from at, each byte that would read as framing where it stands percent-encoded:
 * '%', controls, space and bytes past ASCII always, and the bytes of `specials`. An escape is
 * written whole or not at all; returns the new length. */
static size_t put_escaped(char *dst, size_t cap, size_t at, const char *s, const char *specials)
{
	for (const unsigned char *p = (const unsigned char *)s; *p && at + 1 < cap; p++) {
		if (*p > 0x20 && *p < 0x7f && *p != '%' && !strchr(specials, *p)) {
			dst[at++] = (char)*p;
		} else if (at + 3 < cap) {
			dst[at++] = '%';
			dst[at++] = "0123456789ABCDEF"[*p >> 4];
			dst[at++] = "0123456789ABCDEF"[*p & 15];
		} else
			break;
	}
	dst[at] = 0;
	return at;
}

/* Path and query for the log as the router read them (r->args, decoded), written back in one
 * encoding: a logged '&', '=' or '?' is one the router split at, and decoding the logged text
 * gives each name and value it read (a "%26" in a value is not logged as a second parameter). */
static void log_path(struct req *r, const char *url)
{
	size_t len = put_escaped(r->path, sizeof r->path, 0, url, "?#");
	for (size_t i = 0; i < r->nargs; i++) {
		len = put_text(r->path, sizeof r->path, len, i ? "&" : "?");
		len = put_escaped(r->path, sizeof r->path, len, r->args[i].key, "&=+#");
		if (r->args[i].value) {
			len = put_text(r->path, sizeof r->path, len, "=");
			len = put_escaped(r->path, sizeof r->path, len, r->args[i].value, "&=+#");
		}
	}
}

static void begin_request(struct pe_http *h, struct req *r, struct MHD_Connection *conn, const char *url,
			  const char *method)
{
	r->h = h;
	r->t0 = pe_monotonic();
	r->cache_hit = -1;
	put_text(r->method, sizeof r->method, 0, method);
	if (r->query_text) {
		r->query_text[0] = r->query_first;
		r->nargs = pe_query_split(r->query_text, r->args, PE_QUERY_MAX_PARAMS, pe_query_unescape);
	}
	log_path(r, url);
	assign_request_id(h, r, conn);
}

/* ---- framing and refusals ---- */

/* libmicrohttpd 0.9.75 parses a header line in place: "Name\0", the blanks after the colon,
 * "value\0", then the line end (CR and LF zeroed as well), then the next line. Two things framing
 * must refuse are lost in the strings it hands out, and found from that layout instead:
 *  - a NUL byte in a value: value_size is the value's strlen, so "Content-Length: 0\0 47" arrives
 *    as "0" (and what follows would run as a request). The byte after the value's NUL is then
 *    neither a zeroed line end nor the first byte of the next field's name.
 *  - an obs-fold: the continuation is appended to the previous field's NAME, copied to new pool
 *    memory, so that name no longer sits just before its value.
 * A NUL directly before the line end hides nothing and is not seen. */
struct framing_walk {
	struct pe_framing f;
	size_t field_bytes;    /* the fields as sent, "name: value" CRLF each (head_refusal) */
	int fields;
	const char *value_end; /* the NUL ending the previous field's value; NULL before the first */
	const char *name;      /* the previous field's name */
	size_t name_len;
};

static int name_before_value(const char *key, size_t key_len, const char *value)
{
	if ((uintptr_t)value <= (uintptr_t)key + key_len || key[key_len] != 0)
		return 0;
	const char *p = key + key_len + 1;
	while (p < value && (*p == ' ' || *p == '\t'))
		p++;
	return p == value;
}

/* Did the previous value end at its line end (next: the next field's name, or NULL at the end)? */
static void check_value_end(struct framing_walk *w, const char *next)
{
	if (w->value_end && w->value_end[1] != 0 && w->value_end + 1 != next)
		pe_framing_bad(&w->f, w->name, w->name_len);
}

/* Did the header section end with the empty line right after the last field? libmicrohttpd 0.9.75
 * also ends it, without a word, at a line with an empty name (": x", ":"), and parses the lines
 * after it as the next request (a smuggled DELETE would run). The request line and the fields sit
 * in one buffer from the method on, and MHD reports the section's size (the empty line included):
 * after the last value's end (its zeroed CR, or LF) only that line's end and the empty line may
 * follow, 4 bytes with CRLF, 2 with bare LFs. Anything else (a mixed 3 included, which an
 * empty-name line with bare LFs also gives) is refused. Layouts this cannot place are let pass. */
static void check_section_end(struct framing_walk *w, struct MHD_Connection *conn, const char *method)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
	if (!w->value_end || !ci || (uintptr_t)w->value_end <= (uintptr_t)method)
		return;
	size_t upto = (size_t)(w->value_end - method);
	if (upto >= ci->header_size)
		return;
	size_t rest = ci->header_size - upto;
	if (rest != 4 && rest != 2)
		pe_framing_bad(&w->f, w->name, w->name_len);
}

static enum MHD_Result framing_field(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
				     const char *value, size_t value_size)
{
	struct framing_walk *w = cls;
	if (!value)
		value = "", value_size = 0;
	check_value_end(w, key);
	if (name_before_value(key, key_size, value))
		w->value_end = value + value_size;
	else {
		w->value_end = NULL;
		pe_framing_bad(&w->f, key, key_size);
	}
	w->name = key;
	w->name_len = key_size;
	w->field_bytes += key_size + 2 + value_size + 2;
	w->fields++;
	pe_framing_header(&w->f, key, key_size, value, value_size);
	return MHD_YES;
}

/* Framing a proxy and this server could read differently (request smuggling), transfer codings
 * other than chunked and a missing Host: answered at once, and the connection closed with the
 * body unread (framing.c). 0 when the request may go on, with its body described in r. The same
 * walk of the fields measures them for head_refusal (w). */
static int read_framing(struct req *r, struct MHD_Connection *conn, const char *method, const char *version,
			struct framing_walk *w, struct pe_err *err)
{
	memset(w, 0, sizeof *w);
	pe_framing_init(&w->f);
	MHD_get_connection_values_n(conn, MHD_HEADER_KIND, framing_field, w);
	check_value_end(w, NULL);
	check_section_end(w, conn, method);
	struct pe_framing *f = &w->f;
	int rc = pe_framing_finish(f, version, err);
	r->has_body = f->body != PE_BODY_NONE;
	r->chunked = f->body == PE_BODY_CHUNKED;
	r->declared = f->length;
	r->expect_continue = f->expect_continue;
	return rc;
}

/* A body in a content coding (Content-Encoding other than identity): posencd decodes none, and
 * read gzip'd bytes as the body itself (a 400 about the npy magic string, at best). RFC 9110
 * 15.5.16: 415. */
static int body_coded(struct MHD_Connection *conn)
{
	const char *ce = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_ENCODING);
	return ce && strcasecmp(ce, "identity") != 0;
}

static int takes_no_body(const char *method)
{
	return !strcmp(method, "GET") || !strcmp(method, "HEAD") || !strcmp(method, "DELETE") || !strcmp(method, "OPTIONS");
}

static enum MHD_Result answer_refusal(struct req *r, struct MHD_Connection *conn)
{
	r->answered = 1;
	return r->refusal_answer ? r->refusal_answer(r, conn, &r->refusal) : pe_http_problem(r, conn, &r->refusal);
}

/* A refusal of a request without a body is answered on the next call, once MHD has read the
 * request, so the connection stays open as for any answer (one queued on the first call makes MHD
 * close it). With a body: now, when no body byte will be sent in vain (the client waits for
 * 100 Continue, which MHD then does not send) or the declared body is past what we would drop, and
 * MHD closes the connection after it; otherwise the body is read and dropped first (nginx's
 * lingering close), within linger_bytes and linger_timeout, and the connection closed after. */
static enum MHD_Result refuse_early(struct pe_http *h, struct req *r, struct MHD_Connection *conn)
{
	if (!r->has_body)
		return MHD_YES;
	if (r->expect_continue || h->opt.linger_bytes == 0 || (!r->chunked && r->declared > h->opt.linger_bytes)) {
		r->close = 1;
		return answer_refusal(r, conn);
	}
	pe_conn_guard_phase(h->guard, conn, PH_DISCARD, 0);
	return MHD_YES;
}

/* libmicrohttpd 0.9.75 keeps the whole head in the connection's memory pool, with a record (64
 * bytes) of every header field beside it, and the answer's header after it; the query's
 * parameters are split here (uri_cb hands MHD an empty query), so they take no record. The pool
 * holds max_header_bytes, the records of HEADER_FIELDS_MAX fields and POOL_SLACK for the answer's
 * header: a head within the limit is read and answered whatever its records, and one over it
 * reaches head_refusal as long as it leaves room for that answer (10 KiB past the limit with few
 * records). A head over what the pool holds gets MHD's own 414/431; one that fills the pool
 * too full for an answer's header gets none (the connection is closed). No larger: MHD zeroes the
 * whole pool (rounded up to whole pages) on every request of a keep-alive connection, and half of
 * it again when it answers, so every byte of it is paid for on every request (42 KiB at the
 * default limit, in 11 pages, where the records of 64 query parameters made it 12). */
#define MHD_RECORD_BYTES 64
#define HEADER_FIELDS_MAX 128
#define POOL_SLACK 2048

static size_t head_limit(const struct pe_http_options *opt)
{
	return opt->max_header_bytes ? opt->max_header_bytes : (size_t)32768;
}

static size_t pool_bytes(const struct pe_http_options *opt)
{
	return head_limit(opt) + HEADER_FIELDS_MAX * MHD_RECORD_BYTES + POOL_SLACK;
}

/* A request's state, zeroed up to its query (query_store, set whole where it is read). Each HTTP
 * thread keeps the state of its last request (one) for its next one: struct req is past the sizes
 * glibc's per-thread cache serves, and an allocation from its bins cost more than the rest of a
 * small request's own bookkeeping. Freed when the thread ends (the key's destructor); poisoned
 * while it waits under AddressSanitizer, so a use after the request's end is still reported. */
static pthread_key_t spare_key;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;
static int spare_ok;

static void spare_free(void *r)
{
	ASAN_UNPOISON_MEMORY_REGION(r, sizeof(struct req));
	free(r);
}

static void spare_init(void) { spare_ok = pthread_key_create(&spare_key, spare_free) == 0; }

static struct req *req_new(void)
{
	pthread_once(&spare_once, spare_init);
	struct req *r = spare_ok ? pthread_getspecific(spare_key) : NULL;
	if (r) {
		pthread_setspecific(spare_key, NULL);
		ASAN_UNPOISON_MEMORY_REGION(r, sizeof *r);
	} else if (!(r = malloc(sizeof *r)))
		return NULL;
	memset(r, 0, offsetof(struct req, query_store));
	return r;
}

static void req_free(struct req *r)
{
	if (r && spare_ok && !pthread_getspecific(spare_key) && pthread_setspecific(spare_key, r) == 0) {
		ASAN_POISON_MEMORY_REGION(r, sizeof *r);
		return;
	}
	free(r);
}

/* MHD_OPTION_URI_LOG_CALLBACK: the raw request target, before MHD parses its query. Its length is
 * kept for head_refusal in the request's state, begun here. The query is cut to nothing in MHD's
 * buffer (MHD parses it right after this returns), so MHD keeps no record of its parameters; the
 * text stays there for the request's first call to split (begin_request). A query over the cap
 * or in a target over max_header_bytes is refused (first_call) before anything reads it but the
 * log, which shows its first PE_QUERY_MAX_PARAMS parameters. */
static void *uri_cb(void *cls, const char *uri, struct MHD_Connection *conn)
{
	(void)cls;
	(void)conn;
	size_t n = strlen(uri);
	char *q = strchr(uri, '?');
	int query_over = q && pe_query_count(q + 1) > PE_QUERY_MAX_PARAMS;
	struct req *r = req_new();
	if (r) {
		r->target_bytes = n;
		r->query_over = query_over;
		if (q && q[1]) {
			r->query_text = q + 1;
			r->query_first = q[1];
		}
	}
	if (q)
		q[1] = 0;
	return r;
}

/* A head over max_header_bytes (request line and header fields, each with its CRLF) or with more
 * than HEADER_FIELDS_MAX fields: 414 when the request line alone is over, else 431. */
static int head_refusal(struct pe_http *h, struct req *r, const struct framing_walk *w, const char *method,
			const char *version, struct pe_err *err)
{
	size_t limit = head_limit(&h->opt), head = strlen(method) + 1 + r->target_bytes + 1 + strlen(version) + 2;
	if (head > limit)
		return pe_err_set(err, PE_EURITOOLONG, "request-target", "the request line is over max_header_bytes "
				  "(%zu bytes)", limit);
	head += w->field_bytes;
	if (w->fields > HEADER_FIELDS_MAX)
		return pe_err_set(err, PE_EHEADTOOBIG, "header", "the request has more than %d header fields",
				  HEADER_FIELDS_MAX);
	if (head > limit)
		return pe_err_set(err, PE_EHEADTOOBIG, "header", "the request line and header fields are over "
				  "max_header_bytes (%zu bytes)", limit);
	return 0;
}

static enum MHD_Result first_call(struct pe_http *h, struct req *r, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version)
{
	struct pe_err err = {0};
	struct framing_walk w;
	r->http10 = strcmp(version, MHD_HTTP_VERSION_1_0) == 0;
	if (read_framing(r, conn, method, version, &w, &err) != 0) {
		r->answered = r->close = 1;
		return pe_http_problem(r, conn, &err);
	}
	pe_router_match(h->router, r, url);
	enum MHD_Result rc = MHD_YES;
	if (head_refusal(h, r, &w, method, version, &err) != 0) {
		pe_http_refuse(r, &err, NULL);
	} else if (r->query_over) {
		pe_err_set(&err, PE_EINVAL, "query", "the query has more than %d parameters", PE_QUERY_MAX_PARAMS);
		pe_http_refuse(r, &err, NULL);
	} else if (r->has_body && takes_no_body(method)) {
		pe_err_set(&err, PE_EBODY, "body", "%s takes no body", method);
		pe_http_refuse(r, &err, NULL);
	} else if (r->has_body && body_coded(conn)) {
		pe_err_set(&err, PE_EMEDIATYPE, "Content-Encoding", "request bodies are read as sent: send it without a "
			   "Content-Encoding (or identity)");
		pe_http_refuse(r, &err, NULL);
	} else if (!strcmp(method, "OPTIONS")) {
		pe_router_allow(r, conn, url);
		return MHD_YES; /* a CORS preflight: answered once the request is read */
	}
	else {
		rc = pe_router_begin(r, conn, url, method);
		pe_http_reserve_declared(r);
	}
	if (rc != MHD_YES)
		return rc;
	if (r->refusal.code)
		return refuse_early(h, r, conn);
	/* Answer on a later call, once MHD has read the whole request: a response queued on the
	 * first call makes MHD close the connection instead of keeping it alive. */
	return MHD_YES;
}

/* Body bytes: to the handler that wants them, dropped after a refusal or past its limit (a 413
 * once the body ends), but no more than linger_bytes of them: past that the connection is cut
 * (MHD_NO). */
static enum MHD_Result body_bytes(struct pe_http *h, struct req *r, struct MHD_Connection *conn, const char *data,
				  size_t n)
{
	if (!r->refusal.code && !r->body_too_big && r->body_wanted) {
		pe_conn_guard_phase(h->guard, conn, PH_BODY, n);
		if (pe_http_body_hold(r, data, n) == 0)
			return MHD_YES;
	}
	pe_conn_guard_phase(h->guard, conn, PH_DISCARD, n);
	r->dropped += n;
	return r->dropped > h->opt.linger_bytes ? MHD_NO : MHD_YES;
}

/* hooks.http_thread_started, the first time this thread sees a request (libmicrohttpd starts its
 * threads with no hook of their own). */
static void note_thread(struct pe_http *h)
{
	static _Thread_local int started;
	if (!started) {
		started = 1;
		if (h->opt.hooks.http_thread_started)
			h->opt.hooks.http_thread_started(h->opt.hooks.ctx);
	}
}

/* The path of a request target: an absolute-form one ("http://host/path", which a server must
 * accept, RFC 9112 section 3.2.2) is routed by its path, "/" when it has none. */
static const char *origin_form(const char *url)
{
	size_t n = !strncasecmp(url, "http://", 7) ? 7 : !strncasecmp(url, "https://", 8) ? 8 : 0;
	const char *path = n ? strchr(url + n, '/') : url;
	return path ? path : "/";
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *target, const char *method,
			      const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
	struct pe_http *h = cls;
	struct req *r = *con_cls;
	const char *url = origin_form(target);
	if (!r || !r->begun) {
		note_thread(h);
		if (!r) /* the URI callback found no memory (and the query was cut): close */
			return MHD_NO;
		r->begun = 1;
		begin_request(h, r, conn, target, method);
		atomic_fetch_add(&h->active, 1);
		pe_conn_guard_phase(h->guard, conn, PH_BODY, 0);
		return first_call(h, r, conn, url, method, version);
	}
	if (r->on_resume) {
		/* the waiter was completed or expired under wait_lock, and libmicrohttpd's wake-up
		 * (an eventfd) orders nothing the race detector can see: taking the lock once makes
		 * the waiter's final fields visible to the resumed handler in any case */
		pthread_mutex_lock(&h->wait_lock);
		pthread_mutex_unlock(&h->wait_lock);
		return r->on_resume(r, conn);
	}
	/* libmicrohttpd 0.9.75 sends 100 Continue to a request without a body that carries Expect,
	 * and then, when the next request's bytes are already read, calls here once with them and a
	 * size of 0 before the final call: an answer queued now is refused (the connection would
	 * close unanswered). Only the final call (upload_data NULL) answers. */
	if (upload_data && *upload_data_size == 0)
		return MHD_YES;
	if (*upload_data_size != 0) {
		size_t n = *upload_data_size;
		*upload_data_size = 0;
		return body_bytes(h, r, conn, upload_data, n);
	}
	pe_conn_guard_phase(h->guard, conn, PH_ANSWER, 0);
	if (r->answered)
		return MHD_YES;
	if (r->refusal.code) {
		r->close = r->has_body; /* a body refused was dropped: the connection goes with it */
		pe_http_body_refusal_final(r);
		return answer_refusal(r, conn);
	}
	return pe_router_finish(r, conn, method);
}

/* The request counted (metrics) and logged, once: as soon as its answer is queued, before
 * libmicrohttpd sends a byte of it, so a client that has its answer finds it counted (with two
 * HTTP threads, its next request may be served by the other thread before this one's completion
 * callback runs); a request never answered is counted when it ends (499: the client went away),
 * and so is a streamed answer, whose length and completeness are known only then (bytes as
 * handed to the connection; cut_short when libmicrohttpd ended it other than completed). */
static void observe(struct pe_http *h, struct req *r, struct MHD_Connection *conn, int gone)
{
	r->observed = 1;
	if (!h->opt.hooks.observe)
		return;
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_HTTP_STATUS);
	struct pe_http_request_info info = {
		.route = r->route,
		.status = r->status ? r->status : (ci ? (int)ci->http_status : 0),
		.method = r->method,
		.path = r->path,
		.request_id = r->request_id,
		.bytes = r->bytes,
		.seconds = pe_monotonic() - r->t0,
		.cache_hit = r->cache_hit,
		.cut_short = r->observe_at_end && gone && strcmp(r->method, "HEAD") != 0,
	};
	if (gone && !info.status)
		info.status = 499;
	h->opt.hooks.observe(h->opt.hooks.ctx, &info);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
				  const char *version, const char *upload_data, size_t *upload_data_size,
				  void **con_cls)
{
	enum MHD_Result rc = handle(cls, conn, url, method, version, upload_data, upload_data_size, con_cls);
	struct req *r = *con_cls;
	if (r && r->status && !r->observed && !r->observe_at_end)
		observe(cls, r, conn, 0);
	return rc;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	struct pe_http *h = cls;
	struct req *r = *con_cls;
	if (!r || !r->begun) { /* ended before the access handler saw it (MHD's 431) */
		req_free(r);
		*con_cls = NULL;
		return;
	}
	if (!r->observed)
		observe(h, r, conn, toe != MHD_REQUEST_TERMINATED_COMPLETED_OK);
	pe_conn_guard_phase(h->guard, conn, PH_HEADERS, 0);
	pe_waiter_end(r->w);
	pe_cache_release(r->sending);
	pe_router_end(r);
	pe_buf_destroy(&r->body);
	pe_budget_give(h->opt.budget, r->body_held);
	req_free(r);
	*con_cls = NULL;
	atomic_fetch_sub(&h->active, 1);
}

/* ---- lifecycle ---- */

#define LISTEN_BACKLOG 1024

static int make_addr(const char *bind, uint16_t port, struct sockaddr_storage *ss, struct pe_err *err)
{
	memset(ss, 0, sizeof *ss);
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, bind, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons(port);
		return 0;
	}
	if (inet_pton(AF_INET6, bind, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons(port);
		return 0;
	}
	return pe_err_set(err, PE_EINVAL, "bind", "bind is not an IP address literal");
}

/* The thread pool's option when there is one (MHD warns on stderr about a pool size of 0 or 1, so
 * one thread is no option at all), and HTTPS through libmicrohttpd's GnuTLS backend when a
 * certificate is configured. */
static struct MHD_OptionItem *more_options(const struct pe_http_options *opt, unsigned threads,
					   struct MHD_OptionItem items[4])
{
	int n = 0;
	if (threads > 1)
		items[n++] = (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, threads, NULL};
	if (opt->tls_cert_pem && opt->tls_key_pem) {
		items[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)opt->tls_cert_pem};
		items[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)opt->tls_key_pem};
	}
	items[n] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
	return items;
}

static void free_parts(struct pe_http *h)
{
	pe_acceptor_free(h->acceptor);
	pe_router_free(h->router);
	pe_produce_free(h->produce);
	pe_conn_guard_free(h->guard);
	pthread_mutex_destroy(&h->wait_lock);
	free(h->cors_origins);
	free(h);
}

static struct MHD_Daemon *start_mhd(struct pe_http *h, const struct pe_http_options *opt)
{
	struct MHD_OptionItem more[4];
	unsigned flags = (opt->tls_cert_pem ? MHD_USE_TLS : 0) | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
			 MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC | MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET;
	unsigned threads = opt->http_threads > 1 ? opt->http_threads : 1;
	/* with a pool MHD splits CONNECTION_LIMIT between its threads, and one may take most of the
	 * connections: each gets the whole limit, and the guard keeps the total (pe_conn_guard_admit) */
	return MHD_start_daemon(flags, 0, NULL, NULL, on_request, h,
				MHD_OPTION_EXTERNAL_LOGGER, pe_conn_guard_log_cb, h->guard, /* first, to see every message */
				MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
				MHD_OPTION_CONNECTION_LIMIT, pe_conn_guard_mhd_limit(h->guard) * threads,
				MHD_OPTION_PER_IP_CONNECTION_LIMIT, opt->max_connections_per_ip,
				MHD_OPTION_CONNECTION_TIMEOUT, opt->connection_timeout_s,
				/* MHD clears the whole pool on every keep-alive request: no larger than the
				 * head and its records need */
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, pool_bytes(opt),
				MHD_OPTION_UNESCAPE_CALLBACK, pe_router_unescape_cb, NULL,
				MHD_OPTION_URI_LOG_CALLBACK, uri_cb, h,
				MHD_OPTION_NOTIFY_CONNECTION, pe_conn_guard_notify_cb, h->guard,
				MHD_OPTION_ARRAY, more_options(opt, threads, more),
				MHD_OPTION_END);
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
	h->guard = pe_conn_guard_new(opt);
	h->produce = pe_produce_new();
	h->router = pe_router_new(h);
	struct sockaddr_storage ss;
	if (!h->cors_origins || !h->guard || !h->produce || !h->router) {
		pe_err_set(err, PE_ENOMEM, "", "out of memory");
		goto fail;
	}
	if (make_addr(opt->bind, opt->port, &ss, err) != 0)
		goto fail;
	/* everything the HTTP threads read is set before MHD starts them: a request may arrive the
	 * moment the socket listens (the seed written after was a data race, ThreadSanitizer) */
	h->rid_seed = ((uint64_t)getpid() << 32) ^ (uint64_t)(pe_monotonic() * 1e9);
	int error = 0;
	if (!(h->acceptor = pe_acceptor_open(&ss, LISTEN_BACKLOG, &error))) {
		pe_err_set(err, PE_EIO, "port", "cannot listen on %s port %u: %s", opt->bind, (unsigned)opt->port,
			   strerror(error));
		goto fail;
	}
	if (!(h->mhd = start_mhd(h, opt))) {
		if (opt->tls_cert_pem)
			pe_err_set(err, PE_EIO, "tls_cert", "cannot start HTTPS on %s port %u: tls_cert / tls_key not a "
				   "valid PEM certificate and key", opt->bind, (unsigned)opt->port);
		else
			pe_err_set(err, PE_EIO, "port", "cannot start the HTTP server on %s port %u", opt->bind,
				   (unsigned)opt->port);
		goto fail;
	}
	if (pe_acceptor_start(h->acceptor, h->mhd, h->guard) != 0) {
		pe_err_set(err, PE_ENOMEM, "", "cannot start the accept thread");
		MHD_stop_daemon(h->mhd);
		goto fail;
	}
	h->port = pe_acceptor_port(h->acceptor);
	return h;
fail:
	free_parts(h);
	return NULL;
}

uint16_t pe_http_port(const struct pe_http *h) { return h->port; }

/* Readiness goes 503 and the listening socket stops accepting (connections queued in the kernel
 * are refused at once, not left to be reset at the exit); open connections are served on. */
void pe_http_drain(struct pe_http *h)
{
	if (atomic_exchange(&h->draining, 1))
		return;
	pe_acceptor_stop(h->acceptor);
}

size_t pe_http_active(struct pe_http *h) { return atomic_load(&h->active); }

void pe_http_stop(struct pe_http *h)
{
	if (!h)
		return;
	pe_http_tick(h, 1);
	pe_acceptor_stop(h->acceptor); /* no connection handed over while MHD stops */
	MHD_stop_daemon(h->mhd);
	free_parts(h);
}
