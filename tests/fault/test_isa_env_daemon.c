/* posencd with POSENC_ISA set (src/core/isa.c's pe_isa_check_env, src/daemon/main.c): a value that
 * names no SIMD tier, an empty one, or a tier this CPU lacks makes the daemon refuse to start:
 * exit status 2, nothing on stdout (no start line, no port bound), and one stderr line naming
 * POSENC_ISA, the value, the accepted values and the tiers this CPU supports. A tier the CPU has
 * (scalar always) starts, says so in its start line and answers. A daemon that wrongly starts is
 * killed after a grace period (it would otherwise run until the watchdog). */
#include "support/pe_fault.h"
#include "support/pe_cpu.h"


struct outcome {
	int status; /* exit status, 128 + signal, or -1: still running after the grace period (killed) */
	char out[4096], err[4096];
};

/* Read what fd has (non-blocking) onto buf. */
static void drain(int fd, char *buf, size_t cap)
{
	size_t n = strlen(buf);
	ssize_t k;
	while (n + 1 < cap && (k = read(fd, buf + n, cap - 1 - n)) > 0)
		n += (size_t)k;
	buf[n] = 0;
}

/* Run posencd --port 0 --bind 127.0.0.1 with POSENC_ISA=isa, on a data_dir of its own (one that
 * wrongly starts never touches ./data); wait up to grace_s for it to exit. */
static void run_daemon(const char *isa, double grace_s, struct outcome *o)
{
	int po[2], pe[2];
	char dir[] = "/tmp/posenc-isa-env-XXXXXX", cmd[64];
	memset(o, 0, sizeof *o);
	check(pipe2(po, O_CLOEXEC | O_NONBLOCK) == 0 && pipe2(pe, O_CLOEXEC | O_NONBLOCK) == 0, "pipes: %s",
	      strerror(errno));
	check(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		setenv("POSENC_ISA", isa, 1);
		dup2(po[1], 1);
		dup2(pe[1], 2);
		execl(daemon_bin(), daemon_bin(), "--port", "0", "--bind", "127.0.0.1", "--data-dir", dir, (char *)NULL);
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	int st = 0;
	pid_t w = 0;
	for (double end = now_s() + grace_s; (w = waitpid(pid, &st, WNOHANG)) == 0 && now_s() < end;)
		sleep_s(0.02);
	if (w == 0) { /* it started: stop it, this is the failure being tested for */
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		o->status = -1;
	} else {
		o->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	}
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	check(system(cmd) == 0, "%s removed", dir);
	drain(po[0], o->out, sizeof o->out);
	drain(pe[0], o->err, sizeof o->err);
	close(po[0]);
	close(pe[0]);
}

/* The refusal: status 2, no stdout, one stderr line "posencd: ..." with POSENC_ISA="<shown>", each
 * of words, and the tiers this CPU supports. */
static void expect_refused(const char *isa, const char *shown, const char *const *words)
{
	struct outcome o;
	run_daemon(isa, 10, &o);
	check(o.status == 2, "POSENC_ISA=\"%s\": exit status %d (2 expected; -1: it started)", shown, o.status);
	check(!o.out[0], "POSENC_ISA=\"%s\": nothing on stdout (no start line): '%.200s'", shown, o.out);
	char *nl = strchr(o.err, '\n');
	check(!strncmp(o.err, "posencd: ", 9) && nl && !nl[1], "POSENC_ISA=\"%s\": one stderr line: '%s'", shown,
	      o.err);
	char quoted[64];
	snprintf(quoted, sizeof quoted, "POSENC_ISA=\"%s\"", shown);
	check(strstr(o.err, quoted) != NULL, "the line names %s", quoted);
	for (; *words; words++)
		check(strstr(o.err, *words) != NULL, "POSENC_ISA=\"%s\": the line says '%s'", shown, *words);
	check(strstr(o.err, "supports scalar") && !strstr(o.err, "supports scalar, avx2") == !pe_cpu_avx2(),
	      "POSENC_ISA=\"%s\": the line lists what this CPU supports", shown);
}

static void bad_values(void)
{
	static const char *const unknown[] = {"avx9", "", "AVX2", "avx512 ", "native"};
	static const char *const words[] = {"scalar, avx2 and avx512", NULL};
	for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++)
		expect_refused(unknown[i], unknown[i], words);
	static const char *const none[] = {NULL};
	expect_refused("avx2\r\nlog", "avx2??log", none); /* never a second line */
	const char *missing = !pe_cpu_avx2() ? "avx2" : !pe_cpu_avx512() ? "avx512" : NULL;
	if (missing) {
		const char *const lacks[] = {"lacks", NULL};
		expect_refused(missing, missing, lacks);
	} else {
		note("this CPU has every tier: no missing tier to refuse");
	}
}

/* A tier the CPU has: starts with it (the start line's "isa"), answers a table, exits 0. */
static void valid_value(const char *isa)
{
	struct pe_spawn d;
	setenv("POSENC_ISA", isa, 1);
	daemon_start(&d, NULL);
	unsetenv("POSENC_ISA");
	char *log = read_file(d.out, NULL), want[64];
	snprintf(want, sizeof want, "\"isa\":\"%s\"", isa);
	check(log && strstr(log, want), "POSENC_ISA=%s: the start line says %s", isa, want);
	free(log);
	struct resp r;
	int rc = http_get(d.port, "/v1/sinusoidal?len=4&dim=8&format=bin", 10000, &r);
	check(rc == 0 && r.status == 200 && r.body_len == 4 * 8 * 4, "POSENC_ISA=%s: a table is answered (status %d)",
	      isa, r.status);
	resp_free(&r);
	check(daemon_stop(&d, SIGTERM, 30) == 0, "POSENC_ISA=%s: exit 0 after SIGTERM", isa);
}

static int scenario(void)
{
	fault_init("isa_env_daemon", 120);
	unsetenv("POSENC_ISA");
	bad_values();
	valid_value("scalar");
	if (pe_cpu_avx2())
		valid_value("avx2");
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
