/* The fault tests' support library. Each tests/fault/test_*.c is one program: its scenario is a
 * function `static int scenario(void)` that starts its own posencd through the spawner the e2e
 * tests use (pe_spawn.h: --port 0, the port read from the JSON start line, a data_dir of its own),
 * misbehaves at it over raw sockets (the helpers below), judges answers with the shared HTTP
 * assertions (pe_http.h) and returns fault_finish(); the file ends with PE_FAULT_MAIN(scenario).
 *
 * Reporting is libcheck's, as in every other test program: the scenario is a test case run by
 * srunner (suite "fault_<name>"), each check() is a check assertion (the first that fails ends
 * the scenario with its file, line and message), and the program ends with check's
 * "N%: Checks: ..." line and exits 1 on any failure. PE_FAULT_VERBOSE=1 prints each passed check.
 *
 * Cleanup is the C form of a shell trap: every daemon started is killed on exit (the spawner's
 * atexit), on a failed check, on SIGINT / SIGTERM / SIGHUP, and by a watchdog alarm when the
 * scenario overruns the time limit fault_init sets. The daemon is $POSENC_BIN, else
 * PE_BUILD_DIR/posencd. Under a sanitizer or valgrind timing- and RSS-sensitive checks are
 * relaxed; exit status 0 after SIGTERM is always checked, which in the asan build also means
 * LeakSanitizer found no leak. */
#ifndef PE_TEST_FAULT_H
#define PE_TEST_FAULT_H

/* The system headers every fault program uses (sockets, polling, signals, /proc). */
#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support/pe_http.h"
#include "support/pe_spawn.h"

/* check's own time limit on a scenario, behind fault_init's watchdog (which also kills daemons). */
#define PE_FAULT_BACKSTOP_S 900

/* ---- the program and its checks ---- */

extern const char *fault_name; /* fault_init's name, in front of notes and failures */

/* A check assertion: passes when ok, else fails the scenario with the message. */
#define check(ok, ...) pe_fault_check(!!(ok), __FILE__, __LINE__, __VA_ARGS__)
void pe_fault_check(int ok, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* A line of information ("<name>: note: ..."), never a pass or a failure. */
void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Name the scenario, arm the cleanup and a watchdog of limit_s seconds, raise the fd limit
 * (hundreds of sockets; the daemon inherits it), and ignore SIGPIPE (peers that close on us). */
void fault_init(const char *name, unsigned limit_s);
/* What a scenario returns when it ran to its end: 0. */
int fault_finish(void);

/* main(): the scenario as the one test case of a check suite; a scenario that returns other than
 * 0 (it gave up, e.g. no temporary directory) fails. */
#define PE_FAULT_MAIN(fn)                                                                      \
	START_TEST(fault_scenario) { pe_fault_scenario_end(fn()); }                             \
	END_TEST                                                                               \
	int main(void) { return pe_fault_run(fault_scenario); }
void pe_fault_scenario_end(int rc);
int pe_fault_run(const TTest *scenario);

double now_s(void);       /* CLOCK_MONOTONIC in seconds */
void sleep_s(double s);   /* sleeps s seconds, through EINTR */

/* ---- daemons ---- */

const char *daemon_bin(void);                  /* pe_spawn_bin */
char *read_file(const char *path, size_t *len); /* pe_spawn_read */

/* Start posencd with extra arguments (NULL-terminated, may be NULL); fails the scenario if it
 * does not report its port within 20 s. */
void daemon_start(struct pe_spawn *d, const char *const *extra);
/* Signal and wait up to timeout_s (pe_spawn_stop): the exit status, 128 + signal if killed, -1
 * if it did not exit (then it is killed). */
int daemon_stop(struct pe_spawn *d, int sig, double timeout_s);
int daemon_alive(const struct pe_spawn *d);
int daemon_instrumented(const struct pe_spawn *d);

/* A "Vm...:" field of /proc/<pid>/status in KiB (0 if unknown). */
long status_kib(pid_t pid, const char *field);
/* VmRSS (resident now) and VmHWM (the peak) in KiB. */
long rss_kib(pid_t pid);
long hwm_kib(pid_t pid);
/* Open descriptors of pid, -1 if unknown. */
int fd_count(pid_t pid);

/* ---- sockets and HTTP ---- */

/* A TCP connection to the daemon from source address src ("127.0.0.N", NULL for any); -1 and
 * errno on failure. */
int tcp_connect(int port, const char *src);
/* Close with an RST instead of a FIN: a client that vanishes. */
void tcp_abort(int fd);
/* All n bytes, through EINTR: 0, or -1 on failure. */
int send_all(int fd, const void *p, size_t n);
/* A slow reader: connect with a 4 KiB receive buffer and send GET path; the answer is left unread
 * (the server's send then stalls). The socket, or -1. */
int slow_reader_open(int port, const char *path);
/* Has the peer closed (or reset) the connection? Waits up to wait_ms for it. Data that arrives
 * is read and dropped. */
int peer_closed(int fd, int wait_ms);

struct resp {
	int status;        /* 0: no (complete) response */
	char head[8192];   /* status line and headers */
	char *body;
	size_t body_len;
	long content_length; /* -1 if absent */
	int chunked;         /* Transfer-Encoding: chunked; body is the data, its coding undone */
	double seconds;    /* from sending to the end of the response */
};

void resp_free(struct resp *r);
/* After read_response returned 0: the body whole by its framing (its Content-Length, or chunked:
 * read_response returns 0 only once the last chunk came)? */
int resp_whole(const struct resp *r);
/* Value of a header in r->head into buf; NULL if absent. */
const char *resp_header(const struct resp *r, const char *name, char *buf, size_t cap);
/* Read one response from fd (blocking with poll, timeout_ms overall). Bodies are read by
 * Content-Length, by their chunks (to the last one), else until the peer closes. Returns 0 when a
 * whole response arrived. */
int read_response(int fd, struct resp *r, int timeout_ms, size_t body_cap);
/* One request on a new connection ("Connection: close"); extra_headers ends with "\r\n" or is "". */
int http_request(int port, const char *src, const char *method, const char *path, const char *extra_headers,
		 const void *body, size_t body_len, int timeout_ms, struct resp *r);
int http_get(int port, const char *path, int timeout_ms, struct resp *r);

/* A metric's value from /metrics (its first sample, pe_http_metric), or -1. */
double metric(int port, const char *name);
/* Is the response an RFC 9457 problem document with this status (and, if param, naming it)?
 * The checks are pe_http_is_problem's (tests also ask this of answers that may rightly be
 * something else, so the reason it is not is not printed). */
int is_problem(const struct resp *r, int status, const char *param);
/* Poll /metrics until name equals want (up to 20 s): 1 then, else 0. */
int wait_metric_eq(int port, const char *name, double want);
/* Poll /metrics until name is at least want (up to 30 s): 1 then, else 0. */
int wait_metric_at_least(int port, const char *name, double want);
/* The response budget's gauge back at 0 (an answer just sent may still be let go of), checked. */
void budget_zero_after(int port, const char *what);
/* A problem+json 503 with Retry-After whose document names no parameter (the client's request was
 * fine; the server was busy). */
int busy_problem_of(const struct resp *r);
/* A slow reader of an 8 MiB bin table, and its 8 MiB held on the response budget while it does not
 * read (checked): the socket, or -1. */
int hold_8mib_answer(int port);

/* ---- which HTTP thread took a connection: the daemon's epoll sets (/proc/PID/fdinfo) ----
 * Each libmicrohttpd thread watches its connections in an epoll set of its own; a suspended
 * connection leaves it, so a connection is placed once accepted, before its request is sent. */
#define FAULT_NEP 16
struct epolls {
	int n, fd[FAULT_NEP], watched[FAULT_NEP];
};

void epolls_read(pid_t pid, struct epolls *ep);
/* Connect; the index (into the sets read before) of the epoll set the connection joined, -1 if
 * none was seen within 5 s. ep is read again either way. */
int connect_to_thread(pid_t pid, int port, struct epolls *ep, int *fd);
/* Send request (a whole HTTP request) on new connections, one after another, each joining the
 * first one's computation (held at the job gate: posenc_jobs_in_flight, then
 * posenc_cache_joins_total), until both of the daemon's HTTP threads hold at least one or max
 * connections are open: their descriptors in fds, their count returned. */
int join_on_both_threads(const struct pe_spawn *d, const char *request, int *fds, int max);

/* A float32 .npy of the given shape, every element v, into buf: its length, 0 if buf is too small. */
size_t npy_f32_filled(char *buf, size_t cap, const int *shape, int rank, float v);

#endif
