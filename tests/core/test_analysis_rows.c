/* The analysis tables by blocks of rows (pe_table_compute_rows, what the CLI streams) against the
 * whole table (pe_table_compute, what posencd serves): byte for byte, on every ISA this machine
 * has and in every dtype. The blocks are computed last to first, each into its own buffer filled
 * with a pattern first, so a block that leans on what an earlier one left behind (a reused
 * allocation once hid such a bug) or leaves a byte unwritten differs. Sizes cover partial tiles,
 * blocks that cross tile boundaries, and rows so wide (dim 65536) that the similarity's rows X are
 * made in sub-blocks of output rows and blocks of columns instead of whole. */
#include "support/pe_check.h"
#include "support/pe_table.h"

#include <stdlib.h>
#include <string.h>

#include "posenc/posenc.h"

static const enum pe_dtype dtypes[] = {PE_F64, PE_F32, PE_F16, PE_BF16};

/* Compare blocks of `block` rows (the last one shorter) with the whole table in dt. */
static void blocks_equal_whole(const char *table, const char *query, size_t block, enum pe_dtype dt)
{
	struct pe_params p;
	struct pe_err err = {0};
	struct pe_shape s;
	int of;
	ck_assert_msg(pe_query_params(&p, table, query, &err) == 0, "%s?%s: %s", table, query, err.detail);
	ck_assert_int_eq(pe_table_shape(&p, &s), 0);
	ck_assert_msg(pe_table_rows_supported(&p), "%s?%s has no row computation", table, query);
	size_t esz = pe_dtype_size(dt), rows = s.rank >= 2 ? s.dim[s.rank - 2] : s.dim[0];
	size_t count = pe_shape_count(&s, &of), row_bytes = count / rows * esz;
	char *whole = malloc(count * esz);
	ck_assert_ptr_nonnull(whole);
	ck_assert_int_eq(pe_table_compute(&p, dt, whole, &err), 0);
	size_t last = (rows - 1) / block * block;
	for (size_t r0 = last;; r0 -= block) {
		size_t n = rows - r0 < block ? rows - r0 : block;
		char *got = malloc(n * row_bytes);
		ck_assert_ptr_nonnull(got);
		memset(got, 0xa5, n * row_bytes);
		int rc = pe_table_compute_rows(&p, dt, 0, r0, n, got, &err);
		ck_assert_msg(rc == 0, "%s?%s rows %zu+%zu: %s", table, query, r0, n, err.detail);
		size_t at = 0;
		while (at < n * row_bytes && got[at] == whole[r0 * row_bytes + at])
			at++;
		ck_assert_msg(at == n * row_bytes, "%s?%s %s %s: rows %zu+%zu differ from the whole table at row %zu, byte %zu",
			      table, query, pe_isa_name(), pe_dtype_name(dt), r0, n, r0 + at / row_bytes, at % row_bytes);
		free(got);
		if (r0 == 0)
			break;
	}
	free(whole);
	pe_params_destroy(&p);
}

static void every_isa_and_dtype(const char *table, const char *query, size_t block)
{
	int tried = 0;
	for (int isa = PE_ISA_SCALAR; isa <= PE_ISA_AVX512; isa++) {
		if (pe_isa_force((enum pe_isa)isa) != 0)
			continue;
		tried++;
		for (size_t k = 0; k < sizeof dtypes / sizeof dtypes[0]; k++)
			blocks_equal_whole(table, query, block, dtypes[k]);
	}
	ck_assert_int_ge(tried, 1);
}

START_TEST(similarity_blocks_equal_whole)
{
	every_isa_and_dtype("analysis/similarity", "encoding=sinusoidal&len=300&dim=16&offset=5", 7);
	every_isa_and_dtype("analysis/similarity", "encoding=sinusoidal&len=97&dim=1037", 33);
	every_isa_and_dtype("analysis/similarity", "encoding=rope&len=200&dim=64&base=500&compat=hf", 13);
	every_isa_and_dtype("analysis/similarity", "encoding=rope&len=130&dim=40&scaling=yarn&factor=4&"
			    "original_max_position_embeddings=32", 64);
	every_isa_and_dtype("analysis/similarity", "encoding=sinusoidal&len=1&dim=3", 1);
}
END_TEST

/* Rows of 512 KiB: the output rows' X in sub-blocks of 16 rows, the columns' in blocks of 4. */
START_TEST(similarity_of_wide_rows_blocks_equal_whole)
{
	every_isa_and_dtype("analysis/similarity", "encoding=rope&len=45&dim=65536", 37);
	every_isa_and_dtype("analysis/similarity", "encoding=sinusoidal&len=21&dim=65536", 20);
}
END_TEST

START_TEST(rope_decay_blocks_equal_whole)
{
	every_isa_and_dtype("analysis/rope-decay", "dim=128&max_distance=1000", 64);
	every_isa_and_dtype("analysis/rope-decay", "dim=6&base=500&max_distance=333", 100);
}
END_TEST

static Suite *rows_suite(void)
{
	Suite *s = suite_create("analysis_rows");
	TCase *tc = tcase_create("blocks");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, similarity_blocks_equal_whole);
	tcase_add_test(tc, similarity_of_wide_rows_blocks_equal_whole);
	tcase_add_test(tc, rope_decay_blocks_equal_whole);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(rows_suite)
