/* libFuzzer target: M-RoPE's segments parser (pe_mrope_seq_parse, src/core/mrope_positions.c) and
 * the positions built from what it accepts.
 *
 * Input: one byte of options (spatial merge size 1..4, variant, a time scale, qwen3vl), then the segments
 * text (a NUL-terminated heap copy, so ASan sees any overread). A failure must be PE_EINVAL naming
 * "segments" with a detail, and leave nothing to leak. What parses must hold together: at most
 * PE_MROPE_MAX_SEGMENTS segments and PE_MROPE_MAX_TOKENS tokens, the segments' tokens summing to
 * the total (also after qwen3vl's frame text, pe_mrope_seq_stamp); its canonical text must parse
 * back to the same segments; and (for sequences of up to
 * 2^16 tokens) the positions must lie in 0 .. the reported maximum, reach it, and any window of
 * them must equal the same columns of the whole. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mrope.h"

#define FAIL(...)                                               \
	do {                                                    \
		fprintf(stderr, "fuzz_segments: " __VA_ARGS__); \
		fputc('\n', stderr);                            \
		abort();                                        \
	} while (0)

static void check_positions(const struct pe_mrope_seq *q, const struct pe_mrope_time *tm)
{
	size_t n = q->tokens;
	int64_t max, wmax;
	struct pe_err err = {0};
	int32_t *all = malloc(3 * n * sizeof *all);
	if (!all)
		abort();
	int rc = pe_mrope_positions(q, tm, 0, n, all, &max, &err);
	if (rc != 0) { /* only a position past int32 may fail */
		if (rc != PE_EINVAL || !err.detail[0])
			FAIL("positions failed %d: %s", rc, err.detail);
		free(all);
		return;
	}
	int64_t seen = -1;
	for (size_t i = 0; i < 3 * n; i++) {
		if (all[i] < 0 || all[i] > max)
			FAIL("position %d outside 0..%lld", all[i], (long long)max);
		seen = all[i] > seen ? all[i] : seen;
	}
	if (seen != max)
		FAIL("largest position %lld, reported %lld", (long long)seen, (long long)max);
	size_t first = n / 3, count = n - first < 7 ? n - first : 7;
	int32_t win[21];
	if (count && (pe_mrope_positions(q, tm, first, count, win, &wmax, &err) != 0 || wmax != max))
		FAIL("a window failed: %s", err.detail);
	for (size_t r = 0; r < 3 && count; r++)
		if (memcmp(win + r * count, all + r * n + first, count * sizeof *win))
			FAIL("window [%zu, +%zu) row %zu differs from the whole", first, count, r);
	free(all);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	int64_t merge = 1 + (data[0] & 3);
	static const double second[] = {0.3, 1.7, 2, 0.5}, stamp[] = {6, 0, 9, 1024};
	int framed = (data[0] >> 7) & 1 ? PE_MROPE_GLM4V : PE_MROPE_QWEN3VL;
	struct pe_mrope_time tm = {.variant = (data[0] >> 4) & 1 ? framed : (data[0] >> 2) & 1,
				   .merge = merge,
				   .tokens_per_second = (data[0] >> 3) & 1 ? 25 : 2,
				   .time_step = (data[0] >> 6) & 1 ? PE_MROPE_STEP_FLOAT : PE_MROPE_STEP_INT,
				   .second_per_grid_t = second,
				   .nsecond = 4,
				   .stamp = stamp,
				   .nstamp = (data[0] >> 5) & 1 ? 1 : 4};
	char *text = malloc(size);
	if (!text)
		abort();
	memcpy(text, data + 1, size - 1);
	text[size - 1] = 0;
	struct pe_mrope_seq q, back;
	struct pe_err err = {0};
	int rc = pe_mrope_seq_parse(&q, text, merge, &err);
	if (rc != 0) {
		if (rc != PE_EINVAL || err.code != rc || strcmp(err.param, "segments") || !strstr(err.detail, "segments"))
			FAIL("failure %d with err {%d, '%s', '%s'}", rc, err.code, err.param, err.detail);
		pe_mrope_seq_destroy(&q);
		free(text);
		return 0;
	}
	size_t sum = 0, videos = 0;
	if (q.n == 0 || q.n > PE_MROPE_MAX_SEGMENTS || q.tokens > PE_MROPE_MAX_TOKENS)
		FAIL("accepted %zu segments, %zu tokens", q.n, q.tokens);
	for (size_t i = 0; i < q.n; i++) {
		if (q.seg[i].n < 1 || (q.seg[i].kind != PE_MROPE_TEXT && (q.seg[i].h % merge || q.seg[i].w % merge)))
			FAIL("segment %zu: %lld tokens, grid %lldx%lld, merge %lld", i, (long long)q.seg[i].n,
			     (long long)q.seg[i].h, (long long)q.seg[i].w, (long long)merge);
		sum += (size_t)q.seg[i].n;
		videos += q.seg[i].kind == PE_MROPE_VIDEO;
	}
	if (sum != q.tokens || videos != q.videos)
		FAIL("tokens %zu (segments say %zu), videos %zu (%zu)", q.tokens, sum, q.videos, videos);
	size_t cap = 2 * size + 64;
	char *canon = malloc(cap);
	if (!canon || pe_mrope_seq_format(&q, canon, cap) < 0)
		FAIL("no canonical text within %zu bytes", cap);
	if (pe_mrope_seq_parse(&back, canon, merge, &err) != 0 || back.n != q.n || back.tokens != q.tokens ||
	    memcmp(back.seg, q.seg, q.n * sizeof *q.seg))
		FAIL("'%s' does not parse back to the same sequence: %s", canon, err.detail);
	int rc_stamp = pe_mrope_seq_stamp(&q, &tm, &err);
	/* refused: the counts at fault (timestamp_tokens), or frames whose own vision tokens alone pass
	 * the bound (segments: no count could help) */
	if (rc_stamp != 0 &&
	    (rc_stamp != PE_EINVAL || (strcmp(err.param, "timestamp_tokens") && strcmp(err.param, "segments"))))
		FAIL("frame text failed %d: '%s' %s", rc_stamp, err.param, err.detail);
	sum = 0;
	for (size_t i = 0; i < q.n; i++)
		sum += (size_t)q.seg[i].n;
	if (sum != q.tokens || q.tokens > PE_MROPE_MAX_TOKENS)
		FAIL("with frame text: tokens %zu (segments say %zu)", q.tokens, sum);
	if (rc_stamp == 0 && q.tokens <= (1u << 16))
		check_positions(&q, &tm);
	pe_mrope_seq_destroy(&back);
	pe_mrope_seq_destroy(&q);
	free(canon);
	free(text);
	return 0;
}
