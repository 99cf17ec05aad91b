/* The warm reserve in the daemon (posenc/warm.h, warm_bytes, warm_idle): a cold answer of 2 MiB
 * or more maps a block of its size for the filler, which writes it while the CPU is idle, and
 * the next such answer is written there (posenc_warm_hits_total), byte for byte the answer of a
 * daemon without a reserve; what it holds stays within warm_bytes, is counted on the response
 * budget while in use like any block, and is given back after warm_idle seconds without such an
 * answer; a table larger than warm_bytes never asks; a transform's answer (rope/apply) takes from
 * it as a table's does. An answer's block that is done with goes back to the reserve written: a
 * rope/apply body answered in place once it is sent, a table once the cache evicts it; the next
 * table is written into it, byte for byte the answer of the daemon without a reserve (the block
 * held older bytes until then). Serial (run-tests.sh): the filler runs only on an idle CPU. */
#include "support/pe_fault.h"

#define JSON_512 "/v1/sinusoidal?len=512&dim=768&offset=%d"

static int get_table(int port, int offset, struct resp *r)
{
	char path[128];
	snprintf(path, sizeof path, JSON_512, offset);
	return http_get(port, path, 30000, r) == 0 && r->status == 200 && r->body_len > (2u << 20) ? 0 : -1;
}

/* POST /v1/rope/apply of a 1x1x65536x8 float32 tensor (2 MiB), answered as float64 npy (4 MiB). */
static int apply(int port, struct resp *r)
{
	int shape[] = {1, 1, 65536, 8};
	size_t cap = (size_t)65536 * 8 * 4 + 256;
	char *x = malloc(cap);
	size_t len = x ? npy_f32_filled(x, cap, shape, 4, 0.25f) : 0;
	int rc = len ? http_request(port, NULL, "POST", "/v1/rope/apply?format=npy&dtype=f64",
				    "Content-Type: application/x-npy\r\n", x, len, 30000, r)
		     : -1;
	free(x);
	return rc == 0 && r->status == 200 && r->body_len > (4u << 20) ? 0 : -1;
}

/* POST /v1/rope/apply of a 1x1x131072x8 float32 npy (4 MiB), answered in its own body. */
static int apply_in_body(int port, struct resp *r)
{
	int shape[] = {1, 1, 131072, 8};
	size_t cap = (size_t)131072 * 8 * 4 + 256;
	char *x = malloc(cap);
	size_t len = x ? npy_f32_filled(x, cap, shape, 4, 0.5f) : 0;
	int rc = len ? http_request(port, NULL, "POST", "/v1/rope/apply", "Content-Type: application/x-npy\r\n", x, len,
				    30000, r)
		     : -1;
	free(x);
	return rc == 0 && r->status == 200 && r->body_len == len ? 0 : -1;
}

#define BIN_3MIB "/v1/sinusoidal?len=1024&dim=768&format=bin&offset=%d"

/* The same 3 MiB table from both daemons, byte for byte. */
static int same_table(int port, int ref_port, int offset)
{
	char path[128];
	struct resp a, b;
	snprintf(path, sizeof path, BIN_3MIB, offset);
	int ok = http_get(port, path, 30000, &a) == 0 && http_get(ref_port, path, 30000, &b) == 0 && a.status == 200 &&
		 b.status == 200 && a.body_len == (size_t)3 << 20 && a.body_len == b.body_len &&
		 memcmp(a.body, b.body, a.body_len) == 0;
	resp_free(&a);
	resp_free(&b);
	return ok;
}

/* A daemon whose 8 MiB cache holds two 3 MiB tables: an in-place rope/apply answer's body goes
 * back to the empty reserve once sent, and the next table (a smaller size) is written into it
 * before the filler has written anything; from the third table on each evicts one, whose block
 * goes back too. */
static void recycled(int ref_port)
{
	struct pe_spawn r;
	const char *args[] = {"--workers", "2", "--cache-bytes", "8Mi", NULL};
	daemon_start(&r, args);
	struct resp a;
	check(apply_in_body(r.port, &a) == 0, "a rope/apply answered in its 4 MiB body (%d, %zu bytes)", a.status,
	      a.body_len);
	resp_free(&a);
	check(wait_metric_at_least(r.port, "posenc_warm_recycled_total", 1) && metric(r.port, "posenc_warm_blocks") == 1,
	      "its body goes back to the reserve once sent (recycled %.0f, blocks %.0f)",
	      metric(r.port, "posenc_warm_recycled_total"), metric(r.port, "posenc_warm_blocks"));
	check(metric(r.port, "posenc_warm_hits_total") == 0 && metric(r.port, "posenc_warm_misses_total") == 0,
	      "no answer asked the reserve yet");
	check(same_table(r.port, ref_port, 1), "a 3 MiB table, byte for byte the other daemon's");
	check(metric(r.port, "posenc_warm_hits_total") == 1, "written into the block the body left (hits %.0f)",
	      metric(r.port, "posenc_warm_hits_total"));
	int same = 1;
	for (int i = 2; i <= 8; i++)
		same &= same_table(r.port, ref_port, i);
	check(same, "seven more, each byte for byte the other daemon's");
	check(wait_metric_at_least(r.port, "posenc_warm_recycled_total", 2),
	      "tables evicted from the cache go back to the reserve (recycled %.0f, hits %.0f, misses %.0f)",
	      metric(r.port, "posenc_warm_recycled_total"), metric(r.port, "posenc_warm_hits_total"),
	      metric(r.port, "posenc_warm_misses_total"));
	check(metric(r.port, "posenc_warm_bytes") <= 16.0 * (1 << 20), "within warm_bytes (%.0f)",
	      metric(r.port, "posenc_warm_bytes"));
	budget_zero_after(r.port, "after the recycled answers");
	check(daemon_stop(&r, SIGTERM, 30) == 0, "SIGTERM: exit 0 (the cache's last bodies given to the reserve, then freed)");
}

static int scenario(void)
{
	fault_init("warm", 120);
	struct pe_spawn d, cold;
	const char *args[] = {"--workers", "2", "--warm-idle", "3", NULL};
	const char *none[] = {"--workers", "2", "--warm-bytes", "0", NULL};
	daemon_start(&d, args);
	daemon_start(&cold, none);

	struct resp a, b;
	check(get_table(d.port, 1, &a) == 0, "a cold 512x768 JSON table (%d, %zu bytes)", a.status, a.body_len);
	resp_free(&a);
	check(metric(d.port, "posenc_warm_misses_total") == 1 && metric(d.port, "posenc_warm_hits_total") == 0,
	      "the first finds no warm block (misses %.0f, hits %.0f)", metric(d.port, "posenc_warm_misses_total"),
	      metric(d.port, "posenc_warm_hits_total"));
	check(wait_metric_at_least(d.port, "posenc_warm_blocks", 1) && metric(d.port, "posenc_warm_bytes") >= 4u << 20,
	      "the filler wrote the block of its size that it mapped (%.0f bytes)", metric(d.port, "posenc_warm_bytes"));
	check(metric(d.port, "posenc_warm_bytes") <= 16.0 * (1 << 20), "within warm_bytes (%.0f)",
	      metric(d.port, "posenc_warm_bytes"));

	int got = get_table(d.port, 2, &a);
	double t0 = now_s(); /* just after the last answer that asked the reserve (till the transform) */
	int ref = get_table(cold.port, 2, &b);
	check(got == 0 && ref == 0, "the next cold table from both daemons (%d, %d)", a.status, b.status);
	check(metric(d.port, "posenc_warm_hits_total") == 1, "is written into the warm block (hits %.0f)",
	      metric(d.port, "posenc_warm_hits_total"));
	check(a.body_len == b.body_len && a.body && b.body && memcmp(a.body, b.body, a.body_len) == 0,
	      "byte for byte the answer of the daemon without a reserve (%zu, %zu bytes)", a.body_len, b.body_len);
	resp_free(&a);
	resp_free(&b);
	budget_zero_after(d.port, "after the warm answer");
	check(metric(cold.port, "posenc_warm_bytes") == 0 && metric(cold.port, "posenc_warm_misses_total") == 0 &&
		      metric(cold.port, "posenc_warm_hits_total") == 0,
	      "warm_bytes 0: no reserve, nothing asked of it");

	double asked = metric(d.port, "posenc_warm_hits_total") + metric(d.port, "posenc_warm_misses_total");
	check(http_get(d.port, "/v1/sinusoidal?len=8192&dim=768&format=bin", 30000, &a) == 0 && a.status == 200,
	      "a 24 MiB table (%d)", a.status);
	resp_free(&a);
	check(metric(d.port, "posenc_warm_hits_total") + metric(d.port, "posenc_warm_misses_total") == asked,
	      "a table larger than warm_bytes asks nothing of the reserve");

	check(apply(d.port, &a) == 0, "a rope/apply answer of 4 MiB (%d, %zu bytes)", a.status, a.body_len);
	resp_free(&a);
	check(wait_metric_at_least(d.port, "posenc_warm_blocks", 1), "the filler holds a written block that fits it");
	double hits = metric(d.port, "posenc_warm_hits_total");
	got = apply(d.port, &a);
	t0 = now_s();
	ref = apply(cold.port, &b);
	check(got == 0 && ref == 0 && metric(d.port, "posenc_warm_hits_total") == hits + 1,
	      "the next one is written into a warm block (hits %.0f)", metric(d.port, "posenc_warm_hits_total"));
	check(a.body_len == b.body_len && a.body && b.body && memcmp(a.body, b.body, a.body_len) == 0,
	      "byte for byte the answer of the daemon without a reserve");
	resp_free(&a);
	resp_free(&b);

	check(wait_metric_eq(d.port, "posenc_warm_bytes", 0), "the reserve is given back once idle");
	double after = now_s() - t0;
	note("given back %.1f s after the last answer that asked it (warm_idle 3)", after);
	check(after >= 2.5, "and not before warm_idle (%.1f s)", after);
	check(metric(d.port, "posenc_warm_dropped_total") >= 1 && metric(d.port, "posenc_warm_stale_after") == 8,
	      "the blocks it gave back are counted as dropped (%.0f); the stale count is its first, 8 (%.0f)",
	      metric(d.port, "posenc_warm_dropped_total"), metric(d.port, "posenc_warm_stale_after"));

	recycled(cold.port);
	check(daemon_stop(&d, SIGTERM, 30) == 0, "SIGTERM: exit 0 (the filler is joined)");
	check(daemon_stop(&cold, SIGTERM, 30) == 0, "SIGTERM: exit 0");
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
