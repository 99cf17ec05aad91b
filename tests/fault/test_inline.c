/* Inline work (produce.h): a small cold table is computed and answered on the HTTP thread, a big
 * one never is. Asserted by order and completion, never by time:
 *   - with --workers 1 and the one worker held by a big cold table (POSENC_TEST_JOB_GATE keeps
 *     that job waiting before it computes, for as long as the gate file exists), cold small tables
 *     are still answered, each a miss, while the big one is still unanswered; then the big one is
 *     answered once the gate goes. Without inline work they would queue behind it and never come.
 *     inline_max_us is at its maximum, so even the most generous threshold keeps the big table off
 *     the HTTP thread (else /metrics, asked while it is held, would not answer either);
 *   - single flight: identical cold small requests at once make one computation, answered "miss"
 *     by the one that computed and those that joined it (from the other HTTP thread), "hit" by the rest;
 *   - the same tables computed inline and on the pool (--inline-max-us 0) give the same bytes and
 *     headers (ETag, shape, type, X-PE-Cache), metrics count both in posenc_jobs_total and only
 *     the inline ones in posenc_jobs_inline_total, and the access log says "miss" for both. */
#include "support/pe_fault.h"

#include <pthread.h>

#define SMALL 20
#define SAME 16
#define BIG_PATH "/v1/sinusoidal?len=4096&dim=1024&format=bin&offset=987654"
#define BIG_BYTES ((size_t)4096 * 1024 * 4)

static char dir[] = "/tmp/posenc-inline-XXXXXX", gate[64], data_a[64], data_b[64];

static void send_big(int fd)
{
	const char *req = "GET " BIG_PATH " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
	check(send_all(fd, req, strlen(req)) == 0, "big cold request sent");
}

/* Has fd anything to read (a response begun) right now? */
static int readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	return poll(&p, 1, 0) > 0;
}

static void big_held_small_answered(void)
{
	struct pe_spawn d;
	const char *args[] = {"--workers", "1", "--inline-max-us", "1000", "--data-dir", data_a, NULL};
	FILE *f = fopen(gate, "w");
	fputs("987654", f); /* the big table's offset: only its job waits */
	fclose(f);
	daemon_start(&d, args);
	int big = tcp_connect(d.port, NULL);
	send_big(big);
	check(wait_metric_eq(d.port, "posenc_jobs_in_flight", 1), "the big table is on the one worker, held at the gate "
	      "(and /metrics answers meanwhile)");
	double jobs0 = metric(d.port, "posenc_jobs_total"), inl0 = metric(d.port, "posenc_jobs_inline_total");
	double miss0 = metric(d.port, "posenc_cache_misses_total");
	int ok = 0;
	for (int i = 0; i < SMALL; i++) {
		char path[128], c[16];
		struct resp r;
		snprintf(path, sizeof path, "/v1/sinusoidal?len=16&dim=16&offset=%d", 1000 + i);
		/* the timeout only ends a hang: with the worker held, a pooled answer never comes */
		if (http_get(d.port, path, 10000, &r) == 0 && r.status == 200 && resp_header(&r, "X-PE-Cache", c, sizeof c) &&
		    !strcmp(c, "miss") && r.body_len > 1000)
			ok++;
		resp_free(&r);
		if (ok <= i)
			break;
	}
	check(ok == SMALL, "%d of %d cold 16x16 JSON tables answered (200, miss) while the big one is held", ok, SMALL);
	check(!readable(big), "the big table is still unanswered after them");
	check(metric(d.port, "posenc_jobs_in_flight") == 1, "and still on its worker");
	check(metric(d.port, "posenc_jobs_inline_total") - inl0 == SMALL, "posenc_jobs_inline_total +%d",
	      SMALL);
	check(metric(d.port, "posenc_jobs_total") - jobs0 == SMALL, "posenc_jobs_total +%d (inline counted)", SMALL);
	check(metric(d.port, "posenc_cache_misses_total") - miss0 == SMALL, "posenc_cache_misses_total +%d", SMALL);
	unlink(gate);
	struct resp r;
	int rc = read_response(big, &r, 60000, BIG_BYTES);
	check(rc == 0 && r.status == 200 && r.body_len == BIG_BYTES, "the big table is answered once its job may go: status %d, %zu bytes", r.status, r.body_len);
	resp_free(&r);
	close(big);
	check(metric(d.port, "posenc_jobs_inline_total") - inl0 == SMALL, "the big table was not inline");
	int st = daemon_stop(&d, SIGTERM, 30);
	check(st == 0, "exit status %d after SIGTERM (0 expected)", st);
}

struct client {
	pthread_t th;
	int port;
	struct resp r;
	int rc;
};

static pthread_barrier_t start;

static void *same_cb(void *arg)
{
	struct client *c = arg;
	pthread_barrier_wait(&start);
	c->rc = http_get(c->port, "/v1/sinusoidal?len=16&dim=16&offset=4711", 20000, &c->r);
	return NULL;
}

static void single_flight(int port)
{
	static struct client cl[SAME];
	double jobs0 = metric(port, "posenc_jobs_total"), inl0 = metric(port, "posenc_jobs_inline_total");
	double miss0 = metric(port, "posenc_cache_misses_total"), joins0 = metric(port, "posenc_cache_joins_total");
	pthread_barrier_init(&start, NULL, SAME);
	for (int i = 0; i < SAME; i++) {
		cl[i] = (struct client){.port = port};
		pthread_create(&cl[i].th, NULL, same_cb, &cl[i]);
	}
	for (int i = 0; i < SAME; i++)
		pthread_join(cl[i].th, NULL);
	pthread_barrier_destroy(&start);
	int ok = 0, misses = 0;
	char e0[64] = "", e[64], c[16];
	for (int i = 0; i < SAME; i++) {
		struct resp *r = &cl[i].r;
		if (i == 0)
			resp_header(r, "ETag", e0, sizeof e0);
		if (cl[i].rc == 0 && r->status == 200 && resp_header(r, "ETag", e, sizeof e) && !strcmp(e, e0) &&
		    r->body_len == cl[0].r.body_len && !memcmp(r->body, cl[0].r.body, r->body_len))
			ok++;
		misses += resp_header(r, "X-PE-Cache", c, sizeof c) && !strcmp(c, "miss");
	}
	for (int i = 0; i < SAME; i++)
		resp_free(&cl[i].r);
	check(ok == SAME, "%d identical cold small requests at once: %d x 200 with the same bytes and ETag", SAME, ok);
	/* With several HTTP threads a request on another thread than the computing one finds the key
	 * being computed and waits for it (a join, X-PE-Cache: miss, as on the pool path); those
	 * behind the computation on its own thread find it cached (hit). */
	double joins = metric(port, "posenc_cache_joins_total") - joins0;
	check(misses == 1 + (int)joins,
	      "one of them computed and %g joined it (X-PE-Cache: miss), the others were answered from the cache: %d misses",
	      joins, misses);
	check(metric(port, "posenc_jobs_total") - jobs0 == 1, "posenc_jobs_total +1");
	check(metric(port, "posenc_jobs_inline_total") - inl0 == 1, "posenc_jobs_inline_total +1");
	check(metric(port, "posenc_cache_misses_total") - miss0 == 1, "posenc_cache_misses_total +1");
}

/* The same small tables, inline on a and pooled on b: identical answers. A gzip'd 2x2 is inline on
 * a, a gzip'd 8x8 pooled on a too (gzip's fixed cost, ~30 us in the estimate: produce.c). */
static void same_answers(int a, int b)
{
	static const struct {
		const char *path, *headers;
		int inl; /* inline at the default inline_max_us */
	} t[] = {
		{"/v1/sinusoidal?len=16&dim=16&offset=5", "", 1},
		{"/v1/sinusoidal?len=8&dim=12&variant=concat&format=csv", "", 1},
		{"/v1/sinusoidal?len=32&dim=32&format=bin&dtype=f16", "", 1},
		{"/v1/sinusoidal?len=9&dim=6&format=npy&dtype=f64", "", 1},
		{"/v1/sinusoidal?len=8&dim=8", "Accept-Encoding: gzip\r\n", 0},
		{"/v1/sinusoidal?len=2&dim=2&offset=3", "Accept-Encoding: gzip\r\n", 1},
		{"/v1/rope?len=16&dim=16&format=bin", "", 1},
		{"/v1/analysis/similarity?encoding=rope&len=8&dim=16", "", 1},
	};
	size_t want_inl = 0;
	static const char *hdrs[] = {"ETag", "X-PE-Shape", "X-PE-Dtype", "Content-Type", "Content-Encoding", "X-PE-Cache"};
	double inl0 = metric(a, "posenc_jobs_inline_total");
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		struct resp ra, rb;
		int same = http_request(a, NULL, "GET", t[i].path, t[i].headers, NULL, 0, 10000, &ra) == 0 &&
			   http_request(b, NULL, "GET", t[i].path, t[i].headers, NULL, 0, 10000, &rb) == 0 &&
			   ra.status == rb.status && ra.body_len == rb.body_len && !memcmp(ra.body, rb.body, ra.body_len);
		for (size_t k = 0; same && k < sizeof hdrs / sizeof hdrs[0]; k++) {
			char va[128] = "", vb[128] = "";
			resp_header(&ra, hdrs[k], va, sizeof va);
			resp_header(&rb, hdrs[k], vb, sizeof vb);
			same = !strcmp(va, vb);
			if (!strcmp(hdrs[k], "X-PE-Cache"))
				same = same && !strcmp(va, "miss");
		}
		check(same, "%s%s: inline and pooled answers alike (status %d, %zu bytes)", t[i].path,
		      *t[i].headers ? " (gzip)" : "", ra.status, ra.body_len);
		want_inl += (size_t)t[i].inl;
		resp_free(&ra);
		resp_free(&rb);
	}
	size_t n = sizeof t / sizeof t[0];
	check(metric(b, "posenc_jobs_inline_total") == 0 && metric(b, "posenc_jobs_total") == (double)n,
	      "--inline-max-us 0: %zu computations, none inline", n);
	double inl = metric(a, "posenc_jobs_inline_total") - inl0;
	check(inl == (double)want_inl, "default inline_max_us: the %zu small ones not gzip'd inline (%.0f)", want_inl,
	      inl);
}

/* Access log lines of an inline miss and the following hit. */
static void access_log(struct pe_spawn *d)
{
	size_t len;
	char *log = read_file(d->out, &len);
	const char *miss = log ? strstr(log, "\"path\":\"/v1/sinusoidal?len=16&dim=16&offset=5\"") : NULL;
	check(miss && strstr(miss, "\"status\":200") && strstr(miss, "\"cache\":\"miss\""),
	      "the access log has the inline miss, status 200, cache miss");
	free(log);
}

static int scenario(void)
{
	fault_init("inline", 120);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 2;
	}
	snprintf(gate, sizeof gate, "%s/gate", dir);
	snprintf(data_a, sizeof data_a, "%s/a", dir);
	snprintf(data_b, sizeof data_b, "%s/b", dir);
	pe_spawn_hooks(1); /* only the test build honours the gate */
	setenv("POSENC_TEST_JOB_GATE", gate, 1);
	big_held_small_answered();
	unsetenv("POSENC_TEST_JOB_GATE");
	pe_spawn_hooks(0);
	unlink(gate);

	struct pe_spawn a, b;
	const char *inl[] = {"--data-dir", data_a, NULL};
	const char *pooled[] = {"--inline-max-us", "0", "--data-dir", data_b, NULL};
	daemon_start(&a, inl);
	daemon_start(&b, pooled);
	single_flight(a.port);
	same_answers(a.port, b.port);
	check(daemon_stop(&b, SIGTERM, 30) == 0, "pooled daemon exits 0");
	check(daemon_stop(&a, SIGTERM, 30) == 0, "inline daemon exits 0");
	access_log(&a);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		note("could not remove %s", dir);
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
