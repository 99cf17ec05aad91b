/* Opening data_dir: the lock that keeps one process per directory, the quarantine, and the scan
 * that builds the index (quarantining what does not verify); closing. */
#include "store/internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static int has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n > k && strcmp(s + n - k, suffix) == 0;
}

/* One entry of data_dir at start: index it, quarantine it, or leave it alone. */
static int scan_entry(struct fstore *s, const char *file)
{
	char name[FILE_MAX];
	struct pe_store_meta m;
	struct stat st;
	const char *why = NULL;
	int tmp = !strncmp(file, TMP_PREFIX, strlen(TMP_PREFIX));
	size_t len = strlen(file) - strlen(SUFFIX);
	int table = has_suffix(file, SUFFIX) && len < sizeof name && pe_store_name_check(file, len, NULL) == 0;
	if (!tmp && !table) {
		store_note(s, "ignored", file, "not a table of this store; left alone");
		return 0;
	}
	if (fstatat(s->dirfd, file, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return 0; /* gone meanwhile */
	if (!S_ISREG(st.st_mode)) {
		store_note(s, "ignored", file, "not a regular file (a symlink, FIFO, directory...); never opened, left alone");
		return 0;
	}
	if (tmp) {
		store_quarantine(s, file, (uint64_t)st.st_size, "temporary file of an unfinished upload");
		return 0;
	}
	memcpy(name, file, len);
	name[len] = 0;
	int fd = openat(s->dirfd, file, OPEN_FLAGS);
	int rc = fd < 0 ? (why = "cannot open", -1) : fstat(fd, &st) != 0 ? (why = "cannot stat", -1)
						       : store_load(fd, name, &m, NULL, &why);
	if (fd >= 0)
		close(fd);
	if (rc == -1)
		store_quarantine(s, file, (uint64_t)st.st_size, why);
	return rc == 0 ? store_index_set(s, &m, &st) : rc == -1 ? 0 : rc;
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

static int scan(struct fstore *s, struct pe_err *err)
{
	struct names l = {0};
	int fd = dup(s->dirfd), rc = 0;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		rc = store_io_error(err, "data_dir: cannot list", errno);
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
static int take_lock(struct fstore *s, const char *dir, struct pe_err *err)
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
		store_note(s, "ignored", LOCK_FILE, "cannot record the pid in the lock file");
	return 0;
}

struct fstore *fstore_open(const struct pe_store_options *o, struct pe_err *err)
{
	struct fstore *s = calloc(1, sizeof *s);
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
	if (store_q_load(s) != 0) {
		pe_err_set(err, PE_EIO, "data_dir", "data_dir %.160s/" QUARANTINE ": cannot list it", o->dir);
		goto fail;
	}
	if (scan(s, err) != 0)
		goto fail;
	return s;
fail:
	fstore_close(s);
	return NULL;
}

void fstore_close(struct fstore *s)
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

