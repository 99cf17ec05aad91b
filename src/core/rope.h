/* Internal to /v1/rope and /v1/rope/inv_freq: the parsed parameters and the frequency plans of the
 * three arithmetics (rope_freq.c), shared by rope.c and the tests. Pure and thread-safe. */
#ifndef PE_CORE_ROPE_H
#define PE_CORE_ROPE_H

#include "posenc/core.h"

#include <stddef.h>
#include <stdint.h>

extern const char *const pe_rope_layouts[], *const pe_rope_scalings[], *const pe_rope_compats[];

/* Parameters shared by both tables (rope/inv_freq has all but len, offset, layout). */
#define PE_ROPE_PARAMS_COMMON(dim_default)                                                                                  \
	{"dim", PE_PT_INT, dim_default, 2, PE_MAX_DIM, NULL, "rotary dimensions (even)"},                           \
	{"base", PE_PT_REAL, "10000", 0, 1e300, NULL, "rope_theta (> 0)"},                                   \
	{"scaling", PE_PT_ENUM, "none", 0, 0, pe_rope_scalings, "rope_type of transformers' rope_scaling"},          \
	{"factor", PE_PT_REAL, "", 0, 1e300, NULL, "scaling factor (linear, ntk, dynamic, yarn, llama3, proportional; longrope: max/original positions)"}, \
	{"original_max_position_embeddings", PE_PT_INT, "", 1, PE_MAX_POSITION, NULL,                       \
	 "pretrained context (dynamic, yarn, longrope, llama3)"},                                            \
	{"seq_len", PE_PT_INT, "", 1, PE_MAX_POSITION, NULL, "sequence length seen (dynamic, longrope)"},    \
	{"beta_fast", PE_PT_REAL, "32", 1e-300, 1e300, NULL, "yarn: rotations of the fast boundary"},        \
	{"beta_slow", PE_PT_REAL, "1", 1e-300, 1e300, NULL, "yarn: rotations of the slow boundary"},         \
	{"mscale", PE_PT_REAL, "", 1e-300, 1e300, NULL, "yarn: mscale (with mscale_all_dim, DeepSeek)"},    \
	{"mscale_all_dim", PE_PT_REAL, "", 1e-300, 1e300, NULL, "yarn: mscale_all_dim (with mscale)"},      \
	{"attention_factor", PE_PT_REAL, "", 1e-300, 1e300, NULL, "yarn, longrope: attention scaling override"}, \
	{"truncate", PE_PT_BOOL, "1", 0, 1, NULL, "yarn: floor/ceil the correction range"},                 \
	{"low_freq_factor", PE_PT_REAL, "1", 1e-300, 1e300, NULL, "llama3: low frequency factor"},          \
	{"high_freq_factor", PE_PT_REAL, "4", 1e-300, 1e300, NULL, "llama3: high frequency factor"},        \
	{"partial_rotary_factor", PE_PT_REAL, "1", 1e-300, 1, NULL, "proportional: rotated share of dim (Gemma 4)"}, \
	{"short_factor", PE_PT_LIST, "", 1e-300, 1e300, NULL, "longrope: dim/2 factors up to the original context"}, \
	{"long_factor", PE_PT_LIST, "", 1e-300, 1e300, NULL, "longrope: dim/2 factors beyond it"},           \
	{"compat", PE_PT_ENUM, "exact", 0, 0, pe_rope_compats, "arithmetic: exact (double), hf (PyTorch float32), ggml (llama.cpp)"}
#define PE_ROPE_LAYOUT_PARAM \
	{"layout", PE_PT_ENUM, "half", 0, 0, pe_rope_layouts, "half (NeoX, rotate_half) or interleaved (GPT-J, Meta)"}

enum pe_rope_scaling {
	PE_ROPE_NONE, PE_ROPE_LINEAR, PE_ROPE_NTK, PE_ROPE_DYNAMIC, PE_ROPE_YARN, PE_ROPE_LONGROPE,
	PE_ROPE_LLAMA3, PE_ROPE_PROPORTIONAL
};

/* Every parameter after pe_params_finish, defaults filled in; has_* say whether an optional one is set. */
struct pe_rope_cfg {
	size_t dim, h; /* rotary dims and dim/2 frequencies */
	size_t rot;    /* frequencies that turn: h, or proportional's floor(partial_rotary_factor*dim/2) */
	double base;
	int scaling, compat;
	double factor;
	int has_factor;
	int64_t orig, seq_len; /* original_max_position_embeddings, seq_len (0 when they do not apply) */
	double beta_fast, beta_slow, mscale, mscale_all_dim, attention_factor;
	int has_mscale, has_attention_factor, truncate;
	double low_freq_factor, high_freq_factor;
	const double *short_factor, *long_factor; /* h values each (longrope), owned by the params */
};

void pe_rope_cfg_get(const struct pe_params *p, struct pe_rope_cfg *c);

/* llama.cpp's angle construction for one table (compat=ggml): theta starts at float(position) and
 * is multiplied by theta_scale once per frequency, then divided by freq_factor[i], scaled by
 * freq_scale and, for YaRN (ext_factor != 0), blended by the ramp over corr_dims. */
struct pe_rope_ggml {
	float theta_scale, freq_scale, ext_factor, corr_dims[2], mscale;
	float *freq_factors; /* h values, or NULL (1.0f) */
};

/* The frequencies of one table: w[i] is the angle step per position (exact: double inv_freq; hf: the
 * float32 inv_freq held exactly in a double; ggml: a double estimate of the per-position step, only
 * used to seed the angle-addition recurrence). att is attention_scaling (ggml: the float mscale). */
struct pe_rope_plan {
	struct pe_rope_cfg cfg;
	double *w;
	double att;
	struct pe_rope_ggml g;
};

/* Build the plan (allocates; free with pe_rope_plan_destroy). Returns 0 or PE_ENOMEM. */
int pe_rope_plan_init(struct pe_rope_plan *pl, const struct pe_params *p);
void pe_rope_plan_destroy(struct pe_rope_plan *pl);

/* Cheap bounds on the plan's frequencies for validation, without building the plan (rope_bound.c
 * says why they hold): *m is the largest |w_i| of a few indices the plan has (NaN when one of them
 * is NaN), *u an upper bound of every |w_i| (every w_i a number when *u is finite). -1 when the case
 * has no cheap bound (ggml, llama3, hf dynamic NTK past the original context): build the plan. */
int pe_rope_freq_bound(const struct pe_rope_cfg *c, double *m, double *u);
/* The same for compat=ggml's angles at position 1 (rope/inv_freq's values): -1 for llama3 and
 * longrope (freq factors). */
int pe_rope_ggml_angle_bound(const struct pe_rope_cfg *c, double *m, double *u);

/* Whether every frequency w_i of p's plan is a number with |w_i| * last < lim: PE_FREQ_OK,
 * PE_FREQ_NAN (a w_i is NaN; only with nan_first, else NaNs are passed over), PE_FREQ_BIG, or
 * PE_ENOMEM. Cheap through pe_rope_freq_bound where that decides, else the plan is built and
 * scanned; both give the same verdict (tests/core/test_rope_checks.c). */
enum { PE_FREQ_OK = 0, PE_FREQ_NAN = 1, PE_FREQ_BIG = 2 };
int pe_rope_freq_verdict(const struct pe_params *p, double last, double lim, int nan_first);
/* Tests only (not thread-safe): 1 makes every verdict scan the plan instead of using the cheap
 * bound (the reference the bound is checked against). */
void pe_rope_freq_force_scan(int on);
int pe_rope_freq_force_scanning(void);

/* attention_scaling alone, as reported beside the table. */
double pe_rope_attention_scaling(const struct pe_rope_cfg *c);

/* Target angles of rows pos0 .. pos0+nrows-1, row-major into t[nrows][h], in the plan's arithmetic. */
void pe_rope_angles(const struct pe_rope_plan *pl, int64_t pos0, size_t nrows, double *t);


/* Rows of the rope table p (a /v1/rope parameter set) at many offsets, with one plan: spans_rows
 * writes what /v1/rope?offset=offset&len=len (p's other parameters) holds, the cos plane into oc
 * and the sin plane into os, each [len][dim] in dt. p was checked at its own offset and len: keep
 * every span within them (angles no larger). new: NULL when out of memory. */
struct pe_rope_spans;
struct pe_rope_spans *pe_rope_spans_new(const struct pe_params *p, enum pe_dtype dt);
int pe_rope_spans_rows(struct pe_rope_spans *s, int64_t offset, size_t len, void *oc, void *os, struct pe_err *err);
void pe_rope_spans_free(struct pe_rope_spans *s);

/* M-RoPE (mrope_sections.c): mrope_section = (t, h, w) frequencies per position row, summing to
 * half = dim/2; pe_mrope_row_of(sec, interleaved, k) is the row (0 t, 1 h, 2 w) that frequency k
 * (0 <= k < half) turns with. The check names `mrope_section` in err. */
int pe_mrope_sections_check(const double *sec, size_t n, size_t half, int interleaved, struct pe_err *err);
int pe_mrope_row_of(const double sec[3], int interleaved, size_t k);

#endif
