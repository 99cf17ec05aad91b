/* Tests for the durable store of learned tables (src/store/, include/posenc/store.h).
 *
 * The store's sources are compiled into this program with write() and fsync() routed through
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

static atomic_long t_fsync_fail_at = -1; /* the n-th fsync() from now fails with EIO; -1 never */

static int t_fsync(int fd)
{
	if (atomic_load(&t_fsync_fail_at) >= 0 && atomic_fetch_sub(&t_fsync_fail_at, 1) == 0) {
		errno = EIO;
		return -1;
	}
	return fsync(fd);
}

#define write t_write
#define fsync t_fsync
#include "store/format.c"
#include "store/quarantine.c"
#include "store/open.c"
#include "store/store.c"
#undef write
#undef fsync

/* ---- fixtures ---- */

static char dir[256];
static uint64_t q_max_bytes = 1 << 20; /* the quarantine limits of open_store */
static size_t q_max_files = 64;
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
	atomic_store(&t_fsync_fail_at, -1);
	q_max_bytes = 1 << 20;
	q_max_files = 64;
}

static void teardown(void) { rm_rf(dir); }

static struct pe_store *open_store(uint64_t max_bytes, uint64_t max_table_bytes)
{
	struct pe_store_options o = {.dir = dir, .max_bytes = max_bytes, .max_table_bytes = max_table_bytes,
				     .quarantine_max_bytes = q_max_bytes, .quarantine_max_files = q_max_files,
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
	int rc = pe_store_put(s, m, data, &replaced, NULL, NULL, &err);
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
	store_sha256(want, bytes, sum);
	ck_assert_int_eq(memcmp(m.sha256, sum, 32), 0);
	free(got);
}

/* Names in dir (or its quarantine) joined by '|', sorted, but for the lock file; "" when empty. */
static void listing(const char *sub, char *out, size_t cap)
{
	char path[400];
	snprintf(path, sizeof path, "%s%s%s", dir, sub ? "/" : "", sub ? sub : "");
	struct dirent **ents;
	int n = scandir(path, &ents, NULL, alphasort);
	ck_assert_int_ge(n, 0);
	out[0] = 0;
	for (int i = 0; i < n; i++) {
		if (strcmp(ents[i]->d_name, ".") && strcmp(ents[i]->d_name, "..") && strcmp(ents[i]->d_name, LOCK_FILE))
			snprintf(out + strlen(out), cap - strlen(out), "%s|", ents[i]->d_name);
		free(ents[i]);
	}
	free(ents);
}

/* The names listing() gives for sub of data_dir are want. */
static void assert_listing(const char *sub, const char *want)
{
	char files[512];
	listing(sub, files, sizeof files);
	ck_assert_msg(!strcmp(files, want), "%s: \"%s\", not \"%s\"", sub ? sub : "data_dir", files, want);
}

static void file_path(const char *file, char *out, size_t cap) { snprintf(out, cap, "%s/%s", dir, file); }

/* A store of 1 MiB holding one rows x 2 f32 table `name` of values(2 * rows, 1): *m its meta, *v
 * its values. */
static struct pe_store *store_with(const char *name, uint64_t rows, struct pe_store_meta *m, float **v)
{
	struct pe_store *s = open_store(1 << 20, 1 << 20);
	*v = values(2 * rows, 1);
	*m = meta(name, PE_F32, rows, 2);
	put_ok(s, m, *v, 0);
	return s;
}

/* s holds no table and counts no byte. */
static void assert_empty(struct pe_store *s)
{
	uint64_t bytes;
	size_t n;
	pe_store_usage(s, &bytes, &n);
	ck_assert_uint_eq(bytes, 0);
	ck_assert_uint_eq(n, 0);
}

/* The end of a test: its values freed, its store closed. */
static void done(struct pe_store *s, void *v)
{
	free(v);
	pe_store_close(s);
}

/* The file `file` of data_dir removed behind the store's back. */
static void remove_file(const char *file)
{
	char path[400];
	file_path(file, path, sizeof path);
	ck_assert_msg(unlink(path) == 0, "unlink %s: %s", file, strerror(errno));
}

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
	ck_assert_int_ge(m.created_ms, store_now_ms() - 10000);
	assert_reads(s, "gpt2.wpe", v, 48);
	struct pe_store_meta *all, st;
	size_t n;
	ck_assert_int_eq(pe_store_list(s, &all, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(all[0].name, "gpt2.wpe");
	ck_assert_int_eq(memcmp(&all[0], &m, sizeof m), 0);
	ck_assert_int_eq(pe_store_stat(s, "gpt2.wpe", &st), 0);
	ck_assert_int_eq(pe_store_stat(s, "gpt2", &st), PE_ENOTFOUND);
	assert_listing(NULL, "gpt2.wpe.table|quarantine|");
	struct stat sb;
	char path[400];
	file_path("gpt2.wpe.table", path, sizeof path);
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_int_eq(sb.st_size, HEADER + 48);
	free(all);
	done(s, v);
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
	ck_assert_int_eq(pe_store_delete(s, "a", NULL, NULL, &err), 0);
	ck_assert_int_eq(pe_store_stat(s, "a", &st), PE_ENOTFOUND);
	ck_assert_int_eq(pe_store_read(s, "a", NULL, &st, &data, &err), PE_ENOTFOUND);
	ck_assert_int_eq(pe_store_delete(s, "a", NULL, NULL, &err), PE_ENOTFOUND);
	ck_assert_str_eq(err.param, "name");
	pe_store_close(s);
	s = open_store(1 << 20, 1 << 20);
	ck_assert_int_eq(pe_store_stat(s, "a", &st), PE_ENOTFOUND);
	assert_empty(s);
	done(s, v);
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
	assert_listing(NULL, "README|ok.table|quarantine|");
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
	done(s, v);
}
END_TEST

/* Damage that appears while the daemon runs is caught when the table is read. */
START_TEST(read_verifies_checksum)
{
	float *v;
	struct pe_store_meta m, got;
	struct pe_store *s = store_with("x", 4, &m, &v);
	struct pe_err err = {0};
	void *data = (void *)1;
	flip("x.table", HEADER + 5);
	ck_assert_int_eq(pe_store_read(s, "x", &m, &got, &data, &err), PE_EIO);
	ck_assert_ptr_null(data);
	ck_assert_int_eq(pe_store_stat(s, "x", &got), PE_ENOTFOUND);
	ck_assert_msg(strstr(events, "quarantine x.table|") != NULL, "%s", events);
	assert_listing(NULL, "quarantine|");
	done(s, v);
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
	ck_assert_int_eq(pe_store_read(s, "x", &m1, &got, &data, &err), PE_EBUSY);
	ck_assert_int_eq(pe_store_read(s, "x", &m2, &got, &data, &err), 0);
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
	ck_assert_int_eq(pe_store_put(s, &big, v, NULL, NULL, NULL, &err), PE_ETOOBIG); /* 104 > 100 */
	ck_assert_str_eq(err.param, "body");
	put_ok(s, &a, v, 0);
	put_ok(s, &b, v, 0);
	ck_assert_int_eq(pe_store_put(s, &c, v, NULL, NULL, NULL, &err), PE_ENOSPACE); /* 288 > 200 */
	a = meta("a", PE_F32, 25, 1);
	put_ok(s, &a, v, 1); /* a replacement only needs the difference */
	ck_assert_int_eq(pe_store_delete(s, "b", NULL, NULL, &err), 0);
	put_ok(s, &c, v, 0);
	assert_listing(NULL, "a.table|c.table|quarantine|");
	uint64_t bytes;
	size_t n;
	pe_store_usage(s, &bytes, &n);
	ck_assert_uint_eq(bytes, 196);
	done(s, v);
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
	ck_assert_int_eq(pe_store_put(s, &m2, v2, NULL, NULL, NULL, &err), PE_ENOSPACE);
	atomic_store(&t_write_fail_at, -1);
	assert_reads(s, "x", v1, 24);
	assert_listing(NULL, "quarantine|x.table|");
	ck_assert_uint_eq(((struct fstore *)s)->reserved, 0);
	free(v1);
	free(v2);
	pe_store_close(s);
}
END_TEST

static void put_fails(struct pe_store *s, struct pe_store_meta m, const char *param)
{
	float v[64] = {0};
	struct pe_err err = {0};
	int rc = pe_store_put(s, &m, v, NULL, NULL, NULL, &err);
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
	assert_listing(NULL, "quarantine|");
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
		if (pe_store_put(r->s, &m, v, NULL, NULL, NULL, &err) != 0)
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
		ck_assert_int_eq(pe_store_read(s, all[i].name, &all[i], &m, &data, &err), 0);
		free(data);
		sum += all[i].bytes;
	}
	pe_store_usage(s, &bytes, &n);
	ck_assert_uint_eq(bytes, sum);
	ck_assert_uint_eq(((struct fstore *)s)->reserved, 0);
	char files[1024];
	listing(NULL, files, sizeof files);
	ck_assert_ptr_null(strstr(files, ".tmp-"));
	free(all);
	pe_store_close(s);
}
END_TEST

/* ---- one process per data_dir ---- */

/* A second store on a directory in use fails at once and touches nothing: not the first one's
 * upload in progress (a temporary file), not its tables, not quarantine/. */
START_TEST(second_open_changes_nothing)
{
	float *v;
	struct pe_store_meta m;
	struct pe_store *s = store_with("t", 3, &m, &v);
	write_file(".tmp-u.4242.1", "in progress", 11); /* as if an upload were being written */
	struct pe_store_options o = {.dir = dir, .max_bytes = 1 << 20, .max_table_bytes = 1 << 20,
				     .quarantine_max_bytes = 1 << 20, .quarantine_max_files = 64, .log = log_cb};
	struct pe_err err = {0};
	ck_assert_ptr_null(pe_store_open(&o, &err));
	ck_assert_int_eq(err.code, PE_EBUSY);
	ck_assert_str_eq(err.param, "data_dir");
	char want[64];
	snprintf(want, sizeof want, "in use by another posencd (pid %ld)", (long)getpid());
	ck_assert_msg(strstr(err.detail, want) != NULL, "%s", err.detail);
	ck_assert_str_eq(events, "");
	assert_listing(NULL, ".tmp-u.4242.1|quarantine|t.table|");
	assert_listing(QUARANTINE, "");
	put_ok(s, &m, v, 1); /* the first store goes on */
	pe_store_close(s);
	s = open_store(1 << 20, 1 << 20); /* the lock goes with the store */
	ck_assert_msg(strstr(events, "quarantine .tmp-u.4242.1|") != NULL, "%s", events);
	assert_reads(s, "t", v, 24);
	done(s, v);
}
END_TEST

/* ---- only regular files, never blocking ---- */

/* A FIFO named like a table (or a temporary file) must not block the scan in open(), and neither a
 * FIFO nor a symlink is opened, moved or served: logged and left alone. */
START_TEST(scan_leaves_special_files_alone)
{
	float *v;
	struct pe_store_meta m;
	struct pe_store *s = store_with("real", 3, &m, &v);
	pe_store_close(s);
	char path[400];
	file_path("fifo.table", path, sizeof path);
	ck_assert_int_eq(mkfifo(path, 0644), 0);
	file_path(".tmp-fifo.1.1", path, sizeof path);
	ck_assert_int_eq(mkfifo(path, 0644), 0);
	file_path("link.table", path, sizeof path);
	ck_assert_int_eq(symlink("real.table", path), 0); /* a valid table behind it */
	file_path("dir.table", path, sizeof path);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	s = open_store(1 << 20, 1 << 20);
	struct pe_store_meta st;
	ck_assert_int_eq(pe_store_stat(s, "real", &st), 0);
	ck_assert_int_eq(pe_store_stat(s, "fifo", &st), PE_ENOTFOUND);
	ck_assert_int_eq(pe_store_stat(s, "link", &st), PE_ENOTFOUND);
	ck_assert_int_eq(pe_store_stat(s, "dir", &st), PE_ENOTFOUND);
	const char *ignored[] = {"ignored fifo.table|", "ignored .tmp-fifo.1.1|", "ignored link.table|", "ignored dir.table|"};
	for (int i = 0; i < 4; i++)
		ck_assert_msg(strstr(events, ignored[i]) != NULL, "no '%s' in %s", ignored[i], events);
	ck_assert_ptr_null(strstr(events, "quarantine"));
	assert_listing(NULL, ".tmp-fifo.1.1|dir.table|fifo.table|link.table|quarantine|real.table|");
	done(s, v);
}
END_TEST

/* A table whose file becomes a FIFO or a symlink while the store runs: the read neither blocks nor
 * follows the link; the table is dropped (404) and the file left where it is. */
START_TEST(read_refuses_special_files)
{
	struct pe_store *s = open_store(1 << 20, 1 << 20);
	float *v = values(6, 1);
	struct pe_store_meta a = meta("a", PE_F32, 3, 2), b = meta("b", PE_F32, 3, 2), st;
	struct pe_err err = {0};
	void *data = NULL;
	put_ok(s, &a, v, 0);
	put_ok(s, &b, v, 0);
	char path[400];
	file_path("a.table", path, sizeof path);
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(mkfifo(path, 0644), 0);
	file_path("b.table", path, sizeof path);
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(symlink("/proc/self/status", path), 0);
	ck_assert_int_eq(pe_store_read(s, "a", &a, &st, &data, &err), PE_ENOTFOUND);
	ck_assert_str_eq(err.param, "name");
	ck_assert_int_eq(pe_store_read(s, "b", NULL, &st, &data, &err), PE_ENOTFOUND);
	ck_assert_ptr_null(data);
	ck_assert_int_eq(pe_store_stat(s, "a", &st), PE_ENOTFOUND);
	ck_assert_int_eq(pe_store_stat(s, "b", &st), PE_ENOTFOUND);
	assert_listing(NULL, "a.table|b.table|quarantine|");
	done(s, v);
}
END_TEST

/* ---- the index heals ---- */

/* A file removed behind the store's back: the read says "not found" (not "retry"), the table is
 * dropped from the index and from the byte count, and the event is logged. */
START_TEST(vanished_file_is_not_found)
{
	float *v;
	struct pe_store_meta m, st;
	struct pe_store *s = store_with("gone", 3, &m, &v);
	struct pe_err err = {0};
	void *data = NULL;
	remove_file("gone.table");
	ck_assert_int_eq(pe_store_read(s, "gone", &m, &st, &data, &err), PE_ENOTFOUND);
	ck_assert_str_eq(err.param, "name");
	ck_assert_int_eq(pe_store_stat(s, "gone", &st), PE_ENOTFOUND);
	ck_assert_int_eq(pe_store_read(s, "gone", NULL, &st, &data, &err), PE_ENOTFOUND);
	assert_empty(s);
	ck_assert_msg(strstr(events, "vanished gone.table|") != NULL, "%s", events);
	put_ok(s, &m, v, 0); /* the name is free again */
	assert_reads(s, "gone", v, 24);
	done(s, v);
}
END_TEST

/* x put at version 2 (m2, v2) over its current file, which is then renamed back over it, as a
 * backup restored by hand would be; between the two, stat sees m2 when seen is given. */
static void restore_behind(struct pe_store *s, struct pe_store_meta *m2, const float *v2,
			   const struct pe_store_meta *seen)
{
	char path[400], saved[400];
	struct pe_store_meta st;
	file_path("x.table", path, sizeof path);
	file_path("saved", saved, sizeof saved);
	ck_assert_int_eq(link(path, saved), 0); /* keep the current file */
	put_ok(s, m2, v2, 1);
	if (seen) {
		ck_assert_int_eq(pe_store_stat(s, "x", &st), 0);
		ck_assert(pe_store_same_version(&st, seen));
	}
	ck_assert_int_eq(rename(saved, path), 0);
}

/* The store serves x as m1 again, its 24 bytes counted, and said it adopted the file. */
static void assert_adopted(struct pe_store *s, const struct pe_store_meta *m1)
{
	struct pe_store_meta st;
	uint64_t bytes;
	size_t n;
	ck_assert_int_eq(pe_store_stat(s, "x", &st), 0);
	ck_assert(pe_store_same_version(&st, m1));
	pe_store_usage(s, &bytes, &n);
	ck_assert_uint_eq(bytes, 24);
	ck_assert_msg(strstr(events, "adopted x.table|") != NULL, "%s", events);
}

/* A file replaced behind the store's back by another valid version: one read says "retry", and
 * from then on the version on disk is served. */
START_TEST(replaced_file_is_adopted)
{
	struct pe_store *s = open_store(1 << 20, 1 << 20);
	float *v1 = values(6, 1), *v2 = values(8, 2);
	struct pe_store_meta m1 = meta("x", PE_F32, 3, 2), m2 = meta("x", PE_F32, 4, 2), st;
	struct pe_err err = {0};
	void *data = NULL;
	put_ok(s, &m1, v1, 0);
	restore_behind(s, &m2, v2, NULL);
	ck_assert_int_eq(pe_store_read(s, "x", &m2, &st, &data, &err), PE_EBUSY);
	assert_adopted(s, &m1);
	assert_reads(s, "x", v1, 24);
	free(v2);
	done(s, v1);
}
END_TEST

/* stat and list answer for the file as it is now, before any read: a file removed behind the
 * store's back is not found and leaves the list (the other tables stay). */
START_TEST(stat_and_list_see_a_removed_file)
{
	struct pe_store *s = open_store(1 << 20, 1 << 20);
	float *v = values(6, 1);
	struct pe_store_meta a = meta("a", PE_F32, 3, 2), b = meta("b", PE_F32, 3, 2), st, *all = NULL;
	size_t n;
	put_ok(s, &a, v, 0);
	put_ok(s, &b, v, 0);
	remove_file("a.table");
	ck_assert_int_eq(pe_store_list(s, &all, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(all[0].name, "b");
	free(all);
	ck_assert_int_eq(pe_store_stat(s, "a", &st), PE_ENOTFOUND);
	ck_assert_int_eq(pe_store_stat(s, "b", &st), 0);
	ck_assert_msg(strstr(events, "vanished a.table|") != NULL, "%s", events);
	remove_file("b.table");
	ck_assert_int_eq(pe_store_stat(s, "b", &st), PE_ENOTFOUND);
	ck_assert_int_eq(pe_store_list(s, &all, &n), 0);
	ck_assert_uint_eq(n, 0);
	assert_empty(s);
	done(s, v);
}
END_TEST

/* A file replaced behind the store's back (renamed over, as a restore would): stat and list give
 * the version on disk before any read, so a version-keyed cache cannot serve the old one. */
START_TEST(stat_and_list_see_a_replaced_file)
{
	struct pe_store *s = open_store(1 << 20, 1 << 20);
	float *v1 = values(6, 1), *v2 = values(8, 2);
	struct pe_store_meta m1 = meta("x", PE_F32, 3, 2), m2 = meta("x", PE_F32, 4, 2), *all = NULL;
	size_t n;
	put_ok(s, &m1, v1, 0);
	restore_behind(s, &m2, v2, &m2);
	ck_assert_int_eq(pe_store_list(s, &all, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert(pe_store_same_version(&all[0], &m1));
	ck_assert_uint_eq(all[0].rows, 3);
	free(all);
	assert_adopted(s, &m1);
	/* and back, through stat alone */
	restore_behind(s, &m2, v2, NULL);
	assert_adopted(s, &m1);
	assert_reads(s, "x", v1, 24);
	free(v2);
	done(s, v1);
}
END_TEST

/* A file written in place (same inode, same size): stat notices, verifies it again, and
 * quarantines it; the read says damaged. A file merely touched stays, silently. */
START_TEST(stat_sees_a_file_changed_in_place)
{
	struct pe_store *s = open_store(1 << 20, 1 << 20);
	float *v = values(8, 1);
	struct pe_store_meta m = meta("x", PE_F32, 4, 2), t = meta("t", PE_F32, 4, 2), st, got;
	struct pe_err err = {0};
	char path[400];
	void *data = (void *)1;
	put_ok(s, &m, v, 0);
	put_ok(s, &t, v, 0);
	file_path("t.table", path, sizeof path);
	struct timespec times[2] = {{.tv_sec = 1000000000}, {.tv_sec = 1000000000}};
	ck_assert_int_eq(utimensat(AT_FDCWD, path, times, 0), 0);
	ck_assert_int_eq(pe_store_stat(s, "t", &st), 0);
	ck_assert(pe_store_same_version(&st, &t));
	ck_assert_msg(strstr(events, "t.table") == NULL, "%s", events);
	flip("x.table", HEADER + 5);
	ck_assert_int_eq(pe_store_stat(s, "x", &st), PE_ENOTFOUND);
	ck_assert_msg(strstr(events, "quarantine x.table|") != NULL, "%s", events);
	ck_assert_int_eq(pe_store_read(s, "x", &m, &got, &data, &err), PE_ENOTFOUND);
	assert_reads(s, "t", v, 32);
	done(s, v);
}
END_TEST

/* Every field that shapes a response tells versions apart, the creation time does not. */
START_TEST(versions_differ_by_every_field)
{
	struct pe_store *s = open_store(1 << 20, 1 << 20);
	float v[24] = {0};
	struct pe_store_meta a = meta("v", PE_F32, 5, 2);
	a.prefix_tokens = 1;
	a.grid_h = a.grid_w = 2;
	put_ok(s, &a, v, 0);
	struct pe_store_meta b = a;
	b.created_ms++;
	ck_assert(pe_store_same_version(&a, &b));
	struct pe_store_meta d[6] = {a, a, a, a, a, a};
	d[0].sha256[31] ^= 1;
	d[1].dtype = PE_F16;
	d[2].rows = 10, d[2].cols = 1;
	d[3].prefix_tokens = 0, d[3].grid_w = 0;
	d[4].grid_h = 1, d[4].grid_w = 4;
	snprintf(d[5].name, sizeof d[5].name, "w");
	for (int i = 0; i < 6; i++)
		ck_assert_msg(!pe_store_same_version(&a, &d[i]), "field %d", i);
	/* a reader of the old grid is told the version changed, even though the bytes did not */
	struct pe_store_meta c = meta("v", PE_F32, 5, 2), got;
	c.prefix_tokens = 1;
	c.grid_h = 4;
	c.grid_w = 1;
	put_ok(s, &c, v, 1);
	ck_assert_int_eq(memcmp(a.sha256, c.sha256, 32), 0);
	struct pe_err err = {0};
	void *data = NULL;
	ck_assert_int_eq(pe_store_read(s, "v", &a, &got, &data, &err), PE_EBUSY);
	ck_assert_int_eq(pe_store_read(s, "v", &c, &got, &data, &err), 0);
	ck_assert_uint_eq(got.grid_h, 4);
	free(data);
	pe_store_close(s);
}
END_TEST

/* ---- writes can be called off until they commit ---- */

struct gate {
	struct pe_store *s;
	int code, calls, locked;
};

static int gate_cb(void *arg)
{
	struct gate *g = arg;
	g->calls++;
	g->locked = pthread_mutex_trylock(&((struct fstore *)g->s)->lock) == EBUSY; /* called under the store's lock */
	if (!g->locked)
		pthread_mutex_unlock(&((struct fstore *)g->s)->lock);
	return g->code;
}

START_TEST(write_called_off_changes_nothing)
{
	struct pe_store *s = open_store(1 << 20, 1 << 20);
	float *v1 = values(6, 1), *v2 = values(6, 2);
	struct pe_store_meta m1 = meta("x", PE_F32, 3, 2), m2 = meta("x", PE_F32, 3, 2), n = meta("new", PE_F32, 3, 2);
	struct pe_err err = {0};
	struct gate g = {s, PE_ETIMEOUT, 0, 0};
	put_ok(s, &m1, v1, 0);
	ck_assert_int_eq(pe_store_put(s, &m2, v2, NULL, gate_cb, &g, &err), PE_ETIMEOUT);
	ck_assert_int_eq(g.calls, 1);
	ck_assert(g.locked);
	ck_assert_msg(strstr(err.detail, "nothing changed") != NULL, "%s", err.detail);
	ck_assert_int_eq(pe_store_put(s, &n, v2, NULL, gate_cb, &g, &err), PE_ETIMEOUT);
	ck_assert_int_eq(pe_store_delete(s, "x", gate_cb, &g, &err), PE_ETIMEOUT);
	ck_assert_int_eq(g.calls, 3);
	assert_reads(s, "x", v1, 24);
	struct pe_store_meta st;
	ck_assert_int_eq(pe_store_stat(s, "new", &st), PE_ENOTFOUND);
	char files[512];
	listing(NULL, files, sizeof files);
	ck_assert_str_eq(files, "quarantine|x.table|"); /* no temporary file left */
	ck_assert_uint_eq(((struct fstore *)s)->reserved, 0);
	pe_store_close(s);
	s = open_store(1 << 20, 1 << 20);
	assert_reads(s, "x", v1, 24);
	ck_assert_int_eq(pe_store_stat(s, "new", &st), PE_ENOTFOUND);
	g = (struct gate){s, 0, 0, 0}; /* let them through */
	ck_assert_int_eq(pe_store_put(s, &m2, v2, NULL, gate_cb, &g, &err), 0);
	assert_reads(s, "x", v2, 24);
	ck_assert_int_eq(pe_store_delete(s, "x", gate_cb, &g, &err), 0);
	ck_assert_int_eq(g.calls, 2);
	ck_assert_int_eq(pe_store_stat(s, "x", &st), PE_ENOTFOUND);
	free(v1);
	free(v2);
	pe_store_close(s);
}
END_TEST

/* ---- quarantine/ is bounded ---- */

static void make_tmp(int i, size_t bytes)
{
	char name[64], *buf = calloc(1, bytes + 1);
	snprintf(name, sizeof name, ".tmp-t%d.1.1", i);
	write_file(name, buf, bytes);
	free(buf);
}

/* Count and bytes: each start quarantines leftovers; the oldest are dropped to make room, a file
 * larger than the whole budget is deleted instead of moved, and the totals say so. */
START_TEST(quarantine_is_bounded)
{
	q_max_files = 3;
	q_max_bytes = 1000;
	struct pe_store_stats st;
	for (int i = 0; i < 5; i++) {
		make_tmp(i, 100);
		pe_store_close(open_store(1 << 20, 1 << 20));
	}
	char files[1024];
	listing(QUARANTINE, files, sizeof files);
	ck_assert_msg(strstr(files, ".tmp-t0") == NULL && strstr(files, ".tmp-t1") == NULL && strstr(files, ".tmp-t2") &&
			      strstr(files, ".tmp-t3") && strstr(files, ".tmp-t4"), "%s", files);
	ck_assert_msg(strstr(events, "quarantine_dropped .tmp-t0.1.1.") != NULL, "%s", events);
	/* bytes: 3 x 100 held; an 800-byte file needs one of them gone (and makes the fourth file) */
	make_tmp(5, 800);
	struct pe_store *s = open_store(1 << 20, 1 << 20);
	pe_store_stats(s, &st);
	ck_assert_uint_eq(st.quarantine_files, 3);
	ck_assert_uint_eq(st.quarantine_bytes, 1000);
	ck_assert_uint_eq(st.quarantined_total, 1);
	ck_assert_uint_eq(st.quarantine_dropped_total, 1);
	pe_store_close(s);
	listing(QUARANTINE, files, sizeof files);
	ck_assert_msg(strstr(files, ".tmp-t3") && strstr(files, ".tmp-t4") && strstr(files, ".tmp-t5") &&
			      !strstr(files, ".tmp-t2"), "%s", files);
	/* larger than the whole budget: deleted, and quarantine/ keeps what it had */
	make_tmp(6, 1001);
	events[0] = 0;
	s = open_store(1 << 20, 1 << 20);
	pe_store_stats(s, &st);
	ck_assert_uint_eq(st.quarantine_files, 3);
	ck_assert_uint_eq(st.quarantine_bytes, 1000);
	ck_assert_uint_eq(st.quarantined_total, 1);
	ck_assert_msg(strstr(events, "quarantine .tmp-t6.1.1|") != NULL, "%s", events);
	assert_listing(NULL, "quarantine|");
	pe_store_close(s);
	/* a lower limit at the next start trims what is there */
	q_max_files = 1;
	s = open_store(1 << 20, 1 << 20);
	pe_store_stats(s, &st);
	ck_assert_uint_eq(st.quarantine_files, 1);
	ck_assert_uint_eq(st.quarantine_bytes, 800);
	pe_store_close(s);
	listing(QUARANTINE, files, sizeof files);
	ck_assert_msg(strstr(files, ".tmp-t5") && !strstr(files, ".tmp-t4"), "%s", files);
}
END_TEST

/* A table damaged while serving goes into the bounded quarantine too. */
START_TEST(quarantine_bounded_at_read)
{
	q_max_files = 1;
	struct pe_store *s = open_store(1 << 20, 1 << 20);
	float *v = values(8, 1);
	struct pe_err err = {0};
	void *data;
	struct pe_store_meta got;
	for (int i = 0; i < 2; i++) {
		struct pe_store_meta m = meta(i ? "b" : "a", PE_F32, 4, 2);
		put_ok(s, &m, v, 0);
		flip(i ? "b.table" : "a.table", HEADER + 5);
		ck_assert_int_eq(pe_store_read(s, m.name, NULL, &got, &data, &err), PE_EIO);
	}
	struct pe_store_stats st;
	pe_store_stats(s, &st);
	ck_assert_uint_eq(st.quarantine_files, 1);
	ck_assert_uint_eq(st.quarantine_bytes, HEADER + 32);
	ck_assert_uint_eq(st.quarantined_total, 2);
	ck_assert_uint_eq(st.quarantine_dropped_total, 1);
	char files[512];
	listing(QUARANTINE, files, sizeof files);
	ck_assert_msg(!strncmp(files, "b.table.", 8) && strchr(files, '|') == files + strlen(files) - 1, "%s", files);
	done(s, v);
}
END_TEST

/* The directory cannot be synced after a rename or an unlink: the answer says the change is
 * visible but maybe not durable, and the index agrees with the directory. */
START_TEST(unsynced_directory_is_told)
{
	struct pe_store *s = open_store(1 << 20, 1 << 20);
	float *v = values(6, 1);
	struct pe_store_meta m = meta("x", PE_F32, 3, 2), st;
	struct pe_err err = {0};
	atomic_store(&t_fsync_fail_at, 1); /* the temporary file's fsync passes, data_dir's fails */
	ck_assert_int_eq(pe_store_put(s, &m, v, NULL, NULL, NULL, &err), PE_EIO);
	ck_assert_msg(strstr(err.detail, "in place") != NULL, "%s", err.detail);
	ck_assert_int_eq(pe_store_stat(s, "x", &st), 0);
	assert_reads(s, "x", v, 24);
	atomic_store(&t_fsync_fail_at, 0);
	ck_assert_int_eq(pe_store_delete(s, "x", NULL, NULL, &err), PE_EIO);
	ck_assert_msg(strstr(err.detail, "removed") != NULL, "%s", err.detail);
	ck_assert_int_eq(pe_store_stat(s, "x", &st), PE_ENOTFOUND);
	uint64_t bytes;
	size_t n;
	pe_store_usage(s, &bytes, &n);
	ck_assert_uint_eq(bytes, 0);
	done(s, v);
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
	tcase_add_test(tc, second_open_changes_nothing);
	tcase_add_test(tc, scan_leaves_special_files_alone);
	tcase_add_test(tc, read_refuses_special_files);
	tcase_add_test(tc, vanished_file_is_not_found);
	tcase_add_test(tc, replaced_file_is_adopted);
	tcase_add_test(tc, stat_and_list_see_a_removed_file);
	tcase_add_test(tc, stat_and_list_see_a_replaced_file);
	tcase_add_test(tc, stat_sees_a_file_changed_in_place);
	tcase_add_test(tc, versions_differ_by_every_field);
	tcase_add_test(tc, write_called_off_changes_nothing);
	tcase_add_test(tc, quarantine_is_bounded);
	tcase_add_test(tc, quarantine_bounded_at_read);
	tcase_add_test(tc, unsynced_directory_is_told);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
