/* Oversized bodies: a declared Content-Length of 1 TiB (and anything over --max-body-bytes) is
 * refused with 413 problem+json at once, before any body is sent or memory taken, on every
 * transform and body type, with or without "Expect: 100-continue" (and then without a 100
 * Continue first). A chunked body that grows past the limit is cut off with 413; the daemon's
 * memory stays flat throughout. */
#include "support/pe_fault.h"

#define TIB "1099511627776"

/* Send only the head of a request; read the first response. */
static int head_only_m(int port, const char *method, const char *path, const char *ctype, const char *cl,
		       const char *extra, int timeout_ms, struct resp *r)
{
	int fd = tcp_connect(port, "127.0.0.1");
	if (fd < 0)
		return -1;
	char head[1024];
	int n = snprintf(head, sizeof head,
			 "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: %s\r\nContent-Length: %s\r\n%s\r\n", method,
			 path, ctype, cl, extra);
	int rc = send_all(fd, head, (size_t)n);
	if (rc == 0)
		rc = read_response(fd, r, timeout_ms, 1 << 20);
	close(fd);
	return rc;
}

#define head_only(port, ...) head_only_m(port, "POST", __VA_ARGS__)

static int scenario(void)
{
	fault_init("bigbody", 60);
	struct pe_spawn d;
	const char *args[] = {"--max-body-bytes", "1048576", NULL};
	daemon_start(&d, args);
	double slack = daemon_instrumented(&d) ? 3 : 1;
	struct resp r;
	http_get(d.port, "/healthz", 2000, &r);
	resp_free(&r);
	long base = rss_kib(d.pid);

	static const char *const routes[] = {"/v1/sinusoidal/apply", "/v1/alibi/apply", "/v1/rope/apply"};
	static const char *const types[] = {"application/json", "application/x-npy", "application/octet-stream"};
	int refused = 0, total = 0;
	double worst = 0;
	for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
		for (size_t k = 0; k < sizeof types / sizeof types[0]; k++)
			for (int expect = 0; expect <= 1; expect++) {
				total++;
				int rc = head_only(d.port, routes[i], types[k], TIB, expect ? "Expect: 100-continue\r\n" : "",
						   5000, &r);
				int ok = rc == 0 && is_problem(&r, 413, "body") && r.seconds < slack;
				refused += ok;
				worst = r.seconds > worst ? r.seconds : worst;
				if (!ok)
					note("%s %s%s: status %d after %.3f s: %.200s", routes[i], types[k],
					     expect ? " (Expect: 100-continue)" : "", r.status, r.seconds, r.body ? r.body : "");
				resp_free(&r);
			}
	check(refused == total, "Content-Length 1 TiB: 413 problem+json naming \"body\" at once, %d of %d (slowest %.3f s)", refused,
	      total, worst);

	/* (without Expect, the body would be read and dropped first: tests/fault/test_linger.c) */
	int rc = head_only(d.port, "/v1/sinusoidal/apply", "application/json", "1048577", "Expect: 100-continue\r\n", 5000, &r);
	check(rc == 0 && is_problem(&r, 413, "body"), "Content-Length one byte over --max-body-bytes, Expect: 100-continue: 413 at once (status %d)", r.status);
	resp_free(&r);
	rc = head_only(d.port, "/v1/sinusoidal/apply", "application/json", "1048576", "", 500, &r);
	check(rc != 0 && r.status == 0, "Content-Length at the limit: the server waits for the body (no early answer)");
	resp_free(&r);

	/* Routes that take no body: the server would read and drop a terabyte at wire speed. */
	rc = head_only_m(d.port, "GET", "/v1/sinusoidal?len=4&dim=8", "application/json", TIB, "", 3000, &r);
	check(rc == 0 && r.status >= 400 && r.status < 500 && r.seconds < slack,
	      "GET of a table with Content-Length 1 TiB: 4xx at once (status %d after %.3f s)", r.status, r.seconds);
	resp_free(&r);

	/* Chunked: 2 MiB of JSON in 64 KiB chunks against a 1 MiB limit. */
	int fd = tcp_connect(d.port, "127.0.0.1");
	const char head[] = "POST /v1/sinusoidal/apply HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
			    "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
	rc = fd >= 0 ? send_all(fd, head, sizeof head - 1) : -1;
	static char chunk[65536];
	memset(chunk, ' ', sizeof chunk);
	chunk[0] = '[';
	for (int i = 0; rc == 0 && i < 32; i++) {
		char sz[32];
		int n = snprintf(sz, sizeof sz, "%zx\r\n", sizeof chunk);
		rc = send_all(fd, sz, (size_t)n) || send_all(fd, chunk, sizeof chunk) || send_all(fd, "\r\n", 2);
		chunk[0] = ' ';
	}
	if (rc == 0)
		rc = send_all(fd, "0\r\n\r\n", 5);
	int got = fd >= 0 && read_response(fd, &r, 5000, 1 << 20) == 0;
	check(got && is_problem(&r, 413, "body"), "chunked body growing past --max-body-bytes: 413 problem+json (status %d)",
	      r.status);
	resp_free(&r);
	if (fd >= 0)
		close(fd);

	long after = rss_kib(d.pid);
	if (daemon_instrumented(&d))
		note("instrumented daemon: RSS %+ld KiB, not checked", after - base);
	else
		check(after - base < 16 * 1024, "RSS stays flat (%+ld KiB)", after - base);
	check(daemon_alive(&d) && http_get(d.port, "/healthz", 2000, &r) == 0 && r.status == 200, "daemon alive and healthy");
	resp_free(&r);
	int st = daemon_stop(&d, SIGTERM, 30);
	check(st == 0, "exit status %d after SIGTERM (0 expected)", st);

	/* The built-in default limit refuses it as well. */
	daemon_start(&d, NULL);
	rc = head_only(d.port, "/v1/sinusoidal/apply", "application/json", TIB, "", 5000, &r);
	check(rc == 0 && is_problem(&r, 413, "body") && r.seconds < slack,
	      "with the default max_body_bytes: 1 TiB refused with 413 in %.3f s", r.seconds);
	resp_free(&r);
	st = daemon_stop(&d, SIGTERM, 30);
	check(st == 0, "exit status %d after SIGTERM (0 expected)", st);
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
