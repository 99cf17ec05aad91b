/* Structured logs: one JSON object per line on stdout, {"time","level","event",...fields}. */
#ifndef PE_DAEMON_LOG_H
#define PE_DAEMON_LOG_H

#include <jansson.h>
#include "daemon/config.h"

void pe_log_set_level(enum pe_log_level level);
int pe_log_enabled(enum pe_log_level level);
/* Write one line with event and the members of fields (stolen: decref'd here; may be NULL). */
void pe_log(enum pe_log_level level, const char *event, json_t *fields);

#endif
