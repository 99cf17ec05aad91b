/* Internal to the PostgreSQL store (the contract: include/posenc/store.h):
 *   pg.c         opening and closing, put, delete, read: the operations table
 *   pg_conn.c    connections with deadlines: connecting, queries, the bounded pool
 *   pg_index.c   the in-memory index of metadata and the rule that orders changes to it
 *   pg_listen.c  the listener thread: LISTEN/NOTIFY, the up/down state, reconnection
 *   pg_schema.c  the schema: found, or created when missing; the role's rights on it
 *   pg_error.c   every database error classified once, by SQLSTATE, described and logged
 *
 * The database holds, per table, one row of posenc_learned (metadata, the SHA-256 and the elements
 * as bytea) with a generation: a number from the sequence posenc_generation drawn by every write
 * (put or delete) inside its transaction, after it took the one write lock (a transaction advisory
 * lock), so generations follow commit order. Every write sends a NOTIFY with its generation and
 * the table's metadata in the same transaction (delivered on commit, in commit order, to every
 * listening replica, the writer's own too). The index applies a change only when its generation
 * is newer than what it holds for that name; recent deletes are remembered (tombstones) so that a
 * late put of an older generation cannot bring a deleted table back. */
#ifndef PE_STORE_PG_H
#define PE_STORE_PG_H

#include "store/internal.h"

#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>

#define PG_CHANNEL "posenc_learned"
#define PG_SCHEMA_VERSION 1
#define PG_TOMBS 256              /* recent deletes remembered */
#define PG_BACKOFF_MIN_MS 100
#define PG_BACKOFF_MAX_MS 5000
#define PG_SLOT_WAIT_MS 250       /* the longest a worker waits for a free connection */
#define PG_PING_MS 1000
#define PG_START_WAIT_S 3         /* pe_store_open waits this long at most for the first connection */
#define PG_GRACE_MS 1000          /* at most: the server's statement_timeout is this much (a quarter of
				   * the operation timeout when smaller) before the operation's deadline */
#define PG_WAITER_MARGIN_MS 100   /* an operation ends this long before its thread's cancel deadline */
#define PG_CAUSES 8               /* the distinct database errors remembered as logged */
#define PG_META_COLS "name, dtype, nrows, ncols, prefix_tokens, grid_h, grid_w, bytes, sha256, created_ms, " \
		     "max_abs, generation"

struct pg_entry {
	struct pe_store_meta m;
	int64_t gen;
};

struct pg_tomb {
	char name[PE_STORE_NAME_MAX + 1];
	int64_t gen;
};

struct pg_slot {
	PGconn *c;      /* NULL: not connected */
	uint64_t epoch; /* the listener's connection count when it was made: older ones are dropped */
	int busy;
};

/* A database failure: its reason (the server's primary message and SQLSTATE, or libpq's) and its
 * SQLSTATE ("": libpq's own failure, no answer), which pg_sqlstate_code classifies. */
struct pg_why {
	char text[PE_ERR_DETAIL_MAX];
	char state[6];
};

struct pgstore {
	struct pe_store base;
	char **keys, **vals;       /* libpq connection parameters, NULL-terminated (each malloc'ed) */
	unsigned op_ms;            /* one operation's deadline (pg_deadline) */
	unsigned stmt_ms;          /* the session's statement_timeout: shorter, so that a statement held
				    * by a lock ends with the server's error, not a dropped connection */
	pe_store_log_cb log;
	void *log_arg;

	pthread_mutex_t lock;      /* everything below */
	pthread_cond_t changed;    /* a slot freed, the state changed */
	struct pg_entry *t;        /* the index, sorted by name */
	size_t n, cap;
	uint64_t bytes;
	struct pg_tomb tombs[PG_TOMBS];
	size_t next_tomb;
	int up, fatal, stopping, tried; /* tried: the first connection attempt is over */
	char fatal_why[PE_ERR_DETAIL_MAX];
	struct pg_why down;        /* why the store is down (readiness, acquire), while it is */
	char read_why[PE_ERR_DETAIL_MAX];  /* a read's refusal that is not transient, until one succeeds */
	char ro_why[PE_ERR_DETAIL_MAX];    /* the database refuses writes (25006), until one succeeds */
	char no_put[PE_ERR_DETAIL_MAX];    /* why the role may not put / delete ("": it may) */
	char no_del[PE_ERR_DETAIL_MAX];
	char causes[PG_CAUSES][PE_ERR_DETAIL_MAX]; /* the errors logged last: each cause once */
	unsigned next_cause;
	uint64_t epoch;            /* connections the listener made (0: the index never loaded) */
	uint64_t notifications, unavailable;
	struct pg_slot *slots;
	unsigned nslots;

	pthread_t listener;
	int wake[2];               /* a pipe: close wakes the listener */
};

/* pg_conn.c */
int64_t pg_now_ms(void);
/* The deadline of an operation starting now: op_ms away, or sooner when this thread's cancel
 * deadline (the HTTP job's: job_timeout) comes first, so the store answers before the job's
 * waiter gives up: one deadline decides the outcome. */
int64_t pg_deadline(const struct pgstore *s);
/* Connect within deadline (pg_now_ms()), non-blocking mode, synchronous_commit on and a
 * statement_timeout; NULL with why filled. Given up at once when the store closes. */
PGconn *pg_connect(struct pgstore *s, int64_t deadline, char *why, size_t cap);
/* One statement: sql with n text or binary parameters (fmts may be NULL: all text; NULL vals and
 * n 0 with simple 1: the simple protocol, several statements allowed), results binary when
 * binary. The last result, or NULL when the connection failed, the deadline passed or abort_fd
 * (-1: none) became readable (the connection is then unusable: release it as failed). */
PGresult *pg_run(PGconn *c, const char *sql, int n, const char *const *vals, const int *lens, const int *fmts,
		 int binary, int simple, int64_t deadline, int abort_fd);
/* A connection from the pool for one operation (write: a put or a delete): 0; while the store is
 * down, the class of why it is (pg_down_code); PE_EUNAVAIL when connecting failed; PE_EBUSY (every
 * slot stayed busy for PG_SLOT_WAIT_MS); err filled. */
int pg_acquire(struct pgstore *s, int64_t deadline, int write, struct pg_slot **slot, struct pe_err *err);
/* Give it back; failed: the connection is closed. */
void pg_release(struct pgstore *s, struct pg_slot *slot, int failed);
/* One command (the simple protocol): 0, -1 with w (may be NULL) filled (pg_describe). */
int pg_command(PGconn *c, const char *sql, int64_t deadline, int abort_fd, struct pg_why *w);

/* pg_error.c */
/* A failed statement as the operation's error, err filled (write: the operation was a put or a
 * delete): r NULL (no answer by the deadline, the connection failed) or an error result, whose
 * SQLSTATE decides: PE_EUNAVAIL (unavailable or transient: retry), PE_EFORBIDDEN (a write the
 * role has no privilege for), PE_ESTORE (anything else: the database's configuration). */
int pg_fail(struct pgstore *s, const PGresult *r, PGconn *c, int write, struct pe_err *err);
/* The code of a SQLSTATE (NULL or "": libpq's own failure), as pg_fail decides it. */
int pg_sqlstate_code(const char *sqlstate, int write);
/* The code an operation (write: a put or a delete) answers while the store is down (lock held):
 * the class of the last failure to establish it: PE_EUNAVAIL when transient, else PE_ESTORE (or
 * PE_EFORBIDDEN for a write the role has no privilege for). */
int pg_down_code(const struct pgstore *s, int write);
/* A failed statement's reason and SQLSTATE into w: r NULL (no answer, the connection failed: libpq's
 * message on c) or an error result. */
void pg_describe(const PGresult *r, PGconn *c, struct pg_why *w);
/* pre, reason and post into out (cap bytes): reason cut at a word, marked "...", when all three do
 * not fit, so that a detail never ends mid-word or loses its end. */
void pg_fit(char *out, size_t cap, const char *pre, const char *reason, const char *post);
/* libpq's message on c, first line, without the "connection to server at <host>, port <n> failed:"
 * part (details reach clients), into out. */
void pg_reason(PGconn *c, char *out, size_t cap);
void pg_note(struct pgstore *s, const char *event, const char *detail);
/* Log detail ("store_error") unless it is among the PG_CAUSES logged last. */
void pg_note_once(struct pgstore *s, const char *detail);

/* pg_schema.c */
/* Find the schema (no CREATE right needed), or create it when missing; then read what the role
 * may do into no_put / no_del. 0; -1 (failed: w, retry later); -2 (a newer schema than this build
 * knows: w). init: posencd --init-store, whose failure to create says what the role lacks. */
int pg_schema(struct pgstore *s, PGconn *c, int64_t deadline, int abort_fd, int init, struct pg_why *w);
/* Read what the role may do into no_put / no_del (one query): 0; -1 no answer (the connection is
 * unusable); 1 the database refused the query (w: why; the rights held are kept). */
int pg_rights(struct pgstore *s, PGconn *c, int64_t deadline, int abort_fd, struct pg_why *w);

/* pg_index.c (callers hold the lock) */
void pg_index_put(struct pgstore *s, const struct pe_store_meta *m, int64_t gen);
void pg_index_del(struct pgstore *s, const char *name, int64_t gen);
/* A read found no row of name; seen: the generation the index held for it when the read began (0:
 * none). The entry goes only if it is still that one: a newer one came from a write the read's
 * snapshot did not see (a put after the delete), and stays. */
void pg_index_gone(struct pgstore *s, const char *name, int64_t seen);
/* The held entry of name, or NULL. */
const struct pg_entry *pg_index_find(const struct pgstore *s, const char *name);
/* Replace the whole index (a reload after connecting); e is taken over. */
void pg_index_replace(struct pgstore *s, struct pg_entry *e, size_t n);
/* Row i of a result with PG_META_COLS first (binary): 0, or -1 with why (not a valid table). */
int pg_row_meta(const PGresult *r, int i, struct pe_store_meta *m, int64_t *gen, const char **why);
/* A notification's payload applied: "P <gen> <meta...>" or "D <gen> <name>". -1 if malformed. */
int pg_apply_payload(struct pgstore *s, const char *payload);
/* The table a well-formed payload names, into name: 0, or -1 if malformed. (The listener looks the
 * name up in the database: a payload's metadata may be forged by any database user.) */
int pg_payload_name(const char *p, char name[PE_STORE_NAME_MAX + 1]);
/* The payload of a put (cap >= 512). */
void pg_payload_put(const struct pe_store_meta *m, int64_t gen, char *out, size_t cap);

/* pg_listen.c */
int pg_listen_start(struct pgstore *s, struct pe_err *err);
void pg_listen_stop(struct pgstore *s);

#endif
