/* The CLI streams (src/cli/render.c): its output, produced block by block, is byte for byte the
 * whole-table encoding (pe_table_compute, then pe_json_write_table + "\n", pe_npy_write,
 * pe_bin_write or pe_csv_write, as the CLI wrote before it streamed) for every table kind and
 * format, including tables of many blocks, the two paths of rank-3 tables (later planes held in
 * memory, and planes computed one after the other once they are too large for that) and tables
 * computed whole. And
 * its peak RSS (wait4's ru_maxrss) stays under 64 MiB for tables far larger than that, written to
 * a pipe this test drains. */
#include "posenc/posenc.h"
#include "cli/run.h"

#define RSS_LIMIT_KB (64L * 1024)

struct tcase {
	const char *table, *query; /* query: the parameters as "k=v&k=v" */
	unsigned formats;          /* bit per enum pe_format */
};

#define ALL_FMTS (1u << PE_FMT_JSON | 1u << PE_FMT_NPY | 1u << PE_FMT_BIN | 1u << PE_FMT_CSV)
#define RAW_FMTS (1u << PE_FMT_NPY | 1u << PE_FMT_BIN)

static const struct tcase cases[] = {
	{"sinusoidal", "len=3000&dim=64", ALL_FMTS},                   /* three blocks, fused f32 */
	{"sinusoidal", "len=2500&dim=33&dtype=f16", ALL_FMTS},         /* odd width, recurrence */
	{"sinusoidal", "len=700&dim=48&variant=t2t&dtype=f64", ALL_FMTS},
	{"sinusoidal", "len=1&dim=5", ALL_FMTS},
	{"rope", "len=3000&dim=64&compat=hf", ALL_FMTS},               /* planes held in memory */
	{"rope", "len=1500&dim=16&layout=interleaved&dtype=bf16", (1u << PE_FMT_JSON | 1u << PE_FMT_BIN | 1u << PE_FMT_CSV)},
	{"rope", "len=17000&dim=256&dtype=f64", RAW_FMTS},             /* 34 MiB planes: one after the other */
	{"alibi", "heads=3&q_len=40&k_len=50", ALL_FMTS},              /* heads held in memory */
	{"alibi", "heads=3&q_len=2100&k_len=2100&mask=causal", RAW_FMTS}, /* 17 MiB heads: one by one */
	{"relative/t5", "q_len=2000&k_len=30", ALL_FMTS},              /* i32 */
	{"relative/xl", "len=3000&dim=64&clamp_len=900", ALL_FMTS},
	{"sinusoidal2d", "height=5&width=7&dim=16", ALL_FMTS},
	{"sinusoidal2d", "height=60&width=50&dim=96&cls_token=1&variant=timm&compat=hf", ALL_FMTS}, /* blocks */
	{"sinusoidal2d", "height=3&width=900&dim=768&cls_token=70&dtype=f16", ALL_FMTS}, /* grid rows > a block */
	{"sinusoidal2d", "height=50&width=60&dim=32&base_size=64&pos_embed_max_size=192&compat=hf", ALL_FMTS}, /* a crop */
	{"sinusoidal3d", "frames=3&height=30&width=45&dim=64&spatial_interpolation_scale=1.875", ALL_FMTS}, /* planes */
	{"sinusoidal/timestep", "timesteps=0,250.5,999&dim=33&flip_sin_to_cos=1&compat=hf", ALL_FMTS}, /* whole */
	{"rope2d", "height=40&width=75&dim=64&compat=hf", ALL_FMTS},  /* planes held in memory */
	{"rope2d", "height=5&width=7&dim=8&dtype=f16", ALL_FMTS},
	{"rope2d", "height=100&width=170&dim=256&dtype=f64", RAW_FMTS}, /* 34 MiB planes: one after the other */
	{"analysis/similarity", "encoding=sinusoidal&len=300&dim=16", ALL_FMTS}, /* Gram rows by blocks */
	{"analysis/similarity", "encoding=rope&len=700&dim=48&base=500&dtype=f64", ALL_FMTS}, /* 5 blocks */
	{"analysis/similarity", "encoding=rope&len=90&dim=40&compat=hf&dtype=f16", ALL_FMTS},
	{"analysis/similarity", "encoding=sinusoidal&len=150&dim=24&offset=9&dtype=bf16",
	 (1u << PE_FMT_JSON | 1u << PE_FMT_BIN | 1u << PE_FMT_CSV)},
	{"analysis/rope-decay", "dim=16&max_distance=150000&dtype=f64", ALL_FMTS}, /* rank 1 by blocks */
	/* rope/mrope/positions: [3, seq] rows written a window of tokens at a time (2^16 a window) */
	{"rope/mrope/positions", "segments=text:1", ALL_FMTS},
	{"rope/mrope/positions", "segments=text:70000,image:2x8x8,video:3x256x256,text:5&variant=qwen25vl", ALL_FMTS},
	{"analysis/rope-decay", "dim=4&max_distance=140000", ALL_FMTS},  /* f32: the list printer's fast path */
	{"analysis/rope-decay", "dim=8&max_distance=5", ALL_FMTS},
	{"rope/inv_freq", "dim=16", ALL_FMTS},                         /* rank 1, computed whole */
	{"alibi/slopes", "heads=5", ALL_FMTS},
};

/* The table computed and encoded whole, in this process. */
static char *whole(const struct tcase *c, enum pe_format fmt, size_t *len)
{
	struct pe_params p;
	struct pe_err err = {0};
	enum pe_dtype dt = PE_F32;
	char *q = strdup(c->query), *save = NULL;
	const struct pe_table_def *def = pe_table_find(c->table);
	ck_assert_ptr_nonnull(def);
	pe_params_init(&p, def);
	for (char *kv = strtok_r(q, "&", &save); kv; kv = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(kv, '=');
		*eq = 0;
		if (!strcmp(kv, "dtype"))
			ck_assert_int_eq(pe_dtype_parse(eq + 1, &dt), 0);
		else
			ck_assert_msg(pe_params_set(&p, kv, eq + 1, &err) == 0, "%s: %s", kv, err.detail);
	}
	free(q);
	if (def->fixed_dtype != PE_DTYPE_COUNT_)
		dt = def->fixed_dtype;
	ck_assert_int_eq(pe_params_finish(&p, &err), 0);
	struct pe_tensor_view t = {.dtype = dt};
	int overflow;
	ck_assert_int_eq(pe_table_shape(&p, &t.shape), 0);
	size_t n = pe_shape_count(&t.shape, &overflow) * pe_dtype_size(dt);
	void *data = malloc(n);
	ck_assert_ptr_nonnull(data);
	ck_assert_int_eq(pe_table_compute(&p, dt, data, &err), 0);
	t.data = data;
	struct pe_buf b;
	pe_buf_init(&b, SIZE_MAX);
	int rc = fmt == PE_FMT_JSON  ? pe_json_write_table(&b, &p, &t, &err)
		 : fmt == PE_FMT_NPY ? pe_npy_write(&b, &t, &err)
		 : fmt == PE_FMT_BIN ? pe_bin_write(&b, &t)
				     : pe_csv_write(&b, &t, &err);
	ck_assert_int_eq(rc, 0);
	if (fmt == PE_FMT_JSON)
		ck_assert_int_eq(pe_buf_append(&b, "\n", 1), 0);
	free(data);
	pe_params_destroy(&p);
	return pe_buf_steal(&b, len);
}

/* "k=v&k=v" as --k v arguments after the table, then --format. */
static void cli_args(const struct tcase *c, enum pe_format fmt, const char **args, char *store, size_t cap)
{
	int n = 0, k = 0;
	args[n++] = c->table;
	snprintf(store, cap, "%s", c->query);
	char *save = NULL;
	static char keys[16][40];
	for (char *kv = strtok_r(store, "&", &save); kv; kv = strtok_r(NULL, "&", &save), k++) {
		char *eq = strchr(kv, '=');
		*eq = 0;
		snprintf(keys[k], sizeof keys[0], "--%s", kv);
		args[n++] = keys[k];
		args[n++] = eq + 1;
	}
	args[n++] = "--format";
	args[n++] = pe_format_name(fmt);
	args[n] = NULL;
}

START_TEST(streamed_equals_whole)
{
	const struct tcase *c = &cases[_i];
	for (int f = 0; f < PE_FMT_COUNT_; f++) {
		if (!(c->formats >> f & 1))
			continue;
		const char *args[40];
		char store[256];
		cli_args(c, (enum pe_format)f, args, store, sizeof store);
		size_t len;
		char *want = whole(c, (enum pe_format)f, &len);
		struct crun r;
		struct crun_opts o = {0};
		crun_argv(&r, &o, args);
		crun_expect_ok(&r);
		size_t at = 0;
		while (at < len && at < r.nout && want[at] == r.out[at])
			at++;
		ck_assert_msg(r.nout == len && at == len, "%s?%s as %s: %zu bytes, expected %zu, first difference at %zu",
			      c->table, c->query, pe_format_name((enum pe_format)f), r.nout, len, at);
		crun_free(&r);
		free(want);
	}
}
END_TEST

/* Peak RSS of a run whose stdout this test drains (and only counts). An AddressSanitizer build of
 * the CLI (make asan sets POSENC_CLI) keeps freed blocks in a quarantine of 256 MiB by default,
 * which is the sanitizer's memory, not the CLI's: it runs with the quarantine off here. A
 * ThreadSanitizer build's (make tsan builds this test and the CLI it runs, build/tsan/posenc) shadow
 * grows with every byte the CLI touches: there only the output is checked. */
static void expect_small_rss(size_t want_bytes, ...)
{
	const char *asan = getenv("ASAN_OPTIONS");
	char opts[512];
	snprintf(opts, sizeof opts, "%s%squarantine_size_mb=0", asan ? asan : "", asan && *asan ? ":" : "");
	setenv("ASAN_OPTIONS", opts, 1);
	const char *args[40];
	int n = 0;
	va_list ap;
	va_start(ap, want_bytes);
	for (const char *a; (a = va_arg(ap, const char *));)
		args[n++] = a;
	va_end(ap);
	args[n] = NULL;
	struct crun r;
	struct crun_opts o = {.count_only = 1};
	crun_argv(&r, &o, args);
	crun_expect_ok(&r);
	if (want_bytes)
		ck_assert_uint_eq(r.nout, want_bytes);
#if !defined(__SANITIZE_THREAD__)
	ck_assert_msg(r.maxrss_kb < RSS_LIMIT_KB, "%s %s: peak RSS %ld KiB for %zu bytes of output", args[0], args[1],
		      r.maxrss_kb, r.nout);
#endif
	crun_free(&r);
}

START_TEST(rss_of_a_1gib_rope_table)
{
	expect_small_rss((size_t)1 << 30, "rope", "--len", "1048576", "--dim", "128", "--format", "bin", NULL);
}
END_TEST

START_TEST(rss_of_a_512mib_alibi_table)
{
	expect_small_rss((size_t)512 << 20, "alibi", "--heads", "8", "--q-len", "4096", "--k-len", "4096", "--format", "bin",
			 NULL);
}
END_TEST

/* The 2-D tables: 256 MiB of sinusoidal2d (one cls row), 512 MiB of rope2d (planes too large to
 * hold, computed one after the other), and JSON of both. */
START_TEST(rss_of_large_2d_tables)
{
	expect_small_rss(((size_t)256 * 256 + 1) * 1024 * 4, "sinusoidal2d", "--height", "256", "--width", "256",
			 "--dim", "1024", "--cls-token", "1", "--format", "bin", NULL);
	expect_small_rss((size_t)2 * 256 * 256 * 1024 * 4, "rope2d", "--height", "256", "--width", "256", "--dim",
			 "1024", "--format", "bin", NULL);
	expect_small_rss(0, "sinusoidal2d", "--height", "128", "--width", "128", "--dim", "1024", "--variant", "timm",
			 "--compat", "hf", NULL); /* 64 MiB of f32, ~190 MB of JSON */
	expect_small_rss(0, "rope2d", "--height", "96", "--width", "96", "--dim", "1024", "--format", "csv", NULL);
}
END_TEST

/* The analyses: a 512 MiB similarity (its encoding's rows made again for each block of output
 * rows, its Gram rows computed a block at a time), a small one whose encoding rows alone take
 * 80 MiB (made in sub-blocks of rows and blocks of columns), 64 MiB of f32 similarity as CSV, and
 * the largest rope-decay as JSON (one list of 2^20 numbers, written a slice at a time). */
START_TEST(rss_of_large_analyses)
{
	expect_small_rss((size_t)512 << 20, "analysis/similarity", "--encoding", "rope", "--len", "8192", "--dim", "64",
			 "--dtype", "f64", "--format", "bin", NULL);
	expect_small_rss((size_t)160 * 160 * 4, "analysis/similarity", "--len", "160", "--dim", "65536", "--format", "bin",
			 NULL);
	expect_small_rss(0, "analysis/similarity", "--len", "4096", "--dim", "32", "--format", "csv", NULL);
	expect_small_rss(0, "analysis/rope-decay", "--max-distance", "1048576", "--dim", "2", "--dtype", "f64", NULL);
}
END_TEST

/* rope/mrope/positions at its largest sequence (2^24 tokens): 192 MiB of i32 in three rows of 64 MiB
 * each, ~420 MB as JSON or CSV (it was computed whole: 335 MB peak RSS for the JSON). */
START_TEST(rss_of_the_largest_mrope_positions)
{
	expect_small_rss((size_t)3 << 26, "rope/mrope/positions", "--segments", "text:16777216", "--format", "bin", NULL);
	expect_small_rss(0, "rope/mrope/positions", "--segments", "text:16777215,image:1x2x2", "--format", "json", NULL);
	expect_small_rss(0, "rope/mrope/positions", "--segments", "video:1024x128x128", "--format", "csv", NULL);
}
END_TEST

START_TEST(rss_of_large_json_and_csv)
{
	expect_small_rss(0, "sinusoidal", "--len", "16384", "--dim", "1024", NULL);  /* ~190 MB of JSON */
	expect_small_rss(0, "rope", "--len", "65536", "--dim", "256", "--format", "csv", NULL);
	expect_small_rss((size_t)16384 * 2048 * 8 + 128, "sinusoidal", "--len", "16384", "--dim", "2048", "--dtype",
			 "f64", "--format", "npy", NULL);
}
END_TEST

static Suite *stream_suite(void)
{
	Suite *s = suite_create("cli_stream");
	TCase *eq = tcase_create("bytes");
	tcase_set_timeout(eq, 120);
	tcase_add_loop_test(eq, streamed_equals_whole, 0, (int)(sizeof cases / sizeof cases[0]));
	suite_add_tcase(s, eq);
	TCase *rss = tcase_create("rss");
	tcase_set_timeout(rss, 300);
	tcase_add_test(rss, rss_of_a_1gib_rope_table);
	tcase_add_test(rss, rss_of_a_512mib_alibi_table);
	tcase_add_test(rss, rss_of_large_json_and_csv);
	tcase_add_test(rss, rss_of_large_2d_tables);
	tcase_add_test(rss, rss_of_large_analyses);
	tcase_add_test(rss, rss_of_the_largest_mrope_positions);
	suite_add_tcase(s, rss);
	return s;
}

PE_TEST_MAIN(stream_suite)
