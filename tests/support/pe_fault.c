/* The fault tests' helpers (see pe_fault.h): checks reported through libcheck, the daemon's
 * start and stop with a watchdog, /proc readings, raw sockets and HTTP/1.1 by hand. */
#include "support/pe_fault.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "support/pe_check.h"
#include "support/pe_http.h"

const char *fault_name = "fault";

/* ---- checks ---- */

void pe_fault_check(int ok, const char *file, int line, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (ok) {
		if (getenv("PE_FAULT_VERBOSE"))
			printf("%s: ok: %s\n", fault_name, msg);
		_mark_point(file, line);
		return;
	}
	fflush(stdout);
	pe_spawn_cleanup(); /* a failed check ends the process with _exit, past atexit */
	_ck_assert_failed(file, line, "Check failed", "%s: %s", fault_name, msg);
}

void note(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("%s: note: ", fault_name);
	vprintf(fmt, ap);
	printf("\n");
	fflush(stdout);
	va_end(ap);
}

double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void sleep_s(double s)
{
	struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* ---- the program, daemons and cleanup ---- */

static void on_signal(int sig)
{
	pe_spawn_kill_all();
	if (sig == SIGALRM) {
		static const char msg[] = "fault: time limit exceeded\n";
		ssize_t w = write(1, msg, sizeof msg - 1);
		(void)w;
	}
	_exit(sig == SIGALRM ? 3 : 128 + sig);
}

void fault_init(const char *name, unsigned limit_s)
{
	fault_name = name;
	setvbuf(stdout, NULL, _IOLBF, 0);
	atexit(pe_spawn_cleanup);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
	signal(SIGALRM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	alarm(limit_s);
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 8192) {
		rl.rlim_cur = rl.rlim_max < 8192 ? rl.rlim_max : 8192;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int fault_finish(void)
{
	fflush(stdout);
	return 0;
}

void pe_fault_scenario_end(int rc)
{
	ck_assert_msg(rc == 0, "%s: the scenario ended with status %d", fault_name, rc);
}

int pe_fault_run(const TTest *scenario)
{
	char name[128];
	const char *prog = program_invocation_short_name;
	snprintf(name, sizeof name, "fault_%s", strncmp(prog, "test_", 5) == 0 ? prog + 5 : prog);
	Suite *s = suite_create(name);
	TCase *tc = tcase_create("scenario");
	tcase_set_timeout(tc, PE_FAULT_BACKSTOP_S);
	tcase_add_test(tc, scenario);
	suite_add_tcase(s, tc);
	return pe_test_run(s);
}

const char *daemon_bin(void) { return pe_spawn_bin(); }
char *read_file(const char *path, size_t *len) { return pe_spawn_read(path, len); }

void daemon_start(struct pe_spawn *d, const char *const *extra)
{
	char why[4096];
	if (pe_spawn_start(d, extra, NULL, why, sizeof why) != 0) {
		pe_spawn_cleanup();
		ck_abort_msg("%s: %s", fault_name, why);
	}
}

int daemon_stop(struct pe_spawn *d, int sig, double timeout_s)
{
	fflush(stdout); /* its stderr, if shown, comes after what we said */
	return pe_spawn_stop(d, sig, timeout_s);
}

int daemon_alive(const struct pe_spawn *d) { return pe_spawn_alive(d); }
int daemon_instrumented(const struct pe_spawn *d) { return pe_spawn_instrumented(d); }

long rss_kib(pid_t pid) { return status_kib(pid, "VmRSS:"); }
long hwm_kib(pid_t pid) { return status_kib(pid, "VmHWM:"); }

/* A "Vm...:" field of /proc/<pid>/status in KiB (0 if unknown). */
long status_kib(pid_t pid, const char *field)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	char *s = read_file(path, NULL);
	const char *p = s ? strstr(s, field) : NULL;
	long v = p ? strtol(p + strlen(field), NULL, 10) : 0;
	free(s);
	return v;
}

int fd_count(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
	DIR *dir = opendir(path);
	int n = 0;
	if (!dir)
		return -1;
	for (struct dirent *e; (e = readdir(dir)) != NULL;)
		n += e->d_name[0] != '.';
	closedir(dir);
	return n;
}

/* ---- sockets and HTTP ---- */

/* A TCP connection to the daemon from source address src ("127.0.0.N", NULL for any); -1 and
 * errno on failure. */
int tcp_connect(int port, const char *src)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (src) {
		struct sockaddr_in s = {.sin_family = AF_INET};
		inet_pton(AF_INET, src, &s.sin_addr);
		if (bind(fd, (struct sockaddr *)&s, sizeof s) != 0) {
			int e = errno;
			close(fd);
			errno = e;
			return -1;
		}
	}
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	return fd;
}

/* Close with an RST instead of a FIN: a client that vanishes. */
void tcp_abort(int fd)
{
	struct linger l = {1, 0};
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
	close(fd);
}

int send_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

/* A slow reader: connect with a 4 KiB receive buffer and send GET path; the answer is left unread
 * (the server's send then stalls). The socket, or -1. */
int slow_reader_open(int port, const char *path)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int small = 4096;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small) != 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	char req[256];
	int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path);
	if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 || send_all(fd, req, (size_t)n) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Has the peer closed (or reset) the connection? Waits up to wait_ms for it. Data that arrives
 * is read and dropped. */
int peer_closed(int fd, int wait_ms)
{
	double end = now_s() + wait_ms / 1000.0;
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int left = (int)((end - now_s()) * 1000);
		int r = poll(&p, 1, left > 0 ? left : 0);
		if (r > 0) {
			char buf[4096];
			ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
			if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
				return 1;
			if (p.revents & (POLLHUP | POLLERR))
				return 1;
			continue;
		}
		if (left <= 0)
			return 0;
	}
}

void resp_free(struct resp *r)
{
	free(r->body);
	r->body = NULL;
}

int resp_whole(const struct resp *r) { return r->chunked || r->content_length == (long)r->body_len; }

/* Value of a header in r->head into buf; NULL if absent. */
const char *resp_header(const struct resp *r, const char *name, char *buf, size_t cap)
{
	return pe_http_header(r->head, name, buf, cap);
}

/* The length of a whole chunked body at b (its chunks, the last, empty one, and the CRLF that ends
 * the message; no trailer fields), 0 while it is incomplete, -1 when it is malformed (RFC 9112
 * section 7.1). */
static long chunked_length(const char *b, size_t n)
{
	size_t at = 0;
	for (;;) {
		const char *crlf = memmem(b + at, n - at, "\r\n", 2);
		if (!crlf)
			return 0;
		char *digits_end;
		unsigned long long size = strtoull(b + at, &digits_end, 16);
		if (digits_end == b + at || digits_end != crlf || size > (1ull << 40))
			return -1;
		at = (size_t)(crlf - b) + 2;
		if (size == 0)
			return n - at >= 2 ? (memcmp(b + at, "\r\n", 2) == 0 ? (long)(at + 2) : -1) : 0;
		if (n - at < size + 2)
			return 0;
		if (memcmp(b + at + size, "\r\n", 2) != 0)
			return -1;
		at += size + 2;
	}
}

/* The chunked body b of length n with its coding undone in place: the data's length. */
static size_t unchunk(char *b, size_t n)
{
	size_t at = 0, out = 0;
	while (at < n) {
		const char *crlf = memmem(b + at, n - at, "\r\n", 2);
		size_t size = strtoull(b + at, NULL, 16);
		at = (size_t)(crlf - b) + 2;
		if (size == 0)
			break;
		memmove(b + out, b + at, size);
		out += size;
		at += size + 2;
	}
	return out;
}

/* How many of the got bytes just peeked at buf + n belong to this response: up to the end of its
 * head while the head is not complete (a pipelined answer after it stays in the socket), up to
 * Content-Length after it, or to the end of its last chunk. */
static size_t bytes_of_this_response(const char *buf, size_t n, size_t got, long hdr_end, long content_length,
				     int chunked)
{
	if (hdr_end < 0) {
		size_t from = n > 3 ? n - 3 : 0;
		char *e = memmem(buf + from, n + got - from, "\r\n\r\n", 4);
		return e ? (size_t)(e - buf) + 4 - n : got;
	}
	if (content_length >= 0) {
		size_t want = (size_t)hdr_end + (size_t)content_length - n;
		return got < want ? got : want;
	}
	if (chunked) {
		long whole = chunked_length(buf + hdr_end, n + got - (size_t)hdr_end);
		if (whole > 0)
			return (size_t)hdr_end + (size_t)whole - n;
	}
	return got;
}

/* Parse the head in buf[0, hdr_end) into r: status, head text, Content-Length. */
static void parse_head(struct resp *r, const char *buf, long hdr_end)
{
	size_t hl = (size_t)hdr_end < sizeof r->head ? (size_t)hdr_end : sizeof r->head - 1;
	memcpy(r->head, buf, hl);
	r->head[hl] = 0;
	r->status = strncmp(buf, "HTTP/1.", 7) == 0 ? atoi(buf + 9) : 0;
	char v[64];
	if (resp_header(r, "Content-Length", v, sizeof v))
		r->content_length = atol(v);
	else if (resp_header(r, "Transfer-Encoding", v, sizeof v) && strcasecmp(v, "chunked") == 0)
		r->chunked = 1;
	if (r->status == 304 || r->status == 204 || (r->status >= 100 && r->status < 200))
		r->content_length = 0;
}

/* Read one response from fd (blocking with poll, timeout_ms overall). Bodies are read by
 * Content-Length, else until the peer closes. Bytes are peeked before they are taken, so a
 * response pipelined behind this one is left in the socket for the next call. Returns 0 when a
 * whole response arrived. */
int read_response(int fd, struct resp *r, int timeout_ms, size_t body_cap)
{
	double t0 = now_s(), end = t0 + timeout_ms / 1000.0;
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap);
	long hdr_end = -1;
	memset(r, 0, sizeof *r);
	r->content_length = -1;
	for (;;) {
		if (hdr_end >= 0 && r->content_length >= 0 && n - (size_t)hdr_end >= (size_t)r->content_length)
			break;
		if (hdr_end >= 0 && r->chunked) {
			long whole = chunked_length(buf + hdr_end, n - (size_t)hdr_end);
			if (whole < 0)
				goto incomplete;
			if (whole > 0)
				break;
		}
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int left = (int)((end - now_s()) * 1000);
		if (left <= 0 || poll(&p, 1, left) <= 0)
			goto incomplete;
		if (n == cap) {
			if (cap >= body_cap + sizeof r->head)
				goto incomplete;
			cap *= 2;
			char *nb = realloc(buf, cap);
			if (!nb)
				goto incomplete;
			buf = nb;
		}
		ssize_t got = recv(fd, buf + n, cap - n, MSG_PEEK);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			if (hdr_end >= 0 && r->content_length < 0 && !r->chunked)
				break; /* body delimited by close */
			goto incomplete;
		}
		size_t take = bytes_of_this_response(buf, n, (size_t)got, hdr_end, r->content_length, r->chunked);
		if (recv(fd, buf + n, take, MSG_WAITALL) != (ssize_t)take)
			goto incomplete;
		n += take;
		if (hdr_end < 0 && n >= 4 && memcmp(buf + n - 4, "\r\n\r\n", 4) == 0) {
			hdr_end = (long)n;
			parse_head(r, buf, hdr_end);
		}
	}
	r->body_len = n - (size_t)hdr_end;
	if (r->chunked)
		r->body_len = unchunk(buf + hdr_end, r->body_len);
	r->body = malloc(r->body_len + 1);
	memcpy(r->body, buf + hdr_end, r->body_len);
	r->body[r->body_len] = 0;
	r->seconds = now_s() - t0;
	free(buf);
	return 0;
incomplete:
	if (hdr_end < 0)
		r->status = 0;
	r->seconds = now_s() - t0;
	free(buf);
	return -1;
}

/* One request on a new connection ("Connection: close"); extra_headers ends with "\r\n" or is "". */
int http_request(int port, const char *src, const char *method, const char *path, const char *extra_headers,
			const void *body, size_t body_len, int timeout_ms, struct resp *r)
{
	memset(r, 0, sizeof *r);
	double t0 = now_s();
	int fd = tcp_connect(port, src);
	if (fd < 0)
		return -1;
	char head[8192], cl[48] = "";
	if (body)
		snprintf(cl, sizeof cl, "Content-Length: %zu\r\n", body_len);
	int hl = snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s%s\r\n",
			  method, path, extra_headers ? extra_headers : "", cl);
	if (hl < 0 || (size_t)hl >= sizeof head) {
		close(fd);
		return -1;
	}
	int rc = send_all(fd, head, (size_t)hl);
	if (rc == 0 && body && body_len)
		rc = send_all(fd, body, body_len);
	if (rc == 0)
		rc = read_response(fd, r, timeout_ms, (size_t)1 << 30);
	r->seconds = now_s() - t0;
	close(fd);
	return rc;
}

int http_get(int port, const char *path, int timeout_ms, struct resp *r)
{
	return http_request(port, NULL, "GET", path, "", NULL, 0, timeout_ms, r);
}

/* A metric's value from /metrics (its first sample, pe_http_metric), or -1. */
double metric(int port, const char *name)
{
	struct resp r;
	double v = -1;
	if (http_get(port, "/metrics", 5000, &r) == 0 && r.status == 200 && !pe_http_metric(r.body, name, &v))
		v = -1;
	resp_free(&r);
	return v;
}

/* Is the response an RFC 9457 problem document with this status (and, if param, naming it)?
 * The checks are pe_http_is_problem's (tests also ask this of answers that may rightly be
 * something else, so the reason it is not is not printed). */
int is_problem(const struct resp *r, int status, const char *param)
{
	char ct[128], why[1024];
	const char *type = resp_header(r, "Content-Type", ct, sizeof ct);
	return pe_http_is_problem(r->status, type, r->body, r->body ? r->body_len : 0, status, param, why, sizeof why);
}

/* Poll /metrics until name equals want (up to 20 s): 1 then, else 0. */
int wait_metric_eq(int port, const char *name, double want)
{
	for (int i = 0; i < 2000; i++) {
		if (metric(port, name) == want)
			return 1;
		sleep_s(0.01);
	}
	return 0;
}

/* The response budget's gauge back at 0 (an answer just sent may still be let go of), checked. */
void budget_zero_after(int port, const char *what)
{
	check(wait_metric_eq(port, "posenc_response_budget_bytes", 0), "%s: posenc_response_budget_bytes back at 0", what);
}

/* A problem+json 503 with Retry-After whose document names no parameter (the client's request was
 * fine; the server was busy). */
int busy_problem_of(const struct resp *r)
{
	char ra[32];
	return is_problem(r, 503, NULL) && resp_header(r, "Retry-After", ra, sizeof ra) && r->body &&
	       !strstr(r->body, "\"param\"");
}

/* A slow reader of an 8 MiB bin table, and its 8 MiB held on the response budget while it does not
 * read (checked): the socket, or -1. */
int hold_8mib_answer(int port)
{
	int fd = slow_reader_open(port, "/v1/sinusoidal?len=2048&dim=1024&format=bin");
	double end = now_s() + 30, held = 0, mib = 1024.0 * 1024.0;
	while (fd >= 0 && now_s() < end && (held = metric(port, "posenc_response_budget_bytes")) < 8 * mib)
		sleep_s(0.02);
	check(fd >= 0 && held >= 8 * mib, "a slow reader holds an 8 MiB answer on the budget (%.0f bytes)", held);
	return fd;
}

/* Poll /metrics until name is at least want (up to 30 s): 1 then, else 0. */
int wait_metric_at_least(int port, const char *name, double want)
{
	for (int i = 0; i < 3000; i++) {
		if (metric(port, name) >= want)
			return 1;
		sleep_s(0.01);
	}
	return 0;
}

/* ---- which HTTP thread took a connection: the daemon's epoll sets (/proc/PID/fdinfo) ----
 * Each libmicrohttpd thread watches its connections in an epoll set of its own; a suspended
 * connection leaves it, so a connection is placed once accepted, before its request is sent. */
void epolls_read(pid_t pid, struct epolls *ep)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/fdinfo", (int)pid);
	DIR *d = opendir(path);
	struct dirent *e;
	ep->n = 0;
	while (d && (e = readdir(d)) && ep->n < FAULT_NEP) {
		if (e->d_name[0] == '.')
			continue;
		char info[96];
		snprintf(info, sizeof info, "%s/%.16s", path, e->d_name);
		char *s = read_file(info, NULL);
		int watched = 0;
		for (char *p = s; p && (p = strstr(p, "\ntfd:")); p++)
			watched++;
		if (watched) {
			ep->fd[ep->n] = atoi(e->d_name);
			ep->watched[ep->n++] = watched;
		}
		free(s);
	}
	if (d)
		closedir(d);
}

/* Connect; the index (into the sets read before) of the epoll set the connection joined, -1 if
 * none was seen within 5 s. ep is read again either way. */
int connect_to_thread(pid_t pid, int port, struct epolls *ep, int *fd)
{
	*fd = tcp_connect(port, NULL);
	for (int i = 0; i < 500 && *fd >= 0; i++) {
		struct epolls cur;
		epolls_read(pid, &cur);
		for (int a = 0; a < cur.n; a++)
			for (int b = 0; b < ep->n; b++)
				if (cur.fd[a] == ep->fd[b] && cur.watched[a] > ep->watched[b]) {
					*ep = cur;
					return b;
				}
		sleep_s(0.01);
	}
	epolls_read(pid, ep);
	return -1;
}

/* A float32 .npy of the given shape, every element v, into buf: its length, 0 if buf is too small. */
size_t npy_f32_filled(char *buf, size_t cap, const int *shape, int rank, float v)
{
	char dict[128];
	size_t elems = 1;
	int n = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
	for (int k = 0; k < rank; k++) {
		n += snprintf(dict + n, sizeof dict - (size_t)n, "%d, ", shape[k]);
		elems *= (size_t)shape[k];
	}
	n += snprintf(dict + n, sizeof dict - (size_t)n, "), }");
	size_t hl = (size_t)n + 1;
	while ((10 + hl) % 64)
		hl++;
	size_t len = 10 + hl + elems * 4;
	if (len > cap)
		return 0;
	memcpy(buf, "\x93NUMPY\x01\x00", 8);
	buf[8] = (char)(hl & 0xff);
	buf[9] = (char)(hl >> 8);
	memset(buf + 10, ' ', hl);
	memcpy(buf + 10, dict, (size_t)n);
	buf[10 + hl - 1] = '\n';
	for (size_t i = 0; i < elems; i++)
		memcpy(buf + 10 + hl + 4 * i, &v, 4);
	return len;
}

/* Send request (a whole HTTP request) on new connections, one after another, each joining the
 * first one's computation (held at POSENC_TEST_JOB_GATE: posenc_jobs_in_flight, then
 * posenc_cache_joins_total), until both of the daemon's HTTP threads hold at least one or max
 * connections are open: their descriptors in fds, their count returned. */
int join_on_both_threads(const struct pe_spawn *d, const char *request, int *fds, int max)
{
	struct epolls ep;
	epolls_read(d->pid, &ep);
	double joins = metric(d->port, "posenc_cache_joins_total");
	int n = 0, on[FAULT_NEP] = {0}, threads = 0;
	do {
		int j = connect_to_thread(d->pid, d->port, &ep, &fds[n]);
		if (j >= 0)
			threads += on[j]++ == 0;
		check(fds[n] >= 0 && send_all(fds[n], request, strlen(request)) == 0, "request %d sent", n + 1);
		n++;
		check(wait_metric_at_least(d->port, n == 1 ? "posenc_jobs_in_flight" : "posenc_cache_joins_total",
					   n == 1 ? 1 : joins + n - 1),
		      "request %d is %s", n, n == 1 ? "held at the gate" : "joined to it");
	} while (threads < 2 && n < max);
	check(threads >= 2, "after %d connections both HTTP threads hold some", n);
	return n;
}

