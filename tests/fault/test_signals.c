/* Signals other than SIGTERM and SIGINT never stop posencd: SIGHUP, SIGUSR1, SIGUSR2, SIGALRM,
 * SIGVTALRM, SIGIO, SIGPWR (whose default action is to terminate) are logged and ignored, SIGPIPE
 * is ignored. After each one the daemon still answers /healthz and computes a table; it logs an
 * "ignored" line for the logged ones; SIGTERM then drains it to exit status 0. */
#include "fault/fault.h"

static const struct {
	int sig;
	const char *name;
	int logged;
} sigs[] = {
	{SIGHUP, "HUP", 1},   {SIGUSR1, "USR1", 1},	{SIGUSR2, "USR2", 1}, {SIGALRM, "ALRM", 1},
	{SIGVTALRM, "VTALRM", 1}, {SIGIO, "POLL", 1}, {SIGPWR, "PWR", 1},	{SIGPIPE, "PIPE", 0},
};

/* Does the daemon's log show that sig was ignored? Waits up to 2 s for the line. */
static int logged_ignored(const struct pe_spawn *d, const char *name)
{
	char want[64];
	snprintf(want, sizeof want, "\"signal\":\"%s\"", name);
	for (int i = 0; i < 200; i++) {
		char *log = read_file(d->out, NULL);
		int found = log && strstr(log, want) != NULL;
		free(log);
		if (found)
			return 1;
		sleep_s(0.01);
	}
	return 0;
}

int main(void)
{
	fault_init("signals", 60);
	struct pe_spawn d;
	const char *args[] = {"--workers", "1", NULL};
	daemon_start(&d, args);
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
		kill(d.pid, sigs[i].sig);
		if (sigs[i].logged)
			check(logged_ignored(&d, sigs[i].name), "SIG%s is logged as ignored", sigs[i].name);
		else
			sleep_s(0.2);
		struct resp r;
		int rc = http_get(d.port, "/healthz", 5000, &r);
		check(daemon_alive(&d) && rc == 0 && r.status == 200, "after SIG%s the daemon is alive and /healthz is 200",
		      sigs[i].name);
		resp_free(&r);
		char path[96];
		snprintf(path, sizeof path, "/v1/sinusoidal?len=4&dim=8&offset=%zu", 100 + i);
		rc = http_get(d.port, path, 5000, &r);
		check(rc == 0 && r.status == 200, "after SIG%s a table is computed (status %d)", sigs[i].name, r.status);
		resp_free(&r);
	}
	int st = daemon_stop(&d, SIGTERM, 30);
	check(st == 0, "SIGTERM still drains to exit status 0 (status %d)", st);
	return fault_finish();
}
