/* A struct pe_buf that starts in the caller's memory (pe_buf_use, the HTTP job's stack): writes go
 * there while they fit, nothing is allocated or reserved on the budget meanwhile; growth moves the
 * bytes into a 64-byte aligned block charged as any; steal/take copy what is still in the caller's
 * memory into a block of exactly len + 1, reserved on the budget (refused: the code, no block);
 * max holds to the byte; destroy never frees the caller's memory; and a JSON document written
 * through one is the same bytes as through a plain buffer. */
#include "posenc/tensor.h"
#include "support/pe_check.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static size_t used(const struct pe_budget *g)
{
	struct pe_budget_stats st;
	pe_budget_stats(g, &st);
	return st.used;
}

START_TEST(writes_stay_in_the_callers_memory)
{
	_Alignas(64) char mem[256];
	struct pe_budget *g = pe_budget_new(1u << 20);
	struct pe_buf b;
	pe_buf_init(&b, 1000);
	pe_buf_set_budget(&b, g);
	pe_buf_use(&b, mem, sizeof mem);
	ck_assert_ptr_eq(b.data, mem);
	ck_assert_uint_eq(b.cap, sizeof mem - 1); /* the spare byte */
	ck_assert_int_eq(pe_buf_puts(&b, "hello "), 0);
	ck_assert_int_eq(pe_buf_printf(&b, "%d", 42), 0);
	ck_assert_ptr_eq(b.data, mem);
	ck_assert_uint_eq(used(g), 0); /* nothing reserved for the caller's bytes */
	ck_assert_uint_eq(pe_buf_block_after(&b, 10), 0);
	size_t len;
	char *p = pe_buf_steal(&b, &len);
	ck_assert_ptr_nonnull(p);
	ck_assert_ptr_ne(p, mem);
	ck_assert_uint_eq(len, 8);
	ck_assert_str_eq(p, "hello 42");
	ck_assert_uint_eq(used(g), pe_mem_size(p)); /* the copy is counted as a stolen block is */
	ck_assert_uint_le(pe_mem_size(p), 24); /* one exact malloc: the allocator's rounding only */
	ck_assert_ptr_null(b.data);
	ck_assert_int_eq(b.borrowed, 0);
	pe_budget_free_block(g, p);
	ck_assert_uint_eq(used(g), 0);
	pe_buf_destroy(&b);
	pe_budget_free(g);
}
END_TEST

/* Growth past the caller's bytes: the contents move into an aligned block reserved on the budget;
 * from there the buffer is an ordinary one (steal hands the block out, destroy frees it). */
START_TEST(growth_moves_to_the_heap)
{
	char mem[64];
	struct pe_budget *g = pe_budget_new(1u << 20);
	struct pe_buf b;
	pe_buf_init(&b, 1u << 16);
	pe_buf_set_budget(&b, g);
	pe_buf_use(&b, mem, sizeof mem);
	char text[1000];
	for (size_t i = 0; i < sizeof text; i++)
		text[i] = (char)('a' + i % 26);
	ck_assert_int_eq(pe_buf_append(&b, text, 50), 0);
	ck_assert_ptr_eq(b.data, mem);
	ck_assert_int_eq(pe_buf_append(&b, text + 50, 950), 0);
	ck_assert_ptr_ne(b.data, mem);
	ck_assert_int_eq(b.borrowed, 0);
	ck_assert_uint_eq((uintptr_t)b.data % 64, 0);
	ck_assert(memcmp(b.data, text, sizeof text) == 0);
	ck_assert_uint_eq(used(g), pe_mem_size(b.data));
	ck_assert_uint_eq(b.held, used(g));
	pe_buf_destroy(&b); /* frees the heap block, not mem */
	ck_assert_uint_eq(used(g), 0);

	pe_buf_init(&b, 1u << 16);
	pe_buf_set_budget(&b, g);
	pe_buf_use(&b, mem, sizeof mem);
	ck_assert_int_eq(pe_buf_append(&b, text, 200), 0);
	size_t len;
	char *p = pe_buf_steal(&b, &len);
	ck_assert_uint_eq(len, 200);
	ck_assert(memcmp(p, text, 200) == 0);
	ck_assert_int_eq(p[200], 0);
	ck_assert_uint_eq(used(g), pe_mem_size(p));
	pe_budget_free_block(g, p);
	ck_assert_uint_eq(used(g), 0);
	pe_budget_free(g);
}
END_TEST

/* The caller's memory never lets the buffer past max, and a failed write changes nothing. */
START_TEST(max_still_holds)
{
	char mem[128];
	struct pe_buf b;
	pe_buf_init(&b, 10);
	pe_buf_use(&b, mem, sizeof mem);
	ck_assert_uint_eq(b.cap, 10);
	ck_assert_int_eq(pe_buf_append(&b, "0123456789", 10), 0);
	ck_assert_int_eq(pe_buf_append(&b, "x", 1), PE_ETOOBIG);
	ck_assert_uint_eq(b.len, 10);
	ck_assert_ptr_eq(b.data, mem);
	pe_buf_destroy(&b);
	ck_assert_ptr_null(b.data);

	pe_buf_init(&b, 0); /* nothing may be written */
	pe_buf_use(&b, mem, sizeof mem);
	ck_assert_int_eq(pe_buf_append(&b, "x", 1), PE_ETOOBIG);
	pe_buf_destroy(&b);

	pe_buf_init(&b, 100); /* too small to use, or a buffer that has a block: ignored */
	pe_buf_use(&b, mem, 1);
	ck_assert_ptr_null(b.data);
	ck_assert_int_eq(pe_buf_append(&b, "x", 1), 0);
	char *held = b.data;
	pe_buf_use(&b, mem, sizeof mem);
	ck_assert_ptr_eq(b.data, held);
	pe_buf_destroy(&b);
}
END_TEST

/* A full budget refuses the copy: take says why and hands out nothing; the buffer is left empty
 * and nothing stays reserved. */
START_TEST(take_refused_by_the_budget)
{
	char mem[4096];
	struct pe_budget *g = pe_budget_new(1u << 20);
	ck_assert_int_eq(pe_budget_take(g, (1u << 20) - 100), 0);
	struct pe_buf b;
	pe_buf_init(&b, 4000);
	pe_buf_set_budget(&b, g);
	pe_buf_use(&b, mem, sizeof mem);
	memset(mem, 'z', 1000);
	ck_assert_int_eq(pe_buf_reserve(&b, 1000), 0);
	b.len = 1000;
	char *p = (char *)1;
	size_t len = 7;
	ck_assert_int_eq(pe_buf_take(&b, &p, &len), PE_EBUSY);
	ck_assert_ptr_null(p);
	ck_assert_uint_eq(len, 0);
	ck_assert_ptr_null(b.data);
	ck_assert_uint_eq(used(g), (1u << 20) - 100);
	pe_budget_give(g, (1u << 20) - 100);

	pe_buf_init(&b, 4000); /* with room: the same call hands out the copy */
	pe_buf_set_budget(&b, g);
	pe_buf_use(&b, mem, sizeof mem);
	char text[999];
	memset(text, 'y', sizeof text);
	ck_assert_int_eq(pe_buf_append(&b, text, sizeof text), 0);
	ck_assert_int_eq(pe_buf_take(&b, &p, &len), 0);
	ck_assert_uint_eq(len, 999);
	ck_assert(memcmp(p, text, sizeof text) == 0);
	ck_assert_uint_eq(used(g), pe_mem_size(p));
	pe_budget_free_block(g, p);
	pe_budget_free(g);
}
END_TEST

/* JSON through the caller's memory (fits), through too little of it (moves), and through a plain
 * buffer: the same document. */
START_TEST(json_same_bytes)
{
	float v[16 * 16];
	for (size_t i = 0; i < 256; i++)
		v[i] = (float)i / 7.0f - 3.0f;
	struct pe_tensor_view t = {{2, {16, 16}}, PE_F32, v};
	struct pe_buf plain, small, tiny;
	_Alignas(64) static char mem[16384], little[100];
	pe_buf_init(&plain, 1u << 20);
	pe_buf_init(&small, 1u << 20);
	pe_buf_init(&tiny, 1u << 20);
	pe_buf_use(&small, mem, sizeof mem);
	pe_buf_use(&tiny, little, sizeof little);
	ck_assert_int_eq(pe_json_write_table(&plain, NULL, &t, NULL), 0);
	ck_assert_int_eq(pe_json_write_table(&small, NULL, &t, NULL), 0);
	ck_assert_int_eq(pe_json_write_table(&tiny, NULL, &t, NULL), 0);
	ck_assert_ptr_eq(small.data, mem);
	ck_assert_ptr_ne(tiny.data, little);
	size_t a, b, c;
	char *pa = pe_buf_steal(&plain, &a), *pb = pe_buf_steal(&small, &b), *pc = pe_buf_steal(&tiny, &c);
	ck_assert_uint_eq(a, b);
	ck_assert_uint_eq(a, c);
	ck_assert(memcmp(pa, pb, a) == 0);
	ck_assert(memcmp(pa, pc, a) == 0);
	ck_assert_uint_lt(pe_mem_size(pb), b + 1 + 32);
	free(pa);
	free(pb);
	free(pc);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("buf_use");
	TCase *tc = tcase_create("borrowed");
	tcase_add_test(tc, writes_stay_in_the_callers_memory);
	tcase_add_test(tc, growth_moves_to_the_heap);
	tcase_add_test(tc, max_still_holds);
	tcase_add_test(tc, take_refused_by_the_budget);
	tcase_add_test(tc, json_same_bytes);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
