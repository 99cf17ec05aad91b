/* Request bodies on the response budget (hostile battery: 6 connections holding 150 MiB bodies each
 * held 903 MB with --response-budget-bytes 1Mi).
 *
 * With --cache-bytes 0 --response-budget-bytes 24Mi, BODIES clients each send all but the end (the
 * last byte; with chunked, the last-chunk) of an 8 MiB body (a float32 [2048, 1024] to /v1/sinusoidal/apply) and hold it there. The
 * daemon must keep no more of them in memory than the budget admits: peak RSS (VmHWM) stays within
 * its idle RSS + the budget + a constant (without the fix every body was held: 64 MiB, peak 72 MB); small
 * requests are still served meanwhile; once the last bytes arrive, the bodies the budget refused
 * are answered 503 problem+json naming "body" with Retry-After (some are: the budget cannot hold
 * them all) and the others are served; a body larger than the whole budget is a 413 at once; and
 * once every client is gone the budget is back at zero, and a large body is served again. */
#include "support/pe_fault.h"

#define BODIES 8
#define ROWS 2048
#define COLS 1024
#define BODY_BYTES ((size_t)ROWS * COLS * 4)
#define MIB (1024L * 1024L)
#define BUDGET_MIB 24
#define CONSTANT_MIB 24 /* libmicrohttpd's pools, stacks, the allocator, realloc's moment of two blocks: as test_membudget */
#define PATH "/v1/sinusoidal/apply?shape=2048,1024"

#define CHUNK 65536

/* Send the body in 64 KiB chunks, all but the last-chunk that ends it. */
static int send_chunks(int fd, const char *body)
{
	char size[16];
	int n = snprintf(size, sizeof size, "%x\r\n", CHUNK);
	for (size_t off = 0; off < BODY_BYTES; off += CHUNK)
		if (send_all(fd, size, (size_t)n) != 0 || send_all(fd, body + off, CHUNK) != 0 || send_all(fd, "\r\n", 2) != 0)
			return -1;
	return 0;
}

/* A connection that has sent the head and all of its body but the last byte (Content-Length) or
 * the last-chunk (chunked). */
static int hold_body(int port, const char *body, int chunked)
{
	int fd = tcp_connect(port, "127.0.0.1");
	char head[256];
	char framing[64];
	if (chunked)
		snprintf(framing, sizeof framing, "Transfer-Encoding: chunked");
	else
		snprintf(framing, sizeof framing, "Content-Length: %zu", BODY_BYTES);
	int n = snprintf(head, sizeof head, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
			 "Content-Type: application/octet-stream\r\n%s\r\n\r\n", PATH, framing);
	if (fd >= 0 && (send_all(fd, head, (size_t)n) != 0 ||
			(chunked ? send_chunks(fd, body) : send_all(fd, body, BODY_BYTES - 1)) != 0)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* /healthz answers, and a small POST is answered at once: 200, or (budget_full: the held bodies
 * may have taken all of it, as they may) 503 naming body with Retry-After. */
static int small_answered(int port, int budget_full)
{
	struct resp r;
	char ra[32];
	static const char two[] = "[[1.0, 2.0]]";
	int ok = http_get(port, "/healthz", 5000, &r) == 0 && r.status == 200;
	if (!ok)
		note("GET /healthz: %d", r.status);
	resp_free(&r);
	if (ok && (http_request(port, NULL, "POST", "/v1/sinusoidal/apply", "Content-Type: application/json\r\n", two,
				sizeof two - 1, 5000, &r) != 0 ||
		   !(r.status == 200 || (budget_full && is_problem(&r, 503, "body") &&
					 resp_header(&r, "Retry-After", ra, sizeof ra))))) {
		note("a small POST: %d %.200s (budget used %.0f)", r.status, r.body ? r.body : "", metric(port, "posenc_response_budget_bytes"));
		ok = 0;
	}
	resp_free(&r);
	return ok;
}

/* Wait until a metric reaches want (the budget is given back when MHD completes a request). */
static double metric_settles(int port, const char *name, double want)
{
	double v = -1, end = now_s() + 10;
	while (now_s() < end && (v = metric(port, name)) != want)
		sleep_s(0.05);
	return v;
}

/* A body declared large and sent slowly holds only what it has sent (second hostile round: one
 * client trickling a declared 256 MiB body held the whole reservation for hours): 1 MiB of a
 * declared 16 MiB body holds at most 1 MiB plus the buffer's 64 KiB step, and a small POST is
 * served meanwhile. */
static void trickled_body(struct pe_spawn *d)
{
	int fd = tcp_connect(d->port, "127.0.0.1");
	char head[256], *part = calloc(1, MIB);
	int n = snprintf(head, sizeof head, "POST /v1/sinusoidal/apply?shape=4096,1024 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
			 "Content-Type: application/octet-stream\r\nContent-Length: %ld\r\n\r\n", 16 * MIB);
	check(fd >= 0 && part && send_all(fd, head, (size_t)n) == 0 && send_all(fd, part, MIB) == 0,
	      "1 MiB of a declared 16 MiB body sent");
	double used = -1, end = now_s() + 5;
	while (now_s() < end && (used = metric(d->port, "posenc_response_budget_bytes")) < MIB)
		sleep_s(0.02);
	check(used >= MIB && used <= MIB + 128 * 1024, "it holds what it sent: %.0f bytes of the budget", used);
	check(small_answered(d->port, 0), "a small POST is served meanwhile");
	if (fd >= 0)
		close(fd);
	free(part);
	used = metric_settles(d->port, "posenc_response_budget_bytes", 0);
	check(used == 0, "given back when the client leaves (%.0f)", used);
}

/* BODIES clients hold their bodies; then they end them and read the answers. */
static void held_bodies(struct pe_spawn *d, const char *body, int chunked, long idle, int instrumented)
{
	const char *how = chunked ? "chunked" : "Content-Length";
	int fds[BODIES];
	for (int i = 0; i < BODIES; i++)
		fds[i] = hold_body(d->port, body, chunked);
	for (int i = 0; i < BODIES; i++)
		check(fds[i] >= 0, "%s client %d sent its 8 MiB body but the end", how, i);
	check(small_answered(d->port, 1), "small requests answered at once while %d %s bodies are held", BODIES, how);
	long peak = hwm_kib(d->pid), bound = idle + (BUDGET_MIB + CONSTANT_MIB) * MIB / 1024;
	if (instrumented)
		note("sanitizer build: peak RSS %ld KiB not checked", peak);
	else
		check(peak <= bound, "%d %s bodies of 8 MiB held: peak RSS %ld KiB <= idle %ld + budget %d MiB + %d MiB = %ld KiB",
		      BODIES, how, peak, idle, BUDGET_MIB, CONSTANT_MIB, bound);

	int ok200 = 0, refused = 0, other = 0;
	for (int i = 0; i < BODIES; i++)
		if (fds[i] >= 0 && (chunked ? send_all(fds[i], "0\r\n\r\n", 5) : send_all(fds[i], body + BODY_BYTES - 1, 1)) != 0)
			note("%s client %d: the end could not be sent", how, i);
	for (int i = 0; i < BODIES; i++) {
		struct resp r;
		char ra[32];
		if (fds[i] >= 0 && read_response(fds[i], &r, 30000, BODY_BYTES + 1024) == 0) {
			if (r.status == 200 && r.body_len == BODY_BYTES)
				ok200++;
			else if (is_problem(&r, 503, "body") && resp_header(&r, "Retry-After", ra, sizeof ra))
				refused++;
			else if (!is_problem(&r, 503, NULL)) /* a job refused by the budget: also fine */
				other++;
			note("%s client %d: %d", how, i, r.status);
		} else
			other++;
		resp_free(&r);
		if (fds[i] >= 0)
			close(fds[i]);
	}
	check(refused >= 1, "%s bodies past the budget refused: %d x 503 problem+json naming body, with Retry-After", how,
	      refused);
	check(ok200 >= 1, "%s bodies within the budget served: %d x 200", how, ok200);
	check(other == 0, "no other answers (%d)", other);
	double used = metric_settles(d->port, "posenc_response_budget_bytes", 0);
	check(used == 0, "the budget is back at zero once the %s clients are gone (%.0f)", how, used);
}

static int scenario(void)
{
	fault_init("bodybudget", 120);
	struct pe_spawn d;
	const char *args[] = {"--cache-bytes", "0", "--response-budget-bytes", "24Mi", "--workers", "2", NULL};
	daemon_start(&d, args);
	int instrumented = daemon_instrumented(&d);
	check(small_answered(d.port, 0), "small requests before the bodies");
	long idle = rss_kib(d.pid);
	char *body = calloc(1, BODY_BYTES);
	if (!body)
		return 2;

	trickled_body(&d);
	held_bodies(&d, body, 0, idle, instrumented);
	held_bodies(&d, body, 1, idle, instrumented);

	struct resp big;
	size_t huge = (size_t)(BUDGET_MIB + 1) * MIB;
	char *hb = calloc(1, huge);
	int got = hb ? http_request(d.port, NULL, "POST", "/v1/sinusoidal/apply?shape=6400,1024",
				    "Content-Type: application/octet-stream\r\n", hb, huge, 30000, &big) : -1;
	check(got == 0 && is_problem(&big, 413, "body"), "a body larger than the whole budget: 413 naming body (%d)", big.status);
	resp_free(&big);
	free(hb);

	double used = metric_settles(d.port, "posenc_response_budget_bytes", 0);
	check(used == 0, "the budget is back at zero once the clients are gone (%.0f)", used);
	struct resp one;
	got = http_request(d.port, NULL, "POST", PATH, "Content-Type: application/octet-stream\r\n", body, BODY_BYTES, 30000,
			   &one);
	check(got == 0 && one.status == 200, "an 8 MiB body served again afterwards (%d)", one.status);
	resp_free(&one);
	free(body);
	check(daemon_alive(&d), "daemon alive");
	int st = daemon_stop(&d, SIGTERM, 30);
	check(st == 0, "exit status %d after SIGTERM", st);
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
