/* struct pe_buf: appends, the hard maximum (exact, and nothing changes on failure), geometric
 * growth, printf at the limit, and steal (which hands out no more than it holds); the byte budget
 * and a buffer charged to it; pe_mem_prefault. */
#include "posenc/tensor.h"
#include "support/pe_check.h"

#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Stealing an empty buffer gives an empty string of length 0, not NULL. */
static void steal_empty(struct pe_buf *b)
{
	size_t len = 99;
	char *s = pe_buf_steal(b, &len);
	ck_assert_ptr_nonnull(s);
	ck_assert_uint_eq(len, 0);
	ck_assert_str_eq(s, "");
	free(s);
}

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
	steal_empty(&b);
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

/* One reservation past twice the block (a writer's estimate after a few bytes of head) takes just
 * what it asks: doubling from the small block gave an 8 MiB block for a 4.9 MB estimate, past
 * what a job's share of the budget had set aside. Growth within twice the block still doubles. */
START_TEST(big_reserve_exact)
{
	struct pe_buf b;
	pe_buf_init(&b, 1 << 26);
	ck_assert_int_eq(pe_buf_puts(&b, "{\"head\":1,"), 0);
	size_t small = b.cap, want = b.len + 4900000;
	ck_assert_int_eq(pe_buf_reserve(&b, 4900000), 0);
	ck_assert_uint_eq(b.cap, want);
	ck_assert_uint_eq(memcmp(b.data, "{\"head\":1,", 10), 0);
	b.len = b.cap;
	ck_assert_int_eq(pe_buf_reserve(&b, 1), 0); /* past the block by a byte: doubles */
	ck_assert_uint_ge(b.cap, 2 * want);
	ck_assert_uint_lt(small, want);
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
	steal_empty(&b);
	pe_buf_destroy(&b);
}
END_TEST

/* What a stolen block holds is what it is counted as: a buffer reserved far above what was
 * written (a JSON document reserves its worst-case width, about four times its real length) is
 * shrunk to len + 1 before it is handed out, so the cache that keeps it, counting len, keeps what
 * it counts. The allocation may round up by less than a page, no more. */
START_TEST(steal_holds_what_it_counts)
{
	long page = sysconf(_SC_PAGESIZE);
	struct pe_buf b;
	pe_buf_init(&b, 64u << 20);
	ck_assert_int_eq(pe_buf_reserve(&b, 8u << 20), 0);
	memset(b.data, 'x', 1u << 20);
	b.len = 1u << 20;
	size_t len;
	char *p = pe_buf_steal(&b, &len);
	ck_assert_uint_eq(len, 1u << 20);
	ck_assert_uint_ge(pe_mem_size(p), len + 1);
	ck_assert_msg(pe_mem_size(p) <= len + 1 + (size_t)page, "a %zu-byte body holds %zu bytes", len,
		      pe_mem_size(p));
	ck_assert_int_eq(p[len], 0);
	ck_assert_int_eq(p[len - 1], 'x');
	free(p);

	/* the real case: a large table as JSON (two chunks, windows from the bound) */
	size_t rows = 256, cols = 1024;
	float *v = malloc(rows * cols * sizeof *v);
	for (size_t i = 0; i < rows * cols; i++)
		v[i] = (float)(i % 7) * 0.5f; /* short numbers: the text is far below its bound */
	struct pe_tensor_view t = {{2, {rows, cols}}, PE_F32, v};
	pe_buf_init(&b, 64u << 20);
	ck_assert_int_eq(pe_json_write_table_mt(&b, NULL, &t, &(struct pe_parallel){.width = 2}, NULL), 0);
	size_t cap = b.cap;
	p = pe_buf_steal(&b, &len);
	ck_assert_uint_lt(len * 2, cap); /* the estimate was well above the text */
	ck_assert_msg(pe_mem_size(p) <= len + 1 + (size_t)page, "a %zu-byte JSON body holds %zu bytes", len,
		      pe_mem_size(p));
	free(p);
	free(v);
}
END_TEST

/* The first block is what the first request asks for, not the next power of two past it: a table
 * computed straight into the buffer is not charged twice its size. */
START_TEST(first_block_exact)
{
	struct pe_buf b;
	pe_buf_init(&b, 1u << 24);
	ck_assert_int_eq(pe_buf_reserve(&b, 1000000), 0);
	ck_assert_uint_eq(b.cap, 1000000);
	ck_assert_int_eq(pe_buf_append(&b, "x", 1), 0); /* growth from there still doubles */
	ck_assert_int_eq(pe_buf_reserve(&b, 1000000), 0);
	ck_assert_uint_ge(b.cap, 2000000);
	pe_buf_destroy(&b);
}
END_TEST

/* A first block of 2 MiB or more starts on a 2 MiB boundary (transparent huge pages can back it
 * from its first byte) wherever the allocator keeps a same-size realloc of such a block in place
 * (glibc's mapped blocks), and its tail is trimmed: it holds no more than pe_mem_bound of its
 * bytes, as any block. 64-byte aligned everywhere. */
START_TEST(large_first_block_on_huge_boundary)
{
	static const size_t sizes[] = {(2u << 20) - 65, 2u << 20, (3u << 20) - 20, 24u << 20, (24u << 20) + 4000};
	const size_t huge = 2u << 20;
	mallopt(M_MMAP_THRESHOLD, 128 * 1024); /* as posencd */
	char *probe = aligned_alloc(huge, 4 * huge), *kept = probe ? realloc(probe, 3 * huge + 1) : NULL;
	int in_place = kept && kept == probe;
	free(kept ? kept : probe);
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		struct pe_buf b;
		size_t n = sizes[i], bytes = (n + 1 + 63) & ~(size_t)63; /* the first block's allocation */
		pe_buf_init(&b, 1u << 30);
		ck_assert_int_eq(pe_buf_reserve(&b, n), 0);
		ck_assert_uint_eq((uintptr_t)b.data % 64, 0);
		ck_assert_msg(pe_mem_size(b.data) <= pe_mem_bound(bytes), "%zu: holds %zu > %zu", n, pe_mem_size(b.data),
			      pe_mem_bound(bytes));
		if (in_place && bytes >= huge)
			ck_assert_msg((uintptr_t)b.data % huge == 0, "%zu bytes at %p", n, (void *)b.data);
		memset(b.data, 1, n); /* every byte of it is there */
		pe_buf_destroy(&b);
	}
}
END_TEST

/* pe_buf_block_after predicts the block every growth allocates (the HTTP layer reserves a request
 * body's memory from it before the buffer grows): never less than what is then held. */
START_TEST(block_after_predicts_growth)
{
	struct pe_buf b;
	pe_buf_init(&b, 1 << 20);
	static char data[5000];
	size_t steps[] = {1, 63, 100, 1000, 2500, 5000, 5000, 4096, 3};
	for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
		size_t predicted = pe_buf_block_after(&b, steps[i]);
		ck_assert_int_eq(pe_buf_append(&b, data, steps[i]), 0);
		size_t real = pe_mem_size(b.data);
		ck_assert_uint_ge(predicted, b.cap + 1);
		ck_assert_uint_ge(real, predicted);
		ck_assert_uint_lt(real - predicted, 4096); /* the allocator's rounding only */
	}
	ck_assert_uint_eq(pe_buf_block_after(&b, (1 << 20) - b.len + 1), 0); /* past max */
	ck_assert_uint_eq(pe_buf_block_after(&b, 0), pe_mem_size(b.data));
	pe_buf_destroy(&b);
}
END_TEST

/* pe_buf_block_within: growth that doubling would take past `most` stops at a block of most bytes
 * when the bytes wanted fit in it (a chunked request body on a response budget), predicted as
 * pe_buf_block_after predicts; a want past it grows to just the want. */
START_TEST(block_within_stops_at_most)
{
	struct pe_buf b;
	size_t most = 500000;
	static char data[300000];
	pe_buf_init(&b, 1 << 22);
	ck_assert_int_eq(pe_buf_append(&b, data, 300000), 0); /* the first block: just that */
	ck_assert_uint_eq(pe_buf_block_after(&b, 100000), 600001); /* doubling */
	size_t predicted = pe_buf_block_within(&b, 100000, most);
	ck_assert_uint_eq(predicted, most);
	ck_assert_int_eq(pe_buf_reserve_within(&b, 100000, most), 0);
	ck_assert_uint_eq(b.cap + 1, predicted);
	ck_assert_uint_ge(pe_mem_size(b.data), predicted);
	ck_assert_int_eq(pe_buf_append(&b, data, 100000), 0); /* room made: no growth */
	ck_assert_uint_eq(b.cap + 1, most);
	ck_assert_uint_eq(pe_buf_block_within(&b, 99999, most), pe_mem_size(b.data)); /* fits as it is */
	ck_assert_uint_eq(pe_buf_block_within(&b, 100000, most), 500001); /* past most: just the want */
	pe_buf_destroy(&b);
	pe_buf_init(&b, 1 << 22); /* the first block, 64-byte aligned (its 64 bytes' block is 128): within most too */
	ck_assert_uint_eq(pe_buf_block_after(&b, 1), 128);
	ck_assert_uint_eq(pe_buf_block_within(&b, 1, 100), 64);
	ck_assert_int_eq(pe_buf_reserve_within(&b, 1, 100), 0);
	ck_assert_uint_eq(b.cap, 63);
	pe_buf_destroy(&b);
}
END_TEST

START_TEST(budget_take_charge_give)
{
	struct pe_budget *g = pe_budget_new(1000);
	struct pe_budget_stats st;
	ck_assert_int_eq(pe_budget_take(g, 600), 0);
	ck_assert_int_eq(pe_budget_take(g, 401), PE_EBUSY); /* one byte too many: nothing taken */
	ck_assert_int_eq(pe_budget_take(g, 400), 0);        /* exactly the limit fits */
	ck_assert_int_eq(pe_budget_take(g, 1), PE_EBUSY);
	ck_assert_int_eq(pe_budget_take(g, 1001), PE_ETOOBIG); /* could never fit: not one to retry */
	ck_assert_int_eq(pe_budget_take(g, SIZE_MAX), PE_ETOOBIG);
	pe_budget_charge(g, 500); /* memory that exists is counted past the limit */
	pe_budget_stats(g, &st);
	ck_assert_uint_eq(st.used, 1500);
	ck_assert_uint_eq(st.limit, 1000);
	ck_assert_uint_eq(st.refused, 4);
	ck_assert_int_eq(pe_budget_try_take(g, 1), PE_EBUSY); /* try_take: refused, not counted */
	pe_budget_stats(g, &st);
	ck_assert_uint_eq(st.refused, 4);
	ck_assert_uint_eq(st.used, 1500);
	pe_budget_give(g, 400);
	ck_assert_int_eq(pe_budget_take(g, 1), PE_EBUSY); /* still over the limit... */
	pe_budget_give(g, 1100);
	ck_assert_int_eq(pe_budget_try_take(g, 1000), 0); /* ...until enough is given back */
	pe_budget_give(g, 1000);
	pe_budget_stats(g, &st);
	ck_assert_uint_eq(st.used, 0);
	/* NULL admits everything */
	ck_assert_int_eq(pe_budget_take(NULL, SIZE_MAX), 0);
	pe_budget_stats(NULL, &st);
	ck_assert_uint_eq(st.used, 0);
	/* a block is counted by what the allocator holds for it, and given back in full */
	int rc;
	void *p = pe_budget_malloc(g, 100, &rc);
	ck_assert_ptr_nonnull(p);
	pe_budget_stats(g, &st);
	ck_assert_uint_eq(st.used, pe_mem_size(p));
	ck_assert_uint_ge(st.used, 100);
	ck_assert_ptr_null(pe_budget_malloc(g, 1000, &rc));
	ck_assert_int_eq(rc, PE_EBUSY);
	ck_assert_ptr_null(pe_budget_malloc(g, 1001, &rc));
	ck_assert_int_eq(rc, PE_ETOOBIG);
	pe_budget_free_block(g, p);
	pe_budget_free_block(g, NULL);
	pe_budget_stats(g, &st);
	ck_assert_uint_eq(st.used, 0);
	pe_budget_free(g);
}
END_TEST

/* A buffer with a budget: its reservation is its allocation at every step; growth that does not
 * fit fails with PE_EBUSY before any memory is taken and leaves the contents alone; destroy gives
 * everything back; steal hands the (shrunk) block's reservation to the caller. */
START_TEST(buf_with_budget)
{
	struct pe_budget *g = pe_budget_new(1u << 20);
	struct pe_budget_stats st;
	struct pe_buf b;
	pe_buf_init(&b, 4u << 20);
	pe_buf_set_budget(&b, g);
	char chunk[1000];
	memset(chunk, 'q', sizeof chunk);
	for (int i = 0; i < 300; i++) {
		ck_assert_int_eq(pe_buf_append(&b, chunk, sizeof chunk), 0);
		pe_budget_stats(g, &st);
		if (st.used != pe_mem_size(b.data) || b.held != st.used)
			ck_abort_msg("after %d appends %zu are reserved for a %zu-byte block", i + 1, st.used,
				     pe_mem_size(b.data));
	}
	ck_assert_int_eq(pe_buf_reserve(&b, 900000), PE_EBUSY); /* 300 KB + 900 KB > 1 MiB */
	ck_assert_int_eq(pe_buf_reserve(&b, 2u << 20), PE_ETOOBIG); /* more than the whole budget */
	ck_assert_uint_eq(b.len, 300000);
	pe_budget_stats(g, &st);
	ck_assert_uint_eq(st.used, pe_mem_size(b.data));
	ck_assert_uint_ge(st.refused, 2);
	size_t len;
	char *p = pe_buf_steal(&b, &len);
	ck_assert_uint_eq(len, 300000);
	pe_budget_stats(g, &st);
	ck_assert_uint_eq(st.used, pe_mem_size(p));
	ck_assert_uint_le(st.used, len + 1 + (size_t)sysconf(_SC_PAGESIZE));
	pe_budget_free_block(g, p);
	ck_assert_int_eq(pe_buf_append(&b, chunk, 10), 0);
	pe_buf_destroy(&b);
	pe_budget_stats(g, &st);
	ck_assert_uint_eq(st.used, 0);
	pe_budget_free(g);
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
	tcase_add_test(tc, big_reserve_exact);
	tcase_add_test(tc, growth_clamped_to_max);
	tcase_add_test(tc, block_after_predicts_growth);
	tcase_add_test(tc, printf_at_limit);
	tcase_add_test(tc, steal);
	tcase_add_test(tc, steal_holds_what_it_counts);
	tcase_add_test(tc, first_block_exact);
	tcase_add_test(tc, large_first_block_on_huge_boundary);
	tcase_add_test(tc, budget_take_charge_give);
	tcase_add_test(tc, buf_with_budget);
	tcase_add_test(tc, prefault_whole_pages);
	tcase_add_test(tc, block_within_stops_at_most);
	suite_add_tcase(s, tc);
	TCase *f = tcase_create("formats");
	tcase_add_test(f, format_names);
	tcase_add_test(f, bin_write);
	suite_add_tcase(s, f);
	return s;
}

PE_TEST_MAIN(buf_suite)
