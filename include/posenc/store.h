/* posenc store: learned position tables (BERT, GPT-2, ViT embeddings users upload) kept durably,
 * behind one interface with two implementations, chosen by pe_store_options.url:
 *
 *   "file:" (or NULL / "")   the embedded store: one directory, data_dir, one process (below).
 *   "postgresql://..."       a PostgreSQL database shared by every replica (src/store/pg.c): the
 *                            tables live in the database; each process keeps an index of their
 *                            metadata in memory, loaded at connection and kept current through
 *                            LISTEN/NOTIFY, so stat and list never wait for the database.
 *
 * Callers (the HTTP handlers) do not know which one they hold: the contract below holds for both,
 * with the differences said where they matter. PostgreSQL: put answers 0 only after COMMIT with
 * synchronous_commit on; a replacement is one transaction; writes of one database are serialised
 * (a transaction advisory lock); every row keeps its SHA-256, checked on read. While the database
 * cannot be reached, put, delete and read fail fast with PE_EUNAVAIL (nothing waits on a database
 * known to be down), stat and list answer from the last index known, and a background thread
 * reconnects with backoff and reloads the index (catching up on what it missed).
 *
 * The file store on disk (see src/store/store.c for the byte layout): one file per table,
 * <name>.table, a 256-byte
 * header (shape, dtype, grid, creation time, the SHA-256 of the elements, and a SHA-256 of the
 * header itself) followed by the elements. Uploads are written to .tmp-* files first; damaged or
 * leftover files are moved to data_dir/quarantine/ and never served. quarantine/ is bounded (files
 * and bytes): the oldest files there are deleted to make room, and a file larger than the whole
 * budget is deleted instead of moved. Only regular files are ever opened (without following
 * symlinks and without blocking): anything else named like a table is logged and left alone.
 *
 * One process per data_dir: pe_store_open takes an exclusive lock (flock on data_dir/.posencd.lock)
 * before it looks at a single file, and fails without changing anything when another holds it.
 *
 * Durability: pe_store_put returns 0 only after the new file is fsynced, renamed over the old one
 * and the directory fsynced: from then on the table survives a crash or power loss, and at no
 * moment can a reader or a restart see a partial file. pe_store_delete likewise.
 *
 * Threads: every function is thread-safe. An in-memory index answers stat and list, after one
 * fstatat per table named (the file's identity against the one indexed): a file changed behind
 * the store's back is dealt with before they answer, so what they say is the file's current
 * version. Reading it again then (only then) costs what a read does. put, delete and read do file
 * I/O (milliseconds to seconds) or talk to the database: call them from worker threads.
 * Ownership: metadata is returned by value (copies); buffers returned through pointers belong to
 * the caller (free()). */
#ifndef POSENC_STORE_H
#define POSENC_STORE_H

#include <stddef.h>
#include <stdint.h>
#include "posenc/dtype.h"
#include "posenc/err.h"

#define PE_STORE_NAME_MAX 64
#define PE_STORE_QUARANTINE_FILES 256 /* the daemon's bound on the files in quarantine/ */

struct pe_store;

struct pe_store_meta {
	char name[PE_STORE_NAME_MAX + 1];
	enum pe_dtype dtype;     /* PE_F32, PE_F64 or PE_F16 */
	uint64_t rows, cols;     /* shape [rows, cols] */
	uint64_t prefix_tokens;  /* leading rows outside the grid (class / register tokens) */
	uint64_t grid_h, grid_w; /* 0, 0 when the table has no grid; else rows = prefix_tokens + grid_h * grid_w */
	uint64_t bytes;          /* rows * cols * dtype size: the elements only */
	uint8_t sha256[32];      /* of the elements as stored (little-endian, C order) */
	int64_t created_ms;      /* Unix time of the upload, milliseconds */
	double max_abs;          /* the largest |element| (every element is finite), as double: computed
				  * whenever the elements pass through the store (put, the start-up scan, a
				  * read), not kept in the file; ignored as an input of pe_store_put */
};

/* Events worth an operator's attention: "quarantine" (file moved aside, detail says why),
 * "ignored" (a file that is not the store's, left alone). Called from whichever thread found it. */
typedef void (*pe_store_log_cb)(void *arg, const char *event, const char *file, const char *detail);

struct pe_store_options {
	const char *dir;
	uint64_t max_bytes;       /* the sum of every table's bytes */
	uint64_t max_table_bytes; /* one table's bytes */
	uint64_t quarantine_max_bytes; /* quarantine/ holds at most these bytes ... */
	size_t quarantine_max_files;   /* ... and files (0: nothing is kept, damaged files are deleted) */
	pe_store_log_cb log;      /* may be NULL */
	void *log_arg;
	const char *url;          /* "file:" (NULL, ""): data_dir; "postgresql://" or "postgres://": a
				   * libpq connection URI (its own parameters win over the defaults the
				   * store adds: connect_timeout, keepalives, application_name) */
	unsigned max_conns;       /* PostgreSQL: connections for put/delete/read at most (0: 2); the
				   * listener has its own */
	unsigned op_timeout_ms;   /* PostgreSQL: one operation's deadline, connecting included (0: 10 s);
				   * statement_timeout is a little shorter (a second, or a quarter) */
};

/* File store: create the directory (and its parents) if missing, lock it, then scan it: every valid table is
 * indexed, temporary and damaged files are quarantined (and logged). NULL with err filled (param
 * "data_dir"): PE_EBUSY when another process holds data_dir (nothing was changed), PE_EIO when the
 * directory cannot be created, locked or read. The lock is held until pe_store_close.
 * PostgreSQL: parse the URI (NULL with PE_EINVAL naming "store_url" when libpq refuses it), start
 * the listener thread and wait up to 3 s for the first connection (the schema created or
 * checked, the index loaded). A database that cannot be reached yet is not an error: the store
 * starts down and connects on its own (the log callback says "store_down" / "store_up"). A schema
 * of a newer version than this build knows is an error (PE_EIO). */
struct pe_store *pe_store_open(const struct pe_store_options *o, struct pe_err *err);
void pe_store_close(struct pe_store *s); /* NULL is fine */

/* Make the store ready to be opened and return (posencd --init-store): PostgreSQL: connect once,
 * create the schema when it is missing (this needs CREATE on the database's schema: once, by its
 * owner; pe_store_open then needs none); file: create data_dir. 0 with err's detail saying what
 * holds (and the write rights the role lacks, if any); else PE_EUNAVAIL (the database cannot be
 * reached, or refused to create the tables: err says why), PE_EIO (a newer schema), PE_EINVAL
 * (store_url). */
int pe_store_init(const struct pe_store_options *o, struct pe_err *err);

/* Can the store serve now? 0: reads and writes; PE_EFORBIDDEN: reads only (PostgreSQL: the role
 * lacks a write privilege, why names it, and those writes answer PE_EFORBIDDEN at once; or the
 * database refused the last write as read-only, 25006); PE_EUNAVAIL: nothing from the database for
 * now (down: a lost connection, a timeout; a retry may help); PE_ESTORE: the database's
 * configuration refuses (its tables missing and not creatable, a revoked privilege, a search_path
 * naming no schema: while reconnecting, or a read refused since the last that succeeded). The file
 * store is always ready once open. why may be NULL. Thread-safe, no I/O. */
int pe_store_ready(struct pe_store *s, struct pe_err *why);
/* err as code (the store's answer to an operation it could not do: PE_EUNAVAIL, PE_ESTORE) with
 * pe_store_ready's reason; PE_EUNAVAIL's says to retry. Returns code. */
int pe_store_unready(struct pe_store *s, int code, struct pe_err *err);

/* A table name: [A-Za-z0-9._-]{1,64} without a leading dot. len is the name's byte length (a NUL
 * inside fails). 0, or PE_EINVAL with err naming "name" and the rule broken. */
int pe_store_name_check(const char *name, size_t len, struct pe_err *err);

/* A write's last chance to be called off: put and delete call it (when not NULL) under the store's
 * lock just before the change becomes visible (the rename or the unlink). 0 lets the write go on;
 * a negative PE_E* code calls it off: nothing changes and the write returns that code. Once it has
 * returned 0 the write completes (or fails on I/O) without asking again. It must not call the store. */
typedef int (*pe_store_commit_cb)(void *arg);

/* Store data (rows * cols elements of dtype) under m->name, replacing any table of that name. Inputs: m->name,
 * dtype, rows, cols, prefix_tokens, grid_h, grid_w; filled in: bytes, sha256, created_ms.
 * *replaced (may be NULL) says whether an older version existed. Errors (err says which
 * parameter): PE_EINVAL (name, dtype, shape, grid), PE_ETOOBIG (over max_table_bytes),
 * PE_ENOSPACE (over max_bytes, or the disk is full), PE_EIO, or commit's code. */
int pe_store_put(struct pe_store *s, struct pe_store_meta *m, const void *data, int *replaced,
		 pe_store_commit_cb commit, void *commit_arg, struct pe_err *err);
/* 0, PE_ENOTFOUND, PE_EIO, or commit's code. PostgreSQL, for put and delete alike (pg_error.c
 * classifies every database error once, by SQLSTATE; err's detail is fit for a client as is):
 * PE_EUNAVAIL when the database cannot serve now: unreachable, a statement timeout or lock wait,
 * a serialization failure, deadlock, no resources, shutting down (nothing changed, except when
 * the connection was lost during COMMIT: then err says the outcome is unknown); PE_EFORBIDDEN
 * when the role lacks the privilege (err names it); PE_ESTORE for any other refusal (the
 * database's reason); PE_EBUSY when every connection is busy. An operation ends within
 * op_timeout_ms, and before the calling thread's cancel deadline (pe_cancel_set_deadline). */
int pe_store_delete(struct pe_store *s, const char *name, pe_store_commit_cb commit, void *commit_arg,
		    struct pe_err *err);
/* The current metadata of name: 0 or PE_ENOTFOUND. Current means the file's: when its stat
 * differs from the one indexed, the file is verified again first (pe_store_read's rules: a
 * vanished file drops the table, another valid version is adopted, a damaged file is quarantined;
 * the last two are PE_ENOTFOUND here). */
int pe_store_stat(struct pe_store *s, const char *name, struct pe_store_meta *out);
/* Every table's metadata sorted by name, in *out (caller frees; NULL when *n is 0), each checked
 * against its file as pe_store_stat does. 0 or PE_ENOMEM; PostgreSQL: PE_EUNAVAIL or PE_ESTORE
 * while its index has never been loaded (down since it opened: pe_store_ready says why). */
int pe_store_list(struct pe_store *s, struct pe_store_meta **out, size_t *n);
/* Two metadata describe the same version of a table when everything that shapes its responses is
 * equal: the elements' SHA-256, dtype, shape, prefix_tokens and grid (not the creation time). */
int pe_store_same_version(const struct pe_store_meta *a, const struct pe_store_meta *b);

/* The elements of name's version want (any version when want is NULL), checked against the
 * checksums, into *data (caller frees) with the metadata in *m. PE_ENOTFOUND (no such table; also
 * when its file was removed behind the store's back or is no longer a regular file: the table is
 * then dropped from the index), PE_EBUSY (replaced by another version meanwhile, retry; a file
 * replaced behind the store's back by another valid table is adopted), PE_EIO (the file is damaged:
 * it is quarantined and the table dropped), PE_ENOMEM. PostgreSQL: PE_EIO when the row's elements do not
 * match its SHA-256 (only then), PE_EUNAVAIL when the database cannot serve now, PE_ESTORE when it
 * refuses (a privilege, a table missing: the database's reason), as for put. */
int pe_store_read(struct pe_store *s, const char *name, const struct pe_store_meta *want, struct pe_store_meta *m,
		  void **data, struct pe_err *err);
/* Tables and the sum of their bytes. */
void pe_store_usage(struct pe_store *s, uint64_t *bytes, size_t *tables);

struct pe_store_stats {
	size_t tables;
	uint64_t bytes;              /* the tables' elements */
	size_t quarantine_files;     /* in quarantine/ now */
	uint64_t quarantine_bytes;
	uint64_t quarantined_total;  /* files moved to quarantine/ (or deleted as damaged) since open */
	uint64_t quarantine_dropped_total; /* old quarantined files deleted to make room, since open */
	int remote;                  /* 1: PostgreSQL (the rest below is about it; file: up = 1) */
	int up;                      /* the database can be reached now */
	uint64_t reconnects_total;   /* connections (re)established by the listener since open, minus the first */
	uint64_t notifications_total; /* changes learned from other replicas (NOTIFY) */
	uint64_t unavailable_total;  /* operations answered PE_EUNAVAIL */
};
void pe_store_stats(struct pe_store *s, struct pe_store_stats *out);
/* The limits it was opened with. */
void pe_store_limits(const struct pe_store *s, uint64_t *max_bytes, uint64_t *max_table_bytes);

#endif
