/* Tests for the durable store of learned tables (src/cache/store.c, include/posenc/store.h).
 *
 * The store's source is compiled into this program with write() and fsync() routed through
 * wrappers, so a test can make the disk "fill up" in the middle of an upload and check that the
 * old version survives and no temporary file is left. Each test works in its own directory under
 * /tmp. Crash states are built by hand (truncated, corrupted, renamed and temporary files), since
 * a real crash is the end-to-end test's business (tests/e2e/test_learned.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/pe_check.h"

static atomic_long t_write_fail_at = -1; /* the n-th write() from now fails with ENOSPC; -1 never */

static ssize_t t_write(int fd, const void *buf, size_t len)
{
	if (atomic_load(&t_write_fail_at) >= 0 && atomic_fetch_sub(&t_write_fail_at, 1) == 0) {
		errno = ENOSPC;
		return -1;
	}
	return write(fd, buf, len);
}

#define write t_write
#include "cache/store.c"
#undef write

/* ---- fixtures ---- */

static char dir[256];
static char events[8192]; /* "event file|" for every log call */

static void log_cb(void *arg, const char *event, const char *file, const char *detail)
{
	(void)arg;
	(void)detail;
	size_t n = strlen(events);
	snprintf(events + n, sizeof events - n, "%s %s|", event, file);
}

static void rm_rf(const char *path)
{
	char cmd[600];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
	ck_assert_int_eq(system(cmd), 0);
}

static void setup(void)
{
	snprintf(dir, sizeof dir, "/tmp/posenc-store-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	events[0] = 0;
	atomic_store(&t_write_fail_at, -1);
}

static void teardown(void) { rm_rf(dir); }

static struct pe_store *open_store(uint64_t max_bytes, uint64_t max_table_bytes)
{
	struct pe_store_options o = {.dir = dir, .max_bytes = max_bytes, .max_table_bytes = max_table_bytes,
				     .log = log_cb};
	struct pe_err err = {0};
	struct pe_store *s = pe_store_open(&o, &err);
	ck_assert_msg(s != NULL, "open: %s", err.detail);
	return s;
}

static struct pe_store_meta meta(const char *name, enum pe_dtype dt, uint64_t rows, uint64_t cols)
{
	struct pe_store_meta m = {.dtype = dt, .rows = rows, .cols = cols};
	snprintf(m.name, sizeof m.name, "%s", name);
	return m;
}

/* rows x cols f32 values seeded by seed */
static float *values(size_t n, float seed)
{
	float *v = malloc(n * sizeof *v);
	ck_assert_ptr_nonnull(v);
	for (size_t i = 0; i < n; i++)
		v[i] = seed + (float)i * 0.25f;
	return v;
}

static void put_ok(struct pe_store *s, struct pe_store_meta *m, const void *data, int want_replaced)
{
	struct pe_err err = {0};
	int replaced = -1;
	int rc = pe_store_put(s, m, data, &replaced, &err);
	ck_assert_msg(rc == 0, "put %s: %d %s", m->name, rc, err.detail);
	ck_assert_int_eq(replaced, want_replaced);
}

static void assert_reads(struct pe_store *s, const char *name, const void *want, size_t bytes)
{
	struct pe_store_meta m;
	struct pe_err err = {0};
	void *got;
	int rc = pe_store_read(s, name, NULL, &m, &got, &err);
	ck_assert_msg(rc == 0, "read %s: %d %s", name, rc, err.detail);
	ck_assert_uint_eq(m.bytes, bytes);
	ck_assert_int_eq(memcmp(got, want, bytes), 0);
	uint8_t sum[32];
	sha256(want, bytes, sum);
	ck_assert_int_eq(memcmp(m.sha256, sum, 32), 0);
	free(got);
}

/* Names in dir (or its quarantine) joined by '|', sorted; "" when empty. */
static void listing(const char *sub, char *out, size_t cap)
{
	char path[400];
	snprintf(path, sizeof path, "%s%s%s", dir, sub ? "/" : "", sub ? sub : "");
	struct dirent **ents;
	int n = scandir(path, &ents, NULL, alphasort);
	ck_assert_int_ge(n, 0);
	out[0] = 0;
	for (int i = 0; i < n; i++) {
		if (strcmp(ents[i]->d_name, ".") && strcmp(ents[i]->d_name, ".."))
			snprintf(out + strlen(out), cap - strlen(out), "%s|", ents[i]->d_name);
		free(ents[i]);
	}
	free(ents);
}

static void file_path(const char *file, char *out, size_t cap) { snprintf(out, cap, "%s/%s", dir, file); }

static void write_file(const char *file, const void *data, size_t len)
{
	char path[400];
	file_path(file, path, sizeof path);
	FILE *f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(data, 1, len, f), len);
	fclose(f);
}

/* Flip one bit of a file at offset. */
static void flip(const char *file, off_t off)
{
	char path[400];
	unsigned char b;
	file_path(file, path, sizeof path);
	int fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &b, 1, off), 1);
	b ^= 0x10;
	ck_assert_int_eq(pwrite(fd, &b, 1, off), 1);
	close(fd);
}

/* ---- tests ---- */

START_TEST(put_read_list)
{
	struct pe_store *s = open_store(1 << 20, 1 << 20);
	float *v = values(12, 1);
	struct pe_store_meta m = meta("gpt2.wpe", PE_F32, 4, 3);
	put_ok(s, &m, v, 0);
	ck_assert_uint_eq(m.bytes, 48);
	ck_assert_int_ge(m.created_ms, now_ms() - 10000);
	assert_reads(s, "gpt2.wpe", v, 48);
	struct pe_store_meta *all, st;
	size_t n;
	ck_assert_int_eq(pe_store_list(s, &all, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(all[0].name, "gpt2.wpe");
	ck_assert_int_eq(memcmp(&all[0], &m, sizeof m), 0);
	ck_assert_int_eq(pe_store_stat(s, "gpt2.wpe", &st), 0);
	ck_assert_int_eq(pe_store_stat(s, "gpt2", &st), PE_ENOTFOUND);
	char files[512];
	listing(NULL, files, sizeof files);
	ck_assert_str_eq(files, "gpt2.wpe.table|quarantine|");
	struct stat sb;
	char path[400];
	file_path("gpt2.wpe.table", path, sizeof path);
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_int_eq(sb.st_size, HEADER + 48);
	free(all);
	free(v);
	pe_store_close(s);
}
END_TEST

START_TEST(replace_is_atomic_and_persists)
{
	struct pe_store *s = open_store(1 << 20, 1 << 20);
	float *v1 = values(12, 1), *v2 = values(20, -7);
	struct pe_store_meta m1 = meta("t", PE_F32, 4, 3), m2 = meta("t", PE_F32, 5, 4);
	put_ok(s, &m1, v1, 0);
	put_ok(s, &m2, v2, 1);
	assert_reads(s, "t", v2, 80);
	uint64_t bytes;
	size_t n;
	pe_store_usage(s, &bytes, &n);
	ck_assert_uint_eq(bytes, 80);
	ck_assert_uint_eq(n, 1);
	char files[512];
	listing(NULL, files, sizeof files);
	ck_assert_str_eq(files, "quarantine|t.table|"); /* no temporary file left */
	pe_store_close(s);
	s = open_store(1 << 20, 1 << 20);
	assert_reads(s, "t", v2, 80);
	struct pe_store_meta st;
	ck_assert_int_eq(pe_store_stat(s, "t", &st), 0);
	ck_assert_int_eq(memcmp(&st, &m2, sizeof st), 0); /* every field, created_ms included */
	ck_assert_str_eq(events, "");
	free(v1);
	free(v2);
	pe_store_close(s);
}
END_TEST

START_TEST(grid_and_dtypes_round_trip)
{
	struct pe_store *s = open_store(1 << 20, 1 << 20);
	double d[5 * 2] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
	uint16_t h[3] = {0x3c00, 0x4000, 0xc000};
	struct pe_store_meta vit = meta("vit", PE_F64, 5, 2), half = meta("h", PE_F16, 3, 1);
	vit.prefix_tokens = 1;
	vit.grid_h = 2;
	vit.grid_w = 2;
	put_ok(s, &vit, d, 0);
	put_ok(s, &half, h, 0);
	pe_store_close(s);
	s = open_store(1 << 20, 1 << 20);
	struct pe_store_meta st;
	ck_assert_int_eq(pe_store_stat(s, "vit", &st), 0);
	ck_assert_int_eq(st.dtype, PE_F64);
	ck_assert_uint_eq(st.prefix_tokens, 1);
	ck_assert_uint_eq(st.grid_h, 2);
	ck_assert_uint_eq(st.grid_w, 2);
	assert_reads(s, "vit", d, sizeof d);
	assert_reads(s, "h", h, sizeof h);
	pe_store_close(s);
}
END_TEST

START_TEST(delete_removes)
{
	struct pe_store *s = open_store(1 << 20, 1 << 20);
	float *v = values(4, 0);
	struct pe_store_meta m = meta("a", PE_F32, 2, 2), st;
	struct pe_err err = {0};
	void *data;
	put_ok(s, &m, v, 0);
	ck_assert_int_eq(pe_store_delete(s, "a", &err), 0);
	ck_assert_int_eq(pe_store_stat(s, "a", &st), PE_ENOTFOUND);
	ck_assert_int_eq(pe_store_read(s, "a", NULL, &st, &data, &err), PE_ENOTFOUND);
	ck_assert_int_eq(pe_store_delete(s, "a", &err), PE_ENOTFOUND);
	ck_assert_str_eq(err.param, "name");
	pe_store_close(s);
	s = open_store(1 << 20, 1 << 20);
	ck_assert_int_eq(pe_store_stat(s, "a", &st), PE_ENOTFOUND);
	uint64_t bytes;
	size_t n;
	pe_store_usage(s, &bytes, &n);
	ck_assert_uint_eq(bytes, 0);
	ck_assert_uint_eq(n, 0);
	free(v);
	pe_store_close(s);
}
END_TEST

/* Every crash or tampering state a restart can meet: only intact tables come back, the rest is
 * moved to quarantine/ and logged; foreign files stay where they are. */
START_TEST(scan_quarantines_damage)
{
	struct pe_store *s = open_store(1 << 20, 1 << 20);
	float *v = values(30, 3);
	const char *names[] = {"ok", "truncated", "bitrot", "header", "renamed"};
	for (int i = 0; i < 5; i++) {
		struct pe_store_meta m = meta(names[i], PE_F32, 10, 3);
		put_ok(s, &m, v, 0);
	}
	pe_store_close(s);
	char path[400], other[400];
	file_path("truncated.table", path, sizeof path);
	ck_assert_int_eq(truncate(path, HEADER + 60), 0);
	flip("bitrot.table", HEADER + 77);
	flip("header.table", 30);
	file_path("renamed.table", path, sizeof path);
	file_path("other.table", other, sizeof other);
	ck_assert_int_eq(rename(path, other), 0); /* its header says "renamed" */
	write_file(".tmp-ok.123.1", "partial", 7);
	write_file("README", "not ours", 8);
	write_file("short.table", "PETABLE1", 8);

	s = open_store(1 << 20, 1 << 20);
	struct pe_store_meta *all;
	size_t n;
	ck_assert_int_eq(pe_store_list(s, &all, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(all[0].name, "ok");
	assert_reads(s, "ok", v, 120);
	char files[1024];
	listing(NULL, files, sizeof files);
	ck_assert_str_eq(files, "README|ok.table|quarantine|");
	listing(QUARANTINE, files, sizeof files);
	const char *moved[] = {".tmp-ok.123.1.", "bitrot.table.", "header.table.", "other.table.", "short.table.",
			       "truncated.table."};
	for (int i = 0; i < 6; i++) {
		ck_assert_msg(strstr(files, moved[i]) != NULL, "%s not in quarantine: %s", moved[i], files);
		char ev[64];
		snprintf(ev, sizeof ev, "quarantine %.*s|", (int)strlen(moved[i]) - 1, moved[i]);
		ck_assert_msg(strstr(events, ev) != NULL, "no event '%s' in %s", ev, events);
	}
	ck_assert_msg(strstr(events, "ignored README|") != NULL, "%s", events);
	free(all);
	free(v);
	pe_store_close(s);
}
END_TEST

/* Damage that appears while the daemon runs is caught when the table is read. */
START_TEST(read_verifies_checksum)
{
	struct pe_store *s = open_store(1 << 20, 1 << 20);
	float *v = values(8, 1);
	struct pe_store_meta m = meta("x", PE_F32, 4, 2), got;
	struct pe_err err = {0};
	void *data = (void *)1;
	put_ok(s, &m, v, 0);
	flip("x.table", HEADER + 5);
	ck_assert_int_eq(pe_store_read(s, "x", m.sha256, &got, &data, &err), PE_EIO);
	ck_assert_ptr_null(data);
	ck_assert_int_eq(pe_store_stat(s, "x", &got), PE_ENOTFOUND);
	ck_assert_msg(strstr(events, "quarantine x.table|") != NULL, "%s", events);
	char files[512];
	listing(NULL, files, sizeof files);
	ck_assert_str_eq(files, "quarantine|");
	free(v);
	pe_store_close(s);
}
END_TEST

START_TEST(read_by_version)
{
	struct pe_store *s = open_store(1 << 20, 1 << 20);
	float *v1 = values(4, 1), *v2 = values(4, 2);
	struct pe_store_meta m1 = meta("x", PE_F32, 2, 2), m2 = meta("x", PE_F32, 2, 2), got;
	struct pe_err err = {0};
	void *data;
	put_ok(s, &m1, v1, 0);
	put_ok(s, &m2, v2, 1);
	ck_assert_int_eq(pe_store_read(s, "x", m1.sha256, &got, &data, &err), PE_EBUSY);
	ck_assert_int_eq(pe_store_read(s, "x", m2.sha256, &got, &data, &err), 0);
	ck_assert_int_eq(memcmp(data, v2, 16), 0);
	free(data);
	free(v1);
	free(v2);
	pe_store_close(s);
}
END_TEST

START_TEST(limits)
{
	struct pe_store *s = open_store(200, 100);
	float *v = values(30, 0);
	struct pe_err err = {0};
	struct pe_store_meta big = meta("big", PE_F32, 26, 1), a = meta("a", PE_F32, 24, 1), b = meta("b", PE_F32, 24, 1),
			     c = meta("c", PE_F32, 24, 1);
	ck_assert_int_eq(pe_store_put(s, &big, v, NULL, &err), PE_ETOOBIG); /* 104 > 100 */
	ck_assert_str_eq(err.param, "body");
	put_ok(s, &a, v, 0);
	put_ok(s, &b, v, 0);
	ck_assert_int_eq(pe_store_put(s, &c, v, NULL, &err), PE_ENOSPACE); /* 288 > 200 */
	a = meta("a", PE_F32, 25, 1);
	put_ok(s, &a, v, 1); /* a replacement only needs the difference */
	ck_assert_int_eq(pe_store_delete(s, "b", &err), 0);
	put_ok(s, &c, v, 0);
	char files[512];
	listing(NULL, files, sizeof files);
	ck_assert_str_eq(files, "a.table|c.table|quarantine|");
	uint64_t bytes;
	size_t n;
	pe_store_usage(s, &bytes, &n);
	ck_assert_uint_eq(bytes, 196);
	free(v);
	pe_store_close(s);
}
END_TEST

/* The disk fills up in the middle of a replacement: the old version stays, nothing is left over,
 * and the reservation is given back. */
START_TEST(disk_full_keeps_old_version)
{
	struct pe_store *s = open_store(1 << 20, 1 << 20);
	float *v1 = values(6, 1), *v2 = values(6, 2);
	struct pe_store_meta m1 = meta("x", PE_F32, 3, 2), m2 = meta("x", PE_F32, 3, 2);
	struct pe_err err = {0};
	put_ok(s, &m1, v1, 0);
	atomic_store(&t_write_fail_at, 1); /* the header goes through, the data does not */
	ck_assert_int_eq(pe_store_put(s, &m2, v2, NULL, &err), PE_ENOSPACE);
	atomic_store(&t_write_fail_at, -1);
	assert_reads(s, "x", v1, 24);
	char files[512];
	listing(NULL, files, sizeof files);
	ck_assert_str_eq(files, "quarantine|x.table|");
	ck_assert_uint_eq(s->reserved, 0);
	free(v1);
	free(v2);
	pe_store_close(s);
}
END_TEST

static void put_fails(struct pe_store *s, struct pe_store_meta m, const char *param)
{
	float v[64] = {0};
	struct pe_err err = {0};
	int rc = pe_store_put(s, &m, v, NULL, &err);
	ck_assert_msg(rc == PE_EINVAL, "%s: rc %d", m.name, rc);
	ck_assert_msg(!strcmp(err.param, param), "%s: param %s, want %s (%s)", m.name, err.param, param, err.detail);
}

START_TEST(invalid_input)
{
	struct pe_store *s = open_store(1 << 20, 1 << 20);
	const char *bad[] = {"", ".hidden", "a/b", "..", "a b", "caf\xc3\xa9", "a%2Fb", "a\\b"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		put_fails(s, meta(bad[i], PE_F32, 1, 1), "name");
	struct pe_err err = {0};
	ck_assert_int_eq(pe_store_name_check("ab\0cd", 5, &err), PE_EINVAL);
	ck_assert_int_eq(pe_store_name_check("A-z_0.9", 7, &err), 0);
	const char *n65 = "x123456789x123456789x123456789x123456789x123456789x123456789x1234";
	ck_assert_int_eq(pe_store_name_check(n65, 65, &err), PE_EINVAL);
	ck_assert_int_eq(pe_store_name_check(n65, 64, &err), 0);
	put_fails(s, meta("i", PE_I32, 2, 2), "body");
	put_fails(s, meta("b", PE_BF16, 2, 2), "body");
	put_fails(s, meta("e", PE_F32, 0, 2), "body");
	struct pe_store_meta g = meta("g", PE_F32, 10, 2);
	g.prefix_tokens = 1;
	g.grid_h = 3;
	g.grid_w = 4;
	put_fails(s, g, "grid");
	g.grid_w = 0;
	put_fails(s, g, "grid");
	g.grid_h = 0;
	put_fails(s, g, "prefix_tokens");
	char files[512];
	listing(NULL, files, sizeof files);
	ck_assert_str_eq(files, "quarantine|");
	pe_store_close(s);
}
END_TEST

START_TEST(creates_nested_dir)
{
	char base[256];
	snprintf(base, sizeof base, "%s", dir);
	snprintf(dir, sizeof dir, "%.200s/a/b/c", base);
	struct pe_store *s = open_store(1 << 20, 1 << 20);
	struct stat st;
	ck_assert_int_eq(stat(dir, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	pe_store_close(s);
	snprintf(dir, sizeof dir, "%.200s", base);
}
END_TEST

START_TEST(open_fails_on_a_file)
{
	char path[400];
	write_file("plain", "x", 1);
	file_path("plain", path, sizeof path);
	struct pe_store_options o = {.dir = path, .max_bytes = 1, .max_table_bytes = 1};
	struct pe_err err = {0};
	ck_assert_ptr_null(pe_store_open(&o, &err));
	ck_assert_int_eq(err.code, PE_EIO);
	ck_assert_str_eq(err.param, "data_dir");
}
END_TEST

/* Writers race on shared and separate names: every table ends whole and the accounting matches. */
struct racer {
	struct pe_store *s;
	int id;
};

static void *race(void *arg)
{
	struct racer *r = arg;
	for (int i = 0; i < 40; i++) {
		char name[16];
		snprintf(name, sizeof name, "%s%d", i % 2 ? "shared" : "own", i % 2 ? i % 3 : r->id);
		float *v = values((size_t)(8 + i), (float)(r->id * 1000 + i));
		struct pe_store_meta m = meta(name, PE_F32, (uint64_t)(8 + i), 1);
		struct pe_err err = {0};
		if (pe_store_put(r->s, &m, v, NULL, &err) != 0)
			abort();
		free(v);
	}
	return NULL;
}

START_TEST(concurrent_puts)
{
	struct pe_store *s = open_store(1 << 20, 1 << 20);
	pthread_t t[4];
	struct racer r[4];
	for (int i = 0; i < 4; i++) {
		r[i] = (struct racer){s, i};
		ck_assert_int_eq(pthread_create(&t[i], NULL, race, &r[i]), 0);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	struct pe_store_meta *all;
	size_t n;
	uint64_t sum = 0, bytes;
	ck_assert_int_eq(pe_store_list(s, &all, &n), 0);
	ck_assert_uint_eq(n, 4 + 3);
	for (size_t i = 0; i < n; i++) {
		struct pe_store_meta m;
		struct pe_err err = {0};
		void *data;
		ck_assert_int_eq(pe_store_read(s, all[i].name, all[i].sha256, &m, &data, &err), 0);
		free(data);
		sum += all[i].bytes;
	}
	pe_store_usage(s, &bytes, &n);
	ck_assert_uint_eq(bytes, sum);
	ck_assert_uint_eq(s->reserved, 0);
	char files[1024];
	listing(NULL, files, sizeof files);
	ck_assert_ptr_null(strstr(files, ".tmp-"));
	free(all);
	pe_store_close(s);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("store");
	TCase *tc = tcase_create("store");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, put_read_list);
	tcase_add_test(tc, replace_is_atomic_and_persists);
	tcase_add_test(tc, grid_and_dtypes_round_trip);
	tcase_add_test(tc, delete_removes);
	tcase_add_test(tc, scan_quarantines_damage);
	tcase_add_test(tc, read_verifies_checksum);
	tcase_add_test(tc, read_by_version);
	tcase_add_test(tc, limits);
	tcase_add_test(tc, disk_full_keeps_old_version);
	tcase_add_test(tc, invalid_input);
	tcase_add_test(tc, creates_nested_dir);
	tcase_add_test(tc, open_fails_on_a_file);
	tcase_add_test(tc, concurrent_puts);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
