/* Slow readers of large answers and the response budget (http/conn_guard.c): two clients read
 * 16 MiB answers at a steady ~320 KB/s and ~1.3 MB/s, fast enough for libmicrohttpd's inactivity
 * timer, slow enough to hold their memory for many seconds, and together most of a 40 MiB budget.
 *
 * Expected: while nothing else needs the budget, neither is cut, past twice connection_timeout;
 * then a third 16 MiB table, which does not fit beside them, is answered 200 once the slower
 * reader is cut (its job waits for room meanwhile); exactly one is cut
 * (posenc_slow_answers_cut_total 1), the slower one, before its body ended; the faster one gets
 * its whole body; the budget's gauge returns to 0. */
#include "support/pe_fault.h"

#include <pthread.h>
#include <stdatomic.h>

#define TIMEOUT 3
#define TABLE_BYTES (16u << 20) /* sinusoidal len=4096 dim=1024, f32 bin */

struct reader {
	int fd;
	size_t chunk;        /* bytes read per period */
	double period;       /* seconds between reads */
	size_t got, body;    /* bytes received; body bytes of them (after the head) */
	int head_done, eof;  /* eof: the server closed or reset it */
	atomic_int finished; /* the reader's thread is done: whole body, eof, or told to stop */
	atomic_int stop;
	pthread_t thread;
};

/* Reads chunk bytes every period until the body (TABLE_BYTES) is whole, the server closes, or
 * stop. */
static void *read_paced(void *arg)
{
	struct reader *rd = arg;
	static _Thread_local char buf[1 << 17];
	char head[4096];
	size_t head_len = 0;
	while (!atomic_load(&rd->stop) && rd->body < TABLE_BYTES) {
		ssize_t n = recv(rd->fd, buf, rd->chunk < sizeof buf ? rd->chunk : sizeof buf, MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
			rd->eof = 1;
			break;
		}
		if (n > 0) {
			rd->got += (size_t)n;
			size_t off = 0;
			if (!rd->head_done) { /* the head ends at the first blank line */
				size_t take = (size_t)n < sizeof head - head_len ? (size_t)n : sizeof head - head_len;
				memcpy(head + head_len, buf, take);
				char *end = memmem(head, head_len + take, "\r\n\r\n", 4);
				if (end) {
					off = (size_t)(end + 4 - head) - head_len;
					rd->head_done = 1;
				} else {
					off = (size_t)n;
				}
				head_len += take;
			}
			rd->body += (size_t)n - off;
		}
		sleep_s(rd->period);
	}
	atomic_store(&rd->finished, 1);
	return NULL;
}

static void reader_start(struct reader *rd, int port, int offset, size_t chunk, double period)
{
	char path[128];
	snprintf(path, sizeof path, "/v1/sinusoidal?len=4096&dim=1024&format=bin&offset=%d", offset);
	*rd = (struct reader){.fd = tcp_connect(port, NULL), .chunk = chunk, .period = period};
	int rcv = 64 * 1024;
	check(rd->fd >= 0 && setsockopt(rd->fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv) == 0, "reader connects");
	char req[256];
	int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path);
	check(send_all(rd->fd, req, (size_t)n) == 0, "reader sends its request");
	check(pthread_create(&rd->thread, NULL, read_paced, rd) == 0, "reader thread starts");
}

static void reader_end(struct reader *rd)
{
	atomic_store(&rd->stop, 1);
	pthread_join(rd->thread, NULL);
	close(rd->fd);
}

static int scenario(void)
{
	fault_init("slow_readers", 90);
	char timeout[16];
	snprintf(timeout, sizeof timeout, "%d", TIMEOUT);
	const char *args[] = {"--connection-timeout", timeout, "--response-budget-bytes", "40Mi", "--cache-bytes", "0",
			      "--warm-bytes", "0", NULL};
	struct pe_spawn d;
	daemon_start(&d, args);
	const double mib = 1024.0 * 1024.0;

	struct reader slow, faster;
	reader_start(&slow, d.port, 1, 16 * 1024, 0.05);     /* ~320 KB/s: 16 MiB in ~50 s */
	reader_start(&faster, d.port, 2, 64 * 1024, 0.05);   /* ~1.3 MB/s: 16 MiB in ~13 s */
	check(wait_metric_at_least(d.port, "posenc_response_budget_bytes", 32 * mib),
	      "both answers are held on the budget");
	double t0 = now_s();

	/* No pressure: past twice the timeout, both still read and none is cut. */
	sleep_s(2 * TIMEOUT + 0.5);
	check(metric(d.port, "posenc_slow_answers_cut_total") == 0, "no answer is cut while the budget has room");
	check(!slow.eof && !faster.eof && !atomic_load(&slow.finished) && !atomic_load(&faster.finished),
	      "both readers still read after %.1f s (slow %zu, faster %zu body bytes)", now_s() - t0, slow.body,
	      faster.body);
	check(slow.body > 0 && faster.body > slow.body, "the readers take their answers at their paces (%zu, %zu)",
	      slow.body, faster.body);

	/* A third table does not fit beside them: its job waits for room, the slower reader is cut. */
	double refused0 = metric(d.port, "posenc_response_budget_refused_total");
	struct resp r;
	int ok = http_get(d.port, "/v1/sinusoidal?len=4096&dim=1024&format=bin&offset=3", 20000, &r) == 0 &&
		 r.status == 200 && r.body_len == TABLE_BYTES;
	check(ok, "the third table is answered whole (status %d, %zu bytes)", r.status, r.body_len);
	resp_free(&r);
	check(metric(d.port, "posenc_slow_answers_cut_total") == 1, "one answer was cut");
	double until = now_s() + 5;
	while (!atomic_load(&slow.finished) && now_s() < until)
		sleep_s(0.05);
	check(slow.eof && slow.body < TABLE_BYTES, "the slower reader was cut (%zu of %u body bytes)", slow.body,
	      TABLE_BYTES);
	note("the refusals counted meanwhile: %.0f", metric(d.port, "posenc_response_budget_refused_total") - refused0);

	/* The faster one goes on to its whole body, never cut. */
	until = now_s() + 40;
	while (!atomic_load(&faster.finished) && now_s() < until)
		sleep_s(0.1);
	check(!faster.eof && faster.body == TABLE_BYTES, "the faster reader got its whole body (%zu bytes)",
	      faster.body);
	check(metric(d.port, "posenc_slow_answers_cut_total") == 1, "still one answer cut");
	reader_end(&slow);
	reader_end(&faster);
	budget_zero_after(d.port, "the readers are gone");
	check(daemon_stop(&d, SIGTERM, 10) == 0, "posencd exits 0 on SIGTERM");
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
