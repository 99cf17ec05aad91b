/* End-to-end test support: the real posencd started through the one spawner (pe_spawn.h), HTTP
 * to it with libcurl, and the shared HTTP assertions (pe_http.h) as check assertions. */
#ifndef PE_TEST_DAEMON_H
#define PE_TEST_DAEMON_H

#include <stddef.h>
#include <sys/types.h>

#include <jansson.h>

#include "support/pe_spawn.h"

struct pe_daemon {
	struct pe_spawn s;  /* s.pid, s.port, s.out (its JSON log) */
	const char *cainfo; /* set to a CA/certificate file to speak HTTPS to localhost */
};

/* argv_extra: NULL-terminated extra arguments (e.g. "--workers", "1", NULL), may be NULL.
 * Fails the test if the daemon does not report its port (within 20 s). */
void pe_daemon_start(struct pe_daemon *d, const char *const *argv_extra);
/* The same with spawner options (a wrapper command, another --bind). */
void pe_daemon_start_opts(struct pe_daemon *d, const char *const *argv_extra, const struct pe_spawn_opts *opts);
/* Send sig and wait (up to 20 s); returns the exit status, or 128+signal if killed by one. */
int pe_daemon_stop(struct pe_daemon *d, int sig);
/* The daemon's stdout so far (caller frees). */
char *pe_daemon_log(const struct pe_daemon *d);

struct pe_resp {
	long status;
	char *body;
	size_t len;
	char *headers; /* raw header block */
};

/* method "GET", "HEAD", "POST", ...; headers NULL-terminated "Name: value" strings (or NULL). */
void pe_request(const struct pe_daemon *d, const char *method, const char *path, const char *const *headers,
		const void *body, size_t body_len, struct pe_resp *r);
void pe_get(const struct pe_daemon *d, const char *path, struct pe_resp *r);
/* The same requests on one keep-alive connection (reopened by libcurl only if the server closes
 * it): for tests that send thousands. */
struct pe_conn {
	const struct pe_daemon *d;
	void *curl;
};
void pe_conn_open(struct pe_conn *c, const struct pe_daemon *d);
void pe_conn_request(struct pe_conn *c, const char *method, const char *path, const char *const *headers,
		     const void *body, size_t body_len, struct pe_resp *r);
void pe_conn_close(struct pe_conn *c);
/* Value of a response header (case-insensitive name) into buf; NULL if absent. */
const char *pe_resp_header(const struct pe_resp *r, const char *name, char *buf, size_t cap);
void pe_resp_free(struct pe_resp *r);

/* The body parsed as JSON (caller decrefs); fails the test if it is not JSON. */
json_t *pe_resp_json(const struct pe_resp *r);
/* Fails the test unless r is an RFC 9457 problem for status (naming param, if not NULL); the
 * checks are pe_http_is_problem's. */
void pe_assert_problem(const struct pe_resp *r, long status, const char *param);
/* The value of a metric's first sample from GET /metrics; fails the test if there is none. */
double pe_metric(const struct pe_daemon *d, const char *name);
/* The metric's value once it equals want, or when 20 s passed (an answer just sent may still be
 * let go of: its bytes leave the gauges after the client has them). */
double pe_metric_becomes(const struct pe_daemon *d, const char *name, double want);

/* Send raw bytes on a new TCP connection and read what comes back until the peer closes, cap is
 * reached or timeout_ms passes; returns the number of bytes read (buf NUL-terminated). */
size_t pe_raw_exchange(const struct pe_daemon *d, const char *request, size_t len, char *buf, size_t cap,
		       int timeout_ms);

/* The daemon binary: $POSENC_BIN, else the build tree the test was built in. */
const char *pe_daemon_bin(void);

#endif
