/* A chunked body the response budget can never hold is a 413, as the same body with Content-Length
 * is, with the same figure; a chunked body it can hold is served (an attack: on an idle daemon with
 * --response-budget-bytes 1Mi, chunked bodies got 503 "retry later" on every try: the server
 * reserved each increment of the body's buffer, and each was below the whole budget).
 *
 * With --response-budget-bytes 1Mi --cache-bytes 0, to /v1/rope/apply, each body sent with
 * Content-Length and chunked (64 KiB and 4 KiB chunks), three times each:
 *  - npy bodies of 1048704 and 2000000 bytes (past the budget by themselves), the second as a
 *    multipart body's x part, and a multipart body of 1040099 bytes (its part and the post
 *    processor's 40 KiB past the budget): 413 naming body, the detail naming the body's whole
 *    size, the same for both framings;
 *  - a raw body of 1048568 bytes, within the budget but not its block: 413 naming body, the
 *    transform's figure, the same for both framings;
 *  - a 528232-byte npy body (f32 [1, 1, 66013, 2]) with dtype=f64: the body fits, but the job's
 *    need does not: 413 naming dtype, the detail (its figure) the same for both framings;
 *  - npy bodies of 600128 and 1040128 bytes answered in place: 200 with the whole answer, chunked
 *    as with Content-Length (the buffer's doubling past the budget refused them too);
 * and the budget's gauge back at 0 after each. */
#include "support/pe_fault.h"

#define MIB ((size_t)1 << 20)
#define TRIES 3

#define FORM "multipart/form-data; boundary=" BOUNDARY
#define BOUNDARY "pe413"

/* POST body to path on a new connection, as ctype (NULL: raw float32 when the path gives its
 * shape, else npy): with Content-Length (chunk 0) or chunked in pieces of chunk bytes, then its
 * answer into r. 0 when a whole answer arrived. */
static int post_body(int port, const char *path, const char *ctype, const char *body, size_t len, size_t chunk,
		     struct resp *r)
{
	memset(r, 0, sizeof *r);
	int fd = tcp_connect(port, "127.0.0.1");
	if (fd < 0)
		return -1;
	char head[512], size[32];
	int n = snprintf(head, sizeof head, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
			 "Content-Type: %s\r\n", path,
			 ctype ? ctype : strstr(path, "shape=") ? "application/octet-stream" : "application/x-npy");
	if (chunk)
		n += snprintf(head + n, sizeof head - (size_t)n, "Transfer-Encoding: chunked\r\n\r\n");
	else
		n += snprintf(head + n, sizeof head - (size_t)n, "Content-Length: %zu\r\n\r\n", len);
	int rc = send_all(fd, head, (size_t)n);
	for (size_t off = 0; rc == 0 && chunk && off < len; off += chunk) {
		size_t k = len - off < chunk ? len - off : chunk;
		int sl = snprintf(size, sizeof size, "%zx\r\n", k);
		rc = send_all(fd, size, (size_t)sl) || send_all(fd, body + off, k) || send_all(fd, "\r\n", 2);
	}
	if (rc == 0)
		rc = chunk ? send_all(fd, "0\r\n\r\n", 5) : send_all(fd, body, len);
	if (rc == 0)
		rc = read_response(fd, r, 60000, 4 * MIB);
	close(fd);
	return rc;
}

/* The problem document's "detail" into out ("" when absent). */
static void detail_of(const struct resp *r, char *out, size_t cap)
{
	const char *d = r->body ? strstr(r->body, "\"detail\":\"") : NULL;
	const char *e = d ? strchr(d + 10, '"') : NULL;
	size_t n = e ? (size_t)(e - d - 10) : 0;
	if (n >= cap)
		n = cap - 1;
	memcpy(out, d ? d + 10 : "", n);
	out[n] = 0;
}

/* The body sent TRIES times with Content-Length and chunked in each of chunks: 413 naming param
 * every time, each detail the first one's (which names figure). */
static void refused_alike(int port, const char *path, const char *ctype, const char *body, size_t len,
			  const char *param, const char *figure)
{
	static const size_t chunks[] = {0, 65536, 4096};
	char first[512] = "", d[512];
	for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++)
		for (int t = 0; t < TRIES; t++) {
			struct resp r;
			int got = post_body(port, path, ctype, body, len, chunks[c], &r);
			detail_of(&r, d, sizeof d);
			if (!*first)
				snprintf(first, sizeof first, "%s", d);
			check(got == 0 && is_problem(&r, 413, param) && *d && !strcmp(d, first),
			      "%s, a %zu-byte body %s%zu, try %d: %d naming %s, detail \"%s\" (first: \"%s\")", path, len,
			      chunks[c] ? "chunked in " : "Content-Length ", chunks[c] ? chunks[c] : len, t + 1, r.status,
			      param, d, first);
			resp_free(&r);
			budget_zero_after(port, "after a refused body");
		}
	check(strstr(first, figure) != NULL, "%s, a %zu-byte body: the detail names %s: \"%s\"", path, len, figure,
	      first);
}

/* The body served 200 with an answer as large as itself (rope/apply in place), with
 * Content-Length and chunked in 4 KiB pieces. */
static void served_alike(int port, const char *body, size_t len)
{
	static const size_t chunks[] = {0, 4096, 65536};
	for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++) {
		struct resp r;
		int got = post_body(port, "/v1/rope/apply", NULL, body, len, chunks[c], &r);
		check(got == 0 && r.status == 200 && r.body_len == len, "a %zu-byte body %s%zu: %d with %zu bytes %.200s",
		      len, chunks[c] ? "chunked in " : "Content-Length ", chunks[c] ? chunks[c] : len, r.status,
		      r.body_len, r.status == 200 ? "" : r.body ? r.body : "");
		resp_free(&r);
		budget_zero_after(port, "after a served body");
	}
}

static int scenario(void)
{
	fault_init("chunked_413", 300);
	struct pe_spawn d;
	const char *args[] = {"--cache-bytes", "0", "--response-budget-bytes", "1Mi", NULL};
	daemon_start(&d, args);
	size_t cap = 2 * MIB;
	char *body = malloc(cap), figure[64];

	/* bodies past the whole budget by themselves: the figure is the body's size */
	static const int past[] = {131072, 249984}; /* 1048704 and 2000000 bytes */
	for (size_t i = 0; body && i < sizeof past / sizeof *past; i++) {
		int shape[] = {1, 1, past[i], 2};
		size_t len = npy_f32_filled(body, cap, shape, 4, 0.5f);
		snprintf(figure, sizeof figure, "a body of %zu bytes", len);
		refused_alike(d.port, "/v1/rope/apply", NULL, body, len, "body", figure);
	}

	/* multipart bodies, their parts holding their own bytes: the 2000000-byte npy as x (chunked,
	 * it was 503 on every try: a helper's attack), and a 1040000-byte one, whose body is within
	 * the budget but whose part and post processor (40 KiB) are not (503 in both framings) */
	static const int parts[] = {249984, 129984};
	for (size_t i = 0; body && i < sizeof parts / sizeof *parts; i++) {
		static const char head[] = "--" BOUNDARY "\r\nContent-Disposition: form-data; name=\"x\"\r\n"
					   "Content-Type: application/x-npy\r\n\r\n",
				  tail[] = "\r\n--" BOUNDARY "--\r\n";
		int shape[] = {1, 1, parts[i], 2};
		size_t npy = npy_f32_filled(body + sizeof head - 1, cap - 64, shape, 4, 0.5f),
		       len = sizeof head - 1 + npy + sizeof tail - 1;
		memcpy(body, head, sizeof head - 1);
		memcpy(body + sizeof head - 1 + npy, tail, sizeof tail - 1);
		snprintf(figure, sizeof figure, "a body of %zu bytes", len);
		refused_alike(d.port, "/v1/rope/apply", FORM, body, len, "body", figure);
	}

	/* a body within the budget in bytes whose block is not (its figure: pe_http_body_figure) */
	if (body) {
		memset(body, 0, 1048568);
		refused_alike(d.port, "/v1/rope/apply?shape=1,1,131071,2", NULL, body, 1048568, "body",
			      "more than response_budget_bytes (1048576)");
	}

	/* a body that fits, for a job whose need can never fit */
	int need_past[] = {1, 1, 66013, 2};
	size_t len = body ? npy_f32_filled(body, cap, need_past, 4, 0.5f) : 0;
	refused_alike(d.port, "/v1/rope/apply?dtype=f64", NULL, body, len, "dtype",
		      "more than response_budget_bytes (1048576)");

	/* bodies that fit, past half the budget (a doubled buffer would not) */
	static const int fit[] = {75000, 130000}; /* 600128 and 1040128 bytes */
	for (size_t i = 0; body && i < sizeof fit / sizeof *fit; i++) {
		int shape[] = {1, 1, fit[i], 2};
		served_alike(d.port, body, npy_f32_filled(body, cap, shape, 4, 0.5f));
	}
	free(body);
	check(daemon_alive(&d), "daemon alive");
	int st = daemon_stop(&d, SIGTERM, 30);
	check(st == 0, "exit status %d after SIGTERM", st);
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
