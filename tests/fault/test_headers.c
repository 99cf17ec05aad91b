/* Header bombs and request framing: huge header lines, thousands of headers, huge request lines,
 * thousands of query parameters, a giant X-Request-Id or Accept, and conflicting Content-Length
 * headers. Each must get a 4xx (or, for harmless ones, a normal answer) within 2 s: never a crash,
 * never a connection left hanging until the inactivity timeout, never a request framed two ways. */
#include "support/pe_fault.h"

/* Send len bytes on a new connection and read one response. */
static int raw_request(int port, const char *data, size_t len, int timeout_ms, struct resp *r)
{
	memset(r, 0, sizeof *r);
	double t0 = now_s();
	int fd = tcp_connect(port, "127.0.0.1");
	if (fd < 0)
		return -1;
	int rc = send_all(fd, data, len);
	if (rc == 0)
		rc = read_response(fd, r, timeout_ms, 1 << 20);
	else /* the server may answer and close before taking it all */
		read_response(fd, r, timeout_ms, 1 << 20);
	r->seconds = now_s() - t0;
	close(fd);
	return rc;
}

static char *build(const char *head, const char *unit, size_t repeat, const char *tail, size_t *len)
{
	size_t hl = strlen(head), ul = strlen(unit), tl = strlen(tail);
	char *b = malloc(hl + ul * repeat + tl + 1);
	memcpy(b, head, hl);
	for (size_t i = 0; i < repeat; i++)
		memcpy(b + hl + i * ul, unit, ul);
	memcpy(b + hl + ul * repeat, tail, tl + 1);
	*len = hl + ul * repeat + tl;
	return b;
}

/* A 4xx within 2 s; with or_close, closing the connection without an answer within 2 s will do
 * too (what a server can do where libmicrohttpd cannot build a response). */
static void expect_refusal(int port, const char *what, const char *head, const char *unit, size_t repeat,
			   const char *tail, int or_close)
{
	size_t len;
	char *req = build(head, unit, repeat, tail, &len);
	struct resp r;
	raw_request(port, req, len, 5000, &r);
	int answered = r.status >= 400 && r.status < 500, closed = or_close && r.status == 0;
	check((answered || closed) && r.seconds < 2, "%s (%zu bytes): %s within 2 s (status %d after %.3f s)", what, len,
	      or_close ? "4xx or closed" : "4xx", r.status, r.seconds);
	resp_free(&r);
	free(req);
}

#define expect_4xx(port, what, head, unit, repeat, tail) expect_refusal(port, what, head, unit, repeat, tail, 0)

static int scenario(void)
{
	fault_init("headers", 60);
	struct pe_spawn d;
	daemon_start(&d, NULL);
	struct resp r;
	http_get(d.port, "/healthz", 2000, &r);
	resp_free(&r);
	long base = rss_kib(d.pid);

	expect_4xx(d.port, "one 100 KiB header line", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ", "a", 100 * 1024, "\r\n\r\n");
	expect_4xx(d.port, "10000 headers", "GET /healthz HTTP/1.1\r\nHost: x\r\n", "X-H: v\r\n", 10000, "\r\n");
	expect_4xx(d.port, "a 100 KiB request line", "GET /v1/sinusoidal?len=4&dim=8&pad=", "a", 100 * 1024,
		   " HTTP/1.1\r\nHost: x\r\n\r\n");
	expect_4xx(d.port, "a 100 KiB method", "", "A", 100 * 1024, " / HTTP/1.1\r\nHost: x\r\n\r\n");
	/* libmicrohttpd 0.9.75 keeps one record per query parameter in the connection's memory pool;
	 * when they do not fit it logs a 431 but sends nothing and holds the connection until the
	 * inactivity timeout. */
	expect_refusal(d.port, "2000 query parameters", "GET /v1/sinusoidal?len=4&dim=8", "&a=1", 2000,
		       " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 1);
	expect_refusal(d.port, "3000 empty query parameters", "GET /v1/sinusoidal?len=4&dim=8", "&", 3000,
		       " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 1);
	/* Two Content-Length values: a proxy that takes the other one would frame the stream another
	 * way (request smuggling). RFC 9112 section 6.3: reject. */
	expect_4xx(d.port, "conflicting Content-Length headers",
		   "POST /v1/sinusoidal/apply HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
		   "Content-Length: 5\r\nContent-Length: 7\r\nConnection: close\r\n\r\n[[1]]",
		   "", 0, "");

	size_t len;
	char *req = build("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Big: ", "a", 60 * 1024, "\r\n\r\n", &len);
	raw_request(d.port, req, len, 5000, &r);
	check(r.status > 0 && r.seconds < 2, "a 60 KiB header value: answered within 2 s (status %d)", r.status);
	resp_free(&r);
	free(req);

	req = build("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Request-Id: ", "r", 5000, "\r\n\r\n", &len);
	raw_request(d.port, req, len, 5000, &r);
	char rid[256] = "";
	resp_header(&r, "X-Request-Id", rid, sizeof rid);
	check(r.status == 200 && strlen(rid) > 0 && strlen(rid) <= 64,
	      "a 5000-byte X-Request-Id is not echoed (a generated id of %zu bytes instead)", strlen(rid));
	resp_free(&r);
	free(req);

	req = build("GET /v1/sinusoidal?len=4&dim=8 HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAccept: ",
		    "application/x-unknown;q=0.5, ", 1500, "text/csv;q=0.1\r\n\r\n", &len);
	raw_request(d.port, req, len, 5000, &r);
	check((r.status == 200 || r.status == 406 || r.status == 431) && r.seconds < 1,
	      "an Accept header with 1500 alternatives: answered within 1 s (status %d, %.3f s)", r.status, r.seconds);
	resp_free(&r);
	free(req);

	long after = rss_kib(d.pid);
	if (daemon_instrumented(&d))
		note("instrumented daemon: RSS %+ld KiB, not checked", after - base);
	else
		check(after - base < 16 * 1024, "RSS stays flat (%+ld KiB)", after - base);
	check(daemon_alive(&d) && http_get(d.port, "/healthz", 2000, &r) == 0 && r.status == 200, "daemon alive and healthy");
	resp_free(&r);
	int st = daemon_stop(&d, SIGTERM, 40);
	check(st == 0, "exit status %d after SIGTERM (0 expected)", st);
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
