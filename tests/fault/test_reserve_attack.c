/* A hostile client against the HTTP threads' reserve (daemon/pool.c: heavy jobs wait while the
 * HTTP threads are busy), the bounded send buffer of big answers (http/response.c) and the HTTP
 * threads' slice hook:
 *  - a flood of cheap pipelined requests keeps the HTTP threads "busy" while a heavy table is held
 *    at POSENC_TEST_JOB_GATE on one worker: a second heavy table waits in the queue (when the flood
 *    reached the busy rate) with a joiner, a light pooled table passes it and is answered, /healthz and
 *    /metrics answer; then SIGTERM with the flood still on: the daemon exits 0 in time and both
 *    heavy requests and the joiner get a whole answer (200, or a 503 problem), the joiner the same;
 *    open connections are answered during the drain, which noted each on a freed pool (ASan);
 *  - the one heavy slot taken by a job waiting for its share of a full response budget: the heavy
 *    tables behind it are answered 503 in turn (not at job_timeout), a light one is answered;
 *  - big and small answers on one keep-alive connection (pipelined) arrive whole and in order;
 *    slow readers holding big answers on bounded send buffers leave the response budget at 0 once
 *    they go, and the daemon answers meanwhile;
 *  - the slice hook runs once per HTTP thread, whatever a client sends: each MHD thread's slice is
 *    the configured one after many connections (when the kernel keeps slices at all), with two HTTP
 *    threads and with one (and one worker).
 * No timing is asserted. */
#include "support/pe_fault.h"

#include <pthread.h>
#include <stdatomic.h>

#include <sys/syscall.h>

#define GATED "offset=9191"
#define HEAVY_HELD "/v1/sinusoidal?len=512&dim=768&" GATED
#define HEAVY_WAITING "/v1/sinusoidal?len=512&dim=768&offset=17"
#define LIGHT "/v1/sinusoidal?len=64&dim=64&offset=3" /* ~0.3 ms estimated: pooled, not heavy */

static char dir[] = "/tmp/posenc-reserve-XXXXXX", gate[64];

/* ---- the flood: pipelined /healthz on a few keep-alive connections ---- */

#define FLOOD_CONNS 4
#define FLOOD_BATCH 32

static atomic_int flooding;
static atomic_long flood_answers;

/* Each batch answered whole: when it was sent and when its last answer was read (CLOCK_MONOTONIC
 * microseconds), the first MAX_BATCHES of a flood; written by the flood thread alone. */
#define MAX_BATCHES 8192
static struct {
	long sent, done;
} batches[MAX_BATCHES];
static atomic_int nbatches;

static long now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void note_batch(long sent, long done)
{
	int n = atomic_load(&nbatches);
	if (n < MAX_BATCHES) {
		batches[n].sent = sent;
		batches[n].done = done;
		atomic_store(&nbatches, n + 1);
	}
}

/* Read n whole responses from fd (Content-Length framed); 0 when all came. */
static int read_n(int fd, int n)
{
	static _Thread_local char buf[1 << 16];
	size_t have = 0;
	while (n > 0) {
		char *end = have ? memmem(buf, have, "\r\n\r\n", 4) : NULL;
		if (end) {
			char v[32];
			char head[4096];
			size_t hl = (size_t)(end - buf) + 4;
			memcpy(head, buf, hl < sizeof head ? hl : sizeof head - 1);
			head[hl < sizeof head ? hl : sizeof head - 1] = 0;
			long cl = pe_http_header(head, "Content-Length", v, sizeof v) ? atol(v) : 0;
			if (have >= hl + (size_t)cl) {
				memmove(buf, buf + hl + cl, have - hl - (size_t)cl);
				have -= hl + (size_t)cl;
				n--;
				atomic_fetch_add(&flood_answers, 1);
				continue;
			}
		}
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (have == sizeof buf || poll(&p, 1, 5000) <= 0)
			return -1;
		ssize_t got = recv(fd, buf + have, sizeof buf - have, 0);
		if (got <= 0)
			return -1;
		have += (size_t)got;
	}
	return 0;
}

static void *flood_main(void *arg)
{
	int port = *(int *)arg, fd[FLOOD_CONNS];
	char batch[FLOOD_BATCH * 64];
	size_t len = 0;
	for (int i = 0; i < FLOOD_BATCH; i++)
		len += (size_t)snprintf(batch + len, sizeof batch - len, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
	for (int c = 0; c < FLOOD_CONNS; c++)
		fd[c] = tcp_connect(port, NULL);
	double end = now_s() + 15; /* bounded whatever happens */
	int alive = FLOOD_CONNS;
	atomic_store(&nbatches, 0);
	while (atomic_load(&flooding) && alive && now_s() < end) {
		alive = 0;
		for (int c = 0; c < FLOOD_CONNS; c++) {
			long sent = now_us();
			if (fd[c] >= 0 && (send_all(fd[c], batch, len) != 0 || read_n(fd[c], FLOOD_BATCH) != 0)) {
				close(fd[c]);
				fd[c] = -1; /* draining daemons close; no new connection is made */
			} else if (fd[c] >= 0)
				note_batch(sent, now_us());
			alive += fd[c] >= 0;
		}
	}
	for (int c = 0; c < FLOOD_CONNS; c++)
		if (fd[c] >= 0)
			close(fd[c]);
	return NULL;
}

/* Was the daemon busy all the time from `from` until now? pool.c counts it busy from the 32nd
 * request answered within one 10 ms window (CLOCK_MONOTONIC / 10 ms, as uv_hrtime) until 20 ms
 * after it: at any moment of window k, when window k - 1 held 32 answers. A batch's 32 requests
 * are counted after it was sent and before its last answer was read, so a window that holds a
 * whole batch (sent and done within it) held 32 answers. The flood's gaps alone do not tell: a
 * window may hold parts of two batches only, and a flood that began late (a thread scheduled late)
 * left the daemon not busy when the second heavy table came, which then rightly ran. The test's
 * own requests count as well, and only make the daemon busier. *windows: the windows looked at,
 * *whole: how many held a whole batch. */
#define FG_WINDOW_US 10000 /* pool.c FG_WINDOW_NS */
#define FLOOD_WARM_S 0.03  /* > 20 ms: the window before the second heavy table's is the flood's */

static int flood_kept_busy(long from, int *windows, int *whole)
{
	int n = atomic_load(&nbatches);
	*windows = *whole = 0;
	for (long k = from / FG_WINDOW_US - 1; k <= now_us() / FG_WINDOW_US - 1; k++) {
		int held = 0;
		for (int i = 0; i < n && !held; i++)
			held = batches[i].sent >= k * FG_WINDOW_US && batches[i].done < (k + 1) * FG_WINDOW_US;
		++*windows;
		*whole += held;
	}
	return *windows > 0 && *whole == *windows;
}

struct getter {
	pthread_t th;
	int port;
	const char *path;
	struct resp r;
	int rc;
	atomic_int done;
};

static void *get_main(void *arg)
{
	struct getter *g = arg;
	g->rc = http_get(g->port, g->path, 60000, &g->r);
	atomic_store(&g->done, 1);
	return NULL;
}

/* The queue depth once it is `want` or g's request is answered, within 5 s (the request, sent on a
 * thread of its own, may reach the daemon late on a loaded machine). */
static double depth_once(int port, double want, struct getter *g)
{
	double end = now_s() + 5, depth;
	while ((depth = metric(port, "posenc_queue_depth")) != want && !atomic_load(&g->done) && now_s() < end)
		sleep_s(0.01);
	return depth;
}

static int whole_200_or_503(const struct getter *g)
{
	if (g->rc != 0)
		return 0;
	if (g->r.status == 503)
		return is_problem(&g->r, 503, NULL);
	return g->r.status == 200 && g->r.body_len > 4000000 && resp_whole(&g->r);
}

static void sigterm_while_held_back(void)
{
	struct pe_spawn d;
	const char *args[] = {"--workers", "2", "--reserve-cpus", "1", "--job-timeout", "60", "--shutdown-timeout", "20",
			      NULL};
	daemon_start(&d, args);
	FILE *f = fopen(gate, "w");
	fputs(GATED, f);
	fclose(f);
	pthread_t flood;
	atomic_store(&flooding, 1);
	pthread_create(&flood, NULL, flood_main, &d.port);
	for (double end = now_s() + 5; atomic_load(&flood_answers) < FLOOD_BATCH && now_s() < end;)
		sleep_s(0.001); /* the flood under way first */
	struct getter held = {.port = d.port, .path = HEAVY_HELD}, waiting = {.port = d.port, .path = HEAVY_WAITING},
		      joiner = {.port = d.port, .path = HEAVY_WAITING};
	pthread_create(&held.th, NULL, get_main, &held);
	check(wait_metric_eq(d.port, "posenc_jobs_in_flight", 1), "the first heavy table runs, held at the gate");
	double t0 = now_s();
	long before = atomic_load(&flood_answers);
	sleep_s(FLOOD_WARM_S);
	long sent = now_us(); /* the second heavy table reaches the daemon after this */
	pthread_create(&waiting.th, NULL, get_main, &waiting);
	sleep_s(0.2);
	pthread_create(&joiner.th, NULL, get_main, &joiner); /* single flight: joins the held-back job */
	sleep_s(0.3);
	double depth = depth_once(d.port, 1, &waiting), running = metric(d.port, "posenc_jobs_in_flight");
	/* busy throughout, or a loaded machine stalled the flood, and then the heavy table rightly runs */
	int windows, whole, busy = flood_kept_busy(sent, &windows, &whole);
	double rate = (double)(atomic_load(&flood_answers) - before) / (now_s() - t0);
	note("flood: %.0f answers/s, a whole batch in %d of %d 10 ms windows (busy throughout: all); queue depth %.0f, "
	     "in flight %.0f", rate, whole, windows, depth, running);
	if (busy)
		check(depth == 1 && running == 1, "busy: the second heavy table waits in the queue (depth %.0f, running %.0f)",
		      depth, running);
	struct resp r;
	int ok = http_get(d.port, LIGHT, 20000, &r) == 0 && r.status == 200 && r.body_len > 0;
	check(ok, "a light pooled table passes the waiting heavy one: %d", r.status);
	resp_free(&r);
	check(http_get(d.port, "/healthz", 5000, &r) == 0 && r.status == 200, "/healthz answers meanwhile: %d", r.status);
	resp_free(&r);
	check(metric(d.port, "posenc_requests_total") > 0, "/metrics answers meanwhile");
	depth = metric(d.port, "posenc_queue_depth");
	if (busy && flood_kept_busy(sent, &windows, &whole))
		check(depth == 1, "the heavy table still waits after the light one");
	/* SIGTERM with the flood on and the heavy table held back, then the gate opens */
	double t_term = now_s();
	kill(d.pid, SIGTERM);
	sleep_s(0.3);
	unlink(gate);
	int st = daemon_stop(&d, SIGTERM, 40);
	note("exited %.1f s after SIGTERM", now_s() - t_term);
	check(st == 0, "SIGTERM while a heavy table is held back: exits 0 (%d)", st);
	atomic_store(&flooding, 0);
	pthread_join(flood, NULL);
	pthread_join(held.th, NULL);
	pthread_join(waiting.th, NULL);
	pthread_join(joiner.th, NULL);
	check(whole_200_or_503(&held), "the gated heavy request is answered whole: %d (%zu B)", held.r.status, held.r.body_len);
	check(whole_200_or_503(&waiting), "the held-back heavy request is answered whole: %d (%zu B)", waiting.r.status,
	      waiting.r.body_len);
	check(whole_200_or_503(&joiner) && joiner.r.status == waiting.r.status && joiner.r.body_len == waiting.r.body_len,
	      "its joiner gets the same answer: %d (%zu B)", joiner.r.status, joiner.r.body_len);
	resp_free(&held.r);
	resp_free(&waiting.r);
	resp_free(&joiner.r);
}

/* The one heavy slot held by a job waiting for its share of a full budget (up to 2 s): the heavy
 * tables behind it each get their turn and a 503 "budget full" with Retry-After (none waits out
 * job_timeout), a light table passes them and is answered at once (200, or 503 when its own share
 * meets the one waiter budget.c allows), and once the slow reader goes the budget is back at 0
 * and a heavy table is made. */
static void heavy_slot_waits_on_the_budget(void)
{
	struct pe_spawn d;
	const char *args[] = {"--workers", "2", "--reserve-cpus", "1", "--cache-bytes", "0", "--response-budget-bytes",
			      "12Mi", "--job-timeout", "30", NULL};
	daemon_start(&d, args);
	int hold = slow_reader_open(d.port, "/v1/sinusoidal?len=3413&dim=768&format=bin&offset=99");
	check(hold >= 0 && wait_metric_at_least(d.port, "posenc_response_budget_bytes", 9.9 * 1024 * 1024),
	      "a slow reader holds a 10 MiB answer on the budget");
	pthread_t flood;
	atomic_store(&flooding, 1);
	pthread_create(&flood, NULL, flood_main, &d.port);
	sleep_s(0.1);
	struct getter g[2] = {{.port = d.port, .path = "/v1/sinusoidal?len=512&dim=768&offset=31"},
			      {.port = d.port, .path = "/v1/sinusoidal?len=512&dim=768&offset=32"}};
	for (int i = 0; i < 2; i++)
		pthread_create(&g[i].th, NULL, get_main, &g[i]);
	sleep_s(0.3);
	struct resp r;
	/* its share is refused at once while another job waits on the budget (budget.c: one waiter) */
	int ok = http_get(d.port, LIGHT, 20000, &r) == 0 && (r.status == 200 || busy_problem_of(&r));
	check(ok, "a light table passes heavy ones waiting on the budget, answered: %d", r.status);
	resp_free(&r);
	for (int i = 0; i < 2; i++) {
		pthread_join(g[i].th, NULL);
		char ra[16];
		check(g[i].rc == 0 && busy_problem_of(&g[i].r) && resp_header(&g[i].r, "Retry-After", ra, sizeof ra) &&
			      !strstr(g[i].r.body, "job_timeout"),
		      "heavy table %d behind the budget: 503 budget full, not job_timeout (%d: %.120s)", i + 1, g[i].r.status,
		      g[i].r.body ? g[i].r.body : "");
		resp_free(&g[i].r);
	}
	atomic_store(&flooding, 0);
	pthread_join(flood, NULL);
	if (hold >= 0)
		close(hold);
	budget_zero_after(d.port, "the slow reader gone");
	ok = http_get(d.port, "/v1/sinusoidal?len=512&dim=768&offset=31", 30000, &r) == 0 && r.status == 200;
	check(ok, "a heavy table once the reader is gone: %d", r.status);
	resp_free(&r);
	check(daemon_stop(&d, SIGTERM, 30) == 0, "exits 0 after SIGTERM");
}

/* ---- big and small answers on one connection; slow readers of big ones ---- */

#define BIG_JSON "/v1/sinusoidal?len=512&dim=768&offset=5" /* ~4.3 MB */
#define SMALL "/v1/sinusoidal?len=4&dim=4"

static void big_and_small_on_one_connection(int port)
{
	int fd = tcp_connect(port, NULL);
	const char *req = "GET " BIG_JSON " HTTP/1.1\r\nHost: x\r\n\r\n"
			  "GET " SMALL " HTTP/1.1\r\nHost: x\r\n\r\n"
			  "GET " BIG_JSON "&format=bin HTTP/1.1\r\nHost: x\r\n\r\n"
			  "GET " SMALL " HTTP/1.1\r\nHost: x\r\n\r\n";
	check(fd >= 0 && send_all(fd, req, strlen(req)) == 0, "four pipelined requests sent, big and small");
	const size_t want_min[4] = {4000000, 10, 512 * 768 * 4, 10};
	for (int i = 0; i < 4; i++) { /* read_response leaves the answers behind each in the socket */
		struct resp r;
		char shape[32] = "";
		int whole = read_response(fd, &r, 30000, 64u << 20) == 0 && resp_whole(&r);
		resp_header(&r, "X-PE-Shape", shape, sizeof shape);
		check(whole && r.status == 200 && r.body_len >= want_min[i] && !strcmp(shape, i % 2 ? "4,4" : "512,768"),
		      "answer %d of 4 on one connection: %d, whole and in order (%zu B, shape %s%s)", i + 1, r.status,
		      r.body_len, shape, r.chunked ? ", chunked" : "");
		resp_free(&r);
	}
	close(fd);
}

static void slow_readers_of_big_answers(struct pe_spawn *d)
{
	enum { N = 12 };
	int fd[N];
	char path[128];
	for (int i = 0; i < N; i++) {
		snprintf(path, sizeof path, "/v1/sinusoidal?len=512&dim=768&offset=%d", 100 + i % 3);
		fd[i] = slow_reader_open(d->port, path);
	}
	check(wait_metric_at_least(d->port, "posenc_jobs_total", 3), "the slow readers' tables were made");
	struct resp r;
	for (int i = 0; i < 20; i++) {
		int ok = http_get(d->port, SMALL, 10000, &r) == 0 && r.status == 200;
		resp_free(&r);
		if (!ok || i == 19)
			check(ok, "small tables answer while %d slow readers hold big answers (%d of 20)", N, i + 1);
		if (!ok)
			break;
	}
	long rss = rss_kib(d->pid);
	note("RSS with %d slow readers of 4.3 MB answers: %ld KiB", N, rss);
	for (int i = 0; i < N; i++)
		if (fd[i] >= 0)
			tcp_abort(fd[i]);
	budget_zero_after(d->port, "the slow readers gone");
	check(http_get(d->port, SMALL, 10000, &r) == 0 && r.status == 200, "answers after they went: %d", r.status);
	resp_free(&r);
}

/* ---- the slice hook: once per HTTP thread ---- */

/* Thread tid's scheduler slice in microseconds (sched_getattr's runtime), 0 if not told. */
static unsigned slice_of(pid_t tid)
{
	struct { /* the kernel's struct sched_attr (linux/sched/types.h clashes with sched.h) */
		uint32_t size, policy;
		uint64_t flags;
		int32_t nice;
		uint32_t priority;
		uint64_t sched_runtime, deadline, period;
		uint32_t util_min, util_max;
	} a;
	memset(&a, 0, sizeof a);
	return syscall(SYS_sched_getattr, tid, &a, (unsigned)sizeof a, 0u) == 0 ? (unsigned)(a.sched_runtime / 1000u) : 0;
}

/* The slice of every thread of pid named like name; -1 when none, else the smallest and largest. */
static int thread_slices(pid_t pid, const char *name, unsigned *lo, unsigned *hi)
{
	char path[96];
	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	DIR *dd = opendir(path);
	struct dirent *e;
	int n = 0;
	*lo = ~0u;
	*hi = 0;
	while (dd && (e = readdir(dd))) {
		if (e->d_name[0] == '.')
			continue;
		char comm[128];
		snprintf(comm, sizeof comm, "%s/%.16s/comm", path, e->d_name);
		char *c = read_file(comm, NULL);
		if (c && strstr(c, name)) {
			unsigned s = slice_of((pid_t)atoi(e->d_name));
			*lo = s < *lo ? s : *lo;
			*hi = s > *hi ? s : *hi;
			n++;
		}
		free(c);
	}
	if (dd)
		closedir(dd);
	return n;
}

static void slice_once_per_thread(struct pe_spawn *d, int threads)
{
	for (int i = 0; i < 200; i++) { /* many connections, many first requests */
		struct resp r;
		http_get(d->port, "/healthz", 5000, &r);
		resp_free(&r);
	}
	unsigned lo, hi;
	int n = thread_slices(d->pid, "MHD", &lo, &hi);
	note("%d MHD threads, slices %u..%u us", n, lo, hi);
	if (n > 0 && hi > 0) /* the kernel keeps slices (6.12+) */
		check(lo == 100 && hi == 100, "every HTTP thread keeps the 100 us slice after 200 connections (%u..%u)", lo, hi);
	check(n == threads, "%d HTTP threads (%d), no thread per connection", threads, n);
}

static int scenario(void)
{
	fault_init("reserve_attack", 240);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 2;
	}
	snprintf(gate, sizeof gate, "%s/gate", dir);
	pe_spawn_hooks(1); /* only the test build honours the gate */
	setenv("POSENC_TEST_JOB_GATE", gate, 1);
	sigterm_while_held_back();
	unsetenv("POSENC_TEST_JOB_GATE");
	pe_spawn_hooks(0);
	heavy_slot_waits_on_the_budget();

	struct pe_spawn d;
	const char *args[] = {"--workers", "2", "--cache-bytes", "0", "--http-threads", "2", NULL};
	daemon_start(&d, args);
	big_and_small_on_one_connection(d.port);
	slow_readers_of_big_answers(&d);
	slice_once_per_thread(&d, 2);
	check(daemon_alive(&d), "daemon alive");
	check(daemon_stop(&d, SIGTERM, 30) == 0, "exits 0 after SIGTERM");
	const char *one[] = {"--workers", "1", "--http-threads", "1", NULL}; /* no reserve to keep: one worker */
	daemon_start(&d, one);
	big_and_small_on_one_connection(d.port);
	slice_once_per_thread(&d, 1);
	check(daemon_stop(&d, SIGTERM, 30) == 0, "one worker, one HTTP thread: exits 0 after SIGTERM");
	unlink(gate);
	rmdir(dir);
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
