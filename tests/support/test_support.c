/* Tests of the shared test support itself: the HTTP assertions (pe_http) accept what they should
 * and refuse each defect, the spawner (pe_spawn) reports why a daemon did not start and kills at
 * exit only the daemons of the process that exits, never reads a stale log as a new daemon's,
 * gives each daemon a data_dir of its own (never ./data) and removes it, starts the test-hooks
 * build for a gate (and refuses a gate otherwise), pe_query_table computes what the core
 * computes for the same parameters, PE_CHECK fails as ck_assert_msg does, and PostgreSQL clusters
 * copied from $PE_PG_TEMPLATE answer queries and are apart from each other. */
#include "support/pe_check.h"
#include "support/pe_http.h"
#include "support/pe_pg.h"
#include "support/pe_spawn.h"
#include "support/pe_table.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROBLEM_CT "application/problem+json"
#define GOOD "{\"type\":\"https://posenc.dev/problems/invalid-parameter\",\"title\":\"t\",\"status\":400," \
	     "\"detail\":\"d\",\"param\":\"len\"}"

static int problem(long status, const char *ct, const char *body, long want, const char *param)
{
	char why[512] = "";
	int ok = pe_http_is_problem(status, ct, body, strlen(body), want, param, why, sizeof why);
	ck_assert_msg(ok || why[0], "refused without a reason");
	return ok;
}

START_TEST(problem_accepts_and_refuses)
{
	ck_assert(problem(400, PROBLEM_CT, GOOD, 400, "len"));
	ck_assert(problem(400, PROBLEM_CT, GOOD, 400, NULL));
	ck_assert(!problem(404, PROBLEM_CT, GOOD, 400, NULL));                /* HTTP status */
	ck_assert(!problem(400, PROBLEM_CT, GOOD, 404, NULL));                /* "status" member */
	ck_assert(!problem(400, "application/json", GOOD, 400, NULL));       /* media type */
	ck_assert(!problem(400, NULL, GOOD, 400, NULL));                      /* no Content-Type */
	ck_assert(!problem(400, PROBLEM_CT, GOOD, 400, "dim"));               /* names another parameter */
	ck_assert(!problem(400, PROBLEM_CT, "not json", 400, NULL));
	ck_assert(!problem(400, PROBLEM_CT, "[400]", 400, NULL));
	ck_assert(!problem(400, PROBLEM_CT, "{\"type\":\"https://posenc.dev/problems/x\",\"status\":400,\"detail\":\"d\"}",
			   400, NULL)); /* no title */
	ck_assert(!problem(400, PROBLEM_CT, "{\"type\":\"https://posenc.dev/problems/x\",\"title\":\"t\",\"status\":400}",
			   400, NULL)); /* no detail */
	ck_assert(!problem(400, PROBLEM_CT, "{\"type\":\"about:blank\",\"title\":\"t\",\"status\":400,\"detail\":\"d\"}", 400,
			   NULL));
	ck_assert(!problem(400, PROBLEM_CT, "{\"type\":\"https://posenc.dev/problems/x\",\"title\":\"t\",\"status\":\"400\","
					    "\"detail\":\"d\"}",
			   400, NULL)); /* status as a string */
}
END_TEST

START_TEST(header_lookup)
{
	const char *head = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-PE-Shape:  4,8\r\n"
			   "content-length: 12\r\n\r\n";
	char buf[16];
	ck_assert_str_eq(pe_http_header(head, "content-type", buf, sizeof buf), "text/plain");
	ck_assert_str_eq(pe_http_header(head, "X-PE-Shape", buf, sizeof buf), "4,8");
	ck_assert_str_eq(pe_http_header(head, "Content-Length", buf, sizeof buf), "12");
	ck_assert_ptr_null(pe_http_header(head, "Content", buf, sizeof buf)); /* a prefix is not a name */
	ck_assert_ptr_null(pe_http_header(head, "ETag", buf, sizeof buf));
	ck_assert_str_eq(pe_http_header(head, "Content-Type", buf, 5), "text"); /* truncated to cap - 1 */
}
END_TEST

START_TEST(metric_samples)
{
	const char *text = "# HELP posenc_jobs_total jobs\nposenc_jobs_total_x 9\nposenc_jobs_total 42\n"
			   "posenc_requests_total{code=\"a b\",x=\"1\"} 7\n";
	double v = 0;
	ck_assert(pe_http_metric(text, "posenc_jobs_total", &v));
	ck_assert(v == 42);
	ck_assert(pe_http_metric(text, "posenc_requests_total", &v));
	ck_assert(v == 7);
	ck_assert(!pe_http_metric(text, "posenc_jobs", &v));
	ck_assert(!pe_http_metric(text, "posenc_missing", &v));
}
END_TEST

START_TEST(query_table_is_the_core_table)
{
	struct pe_params p;
	struct pe_err err;
	struct pe_shape s;
	int of;
	ck_assert_int_eq(pe_query_params(&p, "sinusoidal", "len=5&dim=6&offset=2", &err), 0);
	double want[30];
	ck_assert_int_eq(pe_table_compute(&p, PE_F64, want, &err), 0);
	pe_params_destroy(&p);
	double *got = pe_query_table("sinusoidal", "format=npy&len=5&dim=6&offset=2&dtype=f64", PE_F64, &s);
	ck_assert_int_eq(s.rank, 2);
	ck_assert_uint_eq(pe_shape_count(&s, &of), 30);
	ck_assert(memcmp(got, want, sizeof want) == 0);
	free(got);
	/* pe_query_params skips nothing: dtype is not a table parameter */
	ck_assert_int_eq(pe_query_params(&p, "sinusoidal", "len=5&dim=6&dtype=f64", &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "dtype");
	pe_params_destroy(&p);
}
END_TEST

START_TEST(spawn_says_why)
{
	struct pe_spawn d;
	char why[4096] = "";
	const char *bad[] = {"--workers", "0", NULL};
	ck_assert_int_eq(pe_spawn_start(&d, bad, NULL, why, sizeof why), -1);
	ck_assert_msg(strstr(why, "exited during start-up") != NULL, "%s", why);
	ck_assert_msg(strstr(why, "workers") != NULL, "the daemon's stderr is not in the reason: %s", why);
}
END_TEST

/* A gate variable is refused for the shipped build, which ignores it; after pe_spawn_hooks(1) the
 * test build, which honours it, starts. */
START_TEST(spawn_gates_need_the_hooks_build)
{
	struct pe_spawn d;
	char why[4096] = "", dir[64] = "/tmp/posenc-support-XXXXXX", gate[96], cmd[160];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(gate, sizeof gate, "%s/gate", dir);
	const char *args[] = {"--data-dir", dir, NULL};
	ck_assert_int_eq(unsetenv("POSENC_HOOKS_BIN"), 0);
	ck_assert_int_eq(setenv("POSENC_TEST_WRITE_GATE", gate, 1), 0);
	ck_assert_int_eq(pe_spawn_start(&d, args, NULL, why, sizeof why), -1);
	ck_assert_msg(strstr(why, "POSENC_TEST_WRITE_GATE") && strstr(why, "pe_spawn_hooks"), "%s", why);
	pe_spawn_hooks(1);
	const char *bin = pe_spawn_bin();
	ck_assert_msg(strlen(bin) > 14 && !strcmp(bin + strlen(bin) - 14, "/posencd-hooks"), "%s", bin);
	ck_assert_msg(pe_spawn_start(&d, args, NULL, why, sizeof why) == 0, "%s", why);
	ck_assert_int_eq(pe_spawn_stop(&d, SIGTERM, 20), 0);
	pe_spawn_hooks(0);
	unsetenv("POSENC_TEST_WRITE_GATE");
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* A log of the same name left by an earlier process with this pid (pids wrap) is not read as
 * the new daemon's start line: the spawner empties it before the daemon starts. */
START_TEST(spawn_ignores_a_stale_log)
{
	static const char stale[] = "{\"event\":\"start\",\"port\":1}\n";
	const char *tmp = getenv("TMPDIR");
	char path[512], dir[64] = "/tmp/posenc-support-XXXXXX", why[4096], cmd[160];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	for (unsigned serial = 1; serial <= 64; serial++) { /* whichever serial this process is at */
		snprintf(path, sizeof path, "%s/posenc-test-%d-%u.out", tmp && *tmp ? tmp : "/tmp", (int)getpid(), serial);
		FILE *f = fopen(path, "w");
		ck_assert_ptr_nonnull(f);
		fputs(stale, f);
		fclose(f);
	}
	struct pe_spawn d;
	const char *args[] = {"--data-dir", dir, NULL};
	ck_assert_int_eq(pe_spawn_start(&d, args, NULL, why, sizeof why), 0);
	ck_assert_msg(d.port != 1, "the stale log's port was taken for the daemon's");
	ck_assert_str_eq(d.data_dir, ""); /* the test's --data-dir is used, and left to the test */
	ck_assert_int_eq(pe_spawn_stop(&d, SIGTERM, 20), 0);
	ck_assert_int_eq(access(dir, F_OK), 0);
	for (unsigned serial = 1; serial <= 64; serial++) {
		snprintf(path, sizeof path, "%s/posenc-test-%d-%u.out", tmp && *tmp ? tmp : "/tmp", (int)getpid(), serial);
		unlink(path);
	}
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* A daemon started by the parent survives the exit of a child (forked after it) that started
 * nothing; one started in a child dies when the child exits without stopping it. */
START_TEST(spawn_cleanup_is_per_process)
{
	struct pe_spawn mine;
	char why[4096], dir[2][64], cmd[160];
	int fds[2];
	for (int i = 0; i < 2; i++) { /* one data_dir per daemon */
		snprintf(dir[i], sizeof dir[i], "/tmp/posenc-support-XXXXXX");
		ck_assert_ptr_nonnull(mkdtemp(dir[i]));
	}
	const char *args[2][3] = {{"--data-dir", dir[0], NULL}, {"--data-dir", dir[1], NULL}};
	ck_assert_int_eq(pe_spawn_start(&mine, args[0], NULL, why, sizeof why), 0);
	pid_t idle = fork(); /* a child that starts nothing (a check test after an unchecked fixture) */
	ck_assert_int_ge(idle, 0);
	if (idle == 0)
		exit(0); /* atexit: pe_spawn_cleanup */
	int st;
	ck_assert_int_eq(waitpid(idle, &st, 0), idle);
	/* had the child's exit killed it, it would not exit 0 on SIGTERM */
	ck_assert_int_eq(pe_spawn_stop(&mine, SIGTERM, 20), 0);
	ck_assert_int_eq(pipe(fds), 0);
	pid_t child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		struct pe_spawn d;
		pid_t pid = pe_spawn_start(&d, args[1], NULL, why, sizeof why) == 0 ? d.pid : -1;
		if (pid < 0)
			fprintf(stderr, "child: %s\n", why);
		ssize_t w = write(fds[1], &pid, sizeof pid);
		exit(w == sizeof pid ? 0 : 1); /* atexit: pe_spawn_cleanup */
	}
	pid_t theirs = -1;
	close(fds[1]);
	ck_assert_int_eq(read(fds[0], &theirs, sizeof theirs), (ssize_t)sizeof theirs);
	close(fds[0]);
	ck_assert_int_eq(waitpid(child, &st, 0), child);
	ck_assert_int_eq(WEXITSTATUS(st), 0);
	ck_assert_int_gt(theirs, 0);
	/* the child reaped its daemon before exiting: no such process any more */
	ck_assert_msg(kill(theirs, 0) == -1 && errno == ESRCH, "the child's daemon %d outlived it", (int)theirs);
	snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", dir[0], dir[1]);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* ./data as it is now: exists, inode and modification time (what a daemon on it would change). */
struct dir_state {
	int exists;
	ino_t ino;
	struct timespec mtime;
};

static struct dir_state dir_state(const char *path)
{
	struct stat st;
	struct dir_state d = {0};
	if (stat(path, &st) == 0)
		d = (struct dir_state){1, st.st_ino, st.st_mtim};
	return d;
}

static void assert_same_state(const struct dir_state *a, const struct dir_state *b)
{
	ck_assert_int_eq(a->exists, b->exists);
	ck_assert(a->ino == b->ino);
	ck_assert(a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec);
}

/* A daemon started without --data-dir runs on a new directory of its own, which its store opens
 * (the "store" log line names it), not on ./data; stopping it removes that directory. */
START_TEST(spawn_gives_a_data_dir_of_its_own)
{
	struct dir_state before = dir_state("data");
	struct pe_spawn d;
	char why[4096], want[256], real[PATH_MAX], cwd_data[PATH_MAX];
	ck_assert_msg(pe_spawn_start(&d, NULL, NULL, why, sizeof why) == 0, "%s", why);
	ck_assert_str_ne(d.data_dir, "");
	ck_assert_ptr_nonnull(realpath(d.data_dir, real));
	ck_assert_ptr_nonnull(getcwd(cwd_data, sizeof cwd_data - 8));
	strcat(cwd_data, "/data");
	ck_assert_str_ne(real, cwd_data);
	struct stat st;
	ck_assert_int_eq(stat(d.data_dir, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	snprintf(want, sizeof want, "\"data_dir\":\"%s\"", d.data_dir);
	char *log = NULL;
	for (int i = 0; i < 500 && !(log && strstr(log, want)); i++) { /* the store line precedes start */
		free(log);
		log = pe_spawn_read(d.out, NULL);
	}
	ck_assert_msg(log && strstr(log, want), "the daemon's store is not on %s: %s", d.data_dir, log ? log : "");
	free(log);
	char dir[128];
	snprintf(dir, sizeof dir, "%s", d.data_dir);
	ck_assert_int_eq(pe_spawn_stop(&d, SIGTERM, 20), 0);
	ck_assert_msg(access(dir, F_OK) == -1 && errno == ENOENT, "%s outlived its daemon", dir);
	struct dir_state after = dir_state("data");
	assert_same_state(&before, &after);
}
END_TEST

/* pe_spawn_cleanup (the atexit of every test program) kills a daemon still running and removes
 * the data_dir made for it. */
START_TEST(spawn_cleanup_removes_the_data_dir)
{
	struct pe_spawn d;
	char why[4096], dir[128];
	ck_assert_msg(pe_spawn_start(&d, NULL, NULL, why, sizeof why) == 0, "%s", why);
	snprintf(dir, sizeof dir, "%s", d.data_dir);
	ck_assert_int_eq(access(dir, F_OK), 0);
	pid_t pid = d.pid;
	pe_spawn_cleanup();
	ck_assert_msg(kill(pid, 0) == -1 && errno == ESRCH, "daemon %d outlived the cleanup", (int)pid);
	ck_assert_msg(access(dir, F_OK) == -1 && errno == ENOENT, "%s outlived the cleanup", dir);
}
END_TEST

/* A check test that fails ends with _exit, past the cleanup: the next start sweeps what such a
 * process left in $TMPDIR, and nothing of a process still running. */
START_TEST(spawn_sweeps_what_dead_tests_left)
{
	const char *tmp = getenv("TMPDIR");
	char dead_dir[512], dead_log[512], mine[512], inner[600];
	pid_t gone = fork();
	ck_assert_int_ge(gone, 0);
	if (gone == 0)
		_exit(0);
	ck_assert_int_eq(waitpid(gone, NULL, 0), gone); /* a pid no process has now */
	snprintf(dead_dir, sizeof dead_dir, "%s/posenc-test-%d-1.data-sweep", tmp && *tmp ? tmp : "/tmp", (int)gone);
	snprintf(dead_log, sizeof dead_log, "%s/posenc-test-%d-1.out", tmp && *tmp ? tmp : "/tmp", (int)gone);
	snprintf(mine, sizeof mine, "%s/posenc-test-%d-999.out", tmp && *tmp ? tmp : "/tmp", (int)getpid());
	snprintf(inner, sizeof inner, "%s/left.table", dead_dir);
	ck_assert_int_eq(mkdir(dead_dir, 0700), 0);
	const char *files[] = {inner, dead_log, mine};
	for (int i = 0; i < 3; i++) {
		FILE *f = fopen(files[i], "w");
		ck_assert_ptr_nonnull(f);
		fclose(f);
	}
	pe_spawn_sweep();
	ck_assert_msg(access(dead_dir, F_OK) == -1 && errno == ENOENT, "%s was left", dead_dir);
	ck_assert_msg(access(dead_log, F_OK) == -1 && errno == ENOENT, "%s was left", dead_log);
	ck_assert_msg(access(mine, F_OK) == 0, "%s, of a running process, was removed", mine);
	unlink(mine);
}
END_TEST

/* PE_CHECK fails a test with its message where expr is false, and passes where it holds. */
START_TEST(pe_check_fails_with_its_message)
{
	volatile int zero = 0;
	PE_CHECK(zero == 0, "zero is %d", zero);
	PE_CHECK(zero != 0, "zero is %d", zero);
}
END_TEST

START_TEST(pe_check_fails_as_ck_assert_does)
{
	Suite *s = suite_create("pe_check");
	TCase *tc = tcase_create("pe_check");
	tcase_add_test(tc, pe_check_fails_with_its_message);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_SILENT);
	ck_assert_int_eq(srunner_ntests_failed(sr), 1);
	TestResult **tr = srunner_failures(sr);
	ck_assert_str_eq(tr_msg(tr[0]), "zero is 0");
	ck_assert_int_eq(tr_lno(tr[0]), __LINE__ - 16); /* the failing PE_CHECK's line */
	free(tr);
	srunner_free(sr);
}
END_TEST

/* Two clusters made from one template: the template is made once, each copy starts and answers,
 * a table made in one is not in the other, and destroying them leaves the template. */
START_TEST(pg_clusters_from_a_template)
{
	if (!pe_pg_available())
		return;
	char root[] = "/tmp/pe-pg-template-XXXXXX", why[200], out[64], cmd[128], version[300];
	ck_assert_ptr_nonnull(mkdtemp(root));
	ck_assert_int_eq(chmod(root, 0755), 0);
	char tmpl[sizeof root + 8];
	snprintf(tmpl, sizeof tmpl, "%s/t", root);
	ck_assert_int_eq(setenv("PE_PG_TEMPLATE", tmpl, 1), 0);
	struct pe_pg a, b;
	ck_assert_msg(pe_pg_start(&a, why, sizeof why) == 0, "%s", why);
	snprintf(version, sizeof version, "%s/data/PG_VERSION", tmpl);
	ck_assert_int_eq(access(version, R_OK), 0);
	ck_assert_msg(pe_pg_start(&b, why, sizeof why) == 0, "%s", why);
	ck_assert_int_eq(pe_pg_sql(&a, "CREATE TABLE only_in_a (x int)"), 0);
	ck_assert_int_eq(pe_pg_query(&a, "SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'", out, sizeof out), 0);
	ck_assert_str_eq(out, "1");
	ck_assert_int_eq(pe_pg_query(&b, "SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'", out, sizeof out), 0);
	ck_assert_str_eq(out, "0");
	pe_pg_destroy(&a);
	pe_pg_destroy(&b);
	ck_assert_int_eq(access(version, R_OK), 0);
	unsetenv("PE_PG_TEMPLATE");
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("support");
	TCase *tc = tcase_create("support");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, problem_accepts_and_refuses);
	tcase_add_test(tc, header_lookup);
	tcase_add_test(tc, metric_samples);
	tcase_add_test(tc, query_table_is_the_core_table);
	tcase_add_test(tc, spawn_says_why);
	tcase_add_test(tc, spawn_cleanup_is_per_process);
	tcase_add_test(tc, spawn_ignores_a_stale_log);
	tcase_add_test(tc, spawn_gates_need_the_hooks_build);
	tcase_add_test(tc, spawn_gives_a_data_dir_of_its_own);
	tcase_add_test(tc, spawn_cleanup_removes_the_data_dir);
	tcase_add_test(tc, spawn_sweeps_what_dead_tests_left);
	tcase_add_test(tc, pg_clusters_from_a_template);
	tcase_add_test(tc, pe_check_fails_as_ck_assert_does);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
