/* PostgreSQL connections with deadlines, and the bounded pool that put, delete and read share.
 *
 * Nothing here may hang on a database that stopped answering (a black-holed host, a stopped
 * process): every libpq call is non-blocking (PQconnectStartParams/PQconnectPoll, PQsendQuery*,
 * PQflush, PQconsumeInput) and every wait is a poll on PQsocket bounded by the operation's
 * deadline. A connection that passed its deadline is abandoned (closed), never waited for; the
 * server side also stops a statement at statement_timeout, and TCP keepalives and
 * tcp_user_timeout (added to the URI unless it sets them) notice a dead peer on idle sockets.
 *
 * The pool: a fixed number of slots (max_conns), each a connection made on first use and kept
 * while it works. While the store is down (the listener says so) acquire fails at once, in the
 * class of why it is down (transient: 503 and retry; the database's configuration or a privilege:
 * its error, as a statement meeting it would answer): workers never queue behind a dead database.
 * While it is up and every slot is busy, acquire waits for one at most PG_SLOT_WAIT_MS and then
 * answers PE_EBUSY: the workers held by the database are at most the slots (each for at most the
 * operation timeout), the others keep computing tables. Connections older than the listener's
 * latest reconnection are dropped on acquire (the database may have restarted under them).
 *
 * The deadline (pg_deadline): an operation ends op_ms after it starts, or PG_WAITER_MARGIN_MS
 * before its thread's cancel deadline (the HTTP job's, at job_timeout) when that comes first; the
 * session's statement_timeout (stmt_ms) is shorter than op_ms, so a statement held by a lock ends
 * with the server's 57014 (the connection kept) within the deadline, and the HTTP layer never
 * answers for the store. */
#include "store/pg.h"

#include "posenc/core.h"

#include <poll.h>
#include <stdlib.h>

int64_t pg_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

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

/* Wait for events on c's socket until deadline: 1 ready, 0 timed out, -1 error or abort_fd
 * (the listener's wake pipe, -1: none) became readable or closed: the store is closing. */
static int wait_sock(PGconn *c, short events, int64_t deadline, int abort_fd)
{
	int fd = PQsocket(c);
	if (fd < 0)
		return -1;
	for (;;) {
		int64_t left = deadline - pg_now_ms();
		if (left <= 0)
			return 0;
		struct pollfd p[2] = {{.fd = fd, .events = events}, {.fd = abort_fd, .events = POLLIN}};
		int rc = poll(p, abort_fd >= 0 ? 2 : 1, (int)(left > 1000 ? 1000 : left));
		if (rc > 0 && abort_fd >= 0 && p[1].revents)
			return -1;
		if (rc > 0)
			return 1;
		if (rc < 0 && errno != EINTR)
			return -1;
	}
}

static void copy_why(char *why, size_t cap, const char *what, PGconn *c)
{
	char m[PE_ERR_DETAIL_MAX], pre[64];
	pg_reason(c, m, sizeof m);
	snprintf(pre, sizeof pre, "%s%s", what, *m ? ": " : "");
	pg_fit(why, cap < 200 ? cap : 200, pre, m, "");
}

/* The server's notices ("relation ... already exists, skipping") are not for posencd's stderr. */
static void quiet(void *arg, const char *message) {}

PGconn *pg_connect(struct pgstore *s, int64_t deadline, char *why, size_t cap)
{
	PGconn *c = PQconnectStartParams((const char *const *)s->keys, (const char *const *)s->vals, 0);
	PostgresPollingStatusType st = PGRES_POLLING_WRITING;
	if (!c || PQstatus(c) == CONNECTION_BAD) {
		copy_why(why, cap, "cannot connect", c);
		PQfinish(c);
		return NULL;
	}
	while (st != PGRES_POLLING_OK && st != PGRES_POLLING_FAILED) {
		int w = wait_sock(c, st == PGRES_POLLING_READING ? POLLIN : POLLOUT, deadline, s->wake[0]);
		if (w <= 0) {
			copy_why(why, cap, w == 0 ? "connecting timed out" : "cannot connect", NULL);
			PQfinish(c);
			return NULL;
		}
		st = PQconnectPoll(c);
	}
	PQsetNoticeProcessor(c, quiet, NULL);
	if (st == PGRES_POLLING_FAILED || PQsetnonblocking(c, 1) != 0) {
		copy_why(why, cap, "cannot connect", c);
		PQfinish(c);
		return NULL;
	}
	char set[160];
	snprintf(set, sizeof set, "SET synchronous_commit TO on; SET statement_timeout TO %u", s->stmt_ms);
	PGresult *r = pg_run(c, set, 0, NULL, NULL, NULL, 0, 1, deadline, s->wake[0]);
	int ok = r && PQresultStatus(r) == PGRES_COMMAND_OK;
	if (!ok) {
		copy_why(why, cap, "cannot set up the session", c);
		PQclear(r);
		PQfinish(c);
		return NULL;
	}
	PQclear(r);
	return c;
}

PGresult *pg_run(PGconn *c, const char *sql, int n, const char *const *vals, const int *lens, const int *fmts,
		 int binary, int simple, int64_t deadline, int abort_fd)
{
	PGresult *last = NULL, *r;
	int sent = simple ? PQsendQuery(c, sql) : PQsendQueryParams(c, sql, n, NULL, vals, lens, fmts, binary);
	if (!sent)
		return NULL;
	for (int f; (f = PQflush(c)) != 0;) { /* the parameters may be 64 MiB: sent as the socket takes them */
		if (f < 0 || wait_sock(c, POLLOUT | POLLIN, deadline, abort_fd) <= 0 || !PQconsumeInput(c))
			return NULL;
	}
	for (;;) {
		while (PQisBusy(c)) {
			if (wait_sock(c, POLLIN, deadline, abort_fd) <= 0 || !PQconsumeInput(c)) {
				PQclear(last);
				return NULL;
			}
		}
		if (!(r = PQgetResult(c)))
			break;
		PQclear(last);
		last = r;
	}
	if (!last || PQstatus(c) == CONNECTION_BAD) {
		PQclear(last);
		return NULL;
	}
	return last;
}

int pg_command(PGconn *c, const char *sql, int64_t deadline, int abort_fd, struct pg_why *w)
{
	PGresult *r = pg_run(c, sql, 0, NULL, NULL, NULL, 0, 1, deadline, abort_fd);
	int ok = r && (PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK);
	if (!ok && w)
		pg_describe(r, c, w);
	PQclear(r);
	return ok ? 0 : -1;
}

static int unreachable(struct pgstore *s, struct pe_err *err, const char *why)
{
	char d[PE_ERR_DETAIL_MAX];
	pthread_mutex_lock(&s->lock);
	s->unavailable++;
	pthread_mutex_unlock(&s->lock);
	pg_fit(d, sizeof d, "the learned-table database cannot be reached (", why, "); retry");
	return pe_err_set(err, PE_EUNAVAIL, "", "%s", d);
}

/* The store is down (down: why): the operation's error, in the class of why. */
static int down_error(int code, const char *down, struct pe_err *err)
{
	char d[PE_ERR_DETAIL_MAX];
	if (code == PE_EUNAVAIL)
		pg_fit(d, sizeof d, "the learned-table database cannot serve now (", down, "); retry");
	else
		pg_fit(d, sizeof d, "the learned-table database cannot serve: ", down, "");
	return pe_err_set(err, code, "", "%s", d);
}

/* A free slot (lock held), or NULL. */
static struct pg_slot *free_slot(struct pgstore *s)
{
	struct pg_slot *empty = NULL;
	for (unsigned i = 0; i < s->nslots; i++) {
		struct pg_slot *sl = &s->slots[i];
		if (sl->busy)
			continue;
		if (sl->c && sl->epoch == s->epoch)
			return sl;
		if (!empty)
			empty = sl;
	}
	return empty;
}

int pg_acquire(struct pgstore *s, int64_t deadline, int write, struct pg_slot **slot, struct pe_err *err)
{
	struct pg_slot *sl = NULL;
	PGconn *stale = NULL;
	int64_t until = pg_now_ms() + PG_SLOT_WAIT_MS;
	pthread_mutex_lock(&s->lock);
	while (s->up && !(sl = free_slot(s))) {
		int64_t ms = (until < deadline ? until : deadline) - pg_now_ms();
		struct timespec ts;
		if (ms <= 0)
			break;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += ms / 1000;
		ts.tv_nsec += (ms % 1000) * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&s->changed, &s->lock, &ts);
	}
	int up = s->up, code = up ? 0 : pg_down_code(s, write);
	uint64_t epoch = s->epoch;
	char down[PE_ERR_DETAIL_MAX];
	snprintf(down, sizeof down, "%s", s->down.text[0] ? s->down.text : "not connected yet");
	if (sl && up) {
		sl->busy = 1;
		if (sl->c && sl->epoch != epoch) {
			stale = sl->c;
			sl->c = NULL;
		}
	}
	if (code == PE_EUNAVAIL)
		s->unavailable++;
	pthread_mutex_unlock(&s->lock);
	PQfinish(stale);
	if (!up)
		return down_error(code, down, err);
	if (!sl)
		return pe_err_set(err, PE_EBUSY, "", "every database connection is busy; retry");
	if (!sl->c) {
		char why[PE_ERR_DETAIL_MAX];
		sl->c = pg_connect(s, deadline, why, sizeof why);
		sl->epoch = epoch;
		if (!sl->c) {
			pg_release(s, sl, 1);
			return unreachable(s, err, why);
		}
	}
	*slot = sl;
	return 0;
}

void pg_release(struct pgstore *s, struct pg_slot *sl, int failed)
{
	PGconn *c = NULL;
	pthread_mutex_lock(&s->lock);
	if (failed) {
		c = sl->c;
		sl->c = NULL;
	}
	sl->busy = 0;
	pthread_cond_broadcast(&s->changed);
	pthread_mutex_unlock(&s->lock);
	PQfinish(c);
}
