/* End-to-end tests of learned tables shared by replicas: two posencd on one PostgreSQL database
 * (a private cluster per test, support/pe_pg.h). A table PUT, replaced or deleted through one
 * replica is served by the other within a second, with the new ETag; concurrent PUTs of one name
 * through both leave one of them whole; a replica whose connection was cut catches up on what it
 * missed; and the database stopped (pg_ctl stop -m immediate) and started again under traffic:
 * meanwhile tables keep answering 200 and /readyz 200 or 503 naming the store's reason (503 once
 * the store is known down), cached learned tables keep serving, writes and
 * uncached learned reads answer 503 problem+json with Retry-After, /metrics says the store is
 * down, and both replicas recover on their own. (SIGKILL during a stream of PUTs on PostgreSQL:
 * test_learned.c's learned_pg case.) */
#include "support/pe_check.h"
#include "support/pe_daemon.h"
#include "support/pe_pg.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <nettle/sha2.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "posenc/posenc.h"

static struct pe_daemon A, B;
static struct pe_pg PG;
static char dir[64];

static void setup(void)
{
	char why[200];
	snprintf(dir, sizeof dir, "/tmp/posenc-replicas-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	memset(&A, 0, sizeof A);
	memset(&B, 0, sizeof B);
	ck_assert_msg(pe_pg_start(&PG, why, sizeof why) == 0, "%s", why);
}

static void teardown(void)
{
	char cmd[128];
	if (A.s.pid > 0)
		pe_daemon_stop(&A, SIGKILL);
	if (B.s.pid > 0)
		pe_daemon_stop(&B, SIGKILL);
	pe_pg_destroy(&PG);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* A replica on the test's database; name sets its application_name (and its own data_dir). */
static void start(struct pe_daemon *d, const char *name)
{
	char url[320], data[128];
	snprintf(url, sizeof url, "%s?application_name=%s", PG.url, name);
	snprintf(data, sizeof data, "%s/%s", dir, name);
	const char *args[] = {"--data-dir", data, "--workers", "4", "--store-url", url, NULL};
	pe_daemon_start(d, args);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sha_hex(const void *data, size_t len, char out[65])
{
	struct sha256_ctx c;
	uint8_t d[32];
	sha256_init(&c);
	sha256_update(&c, len, data);
	sha256_digest(&c, sizeof d, d);
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* PUT t as npy to /v1/learned/name through d; the answer into r (the caller frees it). */
static void put_view(const struct pe_daemon *d, const char *name, const struct pe_tensor_view *t, struct pe_resp *r)
{
	char path[96];
	struct pe_buf b;
	pe_buf_init(&b, (size_t)1 << 30);
	ck_assert_int_eq(pe_npy_write(&b, t, NULL), 0);
	const char *hs[] = {"Content-Type: application/x-npy", NULL};
	snprintf(path, sizeof path, "/v1/learned/%s", name);
	pe_request(d, "PUT", path, hs, b.data, b.len, r);
	pe_buf_destroy(&b);
}

/* put_view's status alone. */
static long put_status(const struct pe_daemon *d, const char *name, const struct pe_tensor_view *t)
{
	struct pe_resp r;
	put_view(d, name, t, &r);
	long status = r.status;
	pe_resp_free(&r);
	return status;
}

/* PUT a [rows, 8] f32 table whose values follow seed through d; returns the status, the elements'
 * sha256 in sha (may be NULL). */
static long put_table(const struct pe_daemon *d, const char *name, size_t rows, float seed, char *sha)
{
	size_t n = rows * 8;
	float *v = malloc(n * sizeof *v);
	ck_assert_ptr_nonnull(v);
	for (size_t i = 0; i < n; i++)
		v[i] = seed + sinf((float)i * 0.37f);
	if (sha)
		sha_hex(v, n * sizeof *v, sha);
	struct pe_tensor_view t = {.shape = {2, {rows, 8}}, .dtype = PE_F32, .data = v};
	long status = put_status(d, name, &t);
	free(v);
	return status;
}

/* GET name as f32 bin: the status, the ETag into etag and the body's sha256 into sha. */
static long get_table(const struct pe_daemon *d, const char *name, char etag[128], char sha[65])
{
	char path[128];
	struct pe_resp r;
	snprintf(path, sizeof path, "/v1/learned/%s?format=bin&dtype=f32", name);
	pe_get(d, path, &r);
	long status = r.status;
	etag[0] = sha[0] = 0;
	if (status == 200) {
		pe_resp_header(&r, "ETag", etag, 128);
		sha_hex(r.body, r.len, sha);
	}
	pe_resp_free(&r);
	return status;
}

/* Poll d until name answers want (and, when sha is given, with those elements); returns the
 * seconds it took, or -1 if no request sent within limit seconds got that answer. (A request sent
 * before the limit counts even if a loaded machine makes it slow to come back.) */
static double until_seen(const struct pe_daemon *d, const char *name, long want, const char *sha, double limit)
{
	char etag[128], got[65];
	double t0 = now_s();
	for (double sent = t0; sent - t0 <= limit; sent = now_s()) {
		long st = get_table(d, name, etag, got);
		if (st == want && (!sha || !strcmp(got, sha)))
			return sent - t0;
		usleep(10000);
	}
	return -1;
}

/* ---- writes through one replica, seen by the other ---- */

START_TEST(writes_reach_the_other_replica_within_a_second)
{
	char sha1[65], sha2[65], etag1[128], etag2[128], got[65];
	start(&A, "a");
	start(&B, "b");
	ck_assert_int_eq(get_table(&B, "t", etag1, got), 404);
	ck_assert_int_eq(put_table(&A, "t", 16, 1, sha1), 201);
	double t = until_seen(&B, "t", 200, sha1, 1.0);
	ck_assert_msg(t >= 0, "B did not serve the table within 1 s of A's 201");
	ck_assert_int_eq(get_table(&B, "t", etag1, got), 200); /* now cached on B */
	/* replaced through A: B answers the new elements with a new ETag */
	ck_assert_int_eq(put_table(&A, "t", 16, 2, sha2), 200);
	ck_assert_msg(until_seen(&B, "t", 200, sha2, 1.0) >= 0, "B still serves the old version after 1 s");
	ck_assert_int_eq(get_table(&B, "t", etag2, got), 200);
	ck_assert_str_ne(etag1, etag2);
	/* If-None-Match with the old ETag: the new table, not 304 */
	struct pe_resp r;
	char inm[160];
	snprintf(inm, sizeof inm, "If-None-Match: %s", etag1);
	const char *hs[] = {inm, NULL};
	pe_request(&B, "GET", "/v1/learned/t?format=bin&dtype=f32", hs, NULL, 0, &r);
	ck_assert_int_eq(r.status, 200);
	pe_resp_free(&r);
	/* listed on B with A's sha256 */
	pe_get(&B, "/v1/learned", &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_msg(strstr(r.body, sha2) != NULL, "%s", r.body);
	pe_resp_free(&r);
	/* deleted through B: A answers 404 */
	pe_request(&B, "DELETE", "/v1/learned/t", NULL, NULL, 0, &r);
	ck_assert_int_eq(r.status, 204);
	pe_resp_free(&r);
	ck_assert_msg(until_seen(&A, "t", 404, NULL, 1.0) >= 0, "A still serves a table deleted through B after 1 s");
	pe_get(&A, "/v1/learned", &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_msg(strstr(r.body, "\"count\":0") != NULL, "%s", r.body);
	pe_resp_free(&r);
	ck_assert_msg(pe_metric(&B, "posenc_store_notifications_total") >= 2, "B learned of A's writes by NOTIFY");
}
END_TEST

/* ---- concurrent PUTs of one name ---- */

#define ROUNDS 20

struct racer {
	const struct pe_daemon *d;
	float seed;
	char sha[ROUNDS][65];
};

static void *race(void *arg)
{
	struct racer *w = arg;
	for (int i = 0; i < ROUNDS; i++)
		if (put_table(w->d, "same", 200 + (size_t)i, w->seed + (float)i, w->sha[i]) >= 300)
			w->sha[i][0] = 0; /* refused (503 while all connections were busy): not a version */
	return NULL;
}

START_TEST(concurrent_puts_of_one_name_leave_one_whole)
{
	struct racer ra = {.d = &A, .seed = 100}, rb = {.d = &B, .seed = 200};
	pthread_t ta, tb;
	char etag[128], got[65];
	start(&A, "a");
	start(&B, "b");
	ck_assert_int_eq(pthread_create(&ta, NULL, race, &ra), 0);
	ck_assert_int_eq(pthread_create(&tb, NULL, race, &rb), 0);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	/* A may still hold the version before the last one for a few milliseconds: its read then finds
	 * the newer row and answers 503 (replaced while the request ran; retry) */
	double t0 = now_s();
	while (get_table(&A, "same", etag, got) != 200)
		ck_assert_msg(now_s() - t0 < 1.0, "A cannot serve the table");
	int found = 0;
	for (int i = 0; i < ROUNDS; i++)
		found += !strcmp(got, ra.sha[i]) || !strcmp(got, rb.sha[i]);
	ck_assert_msg(found == 1, "the stored elements (%s) are none of the versions PUT", got);
	ck_assert_msg(until_seen(&B, "same", 200, got, 1.0) >= 0, "the replicas disagree after 1 s");
}
END_TEST

/* ---- a replica that missed changes catches up when it reconnects ---- */

START_TEST(reconnect_catches_up)
{
	char sha[65];
	start(&A, "a");
	start(&B, "b");
	ck_assert_int_eq(put_table(&A, "kept", 4, 1, sha), 201);
	ck_assert_int_eq(put_table(&A, "gone", 4, 2, NULL), 201);
	ck_assert_msg(until_seen(&B, "gone", 200, NULL, 1.0) >= 0, "B did not learn of gone");
	/* cut B's connections and, in the same breath, delete a row behind everyone's back (no
	 * NOTIFY): B can only learn of it by reloading when it reconnects */
	ck_assert_int_eq(pe_pg_sql(&PG, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = "
				   "'b'; DELETE FROM posenc_learned WHERE name = 'gone'"),
			 0);
	ck_assert_msg(until_seen(&B, "gone", 404, NULL, 20) >= 0, "B still serves a table deleted while it was away");
	ck_assert_msg(until_seen(&B, "kept", 200, sha, 1) >= 0, "B lost a table");
	ck_assert_msg(pe_metric(&B, "posenc_store_reconnects_total") >= 1, "B did not count its reconnection");
}
END_TEST

static void until_metric(const struct pe_daemon *d, const char *name, double want, double limit);

/* A and B started, a table "real" (its sha256 into sha) written through A and served by B; returns
 * B's posenc_store_notifications_total then. */
static double start_pair_with_real(char sha[65])
{
	start(&A, "a");
	start(&B, "b");
	ck_assert_int_eq(put_table(&A, "real", 4, 1, sha), 201);
	ck_assert_msg(until_seen(&B, "real", 200, sha, 1.0) >= 0, "B did not learn of real");
	return pe_metric(&B, "posenc_store_notifications_total");
}

/* Anyone who can connect to the database may NOTIFY on posenc_learned: a forged delete with a huge
 * generation, or a forged put of a table that does not exist, must change nothing a replica serves
 * (before: the delete's tombstone hid the table, and every later write of it, until a restart). */
START_TEST(forged_notifications_change_nothing)
{
	char sha[65], sha2[65], etag[128], got[65];
	double before = start_pair_with_real(sha);
	ck_assert_int_eq(pe_pg_sql(&PG, "NOTIFY posenc_learned, 'D 9000000000000000000 real'; NOTIFY posenc_learned, "
				   "'P 9000000000000000000 ghost f32 4 8 0 0 0 "
				   "00000000000000000000000000000000000000000000000000000000000000ff 1 0x1p+0'"),
			 0);
	until_metric(&B, "posenc_store_notifications_total", before + 2, 20);
	ck_assert_int_eq(get_table(&B, "real", etag, got), 200);
	ck_assert_str_eq(got, sha);
	ck_assert_int_eq(get_table(&B, "ghost", etag, got), 404);
	ck_assert_int_eq(put_table(&A, "real", 6, 2, sha2), 200);
	ck_assert_msg(until_seen(&B, "real", 200, sha2, 1.0) >= 0, "B did not learn of real's replacement");
}
END_TEST

/* A flood of notifications (any database user may send them) of one name, then a real write: the
 * replica looks the flooded name up once per round of notifications it holds, not once per
 * notification (before: 20000 lookups, one after another on the listener's connection, ahead of
 * the real write's), and stays up. The count is of lookups (posenc_store_notifications_total: each
 * one a name refreshed from the database); "after" is notified after the flood, so once B serves
 * it the flood has been handled. The same with distinct names (the index is reloaded), and with
 * unreadable ones (logged once a round: before, a line each). */
/* Lines of d's log that contain what. */
static int log_lines(const struct pe_daemon *d, const char *what)
{
	char line[2048];
	int n = 0;
	FILE *f = fopen(d->s.out, "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof line, f))
		n += strstr(line, what) != NULL;
	fclose(f);
	return n;
}

START_TEST(notification_flood_is_coalesced)
{
	const int flood = 20000;
	char sha[65], etag[128], got[65], sql[160];
	double before = start_pair_with_real(sha);
	snprintf(sql, sizeof sql, "SELECT pg_notify('posenc_learned', 'D ' || g || ' real') FROM generate_series(1, %d) g",
		 flood);
	ck_assert_int_eq(pe_pg_sql(&PG, sql), 0);
	ck_assert_int_eq(put_table(&A, "after", 4, 2, NULL), 201);
	ck_assert_msg(until_seen(&B, "after", 200, NULL, 60) >= 0, "B never learned of the write after the flood");
	double lookups = pe_metric(&B, "posenc_store_notifications_total") - before;
	ck_assert_msg(lookups <= flood / 10, "%.0f lookups for %d notifications of one name and one write", lookups,
		      flood);
	ck_assert_int_eq(pe_metric(&B, "posenc_store_up"), 1);
	/* as many distinct names: more wait than a round looks up, so the index is reloaded instead */
	before = pe_metric(&B, "posenc_store_notifications_total");
	snprintf(sql, sizeof sql, "SELECT pg_notify('posenc_learned', 'D ' || g || ' n' || g) FROM generate_series(1, %d) g",
		 flood);
	ck_assert_int_eq(pe_pg_sql(&PG, sql), 0);
	ck_assert_int_eq(put_table(&A, "later", 4, 3, NULL), 201);
	ck_assert_msg(until_seen(&B, "later", 200, NULL, 60) >= 0, "B never learned of the write after the flood");
	lookups = pe_metric(&B, "posenc_store_notifications_total") - before;
	ck_assert_msg(lookups <= flood / 10, "%.0f lookups for %d notifications of distinct names", lookups, flood);
	ck_assert_int_eq(pe_metric(&B, "posenc_store_up"), 1);
	ck_assert_int_eq(get_table(&B, "real", etag, got), 200);
	ck_assert_str_eq(got, sha);
	ck_assert_int_eq(get_table(&B, "after", etag, got), 200);
	/* as many that cannot be read: logged once a round with their count, not a line each */
	snprintf(sql, sizeof sql, "SELECT pg_notify('posenc_learned', 'junk ' || g) FROM generate_series(1, %d) g", flood);
	ck_assert_int_eq(pe_pg_sql(&PG, sql), 0);
	ck_assert_int_eq(put_table(&A, "last", 4, 4, NULL), 201);
	ck_assert_msg(until_seen(&B, "last", 200, NULL, 60) >= 0, "B never learned of the write after the flood");
	int lines = log_lines(&B, "\"event\":\"ignored\"");
	ck_assert_msg(lines >= 1 && lines <= flood / 10, "%d log lines for %d unreadable notifications", lines, flood);
}
END_TEST

#if !defined(PE_SANITIZED)
/* The most memory process pid has held (VmHWM), in bytes; -1 when unknown. */
static double peak_bytes(pid_t pid)
{
	char path[64], line[128];
	double kb = -1;
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "VmHWM: %lf kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb < 0 ? -1 : kb * 1024;
}
#endif

/* The index is loaded a page of rows at a time: a replica that starts on 100000 rows loads all of
 * them, past a row posencd did not write (a name longer than any it allows: ignored, and the next
 * page starts after it), serves any of them, and never holds much more than its index (at most 256
 * bytes an entry) above what the other replica, with one table, ever held (before: every row's
 * metadata in one PGresult, over libpq's buffer of the whole answer, beside the index being built:
 * 68 MB at its peak, against 28 MB paged). The memory bound is skipped under AddressSanitizer. */
START_TEST(index_loads_in_pages)
{
	const int copies = 100000;
	char sql[400], sha[65], etag[128], got[65];
	start(&A, "a");
	ck_assert_int_eq(put_table(&A, "real", 4, 1, sha), 201);
	snprintf(sql, sizeof sql, "INSERT INTO posenc_learned SELECT n, dtype, nrows, ncols, prefix_tokens, grid_h, "
		 "grid_w, bytes, sha256, created_ms, max_abs, generation, data FROM posenc_learned, (SELECT 'c' || g AS n "
		 "FROM generate_series(1, %d) g UNION ALL SELECT repeat('x', 100)) names WHERE name = 'real'", copies);
	ck_assert_int_eq(pe_pg_sql(&PG, sql), 0);
	start(&B, "b");
	ck_assert_int_eq(pe_metric(&B, "posenc_store_tables"), copies + 1);
	ck_assert_int_eq(get_table(&B, "c1", etag, got), 200);
	ck_assert_str_eq(got, sha);
	ck_assert_int_eq(get_table(&B, "c100000", etag, got), 200);
	ck_assert_int_eq(get_table(&B, "real", etag, got), 200);
#if !defined(PE_SANITIZED)
	double base = peak_bytes(A.s.pid), peak = peak_bytes(B.s.pid), bound = base + 256.0 * copies + (8 << 20);
	ck_assert_msg(base > 0 && peak > 0, "no VmHWM in /proc");
	ck_assert_msg(peak <= bound, "loading %d rows took %.1f MB at its peak; one table %.1f MB", copies, peak / 1e6,
		      base / 1e6);
#endif
}
END_TEST

/* ---- the database down and back under traffic ---- */

static atomic_int traffic_on, traffic_bad, traffic_n;

/* Requests for traffic(): paths taken in turn, from A and B alternately or from A only. */
struct traffic_plan {
	const char *const *paths;
	int npaths;
	int both;
};

static const char *const mixed_paths[] = {"/v1/sinusoidal?len=64&dim=32", "/readyz", "/v1/rope?len=16&dim=8&format=npy"};
/* Tables and /readyz, from both replicas, all along. */
static const struct traffic_plan to_both = {mixed_paths, 3, 1};
/* Tables and /readyz from A only. */
static const struct traffic_plan to_a = {mixed_paths, 2, 0};

/* A good answer: 200, or from /readyz a 503 that names the store's reason (the database is down). */
static int answer_ok(const char *path, const struct pe_resp *r)
{
	return r->status == 200 || (!strcmp(path, "/readyz") && r->status == 503 && r->body &&
				    strstr(r->body, "\"store-unavailable\"") && strstr(r->body, "\"store\""));
}

/* Sends plan's requests (arg) until traffic_on drops, counting every answer answer_ok refuses. */
static void *traffic(void *arg)
{
	const struct traffic_plan *plan = arg;
	for (int i = 0; atomic_load(&traffic_on); i++) {
		struct pe_resp r;
		const char *path = plan->paths[i % plan->npaths];
		pe_get(plan->both && i % 2 == 0 ? &B : &A, path, &r);
		if (!answer_ok(path, &r))
			atomic_fetch_add(&traffic_bad, 1);
		atomic_fetch_add(&traffic_n, 1);
		pe_resp_free(&r);
		usleep(5000);
	}
	return NULL;
}

static void expect_503(const struct pe_daemon *d, const char *method, const char *path)
{
	struct pe_resp r;
	char ra[32];
	pe_request(d, method, path, NULL, NULL, 0, &r);
	pe_assert_problem(&r, 503, NULL);
	ck_assert_msg(pe_resp_header(&r, "Retry-After", ra, sizeof ra) != NULL, "%s %s: no Retry-After", method, path);
	ck_assert_msg(strstr(r.body, "store-unavailable") != NULL, "%s %s: %s", method, path, r.body);
	pe_resp_free(&r);
}

static void until_metric(const struct pe_daemon *d, const char *name, double want, double limit)
{
	double t0 = now_s();
	while (pe_metric(d, name) != want) {
		ck_assert_msg(now_s() - t0 < limit, "%s did not become %g within %g s", name, want, limit);
		usleep(50000);
	}
}

START_TEST(database_down_and_back_under_traffic)
{
	char sha[65], etag[128], got[65];
	pthread_t t;
	start(&A, "a");
	start(&B, "b");
	ck_assert_int_eq(pe_metric(&A, "posenc_store_up"), 1);
	ck_assert_int_eq(put_table(&A, "cached", 32, 1, sha), 201);
	ck_assert_int_eq(put_table(&A, "cold", 32, 2, NULL), 201);
	ck_assert_msg(until_seen(&B, "cached", 200, sha, 1.0) >= 0, "B did not learn of cached");
	atomic_store(&traffic_on, 1);
	ck_assert_int_eq(pthread_create(&t, NULL, traffic, (void *)&to_both), 0);

	ck_assert_int_eq(pe_pg_stop(&PG, "immediate"), 0);
	until_metric(&A, "posenc_store_up", 0, 15);
	until_metric(&B, "posenc_store_up", 0, 15);
	struct pe_resp ready;
	pe_get(&A, "/readyz", &ready); /* the store cannot serve: not ready, with the reason */
	ck_assert_msg(ready.status == 503 && answer_ok("/readyz", &ready), "/readyz: %ld %s", ready.status, ready.body);
	pe_resp_free(&ready);
	ck_assert_int_eq(get_table(&B, "cached", etag, got), 200); /* from the cache */
	ck_assert_str_eq(got, sha);
	expect_503(&B, "GET", "/v1/learned/cold?format=bin&dtype=f32");  /* never read on B: not cached */
	expect_503(&A, "DELETE", "/v1/learned/cached");
	expect_503(&A, "GET", "/v1/learned/never-existed"); /* unknown while down: cannot say 404 */
	struct pe_resp r;
	char ra[32];
	float v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	struct pe_tensor_view tv = {.shape = {2, {1, 8}}, .dtype = PE_F32, .data = v};
	put_view(&A, "new", &tv, &r);
	pe_assert_problem(&r, 503, NULL);
	ck_assert_ptr_nonnull(pe_resp_header(&r, "Retry-After", ra, sizeof ra));
	pe_resp_free(&r);
	pe_get(&A, "/v1/learned", &r); /* the list: the last index known */
	ck_assert_int_eq(r.status, 200);
	pe_resp_free(&r);
	ck_assert_msg(pe_metric(&A, "posenc_store_unavailable_total") >= 1, "not counted");

	ck_assert_int_eq(pe_pg_restart(&PG), 0);
	until_metric(&A, "posenc_store_up", 1, 20);
	until_metric(&B, "posenc_store_up", 1, 20);
	ck_assert_int_eq(put_status(&A, "new", &tv), 201);
	ck_assert_msg(until_seen(&B, "new", 200, NULL, 1.0) >= 0, "B did not learn of a write after the restart");
	ck_assert_msg(until_seen(&B, "cold", 200, NULL, 1.0) >= 0, "B cannot read cold after the restart");
	ck_assert_msg(pe_metric(&B, "posenc_store_reconnects_total") >= 1, "B did not count its reconnection");

	atomic_store(&traffic_on, 0);
	pthread_join(t, NULL);
	ck_assert_msg(atomic_load(&traffic_n) > 0, "no traffic was sent");
	ck_assert_msg(atomic_load(&traffic_bad) == 0,
		      "%d of %d table or readyz answers were not 200 (or, for readyz, 503 naming the store)",
		      atomic_load(&traffic_bad), atomic_load(&traffic_n));
}
END_TEST

/* ---- a database that stops answering (frozen: connections open, nothing comes back) ---- */

START_TEST(unanswering_database_cannot_hold_requests)
{
	char sha[65], etag[128], got[65];
	pthread_t t;
	start(&A, "a");
	ck_assert_int_eq(put_table(&A, "cached", 32, 1, sha), 201);
	ck_assert_int_eq(get_table(&A, "cached", etag, got), 200);
	atomic_store(&traffic_on, 1);
	atomic_store(&traffic_bad, 0);
	ck_assert_int_eq(pthread_create(&t, NULL, traffic, (void *)&to_a), 0);
	ck_assert_int_eq(pe_pg_freeze(&PG, 1), 0);
	/* a write now waits for the database until the operation timeout (10 s, or 3/4 of a shorter
	 * job_timeout), then 503; meanwhile the listener's liveness query goes unanswered and the
	 * store is declared down */
	ck_assert_int_eq(put_table(&A, "stuck", 4, 1, NULL), 503);
	until_metric(&A, "posenc_store_up", 0, 20);
	double t0 = now_s();
	ck_assert_int_eq(put_table(&A, "fast", 4, 1, NULL), 503); /* down: refused without waiting */
	ck_assert_msg(now_s() - t0 < 5, "a write waited %.1f s on a database known to be down", now_s() - t0);
	ck_assert_int_eq(get_table(&A, "cached", etag, got), 200);
	ck_assert_int_eq(pe_pg_freeze(&PG, 0), 0);
	until_metric(&A, "posenc_store_up", 1, 30);
	ck_assert_int_eq(put_table(&A, "after", 4, 1, NULL), 201);
	atomic_store(&traffic_on, 0);
	pthread_join(t, NULL);
	ck_assert_msg(atomic_load(&traffic_bad) == 0,
		      "%d of %d table or readyz answers were not 200 (or, for readyz, 503 naming the store)",
		      atomic_load(&traffic_bad), atomic_load(&traffic_n));
}
END_TEST

/* ---- every row's SHA-256 is checked when read ---- */

START_TEST(damaged_row_is_never_served)
{
	char etag[128], got[65];
	struct pe_resp r;
	start(&A, "a");
	ck_assert_int_eq(put_table(&A, "rot", 4, 1, NULL), 201);
	ck_assert_int_eq(pe_pg_sql(&PG, "UPDATE posenc_learned SET data = set_byte(data, 5, get_byte(data, 5) # 1) "
				   "WHERE name = 'rot'"),
			 0);
	ck_assert_int_eq(get_table(&A, "rot", etag, got), 500);
	pe_get(&A, "/v1/learned/rot?format=npy", &r);
	pe_assert_problem(&r, 500, NULL);
	ck_assert_msg(strstr(r.body, "damaged") != NULL, "%s", r.body);
	pe_resp_free(&r);
}
END_TEST

/* ---- start-up with the database down ---- */

START_TEST(starts_with_the_database_down)
{
	ck_assert_int_eq(pe_pg_stop(&PG, "fast"), 0);
	start(&A, "a"); /* starts (tables need no database), the store down */
	ck_assert_int_eq(pe_metric(&A, "posenc_store_up"), 0);
	struct pe_resp r;
	pe_get(&A, "/v1/sinusoidal?len=4&dim=4", &r);
	ck_assert_int_eq(r.status, 200);
	pe_resp_free(&r);
	ck_assert_int_eq(pe_pg_restart(&PG), 0);
	until_metric(&A, "posenc_store_up", 1, 20); /* the schema is created then */
	ck_assert_int_eq(put_table(&A, "late", 4, 1, NULL), 201);
}
END_TEST

/* ---- the largest table max_table_bytes allows, through the database as binary bytea ---- */

START_TEST(largest_table_round_trips)
{
	char sha[65], etag[128], got[65];
	start(&A, "a");
	start(&B, "b");
	size_t rows = ((size_t)64 << 20) / (8 * sizeof(float)); /* 64 MiB of f32 elements, 8 columns */
	ck_assert_int_eq(put_table(&A, "big", rows, 3, sha), 201);
	ck_assert_msg(until_seen(&B, "big", 200, sha, 1.0) >= 0, "B did not serve the 64 MiB table");
	ck_assert_int_eq(get_table(&B, "big", etag, got), 200);
	ck_assert_str_eq(got, sha);
	ck_assert_int_eq(put_table(&A, "bigger", rows + 1, 3, NULL), 413);
}
END_TEST

/* ---- an uncached read counts every copy of the row it holds ---- */

/* PUT a [rows, 8] f64 table through d; the status. */
static long put_f64(const struct pe_daemon *d, const char *name, size_t rows)
{
	size_t n = rows * 8;
	double *v = malloc(n * sizeof *v);
	ck_assert_ptr_nonnull(v);
	for (size_t i = 0; i < n; i++)
		v[i] = sin((double)i * 0.37);
	struct pe_tensor_view t = {.shape = {2, {rows, 8}}, .dtype = PE_F64, .data = v};
	long status = put_status(d, name, &t);
	free(v);
	return status;
}

/* A read from PostgreSQL holds the row three times before it returns (libpq's input buffer, the
 * PGresult, our copy): 3 x 8n bytes for an [n/8, 8] f64 table, more than the 16n the file store's
 * read and float64 copy need. With a 4 MiB budget between the two, the GET must be a 413 (before:
 * it was served, holding 4.8 MiB of rows against a 4 MiB budget, uncounted), and the budget is
 * all given back; a table whose copies fit is still served. */
START_TEST(uncached_read_counts_the_rows_copies)
{
	const size_t budget = 4 << 20, rows = budget / 20 / 8; /* 8n = 0.4 budget: 16n fits, 24n does not */
	char url[320], data[128], arg[32], etag[128], got[65];
	snprintf(url, sizeof url, "%s?application_name=a", PG.url);
	snprintf(data, sizeof data, "%s/a", dir);
	snprintf(arg, sizeof arg, "%zu", budget);
	const char *args[] = {"--data-dir", data, "--store-url", url, "--response-budget-bytes", arg, NULL};
	pe_daemon_start(&A, args);
	ck_assert_int_eq(put_f64(&A, "wide", rows), 201);
	ck_assert_int_eq(put_table(&A, "narrow", rows / 4, 1, NULL), 201);
	struct pe_resp r;
	pe_get(&A, "/v1/learned/wide?format=bin&dtype=f64", &r);
	ck_assert_msg(r.status == 413, "a read holding 3 x %zu bytes against a %zu byte budget answered %ld", rows * 64,
		      budget, r.status);
	pe_resp_free(&r);
	ck_assert_int_eq(pe_metric(&A, "posenc_response_budget_bytes"), 0);
	ck_assert_int_eq(get_table(&A, "narrow", etag, got), 200);
}
END_TEST

/* ---- a database host that accepts connections and never answers ---- */

START_TEST(black_holed_database_holds_neither_start_nor_stop)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM, 0); /* listens, never accepts: the kernel completes the
						     handshake and nothing ever answers */
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
	ck_assert_int_eq(listen(fd, 64), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	char url[128], data[128];
	snprintf(url, sizeof url, "postgresql://posenc@127.0.0.1:%d/postgres", ntohs(a.sin_port));
	snprintf(data, sizeof data, "%s/a", dir);
	const char *args[] = {"--data-dir", data, "--store-url", url, NULL};
	double t0 = now_s();
	pe_daemon_start(&A, args);
	ck_assert_msg(now_s() - t0 < 10, "the start waited %.1f s for a database that never answers", now_s() - t0);
	ck_assert_int_eq(pe_metric(&A, "posenc_store_up"), 0);
	struct pe_resp r;
	pe_get(&A, "/v1/sinusoidal?len=4&dim=4", &r);
	ck_assert_int_eq(r.status, 200);
	pe_resp_free(&r);
	ck_assert_int_eq(put_table(&A, "t", 4, 1, NULL), 503);
	t0 = now_s();
	ck_assert_int_eq(pe_daemon_stop(&A, SIGTERM), 0); /* while the listener waits on the black hole */
	ck_assert_msg(now_s() - t0 < 5, "SIGTERM took %.1f s: the store's close waited on the database", now_s() - t0);
	close(fd);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("e2e_learned_replicas");
	if (!pe_pg_available()) {
		fprintf(stderr, "e2e_learned_replicas: PostgreSQL is not installed: skipped\n");
		return s;
	}
	TCase *tc = tcase_create("replicas");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, writes_reach_the_other_replica_within_a_second);
	tcase_add_test(tc, concurrent_puts_of_one_name_leave_one_whole);
	tcase_add_test(tc, reconnect_catches_up);
	tcase_add_test(tc, forged_notifications_change_nothing);
	tcase_add_test(tc, database_down_and_back_under_traffic);
	tcase_add_test(tc, starts_with_the_database_down);
	tcase_add_test(tc, unanswering_database_cannot_hold_requests);
	tcase_add_test(tc, damaged_row_is_never_served);
	tcase_add_test(tc, black_holed_database_holds_neither_start_nor_stop);
	tcase_add_test(tc, largest_table_round_trips);
	tcase_add_test(tc, uncached_read_counts_the_rows_copies);
	tcase_add_test(tc, notification_flood_is_coalesced);
	tcase_add_test(tc, index_loads_in_pages);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
