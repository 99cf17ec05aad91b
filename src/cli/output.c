/* Writing the output: to stdout, or to -o FILE so that FILE is either the whole new output or
 * left as it was.
 *
 * A file is written to a hidden temporary sibling (".NAME.XXXXXX", same directory, so rename(2)
 * is atomic on the same file system), flushed with fsync, given the mode a plain creat(2) would
 * (0666 & ~umask; mkstemp makes 0600), and renamed over FILE. Any failure unlinks the temporary
 * file. SIGINT, SIGTERM and SIGHUP while it exists unlink it too and then take their
 * default action, so an interrupted run leaves nothing behind either. */
#include "cli/cli.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const int caught[] = {SIGINT, SIGTERM, SIGHUP};
static char tmp_path[4096]; /* the live temporary file, "" when none; read by the handler */
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
	sa.sa_handler = on ? unlink_tmp_cb : SIG_DFL;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof caught / sizeof caught[0]; i++)
		sigaddset(&sa.sa_mask, caught[i]);
	for (size_t i = 0; i < sizeof caught / sizeof caught[0]; i++)
		sigaction(caught[i], &sa, NULL);
}

static int write_all(int fd, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, p, len < ((size_t)1 << 30) ? len : (size_t)1 << 30);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* ".NAME.XXXXXX" beside path; 0, or -1 when it does not fit or path names a directory. */
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

static int write_file(const char *path, const void *data, size_t len, struct pe_err *err)
{
	const char *what = "cannot create a temporary file beside";
	int fd = -1, rc = 0;
	if (tmp_name(path, tmp_path, sizeof tmp_path) != 0)
		return pe_err_set(err, PE_EIO, "o", "'%.200s' is not a file name", path);
	catch_signals(1);
	fd = mkstemp(tmp_path);
	if (fd < 0)
		goto fail;
	tmp_live = 1;
	mode_t mask = umask(0);
	umask(mask);
	what = "cannot write";
	if (fchmod(fd, 0666 & ~mask) != 0 || write_all(fd, data, len) != 0 || fsync(fd) != 0)
		goto fail;
	int cfd = fd;
	fd = -1;
	if (close(cfd) != 0)
		goto fail;
	what = "cannot rename the output onto";
	if (rename(tmp_path, path) != 0)
		goto fail;
	tmp_live = 0;
	goto out;
fail:
	rc = pe_err_set(err, PE_EIO, "o", "%s '%.200s': %s", what, path, strerror(errno));
	if (fd >= 0)
		close(fd);
	if (tmp_live)
		unlink(tmp_path);
	tmp_live = 0;
out:
	catch_signals(0);
	return rc;
}

int cli_output_write(const char *path, const void *data, size_t len, struct pe_err *err)
{
	if (path && strcmp(path, "-") != 0)
		return write_file(path, data, len, err);
	if (write_all(STDOUT_FILENO, data, len) != 0)
		return pe_err_set(err, PE_EIO, "", "cannot write to standard output: %s", strerror(errno));
	return 0;
}
