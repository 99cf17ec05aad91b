/* libFuzzer target: the multipart/form-data reader of POST /v1/rope/apply (src/http/multipart.c).
 *
 * Two ways in, chosen by the input's first byte:
 *  - even: through libmicrohttpd itself. MHD_PostProcessor reads the boundary from its request's
 *    Content-Type, so it cannot run without a connection: an in-process daemon (no listening
 *    socket, run from this thread with MHD_run) is handed one end of a socketpair per input, and
 *    the other end sends a POST whose Content-Type boundary is the input's first line and whose
 *    body is the rest (Content-Length, or chunked when the second byte is odd; the parameter
 *    named "BOUNDARY" when the first byte has bit 1 set, as RFC 9110 lets a client name it). The access handler
 *    does what transform.c does: pe_mp_begin, pe_mp_feed per block, pe_mp_end.
 *  - odd: the part assembly alone, driven through pe_mp_data_cb with the calls a post processor
 *    could make (any name, NULL name, offsets right or wrong, sizes, types, transfer encodings):
 *    records of [flags][name index][offset delta][size][data]; flag 0x40 says a delimiter line
 *    was fed to MHD before the call (what pe_mp_feed's boundary scan counts).
 * Checks: a part never holds more than its maximum; a name is accepted once (a call after a
 * delimiter for a part already seen is refused, empty or not), and a call without a delimiter
 * only continues the current part at the offset it reached; it holds exactly the bytes given to it at the
 * offsets the reader accepted; once the reader failed it accepts nothing more; the budget
 * counts exactly what the parts hold (plus the post processor's reservation while it lives) and
 * is back at zero after pe_mp_destroy; and, under ASan/LSan, nothing leaks or is touched freed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>
#include <fcntl.h>

#include "http/multipart.h"

#define FAIL(...)                                                \
	do {                                                     \
		fprintf(stderr, "fuzz_multipart: " __VA_ARGS__); \
		fputc('\n', stderr);                             \
		abort();                                         \
	} while (0)

#define BUDGET (256 * 1024)
#define X_MAX 8192
#define POS_MAX 2048

static struct pe_budget *budget;

static size_t held_by_parts(const struct pe_mp *m)
{
	size_t n = 0;
	for (size_t i = 0; i < m->nparts; i++)
		n += m->part[i].buf.held;
	return n;
}

static void check_budget(const struct pe_mp *m, const char *when)
{
	struct pe_budget_stats st;
	pe_budget_stats(budget, &st);
	size_t want = held_by_parts(m) + m->held;
	if (st.used != want)
		FAIL("%s: the budget counts %zu bytes, the reader holds %zu", when, st.used, want);
	for (size_t i = 0; i < m->nparts; i++)
		if (m->part[i].buf.len > m->part[i].max)
			FAIL("%s: part %s holds %zu bytes, over its %zu", when, m->part[i].name, m->part[i].buf.len,
			     m->part[i].max);
}

static void setup(struct pe_mp *m)
{
	pe_mp_init(m, 1 << 20, budget);
	pe_mp_want(m, "x", X_MAX, "application/x-npy, application/json");
	pe_mp_want(m, "positions", POS_MAX, "application/x-npy");
}

static void finish(struct pe_mp *m)
{
	pe_mp_destroy(m);
	struct pe_budget_stats st;
	pe_budget_stats(budget, &st);
	if (st.used != 0)
		FAIL("%zu bytes of the budget still held after pe_mp_destroy", st.used);
}

/* ---- the assembly layer alone ---- */

static const char *const names[] = {"x", "positions", "y", "", NULL, "X", "positions2"};
static const char *const types[] = {NULL, "application/json", "application/x-npy", "multipart/mixed"};
static const char *const encodings[] = {NULL, "binary", "base64", "8bit"};

static void drive_callbacks(const uint8_t *d, size_t n)
{
	struct pe_mp m;
	setup(&m);
	/* a shadow copy of what each part should hold */
	static char shadow[2][X_MAX];
	size_t slen[2] = {0, 0};
	uint64_t off = 0;
	const char *prev = "";
	while (n >= 4) {
		uint8_t flags = d[0], ni = d[1] % (sizeof names / sizeof *names);
		size_t size = d[3] % 64;
		d += 4, n -= 4;
		if (size > n)
			size = n;
		const char *key = names[ni];
		/* offsets: usually the right one (continuing, or 0 for a new part), sometimes not */
		if (key && strcmp(key, prev ? prev : ""))
			off = 0;
		uint64_t at = (flags & 1) ? 0 : (flags & 2) ? off + d[-2] : off;
		int had_err = m.err.code != 0, delim = (flags & 0x40) != 0;
		struct pe_mp_part *p = NULL, *cur = m.cur;
		for (size_t i = 0; key && i < m.nparts; i++)
			if (!strcmp(m.part[i].name, key))
				p = &m.part[i];
		size_t before = p ? p->buf.len : 0;
		int seen = p && p->seen;
		if (delim)
			m.delims++;
		enum MHD_Result r = pe_mp_data_cb(&m, MHD_POSTDATA_KIND, key, "f", types[(flags >> 2) & 3],
						  encodings[(flags >> 4) & 3], (const char *)d, at, size);
		if (had_err && r == MHD_YES)
			FAIL("a call was accepted after the reader failed");
		if (r == MHD_YES) {
			if (!p)
				FAIL("a part named %s was accepted", key ? key : "(null)");
			int fresh = m.delims != 0 && (delim || !cur);
			if (fresh && seen)
				FAIL("a second part %s was accepted", p->name);
			if (!fresh && (p != cur || at != before))
				FAIL("a call without a delimiter did not continue part %s", p->name);
			size_t k = p == &m.part[0] ? 0 : 1;
			if (at != p->buf.len - size)
				FAIL("part %s: bytes at offset %llu stored at %zu", p->name, (unsigned long long)at,
				     p->buf.len - size);
			if (at == 0)
				slen[k] = 0;
			memcpy(shadow[k] + slen[k], d, size);
			slen[k] += size;
			if (slen[k] != p->buf.len || (size && memcmp(shadow[k], p->buf.data, slen[k])))
				FAIL("part %s does not hold the bytes it was given", p->name);
			off = at + size;
		} else if (!m.err.code)
			FAIL("a call was refused without an error");
		check_budget(&m, "after a callback");
		prev = key;
		d += size, n -= size;
	}
	finish(&m);
}

/* ---- through libmicrohttpd ---- */

struct conn_state {
	struct pe_mp m;
	int started, failed;
};

static struct MHD_Daemon *mhd;

/* The request's Content-Length (0: chunked), as the server's framing hands it to pe_mp_begin. */
static uint64_t declared_length(struct MHD_Connection *conn)
{
	const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	return cl ? strtoull(cl, NULL, 10) : 0;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
			       const char *version, const char *data, size_t *size, void **con_cls)
{
	struct conn_state *s = *con_cls;
	struct pe_err err = {0};
	if (!s) {
		s = calloc(1, sizeof *s);
		*con_cls = s;
		setup(&s->m);
		s->failed = pe_mp_begin(&s->m, conn, declared_length(conn), &err) != 0;
		check_budget(&s->m, "after pe_mp_begin");
		return MHD_YES;
	}
	if (*size) {
		if (!s->failed && pe_mp_feed(&s->m, data, *size) != 0)
			s->failed = 1;
		check_budget(&s->m, "after pe_mp_feed");
		*size = 0;
		return MHD_YES;
	}
	if (!s->failed && pe_mp_end(&s->m, &err) != 0)
		s->failed = 1;
	if (!s->failed && s->m.pp)
		FAIL("pe_mp_end left the post processor");
	static const char ok[] = "ok", bad[] = "bad";
	struct MHD_Response *r = MHD_create_response_from_buffer(s->failed ? 3 : 2, (void *)(s->failed ? bad : ok),
								 MHD_RESPMEM_PERSISTENT);
	enum MHD_Result rc = MHD_queue_response(conn, s->failed ? 400 : 200, r);
	MHD_destroy_response(r);
	return rc;
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	struct conn_state *s = *con_cls;
	if (!s)
		return;
	finish(&s->m);
	free(s);
	*con_cls = NULL;
}

static void drive_mhd(const uint8_t *d, size_t n, int chunked, int upper)
{
	const uint8_t *nl = memchr(d, '\n', n < 200 ? n : 200);
	size_t blen = nl ? (size_t)(nl - d) : 0;
	char boundary[201];
	for (size_t i = 0; i < blen; i++) /* a header value: no CR, LF or NUL */
		boundary[i] = d[i] == '\r' || d[i] == 0 ? '-' : (char)d[i];
	boundary[blen] = 0;
	const uint8_t *body = nl ? nl + 1 : d;
	size_t len = nl ? n - blen - 1 : n;
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return;
	int big = 1 << 20;
	setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
	setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
	char head[512];
	int hl = snprintf(head, sizeof head, "POST /v1/rope/apply HTTP/1.1\r\nHost: f\r\nConnection: close\r\n"
			  "Content-Type: multipart/form-data; %s=%s\r\n", upper ? "BOUNDARY" : "boundary", boundary);
	hl += chunked ? snprintf(head + hl, sizeof head - (size_t)hl, "Transfer-Encoding: chunked\r\n\r\n%zx\r\n", len)
		      : snprintf(head + hl, sizeof head - (size_t)hl, "Content-Length: %zu\r\n\r\n", len);
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(1), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (write(sv[1], head, (size_t)hl) != hl || (len && write(sv[1], body, len) != (ssize_t)len) ||
	    (chunked && write(sv[1], len ? "\r\n0\r\n\r\n" : "\r\n\r\n", len ? 7 : 2) < 0) ||
	    MHD_add_connection(mhd, sv[0], (struct sockaddr *)&sin, sizeof sin) != MHD_YES) {
		close(sv[0]);
		close(sv[1]);
		return;
	}
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	char buf[4096];
	for (int i = 0; i < 10000; i++) {
		MHD_run(mhd);
		ssize_t r = recv(sv[1], buf, sizeof buf, MSG_DONTWAIT);
		if (r == 0)
			break;
	}
	close(sv[1]);
	for (int i = 0; i < 100; i++)
		MHD_run(mhd);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	budget = pe_budget_new(BUDGET);
	mhd = MHD_start_daemon(MHD_USE_NO_LISTEN_SOCKET, 0, NULL, NULL, handler, NULL, MHD_OPTION_NOTIFY_COMPLETED,
			       completed, NULL, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)32768, MHD_OPTION_END);
	if (!budget || !mhd)
		FAIL("cannot start");
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	if (n < 2)
		return 0;
	if (d[0] & 1)
		drive_callbacks(d + 1, n - 1);
	else
		drive_mhd(d + 2, n - 2, d[1] & 1, d[0] & 2);
	return 0;
}
