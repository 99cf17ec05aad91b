/* Evicted small tables give their memory back. Small cached tables live on the allocator's heap
 * (one arena, grown by brk: main.c), large ones in their own mappings. With --cache-bytes 32Mi,
 * 12000 distinct cold 16x16 JSON tables fill the cache, then large bin tables evict them: glibc
 * returns only the top of its heap, so the small tables' freed pages stayed resident for good
 * (idle RSS 65 MiB over a 24 MiB cache gauge, before and after the one-arena change alike). The
 * pool's ticker now hands free heap pages back (pool.c trim_heap, every few seconds once 16 MiB
 * are free): within CONSTANT_MIB of the gauge over the idle start, as test_idlerss asserts. Waits
 * for a condition, never for a time. */
#include "support/pe_fault.h"

#define SMALL 12000
#define LARGE 6 /* 8 MiB each: the 32 MiB cache keeps three, every small table evicted */
#define MIB (1024L * 1024L)
#define CONSTANT_MIB 16 /* as test_idlerss: the allocator's and libmicrohttpd's leftovers, stacks */
#define SETTLE_S 30.0   /* several of the ticker's trim periods, on a loaded machine */

/* SMALL distinct small tables on one keep-alive connection; how many were answered 200. */
static int small_tables(int port)
{
	int fd = tcp_connect(port, NULL), ok = 0;
	for (int i = 0; fd >= 0 && i < SMALL; i++) {
		char req[160];
		int n = snprintf(req, sizeof req, "GET /v1/sinusoidal?len=16&dim=16&offset=%d HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
				 i);
		struct resp r;
		if (send_all(fd, req, (size_t)n) != 0 || read_response(fd, &r, 10000, 1 << 20) != 0)
			break;
		ok += r.status == 200;
		resp_free(&r);
	}
	if (fd >= 0)
		close(fd);
	return ok;
}

/* Resident growth over idle (KiB) less the cache gauge, once within the bound or SETTLE_S passed. */
static long excess_kib(int port, pid_t pid, long idle)
{
	double end = now_s() + SETTLE_S;
	long excess;
	for (;;) {
		excess = rss_kib(pid) - idle - (long)(metric(port, "posenc_cache_bytes") / 1024);
		if (excess <= CONSTANT_MIB * 1024 || now_s() > end)
			return excess;
		sleep_s(0.2);
	}
}

static int scenario(void)
{
	fault_init("memtrim", 240);
	struct pe_spawn d;
	const char *args[] = {"--cache-bytes", "32Mi", NULL};
	daemon_start(&d, args);
	struct resp r;
	check(http_get(d.port, "/v1/sinusoidal?len=4&dim=4", 5000, &r) == 0 && r.status == 200, "a first table");
	resp_free(&r);
	long idle = rss_kib(d.pid);
	int ok = small_tables(d.port);
	check(ok == SMALL, "%d distinct small tables answered (%d)", SMALL, ok);
	long full = rss_kib(d.pid);
	ok = 0;
	for (int i = 0; i < LARGE; i++) {
		char path[96];
		snprintf(path, sizeof path, "/v1/sinusoidal?len=2048&dim=1024&format=bin&offset=%d", i);
		ok += http_get(d.port, path, 60000, &r) == 0 && r.status == 200 && r.body_len == (size_t)8 * MIB;
		resp_free(&r);
	}
	check(ok == LARGE, "%d large tables answered (%d)", LARGE, ok);
	double entries = metric(d.port, "posenc_cache_entries");
	check(entries <= LARGE, "the small tables were evicted (%.0f entries left)", entries);
	long excess = excess_kib(d.port, d.pid, idle);
	note("idle RSS %ld KiB, %ld with the small tables cached; resident growth less the cache gauge: %ld KiB",
	     idle, full, excess);
	if (daemon_instrumented(&d))
		note("instrumented daemon: RSS not checked");
	else
		check(excess <= CONSTANT_MIB * 1024, "the evicted small tables' memory went back: %ld KiB over the gauge "
		      "(at most %d MiB)", excess, CONSTANT_MIB);
	int st = daemon_stop(&d, SIGTERM, 30);
	check(st == 0, "exit status %d after SIGTERM (0 expected)", st);
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
