/* Every PostgreSQL error the store meets, classified once, here, by its SQLSTATE (libpq's own
 * failures, no answer by the deadline or a lost connection, have none):
 *
 *   unavailable or transient   no answer, a connection failure (class 08), a statement cancelled
 *                              or timed out (57014), a lock not available (55P03), a serialization
 *                              failure or deadlock (40001, 40P01), insufficient resources (class
 *                              53), the server shutting down or starting (57P01..57P03), a session
 *                              or transaction timeout (25P03, 25P04, 57P05)
 *                              -> PE_EUNAVAIL: 503 with Retry-After; the transaction was rolled back
 *                              (or its connection closed), so a retry is safe
 *   insufficient privilege     (42501) on a put or a delete -> PE_EFORBIDDEN (403: this replica may
 *                              not write; retrying does not help); on a read -> PE_ESTORE
 *   anything else              (a table dropped, a column of another type, ...) -> PE_ESTORE (500)
 *
 * Only a row whose elements fail their SHA-256 is "damaged" (pg.c). The detail is the server's
 * primary message with its SQLSTATE: no host, no query text, fit for the client as written. Errors
 * that are not unavailability are the database's configuration: logged ("store_error"), once per
 * cause, not once per request.
 *
 * The deadline: an operation ends op_ms after it starts, or PG_WAITER_MARGIN_MS before its
 * thread's cancel deadline (the HTTP job's, at job_timeout) when that comes first; the session's
 * statement_timeout (stmt_ms) is shorter than op_ms, so a statement held by a lock ends with the
 * server's 57014 (the connection kept) within the deadline, and the HTTP layer never answers for
 * the store. */
#include "store/pg.h"

#include "posenc/core.h"

#include <stdlib.h>

int64_t pg_deadline(const struct pgstore *s)
{
	int64_t now = pg_now_ms(), d = now + s->op_ms;
	double cancel = pe_cancel_deadline();
	if (cancel > 0) {
		int64_t c = (int64_t)(cancel * 1000.0) - PG_WAITER_MARGIN_MS;
		if (c < d)
			d = c > now ? c : now;
	}
	return d;
}

int pg_sqlstate_code(const char *st, int write)
{
	static const char *const transient[] = {"57014", "55P03", "40001", "40P01", "57P01", "57P02", "57P03",
						"57P05", "25P03", "25P04"};
	if (!st || strlen(st) != 5 || !strncmp(st, "08", 2) || !strncmp(st, "53", 2))
		return PE_EUNAVAIL;
	for (size_t i = 0; i < sizeof transient / sizeof transient[0]; i++)
		if (!strcmp(st, transient[i]))
			return PE_EUNAVAIL;
	return write && !strcmp(st, "42501") ? PE_EFORBIDDEN : PE_ESTORE;
}

/* Log detail unless it is the cause logged last. */
static void note_once(struct pgstore *s, const char *detail)
{
	pthread_mutex_lock(&s->lock);
	int fresh = strcmp(s->cause, detail) != 0;
	if (fresh)
		snprintf(s->cause, sizeof s->cause, "%s", detail);
	pthread_mutex_unlock(&s->lock);
	if (fresh)
		pg_note(s, "store_error", detail);
}

static int unavailable(struct pgstore *s, struct pe_err *err, const char *why)
{
	pthread_mutex_lock(&s->lock);
	s->unavailable++;
	pthread_mutex_unlock(&s->lock);
	return pe_err_set(err, PE_EUNAVAIL, "", "the learned-table database cannot serve this now (%.170s); nothing "
			  "changed; retry", why);
}

int pg_fail(struct pgstore *s, const PGresult *r, PGconn *c, int write, struct pe_err *err)
{
	char why[200];
	const char *st = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
	const char *msg = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	int code = pg_sqlstate_code(st, write);
	if (!st) {
		pg_reason(c, why, sizeof why);
		if (!why[0] || (c && PQstatus(c) == CONNECTION_OK))
			snprintf(why, sizeof why, "no answer within the store's deadline");
	} else
		snprintf(why, sizeof why, "%.160s (SQLSTATE %s)", msg ? msg : "an error", st);
	if (code == PE_EUNAVAIL)
		return unavailable(s, err, why);
	if (code == PE_EFORBIDDEN)
		pe_err_set(err, code, "", "the learned-table database refused the write: %s; this posencd's role may read, "
			   "not write", why);
	else
		pe_err_set(err, code, "", "the learned-table database refused the %s: %s", write ? "write" : "read", why);
	note_once(s, err->detail);
	return code;
}
