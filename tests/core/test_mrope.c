/* M-RoPE: the section map (mrope_sections.c), the segments parser and get_rope_index's positions
 * (mrope_positions.c; GLM-4.1V's videos as frames, variant=glm4v), and the cos/sin tables (mrope.c)
 * against the known answers of tests/ref/gen_mrope.py, on both kernel paths.
 *
 * Bounds (every comparison prints its measured maximum), as tests/core/test_rope.c argues them:
 *   positions and mrope_position_delta: equal (integers).
 *   exact f32/f16/bf16 vs float64 NumPy rounded once: 1 ulp; exact f64: 1 ulp, 2 when
 *       attention_scaling != 1 (cos*att rounds once more).
 *   hf vs PyTorch float32: 1 ulp (correctly rounded cos/sin of the same float angles); scaled
 *       cases 0 (PyTorch's own cos/sin in its groups of 8: every scaled case has dim % 16 == 0). */
#include "core/mrope.h"
#include "core/rope.h"
#include "posenc/core.h"
#include "support/pe_check.h"
#include "support/pe_kat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DATA_DIR "tests/data/mrope"


/* ---- the section map ---- */

/* transformers' split of cat(freqs, freqs) into mrope_section * 2 chunks, chunk i from row i % 3:
 * the row of every one of the dim channels, walked chunk by chunk. */
static void rows_by_chunks(const double sec[3], size_t half, int *row)
{
	size_t c = 0;
	for (int i = 0; i < 6; i++)
		for (size_t k = 0; k < (size_t)sec[i % 3]; k++)
			row[c++] = i % 3;
	ck_assert_uint_eq(c, 2 * half);
}

START_TEST(sections_qwen2vl)
{
	const double sec[3] = {16, 24, 24};
	int row[128];
	struct pe_err err = {0};
	ck_assert_int_eq(pe_mrope_sections_check(sec, 3, 64, 0, &err), 0);
	rows_by_chunks(sec, 64, row);
	for (size_t c = 0; c < 128; c++)
		ck_assert_int_eq(pe_mrope_row_of(sec, 0, c % 64), row[c]);
	ck_assert_int_eq(pe_mrope_row_of(sec, 0, 15), 0);
	ck_assert_int_eq(pe_mrope_row_of(sec, 0, 16), 1);
	ck_assert_int_eq(pe_mrope_row_of(sec, 0, 39), 1);
	ck_assert_int_eq(pe_mrope_row_of(sec, 0, 40), 2);
	ck_assert_int_eq(pe_mrope_row_of(sec, 0, 63), 2);
}
END_TEST

/* Qwen3-VL's apply_interleaved_mrope: start from row t everywhere, then rows h and w take the
 * frequencies offset::3 below 3 * their section. */
START_TEST(sections_qwen3vl_interleaved)
{
	const double sec[3] = {24, 20, 20};
	int row[64] = {0};
	struct pe_err err = {0};
	ck_assert_int_eq(pe_mrope_sections_check(sec, 3, 64, 1, &err), 0);
	for (int r = 1; r <= 2; r++)
		for (size_t k = (size_t)r; k < 3 * (size_t)sec[r]; k += 3)
			row[k] = r;
	int counts[3] = {0};
	for (size_t k = 0; k < 64; k++) {
		ck_assert_int_eq(pe_mrope_row_of(sec, 1, k), row[k]);
		counts[row[k]]++;
	}
	ck_assert_int_eq(counts[0], 24); /* the sections are the counts */
	ck_assert_int_eq(counts[1], 20);
	ck_assert_int_eq(counts[2], 20);
	ck_assert_int_eq(pe_mrope_row_of(sec, 1, 60), 0);
	ck_assert_int_eq(pe_mrope_row_of(sec, 1, 63), 0);
}
END_TEST

START_TEST(sections_refused)
{
	static const struct {
		double sec[4];
		size_t n, half;
		int interleaved;
	} bad[] = {
		{{16, 24}, 2, 64, 0},          /* two sections */
		{{16, 24, 24, 0}, 4, 64, 0},   /* four */
		{{16, 24, 23}, 3, 64, 0},      /* sum 63 */
		{{16, 24, 24.5}, 3, 64, 0},    /* not an integer */
		{{-1, 33, 32}, 3, 64, 0},      /* negative */
		{{4, 30, 30}, 3, 64, 1},       /* 3 * 30 > 64 interleaved */
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct pe_err err = {0};
		ck_assert_int_eq(pe_mrope_sections_check(bad[i].sec, bad[i].n, bad[i].half, bad[i].interleaved, &err), PE_EINVAL);
		ck_assert_str_eq(err.param, "mrope_section");
	}
	pe_kat_rejects("rope/mrope", "dim=128&mrope_section=16,24,23", "mrope_section");
	pe_kat_rejects("rope/mrope", "dim=64&mrope_section=16,24,24", "mrope_section");
	pe_kat_rejects("rope/mrope", "dim=128&mrope_section=4,30,30&interleaved=1", "mrope_section");
}
END_TEST

/* ---- segments ---- */

START_TEST(segments_parse)
{
	struct pe_mrope_seq q;
	struct pe_err err = {0};
	char buf[128];
	ck_assert_int_eq(pe_mrope_seq_parse(&q, "text:5,image:1x28x28,text:03,video:8x28x28", 2, &err), 0);
	ck_assert_uint_eq(q.n, 4);
	ck_assert_uint_eq(q.tokens, 5 + 196 + 3 + 8 * 196);
	ck_assert_uint_eq(q.videos, 1);
	ck_assert_int_eq(q.seg[1].kind, PE_MROPE_IMAGE);
	ck_assert_int_eq(q.seg[3].n, 8 * 196);
	ck_assert_int_gt(pe_mrope_seq_format(&q, buf, sizeof buf), 0);
	ck_assert_str_eq(buf, "text:5,image:1x28x28,text:3,video:8x28x28");
	ck_assert_int_eq(pe_mrope_seq_format(&q, buf, 10), -1);
	pe_mrope_seq_destroy(&q);
	ck_assert_int_eq(pe_mrope_seq_parse(&q, "image:1x3x5", 1, &err), 0);
	ck_assert_uint_eq(q.tokens, 15);
	pe_mrope_seq_destroy(&q);
}
END_TEST

START_TEST(segments_refused)
{
	static const char *const bad[] = {
		"text", "text:", "text:0", "txt:3", "image:1x28", "image:1x27x28", "image:1x28x26x2",
		"video:1x28x28x2", "text:3,", ",text:3", "text:-1", "text:+1", "text:1234567890", "text:3 ",
		"image:0x28x28", "image:1xx28", "text:16777217", "text:16777216,text:1",
		"video:999999999x999999998x999999998", "image:1x28x28:", ":3", "text:1x2x3", "TEXT:3",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct pe_mrope_seq q;
		struct pe_err err = {0};
		ck_assert_msg(pe_mrope_seq_parse(&q, bad[i], 2, &err) == PE_EINVAL, "accepted %s", bad[i]);
		ck_assert_str_eq(err.param, "segments");
		pe_mrope_seq_destroy(&q);
		char query[128];
		snprintf(query, sizeof query, "segments=%s", bad[i]);
		pe_kat_rejects("rope/mrope/positions", query, "segments");
	}
	pe_kat_rejects("rope/mrope", "segments=image:1x28x27", "segments");
}
END_TEST

/* The segment count is checked before the array is allocated. */
START_TEST(segments_bounded)
{
	size_t n = PE_MROPE_MAX_SEGMENTS + 1;
	char *s = malloc(n * 7 + 1);
	for (size_t i = 0; i < n; i++)
		memcpy(s + 7 * i, "text:1,", 7);
	s[7 * n - 1] = 0;
	struct pe_mrope_seq q;
	struct pe_err err = {0};
	ck_assert_int_eq(pe_mrope_seq_parse(&q, s, 2, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "segments");
	ck_assert_ptr_null(q.seg);
	s[7 * (n - 1) - 1] = 0; /* exactly the limit */
	ck_assert_int_eq(pe_mrope_seq_parse(&q, s, 2, &err), 0);
	ck_assert_uint_eq(q.tokens, PE_MROPE_MAX_SEGMENTS);
	pe_mrope_seq_destroy(&q);
	free(s);
	/* the text itself: at most PE_MROPE_MAX_TEXT bytes (a TEXT parameter's max) */
	struct pe_params p;
	size_t len = (size_t)PE_MROPE_MAX_TEXT + 1;
	char *t = malloc(len + 1);
	memcpy(t, "text:", 5);
	memset(t + 5, '0', len - 6);
	t[len - 1] = '1';
	t[len] = 0;
	pe_params_init(&p, pe_table_find("rope/mrope/positions"));
	ck_assert_int_eq(pe_params_set(&p, "segments", t, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "segments");
	t[len - 1] = 0; /* one byte shorter: within the limit, and the value is still checked */
	t[len - 2] = '1';
	ck_assert_int_eq(pe_params_set(&p, "segments", t, &err), 0);
	ck_assert_int_eq(pe_params_finish(&p, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "segments");
	pe_params_destroy(&p);
	free(t);
}
END_TEST

START_TEST(sequence_parameters_refused)
{
	pe_kat_rejects("rope/mrope/positions", "tokens_per_second=4", "tokens_per_second");
	pe_kat_rejects("rope/mrope/positions", "second_per_grid_t=1", "second_per_grid_t");
	pe_kat_rejects("rope/mrope/positions", "variant=qwen25vl&segments=video:2x4x4,video:2x4x4&second_per_grid_t=1",
		       "second_per_grid_t");
	pe_kat_rejects("rope/mrope/positions", "variant=qwen25vl&segments=video:3x4x4&second_per_grid_t=1000000&tokens_per_second=1000000",
		       "second_per_grid_t");
	pe_kat_rejects("rope/mrope/positions", "spatial_merge_size=0", "spatial_merge_size");
	pe_kat_rejects("rope/mrope/positions", "time_step=int", "time_step");
	pe_kat_rejects("rope/mrope/positions", "variant=qwen3vl&time_step=float&timestamp_tokens=1", "time_step");
	pe_kat_rejects("rope/mrope/positions", "variant=qwen25vl&time_step=round", "time_step");
	pe_kat_rejects("rope/mrope/positions", "variant=qwen25vl&time_step=", "time_step");
	pe_kat_rejects("rope/mrope", "time_step=float", "time_step");
	/* int mode: 999999 * 999999 * 1e6 is past int32; the bound holds before the product */
	pe_kat_rejects("rope/mrope/positions",
		       "variant=qwen25vl&segments=video:1000000x1x1&spatial_merge_size=1&second_per_grid_t=999999.5&tokens_per_second=1000000",
		       "second_per_grid_t");
	pe_kat_rejects("rope/mrope", "compat=ggml", "compat");
	pe_kat_rejects("rope/mrope", "scaling=dynamic", "factor");
}
END_TEST

/* ---- known answers ---- */

START_TEST(positions_exact)
{
	struct pe_kat k;
	size_t checked = 0;
	pe_kat_load(&k, DATA_DIR);
	for (size_t i = 0; i < pe_kat_count(&k); i++) {
		json_t *c = pe_kat_case(&k, i);
		if (strcmp(pe_kat_str(c, "table"), "rope/mrope/positions"))
			continue;
		pe_kat_positions_case(&k, c);
		checked++;
	}
	pe_kat_free(&k);
	ck_assert_uint_ge(checked, 5);
}
END_TEST

/* The known answers every float dtype is checked against (label's %s its name), in ulps: bound,
 * scaled cases bound_scaled, scaled f64 bound_scaled_f64. */
static const struct reference {
	struct pe_kat_cmp cmp;
	const char *label;
	uint64_t bound, bound_scaled, bound_scaled_f64;
} references[] = {
	{{"rope/mrope", "query", "ref_f64", PE_F64, "attention_scaling", 0}, "mrope exact %s vs numpy", 1, 1, 2},
	{{"rope/mrope", "hf_query", "torch_f32", PE_F32, "attention_scaling", 0}, "mrope hf %s vs torch", 1, 0, 0},
};

/* _i / 2 the reference, _i % 2 the kernel path. */
START_TEST(vs_reference)
{
	if (!pe_kat_use_isa(_i % 2))
		return;
	const struct reference *ref = &references[_i / 2];
	pe_kat_compare_dtypes(DATA_DIR, &ref->cmp, ref->label, ref->bound, ref->bound_scaled, ref->bound_scaled_f64);
}
END_TEST

/* Rows of the table (pe_table_compute_rows) are the whole table's, byte for byte; and the POST
 * form (positions given, pe_mrope_body_def) gives the same table as the segments. */
START_TEST(rows_and_body_match_whole)
{
	static const char query[] = "dim=64&mrope_section=12,10,10&interleaved=1&scaling=yarn&factor=4&"
				    "original_max_position_embeddings=64&segments=text:5,image:1x8x8,text:3,video:3x8x8,text:4";
	struct pe_shape s;
	float *whole = pe_query_table("rope/mrope", query, PE_F32, &s);
	size_t seq = s.dim[1], dim = s.dim[2];
	struct pe_params p, b;
	struct pe_err err = {0};
	ck_assert_int_eq(pe_query_params(&p, "rope/mrope", query, &err), 0);
	static const size_t r0s[] = {0, 1, 7, 40, 75};
	float *part = malloc(2 * seq * dim * sizeof *part);
	for (size_t i = 0; i < sizeof r0s / sizeof r0s[0]; i++) {
		size_t r0 = r0s[i], nr = seq - r0 < 9 ? seq - r0 : 9;
		ck_assert_int_eq(pe_table_compute_rows(&p, PE_F32, PE_TABLE_ALL_PLANES, r0, nr, part, &err), 0);
		ck_assert_mem_eq(part, whole + r0 * dim, nr * dim * 4);
		ck_assert_mem_eq(part + nr * dim, whole + (seq + r0) * dim, nr * dim * 4);
	}
	size_t n = seq;
	int32_t *pos = malloc(3 * n * sizeof *pos), max = 0;
	ck_assert_int_eq(pe_mrope_sequence_positions(&p, 0, n, pos, &err), 0);
	for (size_t j = 0; j < 3 * n; j++)
		max = pos[j] > max ? pos[j] : max;
	pe_params_init(&b, &pe_mrope_body_def);
	ck_assert_int_eq(pe_query_set(&b, "dim=64&mrope_section=12,10,10&interleaved=1&scaling=yarn&factor=4&"
				      "original_max_position_embeddings=64", NULL, &err), 0);
	ck_assert_int_eq(pe_mrope_body_finish(&b, max, &err), 0);
	ck_assert_int_eq(pe_mrope_table_compute(&b, pos, n, PE_F32, part, &err), 0);
	ck_assert_mem_eq(part, whole, 2 * seq * dim * 4);
	ck_assert_int_eq(pe_query_set(&b, "segments=text:1", NULL, &err), PE_EINVAL); /* not in the POST form */
	pe_params_destroy(&b);
	pe_params_destroy(&p);
	free(pos);
	free(part);
	free(whole);
}
END_TEST

/* Past the first block of positions (1024 tokens), the table from the sequence equals the table
 * of the same positions given whole, and windows of positions equal the whole sequence's. */
START_TEST(long_sequence_blocks)
{
	static const char seg[] = "segments=text:5,image:1x28x28,text:3,video:8x28x28,text:4";
	struct pe_shape s;
	float *whole = pe_query_table("rope/mrope", "dim=8&mrope_section=1,1,2&segments=text:5,image:1x28x28,text:3,video:8x28x28,text:4", PE_F32, &s);
	size_t seq = s.dim[1];
	ck_assert_uint_eq(seq, 1776);
	int32_t *pos = pe_query_table("rope/mrope/positions", seg, PE_I32, NULL), max = 0;
	for (size_t j = 0; j < 3 * seq; j++)
		max = pos[j] > max ? pos[j] : max;
	struct pe_params b, p;
	struct pe_err err = {0};
	pe_params_init(&b, &pe_mrope_body_def);
	ck_assert_int_eq(pe_query_set(&b, "dim=8&mrope_section=1,1,2", NULL, &err), 0);
	ck_assert_int_eq(pe_mrope_body_finish(&b, max, &err), 0);
	float *given = malloc(2 * seq * 8 * sizeof *given);
	ck_assert_int_eq(pe_mrope_table_compute(&b, pos, seq, PE_F32, given, &err), 0);
	ck_assert_mem_eq(given, whole, 2 * seq * 8 * 4);
	ck_assert_int_eq(pe_query_params(&p, "rope/mrope/positions", seg, &err), 0);
	int32_t win[3 * 300];
	static const size_t firsts[] = {0, 3, 200, 1000, 1476};
	for (size_t i = 0; i < sizeof firsts / sizeof firsts[0]; i++) {
		ck_assert_int_eq(pe_mrope_sequence_positions(&p, firsts[i], 300, win, &err), 0);
		for (int r = 0; r < 3; r++)
			ck_assert_mem_eq(win + r * 300, pos + r * seq + firsts[i], 300 * 4);
	}
	pe_params_destroy(&p);
	pe_params_destroy(&b);
	free(given);
	free(pos);
	free(whole);
}
END_TEST

/* dynamic's seq_len defaults to the largest position + 1 (the KAT case dynamic_d32 relies on it):
 * given explicitly as that value, the table is the same. */
START_TEST(dynamic_seq_len_default)
{
	static const char base[] = "dim=32&mrope_section=4,6,6&scaling=dynamic&factor=2&original_max_position_embeddings=16&"
				   "segments=text:5,image:1x8x8,text:3,video:3x8x8,text:4";
	char query[256];
	struct pe_shape s;
	snprintf(query, sizeof query, "%s&seq_len=20", base); /* max position 19 */
	float *a = pe_query_table("rope/mrope", base, PE_F32, &s), *b = pe_query_table("rope/mrope", query, PE_F32, NULL);
	snprintf(query, sizeof query, "%s&seq_len=16", base);
	float *c = pe_query_table("rope/mrope", query, PE_F32, NULL);
	size_t bytes = 2 * s.dim[1] * s.dim[2] * 4;
	ck_assert_mem_eq(a, b, bytes);
	ck_assert(memcmp(a, c, bytes) != 0);
	free(a);
	free(b);
	free(c);
}
END_TEST

/* The canonical key of a rope/mrope/positions query is want. */
static void key_is(const char *query, const char *want)
{
	struct pe_params p;
	struct pe_err err;
	char key[512];
	ck_assert_int_eq(pe_query_params(&p, "rope/mrope/positions", query, &err), 0);
	ck_assert_int_gt(pe_params_canonical(&p, key, sizeof key), 0);
	ck_assert_str_eq(key, want);
	pe_params_destroy(&p);
}

/* Equal sequences written differently share one canonical key. */
START_TEST(canonical_segments)
{
	key_is("segments=text:005,image:01x4x4", "segments=text:5,image:1x4x4&variant=qwen2vl&spatial_merge_size=2");
}
END_TEST

/* The time step is part of the key (the two modes answer differently for fractional steps); the
 * other variants leave it out, as every qwen25vl-only parameter. */
START_TEST(time_step_in_key)
{
	key_is("variant=qwen25vl&segments=video:4x4x4",
	       "segments=video:4x4x4&variant=qwen25vl&spatial_merge_size=2&tokens_per_second=2&time_step=int");
	key_is("variant=qwen25vl&segments=video:4x4x4&time_step=float",
	       "segments=video:4x4x4&variant=qwen25vl&spatial_merge_size=2&tokens_per_second=2&time_step=float");
	key_is("variant=qwen2vl&segments=video:4x4x4", "segments=video:4x4x4&variant=qwen2vl&spatial_merge_size=2");
}
END_TEST

/* Direct callers (the fuzz target) get the int step from a zeroed time rule; 1.5 s per step at 2
 * tokens per second is 2 per frame (int) or 3 (float). */
START_TEST(time_step_direct)
{
	struct pe_mrope_seq q;
	struct pe_err err;
	static const double spg[] = {1.5};
	int32_t pos[3 * 8];
	int64_t max;
	ck_assert_int_eq(pe_mrope_seq_parse(&q, "video:8x2x2", 2, &err), 0);
	struct pe_mrope_time tm = {.variant = PE_MROPE_QWEN25VL, .merge = 2, .tokens_per_second = 2, .second_per_grid_t = spg,
				   .nsecond = 1};
	ck_assert_int_eq(pe_mrope_positions(&q, &tm, 0, 8, pos, &max, &err), 0);
	ck_assert_int_eq(pos[7], 14);
	ck_assert_int_eq(max, 14);
	tm.time_step = PE_MROPE_STEP_FLOAT;
	ck_assert_int_eq(pe_mrope_positions(&q, &tm, 0, 8, pos, &max, &err), 0);
	ck_assert_int_eq(pos[7], 21);
	ck_assert_int_eq(max, 21);
	pe_mrope_seq_destroy(&q);
}
END_TEST

/* ---- glm4v: a video as frames, each <|begin_of_image|> frame <|end_of_image|> seconds ---- */

/* The known answers hold GLM-4.1V's cases (token ids through its get_rope_index): a missing set
 * must not pass as an empty loop. */
START_TEST(glm4v_answers_are_there)
{
	struct pe_kat k;
	size_t n = 0;
	pe_kat_load(&k, DATA_DIR);
	for (size_t i = 0; i < pe_kat_count(&k); i++)
		n += strstr(pe_kat_str(pe_kat_case(&k, i), "query"), "variant=glm4v") != NULL;
	pe_kat_free(&k);
	ck_assert_uint_ge(n, 6);
}
END_TEST

/* One frame by hand: text:2, then <|begin_of_image|> at 2, the 2x2 frame at 3 + (0, j, k),
 * <|end_of_image|> at 5 and two second tokens at 6, 7; the text after at 8. qwen3vl puts the same
 * text first: its frame starts at 5. */
START_TEST(glm4v_frame_block)
{
	static const int32_t t[] = {0, 1, 2, 3, 3, 3, 3, 5, 6, 7, 8}, h[] = {0, 1, 2, 3, 3, 4, 4, 5, 6, 7, 8},
			     w[] = {0, 1, 2, 3, 4, 3, 4, 5, 6, 7, 8};
	struct pe_shape s;
	int32_t *p = pe_query_table("rope/mrope/positions", "variant=glm4v&segments=text:2,video:1x4x4,text:1&timestamp_tokens=2",
				    PE_I32, &s);
	ck_assert_uint_eq(s.dim[1], 11);
	ck_assert_mem_eq(p, t, sizeof t);
	ck_assert_mem_eq(p + 11, h, sizeof h);
	ck_assert_mem_eq(p + 22, w, sizeof w);
	free(p);
	p = pe_query_table("rope/mrope/positions", "variant=qwen3vl&segments=text:2,video:1x4x4,text:1&timestamp_tokens=2",
			   PE_I32, &s);
	ck_assert_uint_eq(s.dim[1], 11);
	ck_assert_int_eq(p[5], 5);  /* the frame's first token, t row */
	ck_assert_int_eq(p[10], 8); /* the same text after: the spans agree */
	free(p);
}
END_TEST

/* What glm4v does not read is refused, what it needs is asked for, and its counts are part of the
 * key. */
START_TEST(glm4v_parameters)
{
	static const struct {
		const char *query, *param;
	} bad[] = {
		{"variant=glm4v&segments=video:2x4x4", "timestamp_tokens"},               /* needed by videos */
		{"variant=glm4v&segments=video:2x4x4&timestamp_tokens=1,2,3", "timestamp_tokens"}, /* 3 values, 2 frames */
		{"variant=glm4v&segments=video:1x4x4&timestamp_tokens=1025", "timestamp_tokens"},
		{"variant=glm4v&tokens_per_second=2&timestamp_tokens=1", "tokens_per_second"},
		{"variant=glm4v&segments=video:1x4x4&second_per_grid_t=1&timestamp_tokens=1", "second_per_grid_t"},
		{"variant=glm4v&time_step=int", "time_step"},
		{"variant=glm4v&segments=video:20000x2x2&timestamp_tokens=1024", "timestamp_tokens"},
		{"variant=glm4v&segments=video:5592406x2x2&timestamp_tokens=0", "segments"}, /* 3 tokens a frame: too many */
		{"variant=glm4", "variant"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		pe_kat_rejects("rope/mrope/positions", bad[i].query, bad[i].param);
	pe_kat_rejects("rope/mrope", "dim=16&mrope_section=2,3,3&variant=glm4v&segments=video:2x4x4", "timestamp_tokens");
	key_is("variant=glm4v&segments=text:1,video:2x4x4&timestamp_tokens=02,1",
	       "segments=text:1,video:2x4x4&variant=glm4v&spatial_merge_size=2&timestamp_tokens=2,1");
	key_is("variant=glm4v&segments=text:1,image:1x4x4", "segments=text:1,image:1x4x4&variant=glm4v&spatial_merge_size=2");
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("mrope");
	TCase *tc = tcase_create("mrope");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, sections_qwen2vl);
	tcase_add_test(tc, sections_qwen3vl_interleaved);
	tcase_add_test(tc, sections_refused);
	tcase_add_test(tc, segments_parse);
	tcase_add_test(tc, segments_refused);
	tcase_add_test(tc, segments_bounded);
	tcase_add_test(tc, sequence_parameters_refused);
	tcase_add_test(tc, positions_exact);
	tcase_add_loop_test(tc, vs_reference, 0, 2 * (int)(sizeof references / sizeof references[0]));
	tcase_add_test(tc, rows_and_body_match_whole);
	tcase_add_test(tc, long_sequence_blocks);
	tcase_add_test(tc, dynamic_seq_len_default);
	tcase_add_test(tc, canonical_segments);
	tcase_add_test(tc, time_step_in_key);
	tcase_add_test(tc, time_step_direct);
	tcase_add_test(tc, glm4v_answers_are_there);
	tcase_add_test(tc, glm4v_frame_block);
	tcase_add_test(tc, glm4v_parameters);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
