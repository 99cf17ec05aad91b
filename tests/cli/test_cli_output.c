/* `posenc -o PATH` by what PATH is (src/cli/output.c), each case built in a private temporary
 * directory: a new file (mode from the umask), an existing file (keeps its mode), symlinks with a
 * relative and an absolute target (the link stays, the target is replaced), a dangling symlink,
 * a FIFO with a reader, a Unix socket with a listener, private character devices made with mknod
 * (1,3 behaves as a null device, 1,7 as a full one; skipped with a message without CAP_MKNOD),
 * /dev/fd/N on a pipe, /dev/stdout on an appending file, a closed pipe (EPIPE), a file size limit
 * (EFBIG, the disk-full path of a regular file), a directory without write permission (run as
 * nobody when root), bin and npy on a terminal (a pseudo-terminal). The real /dev/null and other real devices are never touched. After every
 * case the directory holds exactly what it should: no temporary file is left behind. */
#include "posenc/posenc.h"
#include "cli/run.h"

#include <dirent.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/un.h>

#define ARGS "sinusoidal", "--len", "300", "--dim", "24", "--format", "bin"

static const struct crun_opts plain = {0};

/* The bytes the same command writes to stdout. */
static char *expected(size_t *len)
{
	struct crun r;
	crun(&r, &plain, ARGS, NULL);
	crun_expect_ok(&r);
	ck_assert_uint_eq(r.nout, 300 * 24 * 4);
	*len = r.nout;
	char *out = r.out;
	r.out = NULL;
	crun_free(&r);
	return out;
}

static void in_dir(const struct crun_dir *d, const char *name, char *out, size_t cap)
{
	snprintf(out, cap, "%s/%s", d->path, name);
}

/* A fresh private directory d and the path of name inside it. */
static void dir_with(struct crun_dir *d, const char *name, char *path, size_t cap)
{
	crun_dir_make(d, "posenc-out");
	in_dir(d, name, path, cap);
}

/* One case's private directory, the path written there and the table the command must write. */
struct out_case {
	struct crun_dir d;
	char path[128];
	char *want;
	size_t len;
};

static void case_begin(struct out_case *c, const char *name)
{
	c->want = expected(&c->len);
	dir_with(&c->d, name, c->path, sizeof c->path);
}

static void case_end(struct out_case *c)
{
	free(c->want);
	crun_remove_tree(c->d.path);
}

/* dir holds exactly one entry, name: nothing else (no temporary file) was left behind. */
static void expect_only(const char *dir, const char *name)
{
	const char *only[] = {name, NULL};
	crun_expect_entries(dir, only);
}

/* `-o path` fails with one line naming path and the cause err. */
static void expect_write_fails(const struct crun_opts *o, const char *path, int err)
{
	struct crun r;
	crun(&r, o, ARGS, "-o", path, NULL);
	crun_expect_io_error(&r, path, strerror(err));
	crun_free(&r);
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	ck_assert_int_eq(chmod(path, mode), 0);
}

static void expect_file(const char *path, const char *want, size_t len, mode_t mode)
{
	struct stat st;
	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert_msg(S_ISREG(st.st_mode), "%s is not a regular file", path);
	ck_assert_msg((st.st_mode & 07777) == mode, "%s has mode %o, expected %o", path, st.st_mode & 07777, mode);
	size_t n;
	char *got = pe_test_read_file(path, &n);
	ck_assert_msg(n == len && !memcmp(got, want, len), "%s: %zu bytes, not the table's %zu", path, n, len);
	free(got);
}

/* ---- files ---- */

/* -o c->path under umask mask (a file of mode old_mode there first unless it is 0): the table
 * lands there with mode want_mode, nothing else is left in the directory; the file is removed
 * after. */
static void write_with_umask(const struct out_case *c, mode_t mask, mode_t old_mode, mode_t want_mode)
{
	if (old_mode)
		write_file(c->path, "old", old_mode);
	struct crun_opts o = {.set_umask = 1, .umask_ = mask};
	struct crun r;
	crun(&r, &o, ARGS, "-o", c->path, NULL);
	crun_expect_ok(&r);
	ck_assert_uint_eq(r.nout, 0);
	expect_file(c->path, c->want, c->len, want_mode);
	expect_only(c->d.path, "t.bin");
	ck_assert_int_eq(unlink(c->path), 0);
	crun_free(&r);
}

START_TEST(new_file_gets_0666_less_umask)
{
	static const mode_t masks[] = {022, 027, 077, 0};
	struct out_case c;
	case_begin(&c, "t.bin");
	for (size_t i = 0; i < sizeof masks / sizeof masks[0]; i++)
		write_with_umask(&c, masks[i], 0, 0666 & ~masks[i]);
	case_end(&c);
}
END_TEST

START_TEST(existing_file_keeps_its_mode)
{
	static const mode_t modes[] = {0600, 0640, 0604, 0755, 0444};
	struct out_case c;
	case_begin(&c, "t.bin");
	for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
		write_with_umask(&c, 077, modes[i], modes[i]);
	/* as root, a file of another user stays that user's */
	if (geteuid() == 0) {
		write_file(c.path, "old", 0640);
		ck_assert_int_eq(chown(c.path, 65534, 65534), 0);
		struct crun r;
		crun(&r, &plain, ARGS, "-o", c.path, NULL);
		crun_expect_ok(&r);
		struct stat st;
		ck_assert_int_eq(stat(c.path, &st), 0);
		ck_assert_uint_eq(st.st_uid, 65534);
		ck_assert_uint_eq(st.st_gid, 65534);
		expect_file(c.path, c.want, c.len, 0640);
		crun_free(&r);
	}
	case_end(&c);
}
END_TEST

/* --output is -o's long spelling (--output FILE, --output=FILE); given with -o it is a repeat. */
START_TEST(output_long_spelling)
{
	struct out_case c;
	char eq[160];
	case_begin(&c, "t.bin");
	snprintf(eq, sizeof eq, "--output=%s", c.path);
	struct crun_opts o = {.set_umask = 1, .umask_ = 022};
	struct crun r;
	crun(&r, &o, ARGS, "--output", c.path, NULL);
	crun_expect_ok(&r);
	expect_file(c.path, c.want, c.len, 0644);
	crun_free(&r);
	ck_assert_int_eq(unlink(c.path), 0);
	crun(&r, &o, ARGS, eq, NULL);
	crun_expect_ok(&r);
	expect_file(c.path, c.want, c.len, 0644);
	crun_free(&r);
	crun(&r, &o, ARGS, "-o", c.path, "--output", c.path, NULL);
	ck_assert_msg(r.status == 2 && r.err && !strncmp(r.err, "posenc: -o: given more than once", 32), "stderr %s",
		      r.err ? r.err : "");
	crun_free(&r);
	case_end(&c);
}
END_TEST

/* ---- symlinks ---- */

static void expect_link(const char *path, const char *target)
{
	struct stat st;
	char buf[256];
	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert_msg(S_ISLNK(st.st_mode), "%s is no longer a symlink", path);
	ssize_t n = readlink(path, buf, sizeof buf - 1);
	ck_assert_int_gt(n, 0);
	buf[n] = 0;
	ck_assert_str_eq(buf, target);
}

START_TEST(symlink_target_is_replaced)
{
	struct crun_dir d;
	char target[128], rel[128], sub[128], abs_link[160], chain[128];
	size_t len;
	char *want = expected(&len);
	crun_dir_make(&d, "posenc-out");
	in_dir(&d, "target.bin", target, sizeof target);
	in_dir(&d, "rel", rel, sizeof rel);
	in_dir(&d, "sub", sub, sizeof sub);
	in_dir(&d, "chain", chain, sizeof chain);
	snprintf(abs_link, sizeof abs_link, "%s/abs", sub);
	ck_assert_int_eq(mkdir(sub, 0755), 0);
	ck_assert_int_eq(symlink("target.bin", rel), 0);  /* relative: from the link's directory */
	ck_assert_int_eq(symlink(target, abs_link), 0);   /* absolute, from another directory */
	ck_assert_int_eq(symlink("sub/abs", chain), 0);   /* a link to a link */
	const char *links[] = {rel, abs_link, chain};
	for (size_t i = 0; i < 3; i++) {
		write_file(target, "old", 0640);
		struct crun r;
		crun(&r, &plain, ARGS, "-o", links[i], NULL);
		crun_expect_ok(&r);
		expect_file(target, want, len, 0640);
		expect_link(rel, "target.bin");
		expect_link(abs_link, target);
		expect_link(chain, "sub/abs");
		const char *top[] = {"target.bin", "rel", "sub", "chain", NULL}, *in_sub[] = {"abs", NULL};
		crun_expect_entries(d.path, top);
		crun_expect_entries(sub, in_sub);
		crun_free(&r);
	}
	/* a dangling link: its target is created (0666 & ~umask), the link stays */
	ck_assert_int_eq(unlink(target), 0);
	struct crun_opts o = {.set_umask = 1, .umask_ = 022};
	struct crun r;
	crun(&r, &o, ARGS, "-o", rel, NULL);
	crun_expect_ok(&r);
	expect_file(target, want, len, 0644);
	expect_link(rel, "target.bin");
	crun_free(&r);
	free(want);
	crun_remove_tree(d.path);
}
END_TEST

/* ---- FIFOs, sockets, descriptors: written in place ---- */

struct reader {
	int fd;          /* read to EOF (FIFO path opened by the thread when path[0]) */
	char path[128];
	int listen_fd;   /* >= 0: accept one connection and read it */
	char *data;
	size_t len;
};

static void *reader_cb(void *arg)
{
	struct reader *rd = arg;
	int fd = rd->fd;
	if (rd->listen_fd >= 0)
		fd = accept(rd->listen_fd, NULL, NULL);
	else if (rd->path[0])
		fd = open(rd->path, O_RDONLY);
	size_t cap = 1 << 16;
	rd->data = malloc(cap);
	for (ssize_t n; fd >= 0 && rd->data;) {
		if (rd->len == cap)
			rd->data = realloc(rd->data, cap *= 2);
		n = read(fd, rd->data + rd->len, cap - rd->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		rd->len += (size_t)n;
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

/* `-o path` while rd reads on a thread (close_fd >= 0: closed once the command is done, so the
 * reader sees EOF); the command succeeds and rd got exactly the table (want, len). */
static void write_to_reader(struct reader *rd, const struct crun_opts *o, const char *path, int close_fd,
			    const char *want, size_t len)
{
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, reader_cb, rd), 0);
	struct crun r;
	crun(&r, o, ARGS, "-o", path, NULL);
	if (close_fd >= 0)
		close(close_fd);
	pthread_join(t, NULL);
	crun_expect_ok(&r);
	ck_assert_uint_eq(r.nout, 0);
	ck_assert_msg(rd->len == len && !memcmp(rd->data, want, len), "the reader of %s got %zu bytes", path,
		      rd->len);
	crun_free(&r);
	free(rd->data);
}

/* path, the only entry of d, is still a node of type (S_IFIFO, S_IFSOCK): written in place. */
static void expect_still(const struct crun_dir *d, const char *path, mode_t type, const char *name)
{
	struct stat st;
	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert_msg((st.st_mode & S_IFMT) == type, "%s is no longer of type %o", path, type);
	expect_only(d->path, name);
}

START_TEST(fifo_is_written_in_place)
{
	struct out_case c;
	case_begin(&c, "fifo");
	ck_assert_int_eq(mkfifo(c.path, 0600), 0);
	struct reader rd = {.fd = -1, .listen_fd = -1};
	snprintf(rd.path, sizeof rd.path, "%s", c.path);
	write_to_reader(&rd, &plain, c.path, -1, c.want, c.len);
	expect_still(&c.d, c.path, S_IFIFO, "fifo");
	case_end(&c);
}
END_TEST

START_TEST(socket_is_written_in_place)
{
	struct crun_dir d;
	size_t len;
	char *want = expected(&len);
	crun_dir_make(&d, "posenc-out");
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s/sock", d.path);
	int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(ls, 0);
	ck_assert_int_eq(bind(ls, (struct sockaddr *)&sa, sizeof sa), 0);
	ck_assert_int_eq(listen(ls, 1), 0);
	struct reader rd = {.fd = -1, .listen_fd = ls};
	write_to_reader(&rd, &plain, sa.sun_path, -1, want, len);
	close(ls);
	expect_still(&d, sa.sun_path, S_IFSOCK, "sock");
	free(want);
	crun_remove_tree(d.path);
}
END_TEST

START_TEST(dev_fd_n_is_the_descriptor)
{
	size_t len;
	char *want = expected(&len);
	int p[2];
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	int fd = fcntl(p[1], F_DUPFD_CLOEXEC, 10); /* a number the child has no other use for */
	ck_assert_int_ge(fd, 10);
	close(p[1]);
	struct reader rd = {.fd = p[0], .listen_fd = -1};
	char path[32];
	snprintf(path, sizeof path, "/dev/fd/%d", fd);
	struct crun_opts o = {.keep_fd = fd};
	write_to_reader(&rd, &o, path, fd, want, len);
	free(want);
}
END_TEST

/* stdout is a regular file opened for appending: -o /dev/stdout appends to it, as the shell's
 * redirection asked, instead of replacing the file (or writing at offset 0). */
START_TEST(dev_stdout_appends_to_the_callers_file)
{
	struct out_case c;
	case_begin(&c, "log");
	write_file(c.path, "before\n", 0644);
	struct stat before, after;
	ck_assert_int_eq(stat(c.path, &before), 0);
	int fd = open(c.path, O_WRONLY | O_APPEND | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	struct crun_opts o = {.out_fd = fd};
	struct crun r;
	crun(&r, &o, ARGS, "-o", "/dev/stdout", NULL);
	close(fd);
	crun_expect_ok(&r);
	ck_assert_int_eq(stat(c.path, &after), 0);
	ck_assert_msg(after.st_ino == before.st_ino, "the file was replaced");
	size_t n;
	char *got = pe_test_read_file(c.path, &n);
	ck_assert_uint_eq(n, 7 + c.len);
	ck_assert(!memcmp(got, "before\n", 7) && !memcmp(got + 7, c.want, c.len));
	expect_only(c.d.path, "log");
	free(got);
	crun_free(&r);
	case_end(&c);
}
END_TEST

/* ---- character devices of our own (mknod needs CAP_MKNOD: root) ---- */

static int make_device(const char *path, unsigned minor)
{
	if (mknod(path, S_IFCHR | 0666, makedev(1, minor)) == 0)
		return 1;
	ck_assert_msg(errno == EPERM || errno == EACCES, "mknod %s: %s", path, strerror(errno));
	fprintf(stderr, "test_cli_output: skipped: mknod %s: %s (needs root)\n", path, strerror(errno));
	return 0;
}

static void expect_device(const char *path, unsigned minor)
{
	struct stat st;
	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert_msg(S_ISCHR(st.st_mode), "%s is no longer a character device", path);
	ck_assert_uint_eq(major(st.st_rdev), 1);
	ck_assert_uint_eq(minor(st.st_rdev), minor);
}

START_TEST(null_device_is_written_not_replaced)
{
	struct crun_dir d;
	char path[128];
	dir_with(&d, "null", path, sizeof path);
	if (make_device(path, 3)) {
		struct crun r;
		crun(&r, &plain, ARGS, "-o", path, NULL);
		crun_expect_ok(&r);
		ck_assert_uint_eq(r.nout, 0);
		expect_device(path, 3);
		expect_only(d.path, "null");
		crun_free(&r);
		/* also through a symlink to it */
		char link[128];
		in_dir(&d, "to-null", link, sizeof link);
		ck_assert_int_eq(symlink("null", link), 0);
		crun(&r, &plain, ARGS, "-o", link, NULL);
		crun_expect_ok(&r);
		expect_device(path, 3);
		expect_link(link, "null");
		const char *two[] = {"null", "to-null", NULL};
		crun_expect_entries(d.path, two);
		crun_free(&r);
	}
	crun_remove_tree(d.path);
}
END_TEST

START_TEST(full_device_fails_with_enospc)
{
	struct crun_dir d;
	char path[128];
	dir_with(&d, "full", path, sizeof path);
	if (make_device(path, 7)) {
		expect_write_fails(&plain, path, ENOSPC);
		expect_device(path, 7);
		expect_only(d.path, "full");
	}
	crun_remove_tree(d.path);
}
END_TEST

/* ---- failures: one line naming the path and the cause, nothing left behind ---- */

START_TEST(closed_pipe_is_epipe)
{
	int p[2];
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	close(p[0]); /* nobody will read */
	struct crun_opts o = {.out_fd = p[1]};
	struct crun r;
	crun(&r, &o, ARGS, NULL);
	crun_expect_io_error(&r, "standard output", strerror(EPIPE));
	crun_free(&r);
	/* the same through /dev/fd/N */
	o.keep_fd = p[1];
	o.out_fd = 0;
	char path[32];
	snprintf(path, sizeof path, "/dev/fd/%d", p[1]);
	expect_write_fails(&o, path, EPIPE);
	close(p[1]);
}
END_TEST

/* A regular file that cannot grow (RLIMIT_FSIZE: EFBIG, as a full disk is ENOSPC on the same
 * path): the old file stays, the temporary file is gone. */
START_TEST(file_that_cannot_grow_is_left_as_it_was)
{
	struct crun_dir d;
	char path[128];
	dir_with(&d, "t.bin", path, sizeof path);
	write_file(path, "old", 0640);
	struct crun_opts o = {.fsize = 4096};
	expect_write_fails(&o, path, EFBIG);
	expect_file(path, "old", 3, 0640);
	expect_only(d.path, "t.bin");
	crun_remove_tree(d.path);
}
END_TEST

START_TEST(unwritable_directory_is_eacces)
{
	struct crun_dir d;
	char sub[128], path[160];
	crun_dir_make(&d, "posenc-out");
	in_dir(&d, "ro", sub, sizeof sub);
	ck_assert_int_eq(mkdir(sub, 0755), 0);
	snprintf(path, sizeof path, "%s/t.bin", sub);
	write_file(path, "old", 0666);
	ck_assert_int_eq(chmod(sub, 0555), 0);
	ck_assert_int_eq(chmod(d.path, 0755), 0); /* nobody may enter the test's directory */
	struct crun_opts o = {.as_nobody = 1};
	expect_write_fails(&o, path, EACCES);
	ck_assert_int_eq(chmod(sub, 0755), 0);
	expect_file(path, "old", 3, 0666);
	expect_only(sub, "t.bin");
	crun_remove_tree(d.path);
}
END_TEST

START_TEST(directory_is_refused)
{
	struct crun_dir d;
	crun_dir_make(&d, "posenc-out");
	expect_write_fails(&plain, d.path, EISDIR);
	const char *none[] = {NULL};
	crun_expect_entries(d.path, none);
	crun_remove_tree(d.path);
}
END_TEST

/* bin and npy are refused on a terminal (a pseudo-terminal of our own), before any byte; text
 * formats go through. */
START_TEST(binary_is_not_written_to_a_terminal)
{
	int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	ck_assert_int_ge(m, 0);
	ck_assert_int_eq(grantpt(m), 0);
	ck_assert_int_eq(unlockpt(m), 0);
	int t = open(ptsname(m), O_RDWR | O_NOCTTY | O_CLOEXEC);
	ck_assert_int_ge(t, 0);
	struct crun_opts o = {.out_fd = t};
	struct crun r;
	const char *fmts[] = {"bin", "npy"};
	for (int i = 0; i < 2; i++) {
		crun(&r, &o, "sinusoidal", "--len", "2", "--dim", "2", "--format", fmts[i], NULL);
		ck_assert_msg(r.status == 2 && r.err && !strncmp(r.err, "posenc: --format: not writing", 29),
			      "status %d, stderr %s", r.status, r.err ? r.err : "");
		crun_free(&r);
	}
	struct pollfd pf = {m, POLLIN, 0};
	ck_assert_int_eq(poll(&pf, 1, 0), 0); /* nothing reached the terminal */
	crun(&r, &o, "sinusoidal", "--len", "2", "--dim", "2", "--format", "csv", NULL);
	crun_expect_ok(&r);
	crun_free(&r);
	char buf[256];
	ck_assert_int_gt(read(m, buf, sizeof buf), 0);
	close(t);
	close(m);
}
END_TEST

static Suite *output_suite(void)
{
	Suite *s = suite_create("cli_output");
	TCase *files = tcase_create("files");
	tcase_add_test(files, new_file_gets_0666_less_umask);
	tcase_add_test(files, existing_file_keeps_its_mode);
	tcase_add_test(files, symlink_target_is_replaced);
	tcase_add_test(files, output_long_spelling);
	suite_add_tcase(s, files);
	TCase *inplace = tcase_create("in_place");
	tcase_add_test(inplace, fifo_is_written_in_place);
	tcase_add_test(inplace, socket_is_written_in_place);
	tcase_add_test(inplace, dev_fd_n_is_the_descriptor);
	tcase_add_test(inplace, dev_stdout_appends_to_the_callers_file);
	tcase_add_test(inplace, null_device_is_written_not_replaced);
	tcase_add_test(inplace, full_device_fails_with_enospc);
	suite_add_tcase(s, inplace);
	TCase *fail = tcase_create("failures");
	tcase_add_test(fail, closed_pipe_is_epipe);
	tcase_add_test(fail, file_that_cannot_grow_is_left_as_it_was);
	tcase_add_test(fail, unwritable_directory_is_eacces);
	tcase_add_test(fail, directory_is_refused);
	tcase_add_test(fail, binary_is_not_written_to_a_terminal);
	suite_add_tcase(s, fail);
	return s;
}

PE_TEST_MAIN(output_suite)
