/* Starting and stopping posencd for tests (see pe_spawn.h). */
#include "support/pe_spawn.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/magic.h>

#ifndef PE_BUILD_DIR
#define PE_BUILD_DIR "build"
#endif

/* What cleanup needs, per slot: written before fork and read in signal handlers. */
static volatile pid_t slot_pid[PE_SPAWN_MAX];
static volatile pid_t slot_owner[PE_SPAWN_MAX];
static char slot_files[PE_SPAWN_MAX][2][128];
static char slot_dir[PE_SPAWN_MAX][128]; /* the data_dir made for the slot's daemon, or "" */
static int cleanup_armed;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void nap(double s)
{
	struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static int use_hooks;

void pe_spawn_hooks(int on) { use_hooks = on; }

const char *pe_spawn_bin(void)
{
	const char *env = getenv(use_hooks ? "POSENC_HOOKS_BIN" : "POSENC_BIN");
	return env && *env ? env : use_hooks ? PE_BUILD_DIR "/posencd-hooks" : PE_BUILD_DIR "/posencd";
}

/* A gate variable set for a daemon that ignores it: its name, else NULL. */
static const char *unheeded_gate(void)
{
	static const char *const gates[] = {"POSENC_TEST_JOB_GATE", "POSENC_TEST_WRITE_GATE", "POSENC_TEST_STREAM_GATE"};
	for (size_t i = 0; !use_hooks && i < sizeof gates / sizeof *gates; i++)
		if (getenv(gates[i]))
			return gates[i];
	return NULL;
}

char *pe_spawn_read(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 4096, n = 0, r;
	char *buf = malloc(cap + 1);
	while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
		n += r;
		if (n == cap) {
			char *nb = realloc(buf, 2 * cap + 1);
			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
			cap *= 2;
		}
	}
	fclose(f);
	if (buf)
		buf[n] = 0;
	if (len)
		*len = buf ? n : 0;
	return buf;
}

void pe_spawn_kill_all(void)
{
	pid_t me = getpid();
	for (int i = 0; i < PE_SPAWN_MAX; i++)
		if (slot_pid[i] > 0 && slot_owner[i] == me)
			kill(slot_pid[i], SIGKILL);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	remove(path);
	return 0;
}

/* Remove the data_dir made for slot i, with everything the daemon left in it. */
static void remove_dir(int i)
{
	if (slot_dir[i][0])
		nftw(slot_dir[i], remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	slot_dir[i][0] = 0;
}

void pe_spawn_cleanup(void)
{
	pid_t me = getpid();
	for (int i = 0; i < PE_SPAWN_MAX; i++) {
		if (slot_owner[i] != me)
			continue;
		if (slot_pid[i] > 0) {
			kill(slot_pid[i], SIGKILL);
			waitpid(slot_pid[i], NULL, 0);
			slot_pid[i] = 0;
		}
		for (int k = 0; k < 2; k++)
			if (slot_files[i][k][0]) {
				unlink(slot_files[i][k]);
				slot_files[i][k][0] = 0;
			}
		remove_dir(i);
	}
}

static const char *tmp_dir(void)
{
	const char *tmp = getenv("TMPDIR");
	return tmp && *tmp ? tmp : "/tmp";
}

void pe_spawn_sweep(void)
{
	DIR *d = opendir(tmp_dir());
	struct dirent *e;
	while (d && (e = readdir(d))) {
		int pid = 0, end = 0;
		if (sscanf(e->d_name, "posenc-test-%d-%*u.%n", &pid, &end) != 1 || end == 0 || pid <= 0)
			continue;
		if (kill(pid, 0) == 0 || errno != ESRCH)
			continue; /* its test is still running (or not ours to judge) */
		char path[512];
		snprintf(path, sizeof path, "%s/%s", tmp_dir(), e->d_name);
		nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	}
	if (d)
		closedir(d);
}

/* A free slot of this process, its old files removed; -1 if all are running. */
static int take_slot(void)
{
	pid_t me = getpid();
	for (int i = 0; i < PE_SPAWN_MAX; i++) {
		if (slot_owner[i] == me && slot_pid[i] > 0)
			continue;
		if (slot_owner[i] == me)
			for (int k = 0; k < 2; k++)
				if (slot_files[i][k][0])
					unlink(slot_files[i][k]);
		if (slot_owner[i] == me)
			remove_dir(i);
		slot_pid[i] = 0;
		slot_owner[i] = me;
		slot_dir[i][0] = 0;
		slot_files[i][0][0] = slot_files[i][1][0] = 0;
		return i;
	}
	return -1;
}

static int start_port(const char *log)
{
	const char *p = log ? strstr(log, "\"event\":\"start\"") : NULL;
	const char *q = p ? strstr(p, "\"port\":") : NULL;
	return q ? atoi(q + 7) : 0;
}

/* Does the test give the daemon its own data_dir? */
static int has_data_dir(const char *const *extra)
{
	for (int i = 0; extra && extra[i]; i++)
		if (strcmp(extra[i], "--data-dir") == 0 || strncmp(extra[i], "--data-dir=", 11) == 0)
			return 1;
	return 0;
}

/* In the child: logs to the files the parent opened, default signal state, then exec. */
static void child(int out_fd, int err_fd, const char *const *argv, int use_path)
{
	if (dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0)
		_exit(127);
	signal(SIGPIPE, SIG_DFL);
	alarm(0);
	if (use_path)
		execvp(argv[0], (char *const *)argv);
	else
		execv(argv[0], (char *const *)argv);
	_exit(127);
}

/* The log files are created (and emptied) here, before the fork: a file of the same name left by
 * an earlier process with this pid (pids wrap at 32768) must never be read as this daemon's start
 * line, which once sent a whole test to a dead port. */
static int open_logs(const struct pe_spawn *s, int fds[2], char *why, size_t cap)
{
	fds[0] = open(s->out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	fds[1] = open(s->err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fds[0] >= 0 && fds[1] >= 0)
		return 0;
	snprintf(why, cap, "%s: %s", fds[0] < 0 ? s->out : s->err, strerror(errno));
	if (fds[0] >= 0)
		close(fds[0]);
	if (fds[1] >= 0)
		close(fds[1]);
	return -1;
}

int pe_spawn_start(struct pe_spawn *s, const char *const *extra, const struct pe_spawn_opts *opts, char *why,
		   size_t cap)
{
	static unsigned serial;
	const char *tmp = tmp_dir();
	const char *argv[64];
	int n = 0, slot = take_slot();
	memset(s, 0, sizeof *s);
	if (unheeded_gate()) {
		snprintf(why, cap, "%s is set but only posencd-hooks honours it: call pe_spawn_hooks(1) first",
			 unheeded_gate());
		return -1;
	}
	if (slot < 0) {
		snprintf(why, cap, "more than %d daemons at once", PE_SPAWN_MAX);
		return -1;
	}
	if (!cleanup_armed) {
		pe_spawn_sweep();
		atexit(pe_spawn_cleanup);
		cleanup_armed = 1;
	}
	s->slot = slot;
	serial++;
	snprintf(s->out, sizeof s->out, "%s/posenc-test-%d-%u.out", tmp, (int)getpid(), serial);
	snprintf(s->err, sizeof s->err, "%s/posenc-test-%d-%u.err", tmp, (int)getpid(), serial);
	snprintf(slot_files[slot][0], sizeof slot_files[slot][0], "%s", s->out);
	snprintf(slot_files[slot][1], sizeof slot_files[slot][1], "%s", s->err);
	if (!has_data_dir(extra)) {
		snprintf(s->data_dir, sizeof s->data_dir, "%s/posenc-test-%d-%u.data-XXXXXX", tmp,
			 (int)getpid(), serial);
		if (!mkdtemp(s->data_dir)) {
			snprintf(why, cap, "%s: %s", s->data_dir, strerror(errno));
			return -1;
		}
		snprintf(slot_dir[slot], sizeof slot_dir[slot], "%s", s->data_dir);
	}
	for (int i = 0; opts && opts->wrap && opts->wrap[i] && n < 16; i++)
		argv[n++] = opts->wrap[i];
	const char *base[] = {pe_spawn_bin(), "--port", "0", "--bind", opts && opts->bind ? opts->bind : "127.0.0.1",
			      "--log-level", "info"};
	for (size_t i = 0; i < sizeof base / sizeof *base; i++)
		argv[n++] = base[i];
	if (s->data_dir[0]) {
		argv[n++] = "--data-dir";
		argv[n++] = s->data_dir;
	}
	for (int i = 0; extra && extra[i] && n < 63; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	int logs[2];
	if (open_logs(s, logs, why, cap) != 0) {
		remove_dir(slot);
		return -1;
	}
	fflush(NULL); /* nothing buffered is written twice */
	pid_t pid = fork();
	if (pid == 0)
		child(logs[0], logs[1], argv, opts && opts->wrap);
	int fork_errno = errno;
	close(logs[0]);
	close(logs[1]);
	if (pid < 0) {
		snprintf(why, cap, "fork: %s", strerror(fork_errno));
		remove_dir(slot);
		return -1;
	}
	s->pid = slot_pid[slot] = pid;
	double end = now_s() + (opts && opts->timeout_s > 0 ? opts->timeout_s : 20.0);
	while (!s->port) {
		char *log = pe_spawn_read(s->out, NULL);
		s->port = start_port(log);
		free(log);
		if (s->port)
			break;
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			char *err = pe_spawn_read(s->err, NULL);
			snprintf(why, cap, "%s exited during start-up (status %d): %s", argv[0],
				 WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), err ? err : "");
			free(err);
			s->pid = slot_pid[slot] = 0;
			remove_dir(slot);
			return -1;
		}
		if (now_s() > end) {
			snprintf(why, cap, "%s did not report its port", pe_spawn_bin());
			pe_spawn_stop(s, SIGKILL, 5);
			return -1;
		}
		nap(0.01);
	}
	return 0;
}

/* Show the daemon's stderr (its last 6000 bytes) when it says something went wrong. */
static void show_stderr(const struct pe_spawn *s, int rc)
{
	size_t n = 0;
	char *err = pe_spawn_read(s->err, &n);
	if (err && n && (rc != 0 || strstr(err, "Sanitizer") || strstr(err, "runtime error"))) {
		const char *tail = n > 6000 ? err + n - 6000 : err;
		fprintf(stderr, "posencd (pid %d, exit %d) stderr%s:\n%s\n", (int)s->pid, rc,
			n > 6000 ? " (last 6000 bytes)" : "", tail);
	}
	free(err);
}

int pe_spawn_stop(struct pe_spawn *s, int sig, double timeout_s)
{
	int st = 0, rc = -1;
	if (s->pid <= 0)
		return -1;
	kill(s->pid, sig);
	double end = now_s() + timeout_s;
	while (now_s() < end) {
		if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
			rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
			break;
		}
		nap(0.01);
	}
	if (rc == -1) {
		kill(s->pid, SIGKILL);
		waitpid(s->pid, &st, 0);
	}
	show_stderr(s, rc);
	slot_pid[s->slot] = 0;
	remove_dir(s->slot);
	s->pid = 0;
	return rc;
}

int pe_spawn_alive(const struct pe_spawn *s)
{
	return s->pid > 0 && kill(s->pid, 0) == 0 && waitpid(s->pid, NULL, WNOHANG) == 0;
}

int pe_spawn_instrumented(const struct pe_spawn *s)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/maps", (int)s->pid);
	char *m = pe_spawn_read(path, NULL);
	int yes = m && (strstr(m, "libasan") || strstr(m, "vgpreload") || strstr(m, "valgrind") || strstr(m, "libtsan"));
	free(m);
	if (!yes) { /* a statically linked sanitizer leaves no library in the map: go by the build */
		const char *bin = pe_spawn_bin();
		yes = strstr(bin, "asan") != NULL || strstr(bin, "valgrind") != NULL;
	}
	return yes;
}

const char *pe_scratch_base(void)
{
	struct statfs fs;
	const char *tmp = getenv("TMPDIR");
	if (statfs("/dev/shm", &fs) == 0 && fs.f_type == TMPFS_MAGIC && access("/dev/shm", W_OK | X_OK) == 0 &&
	    (unsigned long long)fs.f_bavail * (unsigned long long)fs.f_bsize >= 1ULL << 30)
		return "/dev/shm";
	return tmp && *tmp ? tmp : "/tmp";
}
