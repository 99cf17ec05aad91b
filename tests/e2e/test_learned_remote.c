/* End-to-end test of "without a token only loopback clients may write" with a real remote client,
 * kept inside two network namespaces this test makes for itself: "pe-d-<pid>" runs posencd,
 * "pe-c-<pid>" the client (curl, through `ip netns exec`), joined by a veth pair on documentation
 * addresses (192.0.2.1/24 for the daemon, 192.0.2.2/24 for the client) that exist only in there.
 * No packet of this test reaches any other interface. The namespaces (and whatever runs in them)
 * are removed at the end, on a failed assertion (atexit in the test's process) and, should the
 * test process be killed (a timeout), by the case's unchecked teardown in check's own process.
 *
 * Where namespaces cannot be made (not root, no `ip` from iproute2, no curl, or the kernel or a
 * container refuses) the test says so on stderr and skips. */
#include "support/pe_check.h"
#include "support/pe_daemon.h"

#include <fcntl.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "posenc/posenc.h"

#define DAEMON_ADDR "192.0.2.1"
#define CLIENT_ADDR "192.0.2.2"

static char ns_d[32], ns_c[32]; /* set in the unchecked setup, so the runner's teardown knows them */
static char dir[64];            /* data_dir and the files of this test */

/* A shell command, its output (stdout and stderr) read here and shown only if it fails; its exit
 * status (-1: not run). */
__attribute__((format(printf, 1, 2))) static int run(const char *fmt, ...)
{
	char cmd[1024], out[4096];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(cmd, sizeof cmd - 8, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof cmd - 8)
		return -1;
	strcat(cmd, " 2>&1");
	FILE *p = popen(cmd, "r");
	if (!p)
		return -1;
	size_t len = fread(out, 1, sizeof out - 1, p);
	out[len] = 0;
	while (fread(cmd + n, 1, 1, p) == 1) /* drain the rest */
		;
	int st = pclose(p);
	int rc = st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	if (rc != 0 && len)
		fprintf(stderr, "test_learned_remote: %s", out);
	return rc;
}

/* Is prog an executable in $PATH (or the sbin directories, where ip lives)? */
static int have(const char *prog)
{
	char path[4096], file[4200];
	snprintf(path, sizeof path, "%s:/usr/sbin:/sbin", getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
	for (char *save = NULL, *d = strtok_r(path, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		snprintf(file, sizeof file, "%s/%s", d, prog);
		if (access(file, X_OK) == 0)
			return 1;
	}
	return 0;
}

static int ns_exists(const char *ns)
{
	char line[256];
	int found = 0;
	size_t n = strlen(ns);
	FILE *p = popen("ip netns list 2>&1", "r");
	while (p && fgets(line, sizeof line, p))
		found |= !strncmp(line, ns, n) && (line[n] == '\n' || line[n] == ' ' || line[n] == 0);
	if (p)
		pclose(p);
	return found;
}

/* Kill what runs in ns (only what this test started there) and delete it, if it exists. */
static void ns_remove(const char *ns)
{
	char cmd[128], line[32];
	if (!ns_exists(ns))
		return;
	snprintf(cmd, sizeof cmd, "ip netns pids %s 2>&1", ns);
	FILE *p = popen(cmd, "r");
	while (p && fgets(line, sizeof line, p)) {
		pid_t pid = (pid_t)atol(line);
		if (pid > 1) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
		}
	}
	if (p)
		pclose(p);
	run("ip netns delete %s", ns);
}

static void cleanup(void)
{
	if (ns_d[0]) {
		ns_remove(ns_d);
		ns_remove(ns_c);
	}
	if (dir[0] && run("rm -rf '%s'", dir) == 0)
		dir[0] = 0;
}

static void names(void) /* unchecked setup: runs in check's process, before the fork */
{
	snprintf(ns_d, sizeof ns_d, "pe-d-%d", (int)getpid());
	snprintf(ns_c, sizeof ns_c, "pe-c-%d", (int)getpid());
	snprintf(dir, sizeof dir, "/tmp/posenc-remote-XXXXXX");
	if (!mkdtemp(dir))
		dir[0] = 0;
}

/* Why namespaces cannot be used here, or NULL once both exist, wired and up. */
static const char *make_namespaces(void)
{
	if (geteuid() != 0)
		return "not root: network namespaces need CAP_SYS_ADMIN";
	if (!have("ip"))
		return "no `ip` command (Debian package iproute2)";
	if (!have("curl"))
		return "no `curl` command (Debian package curl)";
	atexit(cleanup);
	if (run("ip netns add %s", ns_d) != 0 || run("ip netns add %s", ns_c) != 0)
		return "`ip netns add` failed (a container without CAP_SYS_ADMIN?)";
	if (run("ip -n %s link add vd type veth peer name vc netns %s", ns_d, ns_c) != 0 ||
	    run("ip -n %s addr add " DAEMON_ADDR "/24 dev vd", ns_d) != 0 ||
	    run("ip -n %s addr add " CLIENT_ADDR "/24 dev vc", ns_c) != 0 || run("ip -n %s link set vd up", ns_d) != 0 ||
	    run("ip -n %s link set vc up", ns_c) != 0 || run("ip -n %s link set lo up", ns_d) != 0 ||
	    run("ip -n %s link set lo up", ns_c) != 0)
		return "cannot create the veth pair between the namespaces";
	return NULL;
}

/* posencd in ns_d on every address there (lo and vd), with extra arguments (at most 4), through the
 * tests' one spawner; d->s.port set. */
static void daemon_start(struct pe_daemon *d, const char *const *extra)
{
	const char *wrap[] = {"ip", "netns", "exec", ns_d, NULL}; /* ip execs posencd in place: same pid */
	const char *args[8] = {"--data-dir", dir};
	for (int i = 0, n = 2; extra && extra[i] && n < 7; i++)
		args[n++] = extra[i];
	struct pe_spawn_opts opts = {.wrap = wrap, .bind = "0.0.0.0"};
	pe_daemon_start_opts(d, args, &opts);
}

/* The status of METHOD http://host:port/v1/learned/t sent by curl from inside ns (-1 if curl
 * failed), with the body file when body is set and an extra header when header is. */
static long request_in(const char *ns, const char *host, int port, const char *method, const char *header, int body)
{
	char cmd[1024], auth[160] = "", data[160] = "";
	if (header)
		snprintf(auth, sizeof auth, "-H '%s'", header);
	if (body)
		snprintf(data, sizeof data, "-H 'Content-Type: application/x-npy' --data-binary @%s/t.npy", dir);
	snprintf(cmd, sizeof cmd,
		 "ip netns exec %s curl -sS --noproxy '*' --max-time 20 -o %s/answer.txt -w '%%{http_code}' -X %s %s %s "
		 "http://%s:%d/v1/learned/t 2>>%s/curl.log",
		 ns, dir, method, auth, data, host, port, dir);
	FILE *p = popen(cmd, "r");
	long status = -1;
	if (p) {
		if (fscanf(p, "%ld", &status) != 1)
			status = -1;
		if (pclose(p) != 0)
			status = -1;
	}
	return status;
}

static long remote(int port, const char *method, const char *header, int body)
{
	return request_in(ns_c, DAEMON_ADDR, port, method, header, body);
}

static long local(int port, const char *method, int body) /* from 127.0.0.1 inside the daemon's namespace */
{
	return request_in(ns_d, "127.0.0.1", port, method, NULL, body);
}

static void write_table(void)
{
	float v[4] = {0.5f, -1, 2, 0.25f};
	struct pe_tensor_view t = {.shape = {2, {2, 2}}, .dtype = PE_F32, .data = v};
	struct pe_buf b;
	char path[128];
	pe_buf_init(&b, 1 << 16);
	ck_assert_int_eq(pe_npy_write(&b, &t, NULL), 0);
	snprintf(path, sizeof path, "%s/t.npy", dir);
	FILE *f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(b.data, 1, b.len, f), b.len);
	fclose(f);
	pe_buf_destroy(&b);
}

START_TEST(remote_writes_need_a_token)
{
	ck_assert_msg(dir[0], "cannot create a directory under /tmp");
	const char *why = make_namespaces();
	if (why) {
		fprintf(stderr, "test_learned_remote: SKIPPED, remote writes not tested: %s\n", why);
		cleanup();
		return;
	}
	write_table();
	struct pe_daemon d;
	daemon_start(&d, NULL);
	int port = d.s.port;
	ck_assert_int_eq(remote(port, "PUT", NULL, 1), 403); /* no token configured: remote clients may not write */
	ck_assert_int_eq(local(port, "PUT", 1), 201);        /* loopback may */
	ck_assert_int_eq(remote(port, "GET", NULL, 0), 200); /* reads are open */
	ck_assert_int_eq(remote(port, "DELETE", NULL, 0), 403);
	ck_assert_int_eq(remote(port, "PUT", "Authorization: Bearer x", 1), 403);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);

	const char *with_token[] = {"--auth-token", "tok", NULL};
	daemon_start(&d, with_token);
	port = d.s.port;
	ck_assert_int_eq(remote(port, "PUT", "Authorization: Bearer tok", 1), 200);
	ck_assert_int_eq(remote(port, "DELETE", NULL, 0), 401);
	ck_assert_int_eq(remote(port, "DELETE", "Authorization: Bearer tok", 0), 204);
	ck_assert_int_eq(local(port, "PUT", 1), 401); /* with a token, loopback needs it too */
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
	cleanup();
	ck_assert(!ns_exists(ns_d) && !ns_exists(ns_c)); /* gone, and the veth pair with them */
	ck_assert_str_eq(dir, "");
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("e2e_learned_remote");
	TCase *tc = tcase_create("remote");
	tcase_set_timeout(tc, 120);
	tcase_add_unchecked_fixture(tc, names, cleanup);
	tcase_add_test(tc, remote_writes_need_a_token);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
