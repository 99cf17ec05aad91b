/* pe_table_compute_rows: every block of a streamed table is byte for byte the whole table's rows.
 *
 * For each table with a row computation, parameter sets that take each path of its computation
 * (sinusoidal: fused f32, recurrence for f16/bf16 and hf, direct f64, odd dims, t2t; rope: exact,
 * hf, ggml, scalings, both layouts, every dtype; alibi with and without the causal mask, T5
 * buckets, Transformer-XL sinusoids; sinusoidal2d's mae and timm layouts, exact and hf, with cls
 * rows before, inside and past a block; rope2d exact and hf; grids wider and narrower than a
 * block), computed whole and then in blocks of sizes that
 * start on and off the anchors (1, 7, 63, 64, 65, 1000, 1024, 1500 rows), at each ISA the CPU has. */
#include "posenc/posenc.h"
#include "support/pe_check.h"
#include "support/pe_table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tcase {
	const char *table, *query;
};

static const struct tcase cases[] = {
	{"sinusoidal", "len=3000&dim=64"},
	{"sinusoidal", "len=2100&dim=33"},
	{"sinusoidal", "len=2100&dim=20&offset=1000000"},
	{"sinusoidal", "len=1500&dim=48&variant=concat&compat=hf"},
	{"sinusoidal", "len=1500&dim=15&variant=t2t"},
	{"sinusoidal", "len=1100&dim=16&base=0.5"},
	{"sinusoidal", "len=2&dim=16"},
	{"rope", "len=3000&dim=64"},
	{"rope", "len=1500&dim=32&layout=interleaved&compat=hf"},
	{"rope", "len=1300&dim=16&compat=ggml"},
	{"rope", "len=1300&dim=24&scaling=yarn&factor=4&original_max_position_embeddings=256"},
	{"rope", "len=1300&dim=16&scaling=dynamic&factor=2&original_max_position_embeddings=512&offset=7"},
	{"rope", "len=1&dim=8"},
	{"alibi", "heads=3&q_len=1100&k_len=40"},
	{"alibi", "heads=12&q_len=1030&k_len=9&offset=5&mask=causal"},
	{"relative/t5", "q_len=1100&k_len=30"},
	{"relative/xl", "len=1100&dim=16&clamp_len=700&compat=hf"},
	{"sinusoidal2d", "height=37&width=41&dim=16"},
	{"sinusoidal2d", "height=30&width=50&dim=32&cls_token=1&variant=timm"},
	{"sinusoidal2d", "height=25&width=60&dim=20&cls_token=70&compat=hf"},
	{"sinusoidal2d", "height=20&width=70&dim=8&cls_token=3&variant=timm&compat=hf&base=100"},
	{"sinusoidal2d", "height=2&width=1100&dim=12&cls_token=1"},
	{"sinusoidal2d", "height=1100&width=1&dim=4&cls_token=1100"},
	{"sinusoidal2d", "height=40&width=37&dim=8&base_size=64&pos_embed_max_size=192&compat=hf"},
	{"sinusoidal3d", "frames=3&height=33&width=41&dim=16&spatial_interpolation_scale=1.875"},
	{"rope2d", "height=37&width=41&dim=16"},
	{"rope2d", "height=20&width=70&dim=32&compat=hf"},
	{"rope2d", "height=2&width=1100&dim=8&base=100"},
	{"rope2d", "height=1100&width=1&dim=12&compat=hf"},
};

static const size_t blocks[] = {1, 7, 63, 64, 65, 1000, 1024, 1500};

static void params_from(struct pe_params *p, const char *table, const char *query)
{
	struct pe_err err;
	ck_assert_msg(pe_query_params(p, table, query, &err) == 0, "%s?%s: %s: %s", table, query, err.param, err.detail);
}

/* Blocks of `block` rows, plane by plane, against the whole table. Blocks are computed last to
 * first: a freed job's memory reused by the next call cannot then hold the state a block needs. */
static void check_blocks(const struct pe_params *p, enum pe_dtype dt, const char *whole, const struct pe_shape *s,
			 size_t block, const char *what)
{
	size_t planes = s->rank == 3 ? s->dim[0] : 1, rows = s->dim[s->rank - 2];
	size_t row_bytes = s->dim[s->rank - 1] * pe_dtype_size(dt);
	char *buf = malloc(block * row_bytes);
	struct pe_err err = {0};
	ck_assert_ptr_nonnull(buf);
	size_t nblocks = (rows + block - 1) / block;
	for (size_t pl = 0; pl < planes; pl++)
		for (size_t k = nblocks; k-- > 0;) { /* last block first: no state carries over by accident */
			size_t r0 = k * block, n = rows - r0 < block ? rows - r0 : block;
			ck_assert_int_eq(pe_table_compute_rows(p, dt, pl, r0, n, buf, &err), 0);
			const char *want = whole + (pl * rows + r0) * row_bytes;
			ck_assert_msg(!memcmp(buf, want, n * row_bytes), "%s %s: plane %zu rows %zu+%zu differ", what,
				      pe_dtype_name(dt), pl, r0, n);
		}
	free(buf);
	if (planes == 1)
		return;
	buf = malloc(planes * block * row_bytes); /* every plane at once */
	ck_assert_ptr_nonnull(buf);
	for (size_t k = nblocks; k-- > 0;) {
		size_t r0 = k * block, n = rows - r0 < block ? rows - r0 : block;
		ck_assert_int_eq(pe_table_compute_rows(p, dt, PE_TABLE_ALL_PLANES, r0, n, buf, &err), 0);
		for (size_t pl = 0; pl < planes; pl++)
			ck_assert_msg(!memcmp(buf + pl * n * row_bytes, whole + (pl * rows + r0) * row_bytes, n * row_bytes),
				      "%s %s: all planes, plane %zu rows %zu+%zu differ", what, pe_dtype_name(dt), pl, r0, n);
	}
	free(buf);
}

static void check_case(const struct tcase *c)
{
	static const enum pe_dtype dts[] = {PE_F32, PE_F64, PE_F16, PE_BF16};
	struct pe_params p;
	struct pe_shape s;
	struct pe_err err = {0};
	char what[160];
	params_from(&p, c->table, c->query);
	snprintf(what, sizeof what, "%s?%s", c->table, c->query);
	ck_assert(pe_table_rows_supported(&p));
	ck_assert_int_eq(pe_table_shape(&p, &s), 0);
	int overflow;
	for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
		if (p.def->fixed_dtype != PE_DTYPE_COUNT_ && dts[d] != PE_F32)
			continue;
		enum pe_dtype dt = p.def->fixed_dtype != PE_DTYPE_COUNT_ ? p.def->fixed_dtype : dts[d];
		size_t bytes = pe_shape_count(&s, &overflow) * pe_dtype_size(dt);
		char *whole = malloc(bytes);
		ck_assert_ptr_nonnull(whole);
		ck_assert_int_eq(pe_table_compute(&p, dt, whole, &err), 0);
		for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++)
			check_blocks(&p, dt, whole, &s, blocks[b], what);
		free(whole);
	}
	pe_params_destroy(&p);
}

START_TEST(blocks_equal_the_whole_table)
{
	static const enum pe_isa isas[] = {PE_ISA_SCALAR, PE_ISA_AVX2, PE_ISA_AVX512};
	for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
		if (pe_isa_force(isas[i]) != 0)
			continue;
		check_case(&cases[_i]);
	}
}
END_TEST

/* The recurrence's last bits show in float32 only now and then: a large table, so that a block
 * started without replaying its anchor (computed directly instead) would differ somewhere. */
START_TEST(large_rope_blocks)
{
	struct pe_params p;
	struct pe_shape s;
	struct pe_err err = {0};
	int overflow;
	params_from(&p, "rope", "len=65536&dim=128&base=500000");
	ck_assert_int_eq(pe_table_shape(&p, &s), 0);
	size_t bytes = pe_shape_count(&s, &overflow) * 4;
	char *whole = malloc(bytes);
	ck_assert_ptr_nonnull(whole);
	ck_assert_int_eq(pe_table_compute(&p, PE_F32, whole, &err), 0);
	check_blocks(&p, PE_F32, whole, &s, 100, "rope?len=65536&dim=128&base=500000");
	free(whole);
	pe_params_destroy(&p);
}
END_TEST

START_TEST(out_of_range_and_unsupported)
{
	struct pe_params p;
	struct pe_err err = {0};
	float buf[64];
	params_from(&p, "sinusoidal", "len=4&dim=4");
	ck_assert_int_eq(pe_table_compute_rows(&p, PE_F32, 1, 0, 1, buf, &err), PE_EINTERNAL); /* no plane 1 */
	ck_assert_int_eq(pe_table_compute_rows(&p, PE_F32, 0, 3, 2, buf, &err), PE_EINTERNAL); /* past len */
	ck_assert_int_eq(pe_table_compute_rows(&p, PE_F32, 0, 4, 0, buf, &err), 0);
	pe_params_destroy(&p);
	params_from(&p, "rope/inv_freq", "dim=8");
	ck_assert(!pe_table_rows_supported(&p));
	ck_assert_int_eq(pe_table_compute_rows(&p, PE_F32, 0, 0, 1, buf, &err), PE_EINTERNAL);
	pe_params_destroy(&p);
}
END_TEST

static Suite *rows_suite(void)
{
	Suite *s = suite_create("table_rows");
	TCase *tc = tcase_create("rows");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, blocks_equal_the_whole_table, 0, (int)(sizeof cases / sizeof cases[0]));
	tcase_add_test(tc, large_rope_blocks);
	tcase_add_test(tc, out_of_range_and_unsupported);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(rows_suite)
