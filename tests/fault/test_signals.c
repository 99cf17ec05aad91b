/* No signal ends posencd undrained. Every signal from 1 to SIGRTMAX is sent to one daemon, but
 * for those that stop it (SIGTERM, SIGINT, SIGQUIT: drained, below), the fault signals that must
 * keep crashing loudly (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) and the two nothing can catch
 * (SIGKILL, SIGSTOP). After each one the daemon still answers /healthz and computes a table, and
 * it has logged an "ignored" line naming the signal as kill -l does (HUP, RTMIN+3, RTMAX-2);
 * SIGPIPE is ignored without a line, and so are glibc's internal signals 32 and 33 (which
 * sigaddset refuses). A daemon that dies is reported with its status and replaced, so one run
 * lists every fatal signal. A flood of 20000 of one real-time signal is logged at most once a
 * second, the next line counting the unlogged ones. SIGTERM then drains it to exit status 0, and SIGQUIT drains a
 * second one the same way, logging "draining" with "SIGQUIT". */
#include "support/pe_fault.h"

static int excluded(int sig)
{
	static const int skip[] = {SIGTERM, SIGINT,  SIGQUIT, SIGSEGV, SIGBUS,
				   SIGFPE,  SIGILL, SIGABRT, SIGKILL, SIGSTOP};
	for (size_t i = 0; i < sizeof skip / sizeof skip[0]; i++)
		if (sig == skip[i])
			return 1;
	return 0;
}

/* glibc keeps a few signals below SIGRTMIN for itself; sigaddset refuses them. */
static int glibc_internal(int sig)
{
	sigset_t s;
	sigemptyset(&s);
	return sigaddset(&s, sig) != 0;
}

/* The name the daemon logs: bash's kill -l spelling. */
static void signal_name(int sig, char *buf, size_t cap)
{
	int half = (SIGRTMAX - SIGRTMIN) / 2;
	if (sig < SIGRTMIN)
		snprintf(buf, cap, "%s", sigabbrev_np(sig) ? sigabbrev_np(sig) : "(glibc's)");
	else if (sig == SIGRTMIN)
		snprintf(buf, cap, "RTMIN");
	else if (sig == SIGRTMAX)
		snprintf(buf, cap, "RTMAX");
	else if (sig - SIGRTMIN <= half)
		snprintf(buf, cap, "RTMIN+%d", sig - SIGRTMIN);
	else
		snprintf(buf, cap, "RTMAX-%d", SIGRTMAX - sig);
}

/* Has the daemon exited or stopped? (Not reaped: daemon_stop then reads its status.) */
static int gone(const struct pe_spawn *d)
{
	siginfo_t info = {0};
	return d->pid > 0 && waitid(P_PID, (id_t)d->pid, &info, WEXITED | WSTOPPED | WNOHANG | WNOWAIT) == 0 &&
	       info.si_pid == d->pid;
}

/* Does the daemon's log hold all of the strings (NULL-terminated)? Waits up to 2 s for them, less
 * if the daemon is gone. */
static int logged(const struct pe_spawn *d, ...)
{
	for (int i = 0; i < 200; i++) {
		char *log = read_file(d->out, NULL);
		int found = log != NULL;
		va_list ap;
		va_start(ap, d);
		for (const char *s; found && (s = va_arg(ap, const char *));)
			found = strstr(log, s) != NULL;
		va_end(ap);
		free(log);
		if (found)
			return 1;
		if (gone(d) && i > 0)
			return 0;
		sleep_s(0.01);
	}
	return 0;
}

/* After sig: alive, /healthz 200 and a table computed; a daemon that is gone (killed, stopped) is
 * reported with its status and replaced. */
static void check_serving(struct pe_spawn *d, const char *const *args, int sig, const char *name)
{
	if (gone(d)) {
		int st = daemon_stop(d, SIGKILL, 5);
		check(0, "after SIG%s (%d) the daemon is alive (it ended, status %d: %s)", name, sig, st,
		      st == 137 ? "stopped, then killed here" : "killed by the signal");
		daemon_start(d, args);
		return;
	}
	struct resp r;
	int rc = http_get(d->port, "/healthz", 5000, &r);
	check(rc == 0 && r.status == 200, "after SIG%s (%d) the daemon is alive and /healthz is 200", name, sig);
	resp_free(&r);
	char path[96];
	snprintf(path, sizeof path, "/v1/sinusoidal?len=4&dim=8&offset=%d", 100 + sig);
	rc = http_get(d->port, path, 5000, &r);
	check(rc == 0 && r.status == 200, "after SIG%s a table is computed (status %d)", name, r.status);
	resp_free(&r);
}

/* How many times s is in the daemon's log. */
static int log_count(const struct pe_spawn *d, const char *s)
{
	char *log = read_file(d->out, NULL);
	int n = 0;
	for (const char *p = log; p && (p = strstr(p, s)); p += strlen(s))
		n++;
	free(log);
	return n;
}

/* A flood of one signal: real-time signals queue (up to RLIMIT_SIGPENDING), so each of 20000 is a
 * sigwait of its own. The daemon logs that signal at most once a second, and the next line after
 * a quiet second carries how many came unlogged ("unlogged"); it keeps serving. */
static void flood(struct pe_spawn *d, const char *const *args)
{
	int sig = SIGRTMIN + 1, sent = 0;
	char name[32], want[80];
	signal_name(sig, name, sizeof name);
	snprintf(want, sizeof want, "\"signal\":\"%s\"", name);
	sleep_s(1.1); /* a second past the loop's own line for it */
	int before = log_count(d, want);
	double t0 = now_s();
	for (double end = t0 + 5; sent < 20000 && now_s() < end;) { /* a full queue (RLIMIT_SIGPENDING) drains */
		if (kill(d->pid, sig) == 0)
			sent++;
		else if (errno == EAGAIN)
			sleep_s(0.001);
		else
			break;
	}
	sleep_s(0.5);
	for (int last = -1, now; (now = log_count(d, want)) != last && now_s() - t0 < 10; last = now)
		sleep_s(0.3); /* until the lines stop coming */
	int lines = log_count(d, want) - before;
	double took = now_s() - t0;
	note("%d of 20000 %s sent; %d lines in %.1f s", sent, name, lines, took);
	check(sent > 1000, "the flood was queued (%d signals sent)", sent);
	check(lines >= 1 && lines <= 2 + (int)took, "a flood of %d %s wrote %d lines in %.1f s (one a second at most)", sent,
	      name, lines, took);
	sleep_s(1.1);
	kill(d->pid, sig);
	check(logged(d, "\"unlogged\":", NULL), "the next line says how many came unlogged");
	check_serving(d, args, sig, name);
}

static int scenario(void)
{
	fault_init("signals", 120);
	struct pe_spawn d;
	const char *args[] = {"--workers", "1", NULL};
	daemon_start(&d, args);
	for (int sig = 1; sig <= SIGRTMAX; sig++) {
		if (excluded(sig))
			continue;
		char name[32], want[80];
		signal_name(sig, name, sizeof name);
		kill(d.pid, sig);
		if (sig == SIGPIPE || glibc_internal(sig)) {
			sleep_s(0.2); /* nothing to wait for: give a fatal default time to act */
		} else {
			snprintf(want, sizeof want, "\"signal\":\"%s\",\"action\":\"ignored\"", name);
			check(logged(&d, want, NULL), "SIG%s (%d) is logged as ignored", name, sig);
		}
		check_serving(&d, args, sig, name);
	}
	flood(&d, args);
	int st = daemon_stop(&d, SIGTERM, 30);
	check(st == 0, "SIGTERM still drains to exit status 0 (status %d)", st);

	daemon_start(&d, args);
	st = daemon_stop(&d, SIGQUIT, 30);
	check(st == 0, "SIGQUIT drains to exit status 0 (status %d)", st);
	check(logged(&d, "\"event\":\"draining\"", "\"signal\":\"SIGQUIT\"", "\"event\":\"stop\"", NULL),
	      "SIGQUIT: the log shows draining and stop");
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
