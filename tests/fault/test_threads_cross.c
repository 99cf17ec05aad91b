/* Two HTTP threads (http_threads 2; the default is one per two CPUs) seen by a hostile client: what one thread does
 * must reach requests served by the other, and what both do at once must add up.
 *
 *  - a failure reaches waiters on both threads: a pooled job that fails with its own problem (the
 *    f16 similarity of test_job_error) is held at POSENC_TEST_JOB_GATE while identical requests
 *    are opened until both threads hold some (a connection is seen joining one thread's epoll set
 *    in /proc/PID/fdinfo once accepted, before its request is sent); every one of them is
 *    answered the job's 400 problem, the same bytes, after one computation;
 *  - accounting under concurrent load from both threads, on a daemon of its own: client threads
 *    send a fixed mix (small tables computed inline, POST transforms on the pool, ops endpoints,
 *    bad parameters, and Content-Length values libmicrohttpd refuses itself); every malformed Content-Length is
 *    answered problem+json 400 / 413, not MHD's HTML page; posenc_requests_total settles at the
 *    requests our handlers saw, each counted once (never more on the way); and after SIGTERM
 *    every line of the access log is one whole JSON object, one request line per request. */
#include "support/pe_fault.h"

#include <jansson.h>
#include <pthread.h>

#define ROWS 4
#define COLS 128
#define NAME "crossfail"
#define FAIL_PATH "/v1/analysis/similarity?encoding=learned:" NAME "&dtype=f16&format=json"
#define JOB_TEXT "the dot products reach beyond what f16 can hold"
#define NCONN_MAX 48
#define NCLIENT 6
#define PER_CLIENT 60

static char dir[] = "/tmp/posenc-cross-XXXXXX", gate[64], data[64];


static void failure_across_threads(const struct pe_spawn *d)
{
	FILE *f = fopen(gate, "w");
	fputs(NAME, f); /* only this table's job waits */
	fclose(f);
	double jobs = metric(d->port, "posenc_jobs_total");
	int fds[NCONN_MAX];
	const char *req = "GET " FAIL_PATH " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
	int n = join_on_both_threads(d, req, fds, NCONN_MAX);
	unlink(gate);
	struct resp first = {0};
	for (int i = 0; i < n; i++) {
		struct resp r;
		check(read_response(fds[i], &r, 30000, 1 << 20) == 0, "connection %d answered", i);
		check(is_problem(&r, 400, "dtype") && r.body && strstr(r.body, JOB_TEXT),
		      "connection %d: the job's own 400 problem naming dtype (status %d): %.200s", i, r.status,
		      r.body ? r.body : "");
		if (i == 0)
			first = r;
		else {
			check(r.body && first.body && r.body_len == first.body_len && !memcmp(r.body, first.body, r.body_len),
			      "connection %d: the same problem document as the first", i);
			resp_free(&r);
		}
		close(fds[i]);
	}
	resp_free(&first);
	check(metric(d->port, "posenc_jobs_total") == jobs + 1, "one computation failed for %d requests", n);
}

/* ---- accounting under concurrent load ---- */

struct client {
	pthread_t th;
	int port, id;
	int handled;  /* requests our handlers answered */
	int bad_ok;   /* malformed Content-Length answered with problem+json */
	int bad_sent; /* malformed Content-Length sent */
	int wrong;    /* answers not as expected */
	char why[256];
};

static const char *const bad_lengths[] = {"abc", "99999999999999999999999", "1 2", "0x10"};

/* Request i of client c: what to send, and the status it must get. */
static void one_request(struct client *c, int i, const char *body, size_t body_len)
{
	struct resp r;
	char path[160], hdr[160];
	int want = 200, kind = (i + c->id) % 6, rc;
	if (kind == 0) { /* a small table, inline, shared by the clients: hits, misses and joins */
		snprintf(path, sizeof path, "/v1/sinusoidal?len=%d&dim=8", 1 + i % 7);
		rc = http_get(c->port, path, 30000, &r);
	} else if (kind == 1) { /* a POST transform, on the pool, suspended and resumed */
		rc = http_request(c->port, NULL, "POST", "/v1/sinusoidal/apply", "Content-Type: application/x-npy\r\n", body,
				  body_len, 30000, &r);
	} else if (kind == 2) {
		rc = http_get(c->port, i % 2 ? "/healthz" : "/v1", 30000, &r);
	} else if (kind == 3) {
		want = 400;
		rc = http_get(c->port, "/v1/sinusoidal?len=-1&dim=8", 30000, &r);
	} else if (kind == 4) { /* a larger table on the pool */
		snprintf(path, sizeof path, "/v1/rope?len=%d&dim=64&format=bin", 256 + i % 3);
		rc = http_get(c->port, path, 30000, &r);
	} else {
		const char *cl = bad_lengths[(size_t)i % (sizeof bad_lengths / sizeof bad_lengths[0])];
		int fd = tcp_connect(c->port, NULL);
		int n = snprintf(hdr, sizeof hdr, "POST /v1/sinusoidal/apply HTTP/1.1\r\nHost: 127.0.0.1\r\n"
				 "Content-Type: application/x-npy\r\nContent-Length: %s\r\n\r\n", cl);
		rc = fd >= 0 && send_all(fd, hdr, (size_t)n) == 0 ? read_response(fd, &r, 30000, 1 << 20) : -1;
		if (fd >= 0)
			close(fd);
		c->bad_sent++;
		if (rc == 0 && (is_problem(&r, 400, "Content-Length") || is_problem(&r, 413, "Content-Length")))
			c->bad_ok++;
		else
			snprintf(c->why, sizeof c->why, "Content-Length %s: status %d %.120s", cl, r.status,
				 rc == 0 && r.body ? r.body : "");
		if (rc == 0)
			resp_free(&r);
		return;
	}
	c->handled++;
	if (rc != 0 || r.status != want) {
		c->wrong++;
		snprintf(c->why, sizeof c->why, "kind %d: status %d (%d expected)", kind, r.status, want);
	}
	resp_free(&r);
}

static void *client_cb(void *arg)
{
	struct client *c = arg;
	static const int shape[] = {3, 8};
	char body[512];
	size_t len = npy_f32_filled(body, sizeof body, shape, 2, 0.5f);
	for (int i = 0; i < PER_CLIENT; i++)
		one_request(c, i, body, len);
	return NULL;
}

/* The sum of posenc_requests_total over its labels, -1 if /metrics fails. */
static double requests_total(int port)
{
	struct resp r;
	double sum = -1;
	if (http_get(port, "/metrics", 5000, &r) == 0 && r.status == 200 && r.body) {
		sum = 0;
		for (const char *p = r.body; (p = strstr(p, "\nposenc_requests_total{")); p++) {
			const char *sp = strchr(p + 1, ' ');
			const char *nl = strchr(p + 1, '\n');
			if (sp && (!nl || sp < nl))
				sum += atof(sp + 1);
		}
	}
	resp_free(&r);
	return sum;
}

/* Every line of the log a JSON object; the request lines counted. -1 if a line is not one. */
static int request_lines(const char *path, int *bad)
{
	char *s = read_file(path, NULL);
	int n = 0;
	*bad = s ? 0 : 1;
	for (char *line = s, *nl; line && *line; line = nl + 1) {
		nl = strchr(line, '\n');
		if (!nl) {
			(*bad)++; /* a torn last line */
			break;
		}
		*nl = 0;
		json_error_t e;
		json_t *o = json_loads(line, 0, &e);
		const char *ev = json_is_object(o) ? json_string_value(json_object_get(o, "event")) : NULL;
		if (!json_is_object(o)) {
			(*bad)++;
			note("not one JSON object: %.200s", line);
		} else if (ev && !strcmp(ev, "request"))
			n++;
		json_decref(o);
	}
	free(s);
	return n;
}

/* On a daemon of its own, so that every request it ever answered is one of these. */
static void accounting_under_load(void)
{
	struct pe_spawn d;
	const char *args[] = {"--workers", "1", "--http-threads", "2", NULL};
	daemon_start(&d, args);
	static struct client cl[NCLIENT];
	for (int i = 0; i < NCLIENT; i++) {
		cl[i] = (struct client){.port = d.port, .id = i};
		pthread_create(&cl[i].th, NULL, client_cb, &cl[i]);
	}
	int handled = 0, bad_ok = 0, bad_sent = 0, wrong = 0;
	for (int i = 0; i < NCLIENT; i++) {
		pthread_join(cl[i].th, NULL);
		handled += cl[i].handled;
		bad_ok += cl[i].bad_ok;
		bad_sent += cl[i].bad_sent;
		wrong += cl[i].wrong;
		if (cl[i].why[0])
			note("client %d: %s", i, cl[i].why);
	}
	check(wrong == 0, "%d requests from %d clients at once: all answered as expected (%d not)", handled, NCLIENT,
	      wrong);
	check(bad_sent > 0 && bad_ok == bad_sent, "malformed Content-Length under load: %d of %d answered problem+json",
	      bad_ok, bad_sent);
	/* A request is counted when libmicrohttpd is done with it, which can be after its client has
	 * the whole answer (and, on the other thread, the next one): /metrics is read until the count
	 * settles. Read j counts the requests a handler answered and the j-1 reads before it, once
	 * each: fewer while some are not done yet, never more. */
	double total = -1;
	int reads = 0, over = 0;
	while (reads < 200 && total != handled + reads - 1) {
		if (reads)
			sleep_s(0.01);
		total = requests_total(d.port);
		reads++;
		over += total > handled + reads - 1;
	}
	check(total == handled + reads - 1 && !over,
	      "posenc_requests_total %g: the %d requests answered and the %d /metrics reads before, each once", total,
	      handled, reads - 1);
	check(daemon_stop(&d, SIGTERM, 60) == 0, "exits 0 after SIGTERM");
	int bad, lines = request_lines(d.out, &bad);
	check(bad == 0, "every line of the access log is one whole JSON object (%d not)", bad);
	check(lines == handled + reads, "the access log has one line per request (%d lines, %d requests)", lines,
	      handled + reads);
}

static int scenario(void)
{
	fault_init("threads_cross", 240);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 2;
	}
	snprintf(gate, sizeof gate, "%s/gate", dir);
	snprintf(data, sizeof data, "%s/data", dir);
	pe_spawn_hooks(1); /* only the test build honours the gate */
	setenv("POSENC_TEST_JOB_GATE", gate, 1);
	struct pe_spawn d;
	const char *args[] = {"--workers", "1", "--http-threads", "2", "--data-dir", data, NULL};
	daemon_start(&d, args);
	static char body[64 + ROWS * COLS * 4 + 256];
	static const int shape[] = {ROWS, COLS};
	size_t n = npy_f32_filled(body, sizeof body, shape, 2, 30.0f); /* 30^2 fits f16, 128 x 900 does not */
	struct resp r;
	int rc = http_request(d.port, NULL, "PUT", "/v1/learned/" NAME, "Content-Type: application/x-npy\r\n", body, n,
			      30000, &r);
	check(rc == 0 && r.status == 201, "the table is stored (status %d)", r.status);
	resp_free(&r);
	failure_across_threads(&d);
	check(daemon_stop(&d, SIGTERM, 60) == 0, "exits 0 after SIGTERM");
	accounting_under_load();
	unsetenv("POSENC_TEST_JOB_GATE");
	pe_spawn_hooks(0);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		note("could not remove %s", dir);
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
