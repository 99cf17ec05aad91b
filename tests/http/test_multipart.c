/* Unit tests of the multipart/form-data reader (src/http/multipart.c) over libmicrohttpd's own
 * MHD_PostProcessor: an in-process daemon without a listening socket is handed one end of a
 * socketpair per request; its access handler feeds the body to pe_mp_feed in slices of a chosen
 * size (1 byte, a few, all at once), so every split of a boundary, a CRLF or a header is tried.
 *
 * - What MHD itself reports (the reason the reader scans for delimiters): an empty part followed
 *   by a second part of the same name, and one part whose first bytes MHD held back, give the
 *   same iterator calls (offset 0, then offset 0 again).
 * - Every repeated name (x or positions, empty or not, in either order) is a 400 naming it; an
 *   unknown name likewise; a Content-Type the part does not take, or multipart/mixed, names the
 *   part and what it takes.
 * - Hostile framing: the boundary inside the data, at the start of a value, a preamble without a
 *   line break, no final boundary, a part header line over the buffer, 10^5 tiny parts, a boundary
 *   line among a part's headers. */
#include "support/pe_check.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http/multipart.h"

#define B "pe-bnd-7f3a"
#define CD "Content-Disposition: form-data; name="

struct outcome {
	int begun, code;
	char param[64], detail[256];
	char x[256], pos[256];
	size_t xlen, poslen;
	int has_x, has_pos;
};

struct conn_state {
	struct pe_mp m;
	size_t step;
	int failed;
	struct outcome *out;
};

static struct pe_budget *budget;
static size_t feed_step;
static struct outcome result;

static void record_err(struct conn_state *s, const struct pe_err *e)
{
	s->failed = 1;
	s->out->code = e->code;
	snprintf(s->out->param, sizeof s->out->param, "%s", e->param);
	snprintf(s->out->detail, sizeof s->out->detail, "%s", e->detail);
}

static void keep(struct pe_mp *m, const char *name, char *dst, size_t *len, int *has)
{
	struct pe_mp_part *p = pe_mp_get(m, name);
	*has = p != NULL;
	*len = p ? p->buf.len : 0;
	if (p && p->buf.len && p->buf.len <= 256)
		memcpy(dst, p->buf.data, p->buf.len);
}

/* The request's Content-Length (0: chunked), as the server's framing hands it to pe_mp_begin. */
static uint64_t declared_length(struct MHD_Connection *conn)
{
	const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	return cl ? strtoull(cl, NULL, 10) : 0;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
			       const char *version, const char *data, size_t *size, void **con_cls)
{
	struct conn_state *s = *con_cls;
	struct pe_err err = {0};
	if (!s) {
		s = calloc(1, sizeof *s);
		*con_cls = s;
		s->out = &result;
		s->step = feed_step;
		pe_mp_init(&s->m, 1 << 24, budget);
		pe_mp_want(&s->m, "x", 1 << 20, "application/x-npy, application/octet-stream");
		pe_mp_want(&s->m, "positions", 1 << 20, "application/x-npy");
		s->out->begun = 1;
		if (pe_mp_begin(&s->m, conn, declared_length(conn), &err) != 0)
			record_err(s, &err);
		return MHD_YES;
	}
	for (size_t i = 0; i < *size && !s->failed; i += s->step) {
		size_t n = *size - i < s->step ? *size - i : s->step;
		if (pe_mp_feed(&s->m, data + i, n) != 0)
			record_err(s, &s->m.err);
	}
	if (*size) {
		*size = 0;
		return MHD_YES;
	}
	if (!s->failed && pe_mp_end(&s->m, &err) != 0)
		record_err(s, &err);
	if (!s->failed) {
		keep(&s->m, "x", s->out->x, &s->out->xlen, &s->out->has_x);
		keep(&s->m, "positions", s->out->pos, &s->out->poslen, &s->out->has_pos);
	}
	struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
	enum MHD_Result rc = MHD_queue_response(conn, 200, r);
	MHD_destroy_response(r);
	return rc;
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	struct conn_state *s = *con_cls;
	if (s)
		pe_mp_destroy(&s->m);
	free(s);
	*con_cls = NULL;
}

/* One POST of body through an in-process daemon whose handler runs `it` (or the reader). */
static void exchange(MHD_AccessHandlerCallback h, const char *ctype, const char *body, size_t len)
{
	struct MHD_Daemon *d = MHD_start_daemon(MHD_USE_NO_LISTEN_SOCKET, 0, NULL, NULL, h, NULL,
						MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
						MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)65536, MHD_OPTION_END);
	ck_assert_ptr_nonnull(d);
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	int big = 8 << 20;
	setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
	setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
	char head[512];
	int hl = snprintf(head, sizeof head, "POST /v1/rope/apply HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
			  "Content-Type: %s\r\nContent-Length: %zu\r\n\r\n", ctype, len);
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	ck_assert_int_eq(MHD_add_connection(d, sv[0], (struct sockaddr *)&sin, sizeof sin), MHD_YES);
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	ck_assert_int_eq(write(sv[1], head, (size_t)hl), hl);
	size_t sent = 0;
	char buf[4096];
	for (int i = 0; i < 1000000; i++) {
		if (sent < len) {
			ssize_t w = write(sv[1], body + sent, len - sent);
			if (w > 0)
				sent += (size_t)w;
		}
		MHD_run(d);
		if (recv(sv[1], buf, sizeof buf, MSG_DONTWAIT) == 0)
			break;
	}
	close(sv[1]);
	for (int i = 0; i < 10; i++)
		MHD_run(d);
	MHD_stop_daemon(d);
}

static void post_form(const char *body, size_t len, size_t step)
{
	memset(&result, 0, sizeof result);
	feed_step = step;
	exchange(handler, "multipart/form-data; boundary=" B, body, len);
	ck_assert(result.begun);
	struct pe_budget_stats st;
	pe_budget_stats(budget, &st);
	ck_assert_uint_eq(st.used, 0);
}

static const size_t steps[] = {1, 2, 3, 5, 7, 13, 64, 1 << 20};
#define NSTEPS (sizeof steps / sizeof *steps)

static void refused(const char *body, const char *param, const char *says)
{
	for (size_t i = 0; i < NSTEPS; i++) {
		post_form(body, strlen(body), steps[i]);
		ck_assert_msg(result.code == PE_EBODY && !strcmp(result.param, param) && strstr(result.detail, says),
			      "step %zu: want a 400 naming %s saying \"%s\", got %d %s: %s", steps[i], param, says,
			      result.code, result.param, result.detail);
	}
}

static void accepted(const char *body, const char *x, size_t xlen, const char *pos)
{
	for (size_t i = 0; i < NSTEPS; i++) {
		post_form(body, strlen(body), steps[i]);
		ck_assert_msg(result.code == 0, "step %zu: %d %s: %s", steps[i], result.code, result.param, result.detail);
		ck_assert(result.has_x);
		ck_assert_uint_eq(result.xlen, xlen);
		ck_assert(memcmp(result.x, x, xlen) == 0);
		ck_assert_int_eq(result.has_pos, pos != NULL);
		if (pos)
			ck_assert(result.poslen == strlen(pos) && !memcmp(result.pos, pos, result.poslen));
	}
}

#define PART(name, data) "--" B "\r\n" CD "\"" name "\"\r\n\r\n" data "\r\n"
#define TYPED(name, type, data) "--" B "\r\n" CD "\"" name "\"; filename=\"f\"\r\nContent-Type: " type "\r\n\r\n" data "\r\n"
#define END "--" B "--\r\n"

/* ---- what MHD reports by itself ---- */

struct call {
	uint64_t off;
	size_t size;
};
static struct call calls[64];
static size_t ncalls;

static enum MHD_Result record_cb(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
				 const char *ctype, const char *te, const char *data, uint64_t off, size_t size)
{
	if (ncalls < 64)
		calls[ncalls++] = (struct call){off, size};
	return MHD_YES;
}

static enum MHD_Result raw_handler(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
				   const char *version, const char *data, size_t *size, void **con_cls)
{
	if (!*con_cls) {
		*con_cls = MHD_create_post_processor(conn, PE_MP_PP_BUFFER, record_cb, NULL);
		return MHD_YES;
	}
	struct MHD_PostProcessor *pp = *con_cls;
	for (size_t i = 0; i < *size; i += feed_step)
		MHD_post_process(pp, data + i, *size - i < feed_step ? *size - i : feed_step);
	if (*size) {
		*size = 0;
		return MHD_YES;
	}
	MHD_destroy_post_processor(pp);
	*con_cls = NULL;
	struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
	enum MHD_Result rc = MHD_queue_response(conn, 200, r);
	MHD_destroy_response(r);
	return rc;
}

static void raw_calls(const char *body, size_t step)
{
	ncalls = 0;
	feed_step = step;
	exchange(raw_handler, "multipart/form-data; boundary=" B, body, strlen(body));
}

START_TEST(mhd_cannot_tell)
{
	/* an empty x, then an x "hello": two calls at offset 0 */
	raw_calls(PART("x", "") PART("x", "hello") END, 1 << 20);
	ck_assert_uint_eq(ncalls, 2);
	ck_assert(calls[0].off == 0 && calls[0].size == 0 && calls[1].off == 0 && calls[1].size == 5);
	/* one x "hello" fed a byte at a time: also a call of 0 bytes at offset 0, then bytes at 0 */
	raw_calls(PART("x", "hello") END, 1);
	ck_assert_uint_ge(ncalls, 2);
	ck_assert(calls[0].off == 0 && calls[0].size == 0 && calls[1].off == 0 && calls[1].size > 0);
}
END_TEST

/* ---- names ---- */

START_TEST(repeated_names)
{
	refused(PART("x", "") PART("x", "hello") END, "x", "twice");
	refused(PART("x", "hello") PART("x", "") END, "x", "twice");
	refused(PART("x", "") PART("x", "") END, "x", "twice");
	refused(PART("x", "ab") PART("x", "cd") END, "x", "twice");
	refused(PART("x", "ab") PART("positions", "") PART("positions", "12") END, "positions", "twice");
	refused(PART("positions", "12") PART("x", "ab") PART("positions", "") END, "positions", "twice");
	refused(PART("positions", "") PART("positions", "") PART("x", "ab") END, "positions", "twice");
	refused(PART("x", "ab") PART("scale", "2") END, "scale", "unexpected part");
	refused(PART("x", "ab") PART("", "2") END, "body", "no name");
	refused("--" B "\r\nContent-Type: application/x-npy\r\n\r\nab\r\n" END, "body", "no name");
	accepted(PART("x", "") PART("positions", "") END, "", 0, "");
	accepted(PART("positions", "\r\n--") PART("x", "a\r\nb") END, "a\r\nb", 4, "\r\n--");
}
END_TEST

/* ---- types ---- */

START_TEST(part_types)
{
	refused(TYPED("x", "image/png", "ab") END, "x", "it takes application/x-npy, application/octet-stream");
	refused(TYPED("x", "application/octet-stream", "ab") TYPED("positions", "application/json", "[1]") END,
		"positions", "it takes application/x-npy");
	refused(PART("x", "ab") "--" B "\r\n" CD "\"positions\"\r\nContent-Transfer-Encoding: base64\r\n\r\nAAAA\r\n" END,
		"positions", "binary");
	accepted(TYPED("x", "Application/X-Npy; v=1", "ab") TYPED("positions", "application/x-npy", "cd") END, "ab", 2,
		 "cd");
	accepted(TYPED("x", " application/octet-stream", "ab") END, "ab", 2, NULL);
	/* nested parts under one name: an empty one, then one with data */
	refused("--" B "\r\n" CD "\"x\"\r\nContent-Type: multipart/mixed; boundary=inner\r\n\r\n"
		"--inner\r\nContent-Type: application/x-npy\r\n\r\n\r\n--inner\r\n\r\nhello\r\n--inner--\r\n" END,
		"x", "multipart/mixed");
	refused("--" B "\r\n" CD "\"x\"\r\ncontent-type: MULTIPART/MIXED; boundary=inner\r\n\r\n"
		"--inner\r\n\r\nab\r\n--inner\r\n\r\ncd\r\n--inner--\r\n" END,
		"x", "multipart/mixed");
}
END_TEST

/* ---- framing ---- */

START_TEST(boundaries)
{
	/* the boundary (with its CRLF --) inside x's data: MHD ends the part there; never one x */
	const char *inside = PART("x", "ab\r\n--" B "\r\ncd") END;
	for (size_t i = 0; i < NSTEPS; i++) {
		post_form(inside, strlen(inside), steps[i]);
		ck_assert_msg(result.code == PE_EBODY, "step %zu: %d %s", steps[i], result.code, result.detail);
	}
	/* the boundary's text without CRLF -- before it, and half a delimiter, are data */
	accepted(PART("x", B "\r\n-" B "\r-\n--" B "x") END, B "\r\n-" B "\r-\n--" B "x",
		 sizeof(B "\r\n-" B "\r-\n--" B "x") - 1, NULL);
	/* a value that starts with --boundary (CRLF of the empty line before it) */
	refused("--" B "\r\n" CD "\"x\"\r\n\r\n--" B "xyz\r\n" END, "body", "boundary");
	/* a preamble: after a line break, ignored; without one, refused */
	accepted("preamble\r\n" PART("x", "ab") END, "ab", 2, NULL);
	/* "--boundary" not starting a line is preamble: this body's first delimiter is its closing one */
	for (size_t i = 0; i < NSTEPS; i++) {
		const char *b = "preamble" PART("x", "ab") END;
		post_form(b, strlen(b), steps[i]);
		ck_assert_msg(result.code == 0 && !result.has_x, "step %zu: %d %s", steps[i], result.code, result.detail);
	}
	/* ... and a part after such a line, before the first real delimiter, is preamble too */
	accepted("x--" B "\r\n" CD "\"x\"\r\n\r\nevil\r\n" PART("x", "ab") END, "ab", 2, NULL);
	/* no final boundary, or none at all */
	refused(PART("x", "ab"), "body", "closing boundary");
	refused(PART("x", "ab") "--" B, "body", "closing boundary");
	refused("just bytes", "body", "no boundary line");
	/* bare LF line breaks, as MHD takes them */
	accepted("--" B "\n" CD "\"x\"\n\nab\r\n--" B "--\r\n", "ab", 2, NULL);
}
END_TEST

START_TEST(header_line_over_buffer)
{
	size_t n = PE_MP_PP_BUFFER + 100, cap = n + 256;
	char *b = malloc(cap);
	int at = snprintf(b, cap, "--" B "\r\n" CD "\"x\"\r\nX-Long: ");
	memset(b + at, 'a', n);
	snprintf(b + at + n, cap - (size_t)at - n, "\r\n\r\nab\r\n" END);
	post_form(b, strlen(b), 1 << 20);
	ck_assert_int_eq(result.code, PE_EBODY);
	ck_assert_str_eq(result.param, "body");
	/* short lines, over the buffer together: MHD would move its buffer once per line */
	at = snprintf(b, cap, "--" B "\r\n" CD "\"x\"\r\n");
	for (size_t i = 0; i < n / 2; i++)
		b[at++] = 'a', b[at++] = '\n';
	snprintf(b + at, cap - (size_t)at, "\r\nab\r\n" END);
	refused(b, "body", "header lines are over 8 KiB");
	free(b);
}
END_TEST

/* 10^5 tiny parts: the second x is refused at once, an unknown first name too. */
START_TEST(many_tiny_parts)
{
	size_t cap = 100000 * 100 + 64, at = 0;
	char *b = malloc(cap);
	for (int i = 0; i < 100000; i++)
		at += (size_t)snprintf(b + at, cap - at, PART("x", "1"));
	at += (size_t)snprintf(b + at, cap - at, END);
	post_form(b, at, 1 << 20);
	ck_assert_int_eq(result.code, PE_EBODY);
	ck_assert_str_eq(result.param, "x");
	at = 0;
	for (int i = 0; i < 100000; i++)
		at += (size_t)snprintf(b + at, cap - at, "--" B "\r\n" CD "\"p%d\"\r\n\r\n\r\n", i);
	at += (size_t)snprintf(b + at, cap - at, END);
	post_form(b, at, 4096);
	ck_assert_int_eq(result.code, PE_EBODY);
	ck_assert_str_eq(result.param, "p0");
	free(b);
}
END_TEST

/* A boundary line inside a part's headers: MHD reads it as a header line of that part (it ends
 * no part), so the scan must not count it either. Before, "--B--" there put the scan in its
 * closed state while MHD went on: an empty x, then a second x "evil" passed as one x, "evil". */
START_TEST(boundary_line_in_headers)
{
	refused("--" B "\r\n" CD "\"x\"\r\n--" B "--\r\n\r\n\r\n--" B "\r\n" CD "\"x\"\r\n\r\nevil\r\n" END, "body",
		"boundary");
	refused("--" B "\r\n" CD "\"x\"\r\n--" B "\r\n\r\nab\r\n" END, "body", "boundary");
	refused("--" B "\r\n--" B "\r\n" CD "\"x\"\r\n\r\nab\r\n" END, "body", "boundary");
	/* the same text in a value is data, and after the empty line a value may start with CRLF */
	accepted(PART("x", "\r\n-" B) END, "\r\n-" B, sizeof("\r\n-" B) - 1, NULL);
}
END_TEST

static Suite *multipart_suite(void)
{
	Suite *s = suite_create("http_multipart");
	TCase *tc = tcase_create("multipart");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, mhd_cannot_tell);
	tcase_add_test(tc, repeated_names);
	tcase_add_test(tc, part_types);
	tcase_add_test(tc, boundaries);
	tcase_add_test(tc, header_line_over_buffer);
	tcase_add_test(tc, many_tiny_parts);
	tcase_add_test(tc, boundary_line_in_headers);
	suite_add_tcase(s, tc);
	budget = pe_budget_new((size_t)256 << 20);
	return s;
}

PE_TEST_MAIN(multipart_suite)
