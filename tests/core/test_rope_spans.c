/* pe_rope_spans (rope.c), the rows of per-token positions (apply_rope.c): one plan, many spans, each
 * byte for byte the /v1/rope table of that offset and length. Parameter sets take each path (exact,
 * hf, ggml; dynamic and longrope, which read seq_len; yarn; both layouts; f32 with its recurrence,
 * f64 direct, f16), spans of 1 row (direct), 2 and 4096 rows (recurrence, anchors), out of order
 * and near the largest position, and the spans are computed one after the other through the same
 * plan, so no state of one leaks into the next. */
#include "core/rope.h"
#include "posenc/posenc.h"
#include "support/pe_check.h"
#include "support/pe_table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every query is at its largest position, as apply_rope.c sets it (offset = last, len = 1). */
static const char *const queries[] = {
	"dim=64&offset=4503599627370000&len=1",
	"dim=64&offset=3000000&len=1&layout=interleaved",
	"dim=32&offset=3000000&len=1&compat=hf",
	"dim=32&offset=2000000000&len=1&compat=ggml",
	"dim=64&offset=3000000&len=1&scaling=dynamic&factor=2&original_max_position_embeddings=16&seq_len=3000001",
	"dim=16&offset=3000000&len=1&scaling=yarn&factor=4&original_max_position_embeddings=64&compat=hf",
	"dim=8&offset=3000000&len=1&scaling=longrope&factor=2&original_max_position_embeddings=64&short_factor=1,1,1,1"
	"&long_factor=2,2,2,2&seq_len=3000001",
};

static const struct {
	int64_t offset;
	size_t len;
} spans[] = {{2999999, 2}, {0, 1}, {17, 4096}, {1000, 1}, {2995904, 4096}, {5, 2}, {3000000, 1}, {123456, 7}};

static void check_query(const char *q, enum pe_dtype dt)
{
	struct pe_params p, t;
	struct pe_err err = {0};
	ck_assert_msg(pe_query_params(&p, "rope", q, &err) == 0, "%s: %s", q, err.detail);
	struct pe_rope_spans *sp = pe_rope_spans_new(&p, dt);
	ck_assert_ptr_nonnull(sp);
	int64_t last = pe_param_int(&p, "offset");
	for (size_t k = 0; k < sizeof spans / sizeof spans[0]; k++) {
		int64_t off = last > 3000000 ? last - 3000000 + spans[k].offset : spans[k].offset;
		size_t len = spans[k].len, row = (size_t)pe_param_int(&p, "dim") * pe_dtype_size(dt);
		if (off + (int64_t)len - 1 > last)
			continue;
		char tq[1024];
		snprintf(tq, sizeof tq, "%s", q);
		char *o = strstr(tq, "offset="), tail[1024];
		snprintf(tail, sizeof tail, "%s", strchr(o, '&'));
		snprintf(o, sizeof tq - (size_t)(o - tq), "offset=%lld%s", (long long)off, tail);
		char *l = strstr(tq, "len=1");
		snprintf(tail, sizeof tail, "%s", l + 5);
		snprintf(l, sizeof tq - (size_t)(l - tq), "len=%zu%s", len, tail);
		ck_assert_msg(pe_query_params(&t, "rope", tq, &err) == 0, "%s: %s", tq, err.detail);
		char *want = malloc(2 * len * row), *got = malloc(2 * len * row);
		ck_assert_int_eq(pe_table_compute(&t, dt, want, &err), 0);
		ck_assert_int_eq(pe_rope_spans_rows(sp, off, len, got, got + len * row, &err), 0);
		ck_assert_msg(!memcmp(want, got, 2 * len * row), "%s as %s: the span at %lld of %zu rows differs from %s", q,
			      pe_dtype_name(dt), (long long)off, len, tq);
		free(want);
		free(got);
		pe_params_destroy(&t);
	}
	pe_rope_spans_free(sp);
	pe_params_destroy(&p);
}

START_TEST(spans_are_tables)
{
	static const enum pe_dtype dts[] = {PE_F32, PE_F64, PE_F16};
	for (size_t q = 0; q < sizeof queries / sizeof queries[0]; q++)
		for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
			check_query(queries[q], dts[d]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("rope_spans");
	TCase *tc = tcase_create("spans");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, spans_are_tables);
	suite_add_tcase(s, tc);
	return pe_test_run(s);
}
