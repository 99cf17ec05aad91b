/* JSON-lines logging (see log.h). A line is built whole and written with one fwrite under the
 * stdio lock, so lines from different threads never interleave. */
#include "daemon/log.h"
#include "http/http.h"

#include <pthread.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static enum pe_log_level current = PE_LOG_INFO;

void pe_log_set_level(enum pe_log_level level) { current = level; }

int pe_log_enabled(enum pe_log_level level) { return level <= current; }

static void utc_now(char *buf, size_t cap)
{
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	size_t n = strftime(buf, cap, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, cap - n, ".%03ldZ", ts.tv_nsec / 1000000);
}

static pthread_mutex_t access_lock = PTHREAD_MUTEX_INITIALIZER;
static char access_buf[64 * 1024];
static size_t access_len;

static void flush_locked(void)
{
	if (!access_len)
		return;
	flockfile(stdout);
	fwrite(access_buf, 1, access_len, stdout);
	fflush(stdout);
	funlockfile(stdout);
	access_len = 0;
}

void pe_log_flush(void)
{
	pthread_mutex_lock(&access_lock);
	flush_locked();
	pthread_mutex_unlock(&access_lock);
}

/* JSON string body of s (without quotes), control and non-ASCII bytes escaped as \u00XX. */
static size_t json_escape(char *dst, size_t cap, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = 0;
	for (; *s && n + 7 < cap; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			dst[n++] = '\\';
			dst[n++] = (char)c;
		} else if (c < 0x20 || c >= 0x7f) {
			memcpy(dst + n, "\\u00", 4);
			dst[n + 4] = hex[c >> 4];
			dst[n + 5] = hex[c & 15];
			n += 6;
		} else
			dst[n++] = (char)c;
	}
	return n;
}

/* The time of request lines, formatted once per millisecond at most: strftime on every request
 * was a visible share of a cache hit. Each HTTP thread keeps its own. */
static const char *request_time(void)
{
	static _Thread_local char cached[40];
	static _Thread_local struct timespec last;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME_COARSE, &now);
	if (now.tv_sec != last.tv_sec || now.tv_nsec / 1000000 != last.tv_nsec / 1000000 || !cached[0]) {
		utc_now(cached, sizeof cached);
		last = now;
	}
	return cached;
}

/* A request line is assembled by hand: snprintf's format parsing and %.3f were a visible share of
 * a small request's CPU (perf: about 3% of a cold 16x16 miss on the HTTP thread). */
struct line_writer {
	char *p, *end;
};

static void put_bytes(struct line_writer *w, const char *s, size_t n)
{
	size_t room = (size_t)(w->end - w->p);
	n = n < room ? n : room;
	memcpy(w->p, s, n);
	w->p += n;
}

static void put_str(struct line_writer *w, const char *s) { put_bytes(w, s, strlen(s)); }

static void put_uint(struct line_writer *w, unsigned long long v)
{
	char digits[20];
	size_t i = sizeof digits;
	do
		digits[--i] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	put_bytes(w, digits + i, sizeof digits - i);
}

/* Milliseconds with three decimals, as %.3f prints them (rounded to the microsecond). */
static void put_millis(struct line_writer *w, double seconds)
{
	double us = seconds > 0 ? seconds * 1e6 + 0.5 : 0;
	unsigned long long u = us < 1e18 ? (unsigned long long)us : 999999999999999999ull;
	char frac[4] = {(char)('0' + u / 100 % 10), (char)('0' + u / 10 % 10), (char)('0' + u % 10), 0};
	put_uint(w, u / 1000);
	put_bytes(w, ".", 1);
	put_bytes(w, frac, 3);
}

void pe_log_request(const struct pe_http_request_info *info)
{
	char path[1100], rid[200], method[64], line[2048];
	const char *when = request_time();
	path[json_escape(path, sizeof path, info->path ? info->path : "")] = 0;
	rid[json_escape(rid, sizeof rid, info->request_id ? info->request_id : "")] = 0;
	method[json_escape(method, sizeof method, info->method ? info->method : "-")] = 0;
	const char *cache = info->cache_hit > 0 ? "hit" : info->cache_hit == 0 ? "miss" : "-";
	struct line_writer w = {line, line + sizeof line - 1};
	put_str(&w, "{\"time\":\"");
	put_str(&w, when);
	put_str(&w, "\",\"level\":\"info\",\"event\":\"request\",\"method\":\"");
	put_str(&w, method);
	put_str(&w, "\",\"path\":\"");
	put_str(&w, path);
	put_str(&w, "\",\"status\":");
	put_uint(&w, info->status > 0 ? (unsigned long long)info->status : 0);
	put_str(&w, ",\"bytes\":");
	put_uint(&w, (unsigned long long)info->bytes);
	if (info->cut_short)
		put_str(&w, ",\"cut_short\":true");
	put_str(&w, ",\"duration_ms\":");
	put_millis(&w, info->seconds);
	put_str(&w, ",\"cache\":\"");
	put_str(&w, cache);
	put_str(&w, "\",\"request_id\":\"");
	put_str(&w, rid);
	put_str(&w, "\"}\n");
	size_t len = (size_t)(w.p - line);
	pthread_mutex_lock(&access_lock);
	if (access_len + len > sizeof access_buf)
		flush_locked();
	memcpy(access_buf + access_len, line, len);
	access_len += len;
	pthread_mutex_unlock(&access_lock);
}

void pe_log(enum pe_log_level level, const char *event, json_t *fields)
{
	if (!pe_log_enabled(level)) {
		json_decref(fields);
		return;
	}
	char when[40];
	utc_now(when, sizeof when);
	json_t *o = json_pack("{s:s, s:s, s:s}", "time", when, "level", pe_log_level_name(level), "event", event);
	if (o && fields)
		json_object_update(o, fields);
	json_decref(fields);
	char *line = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(o);
	if (!line)
		return;
	pe_log_flush(); /* keep event lines in order with the access lines before them */
	flockfile(stdout);
	fputs(line, stdout);
	fputc('\n', stdout);
	fflush(stdout);
	funlockfile(stdout);
	free(line);
}
