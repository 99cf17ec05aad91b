/* SIGTERM under load: requests already in flight (being computed, queued, or waiting on another's
 * computation) complete with 200 and their whole body; readiness turns 503 on connections that
 * were already open; new connections are refused; the daemon exits 0 once the work is done.
 *
 * Then shutdown_timeout: with work that would take minutes running on both workers and more
 * queued, SIGTERM ends the process within shutdown_timeout plus a few seconds (a bound on
 * correctness, far below the minutes the work would take), with status 0, and every request in
 * flight is answered 503 rather than left hanging. */
#include "support/pe_fault.h"

#include <pthread.h>

#define INFLIGHT 8
#define LEN 16384
#define DIM 1024

struct job {
	pthread_t th;
	int port;
	char path[160];
	struct resp r;
	int rc;
};

static void *client(void *arg)
{
	struct job *j = arg;
	j->rc = http_get(j->port, j->path, 60000, &j->r);
	return NULL;
}

/* A request on an open keep-alive connection; 0 when a whole response came back. */
static int keepalive_get(int fd, const char *path, struct resp *r)
{
	char req[512];
	int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path);
	if (send_all(fd, req, (size_t)n) != 0)
		return -1;
	return read_response(fd, r, 5000, 1 << 20);
}

#define LONG_JOBS 6

/* Two rope-decay jobs of minutes each running, four queued; SIGTERM with shutdown_timeout 2. */
static void shutdown_timeout_honoured(void)
{
	struct pe_spawn d;
	const char *args[] = {"--workers", "2", "--shutdown-timeout", "2", "--job-timeout", "600",
			      "--max-analysis-cost", "1000000000000000", NULL};
	daemon_start(&d, args);
	static struct job jobs[LONG_JOBS];
	for (int i = 0; i < LONG_JOBS; i++) {
		jobs[i].port = d.port;
		snprintf(jobs[i].path, sizeof jobs[i].path,
			 "/v1/analysis/rope-decay?dim=65536&max_distance=1048576&base=%d&format=bin", 10000 + i);
		pthread_create(&jobs[i].th, NULL, client, &jobs[i]);
	}
	/* Submitted is not yet started: on a busy machine a worker may take a while to pick its job. */
	double t_wait = now_s() + 20;
	while ((metric(d.port, "posenc_jobs_total") < LONG_JOBS || metric(d.port, "posenc_jobs_in_flight") < 2) &&
	       now_s() < t_wait)
		sleep_s(0.01);
	double running = metric(d.port, "posenc_jobs_in_flight"), queued = metric(d.port, "posenc_queue_depth");
	check(running == 2 && queued == LONG_JOBS - 2, "at SIGTERM: %.0f jobs running, %.0f queued (2 and %d expected)",
	      running, queued, LONG_JOBS - 2);
	double t_sig = now_s();
	char out[128];
	snprintf(out, sizeof out, "%s", d.out);
	int st = daemon_stop(&d, SIGTERM, 2 + 10);
	double took = now_s() - t_sig;
	check(st == 0, "exit status %d within shutdown_timeout (2 s) + 10 s, after %.1f s", st, took);
	/* the kernels stopped when told to: the last-resort exit of work that cannot be stopped was
	 * not needed, and the process went through its whole clean-up (the "stop" line) */
	char *log = read_file(out, NULL);
	check(log && strstr(log, "\"shutdown_timeout\"") && !strstr(log, "work abandoned") &&
		      strstr(log, "\"event\":\"stop\""),
	      "the running computations were cancelled and the daemon shut down cleanly");
	free(log);
	int answered = 0, told = 0;
	for (int i = 0; i < LONG_JOBS; i++) {
		pthread_join(jobs[i].th, NULL);
		answered += jobs[i].rc == 0 && jobs[i].r.status == 503;
		told += jobs[i].rc == 0 && jobs[i].r.body && strstr(jobs[i].r.body, "shutting down") &&
			!strstr(jobs[i].r.body, "job_timeout");
		resp_free(&jobs[i].r);
	}
	check(answered == LONG_JOBS, "every request in flight was answered 503: %d of %d", answered, LONG_JOBS);
	/* they ended because the service stops, not because job_timeout (600 s) passed */
	check(told == LONG_JOBS, "every one of them says the service is shutting down: %d of %d", told, LONG_JOBS);
}

static int scenario(void)
{
	fault_init("sigterm", 150);
	struct pe_spawn d;
	const char *args[] = {"--workers", "2", "--shutdown-timeout", "30", NULL};
	daemon_start(&d, args);
	struct resp r;

	/* A keep-alive connection opened before the signal. */
	int ka = tcp_connect(d.port, "127.0.0.1");
	check(ka >= 0 && keepalive_get(ka, "/readyz", &r) == 0 && r.status == 200, "/readyz 200 before SIGTERM");
	resp_free(&r);

	/* In flight: 6 distinct heavy tables (64 MiB binary, 45 MB JSON; 2 computing, 4 queued) and 2
	 * more requests waiting on one of them (single flight). */
	static struct job jobs[INFLIGHT];
	for (int i = 0; i < INFLIGHT; i++) {
		jobs[i].port = d.port;
		snprintf(jobs[i].path, sizeof jobs[i].path, "/v1/sinusoidal?len=%d&dim=%d&offset=%d&format=%s",
			 i % 2 ? LEN / 4 : LEN, DIM, i, i % 2 ? "json" : "bin");
		if (i >= 6)
			snprintf(jobs[i].path, sizeof jobs[i].path, "%s", jobs[4].path);
		pthread_create(&jobs[i].th, NULL, client, &jobs[i]);
	}
	/* Every request must have reached the server (6 jobs submitted, 2 joined) before the signal: a
	 * connection still waiting in the listen backlog is reset by the drain, as it should be. */
	double t_wait = now_s() + 20;
	while ((metric(d.port, "posenc_jobs_total") < 6 || metric(d.port, "posenc_cache_joins_total") < 2) &&
	       now_s() < t_wait)
		sleep_s(0.01);
	double in_flight = metric(d.port, "posenc_jobs_in_flight"), queued = metric(d.port, "posenc_queue_depth");
	note("at SIGTERM: %.0f jobs running, %.0f queued", in_flight, queued);
	check(in_flight + queued >= 1, "work is under way when the signal comes");
	double t_sig = now_s();
	kill(d.pid, SIGTERM);
	sleep_s(0.3);

	/* Readiness on the already-open connection. */
	char ready_ra[32] = "", table_ra[32] = "";
	int rc = keepalive_get(ka, "/readyz", &r);
	check(rc == 0 && r.status == 503, "/readyz 503 on a connection opened before SIGTERM (status %d)", r.status);
	resp_header(&r, "Retry-After", ready_ra, sizeof ready_ra);
	resp_free(&r);
	rc = keepalive_get(ka, "/v1/sinusoidal?len=8&dim=8&offset=31337", &r);
	check(rc == 0 && is_problem(&r, 503, NULL), "a new table request on that connection: 503 draining (status %d)",
	      r.status);
	resp_header(&r, "Retry-After", table_ra, sizeof table_ra);
	resp_free(&r);
	/* one Retry-After for every 503, the draining /readyz's included */
	check(ready_ra[0] && !strcmp(ready_ra, table_ra), "Retry-After: /readyz says \"%s\", a 503 problem \"%s\"",
	      ready_ra, table_ra);
	close(ka);

	/* New connections: refused (not left hanging in the listen backlog). */
	int fd = tcp_connect(d.port, "127.0.0.1");
	int refused = fd < 0 && errno == ECONNREFUSED;
	if (fd >= 0) {
		const char req[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
		int sent = send_all(fd, req, sizeof req - 1) == 0;
		int answered = sent && read_response(fd, &r, 2000, 1 << 20) == 0;
		note("a connection made %.1f s after SIGTERM was accepted by the kernel; %s", now_s() - t_sig,
		     answered ? "it was answered" : "no answer within 2 s (it waits in the listen backlog)");
		if (answered)
			resp_free(&r);
		close(fd);
	}
	check(refused, "a new connection after SIGTERM is refused");

	/* The work in flight completes whole. */
	int complete = 0;
	for (int i = 0; i < INFLIGHT; i++) {
		pthread_join(jobs[i].th, NULL);
		struct resp *jr = &jobs[i].r;
		int whole = jobs[i].rc == 0 && jr->status == 200 &&
			    resp_whole(jr) &&
			    (i % 2 || jr->body_len == (size_t)LEN * DIM * 4);
		complete += whole;
		if (!whole)
			note("%s: rc %d status %d, %zu bytes (Content-Length %ld)", jobs[i].path, jobs[i].rc, jr->status,
			     jr->body_len, jr->content_length);
		resp_free(jr);
	}
	check(complete == INFLIGHT, "requests in flight at SIGTERM completed with 200 and their whole body: %d of %d",
	      complete, INFLIGHT);

	int st = daemon_stop(&d, 0, 40); /* already signalled: wait for the exit */
	check(st == 0, "exit status %d after draining (0 expected), %.1f s after SIGTERM", st, now_s() - t_sig);
	shutdown_timeout_honoured();
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
