/* Bounded work (issue 21, family A): analysis requests are sized from their parameters before
 * anything is allocated (the encoding table counts against max_elements, the work against
 * max_analysis_cost: 413 naming the parameter), and a computation that outlives job_timeout stops
 * at its next check, so the worker it held serves the next request.
 *
 * Part 1, default limits: the hostile requests of the issue are refused at once.
 * Part 2, one worker, job_timeout 1 s and a huge max_analysis_cost: a rope-decay that would run
 * for minutes and a similarity that would run for seconds each get 503 (job-timeout), or are cut
 * after their first bytes when they stream (src/http/stream.c); right after
 * each, a small table is answered 200 by that same single worker, and no job stays in flight. */
#include "support/pe_fault.h"

static void expect_refused(int port, const char *path, const char *param)
{
	struct resp r;
	int rc = http_get(port, path, 10000, &r);
	check(rc == 0 && is_problem(&r, 413, param), "%s: 413 naming %s (status %d)", path, param, r.status);
	resp_free(&r);
}

/* The long request gets 503 from job_timeout, or, when its answer streams (a bin table over 8 MiB:
 * its 200 and Content-Length went with the first block), its connection closes short of the
 * body; then a small table is computed by the one worker. */
static void cut_and_served(int port, const char *path, int round)
{
	struct resp r;
	int rc = http_get(port, path, 120000, &r);
	int cut = rc == 0 ? is_problem(&r, 503, NULL) && r.body && strstr(r.body, "job-timeout") : r.status == 200;
	check(cut, "%s: 503 job-timeout, or a streamed 200 closed short (status %d)", path, r.status);
	resp_free(&r);
	char small[96];
	snprintf(small, sizeof small, "/v1/sinusoidal?len=4&dim=8&offset=%d", 1000 + round);
	rc = http_get(port, small, 20000, &r);
	check(rc == 0 && r.status == 200, "right after it, the single worker computes %s: 200 (status %d)", small,
	      r.status);
	resp_free(&r);
	double busy = -1;
	for (int i = 0; i < 500 && busy != 0; i++) { /* the 200 above already proves the worker free */
		busy = metric(port, "posenc_jobs_in_flight") + metric(port, "posenc_queue_depth");
		if (busy != 0)
			sleep_s(0.01);
	}
	check(busy == 0, "no job is left running or queued (%.0f)", busy);
}

static int scenario(void)
{
	fault_init("bounded", 240);
	struct pe_spawn d;
	daemon_start(&d, NULL);
	expect_refused(d.port, "/v1/analysis/similarity?encoding=sinusoidal&len=8192&dim=65536", "dim");
	expect_refused(d.port, "/v1/analysis/similarity?encoding=rope&len=8192&dim=65536", "dim");
	expect_refused(d.port, "/v1/analysis/similarity?len=1024&dim=65536", "len");
	expect_refused(d.port, "/v1/analysis/similarity?encoding=rope&len=8192&dim=1024&format=bin", "len");
	expect_refused(d.port, "/v1/analysis/rope-decay?dim=65536&max_distance=1048576", "max_distance");
	struct resp r;
	int rc = http_get(d.port, "/v1/analysis/similarity?len=64&dim=64", 10000, &r);
	check(rc == 0 && r.status == 200, "a small similarity is still 200 (status %d)", r.status);
	resp_free(&r);
	check(daemon_stop(&d, SIGTERM, 30) == 0, "exit status 0");

	const char *args[] = {"--workers", "1", "--job-timeout", "1", "--max-analysis-cost", "1000000000000000", NULL};
	daemon_start(&d, args);
	cut_and_served(d.port, "/v1/analysis/rope-decay?dim=65536&max_distance=1048576&format=bin", 1);
	cut_and_served(d.port, "/v1/analysis/similarity?len=4096&dim=4096&format=bin", 2);
	cut_and_served(d.port, "/v1/analysis/similarity?encoding=rope&len=4096&dim=2048&format=bin", 3);
	int st = daemon_stop(&d, SIGTERM, 30);
	check(st == 0, "exit status %d after SIGTERM (0 expected)", st);
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
