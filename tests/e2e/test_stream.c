/* End-to-end tests of streamed answers (src/http/stream.c): a cold bin or npy table over 8 MiB is
 * sent while its job computes it. Its bytes are the core's whole table (pe_table_compute, and
 * pe_npy_write for npy) byte for byte; a second request during
 * the stream gets the same bytes and ETag; the cache holds the table afterwards (X-PE-Cache: hit);
 * a client that disconnects mid-stream has its job called off (posenc_streams_cancelled_total)
 * and the response budget returns to 0; a job that fails after its first block closes the
 * connection short of its Content-Length. The daemon is the test build (posencd-hooks): a job
 * waits after its first block while POSENC_TEST_STREAM_GATE's file exists and names its key, so
 * "during the stream" is an event, not a time. */
#include "support/pe_check.h"
#include "support/pe_daemon.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "posenc/posenc.h"

static struct pe_daemon D;
static char dir[] = "/tmp/posenc-stream-XXXXXX", gate[64], job_gate[64];

static void start_with(const char *const *args)
{
	ck_assert_ptr_nonnull(mkdtemp(strcpy(dir, "/tmp/posenc-stream-XXXXXX")));
	snprintf(gate, sizeof gate, "%s/gate", dir);
	snprintf(job_gate, sizeof job_gate, "%s/job_gate", dir);
	pe_spawn_hooks(1); /* only the test build honours the gates */
	setenv("POSENC_TEST_STREAM_GATE", gate, 1);
	setenv("POSENC_TEST_JOB_GATE", job_gate, 1);
	pe_daemon_start(&D, args);
}

static void start(void)
{
	static const char *const args[] = {"--workers", "2", "--cache-bytes", "128Mi", NULL};
	start_with(args);
}

static void stop(void)
{
	unlink(gate);
	unlink(job_gate);
	ck_assert_int_eq(pe_daemon_stop(&D, SIGTERM), 0);
	unsetenv("POSENC_TEST_STREAM_GATE");
	unsetenv("POSENC_TEST_JOB_GATE");
	pe_spawn_hooks(0);
	rmdir(dir);
}

static void gate_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static void gate_on(const char *text) { gate_file(gate, text); }

/* The table of query (format and dtype left out) as the core computes it whole: bin's bytes, or
 * npy's document. */
static char *core_table(const char *table, const char *const *kv, int npy, size_t *len)
{
	struct pe_params p;
	struct pe_shape s;
	struct pe_err err = {0};
	int overflow;
	pe_params_init(&p, pe_table_find(table));
	for (; *kv; kv += 2)
		ck_assert_int_eq(pe_params_set(&p, kv[0], kv[1], &err), 0);
	ck_assert_int_eq(pe_params_finish(&p, &err), 0);
	ck_assert_int_eq(pe_table_shape(&p, &s), 0);
	size_t n = pe_shape_count(&s, &overflow) * 4;
	char *t = malloc(n);
	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(pe_table_compute(&p, PE_F32, t, &err), 0);
	pe_params_destroy(&p);
	*len = n;
	if (!npy)
		return t;
	struct pe_buf b;
	struct pe_tensor_view v = {.shape = s, .dtype = PE_F32, .data = t};
	pe_buf_init(&b, (size_t)1 << 31);
	ck_assert_int_eq(pe_npy_write(&b, &v, &err), 0);
	free(t);
	return pe_buf_steal(&b, len);
}

/* ---- a raw client: one GET per connection, read at the test's own pace ---- */

struct raw {
	int fd;
	char head[4096];
	size_t content_length;
	char *body;
	size_t got;
};

static void raw_send(struct raw *c, const char *path)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(D.s.port)};
	char req[1024];
	memset(c, 0, sizeof *c);
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	c->fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(c->fd, 0);
	ck_assert_int_eq(connect(c->fd, (struct sockaddr *)&a, sizeof a), 0);
	int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
	ck_assert_int_eq(send(c->fd, req, (size_t)n, 0), n);
}

/* Read from c (up to 30 s without a byte): bytes, 0 at the peer's close, -1 on error or timeout. */
static ssize_t raw_read(struct raw *c, char *buf, size_t cap)
{
	struct pollfd p = {.fd = c->fd, .events = POLLIN};
	if (poll(&p, 1, 30000) != 1)
		return -1;
	return recv(c->fd, buf, cap, 0);
}

/* The status line and headers; the body bytes read with them are kept. The status. */
static int raw_head(struct raw *c)
{
	size_t n = 0;
	char *end = NULL;
	while (!end && n < sizeof c->head - 1) {
		ssize_t k = raw_read(c, c->head + n, sizeof c->head - 1 - n);
		ck_assert_int_gt(k, 0);
		n += (size_t)k;
		c->head[n] = 0;
		end = strstr(c->head, "\r\n\r\n");
	}
	ck_assert_ptr_nonnull(end);
	const char *cl = strcasestr(c->head, "\r\nContent-Length: ");
	ck_assert_ptr_nonnull(cl);
	c->content_length = strtoull(cl + 18, NULL, 10);
	c->body = malloc(c->content_length + 1);
	ck_assert_ptr_nonnull(c->body);
	size_t extra = n - (size_t)(end + 4 - c->head);
	memcpy(c->body, end + 4, extra);
	c->got = extra;
	end[2] = 0; /* the head ends at its last header's CRLF */
	return atoi(c->head + 9);
}

/* The rest of the body, until Content-Length or the peer's close: the bytes read in all. */
static size_t raw_body(struct raw *c)
{
	ssize_t k;
	while (c->got < c->content_length && (k = raw_read(c, c->body + c->got, c->content_length - c->got)) > 0)
		c->got += (size_t)k;
	return c->got;
}

static const char *raw_header(const struct raw *c, const char *name, char *buf, size_t cap)
{
	char key[64];
	snprintf(key, sizeof key, "\r\n%s: ", name);
	const char *v = strcasestr(c->head, key);
	if (!v)
		return NULL;
	v += strlen(key);
	size_t n = strcspn(v, "\r");
	n = n < cap - 1 ? n : cap - 1;
	memcpy(buf, v, n);
	buf[n] = 0;
	return buf;
}

static void raw_close(struct raw *c)
{
	close(c->fd);
	free(c->body);
}

/* Poll a metric until it equals want (20 s at most). */
static double metric_becomes(const char *name, double want)
{
	double v = pe_metric(&D, name);
	for (int i = 0; i < 2000 && v != want; i++) {
		usleep(10000);
		v = pe_metric(&D, name);
	}
	return v;
}

/* GET path: 200, X-PE-Cache cache, the n bytes of want; its ETag into etag. */
static void get_expect(const char *path, const char *cache, const char *want, size_t n, char etag[64])
{
	struct pe_resp r;
	char c[32];
	pe_get(&D, path, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(pe_resp_header(&r, "X-PE-Cache", c, sizeof c), cache);
	ck_assert_uint_eq(r.len, n);
	ck_assert(memcmp(r.body, want, n) == 0);
	ck_assert_ptr_nonnull(pe_resp_header(&r, "ETag", etag, 64));
	pe_resp_free(&r);
}

/* ---- the tests ---- */

/* Each table streams (posenc_streams_total), rank 3 (planes) too; each equals the core's whole
 * table and is a hit after. */
START_TEST(streamed_bytes_are_the_tables)
{
	static const char *const sin[] = {"len", "4096", "dim", "1024", NULL};
	static const char *const rope[] = {"len", "16384", "dim", "192", NULL};
	static const char *const s3d[] = {"frames", "4", "height", "32", "width", "32", "dim", "1024", NULL};
	static const char *const alibi[] = {"heads", "8", "q_len", "1000", NULL};
	static const struct {
		const char *path, *table;
		const char *const *kv;
		int npy, streams;
	} cases[] = {
		{"/v1/sinusoidal?len=4096&dim=1024&format=bin", "sinusoidal", sin, 0, 1},
		{"/v1/sinusoidal?len=4096&dim=1024&format=npy", "sinusoidal", sin, 1, 1},
		{"/v1/rope?len=16384&dim=192&format=bin", "rope", rope, 0, 1},
		{"/v1/sinusoidal3d?frames=4&height=32&width=32&dim=1024&format=npy", "sinusoidal3d", s3d, 1, 1},
		{"/v1/alibi?heads=8&q_len=1000&format=bin", "alibi", alibi, 0, 1},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		double streams = pe_metric(&D, "posenc_streams_total");
		char e1[64], e2[64];
		size_t n;
		char *want = core_table(cases[i].table, cases[i].kv, cases[i].npy, &n);
		get_expect(cases[i].path, "miss", want, n, e1);
		ck_assert_double_eq(pe_metric(&D, "posenc_streams_total"), streams + cases[i].streams);
		get_expect(cases[i].path, "hit", want, n, e2);
		ck_assert_str_eq(e1, e2);
		free(want);
	}
	ck_assert_double_eq(metric_becomes("posenc_response_budget_bytes", 0), 0);
}
END_TEST

/* A request that arrives while the job is held after its first block joins the stream: its
 * headers come before the job goes on, and both get the table, with one ETag. */
START_TEST(second_request_joins_the_stream)
{
	static const char *const kv[] = {"len", "4100", "dim", "1024", NULL};
	const char *path = "/v1/sinusoidal?len=4100&dim=1024&format=bin";
	size_t n;
	char *want = core_table("sinusoidal", kv, 0, &n);
	double joins = pe_metric(&D, "posenc_cache_joins_total");
	struct raw a, b;
	char e1[64], e2[64], c[32];
	gate_on("len=4100");
	raw_send(&a, path);
	ck_assert_int_eq(raw_head(&a), 200); /* the first block is out; the job waits at the gate */
	raw_send(&b, path);
	ck_assert_int_eq(raw_head(&b), 200); /* answered while the job still waits: from the stream */
	ck_assert_double_eq(pe_metric(&D, "posenc_cache_joins_total"), joins + 1);
	unlink(gate);
	ck_assert_uint_eq(raw_body(&a), n);
	ck_assert_uint_eq(raw_body(&b), n);
	ck_assert(memcmp(a.body, want, n) == 0);
	ck_assert(memcmp(b.body, want, n) == 0);
	ck_assert_str_eq(raw_header(&a, "ETag", e1, sizeof e1), raw_header(&b, "ETag", e2, sizeof e2));
	ck_assert_str_eq(raw_header(&b, "X-PE-Cache", c, sizeof c), "miss");
	raw_close(&a);
	raw_close(&b);
	get_expect(path, "hit", want, n, e1);
	ck_assert_str_eq(e1, e2);
	free(want);
	ck_assert_double_eq(metric_becomes("posenc_response_budget_bytes", 0), 0);
}
END_TEST

/* The only reader goes after the first block: the job is called off, its memory given back, and
 * nothing is cached; the table is computed whole again for the next request. */
START_TEST(disconnect_cancels_the_job)
{
	static const char *const kv[] = {"len", "4104", "dim", "1024", NULL};
	const char *path = "/v1/sinusoidal?len=4104&dim=1024&format=bin";
	double cancelled = pe_metric(&D, "posenc_streams_cancelled_total");
	struct raw a;
	gate_on("len=4104");
	raw_send(&a, path);
	ck_assert_int_eq(raw_head(&a), 200);
	struct linger hard = {.l_onoff = 1, .l_linger = 0}; /* a reset, as a killed client */
	setsockopt(a.fd, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
	raw_close(&a);
	unlink(gate);
	ck_assert_double_eq(metric_becomes("posenc_streams_cancelled_total", cancelled + 1), cancelled + 1);
	ck_assert_double_eq(metric_becomes("posenc_jobs_in_flight", 0), 0);
	ck_assert_double_eq(metric_becomes("posenc_response_budget_bytes", 0), 0);
	size_t n;
	char etag[64], *want = core_table("sinusoidal", kv, 0, &n);
	get_expect(path, "miss", want, n, etag);
	free(want);
}
END_TEST

/* A client that goes before the first block. Resumed at the first block, its request either reads
 * the stream, fails to send and leaves (the job is called off, nothing cached), or is closed by
 * libmicrohttpd before its handler runs: the stream's place for it is then given back when the
 * cache's fill drops the request's waiter, on the job's thread while the job holds the stream (the
 * stream's lock is recursive for this), and the table is cached. Which one depends on the order
 * libmicrohttpd sees the close in; either way the job ends and nothing is left held. */
START_TEST(client_gone_before_the_first_block)
{
	static const char *const kv[] = {"len", "4112", "dim", "1024", NULL};
	const char *path = "/v1/sinusoidal?len=4112&dim=1024&format=bin";
	double streams = pe_metric(&D, "posenc_streams_total");
	double cancelled = pe_metric(&D, "posenc_streams_cancelled_total");
	struct raw a;
	gate_file(job_gate, "len=4112");
	raw_send(&a, path);
	ck_assert_double_eq(metric_becomes("posenc_jobs_in_flight", 1), 1); /* held before it computes */
	close(a.fd);
	unlink(job_gate);
	ck_assert_double_eq(metric_becomes("posenc_streams_total", streams + 1), streams + 1);
	ck_assert_double_eq(metric_becomes("posenc_jobs_in_flight", 0), 0);
	ck_assert_double_eq(metric_becomes("posenc_response_budget_bytes", 0), 0);
	int called_off = pe_metric(&D, "posenc_streams_cancelled_total") == cancelled + 1;
	size_t n;
	char etag[64], *want = core_table("sinusoidal", kv, 0, &n);
	get_expect(path, called_off ? "miss" : "hit", want, n, etag);
	free(want);
}
END_TEST

/* A table larger than cache_bytes still streams, whole, and is not kept. */
START_TEST(too_large_to_cache_still_streams)
{
	static const char *const kv[] = {"len", "40960", "dim", "1024", NULL}; /* 160 MiB > 128 MiB */
	const char *path = "/v1/sinusoidal?len=40960&dim=1024&format=bin";
	double streams = pe_metric(&D, "posenc_streams_total");
	size_t n;
	char *want = core_table("sinusoidal", kv, 0, &n);
	char etag[64];
	for (int i = 0; i < 2; i++)
		get_expect(path, "miss", want, n, etag);
	ck_assert_double_eq(pe_metric(&D, "posenc_streams_total"), streams + 2);
	free(want);
	ck_assert_double_eq(metric_becomes("posenc_response_budget_bytes", 0), 0);
}
END_TEST

/* A job that fails after its first block (here: held past job_timeout) can only close the
 * connection: the 200 and its Content-Length have gone, the body stops short. */
START_TEST(failure_mid_stream_closes_the_connection)
{
	const char *path = "/v1/sinusoidal?len=4108&dim=1024&format=bin";
	struct raw a;
	gate_on("len=4108");
	raw_send(&a, path);
	ck_assert_int_eq(raw_head(&a), 200);
	ck_assert_double_eq(metric_becomes("posenc_jobs_in_flight", 1), 1);
	sleep(2); /* past job_timeout (1 s): not a timing assertion, the gate holds the job meanwhile */
	unlink(gate);
	ck_assert_uint_lt(raw_body(&a), a.content_length);
	raw_close(&a);
	ck_assert_double_eq(metric_becomes("posenc_jobs_in_flight", 0), 0);
	ck_assert_double_eq(metric_becomes("posenc_response_budget_bytes", 0), 0);
}
END_TEST

static void start_short_timeout(void)
{
	static const char *const args[] = {"--workers", "2", "--job-timeout", "1", NULL};
	start_with(args);
}

static Suite *stream_suite(void)
{
	Suite *s = suite_create("e2e_stream");
	TCase *tc = tcase_create("stream");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, start, stop);
	tcase_add_test(tc, streamed_bytes_are_the_tables);
	tcase_add_test(tc, second_request_joins_the_stream);
	tcase_add_test(tc, disconnect_cancels_the_job);
	tcase_add_test(tc, too_large_to_cache_still_streams);
	tcase_add_test(tc, client_gone_before_the_first_block);
	suite_add_tcase(s, tc);
	TCase *tf = tcase_create("failure");
	tcase_set_timeout(tf, 60);
	tcase_add_checked_fixture(tf, start_short_timeout, stop);
	tcase_add_test(tf, failure_mid_stream_closes_the_connection);
	suite_add_tcase(s, tf);
	return s;
}

PE_TEST_MAIN(stream_suite)
