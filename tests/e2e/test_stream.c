/* End-to-end tests of streamed answers (src/http/stream.c): a cold bin or npy table over 8 MiB is
 * sent while its job computes it, and so is JSON or CSV whose bound passes 8 MiB, with chunked
 * coding. Its bytes are the core's whole table (pe_table_compute, and pe_npy_write,
 * pe_json_write_table or pe_csv_write for the documents) byte for byte; a second request during
 * the stream gets the same bytes and ETag; the cache holds the table afterwards (X-PE-Cache: hit);
 * a client that disconnects mid-stream has its job called off (posenc_streams_cancelled_total)
 * and the response budget returns to 0; a job that fails after its first block closes the
 * connection short of its Content-Length. The daemon is the test build (posencd-hooks): a job
 * waits after its first block while POSENC_TEST_STREAM_GATE's file exists and names its key, so
 * "during the stream" is an event, not a time. */
#include "support/pe_check.h"
#include "support/pe_daemon.h"
#include "http/stream.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
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

enum doc { DOC_BIN, DOC_NPY, DOC_JSON, DOC_CSV };

/* The table of kv as the core computes it whole, f32 or f64, in the whole-table writer's document:
 * bin's bytes, npy's, JSON's (parameters in its head, as the server writes them) or CSV's. */
static char *core_doc(const char *table, const char *const *kv, enum doc doc, enum pe_dtype dt, size_t *len)
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
	size_t n = pe_shape_count(&s, &overflow) * pe_dtype_size(dt);
	char *t = malloc(n);
	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(pe_table_compute(&p, dt, t, &err), 0);
	*len = n;
	if (doc == DOC_BIN) {
		pe_params_destroy(&p);
		return t;
	}
	struct pe_buf b;
	struct pe_tensor_view v = {.shape = s, .dtype = dt, .data = t};
	pe_buf_init(&b, (size_t)1 << 31);
	if (doc == DOC_NPY)
		ck_assert_int_eq(pe_npy_write(&b, &v, &err), 0);
	else if (doc == DOC_JSON)
		ck_assert_int_eq(pe_json_write_table(&b, &p, &v, &err), 0);
	else
		ck_assert_int_eq(pe_csv_write(&b, &v, &err), 0);
	free(t);
	pe_params_destroy(&p);
	return pe_buf_steal(&b, len);
}

static char *core_table(const char *table, const char *const *kv, int npy, size_t *len)
{
	return core_doc(table, kv, npy ? DOC_NPY : DOC_BIN, PE_F32, len);
}

/* ---- a raw client: one GET per connection, read at the test's own pace ---- */

struct raw {
	int fd;
	char head[4096];
	size_t content_length; /* SIZE_MAX: none (chunked, or to the close) */
	int chunked;
	char *body;
	size_t got, cap;
	int complete; /* chunked: the last chunk came */
};

/* A new connection, its receive buffer rcvbuf bytes (0: the system's), that has sent req (one or
 * more requests, as they are). */
static void raw_send_text_rcvbuf(struct raw *c, const char *req, int rcvbuf)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(D.s.port)};
	memset(c, 0, sizeof *c);
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	c->fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(c->fd, 0);
	if (rcvbuf)
		setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
	ck_assert_int_eq(connect(c->fd, (struct sockaddr *)&a, sizeof a), 0);
	ck_assert_int_eq(send(c->fd, req, strlen(req), 0), (ssize_t)strlen(req));
}

static void raw_send_text(struct raw *c, const char *req) { raw_send_text_rcvbuf(c, req, 0); }

/* GET path on a connection whose receive buffer is 4 KiB: a first block larger than the server's
 * send buffer is still being sent (its reader not waiting for the next block) while the job is
 * held at the gate, so the server sees a reset of this client at once. */
static void raw_send_small_window(struct raw *c, const char *path)
{
	char req[512];
	snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path);
	raw_send_text_rcvbuf(c, req, 4096);
}

static void raw_send_version(struct raw *c, const char *path, const char *version)
{
	char req[1024];
	snprintf(req, sizeof req, "GET %s %s\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path, version);
	raw_send_text(c, req);
}

static void raw_send(struct raw *c, const char *path) { raw_send_version(c, path, "HTTP/1.1"); }

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
	c->chunked = strcasestr(c->head, "\r\nTransfer-Encoding: chunked\r\n") != NULL;
	c->content_length = cl ? strtoull(cl + 18, NULL, 10) : SIZE_MAX;
	c->cap = cl ? c->content_length + 1 : (size_t)1 << 20;
	c->body = malloc(c->cap);
	ck_assert_ptr_nonnull(c->body);
	size_t extra = n - (size_t)(end + 4 - c->head);
	memcpy(c->body, end + 4, extra);
	c->got = extra;
	end[2] = 0; /* the head ends at its last header's CRLF */
	return atoi(c->head + 9);
}

/* Chunked coding undone in place (RFC 9112 section 7.1): c->got becomes the data's length, and
 * c->complete says whether the last chunk and the end of the message came. A malformed size line
 * fails the test. */
static void raw_unchunk(struct raw *c)
{
	size_t in = 0, out = 0;
	c->complete = 0;
	for (;;) {
		const char *line = c->body + in, *crlf = memmem(line, c->got - in, "\r\n", 2);
		if (!crlf)
			break;
		char *digits_end;
		size_t n = strtoull(line, &digits_end, 16);
		ck_assert_msg(digits_end > line && digits_end == crlf, "bad chunk size line at %zu", in);
		size_t data = (size_t)(crlf + 2 - c->body);
		if (n == 0) {
			c->complete = c->got - data == 2 && memcmp(c->body + data, "\r\n", 2) == 0;
			break;
		}
		if (c->got - data < n + 2)
			break; /* cut short */
		ck_assert(memcmp(c->body + data + n, "\r\n", 2) == 0);
		memmove(c->body + out, c->body + data, n);
		out += n;
		in = data + n + 2;
	}
	c->got = out;
}

/* The rest of the body, until Content-Length or the peer's close (chunked coding undone): the
 * bytes of the body in all. */
static size_t raw_body(struct raw *c)
{
	ssize_t k;
	for (;;) {
		if (c->got == c->cap) {
			ck_assert(c->content_length == SIZE_MAX);
			c->body = realloc(c->body, c->cap *= 2);
			ck_assert_ptr_nonnull(c->body);
		}
		size_t room = (c->content_length == SIZE_MAX ? c->cap : c->content_length) - c->got;
		if (room == 0 || (k = raw_read(c, c->body + c->got, room)) <= 0)
			break;
		c->got += (size_t)k;
	}
	if (c->chunked)
		raw_unchunk(c);
	return c->got;
}

/* raw_body on a thread of its own. Its assertions end the test's process (check's fork mode, the
 * default here); under CK_FORK=no they would jump across threads. */
static void *read_body(void *c)
{
	raw_body(c);
	return NULL;
}

/* Both readers' bodies, read at once (a reader left waiting for connection_timeout while the other
 * reads is dropped, as it should be): each n bytes. */
static void read_both(struct raw *a, struct raw *b, size_t n)
{
	pthread_t tb;
	ck_assert_int_eq(pthread_create(&tb, NULL, read_body, b), 0);
	ck_assert_uint_eq(raw_body(a), n);
	pthread_join(tb, NULL);
	ck_assert_uint_eq(b->got, n);
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

/* Wait (up to 20 s) for metric name to reach at least `least`; its value then. */
static double metric_reaches(const char *name, double least)
{
	double v = pe_metric(&D, name);
	for (int i = 0; i < 2000 && v < least; i++) {
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

/* Reset c's connection (as a killed client) and wait until the server has let its reader go:
 * the reader's block leaves the response budget. */
static void raw_reset_until_gone(struct raw *c)
{
	double held = pe_metric(&D, "posenc_response_budget_bytes"), v = held;
	struct linger hard = {.l_onoff = 1, .l_linger = 0};
	setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
	raw_close(c);
	for (int i = 0; i < 2000 && v >= held; i++) {
		usleep(10000);
		v = pe_metric(&D, "posenc_response_budget_bytes");
	}
	ck_assert_double_lt(v, held);
}

/* The access log's line of the last request for path (waits for the log's flush, 250 ms); NULL
 * when there is none. */
static json_t *logged(const char *path)
{
	json_t *found = NULL;
	usleep(600000);
	char *log = pe_daemon_log(&D);
	for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n")) {
		json_t *j = json_loads(line, 0, NULL);
		const char *p = j ? json_string_value(json_object_get(j, "path")) : NULL;
		if (p && strcmp(p, path) == 0) {
			json_decref(found);
			found = j;
		} else {
			json_decref(j);
		}
	}
	free(log);
	return found;
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
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_response_budget_bytes", 0), 0);
}
END_TEST

/* Two readers of one stream: the first request, answered at the first block (the job then waits
 * at the gate gate_text names), and a second that joins the stream then: both get the n bytes of
 * want, complete, with one ETag, and the table is a hit after. */
static void two_readers_of_one_stream(const char *path, const char *gate_text, const char *want, size_t n)
{
	double joins = pe_metric(&D, "posenc_cache_joins_total");
	struct raw a, b;
	char e1[64], e2[64], c[32];
	gate_on(gate_text);
	raw_send(&a, path);
	ck_assert_int_eq(raw_head(&a), 200); /* the first block is out; the job waits at the gate */
	raw_send(&b, path);
	ck_assert_int_eq(raw_head(&b), 200); /* answered while the job still waits: from the stream */
	ck_assert_double_eq(pe_metric(&D, "posenc_cache_joins_total"), joins + 1);
	unlink(gate);
	read_both(&a, &b, n);
	ck_assert(!a.chunked || (a.complete && b.complete));
	ck_assert(memcmp(a.body, want, n) == 0);
	ck_assert(memcmp(b.body, want, n) == 0);
	ck_assert_str_eq(raw_header(&a, "ETag", e1, sizeof e1), raw_header(&b, "ETag", e2, sizeof e2));
	ck_assert_str_eq(raw_header(&b, "X-PE-Cache", c, sizeof c), "miss");
	raw_close(&a);
	raw_close(&b);
	get_expect(path, "hit", want, n, e1);
	ck_assert_str_eq(e1, e2);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_response_budget_bytes", 0), 0);
}

/* A request that arrives while a bin stream's job is held after its first block joins it. */
START_TEST(second_request_joins_the_stream)
{
	static const char *const kv[] = {"len", "4100", "dim", "1024", NULL};
	size_t n;
	char *want = core_table("sinusoidal", kv, 0, &n);
	two_readers_of_one_stream("/v1/sinusoidal?len=4100&dim=1024&format=bin", "len=4100", want, n);
	free(want);
}
END_TEST

/* Requests that come while the job is held before it computes (they join the key before the
 * stream's first block) are answered from the stream at that block, as the request that made the
 * job is: both heads arrive while the job waits at the stream gate, so neither waited for the
 * fill. The HTTP/1.0 one, which must have the length first, waits for the fill. */
START_TEST(requests_before_the_first_block_read_the_stream)
{
	static const char *const kv[] = {"len", "4120", "dim", "1024", NULL};
	const char *path = "/v1/sinusoidal?len=4120&dim=1024&format=bin";
	double joins = pe_metric(&D, "posenc_cache_joins_total");
	struct raw a, b, c;
	char e1[64], e2[64], e3[64], cache[32];
	size_t n;
	char *want = core_table("sinusoidal", kv, 0, &n);
	gate_file(job_gate, "len=4120");
	gate_on("len=4120");
	raw_send(&a, path);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_jobs_in_flight", 1), 1); /* held before it computes */
	raw_send(&b, path);
	raw_send_version(&c, path, "HTTP/1.0");
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_cache_joins_total", joins + 2), joins + 2);
	unlink(job_gate);
	ck_assert_int_eq(raw_head(&a), 200); /* the first block is out; the job waits at the gate */
	ck_assert_int_eq(raw_head(&b), 200); /* answered while the job still waits: from the stream */
	ck_assert_str_eq(raw_header(&b, "X-PE-Cache", cache, sizeof cache), "miss");
	unlink(gate);
	read_both(&a, &b, n);
	ck_assert_int_eq(raw_head(&c), 200);
	ck_assert_uint_eq(raw_body(&c), n);
	ck_assert(memcmp(a.body, want, n) == 0);
	ck_assert(memcmp(b.body, want, n) == 0);
	ck_assert(memcmp(c.body, want, n) == 0);
	ck_assert_str_eq(raw_header(&a, "ETag", e1, sizeof e1), raw_header(&b, "ETag", e2, sizeof e2));
	ck_assert_str_eq(e1, raw_header(&c, "ETag", e3, sizeof e3));
	raw_close(&a);
	raw_close(&b);
	raw_close(&c);
	get_expect(path, "hit", want, n, e2);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_response_budget_bytes", 0), 0);
	free(want);
}
END_TEST

/* Requests that came before the first block and left before it (reset) give their reader's place
 * and room back when they end, as the request that made the job does: with every client gone the
 * job is called off at its next block, and the budget returns to 0. (A 128 MiB table: its job runs
 * on for many blocks after the first.) */
START_TEST(early_joiners_that_leave_call_the_job_off)
{
	enum { JOINERS = 5 };
	const char *path = "/v1/sinusoidal?len=32768&dim=1024&offset=7&format=bin";
	double joins = pe_metric(&D, "posenc_cache_joins_total");
	double cancelled = pe_metric(&D, "posenc_streams_cancelled_total");
	struct raw c[JOINERS + 1];
	struct linger hard = {.l_onoff = 1, .l_linger = 0};
	gate_file(job_gate, "offset=7");
	raw_send(&c[0], path);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_jobs_in_flight", 1), 1);
	for (int i = 1; i <= JOINERS; i++)
		raw_send(&c[i], path);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_cache_joins_total", joins + JOINERS), joins + JOINERS);
	for (int i = 0; i <= JOINERS; i++) {
		setsockopt(c[i].fd, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
		raw_close(&c[i]);
	}
	unlink(job_gate);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_streams_cancelled_total", cancelled + 1), cancelled + 1);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_jobs_in_flight", 0), 0);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_response_budget_bytes", 0), 0);
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
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_streams_cancelled_total", cancelled + 1), cancelled + 1);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_jobs_in_flight", 0), 0);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_response_budget_bytes", 0), 0);
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
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_jobs_in_flight", 1), 1); /* held before it computes */
	close(a.fd);
	unlink(job_gate);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_streams_total", streams + 1), streams + 1);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_jobs_in_flight", 0), 0);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_response_budget_bytes", 0), 0);
	int called_off = pe_metric(&D, "posenc_streams_cancelled_total") == cancelled + 1;
	size_t n;
	char etag[64], *want = core_table("sinusoidal", kv, 0, &n);
	get_expect(path, called_off ? "miss" : "hit", want, n, etag);
	free(want);
}
END_TEST

/* A table larger than cache_bytes still streams, whole (and logged so), and is not kept. */
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
	json_t *j = logged(path); /* a Content-Length's stream ends at its length: whole, not cut short */
	ck_assert_ptr_nonnull(j);
	ck_assert_uint_eq((uint64_t)json_integer_value(json_object_get(j, "bytes")), n);
	ck_assert_ptr_null(json_object_get(j, "cut_short"));
	json_decref(j);
	free(want);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_response_budget_bytes", 0), 0);
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
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_jobs_in_flight", 1), 1);
	sleep(4); /* past job_timeout (3 s): not a timing assertion, the gate holds the job meanwhile */
	unlink(gate);
	ck_assert_uint_lt(raw_body(&a), a.content_length);
	size_t total = a.content_length;
	raw_close(&a);
	json_t *j = logged(path);
	ck_assert_ptr_nonnull(j);
	ck_assert(json_is_true(json_object_get(j, "cut_short")));
	ck_assert_uint_lt((uint64_t)json_integer_value(json_object_get(j, "bytes")), total);
	json_decref(j);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_jobs_in_flight", 0), 0);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_response_budget_bytes", 0), 0);
}
END_TEST

/* GET path on a raw connection (HTTP/1.1 or 1.0): 200, its headers into c, its whole body. */
static void raw_get(struct raw *c, const char *path, const char *version)
{
	raw_send_version(c, path, version);
	ck_assert_int_eq(raw_head(c), 200);
	raw_body(c);
}

/* JSON and CSV tables over 8 MiB stream with chunked coding (their length is known at their end),
 * every plane of a rank-3 table in order; each is the whole-table writer's document byte for byte,
 * complete (the last chunk came), and a hit after with a Content-Length and the same ETag. */
START_TEST(streamed_text_is_the_whole_tables)
{
	static const char *const sin[] = {"len", "4096", "dim", "1024", NULL};
	static const char *const sin64[] = {"len", "1500", "dim", "1000", NULL};
	static const char *const rope[] = {"len", "4096", "dim", "128", NULL};
	static const char *const s3d[] = {"frames", "4", "height", "32", "width", "32", "dim", "1024", NULL};
	static const struct {
		const char *path, *table;
		const char *const *kv;
		enum doc doc;
		enum pe_dtype dt;
	} cases[] = {
		{"/v1/sinusoidal?len=4096&dim=1024", "sinusoidal", sin, DOC_JSON, PE_F32},
		{"/v1/sinusoidal?len=4096&dim=1024&format=csv", "sinusoidal", sin, DOC_CSV, PE_F32},
		{"/v1/sinusoidal?len=1500&dim=1000&dtype=f64", "sinusoidal", sin64, DOC_JSON, PE_F64},
		{"/v1/rope?len=4096&dim=128", "rope", rope, DOC_JSON, PE_F32},
		{"/v1/rope?len=4096&dim=128&format=csv", "rope", rope, DOC_CSV, PE_F32},
		{"/v1/sinusoidal3d?frames=4&height=32&width=32&dim=1024", "sinusoidal3d", s3d, DOC_JSON, PE_F32},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		double streams = pe_metric(&D, "posenc_streams_total");
		char e1[64], e2[64], c[32];
		size_t n;
		struct raw a;
		char *want = core_doc(cases[i].table, cases[i].kv, cases[i].doc, cases[i].dt, &n);
		raw_get(&a, cases[i].path, "HTTP/1.1");
		ck_assert_msg(a.chunked, "%s: not chunked", cases[i].path);
		ck_assert_ptr_null(raw_header(&a, "Content-Length", c, sizeof c));
		ck_assert_str_eq(raw_header(&a, "X-PE-Cache", c, sizeof c), "miss");
		ck_assert_msg(a.complete, "%s: no last chunk", cases[i].path);
		ck_assert_uint_eq(a.got, n);
		ck_assert_msg(memcmp(a.body, want, n) == 0, "%s: other bytes than the whole table's", cases[i].path);
		ck_assert_double_eq(pe_metric(&D, "posenc_streams_total"), streams + 1);
		ck_assert_ptr_nonnull(raw_header(&a, "ETag", e1, sizeof e1));
		raw_close(&a);
		if (i == 0) { /* logged when it ended: every byte, not cut short */
			json_t *j = logged(cases[i].path);
			ck_assert_ptr_nonnull(j);
			ck_assert_int_eq(json_integer_value(json_object_get(j, "status")), 200);
			ck_assert_uint_eq((uint64_t)json_integer_value(json_object_get(j, "bytes")), n);
			ck_assert_ptr_null(json_object_get(j, "cut_short"));
			json_decref(j);
		}
		get_expect(cases[i].path, "hit", want, n, e2);
		ck_assert_str_eq(e1, e2);
		free(want);
	}
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_response_budget_bytes", 0), 0);
}
END_TEST

/* Text below the streaming size is sent whole, with its Content-Length. */
START_TEST(small_text_is_not_streamed)
{
	double streams = pe_metric(&D, "posenc_streams_total");
	struct raw a;
	char c[32];
	raw_get(&a, "/v1/sinusoidal?len=512&dim=768", "HTTP/1.1");
	ck_assert(!a.chunked);
	ck_assert_ptr_nonnull(raw_header(&a, "Content-Length", c, sizeof c));
	ck_assert_uint_eq(a.got, a.content_length);
	raw_close(&a);
	ck_assert_double_eq(pe_metric(&D, "posenc_streams_total"), streams);
}
END_TEST

/* The same for a JSON stream, chunked. */
START_TEST(second_request_joins_a_text_stream)
{
	static const char *const kv[] = {"len", "4120", "dim", "1024", NULL};
	size_t n;
	char *want = core_doc("sinusoidal", kv, DOC_JSON, PE_F32, &n);
	two_readers_of_one_stream("/v1/sinusoidal?len=4120&dim=1024", "len=4120", want, n);
	free(want);
}
END_TEST

/* The only reader of a CSV stream goes: the job is called off and gives its memory back. Rows of
 * 8192 floats make the first block (64 rows) ~5 MB of CSV, more than the connection's send buffer
 * and this client's small receive buffer hold, so the server is still sending it (not waiting for
 * the next block) when the client resets: it sees the reset while the job is held, and the reader's
 * memory leaves the budget before the job goes on. */
START_TEST(disconnect_cancels_a_text_job)
{
	double cancelled = pe_metric(&D, "posenc_streams_cancelled_total");
	struct raw a;
	gate_on("dim=8192");
	raw_send_small_window(&a, "/v1/sinusoidal?len=256&dim=8192&format=csv");
	ck_assert_int_eq(raw_head(&a), 200);
	ck_assert(a.chunked);
	raw_reset_until_gone(&a);
	unlink(gate);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_streams_cancelled_total", cancelled + 1), cancelled + 1);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_jobs_in_flight", 0), 0);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_response_budget_bytes", 0), 0);
	json_t *j = logged("/v1/sinusoidal?len=256&dim=8192&format=csv"); /* a 200 cut short, so logged */
	ck_assert_ptr_nonnull(j);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "status")), 200);
	ck_assert(json_is_true(json_object_get(j, "cut_short")));
	ck_assert_int_lt(json_integer_value(json_object_get(j, "bytes")), 256 * 8192);
	json_decref(j);
}
END_TEST

/* HTTP/1.0 has no chunked coding, and a close could not tell a cut answer from a whole one: a
 * cold JSON table over 8 MiB asked over HTTP/1.0 is computed whole, not streamed, and sent with
 * its Content-Length. */
START_TEST(http10_text_table_is_sent_whole)
{
	static const char *const kv[] = {"len", "4128", "dim", "1024", NULL};
	double streams = pe_metric(&D, "posenc_streams_total");
	size_t n;
	char *want = core_doc("sinusoidal", kv, DOC_JSON, PE_F32, &n);
	struct raw a;
	char c[32];
	raw_get(&a, "/v1/sinusoidal?len=4128&dim=1024", "HTTP/1.0");
	ck_assert(!a.chunked);
	ck_assert_ptr_nonnull(raw_header(&a, "Content-Length", c, sizeof c));
	ck_assert_uint_eq(a.content_length, n);
	ck_assert_uint_eq(a.got, n);
	ck_assert(memcmp(a.body, want, n) == 0);
	raw_close(&a);
	free(want);
	ck_assert_double_eq(pe_metric(&D, "posenc_streams_total"), streams);
}
END_TEST

/* HEAD of a cold streamed JSON table: its headers, no body, and the job leaves nothing held. */
START_TEST(head_of_a_text_stream)
{
	struct raw a;
	char c[32];
	raw_send_text(&a, "HEAD /v1/sinusoidal?len=4132&dim=1024 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
	ck_assert_int_eq(raw_head(&a), 200);
	ck_assert_str_eq(raw_header(&a, "X-PE-Shape", c, sizeof c), "4132,1024");
	ck_assert_uint_eq(raw_body(&a), 0);
	raw_close(&a);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_jobs_in_flight", 0), 0);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_response_budget_bytes", 0), 0);
}
END_TEST

/* A HEAD of a cold text table on a kept-alive connection, a GET pipelined behind it: the HEAD's
 * answer ends with its headers (no chunk, not even the last, follows them); what comes after is
 * the GET's answer or the connection's close. */
START_TEST(head_of_a_text_stream_has_no_body)
{
	struct raw a;
	char all[65536];
	size_t n = 0;
	ssize_t k;
	raw_send_text(&a, "HEAD /v1/sinusoidal?len=4140&dim=1024 HTTP/1.1\r\nHost: x\r\n\r\n"
			  "GET /v1/sinusoidal?len=4&dim=4 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
	while (n < sizeof all - 1 && (k = raw_read(&a, all + n, sizeof all - 1 - n)) > 0)
		n += (size_t)k;
	all[n] = 0;
	close(a.fd);
	ck_assert_msg(strncmp(all, "HTTP/1.1 200 ", 13) == 0, "%.32s", all);
	const char *end = strstr(all, "\r\n\r\n");
	ck_assert_ptr_nonnull(end);
	ck_assert_msg(end[4] == 0 || strncmp(end + 4, "HTTP/1.1 200 ", 13) == 0, "after the HEAD's headers: %.16s",
		      end + 4);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_jobs_in_flight", 0), 0);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_response_budget_bytes", 0), 0);
}
END_TEST

/* The only reader of a text stream resets; a request for the same table comes before the job's
 * next block and joins the stream: the job goes on (it is not called off) and the new request
 * reads the whole document. The first block (64 rows of 8192 floats, ~5 MB of CSV) is still being
 * sent when the first client resets, so the server sees the reset while the job is held. */
START_TEST(join_after_the_last_reader_left)
{
	static const char *const kv[] = {"len", "256", "dim", "8192", "offset", "3", NULL};
	const char *path = "/v1/sinusoidal?len=256&dim=8192&offset=3&format=csv";
	double cancelled = pe_metric(&D, "posenc_streams_cancelled_total");
	struct raw a, b;
	size_t n;
	char *want = core_doc("sinusoidal", kv, DOC_CSV, PE_F32, &n);
	gate_on("offset=3");
	raw_send_small_window(&a, path);
	ck_assert_int_eq(raw_head(&a), 200);
	raw_reset_until_gone(&a);
	raw_send(&b, path);
	ck_assert_int_eq(raw_head(&b), 200); /* joined: answered while the job still waits */
	unlink(gate);
	raw_body(&b);
	ck_assert_msg(b.complete, "the joined request's body stops after %zu bytes", b.got);
	ck_assert_uint_eq(b.got, n);
	ck_assert(memcmp(b.body, want, n) == 0);
	raw_close(&b);
	free(want);
	ck_assert_double_eq(pe_metric(&D, "posenc_streams_cancelled_total"), cancelled);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_jobs_in_flight", 0), 0);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_response_budget_bytes", 0), 0);
}
END_TEST

/* A text stream whose job fails after its first block ends without its last chunk. */
START_TEST(failure_mid_text_stream_has_no_last_chunk)
{
	struct raw a;
	gate_on("len=4136");
	raw_send(&a, "/v1/sinusoidal?len=4136&dim=1024");
	ck_assert_int_eq(raw_head(&a), 200);
	ck_assert(a.chunked);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_jobs_in_flight", 1), 1);
	sleep(4); /* past job_timeout (3 s), held at the gate meanwhile */
	unlink(gate);
	raw_body(&a);
	ck_assert(!a.complete);
	raw_close(&a);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_jobs_in_flight", 0), 0);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_response_budget_bytes", 0), 0);
}
END_TEST

/* HTTP/1.0 has no chunked coding, so the close that ends a text stream cannot tell a whole answer
 * from one whose job failed: a CSV cut after a block reads as a shorter table. A failure (held past
 * job_timeout) must therefore never reach an HTTP/1.0 client as a 200: it gets its problem, or
 * the whole document. A second HTTP/1.0 request, during an HTTP/1.1 request's stream, likewise. */
START_TEST(http10_never_gets_a_cut_text_table)
{
	struct raw a, b, c;
	gate_on("offset=77");
	raw_send_version(&a, "/v1/sinusoidal?len=4144&dim=1024&offset=77&format=csv", "HTTP/1.0");
	raw_send(&b, "/v1/sinusoidal?len=4148&dim=1024&offset=77&format=csv");
	ck_assert_int_eq(raw_head(&b), 200); /* an HTTP/1.1 stream, held after its first block */
	raw_send_version(&c, "/v1/sinusoidal?len=4148&dim=1024&offset=77&format=csv", "HTTP/1.0");
	sleep(4); /* past job_timeout (3 s): the gates hold the jobs meanwhile */
	unlink(gate);
	int sa = raw_head(&a), sc = raw_head(&c);
	ck_assert_msg(sa != 200 || (raw_body(&a), !a.chunked && a.got == a.content_length),
		      "HTTP/1.0 job's own request: a 200 ended by the close after %zu bytes", a.got);
	ck_assert_msg(sc != 200 || (raw_body(&c), c.content_length != SIZE_MAX && c.got == c.content_length),
		      "HTTP/1.0 joining a stream: a 200 ended by the close after %zu bytes", c.got);
	raw_body(&b);
	ck_assert(!b.complete);
	raw_close(&a);
	raw_close(&b);
	raw_close(&c);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_jobs_in_flight", 0), 0);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_response_budget_bytes", 0), 0);
}
END_TEST

/* Every reader of a stream holds a read block (256 KiB) while its answer lives. Many requests
 * joining one stream may not take the response budget past its limit: those that find it full are
 * answered 503 with Retry-After, as any answer that does not fit; the others read the stream. */
START_TEST(joiners_stay_within_the_budget)
{
	enum { JOINERS = 60 };
	const char *path = "/v1/sinusoidal?len=2304&dim=1024&offset=5&format=bin"; /* 9.4 MB */
	struct raw a, j[JOINERS];
	char v[16];
	int refused = 0;
	gate_on("offset=5");
	raw_send(&a, path);
	ck_assert_int_eq(raw_head(&a), 200); /* held after its first block */
	for (int i = 0; i < JOINERS; i++) {
		raw_send(&j[i], path);
		int status = raw_head(&j[i]);
		ck_assert(status == 200 || status == 503);
		if (status == 503) {
			ck_assert_ptr_nonnull(raw_header(&j[i], "Retry-After", v, sizeof v));
			refused++;
		}
	}
	double used = pe_metric(&D, "posenc_response_budget_bytes");
	double limit = pe_metric(&D, "posenc_response_budget_limit_bytes");
	ck_assert_msg(used <= limit, "%.0f bytes held on a budget of %.0f", used, limit);
	ck_assert_int_gt(refused, 0);
	unlink(gate);
	for (int i = 0; i < JOINERS; i++)
		raw_close(&j[i]);
	raw_close(&a);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_jobs_in_flight", 0), 0);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_response_budget_bytes", 0), 0);
}
END_TEST

/* Requests that come before the first block read the stream when their reader's room fits the
 * budget at that block, in the order they came; the rest wait for the fill, refused nothing: the
 * budget fills to within a reader's room of its limit while the job is held after its first
 * block, no more, the first joiner is answered then, every request gets the whole table, and no
 * reservation is counted as refused. */
START_TEST(early_joiners_that_do_not_fit_wait_for_the_fill)
{
	enum { JOINERS = 60 };
	static const char *const kv[] = {"len", "2304", "dim", "1024", "offset", "6", NULL};
	const char *path = "/v1/sinusoidal?len=2304&dim=1024&offset=6&format=bin"; /* 9.4 MB */
	double joins = pe_metric(&D, "posenc_cache_joins_total");
	double refused = pe_metric(&D, "posenc_response_budget_refused_total");
	double limit = pe_metric(&D, "posenc_response_budget_limit_bytes");
	struct raw a, j[JOINERS];
	size_t n;
	char *want = core_table("sinusoidal", kv, 0, &n);
	gate_file(job_gate, "offset=6");
	gate_on("offset=6");
	raw_send(&a, path);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_jobs_in_flight", 1), 1);
	for (int i = 0; i < JOINERS; i++) { /* one at a time: their order is known */
		raw_send(&j[i], path);
		ck_assert_double_eq(pe_metric_becomes(&D, "posenc_cache_joins_total", joins + i + 1), joins + i + 1);
	}
	unlink(job_gate);
	ck_assert_int_eq(raw_head(&a), 200); /* held after its first block */
	double used = metric_reaches("posenc_response_budget_bytes", limit - (double)PE_STREAM_READER_BYTES);
	ck_assert_msg(used > limit - (double)PE_STREAM_READER_BYTES && used <= limit,
		      "%.0f bytes held on a budget of %.0f: early joiners should fill it to within a reader", used, limit);
	ck_assert_int_eq(raw_head(&j[0]), 200); /* the first to come reads the stream: answered while held */
	unlink(gate);
	for (int i = 0; i < JOINERS; i++) {
		if (i > 0)
			ck_assert_int_eq(raw_head(&j[i]), 200);
		ck_assert_uint_eq(raw_body(&j[i]), n);
		ck_assert(memcmp(j[i].body, want, n) == 0);
		raw_close(&j[i]);
	}
	ck_assert_uint_eq(raw_body(&a), n);
	raw_close(&a);
	ck_assert_double_eq(pe_metric(&D, "posenc_response_budget_refused_total"), refused);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_jobs_in_flight", 0), 0);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_response_budget_bytes", 0), 0);
	free(want);
}
END_TEST

static void start_small_budget(void)
{
	static const char *const args[] = {"--workers", "2", "--response-budget-bytes", "16Mi", NULL};
	start_with(args);
}

static void start_short_timeout(void)
{
	/* 3 s: the first block must come before it, which takes longer under a sanitizer on a busy machine */
	static const char *const args[] = {"--workers", "2", "--job-timeout", "3", NULL};
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
	tcase_add_test(tc, requests_before_the_first_block_read_the_stream);
	tcase_add_test(tc, early_joiners_that_leave_call_the_job_off);
	tcase_add_test(tc, disconnect_cancels_the_job);
	tcase_add_test(tc, too_large_to_cache_still_streams);
	tcase_add_test(tc, client_gone_before_the_first_block);
	tcase_add_test(tc, streamed_text_is_the_whole_tables);
	tcase_add_test(tc, small_text_is_not_streamed);
	tcase_add_test(tc, second_request_joins_a_text_stream);
	tcase_add_test(tc, disconnect_cancels_a_text_job);
	tcase_add_test(tc, http10_text_table_is_sent_whole);
	tcase_add_test(tc, head_of_a_text_stream);
	tcase_add_test(tc, head_of_a_text_stream_has_no_body);
	tcase_add_test(tc, join_after_the_last_reader_left);
	suite_add_tcase(s, tc);
	TCase *tf = tcase_create("failure");
	tcase_set_timeout(tf, 60);
	tcase_add_checked_fixture(tf, start_short_timeout, stop);
	tcase_add_test(tf, failure_mid_stream_closes_the_connection);
	tcase_add_test(tf, failure_mid_text_stream_has_no_last_chunk);
	tcase_add_test(tf, http10_never_gets_a_cut_text_table);
	suite_add_tcase(s, tf);
	TCase *tb = tcase_create("budget");
	tcase_set_timeout(tb, 60);
	tcase_add_checked_fixture(tb, start_small_budget, stop);
	tcase_add_test(tb, joiners_stay_within_the_budget);
	tcase_add_test(tb, early_joiners_that_do_not_fit_wait_for_the_fill);
	suite_add_tcase(s, tb);
	return s;
}

PE_TEST_MAIN(stream_suite)
