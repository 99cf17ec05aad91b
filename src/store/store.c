/* The durable store of learned tables (see include/posenc/store.h for the contract).
 *
 * One file per table, so that one rename replaces data and metadata together (a sidecar file
 * would need two renames, and a crash between them would pair one version's header with the
 * other's data). <name>.table is a 256-byte header, then the elements, little-endian, C order:
 *
 *   off  size  field
 *     0     8  magic "PETABLE1"
 *     8     4  format version (1), u32
 *    12     4  header size (256), u32
 *    16     8  dtype name, NUL-padded ("f32", "f64", "f16")
 *    24     8  rows, u64          32  8  cols, u64
 *    40     8  prefix_tokens      48  8  grid_h      56  8  grid_w (0, 0: no grid)
 *    64     8  bytes of elements  72  8  created, Unix milliseconds, i64
 *    80    32  SHA-256 of the elements
 *   112    80  name, NUL-padded (must match the file name)
 *   192    32  zero
 *   224    32  SHA-256 of bytes 0..223
 *
 * Writing: .tmp-<name>.<pid>.<n> is created exclusively, written, fsynced, then renamed over
 * <name>.table and the directory fsynced, under the store's lock so the index changes with the
 * directory. Crash states: before the rename the old file is intact and the temporary one is
 * quarantined at the next start; after it, the new one is complete. A file is served only if its
 * header checksum, its sizes and the SHA-256 of its elements verify; anything else found at start
 * (or damaged when read) is moved to quarantine/ under its name plus the time, and logged. Files
 * that are neither tables nor temporaries are logged and left alone (data_dir may be shared), and
 * so is anything named like a table that is not a regular file: files are opened with O_NOFOLLOW
 * and O_NONBLOCK and checked with fstat, so a symlink is never followed and a FIFO never blocks.
 *
 * One process per data_dir: an exclusive flock on data_dir/.posencd.lock, taken before the scan
 * (which moves files) and held until close. A second daemon started on the same directory fails
 * before touching anything, instead of quarantining the first one's uploads in progress.
 *
 * quarantine/ is bounded by quarantine_max_files and quarantine_max_bytes, separately from the
 * tables' max_bytes: making room deletes its oldest files (by the time they were moved there),
 * and a file that could never fit is deleted outright; both are logged.
 *
 * The index follows the directory, and heals when the directory changes behind the store's back.
 * Each table's entry records its file's identity (device, inode, size, mtime, ctime) as it was
 * when loaded or written; stat and list fstatat the file first (one syscall, no reading) and, on
 * a difference, act before they answer: a file gone (or not a regular file any more) drops the
 * table, a changed one is read and verified again (outside the lock) and adopted if valid,
 * quarantined if damaged. So the version the HTTP layer puts in its cache keys is the file's
 * current one, and a cached answer never outlives its file. A read that finds the same (between
 * its stat and its open) heals the same way: 404 for a file gone, not an endless "retry".
 *
 * The space limit counts table bytes; uploads in progress reserve theirs first, so concurrent
 * uploads cannot together overshoot it. A write can be called off by its caller up to the moment
 * it becomes visible (pe_store_commit_cb), so a request answered "did not finish" never lands. */
#include "store/internal.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the index (callers hold the lock) ---- */

/* Position of name, or where it would go (*found says which). */
static size_t find(const struct fstore *s, const char *name, int *found)
{
	size_t lo = 0, hi = s->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(s->tables[mid].m.name, name);
		if (c == 0) {
			*found = 1;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = 0;
	return lo;
}

static void file_id_of(const struct stat *st, struct file_id *id)
{
	*id = (struct file_id){.dev = st->st_dev, .ino = st->st_ino, .size = st->st_size, .mtime = st->st_mtim,
			       .ctime = st->st_ctim};
}

static int same_id(const struct file_id *a, const struct file_id *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime.tv_sec == b->mtime.tv_sec &&
	       a->mtime.tv_nsec == b->mtime.tv_nsec && a->ctime.tv_sec == b->ctime.tv_sec &&
	       a->ctime.tv_nsec == b->ctime.tv_nsec;
}

int store_index_set(struct fstore *s, const struct pe_store_meta *m, const struct stat *st)
{
	int found;
	size_t i = find(s, m->name, &found);
	if (found) {
		s->bytes -= s->tables[i].m.bytes;
	} else {
		if (s->n == s->cap) {
			size_t cap = s->cap ? 2 * s->cap : 16;
			struct entry *t = realloc(s->tables, cap * sizeof *t);
			if (!t)
				return PE_ENOMEM;
			s->tables = t;
			s->cap = cap;
		}
		memmove(&s->tables[i + 1], &s->tables[i], (s->n - i) * sizeof *s->tables);
		s->n++;
	}
	s->tables[i].m = *m;
	file_id_of(st, &s->tables[i].id);
	s->bytes += m->bytes;
	return 0;
}

static void index_remove(struct fstore *s, size_t i)
{
	s->bytes -= s->tables[i].m.bytes;
	memmove(&s->tables[i], &s->tables[i + 1], (s->n - i - 1) * sizeof *s->tables);
	s->n--;
}

/* ---- writing ---- */

static int write_full(int fd, const void *buf, size_t len)
{
	for (size_t done = 0; done < len;) {
		ssize_t w = write(fd, (const char *)buf + done, len - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return errno;
		done += (size_t)w;
	}
	return 0;
}

/* Make room for bytes (replacing name frees its old bytes once committed). */
static int reserve(struct fstore *s, const struct pe_store_meta *m, struct pe_err *err)
{
	int found, rc = 0;
	pthread_mutex_lock(&s->lock);
	size_t i = find(s, m->name, &found);
	uint64_t old = found ? s->tables[i].m.bytes : 0;
	uint64_t after = s->bytes - old + s->reserved + m->bytes;
	if (after > s->max_bytes || after < m->bytes)
		rc = pe_err_set(err, PE_ENOSPACE, "", "the store holds %llu of %llu bytes; this table needs %llu more",
				(unsigned long long)(s->bytes + s->reserved), (unsigned long long)s->max_bytes,
				(unsigned long long)m->bytes);
	else
		s->reserved += m->bytes;
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* Write header and data into a new temporary file, fsynced; its name into tmp, and in *fdp the file,
 * left open (commit stats it once renamed into place, for the index). */
static int write_temp(struct fstore *s, const struct pe_store_meta *m, const void *data, char tmp[FILE_MAX],
		      int *fdp, struct pe_err *err)
{
	uint8_t h[HEADER];
	pthread_mutex_lock(&s->lock);
	uint64_t seq = ++s->tmp_seq;
	pthread_mutex_unlock(&s->lock);
	snprintf(tmp, FILE_MAX, TMP_PREFIX "%s.%ld.%llu", m->name, (long)getpid(), (unsigned long long)seq);
	int fd = openat(s->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return store_io_error(err, "cannot create a temporary file", errno);
	store_header_write(m, h);
	int e = write_full(fd, h, HEADER);
	if (!e)
		e = write_full(fd, data, (size_t)m->bytes);
	if (!e && fsync(fd) != 0)
		e = errno;
	if (e) {
		close(fd);
		unlinkat(s->dirfd, tmp, 0);
		return store_io_error(err, "cannot write the table", e);
	}
	*fdp = fd;
	return 0;
}

static int called_off(struct pe_err *err, int code)
{
	return pe_err_set(err, code, "", "the write was called off before it was committed; nothing changed");
}

/* Rename the temporary file (fd, closed here) into place, sync the directory, update the index
 * (which follows the directory: a rename done is indexed even if the sync then fails). Unless cb
 * calls it off. */
static int commit(struct fstore *s, const struct pe_store_meta *m, const char *tmp, int fd, int *replaced,
		  pe_store_commit_cb cb, void *arg, struct pe_err *err)
{
	char file[FILE_MAX];
	struct stat st;
	int found, rc = 0;
	store_table_file(m->name, file);
	pthread_mutex_lock(&s->lock);
	find(s, m->name, &found);
	if (cb && (rc = cb(arg)) != 0) {
		rc = called_off(err, rc);
		unlinkat(s->dirfd, tmp, 0);
	} else if (renameat(s->dirfd, tmp, s->dirfd, file) != 0) {
		rc = store_io_error(err, "cannot rename the table into place", errno);
		unlinkat(s->dirfd, tmp, 0);
	} else {
		if (fsync(s->dirfd) != 0)
			rc = store_io_error(err, "the table is in place, but data_dir could not be synced (it may not survive "
				      "a crash)", errno);
		if (fstat(fd, &st) != 0) /* cannot fail on an open fd; an identity that matches nothing: reloaded */
			memset(&st, 0, sizeof st);
		if (store_index_set(s, m, &st) != 0 && rc == 0)
			rc = pe_err_set(err, PE_ENOMEM, "", "out of memory");
	}
	s->reserved -= m->bytes;
	pthread_mutex_unlock(&s->lock);
	close(fd);
	if (replaced)
		*replaced = found;
	return rc;
}

int fstore_put(struct fstore *s, struct pe_store_meta *m, const void *data, int *replaced, pe_store_commit_cb cb,
		 void *cb_arg, struct pe_err *err)
{
	const char *why, *param;
	char tmp[FILE_MAX];
	int fd = -1;
	int rc = pe_store_name_check(m->name, strnlen(m->name, sizeof m->name), err);
	if (rc != 0)
		return rc;
	if (store_meta_check(m, &why, &param) != 0)
		return pe_err_set(err, PE_EINVAL, param, "%s", why);
	if (m->bytes > s->max_table_bytes)
		return pe_err_set(err, PE_ETOOBIG, "body", "the table is %llu bytes; max_table_bytes is %llu",
				  (unsigned long long)m->bytes, (unsigned long long)s->max_table_bytes);
	store_sha256(data, (size_t)m->bytes, m->sha256);
	m->max_abs = store_max_abs(m->dtype, data, (size_t)(m->rows * m->cols), 0);
	m->created_ms = store_now_ms();
	if ((rc = reserve(s, m, err)) != 0)
		return rc;
	if ((rc = write_temp(s, m, data, tmp, &fd, err)) != 0) {
		pthread_mutex_lock(&s->lock);
		s->reserved -= m->bytes;
		pthread_mutex_unlock(&s->lock);
		return rc;
	}
	return commit(s, m, tmp, fd, replaced, cb, cb_arg, err);
}

int fstore_delete(struct fstore *s, const char *name, pe_store_commit_cb cb, void *cb_arg, struct pe_err *err)
{
	char file[FILE_MAX];
	int found, rc = 0;
	if (pe_store_name_check(name, strlen(name), err) != 0)
		return PE_EINVAL;
	store_table_file(name, file);
	pthread_mutex_lock(&s->lock);
	size_t i = find(s, name, &found);
	if (!found)
		rc = pe_err_set(err, PE_ENOTFOUND, "name", "no learned table named %s", name);
	else if (cb && (rc = cb(cb_arg)) != 0)
		rc = called_off(err, rc);
	else if (unlinkat(s->dirfd, file, 0) != 0 && errno != ENOENT)
		rc = store_io_error(err, "cannot remove the table", errno);
	else { /* the index follows the directory, synced or not */
		if (fsync(s->dirfd) != 0)
			rc = store_io_error(err, "the table is removed, but data_dir could not be synced (it may come back "
				      "after a crash)", errno);
		index_remove(s, i);
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* ---- reading ---- */

void fstore_stats(struct fstore *s, struct pe_store_stats *out)
{
	pthread_mutex_lock(&s->lock);
	*out = (struct pe_store_stats){.tables = s->n, .bytes = s->bytes, .quarantine_files = s->nq,
				       .quarantine_bytes = s->q_bytes, .quarantined_total = s->quarantined,
				       .quarantine_dropped_total = s->q_dropped, .up = 1};
	pthread_mutex_unlock(&s->lock);
}

/* ---- healing: the directory changed behind the store's back ---- */

/* Is name's directory entry still the inode of fd? */
static int same_file(struct fstore *s, const char *file, int fd, struct stat *a)
{
	struct stat b;
	return fstat(fd, a) == 0 && fstatat(s->dirfd, file, &b, AT_SYMLINK_NOFOLLOW) == 0 && a->st_ino == b.st_ino &&
	       a->st_dev == b.st_dev;
}

/* A damaged file found while serving: quarantine it unless it was replaced meanwhile (the file
 * under the name must still be the inode that was read). 1 if it was quarantined. */
static int drop_damaged(struct fstore *s, const char *name, int fd, const char *why)
{
	char file[FILE_MAX];
	struct stat a;
	int found, dropped;
	store_table_file(name, file);
	pthread_mutex_lock(&s->lock);
	size_t i = find(s, name, &found);
	if ((dropped = same_file(s, file, fd, &a)) != 0) {
		store_quarantine(s, file, (uint64_t)a.st_size, why);
		if (found)
			index_remove(s, i);
	}
	pthread_mutex_unlock(&s->lock);
	return dropped;
}

/* The file of version cur is gone (or is not a regular file any more), and not through this
 * store: if the index still says cur and the directory agrees, drop the table (PE_ENOTFOUND).
 * Otherwise the table changed through the store meanwhile: PE_ENOTFOUND or PE_EBUSY (retry). */
static int heal_gone(struct fstore *s, const struct pe_store_meta *cur, const char *why, struct pe_err *err)
{
	char file[FILE_MAX];
	struct stat st;
	int found, rc;
	store_table_file(cur->name, file);
	pthread_mutex_lock(&s->lock);
	size_t i = find(s, cur->name, &found);
	int gone = fstatat(s->dirfd, file, &st, AT_SYMLINK_NOFOLLOW) != 0 ? errno == ENOENT : !S_ISREG(st.st_mode);
	if (found && pe_store_same_version(&s->tables[i].m, cur) && gone) {
		index_remove(s, i);
		store_note(s, "vanished", file, why);
		found = 0;
	}
	pthread_mutex_unlock(&s->lock);
	if (!found)
		rc = pe_err_set(err, PE_ENOTFOUND, "name", "no learned table named %s", cur->name);
	else
		rc = pe_err_set(err, PE_EBUSY, "", "the table %s changed while this request ran; retry", cur->name);
	return rc;
}

/* fd (st: its stat before it was read) holds the valid version m of seen's table. If the index
 * still holds seen and the name is still fd's inode, index m with st: served from now on (logged
 * when the version differs; the same version gets the new identity silently). */
static void settle(struct fstore *s, const struct entry *seen, const struct pe_store_meta *m,
		   const struct stat *st, int fd)
{
	char file[FILE_MAX];
	struct stat a;
	int found;
	store_table_file(seen->m.name, file);
	pthread_mutex_lock(&s->lock);
	size_t i = find(s, seen->m.name, &found);
	if (found && pe_store_same_version(&s->tables[i].m, &seen->m) && same_id(&s->tables[i].id, &seen->id) &&
	    same_file(s, file, fd, &a) && store_index_set(s, m, st) == 0 && !pe_store_same_version(m, &seen->m))
		store_note(s, "adopted", file, "the file was replaced by another valid table behind posencd's back; serving it");
	pthread_mutex_unlock(&s->lock);
}

/* seen's file changed: read and verify what is there now (without the lock: this reads the
 * whole file), then adopt it (settle), drop the table if the file is gone, or quarantine it.
 * PE_EIO when it quarantined the file (*why says why), else 0: look again. */
static int reload(struct fstore *s, const struct entry *seen, const char **why)
{
	char file[FILE_MAX];
	struct pe_store_meta m;
	struct stat st;
	store_table_file(seen->m.name, file);
	int fd = openat(s->dirfd, file, OPEN_FLAGS);
	if (fd < 0) {
		if (errno == ENOENT || errno == ELOOP)
			heal_gone(s, &seen->m, "the file was removed behind posencd's back; table dropped", NULL);
		return 0; /* anything else (EACCES...): the index is left as it is, a read will tell */
	}
	int rc = fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ? 1 : store_load(fd, seen->m.name, &m, NULL, why);
	if (rc == 1)
		heal_gone(s, &seen->m, "the file is not a regular file any more; table dropped, file left alone", NULL);
	else if (rc == 0)
		settle(s, seen, &m, &st, fd);
	rc = rc == -1 && drop_damaged(s, seen->m.name, fd, *why) ? PE_EIO : 0; /* PE_ENOMEM: left as it is */
	close(fd);
	return rc;
}

enum { FRESH, GONE, CHANGED };

/* Is entry i's file still what the index recorded? One fstatat, no reading (lock held). GONE:
 * removed or not a regular file (why says which). A stat failing otherwise counts as FRESH. */
static int check_entry(struct fstore *s, size_t i, const char **why)
{
	char file[FILE_MAX];
	struct stat st;
	struct file_id id;
	store_table_file(s->tables[i].m.name, file);
	if (fstatat(s->dirfd, file, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return errno == ENOENT ? (*why = "the file was removed behind posencd's back; table dropped", GONE) : FRESH;
	if (!S_ISREG(st.st_mode))
		return *why = "the file is not a regular file any more; table dropped, file left alone", GONE;
	file_id_of(&st, &id);
	return same_id(&id, &s->tables[i].id) ? FRESH : CHANGED;
}

static void vanish(struct fstore *s, size_t i, const char *why)
{
	char file[FILE_MAX];
	store_table_file(s->tables[i].m.name, file);
	index_remove(s, i);
	store_note(s, "vanished", file, why);
}

/* name's entry, checked against its file first (and reloaded if the file changed). 0,
 * PE_ENOTFOUND, or PE_EIO when the reload found the file damaged and quarantined it (*why says
 * why). A file that keeps changing under the reload is given up on after a few tries: the
 * index's entry is returned, and the next call looks again. */
static int lookup(struct fstore *s, const char *name, struct entry *out, const char **why)
{
	for (int tries = 0;; tries++) {
		int found, c = FRESH;
		pthread_mutex_lock(&s->lock);
		size_t i = find(s, name, &found);
		if (found && (c = check_entry(s, i, why)) == GONE) {
			vanish(s, i, *why);
			found = 0;
		}
		if (found)
			*out = s->tables[i];
		pthread_mutex_unlock(&s->lock);
		if (!found)
			return PE_ENOTFOUND;
		if (c == FRESH || tries == 3)
			return 0;
		if (reload(s, out, why) != 0)
			return PE_EIO;
	}
}

int fstore_stat(struct fstore *s, const char *name, struct pe_store_meta *out)
{
	struct entry e;
	const char *why;
	if (lookup(s, name, &e, &why) != 0)
		return PE_ENOTFOUND;
	*out = e.m;
	return 0;
}

/* Check every entry against its file: drop the vanished ones, reload the changed ones. */
static void check_all(struct fstore *s)
{
	struct entry *changed = NULL;
	size_t n = 0;
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->n;) {
		const char *why = NULL;
		int c = check_entry(s, i, &why);
		if (c == GONE) {
			vanish(s, i, why);
			continue;
		}
		if (c == CHANGED && (changed || (changed = malloc(s->n * sizeof *changed)) != NULL))
			changed[n++] = s->tables[i]; /* without memory: listed as indexed, a stat reloads it */
		i++;
	}
	pthread_mutex_unlock(&s->lock);
	for (size_t k = 0; k < n; k++) {
		const char *why;
		reload(s, &changed[k], &why);
	}
	free(changed);
}

int fstore_list(struct fstore *s, struct pe_store_meta **out, size_t *n)
{
	int rc = 0;
	check_all(s);
	pthread_mutex_lock(&s->lock);
	*n = s->n;
	*out = NULL;
	if (s->n && !(*out = malloc(s->n * sizeof **out)))
		rc = PE_ENOMEM;
	for (size_t i = 0; rc == 0 && i < s->n; i++)
		(*out)[i] = s->tables[i].m;
	pthread_mutex_unlock(&s->lock);
	if (rc)
		*n = 0;
	return rc;
}

int fstore_read(struct fstore *s, const char *name, const struct pe_store_meta *want, struct pe_store_meta *m,
		  void **data, struct pe_err *err)
{
	char file[FILE_MAX];
	const char *why = NULL;
	struct entry cur;
	struct stat st;
	*data = NULL;
	int rc = lookup(s, name, &cur, &why);
	if (rc == PE_EIO)
		return pe_err_set(err, PE_EIO, "", "the stored table %s is damaged (%s); it was quarantined", name, why);
	if (rc != 0)
		return pe_err_set(err, PE_ENOTFOUND, "name", "no learned table named %s", name);
	if (want && !pe_store_same_version(&cur.m, want))
		return pe_err_set(err, PE_EBUSY, "", "the table %s was replaced while this request ran; retry", name);
	store_table_file(name, file);
	int fd = openat(s->dirfd, file, OPEN_FLAGS);
	if (fd < 0 && (errno == ENOENT || errno == ELOOP))
		return heal_gone(s, &cur.m, errno == ENOENT ? "the file was removed behind posencd's back; table dropped"
							    : "the file was replaced by a symlink; table dropped", err);
	if (fd < 0)
		return store_io_error(err, "cannot open the table", errno);
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return heal_gone(s, &cur.m, "the file is not a regular file any more; table dropped, file left alone", err);
	}
	rc = store_load(fd, name, m, data, &why);
	if (rc == -1) {
		drop_damaged(s, name, fd, why);
		rc = pe_err_set(err, PE_EIO, "", "the stored table %s is damaged (%s); it was quarantined", name, why);
	} else if (rc != 0) {
		rc = pe_err_set(err, rc, "", "out of memory");
	} else if (!pe_store_same_version(m, &cur.m)) {
		free(*data);
		*data = NULL;
		settle(s, &cur, m, &st, fd);
		rc = pe_err_set(err, PE_EBUSY, "", "the table %s was replaced while this request ran; retry", name);
	}
	close(fd);
	return rc;
}
