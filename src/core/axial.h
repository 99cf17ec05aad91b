/* Internal to axial (N-D) RoPE, the rotary encoding of image and video diffusion transformers
 * (/v1/rope/axial, /v1/rope/axial/positions, rope/apply with axes_dim): each token has a position
 * per axis (text index, frame, row, column), the head's rotary channels are cut into one band per
 * axis (axes_dim), and band a turns by its own frequencies theta^(-2k/axes_dim[a]) at the token's
 * coordinate on axis a. The presets are the models of Hugging Face diffusers (FluxPosEmbed,
 * HunyuanVideoRotaryPosEmbed, WanRotaryPosEmbed, CogVideoX's get_3d_rotary_pos_embed, Qwen-Image's
 * QwenEmbedRope): their axes, theta, frequency arithmetic and position ids for a token grid.
 *
 * Shared by axial.c (presets, grid, positions), axial_table.c (the tables), apply_rope.c, the HTTP
 * handler of the POST form (src/http/axial.c), the fuzz target and the tests; a plan names the
 * tables by the canonical query pe_axial_query writes. Pure and thread-safe; every size a client
 * controls is bounded by the limits below before memory is taken. */
#ifndef PE_CORE_AXIAL_H
#define PE_CORE_AXIAL_H

#include "posenc/core.h"

#include <stddef.h>
#include <stdint.h>

#define PE_AXIAL_MAX_AXES 8            /* axes of one position id */
#define PE_AXIAL_MAX_SIDE 65536        /* frames, rows or columns of a grid */
#define PE_AXIAL_MAX_TOKENS (1u << 24) /* tokens of one grid with its text (16 Mi) */
#define PE_AXIAL_MAX_TEXT 65536        /* text tokens */
#define PE_AXIAL_MAX_ABS 4503599627370496.0 /* |position| <= 2^52 */

enum { PE_AXIAL_NONE, PE_AXIAL_FLUX, PE_AXIAL_HUNYUANVIDEO, PE_AXIAL_WAN, PE_AXIAL_COGVIDEOX, PE_AXIAL_QWENIMAGE };

/* A model's axial RoPE as diffusers builds it. */
struct pe_axial_preset {
	const char *name;
	size_t naxes;
	const char *axes_dim; /* the model's default head split, as the query writes it */
	double theta;
	int freqs_f32;   /* frequencies and angles in float32 (else float64, rounded to float at the end) */
	int text;        /* text tokens carry positions (first in the sequence) */
	int video;       /* the grid may be TxHxW with T > 1 */
	int64_t max_pos; /* largest position a model's precomputed table holds (0: none) */
};
extern const char *const pe_axial_preset_names[]; /* "none", then the presets in enum order */
const struct pe_axial_preset *pe_axial_preset(int id); /* NULL for PE_AXIAL_NONE */

/* For plans (a diffusers transformer's config.json): the preset of its _class_name
 * (FluxTransformer2DModel, HunyuanVideoTransformer3DModel, WanTransformer3DModel,
 * CogVideoXTransformer3DModel, QwenImageTransformer2DModel), else PE_AXIAL_NONE; and the axes of a
 * model whose code derives them from attention_head_dim (Wan: d - 4*floor(d/6), 2*floor(d/6),
 * 2*floor(d/6); CogVideoX: d/4, 3*(d/8), 3*(d/8)) into axes[3]: 0, or PE_EINVAL when the preset's
 * config states them instead or the split is not even and positive. */
int pe_axial_preset_of_class(const char *class_name);
int pe_axial_head_split(int preset, int64_t head_dim, int64_t axes[3]);

/* A token grid: "HxW" (t = 1, rank 2) or "TxHxW" (rank 3), decimal digits, each side in
 * 1 .. PE_AXIAL_MAX_SIDE and the product at most PE_AXIAL_MAX_TOKENS. 0, or PE_EINVAL naming
 * `grid` with the reason. */
struct pe_axial_grid {
	int rank;
	int64_t t, h, w;
};
int pe_axial_grid_parse(const char *text, struct pe_axial_grid *g, struct pe_err *err);
/* "TxHxW" or "HxW" as parsed: length, or -1 when cap is short. */
int pe_axial_grid_format(const struct pe_axial_grid *g, char *buf, size_t cap);

/* Where a preset puts its tokens: the grid and text, and the model's own parameters. */
struct pe_axial_layout {
	int preset;
	struct pe_axial_grid grid;
	int64_t text;                     /* text tokens (presets with text positions), first */
	int64_t base_width, base_height;  /* cogvideox: the crop region's grid (sample size / patch) */
	int scale_rope;                   /* qwenimage: rows and columns centred on zero */
	int hf;                           /* positions as the model's float32 tensors hold them */
};
size_t pe_axial_tokens(const struct pe_axial_layout *l);
/* Tokens [first, first + count) into out ([count][naxes] doubles), in the model's token order. */
void pe_axial_positions(const struct pe_axial_layout *l, size_t first, size_t count, double *out);

/* The frequencies and arithmetic of one table. */
struct pe_axial_rope {
	size_t naxes, dim;              /* dim = sum of axes_dim */
	size_t axes_dim[PE_AXIAL_MAX_AXES];
	double theta;
	int hf, freqs_f32, interleaved; /* compat=hf, its float32 frequencies, layout */
	int torch_vec;                  /* hf float32 cos/sin as torch.cos/sin of a tensor: pe_axial_row_torch */
	int polar;                      /* hf float32 cos/sin as torch.polar's: libm's cosf/sinf per angle */
	double *freq;                   /* [dim/2]: axis a's k-th frequency at off[a]/2 + k (heap) */
};
/* From checked params of rope/axial or rope/apply (axes_dim, theta or base, compat, layout,
 * freqs_dtype). 0 or PE_ENOMEM; free with pe_axial_rope_destroy. */
int pe_axial_rope_init(struct pe_axial_rope *r, const struct pe_params *p);
void pe_axial_rope_destroy(struct pe_axial_rope *r);
/* One token's cos and sin rows (dim doubles each: in hf mode float values) at ids[naxes]. */
void pe_axial_row(const struct pe_axial_rope *r, const double *ids, double *cs, double *sn);
/* compat=hf with float32 frequencies (but Qwen-Image's torch.polar, which pe_axial_row matches):
 * the model takes cos and sin of a whole tensor of angles [rows, axes_dim[a] / 2] per axis, 8
 * lanes at a time (pe_torch_sincosf8), so a value depends on the angles beside it. Axis a's
 * tensor has src[a].rows rows, row src[a].row is this token's, and src[a].pos gives any row's id:
 * the token's ids for get_1d_rotary_pos_embed over every token (HunyuanVideo, posted ids), the
 * axis' coordinates for CogVideoX's per-axis tables. */
struct pe_axial_src {
	size_t rows, row;
	double (*pos)(const void *ctx, size_t axis, size_t row);
	const void *ctx;
};
void pe_axial_row_torch(const struct pe_axial_rope *r, const struct pe_axial_src *src, double *cs, double *sn);

/* Are ids [n][naxes] finite and within PE_AXIAL_MAX_ABS? 0, or PE_EBODY naming `who`. */
int pe_axial_ids_check(const double *ids, size_t n, size_t naxes, const char *who, struct pe_err *err);

/* n ids of naxes axes as an npy parser gives them (dtype f32, f64, f16, bf16, int32, or int64 when
 * wide; C order, possibly unaligned) into out as doubles, then pe_axial_ids_check'ed. 0, or
 * PE_EBODY naming `who`. */
int pe_axial_ids_from(const void *data, enum pe_dtype dt, int wide, size_t n, size_t naxes, double *out,
		      const char *who, struct pe_err *err);

/* axes_dim of params p against naxes axes (0: the preset's or the list's own count): each even
 * and >= 2, one per axis, the sum within PE_MAX_DIM. 0, or PE_EINVAL naming axes_dim. */
int pe_axial_axes_check(const struct pe_params *p, size_t naxes, struct pe_err *err);

/* The tables' shared parts (axial_table.c). A params of pe_axial_body_def (the POST form: no grid,
 * ids from the body) is finished with pe_params_finish and then pe_axial_body_check against the
 * body's axes; pe_axial_table_compute writes the [2, S, dim] table of ids [S][naxes] into out. */
extern const struct pe_table_def pe_table_rope_axial, pe_table_rope_axial_positions, pe_axial_body_def;
int pe_axial_body_check(const struct pe_params *p, size_t naxes, struct pe_err *err);
int pe_axial_table_compute(const struct pe_params *p, const double *ids, size_t n, enum pe_dtype dt, void *out,
			   struct pe_err *err);
/* The layout of checked params of either table. */
void pe_axial_layout_get(const struct pe_params *p, struct pe_axial_layout *l);
/* The query a plan writes for a preset's table at a grid ("preset=flux&grid=64x64&text_tokens=512"):
 * length, or -1 when cap is short. */
int pe_axial_query(int preset, const struct pe_axial_grid *g, int64_t text, char *buf, size_t cap);

/* rope/apply with axes_dim (apply_axial.c): x rotated in place by the ids of pos ([seq, n_axes]),
 * channels [0, sum(axes_dim)) of each vector, interleaved pairs (diffusers' use_real_unbind_dim=-1);
 * x is [outer, seq, inner, last] in the working dtype. 0, or PE_EINVAL / PE_EBODY naming positions. */
struct pe_axial_geometry {
	size_t outer, seq, inner, last;
};
int pe_axial_apply(const struct pe_params *p, const struct pe_positions *pos, struct pe_tensor_mut *x,
		   const struct pe_axial_geometry *g, struct pe_err *err);

/* The grid parameters, known to both GET tables and refused by the POST form. */
#define PE_AXIAL_GRID_PARAMS                                                                                      \
	{"grid", PE_PT_TEXT, "16x16", 0, 64, NULL, "token grid HxW (images) or TxHxW (video), after patching"},             \
	{"text_tokens", PE_PT_INT, "", 0, PE_AXIAL_MAX_TEXT, NULL, "flux, qwenimage: text tokens, first in the sequence"}, \
	{"base_width", PE_PT_INT, "", 1, PE_AXIAL_MAX_SIDE, NULL, "cogvideox: crop region width in tokens (sample_width / patch_size)"}, \
	{"base_height", PE_PT_INT, "", 1, PE_AXIAL_MAX_SIDE, NULL, "cogvideox: crop region height in tokens (sample_height / patch_size)"}, \
	{"scale_rope", PE_PT_BOOL, "", 0, 1, NULL, "qwenimage: rows and columns centred on zero (the model's 1)"}

#endif
