/* Every PostgreSQL error the store meets, classified once, here, by its SQLSTATE (libpq's own
 * failures, no answer by the deadline or a lost connection, have none):
 *
 *   unavailable or transient   no answer, a connection failure (class 08), a statement cancelled
 *                              or timed out (57014), a lock not available (55P03), a serialization
 *                              failure or deadlock (40001, 40P01), insufficient resources (class
 *                              53), the server shutting down or starting (57P01..57P03), a session
 *                              or transaction timeout (25P03, 25P04, 57P05), a read-only
 *                              transaction on a write (25006: a hot standby during a failover,
 *                              default_transaction_read_only)
 *                              -> PE_EUNAVAIL: 503 with Retry-After; the transaction was rolled back
 *                              (or its connection closed), so a retry is safe
 *   insufficient privilege     (42501) on a put or a delete -> PE_EFORBIDDEN (403: this replica may
 *                              not write; retrying does not help); on a read -> PE_ESTORE
 *   anything else              (a table dropped, a column of another type, ...) -> PE_ESTORE (500)
 *
 * Only a row whose elements fail their SHA-256 is "damaged" (pg.c). The detail is the server's
 * primary message with its SQLSTATE: no host, no query text, fit for the client as written. Errors
 * that are not unavailability are the database's configuration: logged ("store_error"), once per
 * cause while it is among the PG_CAUSES distinct ones logged last, not once per request. The
 * failure that keeps the store down keeps its class too (pg_down_code): a revoked privilege found
 * while reconnecting is the same 500 (403 on a write) as before it, not a promise that a retry
 * helps. Nothing here calls the rest of the store: connections, the listener and the operations
 * describe their failures through it. */
#include "store/pg.h"

#include <stdlib.h>

int pg_sqlstate_code(const char *st, int write)
{
	static const char *const transient[] = {"57014", "55P03", "40001", "40P01", "57P01", "57P02", "57P03",
						"57P05", "25P03", "25P04", "25006"};
	if (!st || strlen(st) != 5 || !strncmp(st, "08", 2) || !strncmp(st, "53", 2))
		return PE_EUNAVAIL;
	for (size_t i = 0; i < sizeof transient / sizeof transient[0]; i++)
		if (!strcmp(st, transient[i]))
			return PE_EUNAVAIL;
	return write && !strcmp(st, "42501") ? PE_EFORBIDDEN : PE_ESTORE;
}

void pg_reason(PGconn *c, char *out, size_t cap)
{
	const char *m = c ? PQerrorMessage(c) : "";
	int n = (int)strcspn(m, "\n");
	/* "connection to server at "host" (addr), port 5432 failed: Connection refused" */
	if (!strncmp(m, "connection to server", 20))
		for (const char *f; (f = strstr(m, "failed: ")) != NULL && f < m + n;) {
			n -= (int)(f + 8 - m);
			m = f + 8;
		}
	snprintf(out, cap, "%.*s", n, m);
}

void pg_note(struct pgstore *s, const char *event, const char *detail)
{
	if (s->log)
		s->log(s->log_arg, event, "store_url", detail);
}

int pg_down_code(const struct pgstore *s, int write)
{
	return pg_sqlstate_code(s->down.state, write);
}

void pg_fit(char *out, size_t cap, const char *pre, const char *reason, const char *post)
{
	size_t fixed = strlen(pre) + strlen(post), n = strlen(reason);
	if (fixed + n < cap) {
		snprintf(out, cap, "%s%s%s", pre, reason, post);
		return;
	}
	size_t k = cap > fixed + 4 ? cap - fixed - 4 : 0; /* room for the reason's start and "..." */
	while (k > 0 && reason[k] != ' ')
		k--;
	while (k > 0 && (reason[k - 1] == ' ' || reason[k - 1] == ',' || reason[k - 1] == ':' || reason[k - 1] == ';'))
		k--;
	snprintf(out, cap, "%s%.*s...%s", pre, (int)k, reason, post);
}

void pg_describe(const PGresult *r, PGconn *c, struct pg_why *w)
{
	const char *st = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
	const char *msg = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	char post[24];
	snprintf(w->state, sizeof w->state, "%s", st && strlen(st) == 5 ? st : "");
	if (w->state[0]) {
		snprintf(post, sizeof post, " (SQLSTATE %s)", w->state);
		pg_fit(w->text, 200, "", msg ? msg : "an error", post);
		return;
	}
	pg_reason(c, w->text, 200);
	if (!w->text[0] || (c && PQstatus(c) == CONNECTION_OK))
		snprintf(w->text, sizeof w->text, "no answer within the store's deadline");
}

void pg_note_once(struct pgstore *s, const char *detail)
{
	int fresh = 1;
	pthread_mutex_lock(&s->lock);
	for (unsigned i = 0; fresh && i < PG_CAUSES; i++)
		fresh = strcmp(s->causes[i], detail) != 0;
	if (fresh) {
		snprintf(s->causes[s->next_cause], sizeof s->causes[0], "%s", detail);
		s->next_cause = (s->next_cause + 1) % PG_CAUSES;
	}
	pthread_mutex_unlock(&s->lock);
	if (fresh)
		pg_note(s, "store_error", detail);
}

static int unavailable(struct pgstore *s, struct pe_err *err, const char *why)
{
	char d[PE_ERR_DETAIL_MAX];
	pthread_mutex_lock(&s->lock);
	s->unavailable++;
	pthread_mutex_unlock(&s->lock);
	pg_fit(d, sizeof d, "the learned-table database cannot serve this now (", why, "); nothing changed; retry");
	return pe_err_set(err, PE_EUNAVAIL, "", "%s", d);
}

int pg_fail(struct pgstore *s, const PGresult *r, PGconn *c, int write, struct pe_err *err)
{
	struct pg_why w;
	char d[PE_ERR_DETAIL_MAX];
	pg_describe(r, c, &w);
	int code = pg_sqlstate_code(w.state, write);
	if (write && !strcmp(w.state, "25006")) { /* readiness says writes fail until one succeeds */
		pthread_mutex_lock(&s->lock);
		pg_fit(s->ro_why, sizeof s->ro_why, "the database refuses writes now: ", w.text, "");
		pthread_mutex_unlock(&s->lock);
	}
	if (code == PE_EUNAVAIL)
		return unavailable(s, err, w.text);
	/* the database's message names what was refused: the table, the sequence, the schema */
	pg_fit(d, sizeof d, write ? "the learned-table database refused the write: " :
	       "the learned-table database refused the read: ", w.text, "");
	pe_err_set(err, code, "", "%s", d);
	pg_note_once(s, err->detail);
	return code;
}
