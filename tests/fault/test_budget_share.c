/* Pooled table jobs take their whole need on the response budget at once (produce.c, a share),
 * and one job at a time waits for it, so two large tables that do not fit the budget together are
 * both served, one after the other, rather than one refused halfway through its work.
 *
 * A 12 MiB budget; two cold 512x768 float32 JSON tables, each needing about 7.8 MiB at once (its
 * 1.5 MiB table and its JSON buffer at the widest numbers), both held at POSENC_TEST_JOB_GATE
 * until both are on the workers, then let go together. Expected: both 200 with the whole table,
 * the same bytes as each computed alone later, and the budget back at 0. Before the shares the
 * second job's JSON buffer did not fit beside the first's and it answered 503. Then a third table
 * whose job cannot get its share within its wait (a slow reader holds a 10 MiB answer): 503 with
 * Retry-After, promptly and without having computed. Last, every kind of job that takes a share
 * (tables, the order view by GET and POST, M-RoPE by POST) answers and leaves the budget at 0. */
#include "support/pe_fault.h"

#include <pthread.h>

#define MIB (1024L * 1024L)
#define GATED "base=7777"
#define BIG "/v1/sinusoidal?len=512&dim=768&" GATED "&offset="

static char dir[] = "/tmp/posenc-share-XXXXXX", gate[64];

struct client {
	pthread_t th;
	int port, offset;
	struct resp r;
	int rc;
};

static void *get_cb(void *arg)
{
	struct client *c = arg;
	char path[128];
	snprintf(path, sizeof path, BIG "%d", c->offset);
	c->rc = http_get(c->port, path, 60000, &c->r);
	return NULL;
}

/* The table at offset, fetched alone (nothing else running). */
static int same_as_alone(int port, int offset, const struct resp *got)
{
	char path[128];
	struct resp r;
	snprintf(path, sizeof path, BIG "%d", offset);
	int same = http_get(port, path, 60000, &r) == 0 && r.status == 200 && r.body_len == got->body_len &&
		   memcmp(r.body, got->body, r.body_len) == 0;
	resp_free(&r);
	return same;
}

static void two_released_together(int port)
{
	FILE *f = fopen(gate, "w");
	fputs(GATED, f);
	fclose(f);
	struct client c[2] = {{.port = port, .offset = 11}, {.port = port, .offset = 12}};
	for (int i = 0; i < 2; i++)
		pthread_create(&c[i].th, NULL, get_cb, &c[i]);
	check(wait_metric_eq(port, "posenc_jobs_in_flight", 2), "both big tables are on the workers, held at the gate");
	unlink(gate);
	for (int i = 0; i < 2; i++)
		pthread_join(c[i].th, NULL);
	for (int i = 0; i < 2; i++) {
		char shape[32];
		check(c[i].rc == 0 && c[i].r.status == 200 && resp_header(&c[i].r, "X-PE-Shape", shape, sizeof shape) &&
		      !strcmp(shape, "512,768"), "table %d of the two released together: 200, shape 512,768 (status %d: %.160s)",
		      i, c[i].r.status, c[i].r.body ? c[i].r.body : "");
	}
	check(wait_metric_eq(port, "posenc_response_budget_bytes", 0), "the budget is back at 0 after both");
	for (int i = 0; i < 2; i++) {
		if (c[i].r.status == 200)
			check(same_as_alone(port, c[i].offset, &c[i].r), "table %d: the same bytes as computed alone", i);
		resp_free(&c[i].r);
	}
}

/* A slow reader holds a 10 MiB bin answer; a big JSON table then cannot get its 7.8 MiB share. */
static void share_never_comes(int port)
{
	int hold = slow_reader_open(port, "/v1/sinusoidal?len=3413&dim=768&format=bin&offset=99");
	check(hold >= 0 && wait_metric_at_least(port, "posenc_response_budget_bytes", 9.9 * MIB),
	      "a slow reader holds a 10 MiB answer on the budget");
	double jobs = metric(port, "posenc_jobs_total"), t0 = now_s();
	struct resp r;
	char ra[16];
	int rc = http_get(port, BIG "13", 60000, &r);
	check(rc == 0 && is_problem(&r, 503, NULL) && resp_header(&r, "Retry-After", ra, sizeof ra),
	      "a big table whose share is not there within its wait: 503 with Retry-After (%d)", r.status);
	check(now_s() - t0 < 20, "answered within its wait, not at job_timeout (%.1f s)", now_s() - t0);
	check(metric(port, "posenc_jobs_total") - jobs <= 1, "one job at most was made for it");
	resp_free(&r);
	if (hold >= 0)
		close(hold);
	check(wait_metric_eq(port, "posenc_response_budget_bytes", 0), "the budget is back at 0 once the reader is gone");
	rc = http_get(port, BIG "13", 60000, &r);
	check(rc == 0 && r.status == 200, "the same table once the reader is gone: 200 (%d)", r.status);
	resp_free(&r);
}

/* One request: 200, and the budget back at 0 after it (its share given back, its answer handed
 * over to the budget and let go of once sent). */
static void given_back(int port, const char *what, const char *method, const char *path, const char *headers,
		       const void *body, size_t len)
{
	struct resp r;
	int rc = http_request(port, NULL, method, path, headers, body, len, 30000, &r);
	check(rc == 0 && r.status == 200, "%s: 200 (%d %.120s)", what, r.status, r.body ? r.body : "");
	check(wait_metric_eq(port, "posenc_response_budget_bytes", 0), "%s: the budget is back at 0", what);
	resp_free(&r);
}

/* Every kind of job that takes a share: a GET table (bin, JSON, gzip'd JSON), the order view by GET
 * and by POST, an M-RoPE table by POST. */
static void every_share_given_back(int port)
{
	given_back(port, "GET table bin", "GET", "/v1/sinusoidal?len=300&dim=64&format=bin&offset=5", NULL, NULL, 0);
	given_back(port, "GET table JSON", "GET", "/v1/rope?len=300&dim=64&offset=5", NULL, NULL, 0);
	given_back(port, "GET table gzip'd JSON", "GET", "/v1/sinusoidal?len=200&dim=32&offset=6",
		   "Accept-Encoding: gzip\r\n", NULL, 0);
	given_back(port, "GET order", "GET", "/v1/analysis/order?len=64&dim=16", NULL, NULL, 0);
	char npy[4096];
	int shape[] = {32, 8};
	size_t len = npy_f32_filled(npy, sizeof npy, shape, 2, 0.5f);
	given_back(port, "POST order", "POST", "/v1/analysis/order", "Content-Type: application/x-npy\r\n", npy, len);
	struct resp pos;
	int rc = http_get(port, "/v1/rope/mrope/positions?segments=text:5,image:1x8x8,text:3&format=npy", 30000, &pos);
	check(rc == 0 && pos.status == 200, "M-RoPE positions: 200 (%d)", pos.status);
	if (rc == 0 && pos.status == 200)
		given_back(port, "POST M-RoPE", "POST", "/v1/rope/mrope?dim=16&mrope_section=2,3,3&format=json",
			   "Content-Type: application/x-npy\r\n", pos.body, pos.body_len);
	resp_free(&pos);
}

static int scenario(void)
{
	fault_init("budget_share", 240);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 2;
	}
	snprintf(gate, sizeof gate, "%s/gate", dir);
	pe_spawn_hooks(1); /* only the test build honours the gate */
	setenv("POSENC_TEST_JOB_GATE", gate, 1);
	char data[64];
	snprintf(data, sizeof data, "%s/data", dir);
	struct pe_spawn d;
	const char *args[] = {"--workers", "2", "--cache-bytes", "0", "--response-budget-bytes", "12Mi",
			      "--job-timeout", "30", "--data-dir", data, NULL};
	daemon_start(&d, args);
	two_released_together(d.port);
	share_never_comes(d.port);
	every_share_given_back(d.port);
	check(daemon_alive(&d), "daemon alive");
	check(daemon_stop(&d, SIGTERM, 30) == 0, "exits 0 after SIGTERM");
	unlink(gate);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		note("could not remove %s", dir);
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
