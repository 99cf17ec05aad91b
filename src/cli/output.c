/* Where the output goes: standard output, or -o PATH, chosen by what PATH is.
 *
 *   "-"                       standard output
 *   missing or a regular file a hidden temporary sibling (".NAME.XXXXXX", same directory, so
 *                             rename(2) is atomic), fsync'ed and renamed over PATH at the end: PATH
 *                             is either the whole new output or left as it was. An existing file
 *                             keeps its permission bits (and its owner, where we may set it); a
 *                             new one gets 0666 & ~umask, as creat(2).
 *   a symlink                 followed (relative targets from the link's directory) to the file it
 *                             names, which is replaced as above: the link stays a link
 *   /dev/stdout, /dev/stderr, the descriptor itself, written in place (opening the /proc link would
 *   /dev/fd/N, /proc/self/fd/N start a new file offset, or fail for a socket)
 *   anything else             a character or block device, FIFO (blocks until a reader comes), or
 *                             socket (connected to): opened and written in place, no temporary
 *                             file, no rename. Never replaced: `-o /dev/null` as root must not turn
 *                             the device into a file.
 * Output is written as it is produced (render.c streams), so a failure halfway leaves a partial
 * write on standard output or in place; a replaced file is then left as it was. Every failure is
 * PE_EIO with one line naming PATH and the cause (strerror). A signal that would end the process
 * (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGALRM, SIGXCPU, ...: caught[]) while a temporary file exists
 * unlinks it and then takes its default action; one the caller ignores (nohup) stays ignored. SIGPIPE is the caller's
 * (main.c ignores it, so a closed pipe is an EPIPE error here). */
#include "cli/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_LINKS 40 /* as the kernel's ELOOP limit */

/* The signals whose default action ends the process (those that dump core too: SIGPIPE and SIGXFSZ
 * are ignored by main.c). One that the caller ignores stays ignored (nohup's SIGHUP, a background
 * job's SIGINT and SIGQUIT): only those at their default action are caught, and each gets its old
 * action back afterwards. */
static const int caught[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGXCPU};
#define NCAUGHT (sizeof caught / sizeof caught[0])
static struct sigaction saved[NCAUGHT];
static int installed[NCAUGHT];
static char tmp_path[PATH_MAX + 16]; /* the live temporary file; read by the handler */
static volatile sig_atomic_t tmp_live;

static void unlink_tmp_cb(int sig)
{
	if (tmp_live)
		unlink(tmp_path);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void catch_signals(int on)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = unlink_tmp_cb;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < NCAUGHT; i++)
		sigaddset(&sa.sa_mask, caught[i]);
	for (size_t i = 0; i < NCAUGHT; i++) {
		if (!on) {
			if (installed[i])
				sigaction(caught[i], &saved[i], NULL);
			installed[i] = 0;
		} else if (!installed[i] && sigaction(caught[i], NULL, &saved[i]) == 0 &&
			   saved[i].sa_handler == SIG_DFL && !(saved[i].sa_flags & SA_SIGINFO)) {
			installed[i] = sigaction(caught[i], &sa, NULL) == 0;
		}
	}
}

static int fail(const struct cli_out *o, const char *what, int e, struct pe_err *err)
{
	if (o->kind == CLI_OUT_STDOUT)
		return pe_err_set(err, PE_EIO, "", "cannot write to standard output: %s", strerror(e));
	return pe_err_set(err, PE_EIO, "o", "%s '%.200s': %s", what, o->path, strerror(e));
}

/* N for /dev/stdout, /dev/stderr, /dev/fd/N and /proc/self/fd/N, else -1. */
static int fd_alias(const char *path)
{
	const char *n = NULL;
	if (!strcmp(path, "/dev/stdout"))
		return STDOUT_FILENO;
	if (!strcmp(path, "/dev/stderr"))
		return STDERR_FILENO;
	if (!strncmp(path, "/dev/fd/", 8))
		n = path + 8;
	else if (!strncmp(path, "/proc/self/fd/", 14))
		n = path + 14;
	if (!n || *n < '0' || *n > '9')
		return -1;
	char *end;
	long v = strtol(n, &end, 10);
	return *end || v > INT_MAX ? -1 : (int)v;
}

/* The file a chain of symlinks ends at: into out, with its lstat (errno ENOENT: it does not exist
 * yet). Returns 0, or -1 with errno. *magic is set when a link leads into /proc or /dev/fd, whose
 * links are no paths to replace. */
static int follow(const char *path, char *out, size_t cap, struct stat *st, int *magic)
{
	char link[PATH_MAX];
	if (strlen(path) >= cap)
		return errno = ENAMETOOLONG, -1;
	strcpy(out, path);
	*magic = 0;
	for (int hop = 0; hop <= MAX_LINKS; hop++) {
		if (lstat(out, st) != 0)
			return -1;
		if (!S_ISLNK(st->st_mode))
			return 0;
		ssize_t n = readlink(out, link, sizeof link - 1);
		if (n < 0)
			return -1;
		link[n] = 0;
		if (!strncmp(link, "/proc/", 6) || !strncmp(link, "/dev/fd/", 8)) {
			*magic = 1;
			return 0;
		}
		const char *slash = strrchr(out, '/');
		size_t dir = link[0] == '/' || !slash ? 0 : (size_t)(slash - out) + 1;
		if (dir + (size_t)n >= cap)
			return errno = ENAMETOOLONG, -1;
		memmove(out + dir, link, (size_t)n + 1);
	}
	return errno = ELOOP, -1;
}

/* ".NAME.XXXXXX" beside path; 0, or -1 when it does not fit or path ends in a directory name. */
static int tmp_name(const char *path, char *buf, size_t cap)
{
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	size_t dirlen = (size_t)(base - path);
	if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
		return -1;
	int n = snprintf(buf, cap, "%.*s.%s.XXXXXX", (int)dirlen, path, base);
	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

static int open_replace(struct cli_out *o, const struct stat *st, int exists, struct pe_err *err)
{
	if (tmp_name(o->target, tmp_path, sizeof tmp_path) != 0)
		return pe_err_set(err, PE_EIO, "o", "'%.200s' is not a file name", o->path);
	mode_t mask = umask(0);
	umask(mask);
	o->mode = exists ? st->st_mode & 07777 : 0666 & ~mask;
	catch_signals(1);
	o->fd = mkstemp(tmp_path);
	if (o->fd < 0) {
		int e = errno;
		catch_signals(0);
		return fail(o, "cannot create a temporary file beside", e, err);
	}
	tmp_live = 1;
	o->kind = CLI_OUT_REPLACE;
	if (exists && fchown(o->fd, st->st_uid, st->st_gid) != 0) {
		/* not root: the new file is ours, as a plain rewrite by us would leave it */
	}
	return 0;
}

static int open_socket(struct cli_out *o, const char *path, struct pe_err *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof sa.sun_path)
		return fail(o, "cannot connect to", ENAMETOOLONG, err);
	strcpy(sa.sun_path, path);
	o->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (o->fd >= 0 && connect(o->fd, (struct sockaddr *)&sa, sizeof sa) == 0)
		return 0;
	int e = errno;
	if (o->fd >= 0)
		close(o->fd);
	o->fd = -1;
	return fail(o, "cannot connect to", e, err);
}

/* Devices, FIFOs, sockets and /proc links: the thing itself. */
static int open_in_place(struct cli_out *o, const char *path, const struct stat *st, struct pe_err *err)
{
	o->kind = CLI_OUT_IN_PLACE;
	if (st && S_ISSOCK(st->st_mode))
		return open_socket(o, path, err);
	o->fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
	return o->fd >= 0 ? 0 : fail(o, "cannot open", errno, err);
}

int cli_out_open(struct cli_out *o, const char *path, struct pe_err *err)
{
	memset(o, 0, sizeof *o);
	o->fd = STDOUT_FILENO;
	o->kind = CLI_OUT_STDOUT;
	o->path = path;
	if (!path || !strcmp(path, "-"))
		return 0;
	o->kind = CLI_OUT_FD;
	int fd = fd_alias(path);
	if (fd >= 0) {
		int fl = fcntl(fd, F_GETFL);
		if (fl < 0 || (fl & O_ACCMODE) == O_RDONLY)
			return fail(o, "cannot write to", EBADF, err); /* closed, or open for reading */
		o->fd = fd;
		return 0;
	}
	struct stat st;
	int magic;
	if (follow(path, o->target, sizeof o->target, &st, &magic) != 0) {
		if (errno == ENOENT)
			return open_replace(o, &st, 0, err);
		return fail(o, "cannot write", errno, err);
	}
	if (magic)
		return open_in_place(o, path, NULL, err);
	if (S_ISREG(st.st_mode))
		return open_replace(o, &st, 1, err);
	if (S_ISDIR(st.st_mode))
		return fail(o, "cannot write", EISDIR, err);
	return open_in_place(o, o->target, &st, err);
}

int cli_out_write(struct cli_out *o, const void *data, size_t len, struct pe_err *err)
{
	const char *p = data;
	while (len > 0) {
		ssize_t n = write(o->fd, p, len < ((size_t)1 << 30) ? len : (size_t)1 << 30);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return fail(o, "cannot write", n < 0 ? errno : EIO, err);
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void end_replace(struct cli_out *o)
{
	if (o->fd >= 0)
		close(o->fd);
	o->fd = -1;
	if (tmp_live)
		unlink(tmp_path);
	tmp_live = 0;
	catch_signals(0);
}

int cli_out_commit(struct cli_out *o, struct pe_err *err)
{
	int fd = o->fd;
	switch (o->kind) {
	case CLI_OUT_REPLACE:
		if (fchmod(fd, o->mode) != 0 || fsync(fd) != 0) {
			int e = errno;
			end_replace(o);
			return fail(o, "cannot write", e, err);
		}
		o->fd = -1;
		if (close(fd) != 0 || rename(tmp_path, o->target) != 0) {
			int e = errno;
			end_replace(o);
			return fail(o, "cannot replace", e, err);
		}
		tmp_live = 0;
		catch_signals(0);
		return 0;
	case CLI_OUT_IN_PLACE:
		o->fd = -1;
		return close(fd) == 0 ? 0 : fail(o, "cannot write", errno, err);
	default:
		return 0;
	}
}

void cli_out_abort(struct cli_out *o)
{
	if (o->kind == CLI_OUT_REPLACE)
		end_replace(o);
	else if (o->kind == CLI_OUT_IN_PLACE && o->fd >= 0)
		close(o->fd);
	o->fd = -1;
	o->kind = CLI_OUT_STDOUT;
}
