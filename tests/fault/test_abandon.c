/* Abandoned jobs: clients that vanish (RST) while their big table is computed, while it is being
 * sent, or after uploading a big body, must cost nothing lasting: once the work is done, the
 * daemon's RSS (VmRSS of /proc/<pid>/status) returns near its baseline, its file descriptors to
 * theirs, and it keeps serving. The cache is kept at 1 MiB (--cache-bytes) so the tables are
 * dropped rather than cached, and each is 64 MiB: far over glibc's largest mmap threshold, so
 * memory handed back is really returned to the kernel and RSS is a fair measure. */
#include "support/pe_fault.h"

#include <pthread.h>

#define BIG "len=16384&dim=1024" /* 16 Mi elements: 64 MiB as f32 */
#define BIG_BYTES ((size_t)16384 * 1024 * 4)
#define TOLERANCE_KIB (64 * 1024)

/* Send a request and vanish after wait_s (RST), optionally after reading read_bytes of the answer. */
static int abandon(int port, const char *method, const char *path, const char *headers, const void *body, size_t body_len,
		   size_t read_bytes, double wait_s)
{
	int fd = tcp_connect(port, "127.0.0.1");
	if (fd < 0)
		return -1;
	char head[1024];
	int n = snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%sContent-Length: %zu\r\n\r\n", method, path,
			 headers, body_len);
	int rc = send_all(fd, head, (size_t)n);
	if (rc == 0 && body_len)
		rc = send_all(fd, body, body_len);
	size_t got = 0;
	char buf[65536];
	double end = now_s() + (read_bytes ? 30 : wait_s);
	while (rc == 0 && got < read_bytes && now_s() < end) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 100) > 0) {
			ssize_t r = recv(fd, buf, sizeof buf, 0);
			if (r <= 0)
				break;
			got += (size_t)r;
		}
	}
	if (!read_bytes)
		sleep_s(wait_s);
	tcp_abort(fd);
	return rc == 0 && got >= read_bytes ? 0 : -1;
}

struct waiter_arg {
	int port;
	struct resp r;
	int rc;
};

static void *wait_whole(void *arg)
{
	struct waiter_arg *w = arg;
	w->rc = http_get(w->port, "/v1/sinusoidal?" BIG "&offset=4242&format=bin", 60000, &w->r);
	return NULL;
}

static int scenario(void)
{
	fault_init("abandon", 90);
	struct pe_spawn d;
	const char *args[] = {"--workers", "2", "--cache-bytes", "1048576", NULL};
	daemon_start(&d, args);
	int instrumented = daemon_instrumented(&d);
	struct resp r;
	http_get(d.port, "/v1/sinusoidal?len=16&dim=16", 5000, &r);
	resp_free(&r);
	http_get(d.port, "/metrics", 5000, &r);
	resp_free(&r);
	sleep_s(0.3);
	long base = rss_kib(d.pid);
	int base_fds = fd_count(d.pid);
	note("baseline: RSS %ld KiB, %d file descriptors", base, base_fds);

	char path[256];
	int sent = 0, planned = 0;
	/* Vanish while the table is computed (binary and JSON). */
	for (int i = 0; i < 8; i++, planned++) {
		snprintf(path, sizeof path, "/v1/sinusoidal?" BIG "&offset=%d&format=bin", i);
		sent += abandon(d.port, "GET", path, "", NULL, 0, 0, 0.03) == 0;
	}
	for (int i = 0; i < 2; i++, planned++) {
		snprintf(path, sizeof path, "/v1/sinusoidal?len=4096&dim=1024&offset=%d&format=json", i);
		sent += abandon(d.port, "GET", path, "", NULL, 0, 0, 0.03) == 0;
	}
	/* Vanish while the answer is being sent. */
	for (int i = 0; i < 2; i++, planned++) {
		snprintf(path, sizeof path, "/v1/sinusoidal?" BIG "&offset=%d&format=bin", 100 + i);
		sent += abandon(d.port, "GET", path, "", NULL, 0, 65536, 0) == 0;
	}
	/* Vanish after uploading a 64 MiB body to a transform. */
	size_t n = BIG_BYTES / 4;
	float *x = calloc(n, sizeof *x);
	for (int i = 0; i < 2; i++, planned++) {
		snprintf(path, sizeof path, "/v1/sinusoidal/apply?shape=16384,1024&offset=%d&format=bin", i);
		sent += abandon(d.port, "POST", path, "Content-Type: application/octet-stream\r\n", x, n * sizeof *x, 0, 0.03) ==
			0;
	}
	free(x);
	/* Single flight: three of four identical requests vanish; the fourth gets the whole table. */
	struct waiter_arg w = {.port = d.port};
	pthread_t th;
	pthread_create(&th, NULL, wait_whole, &w);
	for (int i = 0; i < 3; i++, planned++)
		sent += abandon(d.port, "GET", "/v1/sinusoidal?" BIG "&offset=4242&format=bin", "", NULL, 0, 0, 0.01) == 0;
	check(sent == planned, "%d of %d clients sent their request and vanished", sent, planned);

	/* Let the work finish, watching the peak. */
	long peak = 0;
	double end = now_s() + 60;
	int drained = 0;
	while (now_s() < end) {
		long v = rss_kib(d.pid);
		peak = v > peak ? v : peak;
		if (metric(d.port, "posenc_queue_depth") == 0 && metric(d.port, "posenc_jobs_in_flight") == 0) {
			drained = 1;
			break;
		}
		sleep_s(0.1);
	}
	pthread_join(th, NULL);
	check(drained, "every abandoned job finished (queue and in-flight back to 0)");
	check(w.rc == 0 && w.r.status == 200 && w.r.body_len == BIG_BYTES,
	      "the client that stayed got its whole table (status %d, %zu bytes)", w.r.status, w.r.body_len);
	resp_free(&w.r);

	/* Memory and descriptors return; the daemon serves on. */
	long now_rss = 0;
	int fds = 0;
	for (int i = 0; i < 50; i++) { /* up to 5 s for the last connections to be torn down */
		sleep_s(0.1);
		now_rss = rss_kib(d.pid);
		fds = fd_count(d.pid);
		if (now_rss - base < TOLERANCE_KIB && fds <= base_fds + 2)
			break;
	}
	note("RSS: baseline %ld KiB, peak %ld KiB, after %ld KiB", base, peak, now_rss);
	if (instrumented)
		note("instrumented daemon (sanitizer or valgrind): RSS not checked");
	else
		check(now_rss - base < TOLERANCE_KIB, "RSS back within %d MiB of its baseline (%+ld KiB; peak %+ld KiB)",
		      TOLERANCE_KIB / 1024, now_rss - base, peak - base);
	check(fds <= base_fds + 2, "file descriptors back to baseline (%d, baseline %d)", fds, base_fds);
	check(daemon_alive(&d) && http_get(d.port, "/healthz", 2000, &r) == 0 && r.status == 200, "daemon alive and healthy");
	resp_free(&r);
	check(http_get(d.port, "/v1/sinusoidal?len=512&dim=64&offset=9", 10000, &r) == 0 && r.status == 200,
	      "a new cold request is served");
	resp_free(&r);
	int st = daemon_stop(&d, SIGTERM, 30);
	check(st == 0, "exit status %d after SIGTERM (0 expected)", st);
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
