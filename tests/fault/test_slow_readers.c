/* Slow readers of large answers and the response budget (http/conn_guard.c): two clients read
 * 32 MiB answers, one ("sprinter") 20 MiB at once and then ~300 KB/s, the other ~2 MB/s
 * throughout, fast enough for libmicrohttpd's inactivity timer, slow enough to hold their memory
 * for many seconds, and together most of an 80 MiB budget. By its whole answer's average the
 * sprinter is the faster reader; by its pace of the last seconds, the slower.
 *
 * Expected: while nothing else needs the budget, neither is cut, past twice connection_timeout;
 * then a third 32 MiB table, which does not fit beside them, is answered 200 once the sprinter is
 * cut (its job waits for room meanwhile); exactly one is cut (posenc_slow_answers_cut_total 1),
 * the sprinter, before its body ended; the other gets its whole body; the budget's gauge returns
 * to 0. Then (cached_answer_not_cut) a slow reader of a table the cache keeps, whether a hit or
 * its stream, is passed over for a faster reader of one it cannot keep, and (shared_table_cut_together) the readers of one table
 * the cache let go of are cut together, and (chunked_stream_judged_by_its_length) a chunked
 * stream's reader is judged by the stream's length. */
#include "support/pe_fault.h"

#include <pthread.h>
#include <stdatomic.h>

#define TIMEOUT 3
#define TABLE_BYTES (32u << 20) /* sinusoidal len=8192 dim=1024, f32 bin */

struct reader {
	int fd;
	size_t want;         /* the answer's body bytes */
	size_t sprint;       /* body bytes read at once first */
	size_t chunk;        /* bytes read per period after them */
	double period;       /* seconds between reads */
	size_t got, body;    /* bytes received; body bytes of them (after the head) */
	char tail[8];        /* the last bytes received */
	int head_done, eof;  /* eof: the server closed or reset it */
	atomic_int finished; /* the reader's thread is done: whole body, eof, or told to stop */
	atomic_int stop;
	pthread_t thread;
};

/* Reads chunk bytes every period until the body (want bytes) is whole, the server closes, or
 * stop. */
static void *read_paced(void *arg)
{
	struct reader *rd = arg;
	static _Thread_local char buf[1 << 17];
	char head[4096];
	size_t head_len = 0;
	while (!atomic_load(&rd->stop) && rd->body < rd->want) {
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
			size_t keep = (size_t)n < sizeof rd->tail ? (size_t)n : sizeof rd->tail;
			memmove(rd->tail, rd->tail + keep, sizeof rd->tail - keep);
			memcpy(rd->tail + sizeof rd->tail - keep, buf + n - keep, keep);
		}
		if (rd->body >= rd->sprint)
			sleep_s(rd->period);
		else if (n < 0)
			sleep_s(0.001);
	}
	atomic_store(&rd->finished, 1);
	return NULL;
}

/* GET path (of want body bytes) with a receive buffer of rcvbuf bytes, read in a thread. */
static void reader_start_path(struct reader *rd, int port, const char *path, size_t want, int rcvbuf, size_t sprint,
			      size_t chunk, double period)
{
	*rd = (struct reader){.fd = tcp_connect(port, NULL), .want = want, .sprint = sprint, .chunk = chunk,
			      .period = period};
	check(rd->fd >= 0 && setsockopt(rd->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf) == 0, "reader connects");
	char req[256];
	int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
	check(send_all(rd->fd, req, (size_t)n) == 0, "reader sends its request");
	check(pthread_create(&rd->thread, NULL, read_paced, rd) == 0, "reader thread starts");
}

/* GET /v1/sinusoidal?len=LEN&dim=1024&format=bin&offset=OFFSET (4 KiB a row), read in a thread. */
static void reader_start(struct reader *rd, int port, int len, int offset, size_t sprint, size_t chunk, double period)
{
	char path[128];
	snprintf(path, sizeof path, "/v1/sinusoidal?len=%d&dim=1024&format=bin&offset=%d", len, offset);
	reader_start_path(rd, port, path, (size_t)len * 4096, 64 * 1024, sprint, chunk, period);
}

static void reader_end(struct reader *rd)
{
	atomic_store(&rd->stop, 1);
	pthread_join(rd->thread, NULL);
	close(rd->fd);
}

/* posencd with connection_timeout TIMEOUT, no warm reserve, and this budget and cache. */
static void start_daemon(struct pe_spawn *d, const char *budget, const char *cache)
{
	char timeout[16];
	snprintf(timeout, sizeof timeout, "%d", TIMEOUT);
	const char *args[] = {"--connection-timeout", timeout, "--response-budget-bytes", budget, "--cache-bytes", cache,
			      "--warm-bytes", "0", NULL};
	daemon_start(d, args);
}

/* Waits up to seconds for rd's thread to be done. */
static void wait_finished(struct reader *rd, double seconds)
{
	double until = now_s() + seconds;
	while (!atomic_load(&rd->finished) && now_s() < until)
		sleep_s(0.05);
}

/* A reader of an answer the cache keeps holds no budget: under pressure it is passed over, slowest
 * as it is, for the reader of an answer too large for the cache. The daemon: cache 36 MiB (a
 * 32 MiB table fits, a 40 MiB one does not), budget 48 MiB. streamed: the slow reader's request is
 * the table's miss, read from its stream after the cache took the table; else a hit. */
static void cached_answer_not_cut(int streamed)
{
	struct pe_spawn d;
	start_daemon(&d, "48Mi", "36Mi");
	struct resp r;
	int got;
	if (!streamed) {
		got = http_get(d.port, "/v1/sinusoidal?len=8192&dim=1024&format=bin&offset=7", 20000, &r);
		check(got == 0 && r.status == 200, "a 32 MiB table is computed (status %d)", r.status);
		resp_free(&r);
	}
	struct reader hit, big;
	reader_start(&hit, d.port, 8192, 7, 0, 16 * 1024, 0.05);     /* the cached table, ~300 KB/s */
	if (streamed)
		check(wait_metric_at_least(d.port, "posenc_cache_bytes", 32 * 1024.0 * 1024.0),
		      "the streamed table goes into the cache");
	reader_start(&big, d.port, 10240, 8, 0, 64 * 1024, 0.05);    /* 40 MiB, uncacheable, ~1.3 MB/s */
	check(wait_metric_at_least(d.port, "posenc_response_budget_bytes", 40 * 1024.0 * 1024.0),
	      "the 40 MiB answer is held on the budget");
	sleep_s(TIMEOUT + 1.5);
	got = http_get(d.port, "/v1/sinusoidal?len=10240&dim=1024&format=bin&offset=9", 30000, &r);
	check(got == 0 && r.status == 200 && r.body_len == 40u << 20,
	      "another 40 MiB table is answered whole (status %d, %zu bytes)", r.status, r.body_len);
	resp_free(&r);
	check(metric(d.port, "posenc_slow_answers_cut_total") == 1, "one answer was cut");
	wait_finished(&big, 5);
	check(big.eof && big.body < big.want, "the uncacheable answer's reader was cut (%zu of %zu)", big.body, big.want);
	check(!hit.eof && !atomic_load(&hit.finished), "the cached answer's slower reader was not (%zu of %zu)", hit.body,
	      hit.want);
	reader_end(&hit);
	reader_end(&big);
	budget_zero_after(d.port, "the readers are gone");
	check(daemon_stop(&d, SIGTERM, 10) == 0, "posencd exits 0 on SIGTERM");
}

/* Readers of one table share its memory: cutting one of them frees nothing while the others read.
 * Two readers of a cached table (~320 KB/s and ~1.3 MB/s), which the cache then evicts for another
 * (it keeps one), hold it on the budget together; a reader of a 40 MiB table the cache cannot keep
 * reads at a pace between theirs. The daemon: cache 36 MiB, budget 96 MiB. Under pressure both
 * readers of the evicted table are cut at once, and the table that needs the room is answered; the
 * reader of the other is not cut (one at a time, the slowest reader would be cut, then, a second
 * later, that one: two cuts, one of them useless). */
static void shared_table_cut_together(void)
{
	struct pe_spawn d;
	start_daemon(&d, "96Mi", "36Mi");
	const double mib = 1024.0 * 1024.0;
	struct resp r;
	int got = http_get(d.port, "/v1/sinusoidal?len=8192&dim=1024&format=bin&offset=11", 20000, &r);
	check(got == 0 && r.status == 200, "a 32 MiB table is computed (status %d)", r.status);
	resp_free(&r);
	struct reader slow, less_slow, other;
	reader_start(&slow, d.port, 8192, 11, 0, 16 * 1024, 0.05);      /* the cached table, ~320 KB/s */
	reader_start(&less_slow, d.port, 8192, 11, 0, 64 * 1024, 0.05); /* the same, ~1.3 MB/s */
	double until = now_s() + 10;
	while ((slow.body == 0 || less_slow.body == 0) && now_s() < until)
		sleep_s(0.05);
	check(slow.body > 0 && less_slow.body > 0, "both readers of the cached table read");
	got = http_get(d.port, "/v1/sinusoidal?len=8192&dim=1024&format=bin&offset=12", 20000, &r);
	check(got == 0 && r.status == 200, "another 32 MiB table is computed and evicts the first (status %d)", r.status);
	resp_free(&r);
	reader_start(&other, d.port, 10240, 13, 0, 32 * 1024, 0.05); /* 40 MiB, uncacheable, ~650 KB/s */
	check(wait_metric_at_least(d.port, "posenc_response_budget_bytes", 72 * mib),
	      "the evicted table and the 40 MiB answer are held on the budget");
	sleep_s(TIMEOUT + 1.5);
	got = http_get(d.port, "/v1/sinusoidal?len=8192&dim=1024&format=bin&offset=14", 30000, &r);
	check(got == 0 && r.status == 200 && r.body_len == TABLE_BYTES,
	      "a table that needs the room is answered whole (status %d, %zu bytes)", r.status, r.body_len);
	resp_free(&r);
	wait_finished(&slow, 5);
	wait_finished(&less_slow, 5);
	check(slow.eof && less_slow.eof && slow.body < slow.want && less_slow.body < less_slow.want,
	      "both readers of the evicted table were cut (%zu and %zu of %zu)", slow.body, less_slow.body, slow.want);
	check(!other.eof && !atomic_load(&other.finished), "the reader of the other table was not (%zu of %zu)",
	      other.body, other.want);
	check(metric(d.port, "posenc_slow_answers_cut_total") == 2, "two answers were cut");
	reader_end(&slow);
	reader_end(&less_slow);
	reader_end(&other);
	budget_zero_after(d.port, "the readers are gone");
	check(daemon_stop(&d, SIGTERM, 10) == 0, "posencd exits 0 on SIGTERM");
}

/* A chunked answer (a JSON table streamed as it is computed, ~92 MB) is judged by its length as
 * its stream tells it, not by a guess: its reader, at ~6 MB/s, would need many seconds for the
 * rest and is cut under pressure (judged by a rest of 8 MiB, as before, it would seem to finish
 * within connection_timeout, and would not be). The daemon: no cache, budget 192 MiB (the JSON
 * table's worst-case width takes 168 MB while it is computed); a 112 MiB table then needs the
 * room. */
static void chunked_stream_judged_by_its_length(void)
{
	struct pe_spawn d;
	start_daemon(&d, "192Mi", "0");
	struct reader rd;
	reader_start_path(&rd, d.port, "/v1/sinusoidal?len=8192&dim=1024&offset=21", SIZE_MAX, 256 * 1024, 0, 64 * 1024,
			  0.01);
	check(wait_metric_at_least(d.port, "posenc_response_budget_bytes", 80 * 1024.0 * 1024.0),
	      "the streamed table is held on the budget");
	/* its job done (slower under the sanitizers): a reader waiting for the computation is not slow */
	check(wait_metric_eq(d.port, "posenc_jobs_in_flight", 0), "the table's computation ends");
	sleep_s(TIMEOUT + 1.5);
	check(!rd.eof, "its reader still reads (%zu body bytes)", rd.body);
	struct resp r;
	int got = http_get(d.port, "/v1/sinusoidal?len=28672&dim=1024&format=bin&offset=22", 30000, &r);
	check(got == 0 && r.status == 200 && r.body_len == 112u << 20,
	      "a table that needs the room is answered whole (status %d, %zu bytes)", r.status, r.body_len);
	resp_free(&r);
	wait_finished(&rd, 60);
	check(rd.eof && memcmp(rd.tail + sizeof rd.tail - 5, "0\r\n\r\n", 5) != 0,
	      "the stream's reader was cut before its last chunk (%zu body bytes)", rd.body);
	check(metric(d.port, "posenc_slow_answers_cut_total") == 1, "one answer was cut");
	reader_end(&rd);
	budget_zero_after(d.port, "the reader is gone");
	check(daemon_stop(&d, SIGTERM, 10) == 0, "posencd exits 0 on SIGTERM");
}

static int scenario(void)
{
	fault_init("slow_readers", 150);
	struct pe_spawn d;
	start_daemon(&d, "80Mi", "0");
	const double mib = 1024.0 * 1024.0;

	struct reader slow, faster;
	reader_start(&slow, d.port, 8192, 1, 20u << 20, 16 * 1024, 0.05); /* 20 MiB, then ~300 KB/s: ~45 s */
	reader_start(&faster, d.port, 8192, 2, 0, 128 * 1024, 0.05);     /* ~2 MB/s: 32 MiB in ~17 s */
	check(wait_metric_at_least(d.port, "posenc_response_budget_bytes", 64 * mib),
	      "both answers are held on the budget");
	double t0 = now_s();

	/* No pressure: past twice the timeout, both still read and none is cut. */
	sleep_s(2 * TIMEOUT + 0.5);
	check(metric(d.port, "posenc_slow_answers_cut_total") == 0, "no answer is cut while the budget has room");
	check(!slow.eof && !faster.eof && !atomic_load(&slow.finished) && !atomic_load(&faster.finished),
	      "both readers still read after %.1f s (slow %zu, faster %zu body bytes)", now_s() - t0, slow.body,
	      faster.body);
	check(slow.body > faster.body && faster.body > 0,
	      "the sprinter is ahead by its whole answer's average (%zu, %zu body bytes)", slow.body, faster.body);

	/* A third table does not fit beside them: its job waits for room, the sprinter is cut. */
	double refused0 = metric(d.port, "posenc_response_budget_refused_total");
	struct resp r;
	int got = http_get(d.port, "/v1/sinusoidal?len=8192&dim=1024&format=bin&offset=3", 20000, &r);
	check(got == 0 && r.status == 200 && r.body_len == TABLE_BYTES, "the third table is answered whole (status %d, %zu bytes)", r.status, r.body_len);
	resp_free(&r);
	check(metric(d.port, "posenc_slow_answers_cut_total") == 1, "one answer was cut");
	wait_finished(&slow, 5);
	check(slow.eof && slow.body < TABLE_BYTES, "the sprinter was cut (%zu of %u body bytes)", slow.body,
	      TABLE_BYTES);
	note("the refusals counted meanwhile: %.0f", metric(d.port, "posenc_response_budget_refused_total") - refused0);

	/* The steady reader goes on to its whole body, never cut. */
	wait_finished(&faster, 40);
	check(!faster.eof && faster.body == faster.want, "the steady reader got its whole body (%zu bytes)",
	      faster.body);
	check(metric(d.port, "posenc_slow_answers_cut_total") == 1, "still one answer cut");
	reader_end(&slow);
	reader_end(&faster);
	budget_zero_after(d.port, "the readers are gone");
	check(daemon_stop(&d, SIGTERM, 10) == 0, "posencd exits 0 on SIGTERM");
	cached_answer_not_cut(0);
	cached_answer_not_cut(1);
	shared_table_cut_together();
	chunked_stream_judged_by_its_length();
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
