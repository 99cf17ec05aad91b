/* The PostgreSQL store (the contract: include/posenc/store.h; the design: pg.h).
 *
 * Schema (version 1, found or created by pg_schema.c): posenc_learned(name text PRIMARY KEY, dtype,
 * nrows, ncols, prefix_tokens, grid_h, grid_w, bytes, sha256 bytea, created_ms, max_abs,
 * generation, data bytea STORAGE EXTERNAL), the sequence posenc_generation and
 * posenc_schema_version. Elements travel as binary bytea in both directions (PQexecParams-style
 * binary parameters and results): a 64 MiB table is 64 MiB on the wire, never escaped text.
 *
 * A write is one transaction on a pooled connection (synchronous_commit on for the session):
 * BEGIN; the write lock (pg_advisory_xact_lock: writes of every replica serialise, which makes
 * the space check exact and generations follow commit order); the space check and a generation;
 * the INSERT ... ON CONFLICT DO UPDATE (or DELETE) and pg_notify with the new metadata; the
 * caller's commit callback, which may still call it off (ROLLBACK); COMMIT. Answering only after
 * COMMIT returned means an acknowledged write is in the database's WAL, flushed: a posencd killed
 * after it loses nothing, and readers (of any replica) see the old row or the new one, never a mix.
 * When the connection breaks during COMMIT, the outcome is unknown and the error says so.
 *
 * Reads fetch the row and check its elements against the SHA-256 kept with them (and the length
 * against the shape) before anything is served: a damaged row is PE_EIO, never data. Every
 * database error is classified by pg_fail (pg_error.c); a failed statement ends its transaction
 * (ROLLBACK, or the connection closed), so nothing is half-done. One deadline (pg_deadline),
 * taken when the operation starts, bounds acquiring a connection and every statement. */
#include "store/pg.h"

#include <inttypes.h>
#include <stdlib.h>

#define WRITE_LOCK "7300617"

static struct pgstore *pg(struct pe_store *b) { return (struct pgstore *)b; }

/* ---- one step of a transaction ---- */

/* An operation on a pooled connection: its deadline (pg_deadline), whether it writes, and whether
 * its connection is to be closed when released (it failed, or is in an unknown state). */
struct op {
	struct pgstore *s;
	PGconn *c;
	int64_t deadline;
	int write, failed;
};

/* Run one statement; *out (may be NULL) keeps its result. 0, or the classified error (pg_fail). */
static int step(struct op *o, const char *sql, int n, const char *const *vals, const int *lens, const int *fmts,
		PGresult **out, struct pe_err *err)
{
	PGresult *r = pg_run(o->c, sql, n, vals, lens, fmts, 0, n == 0, o->deadline, -1);
	if (out)
		*out = NULL;
	ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
	if (r && (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)) {
		if (out)
			*out = r;
		else
			PQclear(r);
		return 0;
	}
	if (!r || PQstatus(o->c) == CONNECTION_BAD)
		o->failed = 1;
	int rc = pg_fail(o->s, r, o->c, o->write, err);
	PQclear(r);
	return rc;
}

/* End a transaction that failed (or was called off) with code: ROLLBACK, or the connection is
 * closed (the server then rolls it back) when that does not work by the deadline. */
static int abort_tx(struct op *o, int code)
{
	struct pe_err ignored;
	if (o->failed || step(o, "ROLLBACK", 0, NULL, NULL, NULL, NULL, &ignored) != 0)
		o->failed = 1;
	return code;
}

static int called_off(struct pe_err *err, int code)
{
	return pe_err_set(err, code, "", "the write was called off before it was committed; nothing changed");
}

/* COMMIT, and its outcome: 0, or an error saying whether anything may have changed. */
static int commit(struct op *o, struct pe_err *err)
{
	int rc = step(o, "COMMIT", 0, NULL, NULL, NULL, NULL, err);
	if (rc == 0 || !o->failed)
		return rc; /* refused by the server: rolled back, nothing changed */
	return pe_err_set(err, PE_EUNAVAIL, "", "the connection failed during COMMIT: the write may or may not have been "
			  "applied (GET tells); retry");
}

/* BEGIN, the write lock, and a generation; the sum of the other tables' bytes and whether name
 * exists. */
static int begin_write(struct op *o, const char *name, int64_t *gen, uint64_t *others, int *exists,
		       struct pe_err *err)
{
	PGresult *r;
	const char *v[] = {name};
	int rc = step(o, "BEGIN; SELECT pg_advisory_xact_lock(" WRITE_LOCK ")", 0, NULL, NULL, NULL, NULL, err);
	if (rc == 0)
		rc = step(o, "SELECT (SELECT coalesce(sum(bytes), 0) FROM posenc_learned WHERE name <> $1)::bigint, "
			     "(SELECT count(*) FROM posenc_learned WHERE name = $1), nextval('posenc_generation')",
			  1, v, NULL, NULL, &r, err);
	if (rc != 0)
		return abort_tx(o, rc);
	*others = strtoull(PQgetvalue(r, 0, 0), NULL, 10);
	*exists = atoi(PQgetvalue(r, 0, 1)) > 0;
	*gen = strtoll(PQgetvalue(r, 0, 2), NULL, 10);
	PQclear(r);
	return 0;
}

/* The privileges the role lacks for a put or a delete as last read, into why ("": none). */
static int lacks(struct pgstore *s, int del, char *why, size_t cap)
{
	pthread_mutex_lock(&s->lock);
	snprintf(why, cap, "%s", del ? s->no_del : s->no_put);
	pthread_mutex_unlock(&s->lock);
	return why[0] != 0;
}

/* A write this role may not make: PE_EFORBIDDEN naming the privileges it lacks, before any
 * transaction. The rights are read again first (one query) when they would refuse it, so a GRANT
 * takes effect at the next write. */
static int refused(struct pgstore *s, int del, struct pe_err *err)
{
	char why[PE_ERR_DETAIL_MAX];
	struct pg_slot *sl;
	struct pe_err ignored;
	struct pg_why w;
	if (!lacks(s, del, why, sizeof why))
		return 0;
	int64_t deadline = pg_deadline(s);
	if (pg_acquire(s, deadline, 1, &sl, &ignored) == 0) {
		int rc = pg_rights(s, sl->c, deadline, -1, &w);
		pg_release(s, sl, rc < 0);
		if (!lacks(s, del, why, sizeof why))
			return 0;
	}
	return pe_err_set(err, PE_EFORBIDDEN, "", "%s", why);
}

/* A write committed: the database takes writes (again). */
static void wrote(struct pgstore *s)
{
	pthread_mutex_lock(&s->lock);
	s->ro_why[0] = 0;
	pthread_mutex_unlock(&s->lock);
}

/* ---- put ---- */

static int write_row(struct op *o, const struct pe_store_meta *m, const void *data, int64_t gen, struct pe_err *err)
{
	char num[9][32], payload[512];
	snprintf(num[0], 32, "%" PRIu64, m->rows);
	snprintf(num[1], 32, "%" PRIu64, m->cols);
	snprintf(num[2], 32, "%" PRIu64, m->prefix_tokens);
	snprintf(num[3], 32, "%" PRIu64, m->grid_h);
	snprintf(num[4], 32, "%" PRIu64, m->grid_w);
	snprintf(num[5], 32, "%" PRIu64, m->bytes);
	snprintf(num[6], 32, "%" PRId64, m->created_ms);
	snprintf(num[7], 32, "%.17g", m->max_abs);
	snprintf(num[8], 32, "%" PRId64, gen);
	const char *v[] = {m->name, pe_dtype_name(m->dtype), num[0], num[1], num[2], num[3], num[4], num[5],
			   (const char *)m->sha256, num[6], num[7], num[8], data};
	int lens[13] = {0}, fmts[13] = {0};
	lens[8] = 32, fmts[8] = 1;
	lens[12] = (int)m->bytes, fmts[12] = 1; /* max_table_bytes is at most 2^36: see pg_open's check */
	int rc = step(o, "INSERT INTO posenc_learned (" PG_META_COLS ", data) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, "
			 "$9, $10, $11, $12, $13) ON CONFLICT (name) DO UPDATE SET dtype = EXCLUDED.dtype, nrows = "
			 "EXCLUDED.nrows, ncols = EXCLUDED.ncols, prefix_tokens = EXCLUDED.prefix_tokens, grid_h = "
			 "EXCLUDED.grid_h, grid_w = EXCLUDED.grid_w, bytes = EXCLUDED.bytes, sha256 = EXCLUDED.sha256, "
			 "created_ms = EXCLUDED.created_ms, max_abs = EXCLUDED.max_abs, generation = "
			 "EXCLUDED.generation, data = EXCLUDED.data",
		      13, v, lens, fmts, NULL, err);
	pg_payload_put(m, gen, payload, sizeof payload);
	const char *pv[] = {payload};
	return rc != 0 ? rc : step(o, "SELECT pg_notify('" PG_CHANNEL "', $1)", 1, pv, NULL, NULL, NULL, err);
}

static int put_tx(struct op *o, struct pe_store_meta *m, const void *data, int *replaced, pe_store_commit_cb cb,
		  void *arg, int64_t *gen, struct pe_err *err)
{
	uint64_t others, max = o->s->base.max_bytes;
	int rc = begin_write(o, m->name, gen, &others, replaced, err);
	if (rc != 0)
		return rc;
	if (others + m->bytes > max)
		rc = pe_err_set(err, PE_ENOSPACE, "", "the store holds %" PRIu64 " bytes of other tables; this one needs %"
				PRIu64 " more; store_max_bytes is %" PRIu64, others, m->bytes, max);
	else if ((rc = write_row(o, m, data, *gen, err)) == 0 && cb && (rc = cb(arg)) != 0)
		rc = called_off(err, rc);
	if (rc != 0)
		return abort_tx(o, rc);
	return commit(o, err);
}

static int put_op(struct pe_store *b, struct pe_store_meta *m, const void *data, int *replaced, pe_store_commit_cb cb,
		  void *arg, struct pe_err *err)
{
	struct pgstore *s = pg(b);
	const char *why, *param;
	struct pg_slot *sl;
	int64_t gen = 0;
	int rep = 0;
	int rc = pe_store_name_check(m->name, strnlen(m->name, sizeof m->name), err);
	if (rc != 0)
		return rc;
	if (store_meta_check(m, &why, &param) != 0)
		return pe_err_set(err, PE_EINVAL, param, "%s", why);
	if (m->bytes > b->max_table_bytes)
		return pe_err_set(err, PE_ETOOBIG, "body", "the table is %" PRIu64 " bytes; max_table_bytes is %" PRIu64,
				  m->bytes, b->max_table_bytes);
	if ((rc = refused(s, 0, err)) != 0)
		return rc;
	store_sha256(data, (size_t)m->bytes, m->sha256);
	m->max_abs = store_max_abs(m->dtype, data, (size_t)(m->rows * m->cols), 0);
	m->created_ms = store_now_ms();
	struct op o = {.s = s, .deadline = pg_deadline(s), .write = 1};
	if ((rc = pg_acquire(s, o.deadline, 1, &sl, err)) != 0)
		return rc;
	o.c = sl->c;
	rc = put_tx(&o, m, data, &rep, cb, arg, &gen, err);
	pg_release(s, sl, o.failed);
	if (rc == 0) {
		wrote(s);
		pthread_mutex_lock(&s->lock);
		pg_index_put(s, m, gen);
		pthread_mutex_unlock(&s->lock);
	}
	if (replaced)
		*replaced = rep;
	return rc;
}

/* ---- delete ---- */

static int del_tx(struct op *o, const char *name, pe_store_commit_cb cb, void *arg, int64_t *gen,
		  struct pe_err *err)
{
	uint64_t others;
	int exists, rc = begin_write(o, name, gen, &others, &exists, err);
	char payload[128];
	if (rc != 0)
		return rc;
	snprintf(payload, sizeof payload, "D %" PRId64 " %s", *gen, name);
	const char *v[] = {name}, *pv[] = {payload};
	if (!exists)
		rc = pe_err_set(err, PE_ENOTFOUND, "name", "no learned table named %s", name);
	else if ((rc = step(o, "DELETE FROM posenc_learned WHERE name = $1", 1, v, NULL, NULL, NULL, err)) == 0 &&
		 (rc = step(o, "SELECT pg_notify('" PG_CHANNEL "', $1)", 1, pv, NULL, NULL, NULL, err)) == 0 && cb &&
		 (rc = cb(arg)) != 0)
		rc = called_off(err, rc);
	if (rc != 0)
		return abort_tx(o, rc);
	return commit(o, err);
}

static int del_op(struct pe_store *b, const char *name, pe_store_commit_cb cb, void *arg, struct pe_err *err)
{
	struct pgstore *s = pg(b);
	struct pg_slot *sl;
	int64_t gen = 0;
	if (pe_store_name_check(name, strlen(name), err) != 0)
		return PE_EINVAL;
	int rc = refused(s, 1, err);
	struct op o = {.s = s, .deadline = pg_deadline(s), .write = 1};
	if (rc != 0 || (rc = pg_acquire(s, o.deadline, 1, &sl, err)) != 0)
		return rc;
	o.c = sl->c;
	rc = del_tx(&o, name, cb, arg, &gen, err);
	pg_release(s, sl, o.failed);
	if (rc == 0) {
		wrote(s);
		pthread_mutex_lock(&s->lock);
		pg_index_del(s, name, gen);
		pthread_mutex_unlock(&s->lock);
	}
	return rc;
}

/* ---- reading ---- */

/* The row of name is gone; seen is the generation the index held when the read began. */
static int gone(struct pgstore *s, const char *name, int64_t seen, struct pe_err *err)
{
	pthread_mutex_lock(&s->lock);
	pg_index_gone(s, name, seen);
	pthread_mutex_unlock(&s->lock);
	return pe_err_set(err, PE_ENOTFOUND, "name", "no learned table named %s", name);
}

/* The row (binary result r) as the table: verified, copied into *data. */
static int take_row(struct pgstore *s, const PGresult *r, const char *name, const struct pe_store_meta *want,
		    struct pe_store_meta *m, void **data, struct pe_err *err)
{
	int64_t gen;
	const char *why;
	uint8_t sum[32];
	if (pg_row_meta(r, 0, m, &gen, &why) != 0 || PQgetisnull(r, 0, 12))
		return pe_err_set(err, PE_EIO, "", "the stored table %s is damaged (%s)", name, why);
	const char *bytes = PQgetvalue(r, 0, 12);
	size_t len = (size_t)PQgetlength(r, 0, 12);
	if (len != m->bytes)
		return pe_err_set(err, PE_EIO, "", "the stored table %s is damaged (%zu bytes of elements, its shape says "
				  "%" PRIu64 ")", name, len, m->bytes);
	store_sha256(bytes, len, sum);
	if (memcmp(sum, m->sha256, 32) != 0)
		return pe_err_set(err, PE_EIO, "", "the stored table %s is damaged (its elements do not match their "
				  "SHA-256)", name);
	pthread_mutex_lock(&s->lock);
	pg_index_put(s, m, gen);
	pthread_mutex_unlock(&s->lock);
	if (want && !pe_store_same_version(m, want))
		return pe_err_set(err, PE_EBUSY, "", "the table %s was replaced while this request ran; retry", name);
	if (!(*data = malloc(len ? len : 1)))
		return pe_err_set(err, PE_ENOMEM, "", "out of memory");
	memcpy(*data, bytes, len);
	return 0;
}

/* Readiness reports a read the database refused for a reason that is not transient, until a read
 * succeeds (rc 0: the database answered). */
static void read_outcome(struct pgstore *s, int rc, const struct pe_err *err)
{
	if (rc != 0 && rc != PE_ESTORE)
		return;
	pthread_mutex_lock(&s->lock);
	snprintf(s->read_why, sizeof s->read_why, "%s", rc ? err->detail : "");
	pthread_mutex_unlock(&s->lock);
}

static int read_op(struct pe_store *b, const char *name, const struct pe_store_meta *want, struct pe_store_meta *m,
		   void **data, struct pe_err *err)
{
	struct pgstore *s = pg(b);
	struct pg_slot *sl;
	const char *v[] = {name};
	*data = NULL;
	pthread_mutex_lock(&s->lock);
	const struct pg_entry *e = pg_index_find(s, name);
	int64_t seen = e ? e->gen : 0; /* before the query: a newer entry then came from a newer write */
	pthread_mutex_unlock(&s->lock);
	int64_t deadline = pg_deadline(s);
	int rc = pg_acquire(s, deadline, 0, &sl, err);
	if (rc != 0)
		return rc;
	PGresult *r = pg_run(sl->c, "SELECT " PG_META_COLS ", data FROM posenc_learned WHERE name = $1", 1, v, NULL, NULL,
			     1, 0, deadline, -1);
	int failed = !r || PQstatus(sl->c) == CONNECTION_BAD;
	if (!r || PQresultStatus(r) != PGRES_TUPLES_OK)
		rc = pg_fail(s, r, sl->c, 0, err);
	pg_release(s, sl, failed);
	read_outcome(s, rc, err);
	if (rc == 0)
		rc = PQntuples(r) == 0 ? gone(s, name, seen, err) : take_row(s, r, name, want, m, data, err);
	PQclear(r);
	return rc;
}

static int stat_op(struct pe_store *b, const char *name, struct pe_store_meta *out)
{
	struct pgstore *s = pg(b);
	pthread_mutex_lock(&s->lock);
	const struct pg_entry *e = pg_index_find(s, name);
	int rc = e ? 0 : s->up ? PE_ENOTFOUND : pg_down_code(s, 0);
	if (e)
		*out = e->m;
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* The index; while it has never been loaded (down since opening), the code of why: an empty list
 * would claim what the store has never read. */
static int list_op(struct pe_store *b, struct pe_store_meta **out, size_t *n)
{
	struct pgstore *s = pg(b);
	pthread_mutex_lock(&s->lock);
	int rc = s->epoch == 0 && !s->up ? pg_down_code(s, 0) : 0;
	*n = rc ? 0 : s->n;
	*out = NULL;
	if (s->n && !(*out = malloc(s->n * sizeof **out)))
		rc = PE_ENOMEM;
	for (size_t i = 0; rc == 0 && i < s->n; i++)
		(*out)[i] = s->t[i].m;
	pthread_mutex_unlock(&s->lock);
	if (rc)
		*n = 0;
	return rc;
}

static void stats_op(struct pe_store *b, struct pe_store_stats *out)
{
	struct pgstore *s = pg(b);
	pthread_mutex_lock(&s->lock);
	*out = (struct pe_store_stats){.tables = s->n, .bytes = s->bytes, .remote = 1, .up = s->up,
				       .reconnects_total = s->epoch > 1 ? s->epoch - 1 : 0,
				       .notifications_total = s->notifications, .unavailable_total = s->unavailable};
	pthread_mutex_unlock(&s->lock);
}

/* ---- opening and closing ---- */

static void close_op(struct pe_store *b)
{
	struct pgstore *s = pg(b);
	pg_listen_stop(s);
	for (unsigned i = 0; s->slots && i < s->nslots; i++)
		PQfinish(s->slots[i].c);
	free(s->slots);
	for (size_t i = 0; s->keys && s->keys[i]; i++) {
		free(s->keys[i]);
		free(s->vals[i]);
	}
	free(s->keys);
	free(s->vals);
	free(s->t);
	pthread_cond_destroy(&s->changed);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* Down: its class and reason; a read refused (not transiently) since the last that succeeded:
 * PE_ESTORE with it; writes refused (privileges, a read-only database): reads only. */
static int ready_op(struct pe_store *b, struct pe_err *why)
{
	struct pgstore *s = pg(b);
	char d[PE_ERR_DETAIL_MAX - 8]; /* room for pe_store_unready's "; retry" */
	int rc = 0;
	pthread_mutex_lock(&s->lock);
	if (!s->up) {
		rc = pg_down_code(s, 0);
		pg_fit(d, sizeof d, "the learned-table database cannot serve: ", s->down.text[0] ? s->down.text :
		       "not connected yet", "");
	} else if (s->read_why[0]) {
		rc = PE_ESTORE;
		pg_fit(d, sizeof d, "", s->read_why, "");
	} else if (s->no_put[0] || s->no_del[0] || s->ro_why[0]) {
		rc = PE_EFORBIDDEN;
		pg_fit(d, sizeof d, "reads only: ", s->no_put[0] ? s->no_put : s->no_del[0] ? s->no_del : s->ro_why, "");
	}
	pthread_mutex_unlock(&s->lock);
	return rc ? pe_err_set(why, rc, "store_url", "%s", d) : 0;
}

static const struct store_ops pg_ops = {put_op, del_op, stat_op, list_op, read_op, stats_op, close_op, ready_op};

/* Connection parameters: the URI's, then these defaults for what it does not set. */
static int conn_params(struct pgstore *s, const char *url, struct pe_err *err)
{
	char tcp_user[32], connect[16];
	snprintf(tcp_user, sizeof tcp_user, "%u", s->op_ms);
	snprintf(connect, sizeof connect, "%u", s->op_ms / 1000 < 2 ? 2 : s->op_ms / 1000);
	const char *defaults[][2] = {{"connect_timeout", connect}, {"keepalives", "1"}, {"keepalives_idle", "5"},
				     {"keepalives_interval", "2"}, {"keepalives_count", "3"},
				     {"tcp_user_timeout", tcp_user}, {"application_name", "posencd"}};
	char *msg = NULL;
	PQconninfoOption *o = PQconninfoParse(url, &msg);
	if (!o) {
		/* libpq quotes the token it choked on, which may be the password: only what precedes it */
		size_t keep = msg ? strcspn(msg, "\"\n") : 0;
		while (keep && (msg[keep - 1] == ' ' || msg[keep - 1] == ':'))
			keep--;
		pe_err_set(err, PE_EINVAL, "store_url", "store_url is not a libpq URI: %.*s", (int)keep, msg ? msg : "");
		PQfreemem(msg);
		return PE_EINVAL;
	}
	size_t n = 0, k = 0;
	for (PQconninfoOption *p = o; p->keyword; p++)
		n++;
	s->keys = calloc(n + 1, sizeof *s->keys);
	s->vals = calloc(n + 1, sizeof *s->vals);
	for (PQconninfoOption *p = o; s->keys && s->vals && p->keyword; p++) {
		const char *v = p->val;
		for (size_t d = 0; !v && d < sizeof defaults / sizeof defaults[0]; d++)
			if (!strcmp(p->keyword, defaults[d][0]))
				v = defaults[d][1];
		if (v && (s->keys[k] = strdup(p->keyword)) && !(s->vals[k++] = strdup(v)))
			break;
	}
	PQconninfoFree(o);
	if (!s->keys || !s->vals || (k && !s->vals[k - 1]))
		return pe_err_set(err, PE_ENOMEM, "store_url", "out of memory");
	return 0;
}

/* Wait for the listener's first attempt, at most PG_START_WAIT_S: a database that does not answer
 * must not hold the start (tables need none); the store is then down and connects later. */
static void wait_first(struct pgstore *s)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += PG_START_WAIT_S;
	pthread_mutex_lock(&s->lock);
	while (!s->tried && !s->fatal)
		if (pthread_cond_timedwait(&s->changed, &s->lock, &ts) != 0)
			break;
	pthread_mutex_unlock(&s->lock);
}

/* The state both opening and --init-store start from (NULL when out of memory). */
static struct pgstore *pg_new(const struct pe_store_options *o)
{
	struct pgstore *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->base = (struct pe_store){.ops = &pg_ops, .max_bytes = o->max_bytes, .max_table_bytes = o->max_table_bytes};
	s->op_ms = o->op_timeout_ms ? o->op_timeout_ms : 10000;
	s->stmt_ms = s->op_ms - (s->op_ms / 4 < PG_GRACE_MS ? s->op_ms / 4 : PG_GRACE_MS);
	s->nslots = o->max_conns ? o->max_conns : 2;
	s->log = o->log;
	s->log_arg = o->log_arg;
	s->wake[0] = s->wake[1] = -1;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->changed, NULL);
	return s;
}

int store_pg_init(const struct pe_store_options *o, struct pe_err *err)
{
	struct pgstore *s = pg_new(o);
	struct pg_why why = {"", ""};
	int rc = s ? conn_params(s, o->url, err) : pe_err_set(err, PE_ENOMEM, "", "out of memory");
	if (rc != 0)
		goto out;
	int64_t deadline = pg_now_ms() + s->op_ms;
	PGconn *c = pg_connect(s, deadline, why.text, sizeof why.text);
	int made = c ? pg_schema(s, c, deadline, -1, 1, &why) : -1;
	PQfinish(c);
	if (made != 0)
		rc = pe_err_set(err, made == -2 ? PE_EIO : PE_EUNAVAIL, "store_url", "%s", why.text);
	else
		rc = pe_err_set(err, 0, "", "the learned tables are in place (schema version %d)%s%s", PG_SCHEMA_VERSION,
				s->no_put[0] || s->no_del[0] ? "; " : "", s->no_put[0] ? s->no_put : s->no_del);
out:
	if (s)
		close_op(&s->base);
	return rc;
}

struct pe_store *store_pg_open(const struct pe_store_options *o, struct pe_err *err)
{
	struct pgstore *s = pg_new(o);
	if (!s) {
		pe_err_set(err, PE_ENOMEM, "", "out of memory");
		return NULL;
	}
	if (o->max_table_bytes > INT32_MAX) {
		pe_err_set(err, PE_EINVAL, "max_table_bytes", "with a postgresql:// store_url, max_table_bytes is at most "
			   "2147483647 (libpq's parameter length)");
		goto fail;
	}
	if (!(s->slots = calloc(s->nslots, sizeof *s->slots))) {
		pe_err_set(err, PE_ENOMEM, "", "out of memory");
		goto fail;
	}
	if (conn_params(s, o->url, err) != 0 || pg_listen_start(s, err) != 0)
		goto fail;
	wait_first(s);
	if (s->fatal) {
		pe_err_set(err, PE_EIO, "store_url", "%s", s->fatal_why);
		goto fail;
	}
	return &s->base;
fail:
	close_op(&s->base);
	return NULL;
}
