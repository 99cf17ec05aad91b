/* End-to-end test support (see pe_daemon.h). */
#include "support/pe_daemon.h"

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

#ifndef PE_BUILD_DIR
#define PE_BUILD_DIR "build"
#endif

const char *pe_daemon_bin(void)
{
	const char *env = getenv("POSENC_BIN");
	return env ? env : PE_BUILD_DIR "/posencd";
}

char *pe_daemon_log(const struct pe_daemon *d)
{
	FILE *f = fopen(d->log_path, "rb");
	if (!f)
		return strdup("");
	char *buf = NULL;
	size_t cap = 0, len = 0, n;
	char chunk[4096];
	while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
		if (len + n + 1 > cap) {
			cap = (len + n + 1) * 2;
			buf = realloc(buf, cap);
		}
		memcpy(buf + len, chunk, n);
		len += n;
	}
	fclose(f);
	if (!buf)
		return strdup("");
	buf[len] = 0;
	return buf;
}

static int find_port(const char *log)
{
	const char *p = strstr(log, "\"event\":\"start\"");
	if (!p)
		return 0;
	const char *q = strstr(p, "\"port\":");
	return q ? atoi(q + 7) : 0;
}

void pe_daemon_start(struct pe_daemon *d, const char *const *argv_extra)
{
	memset(d, 0, sizeof *d);
	snprintf(d->log_path, sizeof d->log_path, "/tmp/posenc-e2e-%d-%ld.log", (int)getpid(), (long)random());
	const char *args[64] = {pe_daemon_bin(), "--port", "0", "--bind", "127.0.0.1", "--log-level", "info"};
	int n = 7;
	for (int i = 0; argv_extra && argv_extra[i] && n < 62; i++)
		args[n++] = argv_extra[i];
	args[n] = NULL;
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd = open(d->log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(fd, 1);
		execv(args[0], (char *const *)args);
		_exit(127);
	}
	d->pid = pid;
	for (int i = 0; i < 1000 && !d->port; i++) {
		char *log = pe_daemon_log(d);
		d->port = find_port(log);
		free(log);
		if (!d->port) {
			int st;
			ck_assert_msg(waitpid(pid, &st, WNOHANG) == 0, "posencd exited during start-up");
			usleep(10000);
		}
	}
	ck_assert_msg(d->port > 0, "posencd did not report its port");
}

int pe_daemon_stop(struct pe_daemon *d, int sig)
{
	int st = 0;
	if (d->pid <= 0)
		return -1;
	kill(d->pid, sig);
	for (int i = 0; i < 2000; i++) {
		pid_t r = waitpid(d->pid, &st, WNOHANG);
		if (r == d->pid) {
			d->pid = 0;
			unlink(d->log_path);
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		}
		usleep(10000);
	}
	kill(d->pid, SIGKILL);
	waitpid(d->pid, &st, 0);
	d->pid = 0;
	return -1;
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

void pe_request(const struct pe_daemon *d, const char *method, const char *path, const char *const *headers,
		const void *body, size_t body_len, struct pe_resp *r)
{
	char url[4096];
	if (d->cainfo)
		snprintf(url, sizeof url, "https://localhost:%d%s", d->port, path);
	else
		snprintf(url, sizeof url, "http://127.0.0.1:%d%s", d->port, path);
	CURL *c = curl_easy_init();
	ck_assert_ptr_nonnull(c);
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
	curl_easy_cleanup(c);
	r->body = b.p ? b.p : calloc(1, 1);
	r->len = b.len;
	r->headers = h.p ? h.p : calloc(1, 1);
}

void pe_get(const struct pe_daemon *d, const char *path, struct pe_resp *r)
{
	pe_request(d, "GET", path, NULL, NULL, 0, r);
}

const char *pe_resp_header(const struct pe_resp *r, const char *name, char *buf, size_t cap)
{
	size_t nlen = strlen(name);
	for (const char *line = r->headers; line && *line;) {
		const char *eol = strstr(line, "\r\n");
		size_t len = eol ? (size_t)(eol - line) : strlen(line);
		if (len > nlen && line[nlen] == ':' && strncasecmp(line, name, nlen) == 0) {
			const char *v = line + nlen + 1;
			while (*v == ' ')
				v++;
			size_t vlen = (size_t)(line + len - v);
			if (vlen >= cap)
				vlen = cap - 1;
			memcpy(buf, v, vlen);
			buf[vlen] = 0;
			return buf;
		}
		line = eol ? eol + 2 : NULL;
	}
	return NULL;
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
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)d->port)};
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
