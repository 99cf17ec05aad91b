/* The connection guard: clients too slow to be served (slowloris), the connection limits, and the
 * answers libmicrohttpd would otherwise give itself. Its callbacks are libmicrohttpd's (their cls
 * is the guard); server.c hands them over when it starts the daemon. */
#ifndef PE_HTTP_CONN_GUARD_H
#define PE_HTTP_CONN_GUARD_H

#include "http/internal.h"

/* What a connection is doing, for the slow-client rules (see conn_guard.c). */
enum { PH_HEADERS, PH_BODY, PH_DISCARD, PH_ANSWER, PH_SEND };

struct pe_conn_guard *pe_conn_guard_new(const struct pe_http_options *opt);
void pe_conn_guard_free(struct pe_conn_guard *g);
/* libmicrohttpd's MHD_OPTION_CONNECTION_LIMIT: above max_connections, see pe_conn_guard_admit. */
unsigned pe_conn_guard_mhd_limit(const struct pe_conn_guard *g);

/* conn enters phase (and read bytes more body bytes in it). */
void pe_conn_guard_phase(struct pe_conn_guard *g, struct MHD_Connection *conn, int phase, size_t bytes);
/* conn's answer, over PE_HTTP_SEND_BOUND bytes, is queued: size bytes of body, or
 * PE_GUARD_SIZE_UNKNOWN (chunked), from the cache entry `entry` (NULL: from memory on the
 * budget). shared: the memory other answers are sent from too (a stream's), when not entry's; the
 * readers of one entry or stream are cut together. Its reader's pace is measured from here
 * (PH_SEND); the guard holds a reference to entry until the answer ends. */
void pe_conn_guard_sending(struct pe_conn_guard *g, struct MHD_Connection *conn, uint64_t size,
			   struct pe_cache_entry *entry, const void *shared);
/* conn's answer from a stream, as it sends (its connection's thread): known, the body bytes its
 * table has so far (all of them once done; what a chunked answer's length is taken to be), and
 * kept: its table is the cache's now, so its reader holds no budget. */
void pe_conn_guard_stream_state(struct MHD_Connection *conn, uint64_t known, int kept);
/* Shut down the sockets of clients past their time (the tick). budget_pressed: the response
 * budget refused a reservation since the last tick, or a job waits for room on it; then the
 * slowest reader of a large answer may be cut too (conn_guard.c). */
void pe_conn_guard_cut(struct pe_conn_guard *g, double now, int budget_pressed);
/* Answers cut because their reader was too slow while the budget was pressed. */
uint64_t pe_conn_guard_answers_cut(const struct pe_conn_guard *g);

/* The accept thread, before it hands a connection over: 0 and the connection counted, or -1 when
 * max_connections are open (close it). unadmit: it was not handed over after all. */
int pe_conn_guard_admit(struct pe_conn_guard *g);
void pe_conn_guard_unadmit(struct pe_conn_guard *g);
void pe_conn_guard_notify_cb(void *cls, struct MHD_Connection *conn, void **socket_context,
			     enum MHD_ConnectionNotificationCode toe);
void pe_conn_guard_log_cb(void *cls, const char *fmt, va_list ap);

#endif
