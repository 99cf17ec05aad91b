/* /v1/rope/mrope/positions: the [3, seq] int32 position ids (rows t, h, w) transformers' Qwen2-VL,
 * Qwen2.5-VL, Qwen3-VL and GLM-4.1V / GLM-4.5V get_rope_index builds for a text+image+video
 * sequence, given as its segments rather than as token ids (the sequence's layout is all
 * get_rope_index reads from them).
 *
 * Each segment starts one past the largest position before it (0 first). Text tokens take the same
 * position on all three rows, one more per token. A vision segment of grid T x H x W (before the
 * m x m merge) holds T * (H/m) * (W/m) tokens in (t, h, w) order; token (i, j, k) sits at start +
 * (time(i), j, k): time(i) = i for Qwen2-VL (and for GLM-4.1V's images); Qwen2.5-VL scales a
 * video's by its second_per_grid_t times tokens_per_second and gives images time 0: time_step=int
 * casts second_per_grid_t to an integer first (transformers 4.52 and later, the default),
 * time_step=float multiplies in float32 (earlier versions; 0.5 and 1.5 seconds per step give other
 * positions).
 * Qwen3-VL and GLM-4.1V write a video as its T frames, each a block of its own: the frame at time 0
 * between text tokens that count like any text (only their number matters, not the times).
 * Qwen3-VL's processor puts `<t seconds>` (timestamp_tokens tokens) and <|vision_start|> before
 * each frame and <|vision_end|> after it; GLM-4.1V's puts <|begin_of_image|> before it and
 * <|end_of_image|> and the whole seconds (timestamp_tokens tokens) after it, and its
 * get_rope_index (token groups: every frame's tokens are a video group between text groups) starts
 * each frame one past the text before it. So a framed video segment is T blocks of [pre text, the
 * frame, post text], pre + post = stamp + 2: qwen3vl pre = stamp + 1, glm4v pre = 1. The chat
 * templates' tokens around the whole video (GLM's <|begin_of_video|>, <|end_of_video|>) are the
 * text:N around the segment.
 * Positions only grow from one segment to the next, so a segment's largest position
 * (start + max(time(T-1), H/m-1, W/m-1)) is the largest so far: the delta and the bounds come from
 * the segments alone, without a walk over every token, and any window of tokens is written
 * without the ones before it (framed videos: frames with per-frame counts are walked, at most
 * PE_MAX_LIST of them; the others are counted arithmetically). The response carries
 * mrope_position_delta = max + 1 - seq (X-PE-Mrope-Delta). */
#include "core/mrope.h"
#include "core/tables.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kinds[] = {"text", "image", "video", NULL};
const char *const pe_mrope_variants[] = {"qwen2vl", "qwen25vl", "qwen3vl", "glm4v", NULL};
const char *const pe_mrope_time_steps[] = {"int", "float", NULL};

/* ---- the segments text ---- */

/* A decimal number of 1 to 9 digits at *s, advancing *s; -1 when there is none. */
static int64_t number(const char **s)
{
	int64_t v = 0;
	int digits = 0;
	while (**s >= '0' && **s <= '9' && digits < 10) {
		v = v * 10 + (**s - '0');
		(*s)++;
		digits++;
	}
	return digits == 0 || digits > 9 ? -1 : v;
}

static int bad(struct pe_err *err, size_t i, const char *why)
{
	return pe_err_set(err, PE_EINVAL, "segments", "segments: segment %zu: %s (text:N, image:TxHxW or video:TxHxW)",
			  i + 1, why);
}

/* Tokens of a T x H x W grid merged m x m; -1 when beyond PE_MROPE_MAX_TOKENS (each factor has at
 * most 9 digits, and the partial product is bounded before the next multiplication). */
static int64_t grid_tokens(int64_t t, int64_t h, int64_t w, int64_t m)
{
	int64_t n = t * (h / m);
	if (n > (int64_t)PE_MROPE_MAX_TOKENS)
		return -1;
	n *= w / m;
	return n > (int64_t)PE_MROPE_MAX_TOKENS ? -1 : n;
}

/* One segment, from s up to its end (',' or NUL); 0, or PE_EINVAL. */
static int parse_one(const char *s, size_t i, int64_t merge, struct pe_mrope_seg *g, struct pe_err *err)
{
	const char *colon = strchr(s, ':');
	const char *end = s + strcspn(s, ",");
	if (!colon || colon > end)
		return bad(err, i, "no ':' after the kind");
	g->kind = -1;
	for (int k = 0; kinds[k]; k++)
		if ((size_t)(colon - s) == strlen(kinds[k]) && !strncmp(s, kinds[k], strlen(kinds[k])))
			g->kind = k;
	if (g->kind < 0)
		return bad(err, i, "the kind is not text, image or video");
	const char *c = colon + 1;
	int64_t v[3] = {1, 1, 1};
	int want = g->kind == PE_MROPE_TEXT ? 1 : 3;
	for (int d = 0; d < want; d++) {
		if (d && *c++ != 'x')
			return bad(err, i, "a grid is TxHxW");
		if ((v[d] = number(&c)) < 1)
			return bad(err, i, "sizes are decimal integers from 1 to 999999999");
	}
	if (c != end)
		return bad(err, i, g->kind == PE_MROPE_TEXT ? "text takes one token count" : "a grid is TxHxW");
	g->t = v[0];
	g->h = v[1];
	g->w = v[2];
	if (g->kind == PE_MROPE_TEXT) {
		g->n = v[0];
		return 0;
	}
	if (g->h % merge || g->w % merge)
		return pe_err_set(err, PE_EINVAL, "segments",
				  "segments: segment %zu: the grid %lldx%lld is not divisible by spatial_merge_size %lld", i + 1,
				  (long long)g->h, (long long)g->w, (long long)merge);
	g->n = grid_tokens(g->t, g->h, g->w, merge);
	return 0;
}

int pe_mrope_seq_parse(struct pe_mrope_seq *q, const char *text, int64_t merge, struct pe_err *err)
{
	memset(q, 0, sizeof *q);
	size_t n = 1;
	for (const char *c = text; *c; c++)
		n += *c == ',';
	if (n > PE_MROPE_MAX_SEGMENTS)
		return pe_err_set(err, PE_EINVAL, "segments", "segments: more than %d segments", PE_MROPE_MAX_SEGMENTS);
	if (merge < 1)
		return pe_err_set(err, PE_EINVAL, "spatial_merge_size", "spatial_merge_size must be at least 1");
	if (!(q->seg = calloc(n, sizeof *q->seg)))
		return pe_err_set(err, PE_ENOMEM, "segments", "out of memory");
	const char *s = text;
	for (size_t i = 0; i < n; i++) {
		int rc = parse_one(s, i, merge, &q->seg[i], err);
		if (rc)
			return rc;
		if (q->seg[i].n < 0 || q->seg[i].n > (int64_t)(PE_MROPE_MAX_TOKENS - q->tokens))
			return pe_err_set(err, PE_EINVAL, "segments", "segments: the sequence holds more than %u tokens",
					  PE_MROPE_MAX_TOKENS);
		q->tokens += (size_t)q->seg[i].n;
		q->videos += q->seg[i].kind == PE_MROPE_VIDEO;
		q->frames += q->seg[i].kind == PE_MROPE_VIDEO ? (size_t)q->seg[i].t : 0;
		q->n = i + 1;
		s += strcspn(s, ",");
		s += *s == ',';
	}
	return 0;
}

void pe_mrope_seq_destroy(struct pe_mrope_seq *q)
{
	free(q->seg);
	memset(q, 0, sizeof *q);
}

int pe_mrope_seq_format(const struct pe_mrope_seq *q, char *buf, size_t cap)
{
	size_t len = 0;
	for (size_t i = 0; i < q->n; i++) {
		const struct pe_mrope_seg *g = &q->seg[i];
		int w = g->kind == PE_MROPE_TEXT
				? snprintf(buf + len, cap - len, "%s%s:%lld", i ? "," : "", kinds[g->kind], (long long)g->t)
				: snprintf(buf + len, cap - len, "%s%s:%lldx%lldx%lld", i ? "," : "", kinds[g->kind],
					   (long long)g->t, (long long)g->h, (long long)g->w);
		if (w < 0 || (size_t)w >= cap - len)
			return -1;
		len += (size_t)w;
	}
	return (int)len;
}

/* ---- positions ---- */

/* Qwen2.5-VL's time index of video frame i, step = second_per_grid_t. time_step=int: the step cast
 * to int64 first; the product with an integral tokens_per_second stays int64 (a config's integer),
 * with a fractional one it is float32 (PyTorch's int64 tensor times a Python float), then
 * truncated. time_step=float: float32 throughout, then truncated. -1 past PE_MROPE_MAX_POSITION. */
static int64_t video_time(const struct pe_mrope_time *tm, double step, int64_t i)
{
	double tps = tm->tokens_per_second;
	if (tm->time_step == PE_MROPE_STEP_FLOAT) {
		float v = (float)i * (float)step;
		v = v * (float)tps;
		return v < 2147483648.0f ? (int64_t)v : -1;
	}
	int64_t k = i * (int64_t)step; /* i < 2^24 (a frame is a token) and step <= 1e6: exact */
	if (tps != (double)(int64_t)tps) {
		float v = (float)k * (float)tps;
		return v < 2147483648.0f ? (int64_t)v : -1;
	}
	int64_t n = (int64_t)tps;
	return n == 0 || k <= (int64_t)PE_MROPE_MAX_POSITION / n ? k * n : -1;
}

/* The time index of frame i of a vision segment (video: which video it is); -1 past the limit. */
static int64_t time_index(const struct pe_mrope_time *tm, const struct pe_mrope_seg *g, size_t video, int64_t i)
{
	if (tm->variant != PE_MROPE_QWEN25VL)
		return i;
	if (g->kind == PE_MROPE_IMAGE)
		return 0;
	return video_time(tm, tm->second_per_grid_t && video < tm->nsecond ? tm->second_per_grid_t[video] : 1.0, i);
}

/* ---- qwen3vl, glm4v: a video as frames, each a block of its own with its text ---- */

static int framed(const struct pe_mrope_time *tm, const struct pe_mrope_seg *g)
{
	return (tm->variant == PE_MROPE_QWEN3VL || tm->variant == PE_MROPE_GLM4V) && g->kind == PE_MROPE_VIDEO;
}

/* Timestamp text tokens of frame f (counted over all videos). Frames past a list of several counts
 * have none (the check refuses such lists: they come only from direct callers). */
static int64_t frame_stamp(const struct pe_mrope_time *tm, size_t f)
{
	double stamp = !tm->stamp ? 0 : tm->nstamp == 1 ? tm->stamp[0] : f < tm->nstamp ? tm->stamp[f] : 0;
	return (int64_t)stamp;
}

/* Text tokens of frame f's block: its timestamp and the two tokens around the frame (qwen3vl
 * <|vision_start|> and <|vision_end|>, glm4v <|begin_of_image|> and <|end_of_image|>). */
static int64_t frame_text(const struct pe_mrope_time *tm, size_t f) { return frame_stamp(tm, f) + 2; }

/* Text tokens of frame f's block before the frame: qwen3vl's timestamp comes first, glm4v's last. */
static int64_t frame_pre(const struct pe_mrope_time *tm, size_t f)
{
	return tm->variant == PE_MROPE_QWEN3VL ? frame_stamp(tm, f) + 1 : 1;
}

/* Every frame from f on has the same text: no list, one count, or past the list. */
static int uniform_from(const struct pe_mrope_time *tm, size_t f)
{
	return !tm->stamp || tm->nstamp == 1 || f >= tm->nstamp;
}

/* The text tokens of frames [a, a + n): a walk over at most the list's PE_MAX_LIST counts,
 * arithmetic beyond it, so a long video costs no walk over its frames. */
static int64_t texts(const struct pe_mrope_time *tm, size_t a, int64_t n)
{
	size_t f = a, end = a + (size_t)n;
	int64_t sum = 0;
	for (; f < end && !uniform_from(tm, f); f++)
		sum += frame_text(tm, f);
	return f < end ? sum + (int64_t)(end - f) * frame_text(tm, f) : sum;
}

int pe_mrope_seq_stamp(struct pe_mrope_seq *q, const struct pe_mrope_time *tm, struct pe_err *err)
{
	size_t frame = 0;
	if (tm->variant != PE_MROPE_QWEN3VL && tm->variant != PE_MROPE_GLM4V)
		return 0;
	/* each frame's two tokens around it come with the segments, whatever the counts */
	if (q->frames > (PE_MROPE_MAX_TOKENS - q->tokens) / 2)
		return pe_err_set(err, PE_EINVAL, "segments",
				  "segments: with the two text tokens around each video frame (variant=%s), the sequence "
				  "holds more than %u tokens",
				  pe_mrope_variants[tm->variant], PE_MROPE_MAX_TOKENS);
	for (size_t i = 0; i < q->n; i++) {
		struct pe_mrope_seg *g = &q->seg[i];
		if (g->kind != PE_MROPE_VIDEO)
			continue;
		int64_t text = texts(tm, frame, g->t); /* at most 16 Mi frames of 1026 tokens */
		frame += (size_t)g->t;
		if (text > (int64_t)(PE_MROPE_MAX_TOKENS - q->tokens))
			return pe_err_set(err, PE_EINVAL, "timestamp_tokens",
					  "timestamp_tokens: with its frames' text, the sequence holds more than %u tokens",
					  PE_MROPE_MAX_TOKENS);
		g->n += text;
		q->tokens += (size_t)text;
	}
	return 0;
}

/* The largest position of a framed video g (its first frame is the sequence's frame `frame`)
 * starting at `start`: each frame's block spans its text and max(H/m, W/m). */
static int64_t frames_max(const struct pe_mrope_time *tm, const struct pe_mrope_seg *g, size_t frame, int64_t start)
{
	int64_t gh = g->h / tm->merge, gw = g->w / tm->merge, side = gh > gw ? gh : gw;
	int64_t span = texts(tm, frame, g->t) + g->t * side;
	return start + span - 1 > (int64_t)PE_MROPE_MAX_POSITION ? -1 : start + span - 1;
}

/* Token k of a frame block starting at position s: k < pre is text before the frame, then the
 * frame's gh x gw tokens at time 0, then the text after it, one position each past the frame's
 * largest. */
static void frame_token(int64_t s, int64_t pre, int64_t gh, int64_t gw, int64_t k, int32_t *o, size_t count)
{
	int64_t side = gh > gw ? gh : gw, r = k - pre;
	if (k < pre || r >= gh * gw) {
		int64_t v = k < pre ? s + k : s + pre + side + (r - gh * gw);
		o[0] = o[count] = o[2 * count] = (int32_t)v;
		return;
	}
	o[0] = (int32_t)(s + pre);
	o[count] = (int32_t)(s + pre + r / gw);
	o[2 * count] = (int32_t)(s + pre + r % gw);
}

/* segment_write for a framed video: frame by frame, the blocks that meet the window; the frames
 * before it are skipped at once where their text is uniform (a window of a long video costs no
 * walk over the frames before it). */
static void frames_write(const struct pe_mrope_time *tm, const struct pe_mrope_seg *g, size_t frame, int64_t start,
			 size_t col, size_t first, size_t count, int32_t *out)
{
	int64_t gh = g->h / tm->merge, gw = g->w / tm->merge, side = gh > gw ? gh : gw, s = start, f = 0;
	size_t c = col;
	while (f < g->t && c < first + count) {
		int64_t text = frame_text(tm, frame + (size_t)f), skip = 1;
		size_t len = (size_t)(text + gh * gw);
		if (c + len <= first && uniform_from(tm, frame + (size_t)f)) {
			skip = (int64_t)((first - c) / len);
			skip = skip < g->t - f ? skip : g->t - f;
		} else if (c + len > first) {
			size_t k0 = first > c ? first - c : 0, k1 = first + count - c < len ? first + count - c : len;
			int64_t pre = frame_pre(tm, frame + (size_t)f);
			for (size_t k = k0; k < k1; k++)
				frame_token(s, pre, gh, gw, (int64_t)k, out + (c + k - first), count);
		}
		c += (size_t)skip * len;
		s += skip * (text + side);
		f += skip;
	}
}

/* ---- every variant ---- */

/* The largest position of segment g starting at `start`, or -1 past PE_MROPE_MAX_POSITION. */
static int64_t segment_max(const struct pe_mrope_time *tm, const struct pe_mrope_seg *g, size_t video, int64_t start)
{
	int64_t m = g->n - 1;
	if (g->kind != PE_MROPE_TEXT) {
		int64_t t = time_index(tm, g, video, g->t - 1), gh = g->h / tm->merge, gw = g->w / tm->merge;
		if (t < 0)
			return -1;
		m = t > gh - 1 ? t : gh - 1;
		m = m > gw - 1 ? m : gw - 1;
	}
	return start + m > (int64_t)PE_MROPE_MAX_POSITION ? -1 : start + m;
}

/* Write the tokens of segment g (starting at position `start`, at column col of the sequence)
 * that fall in the window [first, first + count) into the rows of out ([3][count]). */
static void segment_write(const struct pe_mrope_time *tm, const struct pe_mrope_seg *g, size_t video, int64_t start,
			  size_t col, size_t first, size_t count, int32_t *out)
{
	size_t k0 = first > col ? first - col : 0, k1 = first + count - col;
	k1 = k1 < (size_t)g->n ? k1 : (size_t)g->n;
	int64_t gh = g->h / tm->merge, gw = g->w / tm->merge;
	for (size_t k = k0; k < k1; k++) {
		int32_t *o = out + (col + k - first);
		if (g->kind == PE_MROPE_TEXT) {
			o[0] = o[count] = o[2 * count] = (int32_t)(start + (int64_t)k);
			continue;
		}
		int64_t frame = (int64_t)k / (gh * gw), rest = (int64_t)k % (gh * gw);
		o[0] = (int32_t)(start + time_index(tm, g, video, frame));
		o[count] = (int32_t)(start + rest / gw);
		o[2 * count] = (int32_t)(start + rest % gw);
	}
}

int pe_mrope_positions(const struct pe_mrope_seq *q, const struct pe_mrope_time *tm, size_t first, size_t count,
		       int32_t *out, int64_t *max, struct pe_err *err)
{
	int64_t next = 0;
	size_t col = 0, video = 0, frame = 0;
	for (size_t i = 0; i < q->n; i++) {
		const struct pe_mrope_seg *g = &q->seg[i];
		int64_t m = framed(tm, g) ? frames_max(tm, g, frame, next) : segment_max(tm, g, video, next);
		const char *who = tm->variant == PE_MROPE_QWEN25VL && g->kind == PE_MROPE_VIDEO ? "second_per_grid_t" : "segments";
		if (m < 0)
			return pe_err_set(err, PE_EINVAL, who, "%s: segment %zu's positions would exceed %.0f (int32)", who, i + 1,
					  PE_MROPE_MAX_POSITION);
		if (out && col < first + count && col + (size_t)g->n > first && framed(tm, g))
			frames_write(tm, g, frame, next, col, first, count, out);
		else if (out && col < first + count && col + (size_t)g->n > first)
			segment_write(tm, g, video, next, col, first, count, out);
		col += (size_t)g->n;
		video += g->kind == PE_MROPE_VIDEO;
		frame += g->kind == PE_MROPE_VIDEO ? (size_t)g->t : 0;
		next = m + 1;
	}
	*max = next - 1;
	return 0;
}

/* ---- the table ---- */

static const struct pe_param_spec positions_params[] = {PE_MROPE_SEQUENCE_PARAMS};

/* The sequence's parameters. */
static void time_get(const struct pe_params *p, struct pe_mrope_time *tm)
{
	tm->variant = pe_param_enum(p, "variant");
	tm->merge = pe_param_int(p, "spatial_merge_size");
	tm->tokens_per_second = pe_param_real(p, "tokens_per_second");
	tm->time_step = tm->variant == PE_MROPE_QWEN25VL ? pe_param_enum(p, "time_step") : PE_MROPE_STEP_INT;
	tm->second_per_grid_t = pe_param_list(p, "second_per_grid_t", &tm->nsecond);
	tm->stamp = pe_param_list(p, "timestamp_tokens", &tm->nstamp);
}

/* qwen3vl, glm4v: timestamp_tokens is needed by videos, one value or one per frame. */
static int stamps_check(const struct pe_mrope_seq *q, const struct pe_mrope_time *tm, struct pe_err *err)
{
	if (tm->variant != PE_MROPE_QWEN3VL && tm->variant != PE_MROPE_GLM4V)
		return 0;
	if (!tm->stamp && q->frames)
		return pe_err_set(err, PE_EINVAL, "timestamp_tokens",
				  "timestamp_tokens: variant=%s needs the text tokens of each video frame's timestamp "
				  "(%s), one value for every frame or one per frame",
				  pe_mrope_variants[tm->variant], tm->variant == PE_MROPE_QWEN3VL ? "<t seconds>" : "its whole seconds");
	if (tm->stamp && tm->nstamp != 1 && tm->nstamp != q->frames)
		return pe_err_set(err, PE_EINVAL, "timestamp_tokens",
				  "timestamp_tokens has %zu values for %zu video frames (give one, or one per frame)", tm->nstamp,
				  q->frames);
	return 0;
}

/* Parse p's segments, with qwen3vl's and glm4v's frame text (after check: cannot fail but for memory). */
static int sequence(const struct pe_params *p, struct pe_mrope_seq *q, struct pe_mrope_time *tm, struct pe_err *err)
{
	time_get(p, tm);
	int rc = pe_mrope_seq_parse(q, p->v[pe_param_index(p->def, "segments")].text, tm->merge, err);
	if (rc == 0)
		rc = stamps_check(q, tm, err);
	return rc ? rc : pe_mrope_seq_stamp(q, tm, err);
}

int pe_mrope_sequence_check(struct pe_params *p, int64_t *max, struct pe_err *err)
{
	struct pe_mrope_seq q;
	struct pe_mrope_time tm;
	/* which variants read each parameter (bit v: variant v) and how a refusal names them */
	static const struct {
		const char *name;
		unsigned variants;
		const char *which;
	} only[] = {{"tokens_per_second", 1u << PE_MROPE_QWEN25VL, "qwen25vl"},
		    {"second_per_grid_t", 1u << PE_MROPE_QWEN25VL, "qwen25vl"},
		    {"time_step", 1u << PE_MROPE_QWEN25VL, "qwen25vl"},
		    {"timestamp_tokens", 1u << PE_MROPE_QWEN3VL | 1u << PE_MROPE_GLM4V, "qwen3vl or glm4v"}};
	int variant = pe_param_enum(p, "variant");
	for (size_t k = 0; k < sizeof only / sizeof only[0]; k++) {
		struct pe_param_val *v = &p->v[pe_param_index(p->def, only[k].name)];
		int reads = (only[k].variants >> variant) & 1;
		if (!reads && v->given)
			return pe_err_set(err, PE_EINVAL, only[k].name, "%s applies to variant=%s only", only[k].name,
					  only[k].which);
		if (!reads)
			v->set = 0;
	}
	int rc = sequence(p, &q, &tm, err);
	if (rc == 0 && tm.second_per_grid_t && tm.nsecond != q.videos)
		rc = pe_err_set(err, PE_EINVAL, "second_per_grid_t", "second_per_grid_t has %zu values for %zu videos",
				tm.nsecond, q.videos);
	if (rc == 0)
		rc = pe_mrope_positions(&q, &tm, 0, 0, NULL, max, err);
	char *canon = rc == 0 ? malloc((size_t)PE_MROPE_MAX_TEXT + 1) : NULL;
	if (canon && pe_mrope_seq_format(&q, canon, (size_t)PE_MROPE_MAX_TEXT + 1) >= 0) {
		char **text = &p->v[pe_param_index(p->def, "segments")].text;
		free(*text);
		*text = canon; /* equal sequences share one cache key */
		canon = NULL;
	}
	free(canon);
	pe_mrope_seq_destroy(&q);
	return rc;
}

int pe_mrope_sequence_get(const struct pe_params *p, struct pe_mrope_seq *q, struct pe_mrope_time *tm,
			  struct pe_err *err)
{
	return sequence(p, q, tm, err);
}

int pe_mrope_sequence_positions(const struct pe_params *p, size_t first, size_t count, int32_t *out, struct pe_err *err)
{
	struct pe_mrope_seq q;
	struct pe_mrope_time tm;
	int64_t max;
	int rc = pe_mrope_sequence_get(p, &q, &tm, err);
	if (rc == 0)
		rc = pe_mrope_positions(&q, &tm, first, count, out, &max, err);
	pe_mrope_seq_destroy(&q);
	return rc;
}

size_t pe_mrope_sequence_tokens(const struct pe_params *p)
{
	struct pe_mrope_seq q;
	struct pe_mrope_time tm;
	size_t n = sequence(p, &q, &tm, NULL) == 0 ? q.tokens : 0;
	pe_mrope_seq_destroy(&q);
	return n;
}

static int check(struct pe_params *p, struct pe_err *err)
{
	int64_t max;
	return pe_mrope_sequence_check(p, &max, err);
}

static int shape(const struct pe_params *p, struct pe_shape *s)
{
	s->rank = 2;
	s->dim[0] = 3;
	s->dim[1] = pe_mrope_sequence_tokens(p);
	return s->dim[1] ? 0 : PE_ENOMEM;
}

/* Straight into the output: positions are int32 by the check. */
static int compute(const struct pe_params *p, enum pe_dtype dt, void *out, struct pe_err *err)
{
	size_t n = pe_mrope_sequence_tokens(p);
	return n ? pe_mrope_sequence_positions(p, 0, n, out, err) : pe_err_set(err, PE_ENOMEM, "", "out of memory");
}

static double delta(const struct pe_params *p)
{
	struct pe_mrope_seq q;
	struct pe_mrope_time tm;
	int64_t max = -1;
	if (sequence(p, &q, &tm, NULL) == 0 && pe_mrope_positions(&q, &tm, 0, 0, NULL, &max, NULL) == 0)
		max = max + 1 - (int64_t)q.tokens;
	pe_mrope_seq_destroy(&q);
	return (double)max;
}

const struct pe_table_def pe_table_rope_mrope_positions = {
	.name = "rope/mrope/positions",
	.summary = "M-RoPE position ids [3, seq] (t, h, w) of a text+image+video sequence, as Qwen2-VL / Qwen2.5-VL / Qwen3-VL / GLM-4.1V's get_rope_index",
	.params = positions_params,
	.nparams = sizeof positions_params / sizeof positions_params[0],
	.fixed_dtype = PE_I32,
	.check = check,
	.shape = shape,
	.compute = compute,
	.extra_name = "mrope_position_delta",
	.extra = delta,
	.extra_header = "X-PE-Mrope-Delta",
};
