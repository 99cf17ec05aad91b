/* quarantine/: damaged and leftover files moved aside, bounded by quarantine_max_files and
 * quarantine_max_bytes (oldest deleted first; a file that could never fit is deleted outright). */
#include "store/internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static int q_push(struct fstore *s, const char *name, uint64_t bytes, int64_t when_ns)
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
static void q_drop_oldest(struct fstore *s)
{
	char detail[PE_ERR_DETAIL_MAX];
	struct qfile *f = &s->q[0];
	int gone = unlinkat(s->qfd, f->name, 0) == 0 || errno == ENOENT;
	snprintf(detail, sizeof detail, "%s: %llu bytes; the oldest file in " QUARANTINE "/, dropped to stay within "
		 "quarantine_max_files %zu and quarantine_max_bytes %llu", gone ? "deleted" : strerror(errno),
		 (unsigned long long)f->bytes, s->q_max_files, (unsigned long long)s->q_max_bytes);
	store_note(s, "quarantine_dropped", f->name, detail);
	s->q_bytes -= f->bytes;
	s->q_dropped++;
	free(f->name);
	memmove(&s->q[0], &s->q[1], (s->nq - 1) * sizeof *s->q);
	s->nq--;
}

/* Drop the oldest until bytes more (in one more file) fit. */
static void q_make_room(struct fstore *s, uint64_t bytes)
{
	while (s->nq && (s->nq + 1 > s->q_max_files || s->q_bytes + bytes > s->q_max_bytes))
		q_drop_oldest(s);
	if (s->nq)
		fsync(s->qfd);
}

/* Move file (bytes long) into quarantine/ as file.<ms>[.<k>], sync both directories, log it. A
 * file that can never fit the quarantine's limits is deleted instead. */
void store_quarantine(struct fstore *s, const char *file, uint64_t bytes, const char *why)
{
	char dest[FILE_MAX + 48 + 256], detail[sizeof dest + 512];
	long long ms = (long long)store_now_ms();
	struct stat st;
	s->quarantined++;
	if (s->q_max_files == 0 || bytes > s->q_max_bytes) {
		int ok = unlinkat(s->dirfd, file, 0) == 0;
		if (ok)
			fsync(s->dirfd);
		snprintf(detail, sizeof detail, "%s; %s: %llu bytes do not fit quarantine_max_bytes %llu (quarantine_max_files "
			 "%zu)", why, ok ? "deleted" : strerror(errno), (unsigned long long)bytes,
			 (unsigned long long)s->q_max_bytes, s->q_max_files);
		store_note(s, "quarantine", file, detail);
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
	store_note(s, "quarantine", file, detail);
}

static int q_older(const void *a, const void *b)
{
	const struct qfile *x = a, *y = b;
	return x->when_ns < y->when_ns ? -1 : x->when_ns > y->when_ns ? 1 : strcmp(x->name, y->name);
}

/* What quarantine/ holds at start (regular files only), oldest first, then within the limits. */
int store_q_load(struct fstore *s)
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

