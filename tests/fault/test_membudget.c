/* Memory under slow readers (issue 21, B3): many clients ask for distinct large tables and then
 * read nothing, so every answer stays in the daemon while it is "being sent". With
 * --cache-bytes 32Mi --response-budget-bytes 64Mi the daemon must: answer each request with the
 * table or a 503 problem+json with Retry-After (some of each: the budget fills and still work gets
 * done); keep its peak RSS (VmHWM) within cache + budget + the warm reserve (warm_bytes, 16 MiB by
 * default) + a constant over its idle RSS; keep
 * serving small requests while the readers hang; and count the budget back to zero once they
 * leave. Without the budget every reader held its own 8 MiB table (40 of them: 320 MiB). Then the
 * same with 8 readers of large JSON documents.
 *
 * The readers shrink their receive buffers before connecting, so the kernel holds a few KiB of
 * each answer, not megabytes: what is not sent stays in the daemon's memory, where it is counted. */
#include "support/pe_fault.h"

#define READERS 40
#define JSON_READERS 8
#define LEN 2048
#define DIM 1024 /* 8 MiB per f32 table */
#define MIB (1024L * 1024L)
#define CONSTANT_MIB 24 /* libmicrohttpd's pools, the two kept scratch tables, stacks, the allocator */
#define WARM_MIB 16     /* warm_bytes' default: memory written ahead for the next large answers */

struct reader {
	int fd, status, retry_after, problem;
};

/* Read only as far as the end of the headers (a 503's small body comes along); the rest of a
 * 200 stays unread. */
static void reader_head(struct reader *r, int timeout_ms)
{
	char buf[4096];
	size_t n = 0;
	double end = now_s() + timeout_ms / 1000.0;
	while (n + 1 < sizeof buf) {
		struct pollfd p = {.fd = r->fd, .events = POLLIN};
		int left = (int)((end - now_s()) * 1000);
		if (left <= 0 || poll(&p, 1, left) <= 0)
			break;
		ssize_t got = recv(r->fd, buf + n, sizeof buf - 1 - n, 0);
		if (got <= 0)
			break;
		n += (size_t)got;
		buf[n] = 0;
		if (strstr(buf, "\r\n\r\n"))
			break;
	}
	buf[n] = 0;
	r->status = strncmp(buf, "HTTP/1.1 ", 9) == 0 ? atoi(buf + 9) : 0;
	const char *ra = strcasestr(buf, "\r\nRetry-After:");
	r->retry_after = ra ? atoi(ra + 14) : 0;
	r->problem = strcasestr(buf, "\r\nContent-Type: application/problem+json") != NULL;
}

static int small_request_ok(int port)
{
	struct resp r;
	int ok = http_get(port, "/v1/sinusoidal?len=4&dim=4&offset=999", 5000, &r) == 0 && r.status == 200;
	resp_free(&r);
	return ok;
}

/* While the readers hang, a small table is served: if it was evicted and a reader's job still holds
 * the rest of the budget at that instant, its miss is a 503 to retry; once those jobs finish (the
 * readers keep their answers), a retry must get the table. Statuses seen go to the log. */
static int small_request_served_while_hanging(int port)
{
	for (int i = 0; i < 20; i++) {
		struct resp r;
		int got = http_get(port, "/v1/sinusoidal?len=4&dim=4&offset=999", 5000, &r);
		int status = got == 0 ? r.status : -1;
		resp_free(&r);
		if (status == 200)
			return 1;
		note("small request while the readers hang: try %d got %d", i + 1, status);
		if (status != 503 && status != -1)
			return 0;
		sleep_s(0.25);
	}
	return 0;
}

/* Wait until a gauge reaches want (or give up after within_s): its last value. */
static double metric_settles(int port, const char *name, double want, double within_s)
{
	double end = now_s() + within_s, v = -1;
	while (now_s() < end && (v = metric(port, name)) != want)
		sleep_s(0.05);
	return v;
}

/* A hit answered with a table's shared response (the same headers for everyone: no X-Request-Id)
 * and read slowly: the table evicted meanwhile stays counted, by the budget, until the reader is
 * gone. Before, the shared response's readers held no reference to the cache entry, so an evicted
 * table being sent was in neither gauge (an attacker's RSS grew by a table per eviction while
 * both read as before). */
static void shared_reader_counted(int port)
{
	const char *t = "/v1/sinusoidal?len=8192&dim=512&format=bin&offset=7001"; /* 16 MiB */
	struct resp r;
	char h[16] = "";
	for (int i = 0; i < 2; i++) { /* the miss, then the first hit (which builds the shared response) */
		int rc = http_get(port, t, 30000, &r);
		resp_header(&r, "X-PE-Cache", h, sizeof h);
		check(rc == 0 && r.status == 200 && !strcmp(h, i ? "hit" : "miss"), "the 16 MiB table, request %d: 200 %s (%d %s)",
		      i + 1, i ? "hit" : "miss", r.status, h);
		resp_free(&r);
	}
	int fd = slow_reader_open(port, t);
	check(fd >= 0, "a slow reader of its shared (hit) response");
	sleep_s(0.3);
	double before = metric(port, "posenc_response_budget_bytes");
	check(before == 0, "while it is cached, the reader's bytes are the cache's (budget %.0f)", before);
	int rc = http_get(port, "/v1/sinusoidal?len=8192&dim=512&format=bin&offset=7002", 30000, &r);
	check(rc == 0 && r.status == 200, "another 16 MiB table, which evicts the first from the 32 MiB cache (%d)", r.status);
	resp_free(&r);
	double budget = metric(port, "posenc_response_budget_bytes");
	check(budget >= 16.0 * MIB, "the evicted table still being sent is counted by the budget (%.1f MiB)", budget / MIB);
	if (fd >= 0)
		tcp_abort(fd);
	double left = metric_settles(port, "posenc_response_budget_bytes", 0, 15);
	check(left == 0, "and given back when its reader is gone (%.0f)", left);
}

static int scenario(void)
{
	fault_init("membudget", 120);
	struct pe_spawn d;
	const char *args[] = {"--cache-bytes", "32Mi", "--response-budget-bytes", "64Mi", "--workers", "2",
			      "--max-queue", "100", "--job-timeout", "60", "--connection-timeout", "120", NULL};
	daemon_start(&d, args);
	int instrumented = daemon_instrumented(&d);
	check(small_request_ok(d.port), "a small table before the readers");
	long idle = rss_kib(d.pid);
	struct resp big;
	int got = http_get(d.port, "/v1/sinusoidal?len=16384&dim=2048&format=bin", 10000, &big);
	check(got == 0 && is_problem(&big, 413, NULL),
	      "a table whose build alone needs more than the whole budget: 413, not a 503 to retry (%d)", big.status);
	resp_free(&big);

	static struct reader rd[READERS];
	for (int i = 0; i < READERS; i++) {
		char path[128];
		snprintf(path, sizeof path, "/v1/sinusoidal?len=%d&dim=%d&offset=%d&format=bin", LEN, DIM, i);
		rd[i] = (struct reader){.fd = slow_reader_open(d.port, path)};
	}
	int ok200 = 0, ok503 = 0, other = 0;
	for (int i = 0; i < READERS; i++) {
		reader_head(&rd[i], 60000);
		if (rd[i].status == 200)
			ok200++;
		else if (rd[i].status == 503 && rd[i].retry_after >= 1 && rd[i].problem)
			ok503++;
		else {
			other++;
			note("reader %d: fd %d, status %d", i, rd[i].fd, rd[i].status);
		}
	}
	check(other == 0, "%d slow readers of distinct 8 MiB tables: %d x 200, %d x 503 + Retry-After, %d other",
	      READERS, ok200, ok503, other);
	check(ok200 >= 4, "the budget lets work through (%d tables sent)", ok200);
	check(ok503 >= 1, "a full budget is answered 503 + Retry-After (%d)", ok503);
	check(small_request_served_while_hanging(d.port), "small requests still served while the readers hang");

	double cache = metric(d.port, "posenc_cache_bytes"), budget = metric(d.port, "posenc_response_budget_bytes");
	note("idle RSS %ld KiB; now VmRSS %ld KiB, VmHWM %ld KiB; cache %.0f B, budget %.0f B", idle, rss_kib(d.pid),
	     hwm_kib(d.pid), cache, budget);
	check(cache + budget <= 96.0 * MIB + 64 * 1024,
	      "what is alive is counted within cache_bytes + response_budget_bytes (%.1f MiB)", (cache + budget) / MIB);
	check(budget >= 8.0 * MIB, "the unread answers are counted by the budget (%.1f MiB)", budget / MIB);
	long peak = hwm_kib(d.pid), bound = idle + (32 + 64 + WARM_MIB + CONSTANT_MIB) * 1024L;
	if (instrumented)
		note("instrumented daemon: peak %ld KiB not checked against %ld KiB", peak, bound);
	else
		check(peak <= bound, "peak RSS %ld KiB <= idle %ld + cache 32 MiB + budget 64 MiB + warm %d MiB + %d MiB = %ld KiB",
		      peak, idle, WARM_MIB, CONSTANT_MIB, bound);

	for (int i = 0; i < READERS; i++)
		if (rd[i].fd >= 0)
			tcp_abort(rd[i].fd);
	double left = metric_settles(d.port, "posenc_response_budget_bytes", 0, 15);
	check(left == 0, "the budget is back to 0 once the readers are gone (%.0f)", left);
	check(metric(d.port, "posenc_response_budget_refused_total") >= ok503, "refusals are counted in /metrics");

	/* JSON: the text is built from a worst-case estimate (several times the final size) over a
	 * scratch table; 8 slow readers of distinct 2 Mi-element documents. */
	ok200 = ok503 = other = 0;
	for (int i = 0; i < JSON_READERS; i++) {
		char path[128];
		snprintf(path, sizeof path, "/v1/sinusoidal?len=2048&dim=1024&offset=%d&format=json", 100 + i);
		rd[i] = (struct reader){.fd = slow_reader_open(d.port, path)};
	}
	for (int i = 0; i < JSON_READERS; i++) {
		reader_head(&rd[i], 60000);
		ok200 += rd[i].status == 200;
		ok503 += rd[i].status == 503 && rd[i].retry_after >= 1 && rd[i].problem;
	}
	other = JSON_READERS - ok200 - ok503;
	check(other == 0 && ok200 >= 1, "%d slow readers of 2 Mi-element JSON tables: %d x 200, %d x 503, %d other",
	      JSON_READERS, ok200, ok503, other);
	peak = hwm_kib(d.pid);
	if (!instrumented)
		check(peak <= bound, "peak RSS %ld KiB <= %ld KiB with the JSON readers too", peak, bound);
	for (int i = 0; i < JSON_READERS; i++)
		if (rd[i].fd >= 0)
			tcp_abort(rd[i].fd);
	left = metric_settles(d.port, "posenc_response_budget_bytes", 0, 15);
	check(left == 0, "the budget is back to 0 again (%.0f)", left);
	check(small_request_ok(d.port), "a small table after the readers");
	shared_reader_counted(d.port);
	int st = daemon_stop(&d, SIGTERM, 30);
	check(st == 0, "exit status %d after SIGTERM (0 expected)", st);
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
