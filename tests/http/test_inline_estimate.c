/* The inline estimate's verdict (src/http/table.c pe_table_estimate_ns, produce.c): tables whose
 * elements are few but each costly, or whose rows are many and narrow, must not be judged small
 * enough for the HTTP thread at the default inline_max_us (50 us). Each case below is a request a
 * hostile client can send, measured at 4-23x the old estimate's verdict (116-1170 us where the
 * old formula said 11-99 us: compute + encode, one thread). The issue's own target, a 16x16 f32
 * JSON table, stays inline. Asserts verdicts on parameters only, never times. */
#include "support/pe_check.h"

#include <stdio.h>
#include <string.h>

#include "http/produce.h"

#define INLINE_MAX_NS (50u * 1000u) /* the default inline_max_us */

/* The estimate of /v1/<table>?<query> encoded as fmt in dt, gzip'd if gzip; query is "k=v&k=v". */
static uint64_t estimate_gz(const char *table, const char *query, enum pe_format fmt, enum pe_dtype dt, int gzip)
{
	struct pe_params p;
	struct pe_err err = {0};
	char q[256];
	const struct pe_table_def *def = pe_table_find(table);
	ck_assert_ptr_nonnull(def);
	pe_params_init(&p, def);
	snprintf(q, sizeof q, "%s", query);
	for (char *save = NULL, *kv = strtok_r(q, "&", &save); kv; kv = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(kv, '=');
		ck_assert_ptr_nonnull(eq);
		*eq = 0;
		ck_assert_msg(pe_params_set(&p, kv, eq + 1, &err) == 0, "%s: %s", kv, err.detail);
	}
	ck_assert_msg(pe_params_finish(&p, &err) == 0, "%s?%s: %s", table, query, err.detail);
	struct pe_out o = {.fmt = fmt, .dt = dt, .gzip = gzip};
	uint64_t ns = pe_table_estimate_ns(&p, &o);
	pe_params_destroy(&p);
	return ns;
}

static uint64_t estimate(const char *table, const char *query, enum pe_format fmt, enum pe_dtype dt)
{
	return estimate_gz(table, query, fmt, dt, 0);
}

/* Requests a hostile client can send, each measured far above INLINE_MAX_NS as binary. */
static const struct heavy {
	const char *table, *query;
	enum pe_dtype dt;
} heavy[] = {
	/* narrow rows, ~40-110 ns per row whatever the width: 820 us, 1040 us, 430 us, 620 us, 440 us measured */
	{"sinusoidal", "len=20000&dim=1", PE_F32},
	{"rope", "len=10000&dim=2&compat=ggml", PE_F32},
	{"rope/mrope", "segments=text:2000&dim=2&mrope_section=1,0,0", PE_F32},
	{"rope2d", "height=5000&width=1&dim=4", PE_F32},
	{"relative/xl", "len=10000&dim=2", PE_F32},
	{"relative/t5", "q_len=20000&k_len=1", PE_I32},
	/* costly elements: a pow per element (116 us), half-precision stores (221 us), M-RoPE's gathers (107 us) */
	{"rope/inv_freq", "dim=8192", PE_F32},
	{"rope", "len=64&dim=128", PE_BF16},
	{"rope", "len=64&dim=128&compat=hf", PE_F16},
	{"rope/mrope", "segments=text:64&dim=128", PE_F32},
	/* analysis: a tiny answer over a wide encoding table: 200 us, 296 us, 1170 us measured */
	{"analysis/similarity", "len=2&dim=8000", PE_F32},
	{"analysis/similarity", "len=4&dim=4096&encoding=rope", PE_F32},
	{"analysis/order", "len=2&dim=4000&encoding=rope", PE_F32},
};

START_TEST(heavy_not_inline)
{
	const struct heavy *h = &heavy[_i];
	uint64_t ns = estimate(h->table, h->query, PE_FMT_BIN, h->dt);
	ck_assert_msg(ns > INLINE_MAX_NS, "%s?%s estimated %llu ns: inline, but it takes far longer", h->table,
		      h->query, (unsigned long long)ns);
}
END_TEST

/* gzip's fixed cost per response (libdeflate resets its hash tables on every call; its compressor
 * is kept per thread): a gzip'd 1x2 or 4x4 JSON table cost the HTTP thread 8-48 us more than the
 * same without gzip, ~25 us median (posencd, 1000 distinct requests, the thread's CPU), where the
 * per-element estimate alone says ~1 us. Whatever the size, a gzip'd answer is estimated at no
 * less than that median more than the same plain; from 8x8 on it is never inline. */
#define GZIP_SETUP_NS (25u * 1000u)

START_TEST(gzip_priced_with_its_setup)
{
	static const char *const tables[][2] = {
		{"sinusoidal", "len=1&dim=2"}, {"sinusoidal", "len=4&dim=4"}, {"rope/inv_freq", "dim=2"},
		{"alibi/slopes", "heads=1"},  {"relative/t5", "q_len=1&k_len=1"},
	};
	for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
		for (int k = 0; k < 2; k++) {
			enum pe_format f = k ? PE_FMT_CSV : PE_FMT_JSON; /* the formats gzip applies to */
			uint64_t plain = estimate_gz(tables[i][0], tables[i][1], f, PE_F32, 0);
			uint64_t gz = estimate_gz(tables[i][0], tables[i][1], f, PE_F32, 1);
			ck_assert_msg(gz >= plain + GZIP_SETUP_NS, "%s?%s gzip'd estimated %llu ns, plain %llu",
				      tables[i][0], tables[i][1], (unsigned long long)gz, (unsigned long long)plain);
		}
	}
	ck_assert_uint_gt(estimate_gz("sinusoidal", "len=8&dim=8", PE_FMT_JSON, PE_F32, 1), INLINE_MAX_NS);
}
END_TEST

START_TEST(small_table_still_inline)
{
	/* the cold 16x16 JSON miss */
	ck_assert_uint_le(estimate("sinusoidal", "len=16&dim=16", PE_FMT_JSON, PE_F32), INLINE_MAX_NS);
	ck_assert_uint_le(estimate("rope", "len=16&dim=16", PE_FMT_JSON, PE_F32), INLINE_MAX_NS);
	/* PNG never */
	ck_assert_uint_eq(estimate("sinusoidal", "len=4&dim=4", PE_FMT_PNG, PE_F32), UINT64_MAX);
}
END_TEST

static Suite *estimate_suite(void)
{
	Suite *s = suite_create("inline_estimate");
	TCase *tc = tcase_create("inline_estimate");
	tcase_add_loop_test(tc, heavy_not_inline, 0, (int)(sizeof heavy / sizeof heavy[0]));
	tcase_add_test(tc, gzip_priced_with_its_setup);
	tcase_add_test(tc, small_table_still_inline);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(estimate_suite)
