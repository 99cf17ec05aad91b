/* Hostile multipart/form-data bodies at POST /v1/rope/apply (a part x, a part positions), against
 * a daemon with a 12 MiB response budget, 4 MiB max_body_bytes and a 3 s connection timeout. Each
 * must end in a clear 400/413/503 problem or in the server's existing lingering / slow-client
 * cut, never in memory held past the budget:
 *  - a part header line of 64 KiB (past MHD_PostProcessor's 8 KiB buffer): 400 naming body;
 *  - 20000 header lines in one part (about 1 MiB; MHD moves its buffer once a line): 400 naming
 *    body once they pass 8 KiB together; 100 of them (1.6 KiB): 200;
 *  - 10000 parts of an unknown name: 400 naming the first one, at once;
 *  - a part given twice, the second one 3 MiB: 400 naming it;
 *  - a boundary never closed (Content-Length, and chunked): 400 naming body;
 *  - a body sent one byte per write, parts split across every read: 200, the same bytes as whole;
 *  - Content-Length larger than what is sent, then silence: the connection is cut (slow client);
 *  - Content-Length smaller than the body: the form ends early, 400 naming body;
 *  - Content-Length over max_body_bytes: 413 before a byte is read; a chunked body past it: 413;
 *  - a body dripping a few bytes a second: cut by the slow-client rule;
 *  - six clients holding 3 MiB x parts at once: the budget admits what it can (503 naming body with
 *    Retry-After for the rest), peak RSS stays within idle + budget + a constant, small requests
 *    are served meanwhile, and the budget is back at zero when they leave. Each job needs most of
 *    the budget beside its body, so at least one must be served: one job waits for its share
 *    while the others, refused, give their bodies back (before the wait, the last two jobs could
 *    refuse each other and all six were 503, about one run in 17). Three rounds of it.
 * After all of it the daemon serves a good form and exits 0 on SIGTERM. */
#include "support/pe_fault.h"
#include "e2e/test_apply_positions_form.h"

#define MIB (1024L * 1024L)
#define BUDGET_MIB 12
#define CONSTANT_MIB 24 /* libmicrohttpd's pools, stacks, the allocator: as test_bodybudget */
#define HOLDERS 6
#define HOLD_BYTES ((size_t)3 * MIB)
#define CT "Content-Type: multipart/form-data; boundary=" FORM_BOUNDARY "\r\n"

/* An npy float32 [1, 1, seq, 8] of small values; caller frees. */
static char *npy_x(size_t seq, size_t *len)
{
	char dict[128];
	int dl = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, %zu, 8), }", seq);
	size_t hlen = 128, n = seq * 8;
	char *b = calloc(1, hlen + n * 4);
	memcpy(b, "\x93NUMPY\x01\x00", 8);
	b[8] = (char)(hlen - 10);
	memset(b + 10, ' ', hlen - 10);
	memcpy(b + 10, dict, (size_t)dl);
	b[hlen - 1] = '\n';
	for (size_t i = 0; i < n; i++) {
		float v = (float)(i % 13) * 0.25f - 1.5f;
		memcpy(b + hlen + i * 4, &v, 4);
	}
	*len = hlen + n * 4;
	return b;
}

static char *good_form(size_t *len)
{
	size_t xlen, plen, ps[] = {4};
	int64_t pos[] = {3, 1, 4, 1000000};
	char *x = npy_x(4, &xlen), *p = npy_ints(pos, ps, 1, 1, &plen);
	struct form_part parts[] = {{"x", "application/octet-stream", x, xlen}, {"positions", NULL, p, plen}};
	char *body = form_body(parts, 2, len);
	free(x);
	free(p);
	return body;
}

static int post(int port, const char *body, size_t len, struct resp *r)
{
	return http_request(port, NULL, "POST", "/v1/rope/apply?format=bin", CT, body, len, 30000, r);
}

static void expect(int port, const char *what, const char *body, size_t len, int status, const char *param)
{
	struct resp r;
	int rc = post(port, body, len, &r);
	check(rc == 0 && is_problem(&r, status, param), "%s: %d problem naming %s (%d %.160s)", what, status,
	      param ? param : "-", r.status, r.body ? r.body : "");
	resp_free(&r);
}

static void good_served(int port, const char *when)
{
	size_t len;
	char *body = good_form(&len);
	struct resp r;
	int rc = post(port, body, len, &r);
	check(rc == 0 && r.status == 200 && r.body_len == 4 * 8 * 4, "a good form is served %s (%d)", when, r.status);
	resp_free(&r);
	free(body);
}

/* A form whose x part has `pad` extra header lines, or one line of `line` bytes. */
static char *padded_form(size_t lines, size_t line, size_t *len)
{
	size_t xlen;
	char *x = npy_x(4, &xlen);
	size_t cap = xlen + lines * 16 + line + 512, at = 0;
	char *b = malloc(cap);
	at += (size_t)snprintf(b + at, cap - at, "--%s\r\nContent-Disposition: form-data; name=\"x\"\r\n", FORM_BOUNDARY);
	for (size_t i = 0; i < lines; i++)
		at += (size_t)snprintf(b + at, cap - at, "X-Pad-%zu: yes\r\n", i % 1000);
	if (line) {
		memcpy(b + at, "X-Long: ", 8);
		memset(b + at + 8, 'a', line);
		at += 8 + line;
		at += (size_t)snprintf(b + at, cap - at, "\r\n");
	}
	at += (size_t)snprintf(b + at, cap - at, "\r\n");
	memcpy(b + at, x, xlen);
	at += xlen;
	at += (size_t)snprintf(b + at, cap - at, "\r\n--%s--\r\n", FORM_BOUNDARY);
	free(x);
	*len = at;
	return b;
}

static void part_headers(int port)
{
	size_t len;
	char *b = padded_form(0, 64 * 1024, &len);
	expect(port, "a part header line of 64 KiB", b, len, 400, "body");
	free(b);
	b = padded_form(20000, 0, &len);
	expect(port, "20000 header lines in a part (over 8 KiB together)", b, len, 400, "body");
	free(b);
	b = padded_form(100, 0, &len);
	struct resp r;
	int rc = post(port, b, len, &r);
	check(rc == 0 && r.status == 200, "100 header lines in a part (%zu bytes): 200 (%d)", len, r.status);
	resp_free(&r);
	free(b);
}

static void many_and_twice(int port)
{
	size_t cap = 10000 * 120 + 256, at = 0;
	char *b = malloc(cap);
	for (int i = 0; i < 10000; i++)
		at += (size_t)snprintf(b + at, cap - at, "--%s\r\nContent-Disposition: form-data; name=\"p%d\"\r\n\r\n1\r\n",
				       FORM_BOUNDARY, i);
	at += (size_t)snprintf(b + at, cap - at, "--%s--\r\n", FORM_BOUNDARY);
	expect(port, "10000 parts of unknown names", b, at, 400, "p0");
	free(b);
	size_t xlen, len;
	char *x = npy_x(4, &xlen), *big = calloc(1, 3 * MIB);
	struct form_part parts[] = {{"x", NULL, x, xlen}, {"x", NULL, big, 3 * MIB}};
	b = form_body(parts, 2, &len);
	expect(port, "x given twice, the second 3 MiB", b, len, 400, "x");
	free(b);
	free(big);
	free(x);
}

static void unclosed(int port)
{
	size_t len;
	char *b = good_form(&len);
	size_t cut = len - strlen(FORM_BOUNDARY) - 6; /* without "--B--\r\n" */
	expect(port, "a boundary never closed (Content-Length)", b, cut, 400, "body");
	int fd = tcp_connect(port, NULL);
	char head[512], size[32];
	int hl = snprintf(head, sizeof head, "POST /v1/rope/apply HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" CT
			  "Transfer-Encoding: chunked\r\n\r\n");
	int sl = snprintf(size, sizeof size, "%zx\r\n", cut);
	struct resp r = {0};
	int ok = fd >= 0 && send_all(fd, head, (size_t)hl) == 0 && send_all(fd, size, (size_t)sl) == 0 &&
		 send_all(fd, b, cut) == 0 && send_all(fd, "\r\n0\r\n\r\n", 7) == 0 && read_response(fd, &r, 30000, 1 << 20) == 0;
	check(ok && is_problem(&r, 400, "body"), "a boundary never closed (chunked): 400 naming body (%d)", r.status);
	resp_free(&r);
	if (fd >= 0)
		close(fd);
	free(b);
}

/* One byte per write: every part, header and boundary split across reads. */
static void byte_by_byte(int port)
{
	size_t len;
	char *b = good_form(&len);
	struct resp whole, r = {0};
	int rc = post(port, b, len, &whole);
	int fd = tcp_connect(port, NULL);
	char head[512];
	int hl = snprintf(head, sizeof head, "POST /v1/rope/apply?format=bin HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
			  CT "Content-Length: %zu\r\n\r\n", len);
	int ok = fd >= 0 && send_all(fd, head, (size_t)hl) == 0;
	for (size_t i = 0; ok && i < len; i++) {
		ok = send_all(fd, b + i, 1) == 0;
		if (i % 64 == 0)
			sleep_s(0.001);
	}
	ok = ok && read_response(fd, &r, 30000, 1 << 20) == 0;
	check(ok && rc == 0 && r.status == 200 && whole.status == 200 && r.body_len == whole.body_len &&
		      !memcmp(r.body, whole.body, r.body_len),
	      "a form sent one byte per write: 200, the same answer as sent whole (%d)", r.status);
	resp_free(&whole);
	resp_free(&r);
	if (fd >= 0)
		close(fd);
	free(b);
}

/* head then body (len bytes; none if body is NULL) on a new connection: a problem of status
 * naming body, what (with the status got) the check's text. */
static void body_refused(int port, const char *head, const char *body, size_t len, int status, const char *what)
{
	struct resp r = {0};
	int fd = tcp_connect(port, NULL);
	int ok = fd >= 0 && send_all(fd, head, strlen(head)) == 0 && (!body || send_all(fd, body, len) == 0) &&
		 read_response(fd, &r, 30000, 1 << 20) == 0;
	check(ok && is_problem(&r, status, "body"), "%s (%d)", what, r.status);
	resp_free(&r);
	if (fd >= 0)
		close(fd);
}

/* A new connection with a form's POST head of content_length sent: its fd, -1 if either failed. */
static int post_head(int port, size_t content_length)
{
	char head[512];
	int hl = snprintf(head, sizeof head, "POST /v1/rope/apply HTTP/1.1\r\nHost: 127.0.0.1\r\n" CT
			  "Content-Length: %zu\r\n\r\n", content_length);
	int fd = tcp_connect(port, NULL);
	if (fd >= 0 && send_all(fd, head, (size_t)hl) != 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

static void length_lies(int port)
{
	size_t len;
	char *b = good_form(&len);
	/* promised more than sent, then silence */
	int fd = post_head(port, len + 100000);
	int ok = fd >= 0 && send_all(fd, b, len) == 0;
	check(ok && peer_closed(fd, 20000), "Content-Length 100000 bytes past what is sent, then silence: cut");
	if (fd >= 0)
		close(fd);
	/* promised less: the form ends before its closing boundary */
	char head[512];
	snprintf(head, sizeof head, "POST /v1/rope/apply HTTP/1.1\r\nHost: 127.0.0.1\r\n" CT "Content-Length: %zu\r\n\r\n",
		 len - 40);
	body_refused(port, head, b, len, 400, "Content-Length 40 bytes short: 400 naming body");
	/* over max_body_bytes: refused from the header (Expect: 100-continue, nothing sent) */
	snprintf(head, sizeof head, "POST /v1/rope/apply HTTP/1.1\r\nHost: 127.0.0.1\r\n" CT
		 "Expect: 100-continue\r\nContent-Length: %ld\r\n\r\n", 5 * MIB);
	body_refused(port, head, NULL, 0, 413, "Content-Length over max_body_bytes: 413 naming body");
	/* chunked past max_body_bytes: 413 */
	size_t xlen = 5 * MIB, blen;
	char *big = calloc(1, xlen);
	struct form_part parts[] = {{"x", NULL, big, xlen}};
	char *bb = form_body(parts, 1, &blen);
	fd = tcp_connect(port, NULL);
	int hl = snprintf(head, sizeof head, "POST /v1/rope/apply HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" CT
		      "Transfer-Encoding: chunked\r\n\r\n");
	ok = fd >= 0 && send_all(fd, head, (size_t)hl) == 0;
	for (size_t off = 0; ok && off < blen; off += 65536) {
		size_t n = blen - off < 65536 ? blen - off : 65536;
		char sz[32];
		int sl = snprintf(sz, sizeof sz, "%zx\r\n", n);
		ok = send_all(fd, sz, (size_t)sl) == 0 && send_all(fd, bb + off, n) == 0 && send_all(fd, "\r\n", 2) == 0;
	}
	struct resp r = {0};
	ok = ok && send_all(fd, "0\r\n\r\n", 5) == 0 && read_response(fd, &r, 30000, 1 << 20) == 0;
	check(ok && is_problem(&r, 413, "body"), "a chunked form past max_body_bytes: 413 naming body (%d)", r.status);
	resp_free(&r);
	if (fd >= 0)
		close(fd);
	free(bb);
	free(big);
	free(b);
}

/* A few bytes a second: the slow-client rule (under 1 KiB/s after connection_timeout) cuts it. */
static void dripping(int port)
{
	size_t len;
	char *b = good_form(&len);
	int fd = post_head(port, len);
	int ok = fd >= 0, cut = 0;
	double end = now_s() + 30;
	for (size_t i = 0; ok && i < len && now_s() < end && !cut; i++) {
		if (send_all(fd, b + i, 1) != 0)
			cut = 1;
		else
			cut = peer_closed(fd, 250);
	}
	check(ok && cut, "a form dripping 4 bytes a second: cut by the slow-client rule");
	if (fd >= 0)
		close(fd);
	free(b);
}

/* A connection that sent the head and all of a form with a 3 MiB x part but its closing bytes. */
static int hold_form(int port, const char *body, size_t len)
{
	int fd = tcp_connect(port, NULL);
	char head[512];
	int hl = snprintf(head, sizeof head, "POST /v1/rope/apply?format=bin HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
			  CT "Content-Length: %zu\r\n\r\n", len);
	if (fd >= 0 && (send_all(fd, head, (size_t)hl) != 0 || send_all(fd, body, len - 8) != 0)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

static double metric_settles(int port, const char *name, double want)
{
	double v = -1, end = now_s() + 10;
	while (now_s() < end && (v = metric(port, name)) != want)
		sleep_s(0.05);
	return v;
}

static void held_parts(struct pe_spawn *d, long idle)
{
	size_t seq = (HOLD_BYTES - 128) / 32, xlen, plen, len;
	size_t ps[] = {seq};
	int64_t *pos = calloc(seq, sizeof *pos);
	char *x = npy_x(seq, &xlen), *p = npy_ints(pos, ps, 1, 0, &plen);
	struct form_part parts[] = {{"positions", NULL, p, plen}, {"x", NULL, x, xlen}};
	char *body = form_body(parts, 2, &len);
	int fds[HOLDERS];
	for (int i = 0; i < HOLDERS; i++)
		fds[i] = hold_form(d->port, body, len);
	for (int i = 0; i < HOLDERS; i++)
		check(fds[i] >= 0, "client %d sent its 3 MiB form but the end", i);
	double used = metric(d->port, "posenc_response_budget_bytes");
	check(used >= 0 && used <= BUDGET_MIB * MIB, "the parts hold %.0f bytes of the %d MiB budget", used, BUDGET_MIB);
	struct resp r;
	int rc = http_get(d->port, "/healthz", 5000, &r);
	check(rc == 0 && r.status == 200, "GET /healthz served meanwhile (%d)", r.status);
	resp_free(&r);
	long peak = hwm_kib(d->pid), bound = idle + (BUDGET_MIB + CONSTANT_MIB) * MIB / 1024;
	if (daemon_instrumented(d))
		note("sanitizer build: peak RSS %ld KiB not checked", peak);
	else
		check(peak <= bound, "%d forms of 3 MiB held: peak RSS %ld KiB <= idle %ld + %d MiB + %d MiB", HOLDERS, peak, idle,
		      BUDGET_MIB, CONSTANT_MIB);
	int ok = 0, refused = 0, other = 0;
	for (int i = 0; i < HOLDERS; i++)
		if (fds[i] >= 0 && send_all(fds[i], body + len - 8, 8) != 0)
			note("client %d: the end could not be sent", i);
	for (int i = 0; i < HOLDERS; i++) {
		char ra[32];
		if (fds[i] >= 0 && read_response(fds[i], &r, 30000, HOLD_BYTES + 4096) == 0) {
			if (r.status == 200)
				ok++;
			else if (is_problem(&r, 503, NULL) && resp_header(&r, "Retry-After", ra, sizeof ra))
				refused++;
			else
				other++;
			note("client %d: %d", i, r.status);
		} else
			other++;
		resp_free(&r);
		if (fds[i] >= 0)
			close(fds[i]);
	}
	check(refused >= 1, "forms past the budget refused: %d x 503 with Retry-After", refused);
	check(ok >= 1, "forms within the budget served: %d x 200", ok);
	check(other == 0, "no other answers (%d)", other);
	used = metric_settles(d->port, "posenc_response_budget_bytes", 0);
	check(used == 0, "the budget is back at zero once the clients are gone (%.0f)", used);
	free(body);
	free(x);
	free(p);
	free(pos);
}

/* A form with Content-Length holds about what it has sent: a part's buffer doubles only up to the
 * rest of the declared body (a 2.5 MiB x part in a buffer of 4 MiB would cost 1.6 times its bytes). */
static void held_as_sent(int port)
{
	size_t seq = (5 * MIB / 2 - 128) / 32, xlen, len;
	/* The answer before (1 MiB, counted on the budget until libmicrohttpd lets go of it, which a
	 * loaded machine delays past its client's read) must be gone first: once, 1114070 bytes of it
	 * were counted as this form's. */
	check(metric_settles(port, "posenc_response_budget_bytes", 0) == 0, "nothing held before the form");
	char *x = npy_x(seq, &xlen);
	struct form_part parts[] = {{"x", NULL, x, xlen}};
	char *body = form_body(parts, 1, &len);
	int fd = hold_form(port, body, len);
	double used = -1, end = now_s() + 10;
	while (now_s() < end && (used = metric(port, "posenc_response_budget_bytes")) < (double)len - 8)
		sleep_s(0.05);
	check(fd >= 0 && used >= (double)len - 8 && used <= (double)len + 128 * 1024,
	      "a form of %zu bytes, all but 8 sent, holds %.0f bytes of the budget (its bytes and the reader's)", len, used);
	if (fd >= 0)
		close(fd);
	check(metric_settles(port, "posenc_response_budget_bytes", 0) == 0, "and gives them back when it leaves");
	free(body);
	free(x);
}

/* A plain body of `len` bytes, all sent but its last 8: it holds about len on the budget. */
static int hold_plain(int port, size_t len)
{
	int fd = tcp_connect(port, NULL);
	char head[512];
	int hl = snprintf(head, sizeof head, "POST /v1/rope/apply HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
			  "Content-Type: application/x-npy\r\nContent-Length: %zu\r\n\r\n", len);
	char *zeros = calloc(1, len);
	if (fd >= 0 && (send_all(fd, head, (size_t)hl) != 0 || send_all(fd, zeros, len - 8) != 0)) {
		close(fd);
		fd = -1;
	}
	free(zeros);
	return fd;
}

/* The positions' own memory (distinct positions, their cos/sin rows: here 4 MiB for a 1 MiB x)
 * is reserved on the budget while the job runs: with 7.5 MiB of the 12 held by other bodies, the
 * parts fit but their scratch does not, a 503 with Retry-After; served once the others leave. */
static void scratch_on_budget(int port)
{
	enum { N = 4096, DIM = 64, HOLD = 3 };
	size_t xs[] = {N, 1, DIM}, ps[] = {N}, xlen, plen, len;
	int64_t *pos = malloc(N * sizeof *pos), *half = malloc(N * DIM * sizeof *half);
	for (size_t i = 0; i < N; i++)
		pos[i] = (int64_t)i * 1000;
	for (size_t i = 0; i < N * DIM; i++)
		half[i] = 0x3f000000; /* 0.5f */
	char *x = npy_ints(half, xs, 3, 0, &xlen), *p = npy_ints(pos, ps, 1, 0, &plen);
	memcpy(x + 10 + strlen("{'descr': '<"), "f", 1); /* the same bytes read as float32 */
	struct form_part parts[] = {{"x", NULL, x, xlen}, {"positions", NULL, p, plen}};
	char *body = form_body(parts, 2, &len);
	int fds[HOLD];
	for (int i = 0; i < HOLD; i++)
		fds[i] = hold_plain(port, 5 * MIB / 2);
	double used = -1, end = now_s() + 10;
	while (now_s() < end && (used = metric(port, "posenc_response_budget_bytes")) < 7 * MIB)
		sleep_s(0.05);
	check(used >= 7 * MIB && used <= 8 * MIB, "three bodies of 2.5 MiB hold %.0f bytes of the budget", used);
	struct resp r;
	char ra[32];
	int rc = http_request(port, NULL, "POST", "/v1/rope/apply?format=bin&seq_axis=-3", CT, body, len, 30000, &r);
	check(rc == 0 && is_problem(&r, 503, NULL) && resp_header(&r, "Retry-After", ra, sizeof ra),
	      "a form whose positions' scratch is past what the budget has left: 503 with Retry-After (%d %.160s)",
	      r.status, r.body ? r.body : "");
	resp_free(&r);
	for (int i = 0; i < HOLD; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	check(metric_settles(port, "posenc_response_budget_bytes", 0) == 0, "the holders' bodies are given back");
	rc = http_request(port, NULL, "POST", "/v1/rope/apply?format=bin&seq_axis=-3", CT, body, len, 30000, &r);
	check(rc == 0 && r.status == 200 && r.body_len == (size_t)N * DIM * 4, "the same form once they left: 200 (%d)",
	      r.status);
	resp_free(&r);
	free(body);
	free(x);
	free(p);
	free(pos);
	free(half);
}

static int scenario(void)
{
	fault_init("multipart_hostile", 240);
	struct pe_spawn d;
	const char *args[] = {"--cache-bytes", "0", "--response-budget-bytes", "12Mi", "--max-body-bytes", "4Mi",
			      "--connection-timeout", "3", "--workers", "2", NULL};
	daemon_start(&d, args);
	good_served(d.port, "at first");
	long idle = rss_kib(d.pid);
	part_headers(d.port);
	many_and_twice(d.port);
	unclosed(d.port);
	byte_by_byte(d.port);
	length_lies(d.port);
	dripping(d.port);
	for (int round = 0; round < 3; round++)
		held_parts(&d, idle);
	scratch_on_budget(d.port);
	held_as_sent(d.port);
	double used = metric_settles(d.port, "posenc_response_budget_bytes", 0);
	check(used == 0, "the budget is back at zero at the end (%.0f)", used);
	good_served(d.port, "after all of it");
	check(daemon_alive(&d), "daemon alive");
	int st = daemon_stop(&d, SIGTERM, 30);
	check(st == 0, "exit status %d after SIGTERM", st);
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
