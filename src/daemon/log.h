/* Structured logs: one JSON object per line on stdout, {"time","level","event",...fields}. */
#ifndef PE_DAEMON_LOG_H
#define PE_DAEMON_LOG_H

#include <jansson.h>
#include "daemon/config.h"

void pe_log_set_level(enum pe_log_level level);
int pe_log_enabled(enum pe_log_level level);
/* Write one line with event and the members of fields (stolen: decref'd here; may be NULL). */
void pe_log(enum pe_log_level level, const char *event, json_t *fields);

/* One access-log line per request:
 * {"time","level":"info","event":"request","method","path","status","bytes","duration_ms","cache",
 *  "request_id"}. Lines are built by hand (this runs on the HTTP thread for every request) into a
 * buffer that is written when it fills and on pe_log_flush (called periodically and at exit). */
struct pe_http_request_info;
void pe_log_request(const struct pe_http_request_info *info);
void pe_log_flush(void);

#endif
