/* End-to-end tests of what a slow or strict PostgreSQL makes posencd answer (a private cluster per
 * test, support/pe_pg.h, with roles of its own):
 *   - a lock held by another session: PUT, DELETE and GET answer 503 store-unavailable with
 *     Retry-After and the database's reason (statement timeout), every time, before job_timeout;
 *     the table is unchanged afterwards;
 *   - SELECT revoked: GET answers 500 store-error naming the permission error, never "damaged";
 *     logged once for many requests; /readyz 503 until SELECT is granted again;
 *   - a role with SELECT, INSERT, UPDATE, DELETE on tables made before, without CREATE: starts,
 *     serves reads and writes, /readyz 200;
 *   - a SELECT-only role: reads served, PUT and DELETE 403 naming the privilege, /readyz says so;
 *   - SELECT revoked: a write's 403 names what was refused; two causes alternating are logged once
 *     each; /readyz 503 after a refused read; after a reconnect the same class (500, 403 for
 *     writes, /readyz 503 without Retry-After), never a 503 promising a retry, and the log says why;
 *   - write privileges granted to a read-only role: the next write succeeds, /readyz follows;
 *   - the tables missing and no right to create them: 500 store-error with the reason for items
 *     and the list, /readyz 503 with it, until `posencd --init-store` makes them (twice: the second
 *     finds them; run by the role itself it says the role lacks CREATE) and they are granted;
 *   - a search_path naming no schema: the reason says so, not that the tables do not exist;
 *   - a read-only database (25006): writes 503 with Retry-After naming it, /readyz says so;
 *   - the server stopped: PUT and GET 503 with Retry-After, /readyz 503. */
#include "support/pe_check.h"
#include "support/pe_daemon.h"
#include "support/pe_pg.h"

#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "posenc/posenc.h"

#define GRANTS_RW(role)                                                                                     \
	"GRANT SELECT, INSERT, UPDATE, DELETE ON posenc_learned TO " role "; GRANT SELECT ON posenc_schema_version " \
	"TO " role "; GRANT USAGE ON SEQUENCE posenc_generation TO " role
#define GRANTS_RO(role) "GRANT SELECT ON posenc_learned, posenc_schema_version TO " role

static struct pe_daemon D;
static struct pe_pg PG;
static char dir[64];

static void setup(void)
{
	char why[200];
	snprintf(dir, sizeof dir, "/tmp/posenc-pgerr-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	memset(&D, 0, sizeof D);
	ck_assert_msg(pe_pg_start(&PG, why, sizeof why) == 0, "%s", why);
}

static void teardown(void)
{
	char cmd[128];
	if (D.s.pid > 0)
		pe_daemon_stop(&D, SIGKILL);
	pe_pg_destroy(&PG);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* posencd on url with job_timeout 2 s (the store's deadline is then 1.5 s). */
static void start(const char *url)
{
	const char *args[] = {"--data-dir", dir, "--workers", "2", "--job-timeout", "2", "--store-url", url, NULL};
	pe_daemon_start(&D, args);
}

/* posencd --init-store on url: its exit status. */
static int init_store(const char *url)
{
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "'%s' --init-store --data-dir '%s' --store-url '%s' 2>>'%s/init.out'", pe_daemon_bin(),
		 dir, url, dir);
	int st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static long status_of_put(const char *name, float seed);

/* The tables made by a posencd on the superuser's URL, with a table "t" in them; that posencd
 * stopped. */
static void make_tables(void)
{
	start(PG.url);
	ck_assert_int_eq(status_of_put("t", 1.0f), 201);
	ck_assert_int_eq(pe_daemon_stop(&D, SIGTERM), 0);
	memset(&D, 0, sizeof D);
}

/* The tables made (make_tables), a role with grants, and posencd on that role's URL. */
static void serve_as(const char *role, const char *grants)
{
	char url[256];
	make_tables();
	ck_assert_int_eq(pe_pg_role(&PG, role, grants, url, sizeof url), 0);
	start(url);
}

/* PUT a [4, 8] f32 table of seed; the response in r (caller frees). */
static void put(const char *name, float seed, struct pe_resp *r)
{
	float v[32];
	struct pe_buf b;
	char path[96];
	for (int i = 0; i < 32; i++)
		v[i] = seed + (float)i;
	struct pe_tensor_view t = {.shape = {2, {4, 8}}, .dtype = PE_F32, .data = v};
	pe_buf_init(&b, 1 << 20);
	ck_assert_int_eq(pe_npy_write(&b, &t, NULL), 0);
	const char *hs[] = {"Content-Type: application/x-npy", NULL};
	snprintf(path, sizeof path, "/v1/learned/%s", name);
	pe_request(&D, "PUT", path, hs, b.data, b.len, r);
	pe_buf_destroy(&b);
}

static long status_of_put(const char *name, float seed)
{
	struct pe_resp r;
	put(name, seed, &r);
	long st = r.status;
	pe_resp_free(&r);
	return st;
}

/* GET name as f32 JSON with an extra query (each one a key of its own: never a cache hit). */
static void get(const char *name, const char *extra, struct pe_resp *r)
{
	char path[160];
	snprintf(path, sizeof path, "/v1/learned/%s?format=json&dtype=f32%s", name, extra);
	pe_get(&D, path, r);
}

/* r is a problem of status and type slug, whose detail holds want (and never "damaged"): its
 * detail into detail (may be NULL). With Retry-After when 503. */
static void assert_store_problem(const struct pe_resp *r, long status, const char *slug, const char *want,
				 char *detail, size_t cap)
{
	char type[128], ra[16];
	pe_assert_problem(r, status, NULL);
	json_t *j = pe_resp_json(r);
	const char *d = json_string_value(json_object_get(j, "detail"));
	snprintf(type, sizeof type, "https://posenc.dev/problems/%s", slug);
	ck_assert_str_eq(json_string_value(json_object_get(j, "type")), type);
	ck_assert_msg(d && strstr(d, want), "detail \"%s\" does not say \"%s\"", d ? d : "", want);
	ck_assert_msg(!strstr(d, "damaged") && !strstr(d, "quarantine"), "detail \"%s\"", d);
	if (detail)
		snprintf(detail, cap, "%s", d);
	ck_assert_int_eq(pe_resp_header(r, "Retry-After", ra, sizeof ra) != NULL, status == 503);
	json_decref(j);
}

/* A request and its answer: a status, and for a problem (slug given) its type and a piece of
 * its detail, as assert_store_problem reads them. */
struct exchange {
	const char *method; /* PUT (a table of seed), GET (name as JSON, with query), DELETE */
	const char *name, *query;
	float seed;
	long status;
	const char *slug, *detail;
};

static void expect(const struct exchange *x, size_t n)
{
	char path[96];
	for (size_t i = 0; i < n; i++) {
		struct pe_resp r;
		snprintf(path, sizeof path, "/v1/learned/%s", x[i].name);
		if (!strcmp(x[i].method, "PUT"))
			put(x[i].name, x[i].seed, &r);
		else if (!strcmp(x[i].method, "GET"))
			get(x[i].name, x[i].query, &r);
		else
			pe_request(&D, x[i].method, path, NULL, NULL, 0, &r);
		if (x[i].slug)
			assert_store_problem(&r, x[i].status, x[i].slug, x[i].detail, NULL, 0);
		else
			ck_assert_msg(r.status == x[i].status, "%s %s%s: %ld, want %ld", x[i].method, path, x[i].query,
				      r.status, x[i].status);
		pe_resp_free(&r);
	}
}

/* The exchanges listed, in order: EXPECT({"GET", "t", "", 0, 200, NULL, NULL}, ...). */
#define EXPECT(...)                                                                                \
	do {                                                                                       \
		const struct exchange x_[] = {__VA_ARGS__};                                          \
		expect(x_, sizeof x_ / sizeof x_[0]);                                               \
	} while (0)

static int readyz_retry; /* the last /readyz had Retry-After */

/* GET /readyz: its status; the body's "store" into why (may be NULL). */
static long readyz(char *why, size_t cap)
{
	struct pe_resp r;
	char ra[16];
	pe_get(&D, "/readyz", &r);
	long st = r.status;
	readyz_retry = pe_resp_header(&r, "Retry-After", ra, sizeof ra) != NULL;
	json_t *j = pe_resp_json(&r);
	const char *s = json_string_value(json_object_get(j, "store"));
	if (why)
		snprintf(why, cap, "%s", s ? s : "");
	json_decref(j);
	pe_resp_free(&r);
	return st;
}

/* Poll /readyz until it answers want (at most limit seconds): 1 when it did. */
static int until_ready(long want, double limit, char *why, size_t cap)
{
	for (int i = 0; i < (int)(limit * 10); i++) {
		if (readyz(why, cap) == want)
			return 1;
		usleep(100000);
	}
	return 0;
}

/* Poll /readyz until its reason holds want (at most limit seconds): 1 when it did. */
static int until_why(const char *want, double limit, char *why, size_t cap)
{
	for (int i = 0; i < (int)(limit * 10); i++) {
		readyz(why, cap);
		if (strstr(why, want))
			return 1;
		usleep(100000);
	}
	return 0;
}

/* How many lines of the daemon's log hold event (as "event"). */
static int logged(const char *event)
{
	char key[64];
	int n = 0;
	char *log = pe_daemon_log(&D);
	snprintf(key, sizeof key, "\"%s\"", event);
	for (const char *p = log; (p = strstr(p, key)) != NULL; p++)
		n++;
	free(log);
	return n;
}

/* The JSON body of a GET of name (to compare tables before and after). */
static char *body_of(const char *name)
{
	struct pe_resp r;
	get(name, "", &r);
	ck_assert_int_eq(r.status, 200);
	char *b = strndup(r.body, r.len);
	pe_resp_free(&r);
	return b;
}

/* Hold an ACCESS EXCLUSIVE lock on posenc_learned in another session; returns its psql's pid once
 * the lock is granted. */
static int hold_lock(void)
{
	char n[32] = "";
	int pid = pe_pg_bg(&PG, "BEGIN; LOCK TABLE posenc_learned IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(120)");
	ck_assert_int_gt(pid, 0);
	for (int i = 0; i < 200 && strcmp(n, "1") != 0; i++) {
		usleep(50000);
		pe_pg_query(&PG, "SELECT count(*) FROM pg_locks WHERE relation = 'posenc_learned'::regclass AND mode = "
				 "'AccessExclusiveLock' AND granted", n, sizeof n);
	}
	ck_assert_str_eq(n, "1");
	return pid;
}

START_TEST(lock_held_answers_503_every_time)
{
	struct pe_resp r;
	char first[256], again[256];
	start(PG.url);
	ck_assert_int_eq(status_of_put("t", 1.0f), 201);
	char *before = body_of("t");
	int pid = hold_lock();
	for (int round = 0; round < 2; round++) { /* one deadline decides: the same answer each time */
		put("t", 2.0f, &r);
		assert_store_problem(&r, 503, "store-unavailable", "statement timeout", round ? again : first, 256);
		pe_resp_free(&r);
	}
	ck_assert_str_eq(first, again);
	ck_assert_msg(strstr(first, "SQLSTATE 57014"), "%s", first);
	EXPECT(
	       {"DELETE", "t", "", 0, 503, "store-unavailable", "statement timeout"},
	       /* a key not cached: the read meets the lock */
	       {"GET", "t", "&len=5", 0, 503, "store-unavailable", "statement timeout"});
	pe_pg_bg_end(&PG, pid);
	char *after = body_of("t");
	ck_assert_str_eq(before, after); /* nothing half-done */
	free(before);
	free(after);
	EXPECT({"GET", "t", "&len=6", 0, 200, NULL, NULL});
}
END_TEST

START_TEST(revoked_select_is_500_with_the_reason)
{
	struct pe_resp r;
	/* CREATE too: what an older posencd needed to start at all */
	serve_as("app", GRANTS_RW("app") "; GRANT CREATE ON SCHEMA public TO app");
	ck_assert_int_eq(status_of_put("t", 2.0f), 200);
	ck_assert_int_eq(pe_pg_sql(&PG, "REVOKE SELECT ON posenc_learned FROM app"), 0);
	for (int i = 0; i < 3; i++) {
		char q[32];
		snprintf(q, sizeof q, "&len=%d", 5 + i);
		get("t", q, &r);
		assert_store_problem(&r, 500, "store-error", "permission denied for table posenc_learned", NULL, 0);
		pe_resp_free(&r);
	}
	char *log = pe_daemon_log(&D);
	const char *p = strstr(log, "\"store_error\"");
	ck_assert_msg(p && !strstr(p + 1, "\"store_error\""), "the cause is logged once: %s", log);
	free(log);
	char why[256]; /* not ready while reads are refused; ready again once granted, with no read asked */
	ck_assert_int_eq(readyz(why, sizeof why), 503);
	ck_assert_int_eq(pe_pg_sql(&PG, "GRANT SELECT ON posenc_learned TO app"), 0);
	ck_assert_msg(until_ready(200, 10, why, sizeof why), "still not ready: %s", why);
}
END_TEST

/* A PUT of name with SELECT revoked: 403 naming what was refused (not "may read, not write"). */
static void put_refused(const char *name)
{
	struct pe_resp r;
	char d[256];
	put(name, 3.0f, &r);
	assert_store_problem(&r, 403, "forbidden", "permission denied for table posenc_learned", d, sizeof d);
	ck_assert_msg(!strstr(d, "may read, not write"), "%s", d);
	pe_resp_free(&r);
}

START_TEST(revoked_select_keeps_its_class)
{
	struct pe_resp r;
	char why[256], q[32];
	serve_as("app", GRANTS_RW("app"));
	ck_assert_int_eq(status_of_put("t", 2.0f), 200);
	ck_assert_int_eq(pe_pg_sql(&PG, "REVOKE SELECT ON posenc_learned FROM app"), 0);
	for (int i = 0; i < 10; i++) { /* two causes alternating: each logged once */
		put_refused("a");
		snprintf(q, sizeof q, "&len=%d", 2 + i);
		get("t", q, &r);
		assert_store_problem(&r, 500, "store-error", "permission denied for table posenc_learned", NULL, 0);
		pe_resp_free(&r);
	}
	ck_assert_int_eq(logged("store_error"), 2);
	/* a read failed for the database's configuration: not ready until one succeeds */
	ck_assert_int_eq(readyz(why, sizeof why), 503);
	ck_assert_msg(strstr(why, "permission denied for table posenc_learned") && !readyz_retry, "%s", why);
	ck_assert_int_eq(pe_pg_sql(&PG, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'app'"),
			 0);
	ck_assert_msg(until_why("load the index", 10, why, sizeof why), "/readyz says \"%s\"", why);
	ck_assert_msg(strstr(why, "permission denied for table posenc_learned (SQLSTATE 42501)"), "%s", why);
	ck_assert_int_eq(readyz(why, sizeof why), 503);
	ck_assert_msg(!readyz_retry, "/readyz promises a retry for a revoked privilege");
	put_refused("a"); /* after the reconnect: the same answers as before it */
	EXPECT(
	       {"DELETE", "t", "", 0, 403, "forbidden", "permission denied for table posenc_learned"},
	       {"GET", "t", "&len=20", 0, 500, "store-error", "permission denied for table posenc_learned"});
	char *log = pe_daemon_log(&D); /* the log says why the store stays down */
	const char *down = strstr(log, "\"store_down\"");
	ck_assert_msg(down && strstr(log, "load the index: permission denied"), "%s", log);
	free(log);
	ck_assert_int_eq(pe_pg_sql(&PG, "GRANT SELECT ON posenc_learned TO app"), 0);
	ck_assert_msg(until_ready(200, 20, why, sizeof why), "not ready again: %s", why);
	EXPECT({"GET", "t", "&len=21", 0, 200, NULL, NULL});
}
END_TEST

START_TEST(grant_takes_effect_at_next_write)
{
	char why[256];
	serve_as("reader", GRANTS_RO("reader"));
	EXPECT({"PUT", "u", "", 1.0f, 403, "forbidden", "INSERT on posenc_learned"});
	ck_assert_int_eq(pe_pg_sql(&PG, "GRANT INSERT, UPDATE, DELETE ON posenc_learned TO reader; GRANT USAGE ON "
					"SEQUENCE posenc_generation TO reader"), 0);
	ck_assert_int_eq(status_of_put("u", 1.0f), 201);
	EXPECT({"DELETE", "u", "", 0, 204, NULL, NULL});
	int ready = 0;
	for (int i = 0; i < 50 && !ready; i++) {
		ready = readyz(why, sizeof why) == 200 && !why[0];
		usleep(100000);
	}
	ck_assert_msg(ready, "/readyz still says \"%s\"", why);
}
END_TEST

START_TEST(search_path_naming_no_schema)
{
	char why[256];
	serve_as("app", GRANTS_RW("app") "; ALTER ROLE app SET search_path = ''");
	ck_assert_int_eq(readyz(why, sizeof why), 503);
	ck_assert_msg(strstr(why, "search_path") && !strstr(why, "do not exist"), "/readyz says \"%s\"", why);
	EXPECT({"GET", "t", "", 0, 500, "store-error", "search_path"});
}
END_TEST

START_TEST(read_only_database_is_503)
{
	char why[256];
	serve_as("app", GRANTS_RW("app") "; ALTER ROLE app SET default_transaction_read_only = on");
	char *before = body_of("t");
	EXPECT(
	       {"PUT", "t", "", 5.0f, 503, "store-unavailable", "read-only transaction (SQLSTATE 25006)"},
	       {"DELETE", "t", "", 0, 503, "store-unavailable", "SQLSTATE 25006"});
	ck_assert_int_eq(readyz(why, sizeof why), 200);
	ck_assert_msg(strstr(why, "reads only") && strstr(why, "25006"), "/readyz says \"%s\"", why);
	char *after = body_of("t");
	ck_assert_str_eq(before, after);
	free(before);
	free(after);
}
END_TEST

START_TEST(read_write_role_without_create_serves)
{
	char why[256];
	serve_as("app", GRANTS_RW("app"));
	ck_assert_int_eq(readyz(why, sizeof why), 200);
	ck_assert_str_eq(why, "");
	ck_assert_int_eq(status_of_put("u", 1.0f), 201);
	ck_assert_int_eq(status_of_put("t", 2.0f), 200);
	EXPECT(
	       {"GET", "t", "", 0, 200, NULL, NULL},
	       {"DELETE", "t", "", 0, 204, NULL, NULL});
}
END_TEST

START_TEST(select_only_role_reads)
{
	char why[256];
	serve_as("reader", GRANTS_RO("reader"));
	ck_assert_int_eq(readyz(why, sizeof why), 200);
	ck_assert_msg(strstr(why, "INSERT on posenc_learned"), "/readyz says \"%s\"", why);
	EXPECT(
	       {"GET", "t", "", 0, 200, NULL, NULL},
	       {"PUT", "t", "", 2.0f, 403, "forbidden", "INSERT on posenc_learned"},
	       {"DELETE", "t", "", 0, 403, "forbidden", "DELETE on posenc_learned"});
}
END_TEST

START_TEST(tables_missing_without_create_is_not_ready)
{
	struct pe_resp r;
	char url[256], why[256];
	ck_assert_int_eq(pe_pg_role(&PG, "app", NULL, url, sizeof url), 0);
	start(url);
	ck_assert_int_eq(readyz(why, sizeof why), 503);
	ck_assert_msg(strstr(why, "cannot be created") && strstr(why, "permission denied for schema public"),
		      "/readyz says \"%s\"", why);
	ck_assert_msg(!readyz_retry, "/readyz promises a retry for a missing table");
	EXPECT(
	       /* the same reason, for a write, a read and the list: not a retry */
	       {"PUT", "t", "", 1.0f, 500, "store-error", "permission denied for schema public"});
	get("t", "", &r);
	char d[256];
	assert_store_problem(&r, 500, "store-error", "permission denied for schema public", d, sizeof d);
	ck_assert_msg(strstr(d, "run posencd --init-store as a role with CREATE on the schema"), "cut: %s", d);
	pe_resp_free(&r);
	pe_get(&D, "/v1/learned", &r); /* never read: not an empty list */
	assert_store_problem(&r, 500, "store-error", "permission denied for schema public", NULL, 0);
	pe_resp_free(&r);
	ck_assert_int_ne(init_store(url), 0); /* the role itself: told what it lacks */
	char path[128], out[1024] = "";
	snprintf(path, sizeof path, "%s/init.out", dir);
	FILE *f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	out[fread(out, 1, sizeof out - 1, f)] = 0;
	fclose(f);
	ck_assert_msg(strstr(out, "lacks CREATE on the schema") && !strstr(out, "run posencd --init-store"), "%s", out);
	ck_assert_int_eq(init_store(PG.url), 0); /* the operator makes them and grants: ready on its own */
	ck_assert_int_eq(init_store(PG.url), 0); /* again: finds them, changes nothing */
	ck_assert_int_eq(pe_pg_sql(&PG, GRANTS_RW("app")), 0);
	ck_assert_msg(until_ready(200, 20, why, sizeof why), "still not ready: %s", why);
	ck_assert_int_eq(status_of_put("t", 1.0f), 201);
}
END_TEST

START_TEST(stopped_server_is_503)
{
	char why[256];
	start(PG.url);
	ck_assert_int_eq(status_of_put("t", 1.0f), 201);
	ck_assert_int_eq(pe_pg_stop(&PG, "fast"), 0);
	EXPECT(
	       {"PUT", "t", "", 2.0f, 503, "store-unavailable", ""},
	       {"GET", "t", "&len=5", 0, 503, "store-unavailable", ""});
	ck_assert_msg(until_ready(503, 10, why, sizeof why), "/readyz stays 200 with the database stopped");
	ck_assert_msg(why[0], "/readyz gives no reason");
	ck_assert_int_eq(pe_pg_restart(&PG), 0);
	ck_assert_msg(until_ready(200, 20, why, sizeof why), "not ready again: %s", why);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("e2e_learned_pg_errors");
	if (!pe_pg_available()) {
		fprintf(stderr, "e2e_learned_pg_errors: PostgreSQL is not installed: skipped\n");
		return s;
	}
	TCase *t = tcase_create("pg_errors");
	tcase_set_timeout(t, 120);
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, lock_held_answers_503_every_time);
	tcase_add_test(t, revoked_select_is_500_with_the_reason);
	tcase_add_test(t, revoked_select_keeps_its_class);
	tcase_add_test(t, grant_takes_effect_at_next_write);
	tcase_add_test(t, search_path_naming_no_schema);
	tcase_add_test(t, read_only_database_is_503);
	tcase_add_test(t, read_write_role_without_create_serves);
	tcase_add_test(t, select_only_role_reads);
	tcase_add_test(t, tables_missing_without_create_is_not_ready);
	tcase_add_test(t, stopped_server_is_503);
	suite_add_tcase(s, t);
	return s;
}

PE_TEST_MAIN(suite)
