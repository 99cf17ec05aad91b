/* HTTP framing (RFC 9112; issue 21 items 5, 6, 8 and 17) over raw sockets.
 *
 * Smuggling: a head a proxy could frame differently from posencd (Content-Length with
 * Transfer-Encoding, a space or tab before a field's colon, chunked on HTTP/1.0, "chunked " with a
 * blank after it, an obs-fold, a NUL byte in a value) is a 400 and the
 * connection closes; the bytes after it, a "DELETE /v1/learned/t" that would run as loopback and
 * without a token, never run: exactly one response comes back and the table is still there.
 * Transfer codings other than chunked are a 501 at once (not a 30 s wait); a body in a content
 * coding is a 415 naming Content-Encoding. HTTP/1.1 without Host,
 * or with two, is a 400. libmicrohttpd's own answers to a malformed or overlong Content-Length
 * come as one problem+json (not HTML with the status line twice), "11 " included; an HTTP/2 preface gets one
 * well-formed answer or a close. */
#include "support/pe_fault.h"

#define DELETE_T "DELETE /v1/learned/t HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"

/* Send raw bytes on a new connection; read until the peer closes (or timeout_ms). */
static size_t exchange(int port, const char *req, size_t len, char *out, size_t cap, int timeout_ms)
{
	int fd = tcp_connect(port, "127.0.0.1");
	size_t n = 0;
	if (fd < 0)
		return 0;
	if (send_all(fd, req, len) == 0) {
		double end = now_s() + timeout_ms / 1000.0;
		while (n + 1 < cap) {
			struct pollfd p = {.fd = fd, .events = POLLIN};
			int left = (int)((end - now_s()) * 1000);
			if (left <= 0 || poll(&p, 1, left) <= 0)
				break;
			ssize_t got = recv(fd, out + n, cap - 1 - n, 0);
			if (got <= 0)
				break;
			n += (size_t)got;
		}
	}
	out[n] = 0;
	close(fd);
	return n;
}

/* Status lines in a reply: "HTTP/1.x " at its start or after a line break. */
static int status_lines(const char *s)
{
	int n = strncmp(s, "HTTP/1.", 7) == 0;
	for (const char *p = s; (p = strstr(p, "\nHTTP/1.")) != NULL; p += 8)
		n++;
	return n;
}

/* The answer: one response only, with this status and a problem+json body, and the connection
 * closed after it (no more than timeout_ms). */
static int one_problem(int port, const char *req, int status, const char *param, char *out, size_t cap)
{
	double t0 = now_s();
	size_t n = exchange(port, req, strlen(req), out, cap, 5000);
	char want[64];
	snprintf(want, sizeof want, "HTTP/1.1 %d ", status);
	int ok = n > 0 && now_s() - t0 < 4.5 && strncmp(out, want, strlen(want)) == 0 && status_lines(out) == 1 &&
		 strstr(out, "application/problem+json") != NULL;
	if (ok && param) {
		snprintf(want, sizeof want, "\"param\":\"%s\"", param);
		ok = strstr(out, want) != NULL;
	}
	return ok;
}

static int table_exists(int port)
{
	struct resp r;
	int ok = http_get(port, "/v1/learned/t", 5000, &r) == 0 && r.status == 200;
	resp_free(&r);
	return ok;
}

/* A [2, 4] float32 table as .npy (a 128-byte header, then the data). */
static size_t npy(char *buf)
{
	char hdr[118];
	int n = snprintf(hdr, sizeof hdr, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }");
	memset(hdr + n, ' ', sizeof hdr - 1 - (size_t)n);
	hdr[sizeof hdr - 1] = '\n';
	memcpy(buf, "\x93NUMPY\x01\x00", 8);
	buf[8] = (char)sizeof hdr;
	buf[9] = 0;
	memcpy(buf + 10, hdr, sizeof hdr);
	float v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	memcpy(buf + 128, v, sizeof v);
	return 128 + sizeof v;
}

static void smuggling(int port)
{
	char body[256], out[8192], req[1024];
	size_t len = npy(body);
	struct resp r;
	int rc = http_request(port, "127.0.0.1", "PUT", "/v1/learned/t", "Content-Type: application/x-npy\r\n", body, len, 5000, &r);
	check(rc == 0 && (r.status == 201 || r.status == 200), "PUT /v1/learned/t from loopback: %d", r.status);
	resp_free(&r);
	static const struct {
		const char *what, *head;
		const char *param;
	} cases[] = {
		{"Content-Length with Transfer-Encoding: chunked",
		 "POST /v1/sinusoidal/apply HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
		 "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		 "Transfer-Encoding"},
		{"Transfer-Encoding: chunked then Content-Length",
		 "POST /v1/sinusoidal/apply HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
		 "Transfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n0\r\n\r\n",
		 "Transfer-Encoding"},
		{"\"Content-Length :\" (space before the colon) on a GET",
		 "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length : 50\r\n\r\n", "header"},
		{"\"Content-Length\\t:\" (tab before the colon) on a POST",
		 "POST /v1/sinusoidal/apply HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
		 "Content-Length\t: 50\r\n\r\n",
		 "header"},
		{"\"Transfer-Encoding :\" (space before the colon)",
		 "POST /v1/sinusoidal/apply HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
		 "Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n",
		 "header"},
		{"a field name with a non-token character",
		 "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX(y): 1\r\n\r\n", "header"},
		{"chunked on HTTP/1.0",
		 "POST /v1/sinusoidal/apply HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
		 "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		 "Transfer-Encoding"},
		/* libmicrohttpd reads "chunked " as no coding and the body until close: a desync */
		{"Transfer-Encoding: \"chunked \" (a trailing space)",
		 "POST /v1/sinusoidal/apply HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
		 "Transfer-Encoding: chunked \r\n\r\n8\r\n[[1, 2]]\r\n0\r\n\r\n",
		 "Transfer-Encoding"},
		{"Transfer-Encoding: \"chunked\\t\" (a trailing tab)",
		 "POST /v1/sinusoidal/apply HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
		 "Transfer-Encoding: chunked\t\r\n\r\n8\r\n[[1, 2]]\r\n0\r\n\r\n",
		 "Transfer-Encoding"},
		/* obs-fold (RFC 9112 5.2): libmicrohttpd joins the fold onto the name and frames no body */
		{"Content-Length: 49, then an obs-fold \" 49\"",
		 "POST /v1/sinusoidal/apply HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
		 "Content-Length: 49\r\n 49\r\n\r\n",
		 "header"},
		{"Content-Length: 5, then an obs-fold \" 0\"",
		 "POST /v1/sinusoidal/apply HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
		 "Content-Length: 5\r\n 0\r\n\r\n",
		 "header"},
		{"an empty Content-Length, then an obs-fold \"\\t49\"",
		 "POST /v1/sinusoidal/apply HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
		 "Content-Length:\r\n\t49\r\n\r\n",
		 "header"},
		{"an obs-fold in another field",
		 "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: a\r\n b\r\n\r\n", "header"},
		/* libmicrohttpd ends the header section at a line with an empty name, without a word, and
		 * reads what follows as the next request: here the DELETE's own lines */
		{"a field line with an empty name \": x\"",
		 "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n: x\r\n", "header"},
		{"a field line with an empty name \":x\"", "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n:x\r\n",
		 "header"},
		{"a field line \":\" alone", "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n:\r\n", "header"},
		{"a field line \":\" alone, bare LFs", "GET /healthz HTTP/1.1\nHost: 127.0.0.1\n:\n", "header"},
		{"two Content-Length fields",
		 "POST /v1/sinusoidal/apply HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
		 "Content-Length: 0\r\nContent-Length: 0\r\n\r\n",
		 "Content-Length"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		snprintf(req, sizeof req, "%s%s", cases[i].head, DELETE_T);
		int ok = one_problem(port, req, 400, cases[i].param, out, sizeof out);
		check(ok, "%s, a DELETE behind it: one 400 problem+json naming %s, then close (got: %.200s)", cases[i].what,
		      cases[i].param, out);
		check(table_exists(port), "... and the DELETE never ran: /v1/learned/t is still there");
	}
}

/* A NUL byte in a header value (libmicrohttpd hands values out as C strings, cut at the NUL). */
static void nul_bytes(int port)
{
	static const char post[] = "POST /v1/sinusoidal/apply HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
				   "Content-Length: 0\00049\r\n\r\n" DELETE_T;
	static const char get[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: a\000b\r\n\r\n" DELETE_T;
	static const struct {
		const char *what, *req;
		size_t len;
	} cases[] = {{"Content-Length: 0\\x0049 on a POST", post, sizeof post - 1},
		     {"X-A: a\\x00b on a GET", get, sizeof get - 1}};
	char out[8192], want[] = "HTTP/1.1 400 ";
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		size_t n = exchange(port, cases[i].req, cases[i].len, out, sizeof out, 5000);
		check(n > 0 && strncmp(out, want, strlen(want)) == 0 && status_lines(out) == 1 &&
			      strstr(out, "application/problem+json") && strstr(out, "\"param\":\"header\""),
		      "%s, a DELETE behind it: one 400 problem+json naming header, then close (got: %.200s)", cases[i].what, out);
		check(table_exists(port), "... and the DELETE never ran: /v1/learned/t is still there");
	}
}

/* req gets one problem+json with status naming field, then close. */
static void refused_once(int port, const char *req, int status, const char *field, const char *what)
{
	char out[8192];
	check(one_problem(port, req, status, field, out, sizeof out), "%s: %d (got: %.200s)", what, status, out);
}

/* req (with Connection: close) is answered 200. */
static void answered_200(int port, const char *req, const char *what)
{
	char out[8192];
	size_t n = exchange(port, req, strlen(req), out, sizeof out, 5000);
	check(n > 0 && strncmp(out, "HTTP/1.1 200 ", 13) == 0, "%s: 200 (got: %.120s)", what, out);
}

/* A POST to /v1/sinusoidal/apply with "field: value" for each value, then the rest of the head and
 * body (tail): one problem+json with status naming field each time, then close. */
static void refused_each(int port, const char *field, const char *const *values, size_t n, const char *tail, int status)
{
	char req[1024], out[8192];
	for (size_t i = 0; i < n; i++) {
		snprintf(req, sizeof req, "POST /v1/sinusoidal/apply HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
			 "%s: %s\r\n%s", field, values[i], tail);
		check(one_problem(port, req, status, field, out, sizeof out),
		      "%s: %s: one %d problem+json naming it, then close (got: %.200s)", field, values[i], status, out);
	}
}

static void transfer_codings(int port)
{
	static const char *const codings[] = {"identity", "gzip, chunked", "chunked, gzip", "xchunked", "gzip", "chunked, chunked"};
	char req[1024];
	refused_each(port, "Transfer-Encoding", codings, sizeof codings / sizeof codings[0], "\r\n[[1, 2]]", 501);
	snprintf(req, sizeof req, "POST /v1/sinusoidal/apply HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
		 "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
	refused_once(port, req, 501, "Transfer-Encoding", "Transfer-Encoding: gzip and Transfer-Encoding: chunked as two fields");
	/* and chunked itself still works (any case) */
	snprintf(req, sizeof req, "POST /v1/sinusoidal/apply HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
		 "Transfer-Encoding: Chunked\r\nConnection: close\r\n\r\n8\r\n[[1, 2]]\r\n0\r\n\r\n");
	answered_200(port, req, "Transfer-Encoding: Chunked");
}

static void host(int port)
{
	char out[8192];
	check(one_problem(port, "GET /healthz HTTP/1.1\r\n\r\n", 400, "Host", out, sizeof out),
	      "HTTP/1.1 without Host: 400 problem+json naming Host (got: %.200s)", out);
	check(one_problem(port, "GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "Host", out, sizeof out),
	      "HTTP/1.1 with two Host fields: 400 (got: %.200s)", out);
	const char *req = "GET /healthz HTTP/1.0\r\n\r\n";
	size_t n = exchange(port, req, strlen(req), out, sizeof out, 5000);
	check(n > 0 && strncmp(out, "HTTP/1.1 200 ", 13) == 0, "HTTP/1.0 without Host: 200 (got: %.120s)", out);
}

/* Answers libmicrohttpd 0.9.75 gives itself, before posencd's handler runs. */
static void mhd_answers(int port)
{
	static const struct {
		const char *value;
		int status;
	} lengths[] = {{"abc", 400}, {"-1", 400}, {"1e3", 400}, {"5, 5", 400}, {"11 ", 400}, {"11\t", 400},
		       {"99999999999999999999999", 413}};
	char req[512], out[8192];
	for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
		snprintf(req, sizeof req, "POST /v1/sinusoidal/apply HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
			 "Content-Length: %s\r\n\r\n", lengths[i].value);
		check(one_problem(port, req, lengths[i].status, "Content-Length", out, sizeof out),
		      "Content-Length: %s: one %d problem+json, then close (got: %.300s)", lengths[i].value, lengths[i].status, out);
	}
	const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
	double t0 = now_s();
	size_t n = exchange(port, preface, sizeof preface - 1, out, sizeof out, 5000);
	check(now_s() - t0 < 4.5 && (n == 0 || (strncmp(out, "HTTP/1.1 505 ", 13) == 0 && status_lines(out) == 1)),
	      "HTTP/2 preface: one 505 or a close, at once (got: %.200s)", out);
}

/* A body in a content coding is a 415 naming Content-Encoding (posencd decodes none; it read gzip'd
 * bytes as the body itself, an attack found), on any endpoint that takes a body; identity is
 * no coding at all. */
static void content_codings(int port)
{
	static const char *const codings[] = {"gzip", "deflate", "br", "x-gzip, identity", "GZIP"};
	char req[1024];
	refused_each(port, "Content-Encoding", codings, sizeof codings / sizeof codings[0],
		     "Content-Length: 8\r\n\r\n[[1, 2]]", 415);
	snprintf(req, sizeof req, "PUT /v1/learned/coded HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-npy\r\n"
		 "Content-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\n");
	refused_once(port, req, 415, "Content-Encoding", "PUT a learned table, chunked, Content-Encoding: gzip");
	snprintf(req, sizeof req, "POST /v1/sinusoidal/apply HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
		 "Content-Encoding: identity\r\nConnection: close\r\nContent-Length: 8\r\n\r\n[[1, 2]]");
	answered_200(port, req, "Content-Encoding: identity");
}

static int scenario(void)
{
	fault_init("framing_smuggling", 120);
	char dir[] = "/tmp/posenc-framing-XXXXXX";
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 2;
	}
	struct pe_spawn d;
	const char *args[] = {"--data-dir", dir, NULL};
	daemon_start(&d, args);
	smuggling(d.port);
	nul_bytes(d.port);
	transfer_codings(d.port);
	content_codings(d.port);
	host(d.port);
	mhd_answers(d.port);
	check(daemon_alive(&d) && table_exists(d.port), "daemon alive, the table still there");
	int st = daemon_stop(&d, SIGTERM, 30);
	check(st == 0, "exit status %d after SIGTERM (0 expected)", st);
	char cmd[600];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		note("could not remove %s", dir);
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
