/* struct pe_buf: appends, the hard maximum (exact, and nothing changes on failure), geometric
 * growth, printf at the limit, and steal; pe_mem_prefault. */
#include "posenc/tensor.h"
#include "support/pe_check.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

START_TEST(append_and_puts)
{
	struct pe_buf b;
	pe_buf_init(&b, 1024);
	ck_assert_uint_eq(b.len, 0);
	ck_assert_int_eq(pe_buf_append(&b, "abc", 3), 0);
	ck_assert_int_eq(pe_buf_puts(&b, "def"), 0);
	ck_assert_int_eq(pe_buf_append(&b, NULL, 0), 0);
	ck_assert_int_eq(pe_buf_printf(&b, "%d-%s", 42, "x"), 0);
	ck_assert_uint_eq(b.len, 10);
	ck_assert(memcmp(b.data, "abcdef42-x", 10) == 0);
	pe_buf_destroy(&b);
	ck_assert_ptr_null(b.data);
	pe_buf_destroy(&b); /* twice is harmless */
}
END_TEST

/* Exactly max bytes fit; one more fails with PE_ETOOBIG and leaves the contents alone. */
START_TEST(max_enforced)
{
	struct pe_buf b;
	pe_buf_init(&b, 100);
	char chunk[40];
	memset(chunk, 'a', sizeof chunk);
	ck_assert_int_eq(pe_buf_append(&b, chunk, 40), 0);
	ck_assert_int_eq(pe_buf_append(&b, chunk, 40), 0);
	ck_assert_int_eq(pe_buf_append(&b, chunk, 40), PE_ETOOBIG);
	ck_assert_uint_eq(b.len, 80);
	ck_assert_int_eq(pe_buf_append(&b, chunk, 20), 0);
	ck_assert_uint_eq(b.len, 100);
	ck_assert_int_eq(pe_buf_append(&b, chunk, 1), PE_ETOOBIG);
	ck_assert_int_eq(pe_buf_puts(&b, "x"), PE_ETOOBIG);
	ck_assert_int_eq(pe_buf_printf(&b, "%s", "x"), PE_ETOOBIG);
	ck_assert_int_eq(pe_buf_reserve(&b, 1), PE_ETOOBIG);
	ck_assert_int_eq(pe_buf_reserve(&b, 0), 0);
	ck_assert_int_eq(pe_buf_append(&b, chunk, 0), 0);
	ck_assert_uint_eq(b.len, 100);
	ck_assert_uint_le(b.cap, 100);
	for (size_t i = 0; i < 100; i++)
		ck_assert_int_eq(b.data[i], 'a');
	pe_buf_destroy(&b);
}
END_TEST

/* A request past max is refused before any allocation, however absurd its size. */
START_TEST(huge_requests)
{
	struct pe_buf b;
	pe_buf_init(&b, 1 << 20);
	ck_assert_int_eq(pe_buf_reserve(&b, SIZE_MAX), PE_ETOOBIG);
	ck_assert_int_eq(pe_buf_reserve(&b, (1 << 20) + 1), PE_ETOOBIG);
	ck_assert_ptr_null(b.data);
	ck_assert_int_eq(pe_buf_append(&b, "x", 1), 0);
	ck_assert_int_eq(pe_buf_reserve(&b, SIZE_MAX - 1), PE_ETOOBIG);
	ck_assert_int_eq(pe_buf_reserve(&b, (1 << 20) - 1), 0);
	ck_assert_uint_eq(b.cap, 1 << 20);
	pe_buf_destroy(&b);
	/* an "unlimited" buffer still refuses what cannot be addressed */
	pe_buf_init(&b, SIZE_MAX);
	ck_assert_int_eq(pe_buf_append(&b, "x", 1), 0);
	ck_assert_int_eq(pe_buf_reserve(&b, SIZE_MAX), PE_ETOOBIG);
	pe_buf_destroy(&b);
}
END_TEST

START_TEST(max_zero)
{
	struct pe_buf b;
	pe_buf_init(&b, 0);
	ck_assert_int_eq(pe_buf_append(&b, "x", 1), PE_ETOOBIG);
	ck_assert_int_eq(pe_buf_append(&b, "", 0), 0);
	size_t len = 99;
	char *s = pe_buf_steal(&b, &len);
	ck_assert_ptr_nonnull(s);
	ck_assert_uint_eq(len, 0);
	ck_assert_str_eq(s, "");
	free(s);
	pe_buf_destroy(&b);
}
END_TEST

/* Byte-at-a-time appends reallocate O(log n) times: capacity at least doubles each time. */
START_TEST(geometric_growth)
{
	struct pe_buf b;
	pe_buf_init(&b, 1 << 24);
	size_t grows = 0, last = 0;
	/* plain ifs in the loops: every ck_assert writes a checkpoint to check's log */
	for (size_t i = 0; i < (1u << 20); i++) {
		char c = (char)i;
		if (pe_buf_append(&b, &c, 1) != 0)
			ck_abort_msg("append %zu failed", i);
		if (b.cap != last) {
			if (last != 0 && b.cap < 2 * last)
				ck_abort_msg("capacity grew from %zu to only %zu", last, b.cap);
			last = b.cap;
			grows++;
		}
	}
	ck_assert_uint_le(grows, 20);
	for (size_t i = 0; i < (1u << 20); i++)
		if (b.data[i] != (char)i)
			ck_abort_msg("byte %zu changed", i);
	pe_buf_destroy(&b);
}
END_TEST

/* Growth stops at max, not at the next power of two past it. */
START_TEST(growth_clamped_to_max)
{
	struct pe_buf b;
	pe_buf_init(&b, 1000);
	char chunk[600] = {0};
	ck_assert_int_eq(pe_buf_append(&b, chunk, 600), 0);
	ck_assert_int_eq(pe_buf_append(&b, chunk, 400), 0);
	ck_assert_uint_eq(b.cap, 1000);
	ck_assert_uint_eq(b.len, 1000);
	pe_buf_destroy(&b);
}
END_TEST

/* printf that lands exactly on max works (its NUL goes to the spare byte), one more byte fails. */
START_TEST(printf_at_limit)
{
	struct pe_buf b;
	pe_buf_init(&b, 10);
	ck_assert_int_eq(pe_buf_printf(&b, "%s", "12345"), 0);
	ck_assert_int_eq(pe_buf_printf(&b, "%s", "678901"), PE_ETOOBIG);
	ck_assert_uint_eq(b.len, 5);
	ck_assert_int_eq(pe_buf_printf(&b, "%05d", 42), 0);
	ck_assert_uint_eq(b.len, 10);
	ck_assert(memcmp(b.data, "1234500042", 10) == 0);
	/* long output: vsnprintf is sized first */
	pe_buf_destroy(&b);
	pe_buf_init(&b, 100000);
	ck_assert_int_eq(pe_buf_printf(&b, "%5000d|%s", 7, "end"), 0);
	ck_assert_uint_eq(b.len, 5004);
	ck_assert(memcmp(b.data + 4999, "7|end", 5) == 0);
	pe_buf_destroy(&b);
}
END_TEST

START_TEST(steal)
{
	struct pe_buf b;
	pe_buf_init(&b, 64);
	ck_assert_int_eq(pe_buf_puts(&b, "hello"), 0);
	size_t len = 0;
	char *s = pe_buf_steal(&b, &len);
	ck_assert_uint_eq(len, 5);
	ck_assert_str_eq(s, "hello"); /* NUL-terminated */
	ck_assert_ptr_null(b.data);
	ck_assert_uint_eq(b.len, 0);
	ck_assert_uint_eq(b.cap, 0);
	/* the buffer is reusable, with the same max */
	ck_assert_int_eq(pe_buf_puts(&b, "again"), 0);
	ck_assert_uint_eq(b.max, 64);
	char *t = pe_buf_steal(&b, NULL);
	ck_assert_str_eq(t, "again");
	ck_assert_ptr_ne(s, t);
	free(s);
	free(t);
	/* stealing an empty buffer gives an empty string, not NULL */
	s = pe_buf_steal(&b, &len);
	ck_assert_ptr_nonnull(s);
	ck_assert_uint_eq(len, 0);
	ck_assert_str_eq(s, "");
	free(s);
	pe_buf_destroy(&b);
}
END_TEST

/* The whole pages inside the range become resident, the partial pages at its ends are left alone
 * (mincore on a fresh anonymous mapping; skipped where the kernel has no MADV_POPULATE_WRITE). */
START_TEST(prefault_whole_pages)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t n = 16 * (size_t)page;
	unsigned char *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(m, MAP_FAILED);
#ifdef MADV_POPULATE_WRITE
	unsigned char probe[1];
	if (madvise(m + 15 * page, (size_t)page, MADV_POPULATE_WRITE) != 0 && errno == EINVAL) {
		fprintf(stderr, "prefault_whole_pages: no MADV_POPULATE_WRITE here, skipped\n");
		munmap(m, n);
		return;
	}
	ck_assert_int_eq(mincore(m + 15 * page, (size_t)page, probe), 0);
	ck_assert_msg(probe[0] & 1, "the probe page is resident");
#endif
	pe_mem_prefault(m + 100, 10 * (size_t)page); /* pages 1..9 whole, 0 and 10 partial */
	unsigned char res[16];
	ck_assert_int_eq(mincore(m, n, res), 0);
#ifdef MADV_POPULATE_WRITE
	ck_assert_msg(!(res[0] & 1) && !(res[10] & 1), "partial pages untouched");
	for (int i = 1; i <= 9; i++)
		ck_assert_msg(res[i] & 1, "page %d resident", i);
#endif
	memset(m, 7, n); /* and the memory is ordinary writable memory */
	ck_assert_int_eq(m[n - 1], 7);
	pe_mem_prefault(NULL, 0); /* empty ranges are fine */
	pe_mem_prefault(m + 1, 10);
	munmap(m, n);
}
END_TEST

START_TEST(format_names)
{
	static const struct {
		const char *name, *mime;
		enum pe_format f;
	} cases[] = {{"json", "application/json", PE_FMT_JSON},
		     {"npy", "application/x-npy", PE_FMT_NPY},
		     {"bin", "application/octet-stream", PE_FMT_BIN},
		     {"csv", "text/csv", PE_FMT_CSV},
		     {"png", "image/png", PE_FMT_PNG}};
	for (size_t i = 0; i < 5; i++) {
		enum pe_format f = PE_FMT_COUNT_;
		ck_assert_int_eq(pe_format_parse(cases[i].name, &f), 0);
		ck_assert_int_eq(f, cases[i].f);
		ck_assert_str_eq(pe_format_name(f), cases[i].name);
		ck_assert_str_eq(pe_format_mime(f), cases[i].mime);
	}
	enum pe_format f;
	ck_assert_int_eq(pe_format_parse("JSON", &f), PE_EINVAL);
	ck_assert_int_eq(pe_format_parse("", &f), PE_EINVAL);
	ck_assert_int_eq(pe_format_parse("npy ", &f), PE_EINVAL);
	ck_assert_int_eq(pe_format_parse(NULL, &f), PE_EINVAL);
	ck_assert_str_eq(pe_format_name(PE_FMT_COUNT_), "?");
}
END_TEST

START_TEST(bin_write)
{
	float v[6] = {1, -2, 3.5f, 0, 1e-40f, 65504};
	struct pe_tensor_view t = {{2, {2, 3}}, PE_F32, v};
	struct pe_buf b;
	pe_buf_init(&b, 24);
	ck_assert_int_eq(pe_bin_write(&b, &t), 0);
	ck_assert_uint_eq(b.len, 24);
	ck_assert(memcmp(b.data, v, 24) == 0);
	ck_assert_int_eq(pe_bin_write(&b, &t), PE_ETOOBIG);
	ck_assert_uint_eq(b.len, 24);
	pe_buf_destroy(&b);
	uint16_t h[3] = {0x3c00, 0xc000, 0x7bff};
	struct pe_tensor_view t16 = {{1, {3}}, PE_BF16, h};
	pe_buf_init(&b, 64);
	ck_assert_int_eq(pe_bin_write(&b, &t16), 0);
	ck_assert_uint_eq(b.len, 6);
	ck_assert(memcmp(b.data, "\x00\x3c\x00\xc0\xff\x7b", 6) == 0); /* little-endian */
	pe_buf_destroy(&b);
}
END_TEST

static Suite *buf_suite(void)
{
	Suite *s = suite_create("buf");
	TCase *tc = tcase_create("buf");
	tcase_add_test(tc, append_and_puts);
	tcase_add_test(tc, max_enforced);
	tcase_add_test(tc, huge_requests);
	tcase_add_test(tc, max_zero);
	tcase_add_test(tc, geometric_growth);
	tcase_add_test(tc, growth_clamped_to_max);
	tcase_add_test(tc, printf_at_limit);
	tcase_add_test(tc, steal);
	tcase_add_test(tc, prefault_whole_pages);
	suite_add_tcase(s, tc);
	TCase *f = tcase_create("formats");
	tcase_add_test(f, format_names);
	tcase_add_test(f, bin_write);
	suite_add_tcase(s, f);
	return s;
}

PE_TEST_MAIN(buf_suite)
