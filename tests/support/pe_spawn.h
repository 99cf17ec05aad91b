/* The one way tests start posencd: on port 0, reading the bound port back from its JSON start line
 * (libmicrohttpd's testcurl does the same), with its stdout (the JSON log) and stderr in files under
 * $TMPDIR (default /tmp). Used by the end-to-end tests (support/pe_daemon.h wraps it in check
 * assertions) and the fault tests (tests/support/pe_fault.h). No libcheck here: every function reports
 * failure to its caller.
 *
 * Each daemon gets a data_dir of its own, a new directory under $TMPDIR, unless the test passes
 * --data-dir itself: no test reads or writes the checkout's ./data (the default), and tests run
 * beside a `make run` daemon and beside each other. That directory is removed when the daemon is
 * stopped; a --data-dir the test passed is the test's to remove.
 *
 * Every daemon started is remembered until it is stopped; pe_spawn_cleanup (registered with atexit
 * by the first start) kills and reaps those still running and removes their files, and
 * pe_spawn_kill_all is the async-signal-safe part for a signal handler. Both touch only daemons
 * started by the calling process, so a check child that exits cannot kill its parent's daemon. */
#ifndef PE_TEST_SPAWN_H
#define PE_TEST_SPAWN_H

#include <stddef.h>
#include <sys/types.h>

#define PE_SPAWN_MAX 8 /* daemons running at once per test process */

struct pe_spawn {
	pid_t pid;
	int port;
	int slot;
	char out[128], err[128]; /* the daemon's stdout (JSON log lines) and stderr */
	char data_dir[128];      /* the data_dir the spawner made for it; "" when the test passed one */
};

struct pe_spawn_opts {
	const char *const *wrap; /* argv run in front of posencd (e.g. "ip", "netns", "exec", NS), which
				    must exec it in place (same pid); NULL: posencd itself */
	const char *bind;        /* --bind; NULL: 127.0.0.1 */
	double timeout_s;        /* for the start line; 0: 20 s */
};

/* The daemon binary: $POSENC_BIN when set and not empty, else PE_BUILD_DIR/posencd; after
 * pe_spawn_hooks(1), $POSENC_HOOKS_BIN, else PE_BUILD_DIR/posencd-hooks. */
const char *pe_spawn_bin(void);

/* Where a test puts files it writes a lot, a learned store or a PostgreSQL cluster: /dev/shm when
 * it is a tmpfs with 1 GiB free (a table written is fsynced twice, milliseconds apiece on a disk,
 * nothing on tmpfs; a killed daemon's writes stay in memory either way), else $TMPDIR, else /tmp. */
const char *pe_scratch_base(void);

/* on: every daemon this process starts from now on is the test build posencd-hooks, the only one
 * that honours POSENC_TEST_JOB_GATE and POSENC_TEST_WRITE_GATE (src/http/test_hooks.c). While it is
 * off, a start with either variable set fails, so a gate never goes silently unheeded. */
void pe_spawn_hooks(int on);

/* Start posencd --port 0 --bind BIND --log-level info [--data-dir TMP], then extra (NULL-terminated,
 * may be NULL); --data-dir TMP only when extra has no --data-dir.
 * Returns 0 with s->pid and s->port set, or -1 with the reason (and the daemon's stderr, if it
 * exited) in why. opts may be NULL. */
int pe_spawn_start(struct pe_spawn *s, const char *const *extra, const struct pe_spawn_opts *opts, char *why,
		   size_t cap);

/* Send sig and wait up to timeout_s: the exit status, 128 + signal if killed by one, -1 if it did
 * not exit (it is then killed). The daemon's stderr is written to our stderr when the status is
 * not 0 or it holds a sanitizer report. Its log files stay until the slot is reused or cleanup;
 * the data_dir the spawner made is removed here. */
int pe_spawn_stop(struct pe_spawn *s, int sig, double timeout_s);

/* Is it still running (not exited, not a zombie)? */
int pe_spawn_alive(const struct pe_spawn *s);

/* Under ASan, TSan or valgrind (from its memory map, else the binary's path) memory and time
 * behave differently. */
int pe_spawn_instrumented(const struct pe_spawn *s);

/* A whole file, NUL-terminated (caller frees); NULL if it cannot be read. len may be NULL. */
char *pe_spawn_read(const char *path, size_t *len);

/* SIGKILL every daemon this process started (async-signal-safe). */
void pe_spawn_kill_all(void);
/* Kill and reap those still running and remove every log file and spawner-made data_dir. */
void pe_spawn_cleanup(void);
/* Remove the log files and data_dirs in $TMPDIR of test processes that no longer exist: a check
 * test that fails ends with _exit, past pe_spawn_cleanup. The first start of a process sweeps. */
void pe_spawn_sweep(void);

#endif
