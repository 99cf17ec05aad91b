/* Tests for the PostgreSQL store without a database: the index's ordering rule (a change applies
 * only when its generation is newer than what is held; a delete's tombstone stops an older put),
 * NOTIFY payloads (round trip, malformed ones refused), store_url errors, and a database that
 * cannot be reached (the store opens down; every operation that needs the database fails at once
 * with PE_EUNAVAIL). A real database: tests/e2e/test_learned.c (learned_pg) and
 * test_learned_replicas.c. */
#include <stdlib.h>
#include <string.h>

#include "store/pg.h"
#include "support/pe_check.h"

static struct pgstore *new_index(void)
{
	struct pgstore *s = calloc(1, sizeof *s);
	ck_assert_ptr_nonnull(s);
	pthread_mutex_init(&s->lock, NULL);
	return s;
}

static void free_index(struct pgstore *s)
{
	free(s->t);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static struct pe_store_meta meta(const char *name, uint64_t rows)
{
	struct pe_store_meta m = {.dtype = PE_F32, .rows = rows, .cols = 4, .bytes = rows * 16, .created_ms = 1234,
				  .max_abs = 0.1};
	snprintf(m.name, sizeof m.name, "%s", name);
	for (int i = 0; i < 32; i++)
		m.sha256[i] = (uint8_t)(i * 7 + rows);
	return m;
}

static uint64_t rows_of(struct pgstore *s, const char *name)
{
	const struct pg_entry *e = pg_index_find(s, name);
	return e ? e->m.rows : 0;
}

START_TEST(newer_generation_wins)
{
	struct pgstore *s = new_index();
	struct pe_store_meta a = meta("t", 5), b = meta("t", 3);
	pg_index_put(s, &a, 5);
	pg_index_put(s, &b, 3); /* older: ignored */
	ck_assert_uint_eq(rows_of(s, "t"), 5);
	ck_assert_uint_eq(s->bytes, 5 * 16);
	pg_index_del(s, "t", 4); /* older than the held put: ignored */
	ck_assert_uint_eq(rows_of(s, "t"), 5);
	pg_index_del(s, "t", 6);
	ck_assert_uint_eq(rows_of(s, "t"), 0);
	ck_assert_uint_eq(s->bytes, 0);
	pg_index_put(s, &a, 5); /* a late put from before the delete: the tombstone stops it */
	ck_assert_uint_eq(rows_of(s, "t"), 0);
	pg_index_put(s, &b, 7);
	ck_assert_uint_eq(rows_of(s, "t"), 3);
	ck_assert_uint_eq(s->n, 1);
	free_index(s);
}
END_TEST

/* A read that began when the index held generation 5 finds no row (a delete, generation 6, came
 * first); by the time it says so, the delete and a new put (generation 7) were notified. The new
 * table must stay: dropping it would answer 404 for an existing table until the next write. */
START_TEST(read_finding_no_row_keeps_a_newer_put)
{
	struct pgstore *s = new_index();
	struct pe_store_meta a = meta("t", 5), b = meta("t", 3);
	pg_index_put(s, &a, 5);
	int64_t seen = pg_index_find(s, "t")->gen;
	pg_index_del(s, "t", 6);
	pg_index_put(s, &b, 7);
	pg_index_gone(s, "t", seen);
	ck_assert_uint_eq(rows_of(s, "t"), 3);
	ck_assert_uint_eq(s->bytes, 3 * 16);
	pg_index_gone(s, "t", 7); /* a read that began with generation 7 held: that one is gone */
	ck_assert_uint_eq(rows_of(s, "t"), 0);
	ck_assert_uint_eq(s->n, 0);
	pg_index_put(s, &b, 7); /* its late notification does not bring it back */
	ck_assert_uint_eq(rows_of(s, "t"), 0);
	free_index(s);
}
END_TEST

START_TEST(sorted_and_counted)
{
	struct pgstore *s = new_index();
	const char *names[] = {"m", "b", "z", "a", "q"};
	for (int i = 0; i < 5; i++) {
		struct pe_store_meta m = meta(names[i], (uint64_t)i + 1);
		pg_index_put(s, &m, i + 1);
	}
	ck_assert_uint_eq(s->n, 5);
	for (size_t i = 1; i < s->n; i++)
		ck_assert_int_lt(strcmp(s->t[i - 1].m.name, s->t[i].m.name), 0);
	ck_assert_uint_eq(s->bytes, (1 + 2 + 3 + 4 + 5) * 16);
	free_index(s);
}
END_TEST

START_TEST(payload_round_trip)
{
	struct pgstore *s = new_index();
	struct pe_store_meta m = meta("vit.b-16", 197), got;
	char p[512];
	m.prefix_tokens = 1;
	m.grid_h = m.grid_w = 14;
	m.max_abs = 0.1234567890123456789;
	pg_payload_put(&m, 42, p, sizeof p);
	ck_assert_int_eq(pg_apply_payload(s, p), 0);
	ck_assert_uint_eq(s->notifications, 1);
	got = pg_index_find(s, "vit.b-16")->m;
	ck_assert(pe_store_same_version(&got, &m));
	ck_assert(got.max_abs == m.max_abs); /* %a: exact */
	ck_assert_int_eq(got.created_ms, m.created_ms);
	ck_assert_int_eq(pg_apply_payload(s, "D 43 vit.b-16"), 0);
	ck_assert_ptr_null(pg_index_find(s, "vit.b-16"));
	free_index(s);
}
END_TEST

START_TEST(malformed_payloads_refused)
{
	struct pgstore *s = new_index();
	struct pe_store_meta m = meta("t", 2);
	char p[512], q[600];
	pg_payload_put(&m, 1, p, sizeof p);
	snprintf(q, sizeof q, "%s x", p);
	const char *bad[] = {"", "X 1 t", "D 1", "D 1 ../etc", "D 1 t extra", "P 1 t", q,
			     "P 1 t f99 2 4 0 0 0 00 1 0x0p+0"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		ck_assert_msg(pg_apply_payload(s, bad[i]) == -1, "accepted: %s", bad[i]);
	/* a put whose grid does not fit its rows */
	m.grid_h = m.grid_w = 5;
	pg_payload_put(&m, 2, p, sizeof p);
	ck_assert_int_eq(pg_apply_payload(s, p), -1);
	ck_assert_uint_eq(s->n, 0);
	free_index(s);
}
END_TEST

START_TEST(store_url_errors_name_it)
{
	struct pe_err err = {0};
	const char *urls[] = {"mysql://x/y", "file:/elsewhere", "postgresql://h/db?no_such_parameter=1"};
	for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
		struct pe_store_options o = {.dir = "/nonexistent/never", .max_bytes = 1 << 20, .max_table_bytes = 1 << 20,
					     .url = urls[i]};
		pe_err_clear(&err);
		ck_assert_ptr_null(pe_store_open(&o, &err));
		ck_assert_int_eq(err.code, PE_EINVAL);
		ck_assert_str_eq(err.param, "store_url");
	}
}
END_TEST

/* libpq's parse errors quote the token they choke on, which may be the password: never shown. */
START_TEST(store_url_error_keeps_the_password)
{
	const char *urls[] = {"postgresql://u:s3cr%zzet@127.0.0.1/db", "postgresql://u:s3cret@127.0.0.1/db?s3cret=1",
			      "postgresql://u:s3cret@[::1/db", "host=127.0.0.1 password=s3cret bogus"};
	for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
		struct pe_err err = {0};
		struct pe_store_options o = {.dir = "/nonexistent/never", .max_bytes = 1 << 20, .max_table_bytes = 1 << 20,
					     .url = urls[i]};
		ck_assert_ptr_null(pe_store_open(&o, &err));
		ck_assert_str_eq(err.param, "store_url");
		ck_assert_msg(strstr(err.detail, "s3cr") == NULL, "%s: %s", urls[i], err.detail);
	}
}
END_TEST

/* Nothing listens on port 1 of the loopback: connecting is refused at once. */
START_TEST(unreachable_database_fails_fast)
{
	struct pe_err err = {0};
	struct pe_store_options o = {.max_bytes = 1 << 20, .max_table_bytes = 1 << 20,
				     .url = "postgresql://posenc@127.0.0.1:1/x", .op_timeout_ms = 2000};
	struct pe_store *st = pe_store_open(&o, &err);
	ck_assert_msg(st != NULL, "%s", err.detail);
	struct pe_store_stats stats;
	pe_store_stats(st, &stats);
	ck_assert_int_eq(stats.remote, 1);
	ck_assert_int_eq(stats.up, 0);
	struct pe_store_meta m = meta("t", 2), got;
	float data[8] = {0};
	void *out = NULL;
	ck_assert_int_eq(pe_store_stat(st, "t", &got), PE_EUNAVAIL);
	ck_assert_int_eq(pe_store_put(st, &m, data, NULL, NULL, NULL, &err), PE_EUNAVAIL);
	ck_assert_int_eq(pe_store_delete(st, "t", NULL, NULL, &err), PE_EUNAVAIL);
	ck_assert_int_eq(pe_store_read(st, "t", NULL, &got, &out, &err), PE_EUNAVAIL);
	ck_assert_ptr_null(out);
	struct pe_store_meta *all;
	size_t n;
	ck_assert_int_eq(pe_store_list(st, &all, &n), PE_EUNAVAIL); /* never read: not an empty list */
	ck_assert_uint_eq(n, 0);
	pe_store_stats(st, &stats);
	ck_assert_uint_ge(stats.unavailable_total, 3);
	pe_store_close(st);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("store_pg_index");
	TCase *tc = tcase_create("index");
	tcase_add_test(tc, newer_generation_wins);
	tcase_add_test(tc, read_finding_no_row_keeps_a_newer_put);
	tcase_add_test(tc, sorted_and_counted);
	tcase_add_test(tc, payload_round_trip);
	tcase_add_test(tc, malformed_payloads_refused);
	tcase_add_test(tc, store_url_errors_name_it);
	tcase_add_test(tc, store_url_error_keeps_the_password);
	tcase_add_test(tc, unreachable_database_fails_fast);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
