/* The warm reserve in the daemon (posenc/warm.h, warm_bytes, warm_idle): a cold answer of 2 MiB
 * or more maps a block of its size for the filler, which writes it while the CPU is idle, and
 * the next such answer is written there (posenc_warm_hits_total), byte for byte the answer of a
 * daemon without a reserve; what it holds stays within warm_bytes, is counted on the response
 * budget while in use like any block, and is given back after warm_idle seconds without such an
 * answer; a table larger than warm_bytes never asks; a transform's answer (rope/apply) takes from
 * it as a table's does. Serial (run-tests.sh): the filler runs only
 * on an idle CPU. */
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

	check(daemon_stop(&d, SIGTERM, 30) == 0, "SIGTERM: exit 0 (the filler is joined)");
	check(daemon_stop(&cold, SIGTERM, 30) == 0, "SIGTERM: exit 0");
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
