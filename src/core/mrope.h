/* Internal to M-RoPE (/v1/rope/mrope and /v1/rope/mrope/positions): a multimodal sequence parsed from
 * its `segments` text, the [3, seq] position ids transformers' Qwen2-VL / Qwen2.5-VL / Qwen3-VL /
 * GLM-4.1V get_rope_index builds for it, and the cos/sin table of given positions. Shared by mrope_positions.c, mrope.c, the
 * HTTP handler of the POST form (src/http/mrope.c), the fuzz target and the tests. Pure and
 * thread-safe; every size a client controls is bounded by the limits below before memory is taken. */
#ifndef PE_CORE_MROPE_H
#define PE_CORE_MROPE_H

#include "posenc/core.h"

#include <stddef.h>
#include <stdint.h>

#define PE_MROPE_MAX_SEGMENTS 4096         /* segments of one sequence */
#define PE_MROPE_MAX_TOKENS (1u << 24)     /* tokens of one sequence (16 Mi) */
#define PE_MROPE_MAX_TEXT 65536.0          /* bytes of the segments text */
#define PE_MROPE_MAX_POSITION 2147483647.0 /* positions are int32, as the model's position_ids */

enum { PE_MROPE_TEXT, PE_MROPE_IMAGE, PE_MROPE_VIDEO };
enum { PE_MROPE_QWEN2VL, PE_MROPE_QWEN25VL, PE_MROPE_QWEN3VL, PE_MROPE_GLM4V };
enum { PE_MROPE_STEP_INT, PE_MROPE_STEP_FLOAT }; /* Qwen2.5-VL's time step (pe_mrope_time_steps) */
#define PE_MROPE_MAX_STAMP 1024.0 /* qwen3vl, glm4v: text tokens of one frame's timestamp */

/* text:N holds n = N tokens; image:TxHxW / video:TxHxW hold n = T * (H/m) * (W/m) (m: the spatial
 * merge size), in (t, h, w) order as the vision encoder's merged patches come. */
struct pe_mrope_seg {
	int kind;
	int64_t t, h, w; /* the grid (text: t = N, h = w = 1) */
	int64_t n;       /* tokens in the sequence */
};

struct pe_mrope_seq {
	struct pe_mrope_seg *seg; /* heap, n entries */
	size_t n, tokens, videos;
	size_t frames; /* the videos' T, summed */
};

/* Parse "text:5,image:1x28x28,video:8x28x28,..." (decimal digits only; H and W multiples of
 * merge): 0, or PE_EINVAL naming `segments` (which segment, why); PE_ENOMEM. The segment count is
 * checked before the array is allocated, the token count as it grows. Free with
 * pe_mrope_seq_destroy (also after a failure). */
int pe_mrope_seq_parse(struct pe_mrope_seq *q, const char *text, int64_t merge, struct pe_err *err);
void pe_mrope_seq_destroy(struct pe_mrope_seq *q);
/* The canonical text of q ("text:5,image:1x28x28"): length, or -1 when cap is too small. */
int pe_mrope_seq_format(const struct pe_mrope_seq *q, char *buf, size_t cap);

/* How positions advance (get_rope_index): variant, merge size, Qwen2.5-VL's time scale, Qwen3-VL's
 * and GLM-4.1V's timestamp text. */
struct pe_mrope_time {
	int variant;
	int64_t merge;
	double tokens_per_second;
	int time_step; /* PE_MROPE_STEP_INT (0: current transformers) or PE_MROPE_STEP_FLOAT */
	const double *second_per_grid_t; /* one per video, or NULL (1 each) */
	size_t nsecond;
	const double *stamp; /* qwen3vl, glm4v: timestamp tokens per frame (nstamp 1: every frame's), or NULL (0) */
	size_t nstamp;
};

/* Qwen3-VL's processor writes a video of grid T x H x W as T frames, each `<t seconds>` (stamp
 * text tokens) <|vision_start|> (H/m)(W/m) frame tokens <|vision_end|>; GLM-4.1V's as T frames,
 * each <|begin_of_image|> frame tokens <|end_of_image|> and the whole seconds (stamp text tokens).
 * Both get_rope_index give each frame grid 1 x H x W (time 0) its own block. For tm->variant
 * PE_MROPE_QWEN3VL or PE_MROPE_GLM4V this adds those text tokens to each video's n and to
 * q->tokens (the vision segment then spans the frames with their text); other variants: nothing.
 * 0, or PE_EINVAL when the sequence would exceed PE_MROPE_MAX_TOKENS: naming `segments` when the
 * two tokens around each frame alone take it there (no count could help), else
 * `timestamp_tokens`. */
int pe_mrope_seq_stamp(struct pe_mrope_seq *q, const struct pe_mrope_time *tm, struct pe_err *err);

/* The positions of q's tokens [first, first + count) into out ([3][count] int32, row-major: t, h,
 * w; NULL: none written) and the largest position of the whole sequence into *max (mrope_position_delta = *max + 1 - tokens). Qwen2.5-VL's video time
 * index of frame t is, as PyTorch computes it, with time_step int (transformers 4.52 and later)
 * t * trunc(second_per_grid_t) * tokens_per_second (int64; float32 then truncated when
 * tokens_per_second is fractional), with time_step float (earlier versions)
 * trunc(float(float(t) * float(second_per_grid_t)) * float(tokens_per_second)); images have time 0. 0, or PE_EINVAL naming the parameter that makes a
 * position exceed PE_MROPE_MAX_POSITION. */
int pe_mrope_positions(const struct pe_mrope_seq *q, const struct pe_mrope_time *tm, size_t first, size_t count,
		       int32_t *out, int64_t *max, struct pe_err *err);

/* The parameters of a sequence, shared by both GET tables (mrope_positions.c). */
extern const char *const pe_mrope_variants[], *const pe_mrope_time_steps[];
#define PE_MROPE_SEQUENCE_PARAMS                                                                                              \
	{"segments", PE_PT_TEXT, "text:4,image:1x4x4,text:2,video:2x4x4,text:2", 0, PE_MROPE_MAX_TEXT, NULL,           \
	 "the sequence: text:N, image:TxHxW, video:TxHxW (grid_thw before merging), comma-separated"},             \
	{"variant", PE_PT_ENUM, "qwen2vl", 0, 0, pe_mrope_variants,                                                   \
	 "get_rope_index of qwen2vl, qwen25vl (time-scaled videos), qwen3vl or glm4v (videos as timestamped frames)"}, \
	{"spatial_merge_size", PE_PT_INT, "2", 1, 1024, NULL, "vision patches merged per side into one token"},       \
	{"tokens_per_second", PE_PT_REAL, "2", 0, 1e6, NULL, "qwen25vl: time positions per second of video"},         \
	{"second_per_grid_t", PE_PT_LIST, "", 0, 1e6, NULL, "qwen25vl: seconds per temporal grid step, one per video (default 1)"}, \
	{"time_step", PE_PT_ENUM, "int", 0, 0, pe_mrope_time_steps,                                                  \
	 "qwen25vl: int casts second_per_grid_t to an integer before the product (transformers 4.52 and later), "    \
	 "float keeps the float32 product of earlier versions"},                                                      \
	{"timestamp_tokens", PE_PT_LIST, "", 0, PE_MROPE_MAX_STAMP, PE_LIST_INTEGERS,                                \
	 "qwen3vl, glm4v: text tokens of each video frame's timestamp (<t seconds>; glm4v: its whole seconds): "       \
	 "one value for every frame, or one per frame"}

/* A table's sequence parameters checked (those of qwen25vl, or of qwen3vl and glm4v, refused for
 * the other variants, the segments parsed and rewritten canonically, second_per_grid_t counted against the
 * videos, timestamp_tokens against the frames, positions bounded) and its largest position into *max. 0 or PE_EINVAL naming the parameter. */
int pe_mrope_sequence_check(struct pe_params *p, int64_t *max, struct pe_err *err);
/* Tokens of a checked params' sequence (0 only when memory is short). */
size_t pe_mrope_sequence_tokens(const struct pe_params *p);
/* Its sequence parsed (free q with pe_mrope_seq_destroy, also after a failure) and its time rule. */
int pe_mrope_sequence_get(const struct pe_params *p, struct pe_mrope_seq *q, struct pe_mrope_time *tm,
			  struct pe_err *err);
/* Its tokens [first, first + count) into out ([3][count]), as pe_mrope_positions. */
int pe_mrope_sequence_positions(const struct pe_params *p, size_t first, size_t count, int32_t *out, struct pe_err *err);

/* The table definitions' shared parts (mrope.c). A params of pe_mrope_body_def (the POST form:
 * no segments, positions from the body) is finished with pe_mrope_body_finish, which checks it
 * for positions up to max_position; pe_mrope_table_compute then writes the [2, seq, dim] table of
 * positions pos ([3][seq], each in 0 .. max_position) into out. */
extern const struct pe_table_def pe_mrope_body_def;
int pe_mrope_body_finish(struct pe_params *p, int64_t max_position, struct pe_err *err);
int pe_mrope_table_compute(const struct pe_params *p, const int32_t *pos, size_t seq, enum pe_dtype dt, void *out,
			   struct pe_err *err);

#endif
