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
 * The index follows the directory, and heals when the directory changes behind the store's back:
 * a read that finds the file gone (or not a regular file any more) drops the table (404, not an
 * endless "retry"), and one that finds another valid version there adopts it.
 *
 * The space limit counts table bytes; uploads in progress reserve theirs first, so concurrent
 * uploads cannot together overshoot it. A write can be called off by its caller up to the moment
 * it becomes visible (pe_store_commit_cb), so a request answered "did not finish" never lands. */
#include "store/internal.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- names ---- */

int pe_store_name_check(const char *name, size_t len, struct pe_err *err)
{
	if (len == 0 || len > PE_STORE_NAME_MAX)
		return pe_err_set(err, PE_EINVAL, "name", "name must be 1 to %d characters, got %zu", PE_STORE_NAME_MAX,
				  len);
	if (name[0] == '.')
		return pe_err_set(err, PE_EINVAL, "name", "name must not start with a dot");
	for (size_t i = 0; i < len; i++) {
		char c = name[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
		      c == '_' || c == '-'))
			return pe_err_set(err, PE_EINVAL, "name",
					  "name may hold only A-Z a-z 0-9 . _ - (byte %zu is 0x%02x)", i + 1,
					  (unsigned)(unsigned char)c);
	}
	return 0;
}

/* ---- the index (callers hold the lock) ---- */

/* Position of name, or where it would go (*found says which). */
static size_t find(const struct pe_store *s, const char *name, int *found)
{
	size_t lo = 0, hi = s->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(s->tables[mid].name, name);
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

int store_index_set(struct pe_store *s, const struct pe_store_meta *m)
{
	int found;
	size_t i = find(s, m->name, &found);
	if (found) {
		s->bytes -= s->tables[i].bytes;
	} else {
		if (s->n == s->cap) {
			size_t cap = s->cap ? 2 * s->cap : 16;
			struct pe_store_meta *t = realloc(s->tables, cap * sizeof *t);
			if (!t)
				return PE_ENOMEM;
			s->tables = t;
			s->cap = cap;
		}
		memmove(&s->tables[i + 1], &s->tables[i], (s->n - i) * sizeof *s->tables);
		s->n++;
	}
	s->tables[i] = *m;
	s->bytes += m->bytes;
	return 0;
}

static void index_remove(struct pe_store *s, size_t i)
{
	s->bytes -= s->tables[i].bytes;
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
static int reserve(struct pe_store *s, const struct pe_store_meta *m, struct pe_err *err)
{
	int found, rc = 0;
	pthread_mutex_lock(&s->lock);
	size_t i = find(s, m->name, &found);
	uint64_t old = found ? s->tables[i].bytes : 0;
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

/* Write header and data into a new temporary file, fsynced; its name into tmp. */
static int write_temp(struct pe_store *s, const struct pe_store_meta *m, const void *data, char tmp[FILE_MAX],
		      struct pe_err *err)
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
	if (close(fd) != 0 && !e)
		e = errno;
	if (e) {
		unlinkat(s->dirfd, tmp, 0);
		return store_io_error(err, "cannot write the table", e);
	}
	return 0;
}

static int called_off(struct pe_err *err, int code)
{
	return pe_err_set(err, code, "", "the write was called off before it was committed; nothing changed");
}

/* Rename the temporary file into place, sync the directory, update the index (which follows the
 * directory: a rename done is indexed even if the sync then fails). Unless cb calls it off. */
static int commit(struct pe_store *s, const struct pe_store_meta *m, const char *tmp, int *replaced,
		  pe_store_commit_cb cb, void *arg, struct pe_err *err)
{
	char file[FILE_MAX];
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
		if (store_index_set(s, m) != 0 && rc == 0)
			rc = pe_err_set(err, PE_ENOMEM, "", "out of memory");
	}
	s->reserved -= m->bytes;
	pthread_mutex_unlock(&s->lock);
	if (replaced)
		*replaced = found;
	return rc;
}

int pe_store_put(struct pe_store *s, struct pe_store_meta *m, const void *data, int *replaced, pe_store_commit_cb cb,
		 void *cb_arg, struct pe_err *err)
{
	const char *why, *param;
	char tmp[FILE_MAX];
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
	if ((rc = write_temp(s, m, data, tmp, err)) != 0) {
		pthread_mutex_lock(&s->lock);
		s->reserved -= m->bytes;
		pthread_mutex_unlock(&s->lock);
		return rc;
	}
	return commit(s, m, tmp, replaced, cb, cb_arg, err);
}

int pe_store_delete(struct pe_store *s, const char *name, pe_store_commit_cb cb, void *cb_arg, struct pe_err *err)
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

int pe_store_stat(struct pe_store *s, const char *name, struct pe_store_meta *out)
{
	int found;
	pthread_mutex_lock(&s->lock);
	size_t i = find(s, name, &found);
	if (found)
		*out = s->tables[i];
	pthread_mutex_unlock(&s->lock);
	return found ? 0 : PE_ENOTFOUND;
}

int pe_store_list(struct pe_store *s, struct pe_store_meta **out, size_t *n)
{
	int rc = 0;
	pthread_mutex_lock(&s->lock);
	*n = s->n;
	*out = NULL;
	if (s->n && !(*out = malloc(s->n * sizeof **out)))
		rc = PE_ENOMEM;
	else if (s->n)
		memcpy(*out, s->tables, s->n * sizeof **out);
	pthread_mutex_unlock(&s->lock);
	if (rc)
		*n = 0;
	return rc;
}

void pe_store_usage(struct pe_store *s, uint64_t *bytes, size_t *tables)
{
	pthread_mutex_lock(&s->lock);
	*bytes = s->bytes;
	*tables = s->n;
	pthread_mutex_unlock(&s->lock);
}

void pe_store_limits(const struct pe_store *s, uint64_t *max_bytes, uint64_t *max_table_bytes)
{
	*max_bytes = s->max_bytes;
	*max_table_bytes = s->max_table_bytes;
}

int pe_store_same_version(const struct pe_store_meta *a, const struct pe_store_meta *b)
{
	return !memcmp(a->sha256, b->sha256, 32) && a->dtype == b->dtype && a->rows == b->rows && a->cols == b->cols &&
	       a->prefix_tokens == b->prefix_tokens && a->grid_h == b->grid_h && a->grid_w == b->grid_w &&
	       !strcmp(a->name, b->name);
}

void pe_store_stats(struct pe_store *s, struct pe_store_stats *out)
{
	pthread_mutex_lock(&s->lock);
	*out = (struct pe_store_stats){.tables = s->n, .bytes = s->bytes, .quarantine_files = s->nq,
				       .quarantine_bytes = s->q_bytes, .quarantined_total = s->quarantined,
				       .quarantine_dropped_total = s->q_dropped};
	pthread_mutex_unlock(&s->lock);
}

/* Is name's directory entry still the inode of fd? */
static int same_file(struct pe_store *s, const char *file, int fd, struct stat *a)
{
	struct stat b;
	return fstat(fd, a) == 0 && fstatat(s->dirfd, file, &b, AT_SYMLINK_NOFOLLOW) == 0 && a->st_ino == b.st_ino &&
	       a->st_dev == b.st_dev;
}

/* A damaged file found while serving: quarantine it unless it was replaced meanwhile (the file
 * under the name must still be the inode that was read). */
static void drop_damaged(struct pe_store *s, const char *name, int fd, const char *why)
{
	char file[FILE_MAX];
	struct stat a;
	int found;
	store_table_file(name, file);
	pthread_mutex_lock(&s->lock);
	size_t i = find(s, name, &found);
	if (same_file(s, file, fd, &a)) {
		store_quarantine(s, file, (uint64_t)a.st_size, why);
		if (found)
			index_remove(s, i);
	}
	pthread_mutex_unlock(&s->lock);
}

/* The file of version cur is gone (or is not a regular file any more), and not through this
 * store: if the index still says cur and the directory agrees, drop the table (PE_ENOTFOUND).
 * Otherwise the table changed through the store meanwhile: PE_ENOTFOUND or PE_EBUSY (retry). */
static int heal_gone(struct pe_store *s, const struct pe_store_meta *cur, const char *why, struct pe_err *err)
{
	char file[FILE_MAX];
	struct stat st;
	int found, rc;
	store_table_file(cur->name, file);
	pthread_mutex_lock(&s->lock);
	size_t i = find(s, cur->name, &found);
	int gone = fstatat(s->dirfd, file, &st, AT_SYMLINK_NOFOLLOW) != 0 ? errno == ENOENT : !S_ISREG(st.st_mode);
	if (found && pe_store_same_version(&s->tables[i], cur) && gone) {
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

/* fd (still the file under the name) holds a valid version m other than cur, which the index
 * still lists: the file was replaced behind the store's back. Serve what is on disk from now on. */
static void adopt(struct pe_store *s, const struct pe_store_meta *cur, const struct pe_store_meta *m, int fd)
{
	char file[FILE_MAX];
	struct stat a;
	int found;
	store_table_file(cur->name, file);
	pthread_mutex_lock(&s->lock);
	size_t i = find(s, cur->name, &found);
	if (found && pe_store_same_version(&s->tables[i], cur) && same_file(s, file, fd, &a) && store_index_set(s, m) == 0)
		store_note(s, "adopted", file, "the file was replaced by another valid table behind posencd's back; serving it");
	pthread_mutex_unlock(&s->lock);
}

int pe_store_read(struct pe_store *s, const char *name, const struct pe_store_meta *want, struct pe_store_meta *m,
		  void **data, struct pe_err *err)
{
	char file[FILE_MAX];
	const char *why = NULL;
	struct pe_store_meta cur;
	struct stat st;
	*data = NULL;
	if (pe_store_stat(s, name, &cur) != 0)
		return pe_err_set(err, PE_ENOTFOUND, "name", "no learned table named %s", name);
	if (want && !pe_store_same_version(&cur, want))
		return pe_err_set(err, PE_EBUSY, "", "the table %s was replaced while this request ran; retry", name);
	store_table_file(name, file);
	int fd = openat(s->dirfd, file, OPEN_FLAGS);
	if (fd < 0 && (errno == ENOENT || errno == ELOOP))
		return heal_gone(s, &cur, errno == ENOENT ? "the file was removed behind posencd's back; table dropped"
							  : "the file was replaced by a symlink; table dropped", err);
	if (fd < 0)
		return store_io_error(err, "cannot open the table", errno);
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return heal_gone(s, &cur, "the file is not a regular file any more; table dropped, file left alone", err);
	}
	int rc = store_load(fd, name, m, data, &why);
	if (rc == -1) {
		drop_damaged(s, name, fd, why);
		rc = pe_err_set(err, PE_EIO, "", "the stored table %s is damaged (%s); it was quarantined", name, why);
	} else if (rc != 0) {
		rc = pe_err_set(err, rc, "", "out of memory");
	} else if (!pe_store_same_version(m, &cur)) {
		free(*data);
		*data = NULL;
		adopt(s, &cur, m, fd);
		rc = pe_err_set(err, PE_EBUSY, "", "the table %s was replaced while this request ran; retry", name);
	}
	close(fd);
	return rc;
}
