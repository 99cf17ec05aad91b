/* What a job holds besides its answer is on the response budget, and a job that could never fit
 * is refused before it exists (issue 21; the hostile battery's analysis_memory_outside_budget and
 * budget_413_after_work).
 *
 * 1. Refused before the work: with a 1 MiB budget, sweeps of growing tables in the text formats
 *    (JSON, CSV, gzipped JSON; a table and an analysis) must each answer 200 up to some size and
 *    413 past it, never a 413 from a job: a 413 leaves posenc_jobs_total where it was (no job
 *    was made), and every request whose job ran succeeded (the estimate is an upper bound of what
 *    the job reserves). Without the estimate the 413s come from jobs, after the work.
 * 2. Intermediates reserved: a slow reader holds a 16 MiB answer on a 17 MiB budget; an analysis
 *    whose float64 encoding table (or rope-decay's arrays) needs 1 MiB more must get 503 +
 *    Retry-After, and 200 once the reader is gone. Without the reservation both computed outside
 *    the budget (a 369 MB table per request at len=361, dim=65536).
 * 3. A learned table's read reserved: the 4 MiB file read beside its 8 MiB float64 copy, on a
 *    budget with about 10 MiB free: 503 (the copy alone fits; without the file's reservation it was
 *    computed), and 200 once the reader is gone. */
#include "support/pe_fault.h"

#define MIB (1024L * 1024L)

/* Wait until the budget's gauge is back to 0 (an answer just sent may still be let go of). */
static void budget_settles(int port)
{
	double end = now_s() + 15;
	while (now_s() < end && metric(port, "posenc_response_budget_bytes") != 0)
		sleep_s(0.02);
}

/* One sweep: path_fmt with one %d (the size), sizes lo..hi by step. */
static void sweep(int port, const char *what, const char *path_fmt, const char *headers, int lo, int hi, int step)
{
	int n200 = 0, n413 = 0, bad = 0, first413 = 0, late200 = 0;
	for (int v = lo; v <= hi; v += step) {
		char path[256];
		struct resp r;
		snprintf(path, sizeof path, path_fmt, v);
		budget_settles(port);
		double jobs = metric(port, "posenc_jobs_total");
		int got = http_request(port, NULL, "GET", path, headers, NULL, 0, 30000, &r);
		double after = metric(port, "posenc_jobs_total");
		if (got == 0 && r.status == 200) {
			n200++;
			late200 += n413 > 0;
			if (after != jobs + 1)
				bad++, note("%s: 200 for %s without a job (%.0f -> %.0f)", what, path, jobs, after);
		} else if (got == 0 && (is_problem(&r, 413, "len") || is_problem(&r, 413, "format"))) {
			if (!n413)
				first413 = v;
			n413++;
			if (after != jobs)
				bad++, note("%s: 413 for %s after a job ran (jobs %.0f -> %.0f)", what, path, jobs, after);
		} else {
			bad++;
			note("%s: %s answered %d: %.*s", what, path, r.status, r.body ? (int)(r.body_len < 300 ? r.body_len : 300) : 0,
			     r.body ? r.body : "");
		}
		resp_free(&r);
	}
	check(bad == 0 && late200 == 0 && n200 > 0 && n413 > 0,
	      "%s: %d x 200 up to a size, then %d x 413 without a job from %d on (%d other, %d 200s past a 413)", what,
	      n200, n413, first413, bad, late200);
}

static void refused_while_held(int port, const char *what, const char *path)
{
	struct resp r;
	char ra[32];
	int got = http_get(port, path, 30000, &r);
	check(got == 0 && is_problem(&r, 503, NULL) && resp_header(&r, "Retry-After", ra, sizeof ra),
	      "%s: more than the held budget has left: 503 + Retry-After (%d)", what, r.status);
	resp_free(&r);
}

static void served_alone(int port, const char *what, const char *path)
{
	struct resp r;
	int got = http_get(port, path, 30000, &r);
	check(got == 0 && r.status == 200, "%s alone fits the budget: 200 (%d)", what, r.status);
	resp_free(&r);
}

/* A transform whose body, working copy and JSON answer together exceed the whole budget (second
 * hostile round: each piece fit alone, so every try was a 503 "retry shortly", forever): a 413 naming
 * format, twice alike, and a smaller one is served. */
static void transform_past_the_budget(int port)
{
	size_t rows = 200, cols = 256, cap = rows * (cols * 2 + 4) + 8, n = 0;
	char *body = malloc(cap);
	if (!body) {
		check(0, "out of memory in the test");
		return;
	}
	body[n++] = '[';
	for (size_t i = 0; i < rows; i++) {
		body[n++] = '[';
		for (size_t k = 0; k < cols; k++)
			n += (size_t)snprintf(body + n, cap - n, k + 1 < cols ? "0," : "0");
		n += (size_t)snprintf(body + n, cap - n, i + 1 < rows ? "]," : "]");
	}
	body[n++] = ']';
	for (int t = 0; t < 2; t++) {
		struct resp r;
		int got = http_request(port, NULL, "POST", "/v1/sinusoidal/apply", "Content-Type: application/json\r\n", body, n,
				       30000, &r);
		check(got == 0 && is_problem(&r, 413, "format"),
		      "a %zux%zu JSON transform past the 1 MiB budget, try %d: 413 naming format (%d %.120s)", rows, cols, t + 1,
		      r.status, r.body ? r.body : "");
		resp_free(&r);
	}
	struct resp r;
	static const char two[] = "[[1.0, 2.0]]";
	int got = http_request(port, NULL, "POST", "/v1/sinusoidal/apply", "Content-Type: application/json\r\n", two,
			       sizeof two - 1, 30000, &r);
	check(got == 0 && r.status == 200, "a small transform is served (%d)", r.status);
	resp_free(&r);
	free(body);
}

static void before_the_work(void)
{
	struct pe_spawn d;
	const char *args[] = {"--cache-bytes", "64Mi", "--response-budget-bytes", "1Mi", "--workers", "2", NULL};
	daemon_start(&d, args);
	sweep(d.port, "sinusoidal JSON", "/v1/sinusoidal?len=%d&dim=64&format=json", "", 200, 1400, 40);
	sweep(d.port, "sinusoidal CSV", "/v1/sinusoidal?len=%d&dim=64&format=csv&dtype=f64", "", 100, 900, 40);
	sweep(d.port, "sinusoidal gzipped JSON", "/v1/sinusoidal?len=%d&dim=64&format=json&offset=7",
	      "Accept-Encoding: gzip\r\n", 100, 1000, 30);
	sweep(d.port, "similarity JSON", "/v1/analysis/similarity?encoding=rope&len=%d&dim=2&format=json", "", 100,
	      400, 10);
	struct resp r;
	double jobs = metric(d.port, "posenc_jobs_total");
	int got = http_get(d.port, "/v1/analysis/similarity?encoding=rope&len=361&dim=65536&format=bin", 30000, &r);
	check(got == 0 && is_problem(&r, 413, "dim") && metric(d.port, "posenc_jobs_total") == jobs,
	      "an analysis whose encoding table alone exceeds the budget: 413 naming dim, no job (%d)", r.status);
	resp_free(&r);
	transform_past_the_budget(d.port);
	int st = daemon_stop(&d, SIGTERM, 30);
	check(st == 0, "exit status %d after SIGTERM", st);
}

static void intermediates_reserved(void)
{
	struct pe_spawn d;
	const char *args[] = {"--cache-bytes", "0", "--response-budget-bytes", "17Mi", "--workers", "2",
			      "--connection-timeout", "120", NULL};
	static const char sim[] = "/v1/analysis/similarity?encoding=rope&len=8&dim=8192&format=bin";
	static const char decay[] = "/v1/analysis/rope-decay?dim=65536&max_distance=4&format=bin";
	daemon_start(&d, args);
	int fd = slow_reader_open(d.port, "/v1/sinusoidal?len=2048&dim=2048&format=bin"); /* 16 MiB */
	double end = now_s() + 30, held = 0;
	while (now_s() < end && (held = metric(d.port, "posenc_response_budget_bytes")) < 16.0 * MIB)
		sleep_s(0.05);
	check(fd >= 0 && held >= 16.0 * MIB, "the unread 16 MiB answer holds the budget (%.0f bytes)", held);
	refused_while_held(d.port, "similarity's float64 encoding table", sim);
	refused_while_held(d.port, "rope-decay's arrays", decay);
	if (fd >= 0)
		tcp_abort(fd);
	budget_settles(d.port);
	served_alone(d.port, "similarity", sim);
	served_alone(d.port, "rope-decay", decay);
	int st = daemon_stop(&d, SIGTERM, 30);
	check(st == 0, "exit status %d after SIGTERM", st);
}

/* A [rows, cols] float32 .npy of a ramp (caller frees; *len its size). */
static char *npy_f32(int rows, int cols, size_t *len)
{
	char dict[128];
	int d = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }", rows, cols);
	size_t hlen = ((size_t)d + 1 + 10 + 63) / 64 * 64 - 10, data = (size_t)rows * (size_t)cols * 4;
	char *b = malloc(10 + hlen + data);
	if (!b)
		return NULL;
	memcpy(b, "\x93NUMPY\x01\x00", 8);
	b[8] = (char)(hlen & 0xff);
	b[9] = (char)(hlen >> 8);
	memset(b + 10, ' ', hlen);
	memcpy(b + 10, dict, (size_t)d);
	b[10 + hlen - 1] = '\n';
	float *v = (float *)(b + 10 + hlen);
	for (size_t i = 0; i < data / 4; i++)
		v[i] = (float)(i % 977) / 977.0f;
	*len = 10 + hlen + data;
	return b;
}

static void learned_read_reserved(void)
{
	struct pe_spawn d;
	const char *args[] = {"--cache-bytes", "0", "--response-budget-bytes", "26Mi", "--workers", "2",
			      "--connection-timeout", "120", NULL};
	static const char get[] = "/v1/learned/wide?len=1&format=bin";
	daemon_start(&d, args);
	size_t len = 0;
	char *body = npy_f32(1024, 1024, &len);
	struct resp r;
	int got = body ? http_request(d.port, NULL, "PUT", "/v1/learned/wide", "Content-Type: application/x-npy\r\n", body,
				      len, 30000, &r) : -1;
	check(got == 0 && (r.status == 200 || r.status == 201), "PUT a 1024x1024 float32 table (%d)", r.status);
	resp_free(&r);
	free(body);
	budget_settles(d.port);
	int fd = slow_reader_open(d.port, "/v1/sinusoidal?len=2048&dim=2048&format=bin"); /* 16 MiB */
	double end = now_s() + 30, held = 0;
	while (now_s() < end && (held = metric(d.port, "posenc_response_budget_bytes")) < 16.0 * MIB)
		sleep_s(0.05);
	check(fd >= 0 && held >= 16.0 * MIB, "the unread 16 MiB answer holds the budget (%.0f bytes)", held);
	refused_while_held(d.port, "the learned table's file beside its float64 copy", get);
	if (fd >= 0)
		tcp_abort(fd);
	budget_settles(d.port);
	served_alone(d.port, "the learned table resampled", get);
	int st = daemon_stop(&d, SIGTERM, 30);
	check(st == 0, "exit status %d after SIGTERM", st);
}

static int scenario(void)
{
	fault_init("budget_jobs", 180);
	before_the_work();
	intermediates_reserved();
	learned_read_reserved();
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
