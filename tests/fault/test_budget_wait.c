/* The response budget's one waiter (pe_budget_take_wait) and the transforms' shares (transform.c
 * open_share) under attack, against daemons with cache_bytes 0 (every table a miss, every answer
 * on the budget while it is sent). The transform that waits is rope/apply of a float32 .npy
 * answered as float64 .npy: five times its body in all, four of them beyond its body.
 *  1. The body counted as the budget holds it: with a 5.5 MiB budget, that transform of a 1 MiB
 *     body sent chunked (the server reserves a chunked body's whole doubled block, ~2 MiB) on an
 *     idle daemon is a 200. Before, the job counted its body by its length, waited for 4 MiB the
 *     budget never had beside its own block, kept them back from every other request meanwhile (a
 *     2x2 table miss: 503) and answered 503 "retry shortly" after 2 s, on every retry.
 * The others run with a 24 MiB budget, a 4 MiB body (20 MiB in all) and slow readers of 8 MiB
 * answers (more than the kernel's send buffer takes, so the answer stays held):
 *  2. A waiter that cannot be satisfied (a slow reader holds 8 MiB): while it waits
 *     /healthz is 200, a second would-be waiter is refused before the first is answered; the
 *     first is a 503 problem with Retry-After naming no parameter, within 10 s; then a small miss
 *     is served while the reader still holds; a waiter whose client resets ends its wait as well,
 *     and the budget is back at 0 once the reader is reset.
 *  3. Accounting: after each of these the budget gauge returns to 0: answers that are the body
 *     (npy, bin), gzip'd JSON, f16 -> f32, sinusoidal concat, NaN in the body and an xscale
 *     overflow (400s after the share opened), a form with positions, and slow readers of a
 *     transform's 8 MiB answer (an encoded one, and the body itself) reset mid-answer.
 *  4. job_timeout (1 s) passing while the job waits: a 503 problem, the one worker free again.
 *  5. SIGTERM while a job waits (shutdown_timeout 1): exit 0 within 10 s, the waiter a 503
 *     problem naming no parameter.
 *  6. A budget of exactly a transform's need (the server's own 413 says how much, from a 1 MiB
 *     budget) serves it: float16 in, float64 out, reshaped (sinusoidal concat), and widened in
 *     place (rope). Before, the share left out the blocks' rounding (a mapping's last page each):
 *     the output block spilled whole to the parent, which had no room: 503 on every try.
 *  7. gzip'd CSV at exactly its need. Before, the uncompressed text's buffer doubled inside the
 *     job's share (the writer's head came first, then one reservation of the estimate doubled
 *     from that small block: 8 MiB for 4.9 MB), so the compressed copy spilled past the share: 503
 *     on every try. pe_buf now takes exactly a reservation past twice its block (test_buf
 *     big_reserve_exact).
 *  8. A chain of waiters (one client posting the waiting transform again as soon as it is
 *     answered, beside one slow reader of 8 MiB): most small misses are served meanwhile. Before,
 *     a waiter's bytes were kept back from every take and 5 of 553 were served; now takes under
 *     PE_BUDGET_SMALL_TAKE pass it. */
#include "support/pe_fault.h"
#include "e2e/test_apply_positions_form.h"

#include <math.h>

#define MIB (1024L * 1024L)
#define SMALL_BUDGET "5632Ki"
#define SMALL_SEQ 32768 /* x is [1, 1, seq, 8] float32: 1 MiB */
#define BUDGET "24Mi"
#define SEQ 131072 /* 4 MiB */
#define WAIT_PATH "/v1/rope/apply?format=npy&dtype=f64"
#define NPY "Content-Type: application/x-npy\r\n"

static char *x_npy(int seq, float v, size_t *len)
{
	size_t cap = (size_t)seq * 8 * 4 + 256;
	char *b = malloc(cap);
	int shape[] = {1, 1, seq, 8};
	*len = b ? npy_f32_filled(b, cap, shape, 4, v) : 0;
	return b;
}

/* Send a request without reading its answer: the socket, or -1. */
static int send_only(int port, const char *path, const char *headers, const char *body, size_t len, int chunked)
{
	int fd = tcp_connect(port, NULL);
	char head[1024];
	int hl = snprintf(head, sizeof head, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s", path, headers);
	if (chunked)
		hl += snprintf(head + hl, sizeof head - (size_t)hl, "Transfer-Encoding: chunked\r\n\r\n");
	else
		hl += snprintf(head + hl, sizeof head - (size_t)hl, "Content-Length: %zu\r\n\r\n", len);
	int ok = fd >= 0 && send_all(fd, head, (size_t)hl) == 0;
	for (size_t off = 0; ok && chunked && off < len; off += 65536) {
		size_t n = len - off < 65536 ? len - off : 65536;
		char sz[32];
		int sl = snprintf(sz, sizeof sz, "%zx\r\n", n);
		ok = send_all(fd, sz, (size_t)sl) == 0 && send_all(fd, body + off, n) == 0 && send_all(fd, "\r\n", 2) == 0;
	}
	ok = ok && (chunked ? send_all(fd, "0\r\n\r\n", 5) == 0 : send_all(fd, body, len) == 0);
	if (!ok && fd >= 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* A 2x2 table miss (the offset varies; the cache keeps nothing anyway): its status. */
static int miss_of(int port, int len)
{
	static int offset;
	char path[128];
	struct resp r;
	snprintf(path, sizeof path, "/v1/sinusoidal?len=%d&dim=512&format=bin&offset=%d", len, ++offset);
	int st = http_get(port, path, 10000, &r) == 0 ? r.status : 0;
	resp_free(&r);
	return st;
}

/* A cold 1x512 table (2 KiB, under PE_BUDGET_SMALL_TAKE: it passes a waiter's kept-back bytes),
 * and a cold 64x512 one (128 KiB: refused while a waiter keeps its bytes back). */
static int small_miss(int port) { return miss_of(port, 1); }
static int medium_miss(int port) { return miss_of(port, 64); }

/* Is a job waiting for its share? While one does, its bytes are kept back and a medium miss is
 * refused: poll for that (the wait lasts 2 s) while fd has no answer yet. */
static int waiting_seen(int port, int fd)
{
	double end = now_s() + 10;
	while (now_s() < end) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 0) > 0)
			return 0;
		if (medium_miss(port) == 503)
			return 1;
	}
	return 0;
}

static void start(struct pe_spawn *d, const char *budget, const char *job_timeout, const char *shutdown_timeout,
		  const char *workers)
{
	const char *args[] = {"--cache-bytes", "0", "--response-budget-bytes", budget, "--workers", workers,
			      "--job-timeout", job_timeout, "--shutdown-timeout", shutdown_timeout,
			      "--connection-timeout", "120", NULL};
	daemon_start(d, args);
}

static void stop(struct pe_spawn *d)
{
	int st = daemon_stop(d, SIGTERM, 30);
	check(st == 0, "exit status %d after SIGTERM", st);
}

/* 1. */
static void chunked_body_counted(int port)
{
	size_t len;
	char *x = x_npy(SMALL_SEQ, 0.5f, &len);
	for (int t = 0; t < 2; t++) {
		int fd = send_only(port, WAIT_PATH, NPY, x, len, 1);
		struct resp r = {0};
		int got = fd >= 0 ? read_response(fd, &r, 30000, 64 * MIB) : -1;
		check(got == 0 && r.status == 200 && r.body_len > (size_t)SMALL_SEQ * 8 * 8,
		      "a chunked 1 MiB body whose transform needs ~5 MiB of a 5.5 MiB budget, try %d: 200 on an idle "
		      "daemon (%d %.120s)", t + 1, r.status, r.status != 200 && r.body ? r.body : "");
		resp_free(&r);
		if (fd >= 0)
			close(fd);
		budget_zero_after(port, "the chunked transform");
	}
	struct resp r;
	int got = http_request(port, NULL, "POST", WAIT_PATH, NPY, x, len, 30000, &r);
	check(got == 0 && r.status == 200, "the same body with Content-Length: 200 (%d)", r.status);
	resp_free(&r);
	budget_zero_after(port, "the same with Content-Length");
	free(x);
}

/* 2. */
static void unsatisfiable_waiter(int port)
{
	size_t len;
	char *x = x_npy(SEQ, 0.5f, &len);
	int hold = hold_8mib_answer(port);
	int w1 = send_only(port, WAIT_PATH, NPY, x, len, 0);
	check(w1 >= 0 && waiting_seen(port, w1), "the transform waits for its share (a 128 KiB miss is refused meanwhile)");
	check(small_miss(port) == 200, "a 2 KiB miss meanwhile: served (under PE_BUDGET_SMALL_TAKE, it passes the waiter)");
	struct resp r, h;
	int hz = http_get(port, "/healthz", 10000, &h);
	check(hz == 0 && h.status == 200, "GET /healthz while it waits: 200 (%d)", h.status);
	resp_free(&h);
	int got = http_request(port, NULL, "POST", WAIT_PATH, NPY, x, len, 30000, &r);
	struct pollfd p = {.fd = w1, .events = POLLIN};
	int first_silent = w1 >= 0 && poll(&p, 1, 0) == 0;
	char ra[32];
	check(got == 0 && is_problem(&r, 503, "body") && resp_header(&r, "Retry-After", ra, sizeof ra) && first_silent,
	      "another transform meanwhile: its body refused at once (503 + Retry-After naming body, before the "
	      "waiter is answered: the bytes kept back leave no room for it) (%d %.120s)", r.status, r.body ? r.body : "");
	resp_free(&r);
	double t0 = now_s();
	got = w1 >= 0 ? read_response(w1, &r, 30000, MIB) : -1;
	check(got == 0 && busy_problem_of(&r) && now_s() - t0 < 10,
	      "the waiter that cannot be satisfied: 503 problem + Retry-After naming no parameter, within 10 s (%d %.120s)",
	      r.status, r.body ? r.body : "");
	resp_free(&r);
	if (w1 >= 0)
		close(w1);
	check(small_miss(port) == 200, "after the wait a small miss is served while the reader still holds 8 MiB");
	int w3 = send_only(port, WAIT_PATH, NPY, x, len, 0);
	check(w3 >= 0 && waiting_seen(port, w3), "another transform waits for its share");
	if (w3 >= 0)
		tcp_abort(w3);
	double end = now_s() + 10;
	while (now_s() < end && small_miss(port) != 200)
		sleep_s(0.05);
	check(small_miss(port) == 200, "its client reset while it waits: the wait ends, small misses are served again");
	if (hold >= 0)
		tcp_abort(hold);
	budget_zero_after(port, "the slow reader reset after the waiter");
	got = http_request(port, NULL, "POST", WAIT_PATH, NPY, x, len, 30000, &r);
	check(got == 0 && r.status == 200, "the same transform once the reader is gone: 200 (%d)", r.status);
	resp_free(&r);
	budget_zero_after(port, "the transform served");
	free(x);
}

/* 3: one request, its status (and param for a problem), then the gauge. */
static void one(int port, const char *what, const char *path, const char *headers, const void *body, size_t len,
		int status, const char *param)
{
	struct resp r;
	int got = http_request(port, NULL, "POST", path, headers, body, len, 30000, &r);
	check(got == 0 && (status == 200 ? r.status == 200 : is_problem(&r, status, param)), "%s: %d%s%s (%d %.120s)",
	      what, status, param ? " naming " : "", param ? param : "", r.status, r.status != 200 && r.body ? r.body : "");
	resp_free(&r);
	budget_zero_after(port, what);
}

/* A [rows, cols] float16 .npy, every element 0.5 (caller frees). */
static char *f16_npy(int rows, int cols, size_t *len)
{
	char *b = malloc((size_t)rows * (size_t)cols * 4 + 256);
	int shape[] = {rows, cols};
	size_t n = npy_f32_filled(b, (size_t)rows * (size_t)cols * 4 + 256, shape, 2, 0.0f);
	char *descr = memmem(b, n, "<f4", 3);
	descr[2] = '2';
	size_t data = n - (size_t)rows * (size_t)cols * 4;
	for (size_t i = 0; i < (size_t)rows * (size_t)cols; i++) {
		b[data + 2 * i] = 0x00;
		b[data + 2 * i + 1] = 0x38; /* 0.5 */
	}
	*len = data + (size_t)rows * (size_t)cols * 2;
	return b;
}

/* A transform's answer left unread (4 KiB receive buffer), then reset: the socket's bytes back. */
static void slow_transform_reader(int port, const char *what, const char *path, const char *x, size_t len)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int small = 4096;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	char head[512];
	int hl = snprintf(head, sizeof head, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\n" NPY "Content-Length: %zu\r\n\r\n",
			  path, len);
	int ok = fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small) == 0 &&
		 connect(fd, (struct sockaddr *)&a, sizeof a) == 0 && send_all(fd, head, (size_t)hl) == 0 &&
		 send_all(fd, x, len) == 0;
	double end = now_s() + 30, held = 0;
	while (ok && now_s() < end && (held = metric(port, "posenc_response_budget_bytes")) < 7.5 * MIB)
		sleep_s(0.02);
	check(ok && held >= 7.5 * MIB, "%s: the unread 8 MiB answer holds the budget (%.0f bytes)", what, held);
	sleep_s(0.2); /* the job is likely done: the answer alone holds it */
	if (fd >= 0)
		tcp_abort(fd);
	budget_zero_after(port, what);
}

static void accounting(int port)
{
	size_t len, n;
	char *x = x_npy(SEQ, 0.5f, &len);
	one(port, "npy answered in its own body", "/v1/rope/apply?format=npy", NPY, x, len, 200, NULL);
	char bin_path[96];
	snprintf(bin_path, sizeof bin_path, "/v1/rope/apply?format=bin&shape=1,1,%d,8", SEQ);
	size_t data = len - (size_t)SEQ * 8 * 4;
	one(port, "raw float32 answered in its own body", bin_path, "Content-Type: application/octet-stream\r\n", x + data,
	    len - data, 200, NULL);
	one(port, "npy answered as bin (an encoded answer)", "/v1/rope/apply?format=bin", NPY, x, len, 200, NULL);
	char *f16 = f16_npy(4096, 64, &n);
	one(port, "f16 widened to f32", "/v1/rope/apply?dtype=f32&format=npy", NPY, f16, n, 200, NULL);
	one(port, "sinusoidal concat (reshaped)", "/v1/sinusoidal/apply?mode=concat&pe_dim=32&format=bin", NPY, f16, n, 200,
	    NULL);
	free(f16);
	static const char json[] = "[[[0.5, 0.25, 1, 2], [3, 4, 5, 6]], [[1, 1, 1, 1], [2, 2, 2, 2]]]";
	one(port, "gzip'd JSON", "/v1/alibi/apply?format=json", "Content-Type: application/json\r\nAccept-Encoding: gzip\r\n",
	    json, sizeof json - 1, 200, NULL);
	char *nan = x_npy(SEQ, NAN, &n);
	one(port, "NaN in the body (after the share opened)", "/v1/rope/apply?format=bin", NPY, nan, n, 400, "body");
	free(nan);
	char *big = x_npy(SEQ, 1e30f, &n);
	one(port, "xscale overflow (after the share opened)", "/v1/sinusoidal/apply?xscale=1e20&format=bin", NPY, big, n, 400,
	    "xscale");
	free(big);
	size_t plen, blen, ps[] = {SEQ};
	int64_t *pos = malloc(sizeof *pos * SEQ);
	for (int i = 0; i < SEQ; i++)
		pos[i] = (i * 7) % 1000;
	char *p = npy_ints(pos, ps, 1, 1, &plen);
	struct form_part parts[] = {{"x", "application/octet-stream", x, len}, {"positions", NULL, p, plen}};
	char *form = form_body(parts, 2, &blen);
	one(port, "a form with positions", "/v1/rope/apply?format=bin",
	    "Content-Type: multipart/form-data; boundary=" FORM_BOUNDARY "\r\n", form, blen, 200, NULL);
	free(form);
	free(p);
	free(pos);
	slow_transform_reader(port, "a slow reader of an encoded answer, reset", WAIT_PATH, x, len);
	free(x);
	x = x_npy(2 * SEQ, 0.5f, &len);
	slow_transform_reader(port, "a slow reader of an answer that is its body, reset", "/v1/rope/apply?format=npy", x, len);
	free(x);
}

/* A daemon of BUDGET (start's other arguments) with an 8 MiB answer held (the return, -1 if not):
 * *x an SEQ-row transform body of *len bytes for it, the caller frees. */
static int start_held(struct pe_spawn *d, const char *job_timeout, const char *shutdown_timeout, const char *workers,
		      char **x, size_t *len)
{
	start(d, BUDGET, job_timeout, shutdown_timeout, workers);
	*x = x_npy(SEQ, 0.5f, len);
	return hold_8mib_answer(d->port);
}

/* 4. */
static void job_timeout_while_waiting(void)
{
	struct pe_spawn d;
	size_t len;
	char *x;
	int hold = start_held(&d, "1", "10", "1", &x, &len);
	struct resp r;
	int got = http_request(d.port, NULL, "POST", WAIT_PATH, NPY, x, len, 30000, &r);
	check(got == 0 && is_problem(&r, 503, NULL) && r.body && !strstr(r.body, "\"param\""),
	      "job_timeout 1 s passing while the job waits: 503 problem naming no parameter (%d %.120s)", r.status,
	      r.body ? r.body : "");
	resp_free(&r);
	got = http_request(d.port, NULL, "POST", "/v1/rope/apply?format=bin", NPY, x, len, 30000, &r);
	check(got == 0 && r.status == 200, "the one worker is free again: a transform that fits is served (%d)", r.status);
	resp_free(&r);
	if (hold >= 0)
		tcp_abort(hold);
	budget_zero_after(d.port, "job_timeout while waiting");
	free(x);
	stop(&d);
}

/* 5. */
static void sigterm_while_waiting(void)
{
	struct pe_spawn d;
	size_t len;
	char *x;
	int hold = start_held(&d, "30", "1", "2", &x, &len);
	int w = send_only(d.port, WAIT_PATH, NPY, x, len, 0);
	check(w >= 0 && waiting_seen(d.port, w), "a transform waits for its share");
	int st = daemon_stop(&d, SIGTERM, 10);
	check(st == 0, "SIGTERM while it waits: exit status 0 within 10 s (%d)", st);
	struct resp r = {0};
	int got = w >= 0 ? read_response(w, &r, 10000, MIB) : -1;
	check(got == 0 && is_problem(&r, 503, NULL) && r.body && !strstr(r.body, "\"param\""),
	      "the waiter: 503 problem naming no parameter (%d %.120s)", r.status, r.body ? r.body : "");
	resp_free(&r);
	if (w >= 0)
		close(w);
	if (hold >= 0)
		close(hold);
	free(x);
}

/* The bytes a transform holds at most, from the 413 a 1 MiB budget answers it: 0 if none. */
static double need_of(const char *path, const char *headers, const char *body, size_t len)
{
	struct pe_spawn d;
	start(&d, "1Mi", "30", "10", "2");
	struct resp r;
	double need = 0;
	int got = http_request(d.port, NULL, "POST", path, headers, body, len, 30000, &r);
	const char *at = got == 0 && r.status == 413 && r.body ? strstr(r.body, "hold up to ") : NULL;
	if (at)
		need = strtod(at + 11, NULL);
	check(need > 1.0 * MIB, "%s: a 1 MiB budget answers 413 with the need (%.0f bytes; %d)", path, need, r.status);
	resp_free(&r);
	stop(&d);
	return need;
}

/* 6 and 7: served on a budget of exactly its need. */
static void at_its_need(const char *path, const char *headers, const char *body, size_t len)
{
	double need = need_of(path, headers, body, len);
	if (need <= 1.0 * MIB)
		return;
	char budget[32];
	snprintf(budget, sizeof budget, "%.0f", need);
	struct pe_spawn d;
	start(&d, budget, "30", "10", "2");
	for (int t = 0; t < 2; t++) {
		struct resp r;
		int got = http_request(d.port, NULL, "POST", path, headers, body, len, 30000, &r);
		check(got == 0 && r.status == 200, "%s on a budget of its need (%s bytes), try %d: 200 (%d %.100s)", path,
		      budget, t + 1, r.status, r.status != 200 && r.body ? r.body : "");
		resp_free(&r);
	}
	budget_zero_after(d.port, path);
	stop(&d);
}

static void exact_needs(void)
{
	size_t n;
	char *f16 = f16_npy(3 * 512, 64, &n);
	at_its_need("/v1/sinusoidal/apply?format=bin&dtype=f64&mode=concat&pe_dim=256", NPY, f16, n);
	at_its_need("/v1/rope/apply?format=npy&dtype=f64", NPY, f16, n);
	free(f16);
	char *x = x_npy(24576, 0.5f, &n); /* 768 KiB */
	at_its_need("/v1/rope/apply?format=csv", NPY "Accept-Encoding: gzip\r\n", x, n);
	free(x);
}

/* 8. */
static void chain_of_waiters(void)
{
	struct pe_spawn d;
	size_t len;
	char *x;
	int hold = start_held(&d, "30", "10", "2", &x, &len), w = -1, served = 0, refused = 0, posted = 0;
	double end = now_s() + 6;
	while (now_s() < end) {
		if (w < 0 && (w = send_only(d.port, WAIT_PATH, NPY, x, len, 0)) >= 0)
			posted++;
		int st = small_miss(d.port);
		served += st == 200;
		refused += st == 503;
		struct pollfd p = {.fd = w, .events = POLLIN};
		if (w >= 0 && poll(&p, 1, 0) > 0) {
			struct resp r;
			read_response(w, &r, 10000, MIB);
			resp_free(&r);
			close(w);
			w = -1;
		}
		sleep_s(0.01);
	}
	check(served > refused, "a chain of %d waiting transforms beside an 8 MiB slow reader: most small misses served "
	      "(%d served, %d refused)", posted, served, refused);
	if (w >= 0)
		close(w);
	if (hold >= 0)
		tcp_abort(hold);
	budget_zero_after(d.port, "the chain");
	free(x);
	stop(&d);
}

static int scenario(void)
{
	fault_init("test_budget_wait", 300);
	struct pe_spawn d;
	start(&d, SMALL_BUDGET, "30", "10", "2");
	chunked_body_counted(d.port);
	stop(&d);
	start(&d, BUDGET, "30", "10", "2");
	unsatisfiable_waiter(d.port);
	accounting(d.port);
	stop(&d);
	job_timeout_while_waiting();
	sigterm_while_waiting();
	exact_needs();
	chain_of_waiters();
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
