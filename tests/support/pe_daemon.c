/* End-to-end test support (see pe_daemon.h). */
#include "support/pe_daemon.h"
#include "support/pe_http.h"

#include <check.h>
#include <curl/curl.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *pe_daemon_bin(void) { return pe_spawn_bin(); }

char *pe_daemon_log(const struct pe_daemon *d)
{
	char *log = pe_spawn_read(d->s.out, NULL);
	return log ? log : strdup("");
}

void pe_daemon_start_opts(struct pe_daemon *d, const char *const *argv_extra, const struct pe_spawn_opts *opts)
{
	char why[2048];
	memset(d, 0, sizeof *d);
	int rc = pe_spawn_start(&d->s, argv_extra, opts, why, sizeof why);
	ck_assert_msg(rc == 0, "%s", why);
}

void pe_daemon_start(struct pe_daemon *d, const char *const *argv_extra)
{
	pe_daemon_start_opts(d, argv_extra, NULL);
}

int pe_daemon_stop(struct pe_daemon *d, int sig)
{
	return pe_spawn_stop(&d->s, sig, 20.0);
}

struct sink {
	char *p;
	size_t len, cap;
};

static size_t sink_write(char *data, size_t size, size_t nmemb, void *arg)
{
	struct sink *s = arg;
	size_t n = size * nmemb;
	if (s->len + n + 1 > s->cap) {
		s->cap = (s->len + n + 1) * 2;
		s->p = realloc(s->p, s->cap);
	}
	memcpy(s->p + s->len, data, n);
	s->len += n;
	s->p[s->len] = 0;
	return n;
}

void pe_conn_open(struct pe_conn *conn, const struct pe_daemon *d)
{
	conn->d = d;
	conn->curl = curl_easy_init();
	ck_assert_ptr_nonnull(conn->curl);
}

void pe_conn_close(struct pe_conn *conn)
{
	curl_easy_cleanup(conn->curl);
	conn->curl = NULL;
}

void pe_conn_request(struct pe_conn *conn, const char *method, const char *path, const char *const *headers,
		     const void *body, size_t body_len, struct pe_resp *r)
{
	const struct pe_daemon *d = conn->d;
	char url[16384];
	if (d->cainfo)
		snprintf(url, sizeof url, "https://localhost:%d%s", d->s.port, path);
	else
		snprintf(url, sizeof url, "http://127.0.0.1:%d%s", d->s.port, path);
	CURL *c = conn->curl;
	curl_easy_reset(c); /* this request's options only; the open connection stays */
	struct sink b = {0}, h = {0};
	struct curl_slist *hl = NULL;
	for (int i = 0; headers && headers[i]; i++)
		hl = curl_slist_append(hl, headers[i]);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	if (!strcmp(method, "HEAD"))
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	if (body) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
	}
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, sink_write);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, &h);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
	if (d->cainfo)
		curl_easy_setopt(c, CURLOPT_CAINFO, d->cainfo);
	CURLcode rc = curl_easy_perform(c);
	ck_assert_msg(rc == CURLE_OK, "request %s failed: %s", path, curl_easy_strerror(rc));
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
	curl_slist_free_all(hl);
	r->body = b.p ? b.p : calloc(1, 1);
	r->len = b.len;
	r->headers = h.p ? h.p : calloc(1, 1);
}

void pe_request(const struct pe_daemon *d, const char *method, const char *path, const char *const *headers,
		const void *body, size_t body_len, struct pe_resp *r)
{
	struct pe_conn conn;
	pe_conn_open(&conn, d);
	pe_conn_request(&conn, method, path, headers, body, body_len, r);
	pe_conn_close(&conn);
}

void pe_get(const struct pe_daemon *d, const char *path, struct pe_resp *r)
{
	pe_request(d, "GET", path, NULL, NULL, 0, r);
}

const char *pe_resp_header(const struct pe_resp *r, const char *name, char *buf, size_t cap)
{
	return pe_http_header(r->headers, name, buf, cap);
}

json_t *pe_resp_json(const struct pe_resp *r)
{
	json_error_t e;
	json_t *j = json_loadb(r->body, r->len, 0, &e);
	ck_assert_msg(j != NULL, "invalid JSON (%s): %.200s", e.text, r->body);
	return j;
}

void pe_assert_problem(const struct pe_resp *r, long status, const char *param)
{
	char ct[128], why[1024];
	const char *type = pe_resp_header(r, "Content-Type", ct, sizeof ct);
	ck_assert_msg(pe_http_is_problem(r->status, type, r->body, r->len, status, param, why, sizeof why), "%s", why);
}

double pe_metric(const struct pe_daemon *d, const char *name)
{
	struct pe_resp r;
	double v = 0;
	pe_get(d, "/metrics", &r);
	ck_assert_int_eq(r.status, 200);
	int found = pe_http_metric(r.body, name, &v);
	pe_resp_free(&r);
	ck_assert_msg(found, "no metric %s", name);
	return v;
}

double pe_metric_becomes(const struct pe_daemon *d, const char *name, double want)
{
	double v = pe_metric(d, name);
	for (int i = 0; i < 2000 && v != want; i++) {
		usleep(10000);
		v = pe_metric(d, name);
	}
	return v;
}

void pe_resp_free(struct pe_resp *r)
{
	free(r->body);
	free(r->headers);
	memset(r, 0, sizeof *r);
}

size_t pe_raw_exchange(const struct pe_daemon *d, const char *request, size_t len, char *buf, size_t cap,
		       int timeout_ms)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)d->s.port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
	ck_assert_int_eq(send(fd, request, len, MSG_NOSIGNAL), (ssize_t)len);
	size_t got = 0;
	struct pollfd p = {.fd = fd, .events = POLLIN};
	while (got + 1 < cap && poll(&p, 1, timeout_ms) > 0) {
		ssize_t n = recv(fd, buf + got, cap - 1 - got, 0);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	buf[got] = 0;
	close(fd);
	return got;
}
