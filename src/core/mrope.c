/* /v1/rope/mrope: M-RoPE cos/sin tables [2, seq, dim] (cos plane, then sin plane, times
 * attention_scaling) as transformers' apply_multimodal_rotary_pos_emb uses them after the section
 * split: channel c of a token turns by frequency k = c mod dim/2 at the position of the row
 * (t, h or w) that pe_mrope_row_of gives k (sections in order for Qwen2-VL / Qwen2.5-VL,
 * interleaved for Qwen3-VL). The positions come from the segments (mrope_positions.c) or, in the
 * POST form, from the body (src/http/mrope.c, through pe_mrope_body_def). layout=half writes a row
 * as rotate_half takes it ([v | v], Qwen); layout=interleaved as GLM-4.1V's repeat_interleave does
 * (frequency k at channels 2k and 2k + 1).
 *
 * Every /v1/rope scaling composes: the frequencies and angles are the rope plan's
 * (rope_freq.c), the parameters are checked by /v1/rope's own check, and dynamic / longrope's
 * seq_len defaults to the largest position + 1 as transformers' dynamic_rope_update takes it.
 * compat=exact computes in double (one rounding to the dtype), compat=hf in PyTorch's float32
 * (float(position) * float inv_freq, cos/sin of that float, times float attention_scaling; with an
 * attention_scaling and dim % 16 == 0, PyTorch's own cos/sin, as rope.c: see token()).
 * compat=ggml is refused: llama.cpp's M-RoPE is another construction. Rows are computed directly
 * (no recurrence: consecutive tokens' positions are not consecutive), each value within 1 ulp. */
#include "core/kernels.h"
#include "core/mrope.h"
#include "core/rope.h"
#include "core/tables.h"
#include "core/torchmath.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define F16_MAX 65504.0

#define MROPE_TABLE_PARAMS                                                                                           \
	{"mrope_section", PE_PT_LIST, "16,24,24", 0, PE_MAX_DIM, PE_LIST_INTEGERS,                                    \
	 "frequencies per position row t,h,w (they sum to dim/2)"},                                                    \
	{"interleaved", PE_PT_BOOL, "0", 0, 1, NULL, "sections interleaved t,h,w,t,h,w... (Qwen3-VL)"},              \
	PE_ROPE_LAYOUT_PARAM,                                                                                          \
	PE_ROPE_PARAMS_COMMON("128")

static const struct pe_param_spec table_params[] = {PE_MROPE_SEQUENCE_PARAMS, MROPE_TABLE_PARAMS};
static const struct pe_param_spec body_params[] = {MROPE_TABLE_PARAMS};

/* ---- validation ---- */

/* Every angle and value finite in the mode's arithmetic for positions up to max_position (as
 * /v1/rope's check does for its rows; cheap where pe_rope_freq_verdict's bound decides). */
static int check_angles(const struct pe_params *p, int64_t max_position, struct pe_err *err)
{
	double last = (double)max_position + 1;
	double limit = pe_param_enum(p, "compat") == PE_COMPAT_EXACT ? DBL_MAX : FLT_MAX;
	int v = pe_rope_freq_verdict(p, last, limit / 4, 0);
	if (v == PE_ENOMEM)
		return pe_err_set(err, PE_ENOMEM, "", "out of memory");
	struct pe_rope_cfg c;
	pe_rope_cfg_get(p, &c);
	double att = pe_rope_attention_scaling(&c);
	const char *who = pe_param_isset(p, "factor") ? "factor" : "base";
	if (v == PE_FREQ_BIG)
		return pe_err_set(err, PE_EINVAL, who, "%s makes the rotation angles overflow", who);
	if (!(att > 0 && att <= F16_MAX))
		return pe_err_set(err, PE_EINVAL, who, "attention_scaling %g is beyond f16's range", att);
	return 0;
}

/* The rope parameters for positions up to max_position, then the sections. */
static int check_rope(struct pe_params *p, int64_t max_position, struct pe_err *err)
{
	if (pe_param_enum(p, "compat") == PE_COMPAT_GGML)
		return pe_err_set(err, PE_EINVAL, "compat", "M-RoPE tables offer compat=exact and compat=hf");
	int scaling = pe_param_enum(p, "scaling");
	struct pe_param_val *sl = &p->v[pe_param_index(p->def, "seq_len")];
	if (!sl->set && (scaling == PE_ROPE_DYNAMIC || scaling == PE_ROPE_LONGROPE)) {
		sl->set = 1;
		sl->i = max_position + 1;
		sl->r = (double)sl->i;
	}
	int rc = pe_table_rope.check(p, err);
	if (rc)
		return rc;
	size_t n;
	const double *sec = pe_param_list(p, "mrope_section", &n);
	struct pe_err e = {0};
	rc = pe_mrope_sections_check(sec, n, (size_t)pe_param_int(p, "dim") / 2, (int)pe_param_int(p, "interleaved"), &e);
	if (rc)
		return pe_err_set(err, rc, "mrope_section", "mrope_section: %s", e.detail);
	return check_angles(p, max_position, err);
}

static int table_check(struct pe_params *p, struct pe_err *err)
{
	int64_t max;
	int rc = pe_mrope_sequence_check(p, &max, err);
	return rc ? rc : check_rope(p, max, err);
}

int pe_mrope_body_finish(struct pe_params *p, int64_t max_position, struct pe_err *err)
{
	int rc = pe_params_finish(p, err);
	return rc ? rc : check_rope(p, max_position, err);
}

/* ---- the table ---- */

struct job {
	struct pe_rope_plan pl;
	const struct pe_kernel_table *k;
	size_t h, dim;
	int fmode, pairs; /* pairs: interleaved layout (GLM-4.1V), pair k at channels 2k, 2k + 1 */
	int torch_trig;   /* PyTorch's cos/sin (compat=hf with attention_scaling): see token() */
	int sections;     /* frequencies in sections t, h, w (not interleaved: Qwen2-VL, GLM-4.1V) */
	enum pe_dtype dt;
	double *buf;
	double *t3, *t, *c, *s, *row; /* angles of the 3 rows, chosen angles, cos, sin, an output row */
	double *c3, *s3;              /* torch_trig with sections: cos and sin of the 3 rows' angles */
	unsigned char *row_of;        /* the position row of each frequency */
};

static int job_init(struct job *j, const struct pe_params *p, enum pe_dtype dt)
{
	memset(j, 0, sizeof *j);
	if (pe_rope_plan_init(&j->pl, p) != 0)
		return PE_ENOMEM;
	j->k = pe_kernels();
	j->h = j->pl.cfg.h;
	j->dim = j->pl.cfg.dim;
	j->fmode = j->pl.cfg.compat != PE_COMPAT_EXACT;
	j->pairs = pe_param_enum(p, "layout") == 1; /* pe_rope_layouts: half, interleaved */
	j->dt = dt;
	/* PyTorch's groups of 8 lanes lie inside a half row, as in rope.c */
	j->torch_trig = j->pl.cfg.compat == PE_COMPAT_HF && (float)j->pl.att != 1.0f && j->h % 8 == 0;
	int inter = (int)pe_param_int(p, "interleaved");
	j->sections = !inter;
	if (!(j->buf = malloc(sizeof(double) * (12 * j->h + j->dim) + j->h))) {
		pe_rope_plan_destroy(&j->pl);
		return PE_ENOMEM;
	}
	j->t3 = j->buf;
	j->t = j->t3 + 3 * j->h;
	j->c = j->t + j->h;
	j->s = j->c + j->h;
	j->row = j->s + j->h;
	j->c3 = j->row + j->dim;
	j->s3 = j->c3 + 3 * j->h;
	j->row_of = (unsigned char *)(j->s3 + 3 * j->h);
	size_t n;
	const double *sec = pe_param_list(p, "mrope_section", &n);
	for (size_t k = 0; k < j->h; k++)
		j->row_of[k] = (unsigned char)pe_mrope_row_of(sec, inter, k);
	return 0;
}

static void job_destroy(struct job *j)
{
	free(j->buf);
	pe_rope_plan_destroy(&j->pl);
}

/* One plane's row, [v | v] in the layout of rotate_half or v0 v0 v1 v1 ... interleaved, rounded
 * once into the dtype. */
static void store(const struct job *j, const double *v, char *o)
{
	if (j->dt == PE_F32) {
		j->k->rope_store_f32(v, v, j->h, j->pl.att, j->fmode, j->pairs, 0, (float *)o, (float *)o);
		return;
	}
	for (size_t i = 0; i < j->h; i++) {
		double x = j->fmode ? (double)pe_rope_f32_value(v[i], j->pl.att, 1) : v[i] * j->pl.att;
		j->row[j->pairs ? 2 * i : i] = j->row[j->pairs ? 2 * i + 1 : j->h + i] = x;
	}
	pe_store_f64(j->dt, o, j->row, j->dim);
}

/* A token's cos and sin rows, at the positions `at` of its three rows (t, h, w).
 * With torch_trig, the cos and sin are PyTorch's (torchmath.c), whose groups of 8 lanes decide
 * together how they reduce: transformers takes them of each row's whole [freqs | freqs] before the
 * section split (Qwen2-VL, GLM-4.1V), or of the interleaved frequencies (Qwen3-VL), so the groups
 * are of each row's angles, or of the chosen ones. */
static void token(struct job *j, const int32_t at[3], char *oc, char *os)
{
	size_t h = j->h;
	for (size_t q = 0; q < 3; q++) {
		if (q && at[q] == at[q - 1])
			memcpy(j->t3 + q * h, j->t3 + (q - 1) * h, h * sizeof(double));
		else
			pe_rope_angles(&j->pl, at[q], 1, j->t3 + q * h);
	}
	if (j->torch_trig && j->sections) {
		pe_torch_sincosf(j->t3, j->s3, j->c3, 3 * h);
		for (size_t k = 0; k < h; k++) {
			j->c[k] = j->c3[j->row_of[k] * h + k];
			j->s[k] = j->s3[j->row_of[k] * h + k];
		}
	} else {
		for (size_t k = 0; k < h; k++)
			j->t[k] = j->t3[j->row_of[k] * h + k];
		if (j->torch_trig)
			pe_torch_sincosf(j->t, j->s, j->c, h);
		else
			j->k->sincos_f64(j->t, j->s, j->c, h);
	}
	store(j, j->c, oc);
	store(j, j->s, os);
}

/* Where the tokens' positions come from: an array [3][seq] (the POST form), or the params' sequence
 * (q, tm), BLOCK tokens at a time into a small buffer. */
#define BLOCK 1024
struct source {
	const int32_t *pos;
	size_t seq;
	struct pe_mrope_seq q;
	struct pe_mrope_time tm;
};

/* Rows [r0, r0 + n) of both planes (oc, os: NULL for a plane not wanted). 0, or the error (the
 * pe_cancelled() code, checked between blocks of about 2^20 values). */
static int rows(const struct pe_params *p, const struct source *src, enum pe_dtype dt, size_t r0, size_t n, char *oc,
		char *os, struct pe_err *err)
{
	struct job j;
	if (job_init(&j, p, dt) != 0)
		return pe_err_set(err, PE_ENOMEM, "", "out of memory");
	size_t row_bytes = j.dim * pe_dtype_size(dt);
	/* a row of a plane not wanted, then a block of positions (row_bytes is a multiple of 4: dim is even) */
	char *scratch = malloc(row_bytes + 3 * BLOCK * sizeof(int32_t));
	int rc = scratch ? 0 : pe_err_set(err, PE_ENOMEM, "", "out of memory");
	int32_t *blk = scratch ? (int32_t *)(void *)(scratch + row_bytes) : NULL;
	int64_t max;
	size_t block = pe_cancel_rows(2 * j.h) < BLOCK ? pe_cancel_rows(2 * j.h) : BLOCK; /* ~1 ms between checks */
	for (size_t b0 = 0; b0 < n && rc == 0; b0 += block) {
		size_t nb = n - b0 < block ? n - b0 : block, stride = nb;
		const int32_t *at = blk;
		if ((rc = pe_cancelled()) != 0) {
			pe_cancel_err(rc, err);
			break;
		}
		if (src->pos) {
			at = src->pos + r0 + b0;
			stride = src->seq;
		} else if ((rc = pe_mrope_positions(&src->q, &src->tm, r0 + b0, nb, blk, &max, err)) != 0) {
			break;
		}
		for (size_t i = 0; i < nb; i++) {
			const int32_t three[3] = {at[i], at[stride + i], at[2 * stride + i]};
			size_t o = (b0 + i) * row_bytes;
			token(&j, three, oc ? oc + o : scratch, os ? os + o : scratch);
		}
	}
	free(scratch);
	job_destroy(&j);
	return rc;
}

int pe_mrope_table_compute(const struct pe_params *p, const int32_t *pos, size_t seq, enum pe_dtype dt, void *out,
			   struct pe_err *err)
{
	struct source src = {.pos = pos, .seq = seq};
	size_t plane = seq * (size_t)pe_param_int(p, "dim") * pe_dtype_size(dt);
	return rows(p, &src, dt, 0, seq, out, (char *)out + plane, err);
}

/* Rows of the table from the params' sequence. */
static int sequence_rows(const struct pe_params *p, enum pe_dtype dt, size_t r0, size_t n, char *oc, char *os,
			 struct pe_err *err)
{
	struct source src = {0};
	int rc = pe_mrope_sequence_get(p, &src.q, &src.tm, err);
	if (rc == 0)
		rc = rows(p, &src, dt, r0, n, oc, os, err);
	pe_mrope_seq_destroy(&src.q);
	return rc;
}

static int table_compute_rows(const struct pe_params *p, enum pe_dtype dt, size_t r0, size_t n, void *const *out,
			      struct pe_err *err)
{
	return sequence_rows(p, dt, r0, n, out[0], out[1], err);
}

static int table_compute(const struct pe_params *p, enum pe_dtype dt, void *out, struct pe_err *err)
{
	size_t seq = pe_mrope_sequence_tokens(p), plane = seq * (size_t)pe_param_int(p, "dim") * pe_dtype_size(dt);
	return sequence_rows(p, dt, 0, seq, out, (char *)out + plane, err);
}

static int table_shape(const struct pe_params *p, struct pe_shape *s)
{
	s->rank = 3;
	s->dim[0] = 2;
	s->dim[1] = pe_mrope_sequence_tokens(p);
	s->dim[2] = (size_t)pe_param_int(p, "dim");
	return s->dim[1] ? 0 : PE_ENOMEM;
}

static double attention_scaling(const struct pe_params *p)
{
	struct pe_rope_cfg c;
	pe_rope_cfg_get(p, &c);
	return pe_rope_attention_scaling(&c);
}

static double max_abs(const struct pe_params *p) { return fabs(attention_scaling(p)); }

const struct pe_table_def pe_table_rope_mrope = {
	.name = "rope/mrope",
	.summary = "M-RoPE cos/sin tables [2, seq, dim] (Qwen2-VL, Qwen2.5-VL, Qwen3-VL) of a text+image+video sequence",
	.params = table_params,
	.nparams = sizeof table_params / sizeof table_params[0],
	.fixed_dtype = PE_DTYPE_COUNT_,
	.check = table_check,
	.shape = table_shape,
	.compute = table_compute,
	.max_abs = max_abs,
	.compute_rows = table_compute_rows,
	.extra_name = "attention_scaling",
	.extra = attention_scaling,
	.panel_labels = pe_cos_sin_labels,
};

/* The POST form's parameters: positions come from the body; not in the registry. */
const struct pe_table_def pe_mrope_body_def = {
	.name = "rope/mrope",
	.summary = "M-RoPE cos/sin tables of positions given in the body",
	.params = body_params,
	.nparams = sizeof body_params / sizeof body_params[0],
	.fixed_dtype = PE_DTYPE_COUNT_,
	.max_abs = max_abs,
	.extra_name = "attention_scaling",
	.extra = attention_scaling,
	.panel_labels = pe_cos_sin_labels,
};
