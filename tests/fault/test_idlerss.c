/* Idle memory tracks the cache gauge (issue 21, B4): after several large relative/t5 JSON tables
 * are cached and every client is gone, the daemon's resident set over its idle start must be
 * within a constant of posenc_cache_bytes. Each JSON document is built in a buffer reserved from
 * its worst-case width (about four times its final length) and faulted in; the cache used to keep
 * that whole buffer while counting only the text (one 47.9 MB entry held 192 MB). The warm
 * reserve (warm_bytes, memory written ahead for the next large answers) is counted beside the
 * gauge while it holds blocks, and once given back (warm_idle) the bound is the gauge alone. */
#include "support/pe_fault.h"

#define TABLES 8
#define MIB (1024L * 1024L)
#define CONSTANT_MIB 16 /* the allocator's and libmicrohttpd's leftovers, kept scratch tables, stacks */

/* Wait until the response budget is back to 0 (every answer sent and freed); its last value. */
static double budget_settles(int port, double within_s)
{
	double end = now_s() + within_s, v = -1;
	while (now_s() < end && (v = metric(port, "posenc_response_budget_bytes")) != 0)
		sleep_s(0.05);
	return v;
}

static int scenario(void)
{
	fault_init("idlerss", 120);
	struct pe_spawn d;
	const char *args[] = {"--cache-bytes", "32Mi", "--workers", "2", "--warm-idle", "2", NULL};
	daemon_start(&d, args);
	struct resp r;
	check(http_get(d.port, "/v1/relative/t5?q_len=8&num_buckets=32&max_distance=128", 5000, &r) == 0 &&
		      r.status == 200,
	      "a small relative/t5 table");
	resp_free(&r);
	long idle = rss_kib(d.pid);

	size_t total = 0;
	int ok = 0;
	for (int i = 0; i < TABLES; i++) {
		char path[160];
		snprintf(path, sizeof path, "/v1/relative/t5?q_len=%d&k_len=1024&num_buckets=32&max_distance=128&format=json",
			 1024 + i);
		if (http_get(d.port, path, 60000, &r) == 0 && r.status == 200 && r.body_len > (1u << 20)) {
			ok++;
			total += r.body_len;
		}
		resp_free(&r);
	}
	check(ok == TABLES, "%d large relative/t5 JSON tables answered (%d), %zu bytes in all", TABLES, ok, total);
	budget_settles(d.port, 10);
	sleep_s(0.2); /* connection teardown */
	double gauge = metric(d.port, "posenc_cache_bytes"), entries = metric(d.port, "posenc_cache_entries");
	long rss = rss_kib(d.pid);
	double warm = metric(d.port, "posenc_warm_bytes");
	note("idle RSS %ld KiB before, %ld KiB after; posenc_cache_bytes %.0f (%.0f entries), posenc_warm_bytes %.0f", idle,
	     rss, gauge, entries, warm);
	check(warm >= 0 && warm <= 16.0 * MIB, "the warm reserve holds at most warm_bytes (%.0f)", warm);
	check(entries == TABLES + 1 && gauge >= (double)total, "every table is cached and counted (%.0f >= %zu)", gauge,
	      total);
	check(gauge <= (double)total + (TABLES + 1) * 8192.0,
	      "the gauge counts what the entries hold, not more (%.0f for %zu bytes of text)", gauge, total);
	if (daemon_instrumented(&d))
		note("instrumented daemon: RSS not checked");
	else {
		check((rss - idle) * 1024.0 <= gauge + warm + CONSTANT_MIB * MIB,
		      "resident growth %ld KiB is within %d MiB of the cache gauge and the warm reserve (%.0f KiB)",
		      rss - idle, CONSTANT_MIB, (gauge + warm) / 1024);
		check(wait_metric_eq(d.port, "posenc_warm_bytes", 0), "the warm reserve is given back once idle");
		rss = rss_kib(d.pid);
		note("idle RSS %ld KiB once the warm reserve is given back", rss);
		check((rss - idle) * 1024.0 <= gauge + CONSTANT_MIB * MIB,
		      "then resident growth %ld KiB is within %d MiB of the cache gauge (%.0f KiB)", rss - idle,
		      CONSTANT_MIB, gauge / 1024);
	}
	int st = daemon_stop(&d, SIGTERM, 30);
	check(st == 0, "exit status %d after SIGTERM (0 expected)", st);
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
