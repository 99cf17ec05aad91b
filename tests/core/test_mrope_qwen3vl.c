/* M-RoPE position ids of variant=qwen3vl (src/core/mrope_positions.c): Qwen3-VL's videos as
 * timestamped frames, against the known answers of tests/ref/gen_mrope_qwen3vl.py (a NumPy
 * get_rope_index over the processor's token ids), compared exactly (integers); windows of tokens
 * against the whole sequence (also of variant=glm4v, whose frames are walked the same way); the
 * M-RoPE table of a qwen3vl sequence against the same positions given in the body; and the
 * timestamp_tokens parameter's refusals and bounds. */
#include "core/mrope.h"
#include "posenc/core.h"
#include "support/pe_check.h"
#include "support/pe_kat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DATA_DIR "tests/data/mrope_qwen3vl"

START_TEST(positions_exact)
{
	struct pe_kat k;
	size_t checked = 0;
	pe_kat_load(&k, DATA_DIR);
	for (size_t i = 0; i < pe_kat_count(&k); i++) {
		json_t *c = pe_kat_case(&k, i);
		ck_assert_ptr_nonnull(strstr(pe_kat_str(c, "query"), "variant=qwen3vl"));
		pe_kat_positions_case(&k, c);
		checked++;
	}
	pe_kat_free(&k);
	ck_assert_uint_ge(checked, 7);
}
END_TEST

/* Qwen3-VL and GLM-4.1V differ from Qwen2-VL on videos only: images and text give the same ids. */
static const char *const framed_variants[] = {"qwen3vl", "glm4v"};

START_TEST(images_as_qwen2vl)
{
	static const char seg[] = "segments=text:3,image:2x8x12,text:2,image:1x4x4,text:1";
	char query[128];
	struct pe_shape s, s3;
	int32_t *a = pe_query_table("rope/mrope/positions", seg, PE_I32, &s);
	snprintf(query, sizeof query, "variant=%s&%s", framed_variants[_i], seg);
	int32_t *b = pe_query_table("rope/mrope/positions", query, PE_I32, &s3);
	ck_assert_uint_eq(s.dim[1], s3.dim[1]);
	ck_assert_mem_eq(a, b, 3 * s.dim[1] * 4);
	free(a);
	free(b);
}
END_TEST

/* Any window of tokens (starting inside a frame's text before or after it, its grid or its last
 * text token) equals the same columns of the whole sequence; frames of one count are skipped at
 * once. Both framed variants: qwen3vl's text mostly before each frame, glm4v's mostly after. */
static const struct {
	const char *query;
	size_t tokens;
} windows[] = {
	{"variant=qwen3vl&segments=text:3,video:5x8x12,text:2,image:1x4x4,video:2x4x8,text:1&timestamp_tokens=6,6,7,7,8,0,9",
	 3 + 5 * (24 + 2) + (6 + 6 + 7 + 7 + 8) + 2 + 4 + 2 * (8 + 2) + (0 + 9) + 1},
	{"variant=qwen3vl&segments=text:2,video:60x2x4,text:1,video:7x2x2&timestamp_tokens=3",
	 2 + 60 * (4 + 2 + 1) + 1 + 7 * (4 + 1 + 1)},
	{"variant=glm4v&segments=text:3,video:5x8x12,text:2,image:1x4x4,text:1,video:2x4x8,text:1&timestamp_tokens=1,1,2,2,3,0,4",
	 3 + 5 * (24 + 2) + (1 + 1 + 2 + 2 + 3) + 2 + 4 + 1 + 2 * (8 + 2) + (0 + 4) + 1},
	{"variant=glm4v&segments=text:2,video:60x2x4,text:1,video:7x2x2,text:1&timestamp_tokens=3",
	 2 + 60 * (2 + 2 + 3) + 1 + 7 * (1 + 2 + 3) + 1},
};

START_TEST(windows_match_whole)
{
	const char *query = windows[_i].query;
	struct pe_shape s;
	int32_t *whole = pe_query_table("rope/mrope/positions", query, PE_I32, &s);
	size_t seq = s.dim[1];
	ck_assert_uint_eq(seq, windows[_i].tokens);
	struct pe_params p;
	struct pe_err err = {0};
	ck_assert_int_eq(pe_query_params(&p, "rope/mrope/positions", query, &err), 0);
	int32_t win[3 * 37];
	for (size_t first = 0; first < seq; first++) {
		size_t count = seq - first < 37 ? seq - first : 37;
		memset(win, 0xff, sizeof win);
		ck_assert_int_eq(pe_mrope_sequence_positions(&p, first, count, win, &err), 0);
		for (int r = 0; r < 3; r++)
			ck_assert_msg(!memcmp(win + r * count, whole + r * seq + first, count * 4), "window at %zu, row %d", first,
				      r);
	}
	pe_params_destroy(&p);
	free(whole);
}
END_TEST

/* Called directly with fewer counts than frames (the check refuses that), the frames past the list
 * have no timestamp text: the same ids as a list with zeros for them, whole and in windows. */
START_TEST(list_shorter_than_frames)
{
	static const double two[] = {4, 2}, all[] = {4, 2, 0, 0, 0, 0, 0, 0, 0, 0};
	struct pe_mrope_time tm = {.variant = PE_MROPE_QWEN3VL, .merge = 2, .stamp = two, .nstamp = 2};
	struct pe_mrope_time ref = {.variant = PE_MROPE_QWEN3VL, .merge = 2, .stamp = all, .nstamp = 10};
	struct pe_mrope_seq q, r;
	struct pe_err err = {0};
	ck_assert_int_eq(pe_mrope_seq_parse(&q, "text:1,video:10x4x6,text:2", 2, &err), 0);
	ck_assert_int_eq(pe_mrope_seq_parse(&r, "text:1,video:10x4x6,text:2", 2, &err), 0);
	ck_assert_int_eq(pe_mrope_seq_stamp(&q, &tm, &err), 0);
	ck_assert_int_eq(pe_mrope_seq_stamp(&r, &ref, &err), 0);
	ck_assert_uint_eq(q.tokens, 1 + 10 * (6 + 2) + 4 + 2 + 2);
	ck_assert_uint_eq(q.tokens, r.tokens);
	size_t n = q.tokens;
	int32_t a[3 * 100], b[3 * 100], w[3 * 9];
	int64_t ma, mb, mw;
	ck_assert_int_eq(pe_mrope_positions(&q, &tm, 0, n, a, &ma, &err), 0);
	ck_assert_int_eq(pe_mrope_positions(&r, &ref, 0, n, b, &mb, &err), 0);
	ck_assert_mem_eq(a, b, 3 * n * 4);
	ck_assert_int_eq(ma, mb);
	for (size_t first = 0; first + 9 <= n; first++) {
		ck_assert_int_eq(pe_mrope_positions(&q, &tm, first, 9, w, &mw, &err), 0);
		for (int row = 0; row < 3; row++)
			ck_assert_mem_eq(w + row * 9, a + row * n + first, 9 * 4);
	}
	pe_mrope_seq_destroy(&q);
	pe_mrope_seq_destroy(&r);
}
END_TEST

/* /v1/rope/mrope of a qwen3vl sequence is the table of its positions. */
START_TEST(table_of_positions)
{
	static const char seq[] = "variant=qwen3vl&segments=text:5,image:1x8x8,text:3,video:3x8x8,text:4&timestamp_tokens=6";
	static const char tab[] = "dim=32&mrope_section=6,5,5&interleaved=1";
	char query[256];
	snprintf(query, sizeof query, "%s&%s", tab, seq);
	struct pe_shape s, sp;
	float *whole = pe_query_table("rope/mrope", query, PE_F32, &s);
	int32_t *pos = pe_query_table("rope/mrope/positions", seq, PE_I32, &sp), max = 0;
	size_t n = sp.dim[1];
	ck_assert_uint_eq(s.dim[1], n);
	for (size_t j = 0; j < 3 * n; j++)
		max = pos[j] > max ? pos[j] : max;
	struct pe_params b;
	struct pe_err err = {0};
	pe_params_init(&b, &pe_mrope_body_def);
	ck_assert_int_eq(pe_query_set(&b, tab, NULL, &err), 0);
	ck_assert_int_eq(pe_mrope_body_finish(&b, max, &err), 0);
	float *given = malloc(2 * n * 32 * sizeof *given);
	ck_assert_int_eq(pe_mrope_table_compute(&b, pos, n, PE_F32, given, &err), 0);
	ck_assert_mem_eq(given, whole, 2 * n * 32 * 4);
	pe_params_destroy(&b);
	free(given);
	free(pos);
	free(whole);
}
END_TEST

START_TEST(timestamp_tokens_refused)
{
	static const char *const bad[] = {
		"variant=qwen3vl&segments=video:2x4x4",                                     /* needed by videos */
		"variant=qwen3vl&segments=text:1,video:2x4x4&timestamp_tokens=1,2,3",       /* 3 values, 2 frames */
		"variant=qwen3vl&segments=text:1,video:2x4x4,video:1x4x4&timestamp_tokens=1,2", /* 2 values, 3 frames */
		"variant=qwen3vl&segments=text:1&timestamp_tokens=1,2",                     /* no frames */
		"variant=qwen3vl&segments=video:1x4x4&timestamp_tokens=1025",               /* past PE_MROPE_MAX_STAMP */
		"variant=qwen3vl&segments=video:1x4x4&timestamp_tokens=-1",
		"variant=qwen3vl&segments=video:1x4x4&timestamp_tokens=1.5",
		"variant=qwen3vl&segments=video:1x4x4&timestamp_tokens=",
		"variant=qwen3vl&segments=video:1x4x4&timestamp_tokens=x",
		"variant=qwen3vl&segments=video:1x4x4&timestamp_tokens=1e9",
		"variant=qwen2vl&timestamp_tokens=6",                                       /* qwen3vl only */
		"variant=qwen25vl&segments=video:2x4x4&timestamp_tokens=6",
		/* 20000 frames of 1 token each fit; with 1024 + 2 text tokens each they pass 16 Mi tokens */
		"variant=qwen3vl&segments=video:20000x2x2&timestamp_tokens=1024",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		pe_kat_rejects("rope/mrope/positions", bad[i], "timestamp_tokens");
		char query[160];
		snprintf(query, sizeof query, "dim=16&mrope_section=2,3,3&%s", bad[i]);
		pe_kat_rejects("rope/mrope", query, "timestamp_tokens");
	}
	pe_kat_rejects("rope/mrope/positions", "variant=qwen3vl&tokens_per_second=2&timestamp_tokens=1", "tokens_per_second");
	pe_kat_rejects("rope/mrope/positions", "variant=qwen3vl&second_per_grid_t=1&timestamp_tokens=1", "second_per_grid_t");
	pe_kat_rejects("rope/mrope/positions", "variant=qwen4vl", "variant");
	/* just within the token bound: 16383 frames of 1 + 1022 + 2 tokens */
	struct pe_params p;
	struct pe_err err = {0};
	ck_assert_int_eq(pe_query_params(&p, "rope/mrope/positions",
					 "variant=qwen3vl&segments=video:16383x2x2&timestamp_tokens=1021", &err), 0);
	ck_assert_uint_le(pe_mrope_sequence_tokens(&p), PE_MROPE_MAX_TOKENS);
	ck_assert_uint_eq(pe_mrope_sequence_tokens(&p), 16383u * 1024u);
	pe_params_destroy(&p);
}
END_TEST

/* The list is bounded in values before it is stored (PE_MAX_LIST), naming the parameter. */
START_TEST(timestamp_tokens_list_bounded)
{
	size_t n = PE_MAX_LIST + 1;
	char *q = malloc(64 + 2 * n);
	int len = snprintf(q, 64, "variant=qwen3vl&segments=video:%zux2x2&timestamp_tokens=", n);
	for (size_t i = 0; i < n; i++)
		memcpy(q + len + 2 * i, "1,", 2);
	q[len + 2 * n - 1] = 0;
	pe_kat_rejects("rope/mrope/positions", q, "timestamp_tokens");
	free(q);
}
END_TEST

/* Frames whose own <|vision_start|> and <|vision_end|> take the sequence past 16 Mi tokens: no
 * timestamp_tokens could help (0 is the least), so the 400 names segments; with room for those
 * two, counts that pass the bound still name timestamp_tokens. */
START_TEST(frames_text_past_bound_names_segments)
{
	size_t frames = PE_MROPE_MAX_TOKENS / 3 + 1; /* 1 + 0 + 2 tokens each: one frame too many */
	char q[160];
	snprintf(q, sizeof q, "variant=qwen3vl&segments=video:%zux2x2&timestamp_tokens=0", frames);
	pe_kat_rejects("rope/mrope/positions", q, "segments");
	snprintf(q, sizeof q, "variant=qwen3vl&segments=text:1,video:%zux2x2,text:2&timestamp_tokens=0", frames - 1);
	pe_kat_rejects("rope/mrope/positions", q, "segments");
	snprintf(q, sizeof q, "dim=16&mrope_section=2,3,3&variant=qwen3vl&segments=video:%zux2x2&timestamp_tokens=0", frames);
	pe_kat_rejects("rope/mrope", q, "segments");
	snprintf(q, sizeof q, "variant=qwen3vl&segments=video:%zux2x2&timestamp_tokens=1", frames - 1);
	pe_kat_rejects("rope/mrope/positions", q, "timestamp_tokens");
	struct pe_params p;
	struct pe_err err = {0};
	snprintf(q, sizeof q, "variant=qwen3vl&segments=video:%zux2x2&timestamp_tokens=0", frames - 1);
	ck_assert_int_eq(pe_query_params(&p, "rope/mrope/positions", q, &err), 0);
	ck_assert_uint_eq(pe_mrope_sequence_tokens(&p), 3 * (frames - 1));
	pe_params_destroy(&p);
}
END_TEST

/* timestamp_tokens is part of a qwen3vl query's key, and dropped from the key of the others. */
START_TEST(canonical_key)
{
	struct pe_params p;
	struct pe_err err;
	char key[512];
	ck_assert_int_eq(pe_query_params(&p, "rope/mrope/positions",
					 "variant=qwen3vl&segments=text:1,video:2x4x4&timestamp_tokens=06,7", &err), 0);
	ck_assert_int_gt(pe_params_canonical(&p, key, sizeof key), 0);
	ck_assert_str_eq(key, "segments=text:1,video:2x4x4&variant=qwen3vl&spatial_merge_size=2&timestamp_tokens=6,7");
	pe_params_destroy(&p);
	ck_assert_int_eq(pe_query_params(&p, "rope/mrope/positions", "variant=qwen25vl&segments=text:1", &err), 0);
	ck_assert_int_gt(pe_params_canonical(&p, key, sizeof key), 0);
	ck_assert_ptr_null(strstr(key, "timestamp_tokens"));
	pe_params_destroy(&p);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("mrope_qwen3vl");
	TCase *tc = tcase_create("mrope_qwen3vl");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, positions_exact);
	tcase_add_loop_test(tc, images_as_qwen2vl, 0, 2);
	tcase_add_loop_test(tc, windows_match_whole, 0, (int)(sizeof windows / sizeof windows[0]));
	tcase_add_test(tc, list_shorter_than_frames);
	tcase_add_test(tc, table_of_positions);
	tcase_add_test(tc, timestamp_tokens_refused);
	tcase_add_test(tc, timestamp_tokens_list_bounded);
	tcase_add_test(tc, frames_text_past_bound_names_segments);
	tcase_add_test(tc, canonical_key);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
