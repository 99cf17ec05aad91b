/* Internal to src/store: the file store's state (struct fstore) and the layout of its files, shared by
 *   store.c       the index, writing and reading tables (the contract: include/posenc/store.h)
 *   format.c      the table file: its header, and verifying a file against it
 *   quarantine.c  damaged and leftover files, moved aside and bounded
 *   open.c        opening data_dir: the lock, the scan, closing
 *   file.c        the operations table (iface.h) over these
 * The design is described at the top of store.c. The PostgreSQL store (pg.h) reuses the checks and
 * hashing of format.c (store_meta_check, store_sha256, store_max_abs). */
#ifndef PE_STORE_INTERNAL_H
#define PE_STORE_INTERNAL_H

#include "posenc/store.h"
#include "store/iface.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define MAGIC "PETABLE1"
#define VERSION 1
#define HEADER 256
#define SUFFIX ".table"
#define TMP_PREFIX ".tmp-"
#define QUARANTINE "quarantine"
#define LOCK_FILE ".posencd.lock"
#define OPEN_FLAGS (O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK) /* table files: see the top */
#define CHUNK ((size_t)1 << 20)
#define FILE_MAX (PE_STORE_NAME_MAX + 48) /* longest file name the store makes */

/* A file in quarantine/, oldest first. */
struct qfile {
	char *name;
	uint64_t bytes;
	int64_t when_ns; /* moved there (ctime at start) */
};

/* What the index knows of a table's file when it loaded or wrote it: a stat that differs means
 * the file was changed behind the store's back (removed, renamed over, written in place). */
struct file_id {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime;
};

/* One table of the index. */
struct entry {
	struct pe_store_meta m;
	struct file_id id;
};

struct fstore {
	struct pe_store base; /* first: the interface (iface.h) */

	int dirfd, qfd, lockfd; /* data_dir, data_dir/quarantine and the lock file */
	uint64_t max_bytes, max_table_bytes;
	uint64_t q_max_bytes, q_bytes;
	size_t q_max_files, nq, qcap;
	struct qfile *q;
	uint64_t quarantined, q_dropped; /* totals since open */
	pe_store_log_cb log;
	void *log_arg;
	pthread_mutex_t lock;
	struct entry *tables; /* sorted by name */
	size_t n, cap;
	uint64_t bytes, reserved; /* committed, and reserved by uploads in progress */
	uint64_t tmp_seq;
};

/* ---- helpers every file uses ---- */

static inline int64_t store_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void store_note(struct fstore *s, const char *event, const char *file, const char *detail)
{
	if (s->log)
		s->log(s->log_arg, event, file, detail);
}

static inline int store_io_error(struct pe_err *err, const char *what, int e)
{
	int code = e == ENOSPC || e == EDQUOT ? PE_ENOSPACE : PE_EIO;
	return pe_err_set(err, code, "", "%s: %s", what, strerror(e));
}

static inline void store_table_file(const char *name, char out[FILE_MAX])
{
	snprintf(out, FILE_MAX, "%s" SUFFIX, name);
}

/* format.c */
void store_sha256(const void *data, size_t len, uint8_t out[32]);
void store_header_write(const struct pe_store_meta *m, uint8_t h[HEADER]);
/* Are the fields of m a table this store keeps? 0, or -1 with why and the parameter at fault. */
int store_meta_check(struct pe_store_meta *m, const char **why, const char **param);
/* Verify an open table file against its name; *data (if data is not NULL) gets the elements.
 * Returns 0, or -1 with why set (damage), or a negative PE_E* code (PE_ENOMEM). */
/* The largest |element| of n elements of dt, or m if that is larger (NaN elements skipped). */
double store_max_abs(enum pe_dtype dt, const void *data, size_t n, double m);
int store_load(int fd, const char *name, struct pe_store_meta *m, void **data, const char **why);

/* quarantine.c (callers hold the lock, or are pe_store_open) */
/* Move data_dir/file (bytes long) to quarantine/, logged with why. */
void store_quarantine(struct fstore *s, const char *file, uint64_t bytes, const char *why);
/* Read quarantine/ at open: its files, oldest first, trimmed to the limits. */
int store_q_load(struct fstore *s);

/* store.c: the file store's operations (the contract: include/posenc/store.h) */
int fstore_put(struct fstore *s, struct pe_store_meta *m, const void *data, int *replaced, pe_store_commit_cb cb,
	       void *cb_arg, struct pe_err *err);
int fstore_delete(struct fstore *s, const char *name, pe_store_commit_cb cb, void *cb_arg, struct pe_err *err);
int fstore_stat(struct fstore *s, const char *name, struct pe_store_meta *out);
int fstore_list(struct fstore *s, struct pe_store_meta **out, size_t *n);
int fstore_read(struct fstore *s, const char *name, const struct pe_store_meta *want, struct pe_store_meta *m,
		void **data, struct pe_err *err);
void fstore_stats(struct fstore *s, struct pe_store_stats *out);
/* open.c */
struct fstore *fstore_open(const struct pe_store_options *o, struct pe_err *err);
void fstore_close(struct fstore *s);

/* store.c (callers hold the lock) */
/* Index m, whose file st describes (stat'ed before it was read, or after it was renamed into place). */
int store_index_set(struct fstore *s, const struct pe_store_meta *m, const struct stat *st);

#endif
