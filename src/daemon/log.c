/* JSON-lines logging (see log.h). A line is built whole and written with one fwrite under the
 * stdio lock, so lines from different threads never interleave. */
#include "daemon/log.h"

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
	flockfile(stdout);
	fputs(line, stdout);
	fputc('\n', stdout);
	fflush(stdout);
	funlockfile(stdout);
	free(line);
}
