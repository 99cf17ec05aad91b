/* Running the CLI binary (build/posenc, or $POSENC_CLI) from a CLI test, with what the -o and
 * streaming tests need around it: stdout to a captured pipe or to a descriptor the test chose, a
 * descriptor kept open as N for /dev/fd/N, a umask, a file size limit, running as nobody, and the
 * child's resource usage (wait4) for its peak RSS; and scratch directories
 * whose contents the -o tests check. Static inline functions: each test program
 * includes it once and uses what it needs (test_cli.c runs it with no options: stdout and stderr
 * captured, nothing else changed). */
#ifndef PE_TEST_CLI_RUN_H
#define PE_TEST_CLI_RUN_H

#include "support/pe_check.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

struct crun_opts {
	int out_fd;        /* > 0: the child's stdout (else a pipe the runner reads) */
	int keep_fd;       /* > 2: passed to the child under the same number (for /dev/fd/N) */
	int set_umask;     /* apply umask_ */
	mode_t umask_;
	rlim_t fsize;      /* > 0: RLIMIT_FSIZE */
	int as_nobody;     /* when root: setgid/setuid 65534 before exec */
	int count_only;    /* do not keep stdout, count it */
};

struct crun {
	int status; /* exit status, or 128 + signal */
	char *out, *err;
	size_t nout, nerr;
	long maxrss_kb; /* the child's peak RSS */
};

static inline const char *crun_path(void)
{
	const char *p = getenv("POSENC_CLI");
	return p && *p ? p : "build/posenc";
}

static inline void crun_free(struct crun *r)
{
	free(r->out);
	free(r->err);
	memset(r, 0, sizeof *r);
}

/* Read what fd has into *buf (or only count it); *open_ = 0 at EOF. */
static inline void crun_slurp(int fd, char **buf, size_t *len, size_t *cap, int *open_, int count_only)
{
	static char sink[1 << 16];
	char *at = sink;
	size_t room = sizeof sink;
	if (!count_only) {
		if (*cap - *len < 65536) {
			*cap = *cap * 2 + 65536;
			*buf = realloc(*buf, *cap + 1);
			ck_assert_ptr_nonnull(*buf);
		}
		at = *buf + *len;
		room = *cap - *len;
	}
	ssize_t n = read(fd, at, room);
	if (n < 0 && errno == EINTR)
		return;
	ck_assert_msg(n >= 0, "read: %s", strerror(errno));
	if (n == 0)
		*open_ = 0;
	*len += (size_t)n;
	if (!count_only)
		(*buf)[*len] = 0;
}

static inline void crun_child(const struct crun_opts *o, int out_w, int err_w, char **argv)
{
	if (o->set_umask)
		umask(o->umask_);
	if (o->fsize) {
		struct rlimit rl = {o->fsize, o->fsize};
		setrlimit(RLIMIT_FSIZE, &rl);
	}
	if (o->as_nobody && geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
		_exit(126);
	dup2(out_w, 1);
	dup2(err_w, 2);
	if (o->keep_fd > 2)
		fcntl(o->keep_fd, F_SETFD, 0);
	execv(argv[0], argv);
	_exit(127);
}

/* The child, started: with posix_spawn when it needs only its output redirected (no copy of the
 * caller's memory, which is most of a fork's cost), else forked. No check call runs in the child
 * before exec: another thread may hold check's lock. -1 when it cannot start. */
static inline pid_t crun_spawn(const struct crun_opts *o, int out_w, int err_w, char **argv)
{
	if (o->set_umask || o->fsize || o->as_nobody || o->keep_fd > 2) {
		pid_t pid = fork();
		if (pid == 0)
			crun_child(o, out_w, err_w, argv);
		return pid;
	}
	extern char **environ;
	posix_spawn_file_actions_t fa;
	pid_t pid;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, out_w, 1);
	posix_spawn_file_actions_adddup2(&fa, err_w, 2);
	int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	ck_assert_msg(rc == 0, "cannot run %s: %s (build it, or set POSENC_CLI)", argv[0], strerror(rc));
	return pid;
}

/* args: NULL-terminated, without the program name. */
static inline void crun_argv(struct crun *r, const struct crun_opts *o, const char *const *args)
{
	char *argv[128];
	int n = 0;
	argv[n++] = (char *)crun_path();
	for (; *args; args++) {
		ck_assert_int_lt(n, 126);
		argv[n++] = (char *)*args;
	}
	argv[n] = NULL;
	int po[2] = {-1, -1}, pe[2];
	if (o->out_fd <= 0)
		ck_assert_int_eq(pipe2(po, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(pe, O_CLOEXEC), 0);
	pid_t pid = crun_spawn(o, o->out_fd > 0 ? o->out_fd : po[1], pe[1], argv);
	ck_assert_int_ge(pid, 0);
	if (po[1] >= 0)
		close(po[1]);
	close(pe[1]);
	memset(r, 0, sizeof *r);
	size_t cout = 0, cerr = 0;
	int oo = po[0] >= 0, eo = 1;
	while (oo || eo) {
		struct pollfd fds[2] = {{oo ? po[0] : -1, POLLIN, 0}, {eo ? pe[0] : -1, POLLIN, 0}};
		if (poll(fds, 2, -1) < 0) {
			ck_assert_int_eq(errno, EINTR);
			continue;
		}
		if (oo && fds[0].revents)
			crun_slurp(po[0], &r->out, &r->nout, &cout, &oo, o->count_only);
		if (eo && fds[1].revents)
			crun_slurp(pe[0], &r->err, &r->nerr, &cerr, &eo, 0);
	}
	if (po[0] >= 0)
		close(po[0]);
	close(pe[0]);
	int st;
	struct rusage ru;
	ck_assert_int_eq(wait4(pid, &st, 0, &ru), pid);
	r->maxrss_kb = ru.ru_maxrss;
	r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	ck_assert_msg(r->status != 127, "cannot run %s (build it, or set POSENC_CLI)", argv[0]);
	ck_assert_msg(r->status != 126, "cannot become nobody");
}

/* crun_argv with the arguments inline, NULL-terminated. */
static inline void crun(struct crun *r, const struct crun_opts *o, ...)
{
	const char *args[128];
	int n = 0;
	va_list ap;
	va_start(ap, o);
	for (const char *a; (a = va_arg(ap, const char *));) {
		ck_assert_int_lt(n, 127);
		args[n++] = a;
	}
	va_end(ap);
	args[n] = NULL;
	crun_argv(r, o, args);
}

static inline void crun_expect_ok(const struct crun *r)
{
	ck_assert_msg(r->status == 0, "status %d, stderr: %s", r->status, r->err ? r->err : "");
	ck_assert_uint_eq(r->nerr, 0);
}

/* Status 1 and one stderr line that contains both `path` and `cause`. */
static inline void crun_expect_io_error(const struct crun *r, const char *path, const char *cause)
{
	ck_assert_msg(r->status == 1, "status %d, expected 1; stderr: %s", r->status, r->err ? r->err : "");
	ck_assert_msg(r->nerr > 9 && !strncmp(r->err, "posenc: ", 8), "stderr: %s", r->err ? r->err : "");
	ck_assert_msg(strchr(r->err, '\n') == r->err + r->nerr - 1, "not one line: %s", r->err);
	if (path)
		ck_assert_msg(strstr(r->err, path) != NULL, "'%s' does not name %s", r->err, path);
	ck_assert_msg(strstr(r->err, cause) != NULL, "'%s' does not say '%s'", r->err, cause);
}

/* ---- scratch directories for -o ---- */

struct crun_dir {
	char path[64];
};

/* A new directory /tmp/<prefix>-XXXXXX. */
static inline void crun_dir_make(struct crun_dir *d, const char *prefix)
{
	snprintf(d->path, sizeof d->path, "/tmp/%s-XXXXXX", prefix);
	ck_assert_ptr_nonnull(mkdtemp(d->path));
}

/* The directory holds exactly these names (NULL-terminated): nothing else, no temporary file. */
static inline void crun_expect_entries(const char *dirpath, const char *const *names)
{
	size_t want = 0, got = 0;
	while (names[want])
		want++;
	DIR *dir = opendir(dirpath);
	ck_assert_ptr_nonnull(dir);
	for (struct dirent *e; (e = readdir(dir));) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		int known = 0;
		for (size_t i = 0; i < want; i++)
			known |= !strcmp(names[i], e->d_name);
		ck_assert_msg(known, "unexpected file %s in %s", e->d_name, dirpath);
		got++;
	}
	closedir(dir);
	ck_assert_uint_eq(got, want);
}

/* Remove path and everything below it (best effort: cleanup, not a check). */
static inline void crun_remove_tree(const char *path)
{
	DIR *dir = opendir(path);
	char p[512];
	for (struct dirent *e; dir && (e = readdir(dir));) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		struct stat st;
		if (snprintf(p, sizeof p, "%s/%s", path, e->d_name) >= (int)sizeof p)
			continue;
		if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
			crun_remove_tree(p);
		else
			unlink(p);
	}
	if (dir)
		closedir(dir);
	rmdir(path);
}

#endif
