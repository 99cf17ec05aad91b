/* The response budget's shares for pooled table jobs (produce.c job_compute, table.c), learned
 * tables (learned_get.c), the order view and M-RoPE, attacked as a hostile client would, against
 * daemons with cache_bytes 0 (every table a miss, every answer on the budget while it is sent).
 *  1. At its need: each kind of job whose share is its 413's figure is served on a budget of
 *     exactly that figure (from the server's own 413 on a 1 MiB budget), twice, and the budget is
 *     back at 0: GET tables as png, gzip'd JSON and CSV, f16 JSON, bf16 CSV, npy; similarity (bin
 *     and JSON) and rope-decay with their scratch; the order view by GET and by POST; M-RoPE by
 *     POST (JSON, gzip'd CSV); a learned table as read (bin; npy f16), resampled (bin; gzip'd
 *     JSON) and its similarity. A share short of what the job really takes spills to the parent,
 *     which has no room: a 503 after the work, on every try. A learned table's bin GET was that
 *     (its typed block's allocator rounding left out of its need; learned_get.c job_need). A
 *     POST's figure counts its body by its block's usable size, which varies by a few bytes from
 *     one request to the next, so POSTs get 256 bytes over their figure.
 *  2. A waiter on a table job (a slow reader holds an 8 MiB answer on a 12 MiB budget): a 503
 *     problem with Retry-After naming no parameter; meanwhile /healthz and a small miss are
 *     served; the budget back at 0 once the reader is reset, and the table served then.
 *  3. job_timeout (1 s) passing while a table job waits: a 503, and the one worker free again.
 *  4. A client that resets while its table job waits: the budget at 0 afterwards.
 *  5. Cache-full evictions of answers still being sent (the budget takes them over): 0 once the
 *     readers reset.
 *  6. A client that resets while its table job is held at POSENC_TEST_JOB_GATE: 0 once it ran;
 *     SIGTERM while a table job waits for its share: exit 0, the waiter a 503 problem with
 *     Retry-After naming no parameter. SHARE_ATTACK_LAST=1 runs 6 alone. */
#include "support/pe_fault.h"

#define MIB (1024L * 1024L)
#define HOLD_PATH "/v1/sinusoidal?len=2048&dim=1024&format=bin" /* 8 MiB */
#define BIG_PATH "/v1/sinusoidal?len=512&dim=768&offset=3"      /* JSON: ~7.8 MiB at once */
#define GZIP "Accept-Encoding: gzip\r\n"
#define NPY "Content-Type: application/x-npy\r\n"

static char dir[] = "/tmp/posenc-share-attack-XXXXXX", data[64];

static void start(struct pe_spawn *d, const char *budget, const char *job_timeout, const char *workers)
{
	const char *args[] = {"--cache-bytes", "0", "--response-budget-bytes", budget, "--workers", workers,
			      "--job-timeout", job_timeout, "--shutdown-timeout", "10", "--connection-timeout", "120",
			      "--data-dir", data, NULL};
	daemon_start(d, args);
}

static void stop(struct pe_spawn *d)
{
	int st = daemon_stop(d, SIGTERM, 20);
	check(st == 0, "daemon exits 0 on SIGTERM (%d)", st);
}

/* A GET, or a POST of body when there is one. */
struct ask {
	const char *path, *headers;
	const char *body;
	size_t len;
};

static int ask(int port, const struct ask *a, struct resp *r)
{
	return http_request(port, NULL, a->body ? "POST" : "GET", a->path, a->headers, a->body, a->len, 60000, r);
}

static int get(int port, const char *path, const char *headers, struct resp *r)
{
	const struct ask a = {path, headers, NULL, 0};
	return ask(port, &a, r);
}

/* The bytes a GET holds at most, from the 413 a 1 MiB budget answers it: 0 if none. */
static double need_of(const struct ask *a)
{
	const char *path = a->path;
	struct pe_spawn d;
	start(&d, "1Mi", "30", "2");
	struct resp r;
	double need = 0;
	int got = ask(d.port, a, &r);
	const char *at = got == 0 && r.status == 413 && r.body ? strstr(r.body, "take up to ") : NULL;
	if (at)
		need = strtod(at + 11, NULL);
	check(need > 1.0 * MIB, "%s: a 1 MiB budget answers 413 with the need (%.0f bytes; %d %.120s)", path, need,
	      r.status, r.body ? r.body : "");
	resp_free(&r);
	stop(&d);
	return need;
}

/* 1. */
static void at_its_need_of(const struct ask *a)
{
	const char *path = a->path, *headers = a->headers;
	double need = need_of(a);
	if (need <= 1.0 * MIB)
		return;
	char budget[32];
	/* a POST's need counts its body by the block it occupies, whose usable size varies by a few
	 * bytes from one request to the next (the allocator's shrink in place): 256 bytes over */
	snprintf(budget, sizeof budget, "%.0f", need + (a->body ? 256 : 0));
	struct pe_spawn d;
	start(&d, budget, "30", "2");
	for (int t = 0; t < 2; t++) {
		struct resp r;
		int got = ask(d.port, a, &r);
		check(got == 0 && r.status == 200, "%s%s on a budget of its need (%s bytes), try %d: 200 (%d %.400s)", path,
		      headers && strstr(headers, "gzip") ? " gzip" : "", budget, t + 1, r.status,
		      r.status != 200 && r.body ? r.body : "");
		resp_free(&r);
	}
	budget_zero_after(d.port, path);
	stop(&d);
}

static void at_its_need(const char *path, const char *headers)
{
	const struct ask a = {path, headers, NULL, 0};
	at_its_need_of(&a);
}

/* POST order of a float32 X [256, 128], and POST M-RoPE of 4096 text positions as JSON. */
static void exact_post_needs(void)
{
	size_t cap = 256 * 128 * 4 + 256;
	char *x = malloc(cap);
	int shape[] = {256, 128};
	struct ask a = {"/v1/analysis/order", NPY, x, x ? npy_f32_filled(x, cap, shape, 2, 0.25f) : 0};
	at_its_need_of(&a);
	free(x);
	struct pe_spawn d;
	start(&d, "64Mi", "30", "2");
	struct resp pos;
	int rc = http_get(d.port, "/v1/rope/mrope/positions?segments=text:4096&format=npy", 30000, &pos);
	check(rc == 0 && pos.status == 200, "M-RoPE positions: 200 (%d)", pos.status);
	stop(&d);
	if (rc == 0 && pos.status == 200) {
		struct ask m = {"/v1/rope/mrope?dim=128&mrope_section=16,24,24&format=json", NPY, pos.body, pos.body_len};
		at_its_need_of(&m);
		struct ask mg = {"/v1/rope/mrope?dim=128&mrope_section=16,24,24&format=csv", NPY GZIP, pos.body,
				 pos.body_len};
		at_its_need_of(&mg);
	}
	resp_free(&pos);
}

/* A learned table [1024, 512] float32 (2 MiB) stored in data_dir, then its GETs at their need:
 * as read (bin), resampled (len), and its similarity. */
static void exact_learned_needs(void)
{
	size_t cap = 1024 * 512 * 4 + 256;
	char *t = malloc(cap);
	int shape[] = {1024, 512};
	size_t len = t ? npy_f32_filled(t, cap, shape, 2, 0.125f) : 0;
	struct pe_spawn d;
	start(&d, "64Mi", "30", "2");
	struct resp r;
	int rc = http_request(d.port, NULL, "PUT", "/v1/learned/emb", NPY, t, len, 30000, &r);
	check(rc == 0 && (r.status == 201 || r.status == 200), "PUT a 2 MiB learned table: 201 (%d %.200s)", r.status,
	      r.body ? r.body : "");
	resp_free(&r);
	stop(&d);
	free(t);
	at_its_need("/v1/learned/emb?format=bin", NULL);
	at_its_need("/v1/learned/emb?format=npy&dtype=f16", NULL);
	at_its_need("/v1/learned/emb?len=1500&format=bin", NULL);
	at_its_need("/v1/learned/emb?len=1500", GZIP);
	at_its_need("/v1/analysis/similarity?encoding=learned:emb&format=bin", NULL);
}

static void exact_needs(void)
{
	at_its_need("/v1/sinusoidal?len=512&dim=512&format=png", NULL);
	at_its_need("/v1/sinusoidal?len=256&dim=256&format=png&scale=4&cmap=RdBu", NULL);
	at_its_need("/v1/learned/emb?format=png", NULL);
	at_its_need("/v1/sinusoidal?len=512&dim=512&dtype=f64&format=csv", GZIP);
	at_its_need("/v1/rope?len=512&dim=512", GZIP);
	at_its_need("/v1/sinusoidal?len=512&dim=512&format=csv", GZIP);
	at_its_need("/v1/sinusoidal?len=512&dim=512&dtype=f16", NULL);
	at_its_need("/v1/sinusoidal?len=512&dim=512&dtype=bf16&format=csv", NULL);
	at_its_need("/v1/sinusoidal?len=512&dim=1024&format=npy", NULL);
	at_its_need("/v1/analysis/similarity?len=512&dim=512&format=bin", NULL);
	at_its_need("/v1/analysis/similarity?len=512&dim=512", NULL);
	at_its_need("/v1/analysis/rope-decay?max_distance=65536&dim=64", NULL);
	at_its_need("/v1/analysis/order?len=512&dim=256", NULL);
}

/* Send a GET without reading its answer: the socket, or -1. */
static int send_get(int port, const char *path)
{
	int fd = tcp_connect(port, NULL);
	char head[512];
	int hl = snprintf(head, sizeof head, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
	if (fd >= 0 && send_all(fd, head, (size_t)hl) != 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* The answer on connection w (-1: none), read within timeout_ms, is the busy problem; what is
 * the check's text. Closes w. */
static void waiter_busy(int w, int timeout_ms, const char *what)
{
	struct resp r = {0};
	int got = w >= 0 ? read_response(w, &r, timeout_ms, 16 * MIB) : -1;
	check(got == 0 && busy_problem_of(&r), "%s (%d %.160s)", what, r.status, r.body ? r.body : "");
	resp_free(&r);
	if (w >= 0)
		close(w);
}

/* 2. */
static void table_waiter(void)
{
	struct pe_spawn d;
	start(&d, "12Mi", "30", "2");
	int hold = hold_8mib_answer(d.port);
	int w = send_get(d.port, BIG_PATH);
	sleep_s(0.3);
	struct resp r;
	int got = http_get(d.port, "/healthz", 5000, &r);
	check(got == 0 && r.status == 200, "/healthz while a table job waits: 200 (%d)", r.status);
	resp_free(&r);
	got = http_get(d.port, "/v1/sinusoidal?len=1&dim=512&format=bin&offset=77", 5000, &r);
	check(got == 0 && r.status == 200, "a 2 KiB miss while a table job waits: 200 (%d)", r.status);
	resp_free(&r);
	waiter_busy(w, 15000, "the waiting table job: 503 with Retry-After naming no parameter");
	if (hold >= 0)
		tcp_abort(hold);
	budget_zero_after(d.port, "a table job's wait refused");
	got = get(d.port, BIG_PATH, NULL, &r);
	check(got == 0 && r.status == 200, "the same table once the reader is gone: 200 (%d)", r.status);
	resp_free(&r);
	budget_zero_after(d.port, "the table served");
	stop(&d);
}

/* 3 and 4. */
static void timeout_and_reset(void)
{
	struct pe_spawn d;
	start(&d, "12Mi", "1", "1");
	int hold = hold_8mib_answer(d.port);
	int w = send_get(d.port, BIG_PATH);
	struct resp r;
	int got = w >= 0 ? read_response(w, &r, 15000, 16 * MIB) : -1;
	check(got == 0 && r.status == 503, "job_timeout while a table job waits: 503 (%d %.160s)", r.status,
	      r.body ? r.body : "");
	resp_free(&r);
	if (w >= 0)
		close(w);
	w = send_get(d.port, "/v1/sinusoidal?len=512&dim=768&offset=4");
	sleep_s(0.5);
	if (w >= 0)
		tcp_abort(w);
	sleep_s(2.5);
	got = http_get(d.port, "/v1/sinusoidal?len=64&dim=512&format=bin&offset=78", 5000, &r);
	check(got == 0 && r.status == 200, "the one worker free again: a 128 KiB miss 200 (%d)", r.status);
	resp_free(&r);
	if (hold >= 0)
		tcp_abort(hold);
	budget_zero_after(d.port, "job_timeout and a reset while table jobs wait");
	stop(&d);
}

/* 5. Cache-full evictions: three slow readers of distinct 8 MiB answers on a 20 MiB cache (the
 * third's fill evicts the first while it is still being sent: the budget takes it over), all
 * reset: the budget back at 0. */
static void evictions(void)
{
	struct pe_spawn d;
	const char *args[] = {"--cache-bytes", "20Mi", "--response-budget-bytes", "64Mi", "--workers", "2",
			      "--connection-timeout", "120", "--data-dir", data, NULL};
	daemon_start(&d, args);
	int fd[3];
	for (int i = 0; i < 3; i++) {
		char path[128];
		snprintf(path, sizeof path, "%s&offset=%d", HOLD_PATH, 100 + i);
		fd[i] = slow_reader_open(d.port, path);
		sleep_s(0.3);
	}
	double held = metric(d.port, "posenc_response_budget_bytes");
	check(held >= 8.0 * MIB, "an evicted answer still being sent is on the budget (%.0f bytes)", held);
	for (int i = 0; i < 3; i++)
		if (fd[i] >= 0)
			tcp_abort(fd[i]);
	budget_zero_after(d.port, "three slow readers of cached answers, one evicted, reset");
	stop(&d);
}

/* 6. A client that resets while its table job is held at the gate (computing), then SIGTERM while
 * a table job waits for its share: the budget at 0 after the first, exit 0 and a 503 after the second. */
static char gate[96];

static void reset_then_sigterm(void)
{
	snprintf(gate, sizeof gate, "%s/gate", dir);
	FILE *f = fopen(gate, "w");
	if (f) {
		fputs("base=4242", f);
		fclose(f);
	}
	pe_spawn_hooks(1); /* only the test build honours the gate */
	setenv("POSENC_TEST_JOB_GATE", gate, 1);
	struct pe_spawn d;
	const char *args[] = {"--cache-bytes", "0", "--response-budget-bytes", "12Mi", "--workers", "2",
			      "--shutdown-timeout", "1", "--connection-timeout", "120", "--data-dir", data, NULL};
	daemon_start(&d, args);
	int w = send_get(d.port, "/v1/sinusoidal?len=512&dim=768&base=4242");
	check(wait_metric_eq(d.port, "posenc_jobs_in_flight", 1), "a table job held at the gate");
	if (w >= 0)
		tcp_abort(w);
	sleep_s(0.2);
	unlink(gate);
	check(wait_metric_eq(d.port, "posenc_jobs_in_flight", 0), "the held job ran once let go");
	budget_zero_after(d.port, "a table job whose client reset while it was held");
	int hold = hold_8mib_answer(d.port);
	w = send_get(d.port, BIG_PATH);
	/* the request read and its job on a worker, waiting for its share, before the signal: one still
	 * in the listen backlog is reset by the drain, as it should be (a busy machine took 0.5 s) */
	check(wait_metric_eq(d.port, "posenc_jobs_in_flight", 1), "a table job waits for its share");
	int st = daemon_stop(&d, SIGTERM, 10);
	check(st == 0, "SIGTERM while a table job waits for its share: exit 0 within 10 s (%d)", st);
	waiter_busy(w, 10000, "the waiter: 503 problem with Retry-After naming no parameter");
	if (hold >= 0)
		close(hold);
	unsetenv("POSENC_TEST_JOB_GATE");
	pe_spawn_hooks(0);
}

static int scenario(void)
{
	fault_init("test_share_attack", 300);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 2;
	}
	snprintf(data, sizeof data, "%s/data", dir);
	if (!getenv("SHARE_ATTACK_LAST")) { /* SHARE_ATTACK_LAST=1: 6 alone */
		exact_learned_needs();
		exact_needs();
		exact_post_needs();
		table_waiter();
		timeout_and_reset();
		evictions();
	}
	reset_then_sigterm();
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		note("could not remove %s", dir);
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
