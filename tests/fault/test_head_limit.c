/* max_header_bytes is posencd's own limit on a request's head (request line and header fields),
 * checked against a daemon with --max-header-bytes 8192: a head within it is answered as usual,
 * whatever its count of query parameters (up to 64) or header fields (up to 128); a head over it
 * gets a 414 (request line alone over) or 431 problem naming the limit within a second, never a
 * connection held until the inactivity timeout; a request pipelined after a refusal is answered. */
#include "support/pe_fault.h"

#define LIMIT 8192

/* "GET /v1/sinusoidal?len=2&dim=2&x0=1...&pad=zzz HTTP/1.1\r\n" of exactly line bytes, with
 * nparams query parameters, then Host and the blank line. */
static char *request_line_of(size_t line, int nparams, size_t *len)
{
	char *b = malloc(line + 64);
	size_t n = (size_t)sprintf(b, "GET /v1/sinusoidal?len=2&dim=2");
	for (int i = 0; i < nparams - 3; i++)
		n += (size_t)sprintf(b + n, "&x%d=1", i);
	n += (size_t)sprintf(b + n, "&pad=");
	size_t tail = strlen(" HTTP/1.1\r\n");
	while (n + tail < line)
		b[n++] = 'z';
	n += (size_t)sprintf(b + n, " HTTP/1.1\r\nHost: x\r\n\r\n");
	*len = n;
	return b;
}

/* After n bytes of b: Host and fields - 2 more header fields, one of them padded so that the head
 * ends at about head bytes, and the blank line; the new length. */
static size_t put_fields(char *b, size_t n, size_t head, int fields)
{
	n += (size_t)sprintf(b + n, "Host: x\r\n");
	for (int i = 0; i < fields - 2; i++)
		n += (size_t)sprintf(b + n, "a%d: b\r\n", i);
	n += (size_t)sprintf(b + n, "p: ");
	while (n + 2 < head)
		b[n++] = 'v';
	return n + (size_t)sprintf(b + n, "\r\n\r\n");
}

/* A head of about head bytes in fields header fields (Host among them). */
static char *fields_of(size_t head, int fields, size_t *len)
{
	char *b = malloc(head + 64 * (size_t)fields + 64);
	*len = put_fields(b, (size_t)sprintf(b, "GET /v1/sinusoidal?len=2&dim=2 HTTP/1.1\r\n"), head, fields);
	return b;
}

/* A head of about head bytes: a request line of line bytes with nparams query parameters, then
 * fields header fields (Host among them). */
static char *line_and_fields_of(size_t line, int nparams, size_t head, int fields, size_t *len)
{
	size_t n;
	char *l = request_line_of(line, nparams, &n), *b = malloc(head + 64 * (size_t)fields + 64);
	n -= strlen("Host: x\r\n\r\n");
	memcpy(b, l, n);
	free(l);
	*len = put_fields(b, n, head, fields);
	return b;
}

/* Send req on a new connection, read one response within 1 s; the connection's fd in *fd. */
static void one(int port, const char *req, size_t len, struct resp *r, int *fd)
{
	memset(r, 0, sizeof *r);
	*fd = tcp_connect(port, "127.0.0.1");
	double t0 = now_s();
	send_all(*fd, req, len);
	read_response(*fd, r, 1000, 1 << 20);
	r->seconds = now_s() - t0;
}

static void expect_status(int port, const char *what, char *req, size_t len, int status, const char *param)
{
	struct resp r;
	int fd;
	one(port, req, len, &r, &fd);
	if (status)
		check(is_problem(&r, status, param), "%s (%zu bytes): a %d problem naming %s (status %d)", what, len,
		      status, param, r.status);
	else
		check(r.status > 0 && r.status != 414 && r.status != 431,
		      "%s (%zu bytes): answered as usual within 1 s (status %d)", what, len, r.status);
	resp_free(&r);
	close(fd);
	free(req);
}

static void pipelined_after_refusal(int port)
{
	static const char good[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
	size_t len;
	char *bad = request_line_of(14000, 64, &len);
	char *both = malloc(len + sizeof good);
	memcpy(both, bad, len);
	memcpy(both + len, good, sizeof good);
	struct resp r, r2;
	int fd;
	one(port, both, len + sizeof good - 1, &r, &fd);
	check(is_problem(&r, 414, "request-target"), "pipelined: the long request line gets its 414 (status %d)",
	      r.status);
	memset(&r2, 0, sizeof r2);
	int got = read_response(fd, &r2, 1000, 1 << 20) == 0;
	check((got && r2.status == 200) || (!got && peer_closed(fd, 1000)),
	      "pipelined: the request after the 414 is answered or the connection closed (status %d)", r2.status);
	resp_free(&r);
	resp_free(&r2);
	close(fd);
	free(both);
	free(bad);
}

static int scenario(void)
{
	fault_init("head_limit", 60);
	struct pe_spawn d;
	const char *extra[] = {"--max-header-bytes", "8192", "--connection-timeout", "5", NULL};
	daemon_start(&d, extra);
	size_t len;
	char *req;

	req = request_line_of(8000, 64, &len);
	expect_status(d.port, "an 8000-byte request line with 64 parameters", req, len, 0, NULL);
	req = fields_of(8000, 100, &len);
	expect_status(d.port, "an 8000-byte head of 100 header fields", req, len, 0, NULL);
	req = fields_of(1200, 128, &len);
	expect_status(d.port, "128 header fields", req, len, 0, NULL);
	/* the pool holds the head and its fields' records: the query's parameters take none */
	req = line_and_fields_of(4000, 64, LIMIT - 2, 120, &len);
	expect_status(d.port, "a head of max_header_bytes: 64 parameters and 120 header fields", req, len, 0, NULL);

	static const size_t lines[] = {8300, 12900, 14000, 17000, 40000};
	static const int params[] = {2, 64};
	for (size_t i = 0; i < sizeof lines / sizeof *lines; i++)
		for (size_t j = 0; j < 2; j++) {
			char what[96];
			snprintf(what, sizeof what, "a %zu-byte request line with %d parameters", lines[i], params[j]);
			req = request_line_of(lines[i], params[j], &len);
			if (lines[i] < 2 * LIMIT) /* within the pool: posencd's own answer */
				expect_status(d.port, what, req, len, 414, "request-target");
			else { /* past the pool: libmicrohttpd's 414 */
				struct resp r;
				int fd;
				one(d.port, req, len, &r, &fd);
				check(r.status == 414, "%s: a 414 within 1 s (status %d)", what, r.status);
				resp_free(&r);
				close(fd);
				free(req);
			}
		}
	req = fields_of(8300, 100, &len);
	expect_status(d.port, "an 8300-byte head of 100 header fields", req, len, 431, "header");
	req = fields_of(12900, 2, &len);
	expect_status(d.port, "a 12900-byte header field", req, len, 431, "header");
	req = fields_of(1200, 129, &len);
	expect_status(d.port, "129 header fields", req, len, 431, "header");
	pipelined_after_refusal(d.port);

	struct resp r;
	check(daemon_alive(&d) && http_get(d.port, "/healthz", 2000, &r) == 0 && r.status == 200, "daemon alive and healthy");
	resp_free(&r);
	int st = daemon_stop(&d, SIGTERM, 40);
	check(st == 0, "exit status %d after SIGTERM (0 expected)", st);
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
