/* Internal: the table definitions the registry lists, and helpers shared between tables. */
#ifndef PE_CORE_TABLES_H
#define PE_CORE_TABLES_H

#include "posenc/core.h"

extern const struct pe_table_def pe_table_sinusoidal;
extern const struct pe_table_def pe_table_sinusoidal2d, pe_table_rope2d;
extern const struct pe_table_def pe_table_sinusoidal3d, pe_table_sinusoidal_timestep; /* sinusoidal3d.c, timestep.c */
extern const struct pe_table_def pe_table_alibi_slopes, pe_table_alibi;
extern const struct pe_table_def pe_table_relative_t5, pe_table_relative_xl;
extern const struct pe_table_def pe_table_relative_deberta, pe_table_rope_query_scale; /* relative_deberta.c, query_scale.c */
extern const struct pe_table_def pe_table_rope, pe_table_rope_inv_freq;
extern const struct pe_table_def pe_table_rope_mrope, pe_table_rope_mrope_positions; /* mrope.c, mrope_positions.c */
extern const struct pe_table_def pe_transform_sinusoidal_apply, pe_transform_alibi_apply, pe_transform_rope_apply;
extern const struct pe_table_def pe_table_analysis_similarity, pe_table_analysis_rope_decay, pe_table_analysis_order;

/* One parameter value in its canonical text (params_key.c): its length, or -1 if cap is short. */
int pe_param_value_text(const struct pe_param_spec *sp, const struct pe_param_val *v, char *buf, size_t cap);

/* The table `def` for the parameters `from` gave that def shares (pe_params_derive), plus the
 * NULL-terminated name, value pairs of kv where `from` did not give that name, computed into a new
 * buffer of dt (caller frees; *count elements). NULL with err set on failure. How transforms and
 * analyses build the tables they use. */
void *pe_table_derived(const struct pe_params *from, const struct pe_table_def *def, const char *const *kv,
		       enum pe_dtype dt, size_t *count, struct pe_err *err);

/* compat=hf tables compute in float32: a real parameter they turn into a float must be a normal
 * float (else its frequencies overflow or vanish). 0, or PE_EINVAL naming it. */
int pe_check_float32_range(const struct pe_params *p, const char *name, struct pe_err *err);

/* Tables [q_len, k_len] whose entry depends on k - q only (relative.c): k_len defaults to q_len
 * (a check calls pe_relative_k_len); rows [r0, r0 + n) into out from the n + k_len - 1 values
 * value(ctx, k - q) those rows hold, each computed once, nothing allocated beside out: each row
 * after the first is one new value and its predecessor shifted. 0. */
void pe_relative_k_len(struct pe_params *p);
/* Their cost callback: nothing beyond the table, whose size the longer side names (a 413's param). */
int pe_relative_cost(const struct pe_params *p, struct pe_cost *c);
int pe_relative_rows(const struct pe_params *p, int32_t (*value)(const void *ctx, int64_t k_minus_q), const void *ctx,
		     size_t r0, size_t n, int32_t *out, struct pe_err *err);

/* rope-decay's work per term (a sin/cos pair, two additions, a square root), in multiply-adds of
 * the similarity kernel's time; documented with max_analysis_cost (docs/configuration.md). */
#define PE_DECAY_TERM_COST 64

/* Rows between two pe_cancelled() checks in a table of row_elems elements per row: about 2^20
 * elements (a millisecond or so of work), at least one row. */
static inline size_t pe_cancel_rows(size_t row_elems)
{
	return row_elems >= ((size_t)1 << 20) ? 1 : ((size_t)1 << 20) / (row_elems ? row_elems : 1);
}

/* Common parameter ranges. */
#define PE_MAX_LEN ((double)(1u << 30))     /* positions per table */
#define PE_MAX_DIM 65536.0                  /* embedding width */
#define PE_MAX_POSITION 4503599627370496.0  /* 2^52: offsets stay exact in double */

extern const char *const pe_compat_exact_hf[];  /* "exact", "hf" */
enum { PE_COMPAT_EXACT = 0, PE_COMPAT_HF = 1, PE_COMPAT_GGML = 2 };

#endif
