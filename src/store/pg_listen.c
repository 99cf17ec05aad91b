/* The PostgreSQL store's listener: one thread with its own connection that (1) finds or creates
 * the schema (pg_schema.c), (2) LISTENs on posenc_learned, (3) loads the index, then declares the
 * store up and refreshes from the database each name a notification names (other replicas'
 * writes, within milliseconds; the payload itself is not trusted: any database user may NOTIFY).
 * Its connection is the store's liveness probe: every PG_PING_MS it reads the role's rights again
 * (pg_rights: a GRANT or a REVOKE shows in readiness), a query that must answer within the
 * operation timeout, and any failure declares the store down (put, delete and read then fail at
 * once, in the class of why: PE_EUNAVAIL for a lost connection, the database's error for a
 * revoked privilege or a missing schema; readiness says why, and the log says it once per
 * distinct reason) and reconnects with exponential backoff (PG_BACKOFF_MIN_MS doubling to
 * PG_BACKOFF_MAX_MS). LISTEN is issued before the reload, so a
 * write committed while the index was being loaded is notified afterwards: a replica that
 * reconnects misses nothing. */
#include "store/pg.h"

#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PG_STR_(x) #x
#define PG_STR(x) PG_STR_(x)

/* Every row's metadata into the index (replacing it), LOAD_PAGE rows per query in name order, so
 * no result holds more than a page whatever the table count (a row changed between pages is
 * notified, as LISTEN came first). */
#define LOAD_PAGE 1000
static int load_page(struct pgstore *s, PGconn *c, char **after, struct pg_entry **e, size_t *k, size_t *cap,
		     int *rows, struct pg_why *w)
{
	const char *v[] = {*after};
	PGresult *r = pg_run(c, "SELECT " PG_META_COLS " FROM posenc_learned WHERE name > $1 ORDER BY name LIMIT "
			     PG_STR(LOAD_PAGE), 1, v, NULL, NULL, 1, 0, pg_now_ms() + s->op_ms, s->wake[0]);
	int n = r && PQresultStatus(r) == PGRES_TUPLES_OK ? PQntuples(r) : -1;
	if (n < 0)
		pg_describe(r, c, w);
	if (n > 0 && *k + (size_t)n > *cap) {
		struct pg_entry *g = realloc(*e, (*k + (size_t)n) * 2 * sizeof *g);
		if (g) {
			*e = g;
			*cap = (*k + (size_t)n) * 2;
		} else
			n = -1;
	}
	for (int i = 0; i < n; i++) {
		const char *why;
		if (pg_row_meta(r, i, &(*e)[*k].m, &(*e)[*k].gen, &why) == 0)
			(*k)++;
		else
			pg_note(s, "ignored", why); /* a row posencd did not write */
	}
	if (n > 0) { /* the next page starts after this one's last name (a text of any length) */
		free(*after);
		if (!(*after = strdup(PQgetisnull(r, n - 1, 0) ? "" : PQgetvalue(r, n - 1, 0))))
			n = -1;
	}
	PQclear(r);
	*rows = n;
	return n < 0 ? -1 : 0;
}

/* 0, or -1 with w filled. */
static int load(struct pgstore *s, PGconn *c, struct pg_why *w)
{
	char *after = strdup("");
	struct pg_entry *e = malloc(sizeof *e);
	size_t k = 0, cap = 1;
	int rows = LOAD_PAGE, rc = after && e ? 0 : -1;
	while (rc == 0 && rows == LOAD_PAGE)
		rc = load_page(s, c, &after, &e, &k, &cap, &rows, w);
	free(after);
	if (rc != 0 && !w->text[0])
		snprintf(w->text, sizeof w->text, "out of memory");
	if (rc != 0) {
		free(e);
		return -1;
	}
	pthread_mutex_lock(&s->lock);
	pg_index_replace(s, e, k);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/* The store up (why NULL) or down for why: logged when that changes, and while down each time the
 * reason does (each failed attempt with a new reason: the log says what readiness says). */
static void set_up(struct pgstore *s, int up, const char *note, const struct pg_why *why)
{
	pthread_mutex_lock(&s->lock);
	int was = s->up, first = !s->tried, changed = !up && strcmp(s->down.text, why->text) != 0;
	s->up = up;
	if (up) {
		s->down = (struct pg_why){"", ""};
		s->read_why[0] = s->ro_why[0] = 0; /* the index loaded: reads work; writes are tried again */
		s->epoch++;
	} else
		s->down = *why;
	s->tried = 1;
	pthread_cond_broadcast(&s->changed);
	pthread_mutex_unlock(&s->lock);
	if (was != up || first || changed)
		pg_note(s, up ? "store_up" : "store_down", up ? note : why->text);
}

/* Connect, set up, load: the connection, or NULL with w. */
static PGconn *establish(struct pgstore *s, struct pg_why *w)
{
	int64_t deadline = pg_now_ms() + s->op_ms;
	struct pg_why e = {"", ""};
	*w = e;
	PGconn *c = pg_connect(s, deadline, w->text, sizeof w->text);
	if (!c)
		return NULL;
	int rc = pg_schema(s, c, deadline, s->wake[0], 0, w);
	if (rc == -2) {
		pthread_mutex_lock(&s->lock);
		s->fatal = 1;
		snprintf(s->fatal_why, sizeof s->fatal_why, "%s", w->text);
		pthread_mutex_unlock(&s->lock);
	} else if (rc == 0 && (pg_command(c, "LISTEN " PG_CHANNEL, deadline, s->wake[0], &e) != 0 || load(s, c, &e) != 0)) {
		snprintf(w->state, sizeof w->state, "%s", e.state);
		pg_fit(w->text, sizeof w->text, "cannot listen or load the index: ", e.text, "");
	} else if (rc == 0)
		return c;
	PQfinish(c);
	return NULL;
}

static int stopping(struct pgstore *s)
{
	pthread_mutex_lock(&s->lock);
	int st = s->stopping;
	pthread_mutex_unlock(&s->lock);
	return st;
}

/* What the database holds for name, into the index. A notification only says which name to look
 * at: anyone who can connect may NOTIFY on the channel, so its payload's metadata and generation are
 * never taken as the truth (a forged delete with a huge generation would hide a table for good).
 * 0, or -1 when the connection failed. */
static int refresh(struct pgstore *s, PGconn *c, const char *name)
{
	const char *v[] = {name}, *why;
	struct pe_store_meta m;
	int64_t gen;
	pthread_mutex_lock(&s->lock);
	const struct pg_entry *e = pg_index_find(s, name);
	int64_t seen = e ? e->gen : 0;
	pthread_mutex_unlock(&s->lock);
	PGresult *r = pg_run(c, "SELECT " PG_META_COLS " FROM posenc_learned WHERE name = $1", 1, v, NULL, NULL, 1, 0,
			     pg_now_ms() + s->op_ms, s->wake[0]);
	int ok = r && PQresultStatus(r) == PGRES_TUPLES_OK;
	int row = ok && PQntuples(r) == 1 && pg_row_meta(r, 0, &m, &gen, &why) == 0;
	pthread_mutex_lock(&s->lock);
	if (row)
		pg_index_put(s, &m, gen);
	else if (ok && PQntuples(r) == 0)
		pg_index_gone(s, name, seen);
	if (ok)
		s->notifications++;
	pthread_mutex_unlock(&s->lock);
	PQclear(r);
	return ok ? 0 : -1;
}

/* The distinct names of the notifications libpq holds, up to PENDING_MAX of them. A flood (any
 * database user may NOTIFY, as often as it likes) costs one lookup per distinct name per round, not
 * one per notification; 1 when more distinct names wait than that (the rest are dropped: a reload
 * answers for all of them). Unreadable ones are logged once a round, with their count. */
#define PENDING_MAX 256
struct pending {
	char names[PENDING_MAX][PE_STORE_NAME_MAX + 1];
	size_t n;
};

static int collect(struct pgstore *s, PGconn *c, struct pending *p)
{
	int over = 0;
	uint64_t unreadable = 0;
	p->n = 0;
	for (PGnotify *n; (n = PQnotifies(c)) != NULL; PQfreemem(n)) {
		char name[PE_STORE_NAME_MAX + 1];
		size_t i = 0;
		if (over)
			continue;
		if (pg_payload_name(n->extra, name) != 0) {
			unreadable++;
			continue;
		}
		while (i < p->n && strcmp(p->names[i], name) != 0)
			i++;
		if (i < p->n)
			continue;
		if (p->n == PENDING_MAX)
			over = 1;
		else
			memcpy(p->names[p->n++], name, sizeof name);
	}
	if (unreadable) { /* one line a round, however many came */
		char why[96];
		snprintf(why, sizeof why, "%" PRIu64 " notification(s) posencd cannot read", unreadable);
		pg_note(s, "ignored", why);
	}
	return over;
}

/* Every notification libpq holds, each distinct name refreshed from the database once per round
 * (its queries may bring more: the next round), or the whole index reloaded when too many names
 * wait: -1 when the connection failed. */
static int drain(struct pgstore *s, PGconn *c)
{
	static __thread struct pending p; /* the listener's; 16 KB off its stack */
	for (;;) {
		struct pg_why w = {"", ""};
		if (collect(s, c, &p)) {
			if (load(s, c, &w) != 0)
				return -1;
		} else if (p.n == 0)
			break;
		else
			for (size_t i = 0; i < p.n; i++)
				if (refresh(s, c, p.names[i]) != 0)
					return -1;
	}
	return PQstatus(c) == CONNECTION_BAD ? -1 : 0;
}

/* While readiness reports a refused read, whether the table can be read again: a readiness probe
 * that keeps traffic away must not wait for a request's read to clear it. -1 when the connection
 * failed. */
static int recheck_reads(struct pgstore *s, PGconn *c, int64_t now)
{
	pthread_mutex_lock(&s->lock);
	int refused = s->read_why[0] != 0;
	pthread_mutex_unlock(&s->lock);
	if (!refused)
		return 0;
	PGresult *r = pg_run(c, "SELECT name FROM posenc_learned LIMIT 1", 0, NULL, NULL, NULL, 0, 0, now + s->op_ms,
			     s->wake[0]);
	if (r && PQresultStatus(r) == PGRES_TUPLES_OK) {
		pthread_mutex_lock(&s->lock);
		s->read_why[0] = 0;
		pthread_mutex_unlock(&s->lock);
	}
	PQclear(r);
	return r ? 0 : -1;
}

/* Serve notifications until the connection fails or the store stops; every PG_PING_MS, the rights
 * read again: a query that must answer within the operation timeout (the database may have stopped
 * answering). */
static void serve(struct pgstore *s, PGconn *c)
{
	int64_t last = pg_now_ms();
	if (drain(s, c) != 0) /* what came while the index was loading */
		return;
	while (!stopping(s)) {
		struct pollfd p[2] = {{.fd = PQsocket(c), .events = POLLIN}, {.fd = s->wake[0], .events = POLLIN}};
		int rc = poll(p, 2, 200);
		int64_t now = pg_now_ms();
		if (rc < 0 && errno != EINTR)
			return;
		if (rc > 0 && p[0].revents) {
			if (!PQconsumeInput(c) || drain(s, c) != 0)
				return;
		}
		if (now - last >= PG_PING_MS) {
			struct pg_why w;
			if (pg_rights(s, c, now + s->op_ms, s->wake[0], &w) < 0 || recheck_reads(s, c, now) != 0 ||
			    drain(s, c) != 0)
				return;
			last = pg_now_ms();
		}
	}
}

/* Sleep ms, or less when the store stops. */
static void pause_ms(struct pgstore *s, int ms)
{
	struct pollfd p = {.fd = s->wake[0], .events = POLLIN};
	poll(&p, 1, ms);
}

static void *listener(void *arg)
{
	struct pgstore *s = arg;
	int backoff = PG_BACKOFF_MIN_MS;
	uint64_t connects = 0;
	while (!stopping(s)) {
		static const struct pg_why lost = {"the connection to the database was lost; reconnecting", ""};
		struct pg_why why;
		PGconn *c = establish(s, &why);
		if (c) {
			backoff = PG_BACKOFF_MIN_MS;
			connects++;
			set_up(s, 1, connects > 1 ? "reconnected; index reloaded" : "connected; index loaded", NULL);
			serve(s, c);
			PQfinish(c);
			if (stopping(s))
				break;
			set_up(s, 0, NULL, &lost);
		} else {
			set_up(s, 0, NULL, &why);
		}
		pause_ms(s, backoff);
		backoff = backoff * 2 > PG_BACKOFF_MAX_MS ? PG_BACKOFF_MAX_MS : backoff * 2;
	}
	return NULL;
}

int pg_listen_start(struct pgstore *s, struct pe_err *err)
{
	if (pipe2(s->wake, O_CLOEXEC) != 0)
		return pe_err_set(err, PE_EIO, "store_url", "cannot create a pipe: %s", strerror(errno));
	if (pthread_create(&s->listener, NULL, listener, s) != 0) {
		close(s->wake[0]);
		close(s->wake[1]);
		s->wake[0] = s->wake[1] = -1;
		return pe_err_set(err, PE_EIO, "store_url", "cannot start the listener thread");
	}
	return 0;
}

void pg_listen_stop(struct pgstore *s)
{
	if (s->wake[1] < 0)
		return;
	pthread_mutex_lock(&s->lock);
	s->stopping = 1;
	pthread_mutex_unlock(&s->lock);
	close(s->wake[1]); /* wakes poll in serve and pause_ms */
	pthread_join(s->listener, NULL);
	close(s->wake[0]);
	s->wake[0] = s->wake[1] = -1;
}
