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
#include "posenc/store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <nettle/sha2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

struct pe_store {
	int dirfd, qfd, lockfd; /* data_dir, data_dir/quarantine and the lock file */
	uint64_t max_bytes, max_table_bytes;
	uint64_t q_max_bytes, q_bytes;
	size_t q_max_files, nq, qcap;
	struct qfile *q;
	uint64_t quarantined, q_dropped; /* totals since open */
	pe_store_log_cb log;
	void *log_arg;
	pthread_mutex_t lock;
	struct pe_store_meta *tables; /* sorted by name */
	size_t n, cap;
	uint64_t bytes, reserved; /* committed, and reserved by uploads in progress */
	uint64_t tmp_seq;
};

/* ---- small helpers ---- */

static void put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint64_t get_u64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void sha256(const void *data, size_t len, uint8_t out[32])
{
	struct sha256_ctx c;
	sha256_init(&c);
	sha256_update(&c, len, data);
	sha256_digest(&c, SHA256_DIGEST_SIZE, out);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void note(struct pe_store *s, const char *event, const char *file, const char *detail)
{
	if (s->log)
		s->log(s->log_arg, event, file, detail);
}

static int io_error(struct pe_err *err, const char *what, int e)
{
	int code = e == ENOSPC || e == EDQUOT ? PE_ENOSPACE : PE_EIO;
	return pe_err_set(err, code, "", "%s: %s", what, strerror(e));
}

static int is_float_dtype(enum pe_dtype dt) { return dt == PE_F32 || dt == PE_F64 || dt == PE_F16; }

static void table_file(const char *name, char out[FILE_MAX])
{
	snprintf(out, FILE_MAX, "%s" SUFFIX, name);
}

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

static int index_set(struct pe_store *s, const struct pe_store_meta *m)
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

/* ---- the header ---- */

static void header_write(const struct pe_store_meta *m, uint8_t h[HEADER])
{
	memset(h, 0, HEADER);
	memcpy(h, MAGIC, 8);
	put_u32(h + 8, VERSION);
	put_u32(h + 12, HEADER);
	memcpy(h + 16, pe_dtype_name(m->dtype), strlen(pe_dtype_name(m->dtype)));
	put_u64(h + 24, m->rows);
	put_u64(h + 32, m->cols);
	put_u64(h + 40, m->prefix_tokens);
	put_u64(h + 48, m->grid_h);
	put_u64(h + 56, m->grid_w);
	put_u64(h + 64, m->bytes);
	put_u64(h + 72, (uint64_t)m->created_ms);
	memcpy(h + 80, m->sha256, 32);
	memcpy(h + 112, m->name, strlen(m->name));
	sha256(h, 224, h + 224);
}

/* Shape, dtype and grid consistent; bytes computed without overflow. why names the problem. */
static int meta_check(struct pe_store_meta *m, const char **why, const char **param)
{
	uint64_t cells;
	*param = "body";
	if (!is_float_dtype(m->dtype))
		return *why = "the dtype must be f16, f32 or f64", -1;
	if (m->rows == 0 || m->cols == 0)
		return *why = "the table is empty", -1;
	if (__builtin_mul_overflow(m->rows, m->cols, &cells) ||
	    __builtin_mul_overflow(cells, (uint64_t)pe_dtype_size(m->dtype), &m->bytes))
		return *why = "the table's size overflows", -1;
	*param = "grid";
	if ((m->grid_h == 0) != (m->grid_w == 0))
		return *why = "both grid sizes must be positive", -1;
	if (m->grid_h == 0 && m->prefix_tokens != 0)
		return *param = "prefix_tokens", *why = "prefix_tokens needs a grid", -1;
	uint64_t g;
	if (m->grid_h && (__builtin_mul_overflow(m->grid_h, m->grid_w, &g) || g > m->rows ||
			  m->prefix_tokens != m->rows - g))
		return *why = "prefix_tokens + grid height * width must equal the table's rows", -1;
	return 0;
}

/* Parse and check a header read from file; name is the one the file name says. */
static int header_read(const uint8_t h[HEADER], const char *name, struct pe_store_meta *m, const char **why)
{
	uint8_t sum[32];
	char dt[9] = {0};
	const char *param;
	sha256(h, 224, sum);
	if (memcmp(h, MAGIC, 8) != 0)
		return *why = "not a table file (bad magic)", -1;
	if (memcmp(sum, h + 224, 32) != 0)
		return *why = "header checksum mismatch", -1;
	if (get_u32(h + 8) != VERSION || get_u32(h + 12) != HEADER)
		return *why = "unknown format version", -1;
	memset(m, 0, sizeof *m);
	memcpy(dt, h + 16, 8);
	memcpy(m->name, h + 112, PE_STORE_NAME_MAX);
	if (strcmp(m->name, name) != 0)
		return *why = "the name in the header is not the file's", -1;
	if (pe_dtype_parse(dt, &m->dtype) != 0)
		return *why = "unknown dtype", -1;
	m->rows = get_u64(h + 24);
	m->cols = get_u64(h + 32);
	m->prefix_tokens = get_u64(h + 40);
	m->grid_h = get_u64(h + 48);
	m->grid_w = get_u64(h + 56);
	m->created_ms = (int64_t)get_u64(h + 72);
	memcpy(m->sha256, h + 80, 32);
	if (meta_check(m, why, &param) != 0)
		return -1;
	if (m->bytes != get_u64(h + 64))
		return *why = "the element count does not match the shape", -1;
	return 0;
}

/* ---- reading a table file ---- */

static int read_full(int fd, void *buf, size_t len, off_t off)
{
	for (size_t got = 0; got < len;) {
		ssize_t r = pread(fd, (char *)buf + got, len - got, off + (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		got += (size_t)r;
	}
	return 0;
}

/* Verify an open table file against its name; *data (if data is not NULL) gets the elements.
 * Returns 0, or -1 with why set (damage), or a negative PE_E* code (PE_ENOMEM). */
static int load(int fd, const char *name, struct pe_store_meta *m, void **data, const char **why)
{
	uint8_t h[HEADER], sum[32];
	struct stat st;
	struct sha256_ctx c;
	char *buf = NULL;
	int rc = -1;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		return *why = "not a regular file", -1;
	if ((uint64_t)st.st_size < HEADER || read_full(fd, h, HEADER, 0) != 0)
		return *why = "shorter than a header", -1;
	if (header_read(h, name, m, why) != 0)
		return -1;
	if ((uint64_t)st.st_size != HEADER + m->bytes)
		return *why = "the file's size does not match its header (truncated?)", -1;
	size_t step = data ? (size_t)m->bytes : CHUNK;
	if (!(buf = malloc(step ? step : 1)))
		return PE_ENOMEM;
	sha256_init(&c);
	for (uint64_t off = 0; off < m->bytes; off += step) {
		size_t len = m->bytes - off < step ? (size_t)(m->bytes - off) : step;
		if (read_full(fd, buf, len, (off_t)(HEADER + off)) != 0) {
			*why = "read error";
			goto out;
		}
		sha256_update(&c, len, (const uint8_t *)buf);
	}
	sha256_digest(&c, SHA256_DIGEST_SIZE, sum);
	if (memcmp(sum, m->sha256, 32) != 0) {
		*why = "the elements' SHA-256 does not match the header";
		goto out;
	}
	rc = 0;
	if (data) {
		*data = buf;
		buf = NULL;
	}
out:
	free(buf);
	return rc;
}

/* ---- quarantine (callers hold the lock, or are pe_store_open) ---- */

static int q_push(struct pe_store *s, const char *name, uint64_t bytes, int64_t when_ns)
{
	if (s->nq == s->qcap) {
		size_t cap = s->qcap ? 2 * s->qcap : 16;
		struct qfile *q = realloc(s->q, cap * sizeof *q);
		if (!q)
			return PE_ENOMEM;
		s->q = q;
		s->qcap = cap;
	}
	if (!(s->q[s->nq].name = strdup(name)))
		return PE_ENOMEM;
	s->q[s->nq].bytes = bytes;
	s->q[s->nq].when_ns = when_ns;
	s->nq++;
	s->q_bytes += bytes;
	return 0;
}

/* Delete the oldest file of quarantine/ (and forget it even if it is already gone). */
static void q_drop_oldest(struct pe_store *s)
{
	char detail[PE_ERR_DETAIL_MAX];
	struct qfile *f = &s->q[0];
	int gone = unlinkat(s->qfd, f->name, 0) == 0 || errno == ENOENT;
	snprintf(detail, sizeof detail, "%s: %llu bytes; the oldest file in " QUARANTINE "/, dropped to stay within "
		 "quarantine_max_files %zu and quarantine_max_bytes %llu", gone ? "deleted" : strerror(errno),
		 (unsigned long long)f->bytes, s->q_max_files, (unsigned long long)s->q_max_bytes);
	note(s, "quarantine_dropped", f->name, detail);
	s->q_bytes -= f->bytes;
	s->q_dropped++;
	free(f->name);
	memmove(&s->q[0], &s->q[1], (s->nq - 1) * sizeof *s->q);
	s->nq--;
}

/* Drop the oldest until bytes more (in one more file) fit. */
static void q_make_room(struct pe_store *s, uint64_t bytes)
{
	while (s->nq && (s->nq + 1 > s->q_max_files || s->q_bytes + bytes > s->q_max_bytes))
		q_drop_oldest(s);
	if (s->nq)
		fsync(s->qfd);
}

/* Move file (bytes long) into quarantine/ as file.<ms>[.<k>], sync both directories, log it. A
 * file that can never fit the quarantine's limits is deleted instead. */
static void quarantine(struct pe_store *s, const char *file, uint64_t bytes, const char *why)
{
	char dest[FILE_MAX + 48 + 256], detail[sizeof dest + 512];
	long long ms = (long long)now_ms();
	struct stat st;
	s->quarantined++;
	if (s->q_max_files == 0 || bytes > s->q_max_bytes) {
		int ok = unlinkat(s->dirfd, file, 0) == 0;
		if (ok)
			fsync(s->dirfd);
		snprintf(detail, sizeof detail, "%s; %s: %llu bytes do not fit quarantine_max_bytes %llu (quarantine_max_files "
			 "%zu)", why, ok ? "deleted" : strerror(errno), (unsigned long long)bytes,
			 (unsigned long long)s->q_max_bytes, s->q_max_files);
		note(s, "quarantine", file, detail);
		return;
	}
	q_make_room(s, bytes);
	snprintf(dest, sizeof dest, "%s.%lld", file, ms);
	for (int k = 1; k < 1000 && fstatat(s->qfd, dest, &st, AT_SYMLINK_NOFOLLOW) == 0; k++)
		snprintf(dest, sizeof dest, "%s.%lld.%d", file, ms, k);
	if (renameat(s->dirfd, file, s->qfd, dest) == 0) {
		fsync(s->qfd);
		fsync(s->dirfd);
		q_push(s, dest, bytes, (int64_t)ms * 1000000);
		snprintf(detail, sizeof detail, "%s; moved to " QUARANTINE "/%s", why, dest);
	} else {
		snprintf(detail, sizeof detail, "%s; could not move it: %s", why, strerror(errno));
	}
	note(s, "quarantine", file, detail);
}

static int q_older(const void *a, const void *b)
{
	const struct qfile *x = a, *y = b;
	return x->when_ns < y->when_ns ? -1 : x->when_ns > y->when_ns ? 1 : strcmp(x->name, y->name);
}

/* What quarantine/ holds at start (regular files only), oldest first, then within the limits. */
static int q_load(struct pe_store *s)
{
	int fd = dup(s->qfd), rc = 0;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct stat st;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return PE_EIO;
	}
	for (struct dirent *e; rc == 0 && (e = readdir(d)) != NULL;)
		if (fstatat(s->qfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
			rc = q_push(s, e->d_name, (uint64_t)st.st_size,
				    (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec);
	closedir(d);
	if (s->nq)
		qsort(s->q, s->nq, sizeof *s->q, q_older);
	while (s->nq && (s->nq > s->q_max_files || s->q_bytes > s->q_max_bytes))
		q_drop_oldest(s);
	return rc;
}

/* ---- opening and scanning ---- */

static int has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n > k && strcmp(s + n - k, suffix) == 0;
}

/* One entry of data_dir at start: index it, quarantine it, or leave it alone. */
static int scan_entry(struct pe_store *s, const char *file)
{
	char name[FILE_MAX];
	struct pe_store_meta m;
	struct stat st;
	const char *why = NULL;
	int tmp = !strncmp(file, TMP_PREFIX, strlen(TMP_PREFIX));
	size_t len = strlen(file) - strlen(SUFFIX);
	int table = has_suffix(file, SUFFIX) && len < sizeof name && pe_store_name_check(file, len, NULL) == 0;
	if (!tmp && !table) {
		note(s, "ignored", file, "not a table of this store; left alone");
		return 0;
	}
	if (fstatat(s->dirfd, file, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return 0; /* gone meanwhile */
	if (!S_ISREG(st.st_mode)) {
		note(s, "ignored", file, "not a regular file (a symlink, FIFO, directory...); never opened, left alone");
		return 0;
	}
	if (tmp) {
		quarantine(s, file, (uint64_t)st.st_size, "temporary file of an unfinished upload");
		return 0;
	}
	memcpy(name, file, len);
	name[len] = 0;
	int fd = openat(s->dirfd, file, OPEN_FLAGS);
	int rc = fd < 0 ? (why = "cannot open", -1) : load(fd, name, &m, NULL, &why);
	if (fd >= 0)
		close(fd);
	if (rc == -1)
		quarantine(s, file, (uint64_t)st.st_size, why);
	return rc == 0 ? index_set(s, &m) : rc == -1 ? 0 : rc;
}

struct names {
	char **v;
	size_t n, cap;
};

static int names_push(struct names *l, const char *name)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		char **v = realloc(l->v, cap * sizeof *v);
		if (!v)
			return PE_ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	return (l->v[l->n] = strdup(name)) != NULL ? (l->n++, 0) : PE_ENOMEM;
}

static int scan(struct pe_store *s, struct pe_err *err)
{
	struct names l = {0};
	int fd = dup(s->dirfd), rc = 0;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		rc = io_error(err, "data_dir: cannot list", errno);
		if (fd >= 0)
			close(fd);
		return rc;
	}
	/* collect the names first: entries are renamed away as we go */
	for (struct dirent *e; rc == 0 && (e = readdir(d)) != NULL;)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, QUARANTINE) &&
		    strcmp(e->d_name, LOCK_FILE))
			rc = names_push(&l, e->d_name);
	closedir(d);
	for (size_t i = 0; i < l.n; i++) {
		if (rc == 0)
			rc = scan_entry(s, l.v[i]);
		free(l.v[i]);
	}
	free(l.v);
	return rc ? pe_err_set(err, rc, "", "out of memory while scanning data_dir") : 0;
}

/* fsync the directory holding path (a directory just created), so its entry is durable. */
static void sync_parent(char *path)
{
	char *slash = strrchr(path, '/');
	const char *parent = slash == path ? "/" : slash ? path : ".";
	if (slash && slash != path)
		*slash = 0;
	int fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (slash && slash != path)
		*slash = '/';
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

/* mkdir -p; 0 or an errno. */
static int make_dirs(const char *dir)
{
	char path[4096];
	if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
		return ENAMETOOLONG;
	for (char *p = path + 1;; p++) {
		if (*p && *p != '/')
			continue;
		char c = *p;
		*p = 0;
		if (mkdir(path, 0755) == 0)
			sync_parent(path);
		else if (errno != EEXIST)
			return errno;
		*p = c;
		if (!c)
			return 0;
	}
}

/* The one-daemon-per-data_dir lock, taken before anything in data_dir is touched; the holder's
 * pid is written into the file for the loser's message. 0, or err filled. */
static int take_lock(struct pe_store *s, const char *dir, struct pe_err *err)
{
	char pid[32] = "";
	s->lockfd = openat(s->dirfd, LOCK_FILE, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (s->lockfd < 0)
		return pe_err_set(err, PE_EIO, "data_dir", "data_dir %.160s/" LOCK_FILE ": %s", dir, strerror(errno));
	if (flock(s->lockfd, LOCK_EX | LOCK_NB) != 0) {
		int e = errno;
		ssize_t n = e == EWOULDBLOCK ? pread(s->lockfd, pid, sizeof pid - 1, 0) : -1;
		pid[n > 0 ? strcspn(pid, "\n") : 0] = 0;
		if (e == EWOULDBLOCK)
			return pe_err_set(err, PE_EBUSY, "data_dir", "data_dir %.160s is in use by another posencd%s%s%s: one "
					  "daemon per data_dir (nothing was changed)", dir, pid[0] ? " (pid " : "", pid,
					  pid[0] ? ")" : "");
		return pe_err_set(err, PE_EIO, "data_dir", "data_dir %.160s: cannot lock " LOCK_FILE ": %s", dir,
				  strerror(e));
	}
	int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
	if (ftruncate(s->lockfd, 0) != 0 || pwrite(s->lockfd, pid, (size_t)n, 0) != n)
		note(s, "ignored", LOCK_FILE, "cannot record the pid in the lock file");
	return 0;
}

struct pe_store *pe_store_open(const struct pe_store_options *o, struct pe_err *err)
{
	struct pe_store *s = calloc(1, sizeof *s);
	int e;
	if (!s) {
		pe_err_set(err, PE_ENOMEM, "", "out of memory");
		return NULL;
	}
	s->dirfd = s->qfd = s->lockfd = -1;
	s->max_bytes = o->max_bytes;
	s->max_table_bytes = o->max_table_bytes;
	s->q_max_bytes = o->quarantine_max_bytes;
	s->q_max_files = o->quarantine_max_files;
	s->log = o->log;
	s->log_arg = o->log_arg;
	pthread_mutex_init(&s->lock, NULL);
	if ((e = make_dirs(o->dir)) != 0 || (s->dirfd = open(o->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		pe_err_set(err, PE_EIO, "data_dir", "data_dir %.160s: %s", o->dir, strerror(e ? e : errno));
		goto fail;
	}
	if (take_lock(s, o->dir, err) != 0)
		goto fail;
	if ((mkdirat(s->dirfd, QUARANTINE, 0755) == 0 && fsync(s->dirfd) != 0) ||
	    (s->qfd = openat(s->dirfd, QUARANTINE, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)) < 0) {
		pe_err_set(err, PE_EIO, "data_dir", "data_dir %.160s/" QUARANTINE ": %s", o->dir, strerror(errno));
		goto fail;
	}
	if (q_load(s) != 0) {
		pe_err_set(err, PE_EIO, "data_dir", "data_dir %.160s/" QUARANTINE ": cannot list it", o->dir);
		goto fail;
	}
	if (scan(s, err) != 0)
		goto fail;
	return s;
fail:
	pe_store_close(s);
	return NULL;
}

void pe_store_close(struct pe_store *s)
{
	if (!s)
		return;
	if (s->dirfd >= 0)
		close(s->dirfd);
	if (s->qfd >= 0)
		close(s->qfd);
	if (s->lockfd >= 0)
		close(s->lockfd); /* releases the lock */
	pthread_mutex_destroy(&s->lock);
	for (size_t i = 0; i < s->nq; i++)
		free(s->q[i].name);
	free(s->q);
	free(s->tables);
	free(s);
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
		return io_error(err, "cannot create a temporary file", errno);
	header_write(m, h);
	int e = write_full(fd, h, HEADER);
	if (!e)
		e = write_full(fd, data, (size_t)m->bytes);
	if (!e && fsync(fd) != 0)
		e = errno;
	if (close(fd) != 0 && !e)
		e = errno;
	if (e) {
		unlinkat(s->dirfd, tmp, 0);
		return io_error(err, "cannot write the table", e);
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
	table_file(m->name, file);
	pthread_mutex_lock(&s->lock);
	find(s, m->name, &found);
	if (cb && (rc = cb(arg)) != 0) {
		rc = called_off(err, rc);
		unlinkat(s->dirfd, tmp, 0);
	} else if (renameat(s->dirfd, tmp, s->dirfd, file) != 0) {
		rc = io_error(err, "cannot rename the table into place", errno);
		unlinkat(s->dirfd, tmp, 0);
	} else {
		if (fsync(s->dirfd) != 0)
			rc = io_error(err, "the table is in place, but data_dir could not be synced (it may not survive "
				      "a crash)", errno);
		if (index_set(s, m) != 0 && rc == 0)
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
	if (meta_check(m, &why, &param) != 0)
		return pe_err_set(err, PE_EINVAL, param, "%s", why);
	if (m->bytes > s->max_table_bytes)
		return pe_err_set(err, PE_ETOOBIG, "body", "the table is %llu bytes; max_table_bytes is %llu",
				  (unsigned long long)m->bytes, (unsigned long long)s->max_table_bytes);
	sha256(data, (size_t)m->bytes, m->sha256);
	m->created_ms = now_ms();
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
	table_file(name, file);
	pthread_mutex_lock(&s->lock);
	size_t i = find(s, name, &found);
	if (!found)
		rc = pe_err_set(err, PE_ENOTFOUND, "name", "no learned table named %s", name);
	else if (cb && (rc = cb(cb_arg)) != 0)
		rc = called_off(err, rc);
	else if (unlinkat(s->dirfd, file, 0) != 0 && errno != ENOENT)
		rc = io_error(err, "cannot remove the table", errno);
	else { /* the index follows the directory, synced or not */
		if (fsync(s->dirfd) != 0)
			rc = io_error(err, "the table is removed, but data_dir could not be synced (it may come back "
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
	table_file(name, file);
	pthread_mutex_lock(&s->lock);
	size_t i = find(s, name, &found);
	if (same_file(s, file, fd, &a)) {
		quarantine(s, file, (uint64_t)a.st_size, why);
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
	table_file(cur->name, file);
	pthread_mutex_lock(&s->lock);
	size_t i = find(s, cur->name, &found);
	int gone = fstatat(s->dirfd, file, &st, AT_SYMLINK_NOFOLLOW) != 0 ? errno == ENOENT : !S_ISREG(st.st_mode);
	if (found && pe_store_same_version(&s->tables[i], cur) && gone) {
		index_remove(s, i);
		note(s, "vanished", file, why);
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
	table_file(cur->name, file);
	pthread_mutex_lock(&s->lock);
	size_t i = find(s, cur->name, &found);
	if (found && pe_store_same_version(&s->tables[i], cur) && same_file(s, file, fd, &a) && index_set(s, m) == 0)
		note(s, "adopted", file, "the file was replaced by another valid table behind posencd's back; serving it");
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
	table_file(name, file);
	int fd = openat(s->dirfd, file, OPEN_FLAGS);
	if (fd < 0 && (errno == ENOENT || errno == ELOOP))
		return heal_gone(s, &cur, errno == ENOENT ? "the file was removed behind posencd's back; table dropped"
							  : "the file was replaced by a symlink; table dropped", err);
	if (fd < 0)
		return io_error(err, "cannot open the table", errno);
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return heal_gone(s, &cur, "the file is not a regular file any more; table dropped, file left alone", err);
	}
	int rc = load(fd, name, m, data, &why);
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
