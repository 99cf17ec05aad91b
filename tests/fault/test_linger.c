/* Refusals every client can read (issue 15 item 4). A request refused before its body is read
 * (413 from Content-Length, 405, 415, 401/403 on learned-table writes) must reach a client that
 * sends its whole body without "Expect: 100-continue" first, as Python's http.client, requests and
 * urllib do: posencd reads and drops the body (up to --linger-bytes, within --linger-timeout),
 * then answers with problem+json and closes. Checked with Python's http.client
 * (tests/fault/linger_client.py) and with a raw socket. With Expect the refusal comes at once,
 * without 100 Continue. A client that keeps sending past the bound (a chunked body), or sends too
 * slowly, is cut off, and the daemon serves others meanwhile. */
#include "support/pe_fault.h"

#include <libgen.h>

#define MIB ((size_t)1 << 20)

static char client_py[512];

/* Python's http.client, one request; its one-line report into out ("413 application/problem+json
 * {...}" or "EXC BrokenPipeError ..."). */
static void py_request(int port, const char *method, const char *path, const char *ctype, size_t size,
		       const char *header, char *out, size_t cap)
{
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "python3 '%s' %d %s '%s' '%s' %zu %s%s%s 2>&1", client_py, port, method, path, ctype,
		 size, header ? "'" : "", header ? header : "", header ? "'" : "");
	out[0] = 0;
	FILE *p = popen(cmd, "r");
	if (p) {
		if (!fgets(out, (int)cap, p))
			out[0] = 0;
		pclose(p);
	}
	out[strcspn(out, "\n")] = 0;
}

/* Does a line of linger_client.py show this status with a problem+json body? */
static int py_problem(const char *line, int status)
{
	char want[32];
	snprintf(want, sizeof want, "%d application/problem+json {", status);
	return strncmp(line, want, strlen(want)) == 0;
}

/* Raw socket: the head, then the whole body in 1 MiB writes, then the answer. */
static int raw_request(int port, const char *method, const char *path, const char *ctype, size_t size, const char *extra,
		       struct resp *r)
{
	static char zeros[1 << 20];
	memset(r, 0, sizeof *r);
	int fd = tcp_connect(port, "127.0.0.1");
	if (fd < 0)
		return -1;
	char head[1024];
	int n = snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s\r\n",
			 method, path, ctype, size, extra ? extra : "");
	int rc = send_all(fd, head, (size_t)n);
	for (size_t sent = 0; rc == 0 && sent < size; sent += sizeof zeros)
		rc = send_all(fd, zeros, size - sent < sizeof zeros ? size - sent : sizeof zeros);
	if (rc == 0)
		rc = read_response(fd, r, 30000, MIB);
	close(fd);
	return rc;
}

struct refusal {
	const char *what, *method, *path, *ctype, *header;
	size_t size;
	int status;
};

static void refusals(int port)
{
	static const struct refusal cases[] = {
		{"80 MiB over a 64 MiB max_body_bytes", "POST", "/v1/sinusoidal/apply", "application/json", NULL, 80 * MIB, 413},
		{"a transform with PUT", "PUT", "/v1/rope/apply", "application/json", NULL, 8 * MIB, 405},
		{"a body of type text/plain", "POST", "/v1/alibi/apply", "text/plain", NULL, 8 * MIB, 415},
		{"a learned-table write with the wrong token", "PUT", "/v1/learned/t", "application/x-npy",
		 "Authorization: Bearer wrong", 8 * MIB, 403},
		{"a learned-table write without a token", "PUT", "/v1/learned/t", "application/x-npy", NULL, 8 * MIB, 401},
		{"a bad query on a learned-table write", "PUT", "/v1/learned/t?bogus=1", "application/x-npy",
		 "Authorization: Bearer s3cret", 8 * MIB, 400},
		{"a table with POST", "POST", "/v1/sinusoidal?len=4&dim=8", "application/json", NULL, 8 * MIB, 405},
		{"a path that does not exist", "POST", "/v2/nothing", "application/json", NULL, 8 * MIB, 404},
	};
	char line[2048];
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const struct refusal *c = &cases[i];
		py_request(port, c->method, c->path, c->ctype, c->size, c->header, line, sizeof line);
		check(py_problem(line, c->status), "http.client, %s (%zu MiB, no Expect): %d problem+json (got: %.160s)", c->what,
		      c->size / MIB, c->status, line);
		char extra[256] = "";
		if (c->header)
			snprintf(extra, sizeof extra, "%s\r\n", c->header);
		struct resp r;
		int rc = raw_request(port, c->method, c->path, c->ctype, c->size, extra, &r);
		char conn[64];
		check(rc == 0 && is_problem(&r, c->status, NULL) && resp_header(&r, "Connection", conn, sizeof conn) &&
			      !strcasecmp(conn, "close"),
		      "raw socket, %s: whole body sent, then %d problem+json and Connection: close (rc %d, status %d)", c->what,
		      c->status, rc, r.status);
		resp_free(&r);
	}
}

/* With Expect: 100-continue nothing of the body is sent: the refusal comes at once, and no
 * 100 Continue before it. */
static void with_expect(int port)
{
	int fd = tcp_connect(port, "127.0.0.1");
	char head[512];
	int n = snprintf(head, sizeof head, "POST /v1/sinusoidal/apply HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
			 "Content-Length: %zu\r\nExpect: 100-continue\r\n\r\n", 80 * MIB);
	struct resp r = {0};
	int rc = fd >= 0 && send_all(fd, head, (size_t)n) == 0 ? read_response(fd, &r, 5000, MIB) : -1;
	check(rc == 0 && is_problem(&r, 413, "body"), "Expect: 100-continue: 413 before any body byte, no 100 Continue (status %d)",
	      r.status);
	check(fd >= 0 && peer_closed(fd, 5000), "... and the connection is closed");
	resp_free(&r);
	if (fd >= 0)
		close(fd);
}

/* A chunked body that never ends, refused (415) or past max_body_bytes: posencd drops at most
 * --linger-bytes of it and cuts the connection, serving /healthz meanwhile. */
static void endless(int port, const char *ctype, const char *what)
{
	int fd = tcp_connect(port, "127.0.0.1");
	char head[512];
	int n = snprintf(head, sizeof head, "POST /v1/sinusoidal/apply HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: %s\r\n"
			 "Transfer-Encoding: chunked\r\n\r\n", ctype);
	static char chunk[65536];
	memset(chunk, ' ', sizeof chunk);
	size_t sent = 0;
	int rc = fd >= 0 ? send_all(fd, head, (size_t)n) : -1, served = 1;
	while (rc == 0 && sent < 256 * MIB) {
		char sz[16];
		int k = snprintf(sz, sizeof sz, "%zx\r\n", sizeof chunk);
		rc = send_all(fd, sz, (size_t)k) || send_all(fd, chunk, sizeof chunk) || send_all(fd, "\r\n", 2);
		sent += sizeof chunk;
		if (rc == 0 && sent % (2 * MIB) == 0) { /* meanwhile, others are served */
			struct resp r;
			served &= http_get(port, "/healthz", 5000, &r) == 0 && r.status == 200;
			resp_free(&r);
		}
	}
	check(rc != 0 && sent < 64 * MIB, "%s, chunked and endless: cut off after %zu MiB (--linger-bytes 8Mi)", what, sent / MIB);
	check(served, "... while /healthz answered 200 throughout");
	if (fd >= 0)
		close(fd);
}

/* A refused body sent at 10 KiB/s: cut off once --linger-timeout (1 s) has passed. */
static void slow(int port)
{
	int fd = tcp_connect(port, "127.0.0.1");
	char head[512];
	int n = snprintf(head, sizeof head, "POST /v1/sinusoidal/apply HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
			 "Content-Length: %zu\r\n\r\n", 4 * MIB);
	static char part[2048];
	int rc = fd >= 0 ? send_all(fd, head, (size_t)n) : -1;
	double t0 = now_s();
	while (rc == 0 && now_s() - t0 < 20) {
		rc = send_all(fd, part, sizeof part);
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (rc == 0 && poll(&p, 1, 200) > 0 && peer_closed(fd, 0))
			rc = -1;
	}
	check(rc != 0, "a refused body dripping at 10 KiB/s: cut off (after %.1f s; --linger-timeout 1)", now_s() - t0);
	if (fd >= 0)
		close(fd);
}

static int scenario(void)
{
	fault_init("linger", 300);
	char src[512];
	snprintf(src, sizeof src, "%s", __FILE__);
	snprintf(client_py, sizeof client_py, "%s/linger_client.py", dirname(src));
	if (system("python3 -c 'import http.client' >/dev/null 2>&1") != 0) {
		note("python3 is not available: the http.client cases are skipped");
		client_py[0] = 0;
	}
	char dir[] = "/tmp/posenc-linger-XXXXXX";
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 2;
	}
	struct pe_spawn d;
	const char *args[] = {"--max-body-bytes", "64Mi", "--auth-token", "s3cret", "--data-dir", dir, NULL};
	daemon_start(&d, args);
	if (client_py[0])
		refusals(d.port);
	with_expect(d.port);
	check(daemon_alive(&d), "daemon alive");
	int st = daemon_stop(&d, SIGTERM, 30);
	check(st == 0, "exit status %d after SIGTERM (0 expected)", st);

	/* the defaults (max_body_bytes 256 MiB, linger_bytes 1 GiB): 300 MiB is answered too */
	const char *defaults[] = {"--data-dir", dir, NULL};
	daemon_start(&d, defaults);
	if (client_py[0]) {
		char line[2048];
		py_request(d.port, "POST", "/v1/rope/apply", "application/x-npy", 300 * MIB, NULL, line, sizeof line);
		check(py_problem(line, 413), "defaults: http.client posting 300 MiB gets the 413 (got: %.160s)", line);
	}
	st = daemon_stop(&d, SIGTERM, 30);
	check(st == 0, "exit status %d after SIGTERM (0 expected)", st);

	const char *bounded[] = {"--max-body-bytes", "1Mi", "--linger-bytes", "8Mi", "--linger-timeout", "1", "--data-dir", dir, NULL};
	daemon_start(&d, bounded);
	endless(d.port, "text/plain", "a 415");
	endless(d.port, "application/json", "a body past --max-body-bytes");
	slow(d.port);
	struct resp r;
	check(http_get(d.port, "/healthz", 5000, &r) == 0 && r.status == 200, "daemon healthy afterwards");
	resp_free(&r);
	st = daemon_stop(&d, SIGTERM, 30);
	check(st == 0, "exit status %d after SIGTERM (0 expected)", st);
	char cmd[600];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		note("could not remove %s", dir);
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
