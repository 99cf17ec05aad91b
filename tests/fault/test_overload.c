/* Overload: many concurrent cold requests against --workers 1 --max-queue 2. Every answer must be
 * a 200 with the whole table, or a 503 problem+json with Retry-After: nothing else (no 500, no
 * reset, no hang). Then the queue must drain back to empty and the daemon serve normally: the
 * same for distinct tables, for identical ones (single flight) and for transforms with bodies. */
#include "support/pe_fault.h"

#include <pthread.h>

#define CLIENTS 48
#define LEN 8192
#define DIM 1024

struct job {
	pthread_t th;
	int port;
	char path[160];
	const char *method, *headers;
	const void *body;
	size_t body_len;
	struct resp r;
	int rc;
};

static pthread_barrier_t start;

static void *client(void *arg)
{
	struct job *j = arg;
	pthread_barrier_wait(&start);
	j->rc = http_request(j->port, "127.0.0.1", j->method, j->path, j->headers, j->body, j->body_len, 60000, &j->r);
	return NULL;
}

/* Run n jobs at once; count 200s and well-formed 503s; report anything else. */
static void wave(const char *what, struct job *jobs, int n, size_t want_len, int *ok200, int *ok503, int *other)
{
	*ok200 = *ok503 = *other = 0;
	pthread_barrier_init(&start, NULL, (unsigned)n);
	for (int i = 0; i < n; i++)
		pthread_create(&jobs[i].th, NULL, client, &jobs[i]);
	for (int i = 0; i < n; i++)
		pthread_join(jobs[i].th, NULL);
	pthread_barrier_destroy(&start);
	for (int i = 0; i < n; i++) {
		struct resp *r = &jobs[i].r;
		char ra[32];
		if (jobs[i].rc == 0 && r->status == 200 && (!want_len || r->body_len == want_len) && resp_whole(r))
			(*ok200)++;
		else if (jobs[i].rc == 0 && is_problem(r, 503, NULL) && resp_header(r, "Retry-After", ra, sizeof ra) &&
			 atoi(ra) >= 1)
			(*ok503)++;
		else {
			(*other)++;
			note("%s: %s -> rc %d, status %d, %zu body bytes: %.200s", what, jobs[i].path, jobs[i].rc, r->status,
			     r->body_len, r->body ? r->body : "");
		}
		resp_free(r);
	}
}

static int queue_drained(int port, double within_s)
{
	double end = now_s() + within_s;
	while (now_s() < end) {
		if (metric(port, "posenc_queue_depth") == 0 && metric(port, "posenc_jobs_in_flight") == 0)
			return 1;
		sleep_s(0.05);
	}
	return 0;
}

static int scenario(void)
{
	fault_init("overload", 90);
	struct pe_spawn d;
	const char *args[] = {"--workers", "1", "--max-queue", "2", NULL};
	daemon_start(&d, args);
	static struct job jobs[CLIENTS];
	int ok200, ok503, other;

	/* Distinct cold tables: at most 1 running + 2 queued at a time. */
	for (int i = 0; i < CLIENTS; i++) {
		jobs[i] = (struct job){.port = d.port, .method = "GET", .headers = ""};
		snprintf(jobs[i].path, sizeof jobs[i].path, "/v1/sinusoidal?len=%d&dim=%d&offset=%d&format=bin", LEN, DIM, i);
	}
	wave("distinct", jobs, CLIENTS, (size_t)LEN * DIM * 4, &ok200, &ok503, &other);
	check(other == 0, "%d concurrent distinct cold requests: %d x 200 (whole table), %d x 503 with Retry-After, %d other",
	      CLIENTS, ok200, ok503, other);
	check(ok200 >= 1 && ok503 >= 1, "both outcomes occur (the queue limit bites but work still gets done)");
	check(queue_drained(d.port, 10), "queue depth and jobs in flight back to 0");

	/* Identical cold tables: one computation, every waiter answered alike. */
	for (int i = 0; i < CLIENTS; i++) {
		jobs[i] = (struct job){.port = d.port, .method = "GET", .headers = ""};
		snprintf(jobs[i].path, sizeof jobs[i].path, "/v1/sinusoidal?len=%d&dim=%d&offset=777&format=bin", LEN, DIM);
	}
	wave("identical", jobs, CLIENTS, (size_t)LEN * DIM * 4, &ok200, &ok503, &other);
	check(other == 0 && ok200 + ok503 == CLIENTS, "%d concurrent identical cold requests: %d x 200, %d x 503, %d other",
	      CLIENTS, ok200, ok503, other);

	/* Transforms: a 1 MiB f32 body each. */
	size_t n = 256 * 1024;
	float *x = malloc(n * sizeof *x);
	for (size_t i = 0; i < n; i++)
		x[i] = (float)(i % 97) / 97.0f;
	for (int i = 0; i < CLIENTS; i++) {
		jobs[i] = (struct job){.port = d.port, .method = "POST", .body = x, .body_len = n * sizeof *x,
				       .headers = "Content-Type: application/octet-stream\r\n"};
		snprintf(jobs[i].path, sizeof jobs[i].path, "/v1/sinusoidal/apply?shape=256,1024&offset=%d&format=bin", i);
	}
	wave("transform", jobs, CLIENTS, n * sizeof *x, &ok200, &ok503, &other);
	check(other == 0, "%d concurrent transforms: %d x 200, %d x 503 with Retry-After, %d other", CLIENTS, ok200, ok503,
	      other);
	free(x);
	check(queue_drained(d.port, 10), "queue depth and jobs in flight back to 0");

	/* Healthy afterwards: operations endpoints and new cold work. */
	struct resp r;
	check(http_get(d.port, "/healthz", 2000, &r) == 0 && r.status == 200, "/healthz 200");
	resp_free(&r);
	check(http_get(d.port, "/readyz", 2000, &r) == 0 && r.status == 200, "/readyz 200");
	resp_free(&r);
	int fresh = 0;
	for (int i = 0; i < 5; i++) {
		char path[128];
		snprintf(path, sizeof path, "/v1/sinusoidal?len=%d&dim=%d&offset=%d&format=bin", LEN, DIM, 1000 + i);
		fresh += http_get(d.port, path, 10000, &r) == 0 && r.status == 200;
		resp_free(&r);
	}
	check(fresh == 5, "5 sequential cold requests afterwards: %d x 200", fresh);
	check(metric(d.port, "posenc_jobs_rejected_total") > 0, "rejections are counted in /metrics");
	int st = daemon_stop(&d, SIGTERM, 30);
	check(st == 0, "exit status %d after SIGTERM (0 expected)", st);
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
