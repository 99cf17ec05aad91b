/* A computation that fails inside its job (src/http/produce.c): the request that made the job and
 * every request that joined it on the same cache key get the problem the job found, with its
 * detail and param, the same bytes for all (pe_cache_fail_err carries the job's pe_err); before,
 * they got a problem built from the error code alone.
 *
 * The failing job: the similarity of a stored table whose largest |value| (30) passes the check
 * made before any job (30^2 fits f16) but whose dot products (128 x 900 = 115200) do not fit
 * f16: only the job, on the values it made, can tell (learned_get.c, typed_values). It runs on
 * the pool (learned tables are never inline), held at POSENC_TEST_JOB_GATE until a second
 * identical request has joined it (posenc_cache_joins_total), so the join is certain, not timed. */
#include "support/pe_fault.h"

#define ROWS 4
#define COLS 128
#define NAME "gatedsim"
#define PATH "/v1/analysis/similarity?encoding=learned:" NAME "&dtype=f16&format=json"
#define JOB_TEXT "the dot products reach beyond what f16 can hold"

static char dir[] = "/tmp/posenc-joberr-XXXXXX", gate[64], data[64];

static int send_get(int port)
{
	int fd = tcp_connect(port, NULL);
	const char *req = "GET " PATH " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
	check(fd >= 0 && send_all(fd, req, strlen(req)) == 0, "request sent");
	return fd;
}

/* The job's own problem: 400 naming dtype, with the job's text. */
static void expect_job_problem(const struct resp *r, const char *who)
{
	check(is_problem(r, 400, "dtype"), "%s: 400 problem+json naming dtype (status %d): %.300s", who, r->status,
	      r->body ? r->body : "");
	check(r->body && strstr(r->body, JOB_TEXT), "%s: the detail is the job's ('" JOB_TEXT "'): %.300s", who,
	      r->body ? r->body : "");
}

static void first_and_waiter(int port)
{
	FILE *f = fopen(gate, "w");
	fputs(NAME, f); /* only this table's job waits */
	fclose(f);
	int a = send_get(port);
	check(wait_metric_eq(port, "posenc_jobs_in_flight", 1), "the first request's job is held at the gate");
	double joins = metric(port, "posenc_cache_joins_total");
	int b = send_get(port);
	check(wait_metric_eq(port, "posenc_cache_joins_total", joins + 1), "the second identical request joined it");
	unlink(gate);
	struct resp ra, rb, rc;
	check(read_response(a, &ra, 30000, 1 << 20) == 0, "the first request is answered");
	check(read_response(b, &rb, 30000, 1 << 20) == 0, "the joined request is answered");
	close(a);
	close(b);
	expect_job_problem(&ra, "the request that made the job");
	expect_job_problem(&rb, "the request that joined it");
	check(ra.body && rb.body && ra.body_len == rb.body_len && !memcmp(ra.body, rb.body, ra.body_len),
	      "both got the same problem document");
	/* the failure is not cached: a later request computes again, and is told the same */
	check(http_get(port, PATH, 30000, &rc) == 0, "a later request is answered");
	expect_job_problem(&rc, "a later request");
	check(ra.body && rc.body && ra.body_len == rc.body_len && !memcmp(ra.body, rc.body, ra.body_len),
	      "the same problem document again");
	resp_free(&ra);
	resp_free(&rb);
	resp_free(&rc);
}

static int scenario(void)
{
	fault_init("job_error", 120);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 2;
	}
	snprintf(gate, sizeof gate, "%s/gate", dir);
	snprintf(data, sizeof data, "%s/data", dir);
	pe_spawn_hooks(1); /* only the test build honours the gate */
	setenv("POSENC_TEST_JOB_GATE", gate, 1);
	struct pe_spawn d;
	const char *args[] = {"--workers", "1", "--data-dir", data, NULL};
	daemon_start(&d, args);
	static char body[64 + ROWS * COLS * 4 + 256];
	static const int shape[] = {ROWS, COLS};
	size_t n = npy_f32_filled(body, sizeof body, shape, 2, 30.0f);
	struct resp r;
	int rc = http_request(d.port, NULL, "PUT", "/v1/learned/" NAME, "Content-Type: application/x-npy\r\n", body, n,
			      30000, &r);
	check(rc == 0 && r.status == 201, "the table is stored (status %d): %.200s", r.status, r.body ? r.body : "");
	resp_free(&r);
	first_and_waiter(d.port);
	check(daemon_stop(&d, SIGTERM, 30) == 0, "exit 0 after SIGTERM");
	unsetenv("POSENC_TEST_JOB_GATE");
	pe_spawn_hooks(0);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		note("could not remove %s", dir);
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
