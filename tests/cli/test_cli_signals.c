/* Signals while `posenc -o FILE` writes its temporary file (src/cli/output.c): every signal whose
 * default action ends the process unlinks the temporary file first, so FILE keeps its old bytes and
 * nothing is left beside it; and a signal the caller ignores (nohup's SIGHUP) stays ignored rather
 * than ending the command. Each run writes a similarity large enough to be still running when this
 * test sees its temporary file grow (no timing: the test waits for the file, then signals). */
#include "posenc/posenc.h"
#include "cli/run.h" /* crun_path */

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The first entry of dir beginning with ".t.bin." and its size; 0 when there is none. */
static int temp_file(const char *dir, off_t *size)
{
	DIR *d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	int found = 0;
	for (struct dirent *e; (e = readdir(d)) && !found;) {
		if (strncmp(e->d_name, ".t.bin.", 7) != 0)
			continue;
		char p[300];
		struct stat st;
		snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
		if (stat(p, &st) == 0) {
			*size = st.st_size;
			found = 1;
		}
	}
	closedir(d);
	return found;
}

static int entries(const char *dir)
{
	DIR *d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	int n = 0;
	for (struct dirent *e; (e = readdir(d));)
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

/* posenc writing a 512 MiB similarity to dir/t.bin, with `ignored` (0: none) ignored as nohup does;
 * returns its pid once its temporary file holds some bytes. */
static pid_t start(const char *dir, int ignored)
{
	char out[300];
	snprintf(out, sizeof out, "%s/t.bin", dir);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct rlimit nocore = {0, 0};
		setrlimit(RLIMIT_CORE, &nocore); /* SIGQUIT, SIGXCPU: no core file */
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		for (int s = 1; s < NSIG; s++)
			if (s != SIGKILL && s != SIGSTOP)
				signal(s, SIG_DFL);
		if (ignored)
			signal(ignored, SIG_IGN);
		execl(crun_path(), "posenc", "analysis/similarity", "--encoding", "rope", "--len", "8192", "--dim", "64",
		      "--dtype", "f64", "--format", "bin", "-o", out, (char *)NULL);
		_exit(127);
	}
	off_t size = 0;
	while (!temp_file(dir, &size) || size == 0) {
		int status;
		ck_assert_msg(waitpid(pid, &status, WNOHANG) == 0, "posenc ended before writing: status %d", status);
		usleep(1000);
	}
	return pid;
}

static void make_dir(char *dir, size_t cap)
{
	snprintf(dir, cap, "/tmp/pe_cli_sig.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char p[300];
	snprintf(p, sizeof p, "%s/t.bin", dir);
	FILE *f = fopen(p, "w");
	ck_assert_ptr_nonnull(f);
	fputs("old", f);
	fclose(f);
}

/* dir/t.bin still holds "old", is alone in dir; then dir is removed. */
static void expect_untouched(const char *dir)
{
	char p[300], buf[8] = {0};
	snprintf(p, sizeof p, "%s/t.bin", dir);
	FILE *f = fopen(p, "r");
	ck_assert_ptr_nonnull(f);
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	ck_assert_msg(n == 3 && !strcmp(buf, "old"), "t.bin was replaced (%zu bytes)", n);
	ck_assert_msg(entries(dir) == 1, "%d entries in %s: a temporary file was left", entries(dir), dir);
	unlink(p);
	rmdir(dir);
}

static const int fatal[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGXCPU};

START_TEST(fatal_signal_leaves_no_temporary_file)
{
	char dir[64];
	int status;
	make_dir(dir, sizeof dir);
	pid_t pid = start(dir, 0);
	ck_assert_int_eq(kill(pid, fatal[_i]), 0);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == fatal[_i], "%s: status %#x",
		      strsignal(fatal[_i]), status);
	expect_untouched(dir);
}
END_TEST

/* nohup: SIGHUP ignored by the caller stays ignored (it ended the command: status 129). The
 * SIGTERM after it then ends the run: SIGHUP, sent first and the lower number, would be delivered
 * first were it caught. */
START_TEST(ignored_signal_stays_ignored)
{
	char dir[64];
	int status;
	make_dir(dir, sizeof dir);
	pid_t pid = start(dir, SIGHUP);
	ck_assert_int_eq(kill(pid, SIGHUP), 0);
	ck_assert_int_eq(kill(pid, SIGTERM), 0);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM, "status %#x: the ignored SIGHUP was acted on",
		      status);
	expect_untouched(dir);
}
END_TEST

static Suite *signals_suite(void)
{
	Suite *s = suite_create("cli_signals");
	TCase *t = tcase_create("signals");
	tcase_set_timeout(t, 120);
	tcase_add_loop_test(t, fatal_signal_leaves_no_temporary_file, 0, (int)(sizeof fatal / sizeof fatal[0]));
	tcase_add_test(t, ignored_signal_stays_ignored);
	suite_add_tcase(s, t);
	return s;
}

PE_TEST_MAIN(signals_suite)
