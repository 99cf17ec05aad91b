/* posencd's second start with glibc's thread cache enlarged (src/daemon/alloc.c): started with no
 * GLIBC_TUNABLES, the running daemon (the same pid the spawner started) has
 * glibc.malloc.tcache_count=PE_ALLOC_TCACHE_COUNT in its environment and answers; started with
 * other tunables, they are kept and the count is added after them; started with a count of its
 * own, the daemon runs with that value and never starts again (no POSENC_ALLOC_TUNED); a marker
 * copied from another daemon's environment changes nothing. Its name stays the binary's. A daemon
 * built with AddressSanitizer (its own allocator) is left as started. */
#include "support/pe_fault.h"

#include "daemon/alloc.h"

/* The value of name in pid's environment (caller frees), or NULL. glibc parses GLIBC_TUNABLES in
 * place, ending each of its "a=b" items with a NUL where a ':' was: the items after the first
 * read as entries of their own ("glibc.…=…"), and are joined back here with ':'. */
static char *env_of(pid_t pid, const char *name)
{
	char path[64];
	size_t len = 0, n = strlen(name);
	snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
	char *all = read_file(path, &len), *found = NULL;
	for (size_t i = 0; all && i < len; i += strlen(all + i) + 1) {
		if (strncmp(all + i, name, n) || all[i + n] != '=')
			continue;
		found = strdup(all + i + n + 1);
		for (i += strlen(all + i) + 1; found && i < len && !strncmp(all + i, "glibc.", 6); i += strlen(all + i) + 1) {
			char *joined = NULL;
			if (asprintf(&joined, "%s:%s", found, all + i) < 0)
				joined = NULL;
			free(found);
			found = joined;
		}
		break;
	}
	free(all);
	return found;
}

/* Start posencd with GLIBC_TUNABLES=given (NULL: unset); check what it runs with. */
static void start_with(const char *given, const char *want_tunables, int want_again)
{
	struct pe_spawn d;
	if (given)
		setenv("GLIBC_TUNABLES", given, 1);
	else
		unsetenv("GLIBC_TUNABLES");
	daemon_start(&d, NULL);
	unsetenv("GLIBC_TUNABLES");
	const char *shown = given ? given : "(unset)";
	char *tun = env_of(d.pid, "GLIBC_TUNABLES"), *again = env_of(d.pid, "POSENC_ALLOC_TUNED");
	if (daemon_instrumented(&d)) {
		check(!again, "GLIBC_TUNABLES=%s, a sanitizer build: no second start", shown);
	} else {
		check(tun && !strcmp(tun, want_tunables), "GLIBC_TUNABLES=%s: the daemon runs with '%s' (got '%s')",
		      shown, want_tunables, tun ? tun : "(unset)");
		check(!again == !want_again, "GLIBC_TUNABLES=%s: %s", shown,
		      want_again ? "started again (POSENC_ALLOC_TUNED set)" : "not started again");
	}
	/* its name is the binary's (as ps, pgrep and top show it), not "exe", in every thread */
	char path[64], want_name[17];
	snprintf(want_name, sizeof want_name, "%.15s", strrchr(daemon_bin(), '/') ? strrchr(daemon_bin(), '/') + 1 : daemon_bin());
	snprintf(path, sizeof path, "/proc/%d/task/%d/comm", (int)d.pid, (int)d.pid);
	char *comm = read_file(path, NULL);
	if (comm && strchr(comm, '\n'))
		*strchr(comm, '\n') = 0;
	check(comm && !strcmp(comm, want_name), "GLIBC_TUNABLES=%s: the process is named '%s' ('%s')", shown, want_name,
	      comm ? comm : "?");
	free(comm);
	struct resp r;
	int rc = http_get(d.port, "/v1/sinusoidal?len=16&dim=16", 10000, &r);
	check(rc == 0 && r.status == 200, "GLIBC_TUNABLES=%s: a table is answered (status %d)", shown, r.status);
	resp_free(&r);
	check(daemon_stop(&d, SIGTERM, 30) == 0, "GLIBC_TUNABLES=%s: exit 0 after SIGTERM", shown);
	free(tun);
	free(again);
}

/* SIGHUP sent the moment the second start has begun (its environment has POSENC_ALLOC_TUNED):
 * the signal mask blocked before the exec is inherited, so the signal waits for sigwait, and the
 * daemon starts, logs it as ignored and answers. Before, the second start's own start-up (the
 * dynamic linker, glibc's init) ran with the default action: killed in most rounds. */
static void hup_in_second_start(void)
{
	int survived = 0, tried = 0;
	for (int round = 0; round < 5; round++) {
		char dir[] = "/tmp/posenc-alloc-XXXXXX", out[64], env[64];
		if (!mkdtemp(dir)) {
			check(0, "mkdtemp: %s", strerror(errno));
			return;
		}
		snprintf(out, sizeof out, "%s/out", dir);
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0) {
			unsetenv("GLIBC_TUNABLES");
			dup2(fd, 1);
			dup2(fd, 2);
			execl(daemon_bin(), daemon_bin(), "--port", "0", "--bind", "127.0.0.1", "--log-level", "info",
			      "--data-dir", dir, (char *)NULL);
			_exit(127);
		}
		close(fd);
		snprintf(env, sizeof env, "/proc/%d/environ", (int)pid);
		int seen = 0;
		for (double end = now_s() + 5; !seen && now_s() < end;) {
			size_t len = 0;
			char *e = read_file(env, &len);
			for (size_t i = 0; e && i < len && !seen; i += strlen(e + i) + 1)
				seen = !strncmp(e + i, "POSENC_ALLOC_TUNED=", 19);
			free(e);
		}
		if (seen) {
			kill(pid, SIGHUP);
			tried++;
		}
		struct pe_spawn d = {.pid = pid};
		char *log = NULL;
		for (double end = now_s() + 20; now_s() < end; sleep_s(0.02)) {
			free(log);
			log = read_file(out, NULL);
			if ((log && strstr(log, "\"event\":\"start\"") && (!seen || strstr(log, "\"signal\":\"HUP\""))) ||
			    !daemon_alive(&d))
				break;
		}
		int alive = daemon_alive(&d);
		survived += seen && alive && log && strstr(log, "\"signal\":\"HUP\"");
		free(log);
		kill(pid, alive ? SIGTERM : SIGKILL);
		waitpid(pid, NULL, 0);
		unlink(out);
		char cmd[96];
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			note("could not remove %s", dir);
		if (!seen) {
			note("no second start seen (a sanitizer build starts once): nothing to send a SIGHUP into");
			return;
		}
	}
	check(survived == tried, "SIGHUP at the second start's beginning: %d of %d daemons started and logged it as "
	      "ignored", survived, tried);
}

/* A copy of a running daemon's environment (a supervisor restarting it with what it read from
 * /proc/PID/environ) carries another pid's marker: it neither names the new daemon nor keeps it
 * from starting again with the tuning. */
static void stale_marker(void)
{
	struct pe_spawn d;
	unsetenv("GLIBC_TUNABLES");
	setenv("POSENC_ALLOC_TUNED", "1:bogus", 1);
	daemon_start(&d, NULL);
	unsetenv("POSENC_ALLOC_TUNED");
	char path[64], want[64];
	snprintf(path, sizeof path, "/proc/%d/comm", (int)d.pid);
	char *comm = read_file(path, NULL), *tun = env_of(d.pid, "GLIBC_TUNABLES"),
	     *again = env_of(d.pid, "POSENC_ALLOC_TUNED");
	if (comm && strchr(comm, '\n'))
		*strchr(comm, '\n') = 0;
	check(comm && strcmp(comm, "bogus"), "a stale POSENC_ALLOC_TUNED does not name the daemon ('%s')", comm ? comm : "?");
	if (daemon_instrumented(&d)) {
		note("a sanitizer build: no second start to check");
	} else {
		snprintf(want, sizeof want, "glibc.malloc.tcache_count=%d", PE_ALLOC_TCACHE_COUNT);
		check(tun && !strcmp(tun, want), "with a stale marker it still starts again with '%s' (got '%s')", want,
		      tun ? tun : "(unset)");
		snprintf(want, sizeof want, "%d:", (int)d.pid);
		check(again && !strncmp(again, want, strlen(want)), "its own marker names its pid ('%s')", again ? again : "?");
	}
	free(comm);
	free(tun);
	free(again);
	check(daemon_stop(&d, SIGTERM, 30) == 0, "stale marker: exit 0 after SIGTERM");
}

#if defined(__x86_64__)
#define DYNAMIC_LINKER "/lib64/ld-linux-x86-64.so.2"
#elif defined(__aarch64__)
#define DYNAMIC_LINKER "/lib/ld-linux-aarch64.so.1"
#else
#define DYNAMIC_LINKER ""
#endif

/* Run through the dynamic linker (/proc/self/exe is then ld.so) or under valgrind (whose tool is
 * what runs), posencd does not start again (that exec would start ld.so or valgrind, not posencd:
 * an unknown option, or valgrind refusing) and runs as started. */
static void other_runners(void)
{
	if (strstr(daemon_bin(), "asan")) {
		note("a sanitizer build: not run through ld.so or valgrind");
		return;
	}
	if (!*DYNAMIC_LINKER || access(DYNAMIC_LINKER, X_OK) != 0) {
		note("no dynamic linker at %s: not run through it", DYNAMIC_LINKER);
	} else {
		static const char *const wrap[] = {DYNAMIC_LINKER, NULL};
		struct pe_spawn_opts opts = {.wrap = wrap};
		struct pe_spawn d;
		char why[512] = "";
		if (pe_spawn_start(&d, NULL, &opts, why, sizeof why) != 0) {
			check(0, "through %s posencd starts: %s", DYNAMIC_LINKER, why);
		} else {
			char *again = env_of(d.pid, "POSENC_ALLOC_TUNED");
			check(!again, "through %s posencd is not started again", DYNAMIC_LINKER);
			free(again);
			struct resp r;
			int rc = http_get(d.port, "/v1/sinusoidal?len=16&dim=16", 10000, &r);
			check(rc == 0 && r.status == 200, "through %s a table is answered (status %d)", DYNAMIC_LINKER,
			      r.status);
			resp_free(&r);
			check(daemon_stop(&d, SIGTERM, 30) == 0, "through %s: exit 0 after SIGTERM", DYNAMIC_LINKER);
		}
	}
	if (system("command -v valgrind > /dev/null 2>&1") != 0) {
		note("no valgrind here: not run under it");
		return;
	}
	char cmd[512], out[256] = "";
	snprintf(cmd, sizeof cmd, "valgrind -q '%s' --version 2>&1", daemon_bin());
	FILE *p = popen(cmd, "r");
	size_t n = p ? fread(out, 1, sizeof out - 1, p) : 0;
	out[n] = 0;
	int st = p ? pclose(p) : -1;
	check(st == 0 && strstr(out, "posencd "), "under valgrind, posencd --version runs (status %d: %.120s)", st, out);
}

static int scenario(void)
{
	fault_init("alloc_start", 120);
	char want[128];
	unsetenv("POSENC_ALLOC_TUNED");
	snprintf(want, sizeof want, "glibc.malloc.tcache_count=%d", PE_ALLOC_TCACHE_COUNT);
	start_with(NULL, want, 1);
	snprintf(want, sizeof want, "glibc.malloc.mxfast=64:glibc.malloc.tcache_count=%d", PE_ALLOC_TCACHE_COUNT);
	start_with("glibc.malloc.mxfast=64", want, 1);
	start_with("glibc.malloc.tcache_count=7", "glibc.malloc.tcache_count=7", 0);
	hup_in_second_start();
	stale_marker();
	other_runners();
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
