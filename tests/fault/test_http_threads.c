/* http_threads (src/http/server.c): libmicrohttpd runs that many epoll threads, each serving the
 * connections it accepted, and requests on different threads share one cache.
 *
 *  - the threads exist as configured: one "MHD-single" at 1, N "MHD-worker" at N; by default (0)
 *    one for every two CPUs the daemon may use, at least one (the daemon inherits this process's
 *    affinity: all its CPUs, then one);
 *  - single flight holds across threads: a pooled job is held at POSENC_TEST_JOB_GATE while
 *    connections are opened until both threads hold some, every one asking for the same table;
 *    all are answered 200 with the same bytes and ETag, after exactly one computation
 *    (posenc_jobs_total). Which thread took a connection is seen in the threads' epoll sets
 *    (/proc/PID/fdinfo) once it is accepted and before its request is sent: MHD takes a suspended
 *    connection out of its epoll set. */
#include "support/pe_fault.h"

#include <sched.h>
#include <sys/stat.h>

#define NCONN_MAX 64
#define GATED "offset=4242"
#define PATH "/v1/sinusoidal?len=512&dim=64&" GATED

static char dir[] = "/tmp/posenc-threads-XXXXXX", gate[64];

/* Threads of pid whose name starts with prefix. */
static int threads_named(pid_t pid, const char *prefix)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	int n = 0;
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char comm[96];
		snprintf(comm, sizeof comm, "/proc/%d/task/%.16s/comm", (int)pid, e->d_name);
		size_t len;
		char *s = e->d_name[0] != '.' ? read_file(comm, &len) : NULL;
		n += s && !strncmp(s, prefix, strlen(prefix));
		free(s);
	}
	if (d)
		closedir(d);
	return n;
}

/* How many threads named prefix a daemon started with args has, waiting up to 2 s for want of them:
 * libmicrohttpd names a thread from inside it, once it runs. */
static int threads_after_start(const char *const *args, const char *prefix, int want)
{
	struct pe_spawn d;
	daemon_start(&d, args);
	int n = 0;
	for (int i = 0; i < 200 && (n = threads_named(d.pid, prefix)) < want; i++)
		sleep_s(0.01);
	size_t len;
	char *err = read_file(d.err, &len);
	check(err && !strstr(err, "Warning"), "nothing on stderr from libmicrohttpd about the pool size (%s)",
	      err ? err : "stderr unread");
	free(err);
	check(daemon_stop(&d, SIGTERM, 30) == 0, "exits 0");
	return n;
}

/* The default (0): half the CPUs this process may use, at least one thread. */
static void default_thread_count(void)
{
	cpu_set_t all, one;
	check(sched_getaffinity(0, sizeof all, &all) == 0, "affinity read");
	int cpus = CPU_COUNT(&all), want = cpus / 2 > 1 ? cpus / 2 : 1;
	int n = threads_after_start(NULL, want > 1 ? "MHD-worker" : "MHD-single", want);
	check(n == want, "default on %d CPUs: %d HTTP threads (%d)", cpus, want, n);
	CPU_ZERO(&one);
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &all)) {
			CPU_SET(c, &one);
			break;
		}
	check(sched_setaffinity(0, sizeof one, &one) == 0, "affinity set to one CPU");
	n = threads_after_start(NULL, "MHD-single", 1);
	check(n == 1, "default on one CPU: one MHD-single thread (%d)", n);
	check(sched_setaffinity(0, sizeof all, &all) == 0, "affinity restored");
}

/* Write text to where/name; 0 on success. */
static int put(const char *where, const char *name, const char *text)
{
	char path[256];
	snprintf(path, sizeof path, "%s/%s", where, name);
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	int ok = fputs(text, f) >= 0;
	return fclose(f) == 0 && ok ? 0 : -1;
}

/* A cgroup of this test's own with a CPU quota of 1.5 CPUs (v2's cpu.max or v1's cfs quota), its
 * directory in cg; 0 when made. Root and a writable cgroup file system are needed. */
static int quota_cgroup(char *cg, size_t n, char *procs, size_t pn)
{
	snprintf(cg, n, "/sys/fs/cgroup/posenc-test-%d", (int)getpid()); /* v2, unified at the root */
	if (access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0 && mkdir(cg, 0755) == 0) {
		if (put(cg, "cpu.max", "150000 100000") == 0 || /* else the cpu controller is off below the root */
		    (put("/sys/fs/cgroup", "cgroup.subtree_control", "+cpu") == 0 &&
		     put(cg, "cpu.max", "150000 100000") == 0)) {
			snprintf(procs, pn, "%s/cgroup.procs", cg);
			return 0;
		}
		rmdir(cg);
	}
	snprintf(cg, n, "/sys/fs/cgroup/cpu/posenc-test-%d", (int)getpid()); /* v1's cpu hierarchy */
	if (mkdir(cg, 0755) == 0) {
		if (put(cg, "cpu.cfs_period_us", "100000") == 0 && put(cg, "cpu.cfs_quota_us", "150000") == 0) {
			snprintf(procs, pn, "%s/cgroup.procs", cg);
			return 0;
		}
		rmdir(cg);
	}
	return -1;
}

/* Under a cgroup's CPU quota the daemon reads it (/proc/self/cgroup, then cpu.max or the cfs
 * files) and counts at most that many CPUs: its start line says so. */
static void default_under_a_cgroup_quota(void)
{
	char cg[128], procs[160], script[256];
	if (quota_cgroup(cg, sizeof cg, procs, sizeof procs) != 0) {
		note("no cgroup with a CPU quota could be made here (%s): the quota's reading is not checked", strerror(errno));
		return;
	}
	snprintf(script, sizeof script, "echo $$ > %s && exec \"$@\"", procs);
	const char *wrap[] = {"/bin/sh", "-c", script, "sh", NULL};
	struct pe_spawn_opts opts = {.wrap = wrap};
	struct pe_spawn d;
	char why[4096];
	if (pe_spawn_start(&d, NULL, &opts, why, sizeof why) != 0) {
		check(0, "daemon starts in the cgroup (%s)", why);
	} else {
		size_t len;
		char *out = read_file(d.out, &len);
		check(out && strstr(out, "\"cpu_quota\":2,"), "its start line counts the 1.5-CPU quota as 2 CPUs");
		check(out && strstr(out, "\"http_threads\":1,"), "and so one HTTP thread");
		free(out);
		check(daemon_stop(&d, SIGTERM, 30) == 0, "exits 0");
	}
	for (int i = 0; i < 100 && rmdir(cg) != 0; i++) /* empty once the daemon is reaped */
		sleep_s(0.05);
}

static void single_flight_across_threads(void)
{
	struct pe_spawn d;
	/* job_timeout well past the gate's hold: a connection whose thread is not seen at once costs
	 * connect_to_thread's 5 s, and a dozen of them (24 s) were seen before both threads held one */
	const char *args[] = {"--workers", "1", "--http-threads", "2", "--job-timeout", "300", NULL};
	FILE *f = fopen(gate, "w");
	fputs(GATED, f);
	fclose(f);
	daemon_start(&d, args);
	double jobs = metric(d.port, "posenc_jobs_total");
	int fds[NCONN_MAX];
	const char *req = "GET " PATH " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
	int n = join_on_both_threads(&d, req, fds, NCONN_MAX);
	unlink(gate);
	struct resp first = {0};
	for (int i = 0; i < n; i++) {
		struct resp r;
		check(read_response(fds[i], &r, 30000, 8 << 20) == 0 && r.status == 200, "connection %d: 200 (status %d)",
		      i, r.status);
		char etag[64] = "", etag0[64] = "";
		resp_header(&r, "ETag", etag, sizeof etag);
		if (i == 0)
			first = r;
		else {
			resp_header(&first, "ETag", etag0, sizeof etag0);
			check(r.body_len == first.body_len && r.body && first.body && !memcmp(r.body, first.body, r.body_len) &&
				      !strcmp(etag, etag0) && etag[0],
			      "connection %d: the same bytes and ETag as the first", i);
			resp_free(&r);
		}
		close(fds[i]);
	}
	resp_free(&first);
	check(metric(d.port, "posenc_jobs_total") == jobs + 1, "one computation for %d requests (jobs_total +%g)", n,
	      metric(d.port, "posenc_jobs_total") - jobs);
	check(daemon_stop(&d, SIGTERM, 30) == 0, "exits 0");
}

static int scenario(void)
{
	fault_init("http_threads", 120);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 2;
	}
	snprintf(gate, sizeof gate, "%s/gate", dir);
	pe_spawn_hooks(1); /* only the test build honours the gate */
	setenv("POSENC_TEST_JOB_GATE", gate, 1);
	default_thread_count();
	default_under_a_cgroup_quota();
	int n;
	const char *one[] = {"--http-threads", "1", NULL}, *three[] = {"--http-threads", "3", NULL};
	n = threads_after_start(one, "MHD-single", 1);
	check(n == 1, "--http-threads 1: one MHD-single thread (%d)", n);
	n = threads_after_start(three, "MHD-worker", 3);
	check(n == 3, "--http-threads 3: 3 HTTP threads (%d)", n);
	single_flight_across_threads();
	unsetenv("POSENC_TEST_JOB_GATE");
	pe_spawn_hooks(0);
	unlink(gate);
	rmdir(dir);
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
