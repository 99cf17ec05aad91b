/* /v1/rope and /v1/rope/inv_freq: rotary position embedding tables, shape [2, len, dim] (cos plane,
 * then sin plane, both times attention_scaling as transformers multiplies them) and [dim/2].
 *
 * Parameters, validation and canonical keys are here; frequencies per scaling and compat mode are in
 * rope_freq.c. A parameter that does not apply to the chosen scaling is a 400 naming it (a silent
 * no-op would hide a misread model config) and never enters the canonical key. Validation runs on
 * the HTTP thread for every request (cache hits too), so its frequency check does not build the
 * dim/2 frequencies: pe_rope_freq_verdict decides from a few of them and a proven bound, and scans
 * only where the bound cannot decide (tests/core/test_rope_checks.c holds it to the scan).
 *
 * Speed: a half-layout row holds dim/2 distinct values (cat(c, c)), so each row's dim/2 cos/sin are
 * computed once and written twice, each output row exactly once. For f32/f16/bf16 output the cos/sin
 * come from the angle-addition recurrence of kernels.h, anchored every PE_ROPE_ANCHOR_ROWS rows on
 * directly computed values and corrected to each row's own rounded angle, so they are within 2^-44
 * of the exact sin/cos of the mode's angle and one rounding to the dtype gives the same bound as the
 * direct path (<= 1 ulp from the correctly rounded value). f64 output and very large angles take the
 * direct path (SLEEF's or glibc's sincos for every value). Large f32 tables use non-temporal stores.
 *
 * compat=hf with attention_scaling (YaRN, LongRoPE): the cos/sin are PyTorch's own float32 torch.cos
 * / torch.sin of the float32 angle (8 lanes at a time, torchmath.c), then times (float)scale in
 * float32 as transformers does: a correctly rounded cos one ulp from PyTorch's can land two ulps
 * away after the multiply, PyTorch's lands on the model's value. Only where PyTorch's groups of 8
 * lanes lie inside a row (dim a multiple of 16); other dims keep the correctly rounded cos/sin.
 *
 * compat=ggml: libm's cosf and sinf of the float32 angle, as llama.cpp's rope_yarn takes them (and
 * the same libm gives them bit for bit), then times its float32 mscale. */
#include "core/kernels.h"
#include "core/rope.h"
#include "core/tables.h"
#include "core/torchmath.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK_ELEMS 32768           /* angles formed together: up to 64 rows, 256 KB */
#define STREAM_BYTES (8u << 20)     /* f32 tables from 8 MB on bypass the cache */
#define GGML_MAX_POS 2147483647.0   /* llama.cpp positions are int32 */
#define F16_MAX 65504.0             /* attention_scaling keeps every dtype finite */

enum { L_HALF, L_INTERLEAVED };
const char *const pe_rope_layouts[] = {"half", "interleaved", NULL};
const char *const pe_rope_scalings[] = {"none", "linear", "ntk", "dynamic", "yarn", "longrope", "llama3", "proportional", NULL};
const char *const pe_rope_compats[] = {"exact", "hf", "ggml", NULL};

static const struct pe_param_spec rope_params[] = {
	{"len", PE_PT_INT, NULL, 1, PE_MAX_LEN, NULL, "number of positions (rows)"},
	{"offset", PE_PT_INT, "0", 0, PE_MAX_POSITION, NULL, "position of the first row"},
	PE_ROPE_LAYOUT_PARAM,
	PE_ROPE_PARAMS_COMMON(NULL),
};

static const struct pe_param_spec inv_freq_params[] = {PE_ROPE_PARAMS_COMMON(NULL)};

/* ---- validation ---------------------------------------------------------------------------- */

#define S(x) (1u << PE_ROPE_##x)
/* Which scalings a parameter applies to, and which of those require it. */
static const struct {
	const char *name;
	unsigned applies, required;
} applicability[] = {
	{"factor", S(LINEAR) | S(NTK) | S(DYNAMIC) | S(YARN) | S(LONGROPE) | S(LLAMA3) | S(PROPORTIONAL),
	 S(LINEAR) | S(NTK) | S(DYNAMIC) | S(YARN) | S(LLAMA3)},
	{"original_max_position_embeddings", S(DYNAMIC) | S(YARN) | S(LONGROPE) | S(LLAMA3),
	 S(DYNAMIC) | S(YARN) | S(LONGROPE) | S(LLAMA3)},
	{"seq_len", S(DYNAMIC) | S(LONGROPE), 0},
	{"beta_fast", S(YARN), 0},
	{"beta_slow", S(YARN), 0},
	{"mscale", S(YARN), 0},
	{"mscale_all_dim", S(YARN), 0},
	{"attention_factor", S(YARN) | S(LONGROPE), 0},
	{"truncate", S(YARN), 0},
	{"low_freq_factor", S(LLAMA3), 0},
	{"high_freq_factor", S(LLAMA3), 0},
	{"partial_rotary_factor", S(PROPORTIONAL), 0},
	{"short_factor", S(LONGROPE), S(LONGROPE)},
	{"long_factor", S(LONGROPE), S(LONGROPE)},
};
#undef S

static struct pe_param_val *val(struct pe_params *p, const char *name)
{
	return &p->v[pe_param_index(p->def, name)];
}

static int given(struct pe_params *p, const char *name) { return val(p, name)->given; }

static int has_param(const struct pe_params *p, const char *name) { return pe_param_index(p->def, name) >= 0; }

/* Unknown-to-this-scaling parameters are errors when given and dropped (with their defaults) when
 * not; required ones must be there. */
static int check_applicability(struct pe_params *p, int scaling, struct pe_err *err)
{
	for (size_t k = 0; k < sizeof applicability / sizeof applicability[0]; k++) {
		const char *name = applicability[k].name;
		unsigned bit = 1u << scaling;
		if (!(applicability[k].applies & bit)) {
			if (given(p, name))
				return pe_err_set(err, PE_EINVAL, name, "%s does not apply to scaling=%s", name,
						  pe_rope_scalings[scaling]);
			val(p, name)->set = 0;
		} else if ((applicability[k].required & bit) && !val(p, name)->set) {
			return pe_err_set(err, PE_EINVAL, name, "%s is required for scaling=%s", name, pe_rope_scalings[scaling]);
		}
	}
	return 0;
}

static int check_list(struct pe_params *p, const char *name, size_t h, struct pe_err *err)
{
	size_t n;
	pe_param_list(p, name, &n);
	if (n != h)
		return pe_err_set(err, PE_EINVAL, name, "%s has %zu values; dim=%zu needs dim/2 = %zu", name, n,
				  2 * h, h);
	return 0;
}

static int check_yarn(struct pe_params *p, const struct pe_rope_cfg *c, struct pe_err *err)
{
	if (c->base == 1.0)
		return pe_err_set(err, PE_EINVAL, "base", "scaling=yarn needs base != 1 (its correction range divides by ln base)");
	if (c->beta_fast <= c->beta_slow)
		return pe_err_set(err, PE_EINVAL, "beta_fast", "beta_fast (%g) must be greater than beta_slow (%g)",
				  c->beta_fast, c->beta_slow);
	int m = given(p, "mscale"), mad = given(p, "mscale_all_dim");
	if (m != mad)
		return pe_err_set(err, PE_EINVAL, m ? "mscale_all_dim" : "mscale",
				  "mscale and mscale_all_dim go together (transformers ignores one alone)");
	if (m && c->has_attention_factor)
		return pe_err_set(err, PE_EINVAL, "mscale", "mscale does not apply when attention_factor is given");
	return 0;
}

static int check_longrope(struct pe_params *p, const struct pe_rope_cfg *c, struct pe_err *err)
{
	int rc;
	if ((rc = check_list(p, "short_factor", c->h, err)) || (rc = check_list(p, "long_factor", c->h, err)))
		return rc;
	if (!c->has_factor && !c->has_attention_factor)
		return pe_err_set(err, PE_EINVAL, "factor",
				  "scaling=longrope needs factor (max_position_embeddings / original_max_position_embeddings) "
				  "or attention_factor");
	if (c->has_factor && c->has_attention_factor)
		return pe_err_set(err, PE_EINVAL, "factor",
				  "factor only sets longrope's attention factor; it does not apply when attention_factor is given");
	if (c->has_factor && c->factor > 1 && c->orig < 2)
		return pe_err_set(err, PE_EINVAL, "original_max_position_embeddings",
				  "original_max_position_embeddings must be at least 2 (the attention factor divides by its log)");
	return 0;
}

static int check_factor(const struct pe_rope_cfg *c, struct pe_err *err)
{
	if (!c->has_factor)
		return 0;
	if (c->factor <= 0)
		return pe_err_set(err, PE_EINVAL, "factor", "factor must be > 0");
	if (c->factor < 1 && c->scaling != PE_ROPE_LINEAR && c->scaling != PE_ROPE_LONGROPE &&
	    c->scaling != PE_ROPE_PROPORTIONAL)
		return pe_err_set(err, PE_EINVAL, "factor", "factor must be >= 1 for scaling=%s", pe_rope_scalings[c->scaling]);
	return 0;
}

static int check_scaling(struct pe_params *p, const struct pe_rope_cfg *c, struct pe_err *err)
{
	if ((c->scaling == PE_ROPE_NTK || c->scaling == PE_ROPE_DYNAMIC) && c->dim == 2)
		return pe_err_set(err, PE_EINVAL, "dim", "scaling=%s needs dim > 2 (its exponent is dim/(dim-2))",
				  pe_rope_scalings[c->scaling]);
	if (c->scaling == PE_ROPE_YARN)
		return check_yarn(p, c, err);
	if (c->scaling == PE_ROPE_LONGROPE)
		return check_longrope(p, c, err);
	if (c->scaling == PE_ROPE_PROPORTIONAL && c->rot == 0)
		return pe_err_set(err, PE_EINVAL, "partial_rotary_factor",
				  "partial_rotary_factor * dim / 2 must be at least 1 (no frequency would turn)");
	if (c->scaling == PE_ROPE_LLAMA3 && c->low_freq_factor > c->high_freq_factor)
		return pe_err_set(err, PE_EINVAL, "high_freq_factor", "high_freq_factor must be at least low_freq_factor (equal: Llama 4's step)");
	return 0;
}

/* What llama.cpp's rope cannot express. */
static int check_ggml(struct pe_params *p, const struct pe_rope_cfg *c, struct pe_err *err)
{
	static const char *const not_ggml[] = {"mscale", "mscale_all_dim", NULL};
	if (c->scaling == PE_ROPE_PROPORTIONAL)
		return pe_err_set(err, PE_EINVAL, "compat", "compat=ggml cannot express scaling=proportional (use exact or hf)");
	if (c->scaling == PE_ROPE_NTK || c->scaling == PE_ROPE_DYNAMIC)
		return pe_err_set(err, PE_EINVAL, "compat",
				  "compat=ggml cannot express scaling=%s (llama.cpp has no such rope type; give the scaled base)",
				  pe_rope_scalings[c->scaling]);
	for (int k = 0; not_ggml[k]; k++)
		if (given(p, not_ggml[k]))
			return pe_err_set(err, PE_EINVAL, not_ggml[k], "%s does not apply to compat=ggml", not_ggml[k]);
	if (c->scaling == PE_ROPE_YARN && c->has_attention_factor)
		return pe_err_set(err, PE_EINVAL, "attention_factor",
				  "attention_factor does not apply to compat=ggml: llama.cpp computes YaRN's as 1 + 0.1 ln factor");
	if (c->scaling == PE_ROPE_YARN && !c->truncate)
		return pe_err_set(err, PE_EINVAL, "truncate", "compat=ggml always truncates YaRN's correction range");
	if (c->orig > (int64_t)GGML_MAX_POS)
		return pe_err_set(err, PE_EINVAL, "original_max_position_embeddings",
				  "original_max_position_embeddings must fit in int32 for compat=ggml");
	if (has_param(p, "len") && pe_param_int(p, "offset") + pe_param_int(p, "len") - 1 > (int64_t)GGML_MAX_POS)
		return pe_err_set(err, PE_EINVAL, "offset", "offset + len - 1 exceeds %.0f: llama.cpp positions (compat=ggml) are int32",
				  GGML_MAX_POS);
	return 0;
}

/* The parameter to blame when the numbers leave the representable range: a base below 1 makes
 * frequencies grow, a small factor divides by it, a large attention factor scales everything. */
static const char *culprit(const struct pe_rope_cfg *c)
{
	if (c->has_attention_factor)
		return "attention_factor";
	if (c->has_mscale)
		return "mscale";
	return c->base < 1 ? "base" : "factor";
}

/* Every frequency of the plan scanned: the largest |w_i| (NaNs passed over) and whether one is NaN.
 * PE_ENOMEM when the plan cannot be made. */
static int scan_freqs(const struct pe_params *p, double *amax, int *nan)
{
	struct pe_rope_plan pl;
	if (pe_rope_plan_init(&pl, p) != 0)
		return PE_ENOMEM;
	*amax = 0;
	*nan = 0;
	for (size_t i = 0; i < pl.cfg.h; i++) {
		*amax = fmax(*amax, fabs(pl.w[i]));
		*nan |= isnan(pl.w[i]);
	}
	pe_rope_plan_destroy(&pl);
	return 0;
}

static int force_scan; /* tests: always scan (the reference for the cheap bound) */

void pe_rope_freq_force_scan(int on) { force_scan = on; }

int pe_rope_freq_force_scanning(void) { return force_scan; }

int pe_rope_freq_verdict(const struct pe_params *p, double last, double lim, int nan_first)
{
	struct pe_rope_cfg c;
	double m, u;
	pe_rope_cfg_get(p, &c);
	if (!force_scan && pe_rope_freq_bound(&c, &m, &u) == 0) {
		if (isnan(m) && nan_first)
			return PE_FREQ_NAN;
		if (!isnan(m) && !(m * last < lim)) /* a frequency of the plan itself */
			return PE_FREQ_BIG;
		if (!isnan(m) && u * last < lim) /* every frequency a number, none above u */
			return PE_FREQ_OK;
	}
	int nan;
	if (scan_freqs(p, &m, &nan) != 0)
		return PE_ENOMEM;
	if (nan && nan_first)
		return PE_FREQ_NAN;
	/* the largest product is the product of the largest: rounding is monotone */
	return m * last < lim ? PE_FREQ_OK : PE_FREQ_BIG;
}

/* Every frequency, angle and value finite in the mode's arithmetic (float for hf and ggml), and
 * every value within f16's range: no NaN or infinity can reach a table or its JSON. Cheap
 * (pe_rope_freq_bound) where it can be; this runs on the HTTP thread for every request. */
static int check_finite(struct pe_params *p, const struct pe_rope_cfg *c, struct pe_err *err)
{
	double last = has_param(p, "len") ? (double)pe_param_int(p, "offset") + (double)pe_param_int(p, "len") : 1;
	double limit = c->compat == PE_COMPAT_EXACT ? DBL_MAX : FLT_MAX;
	int v = pe_rope_freq_verdict(p, last, limit / 4, 1);
	if (v == PE_ENOMEM)
		return pe_err_set(err, PE_ENOMEM, "", "out of memory");
	/* llama3's step (low == high) has NaN exactly on its edge, as transformers has */
	if (v == PE_FREQ_NAN && c->scaling == PE_ROPE_LLAMA3 && c->low_freq_factor == c->high_freq_factor)
		return pe_err_set(err, PE_EINVAL, "low_freq_factor",
				  "a wavelength equals original_max_position_embeddings / low_freq_factor exactly: with "
				  "low_freq_factor == high_freq_factor transformers' smoothing there is 0/0 (NaN)");
	/* Any other NaN: llama3's factors so close that their difference is 0 in float32, so that the
	 * smoothing divides by 0 as transformers' does. */
	if (v == PE_FREQ_NAN)
		return c->scaling == PE_ROPE_LLAMA3
			? pe_err_set(err, PE_EINVAL, "high_freq_factor",
				     "high_freq_factor - low_freq_factor is 0 in the mode's arithmetic: the smoothing is x/0 (NaN)")
			: pe_err_set(err, PE_EINVAL, culprit(c), "%s makes a frequency NaN", culprit(c));
	if (v == PE_FREQ_BIG)
		return pe_err_set(err, PE_EINVAL, culprit(c), "%s makes the rotation angles overflow", culprit(c));
	double att = pe_rope_attention_scaling(c);
	if (!(att > 0 && att <= F16_MAX))
		return pe_err_set(err, PE_EINVAL, culprit(c), "%s makes attention_scaling %g, beyond f16's range",
				  culprit(c), att);
	return 0;
}

/* seq_len defaults to offset+len (the positions of the table); rope/inv_freq, which has no
 * positions, to original_max_position_embeddings (what the model builds at load time). */
static void default_seq_len(struct pe_params *p)
{
	struct pe_param_val *v = val(p, "seq_len");
	if (v->set)
		return;
	v->set = 1;
	v->i = has_param(p, "len") ? pe_param_int(p, "offset") + pe_param_int(p, "len") :
		pe_param_int(p, "original_max_position_embeddings");
	v->r = (double)v->i;
}

static int check(struct pe_params *p, struct pe_err *err)
{
	int scaling = pe_param_enum(p, "scaling"), rc;
	if (pe_param_int(p, "dim") % 2)
		return pe_err_set(err, PE_EINVAL, "dim", "dim must be even (rotary dimensions come in pairs)");
	if (pe_param_real(p, "base") <= 0)
		return pe_err_set(err, PE_EINVAL, "base", "base must be > 0");
	if ((rc = check_applicability(p, scaling, err)))
		return rc;
	if (scaling == PE_ROPE_DYNAMIC || scaling == PE_ROPE_LONGROPE)
		default_seq_len(p);
	struct pe_rope_cfg c;
	pe_rope_cfg_get(p, &c);
	if ((rc = check_factor(&c, err)) || (rc = check_scaling(p, &c, err)))
		return rc;
	if (c.compat == PE_COMPAT_GGML && (rc = check_ggml(p, &c, err)))
		return rc;
	return check_finite(p, &c, err);
}

/* ---- tables -------------------------------------------------------------------------------- */

static int rope_shape(const struct pe_params *p, struct pe_shape *s)
{
	s->rank = 3;
	s->dim[0] = 2;
	s->dim[1] = (size_t)pe_param_int(p, "len");
	s->dim[2] = (size_t)pe_param_int(p, "dim");
	return 0;
}

static int inv_freq_shape(const struct pe_params *p, struct pe_shape *s)
{
	s->rank = 1;
	s->dim[0] = (size_t)pe_param_int(p, "dim") / 2;
	return 0;
}

static double attention_scaling(const struct pe_params *p)
{
	struct pe_rope_cfg c;
	pe_rope_cfg_get(p, &c);
	return pe_rope_attention_scaling(&c);
}

/* Everything one table computation needs; rows are produced in order. */
struct job {
	struct pe_rope_plan pl;
	const struct pe_kernel_table *k;
	struct pe_rope_rec rec;
	size_t len, h, dim, block;
	int64_t offset;
	int fmode, interleaved, use_rec, stream;
	int torch_trig; /* cos/sin by pe_torch_sincosf (compat=hf with attention_scaling) */
	int libm_trig;  /* cos/sin by libm's cosf/sinf of the float angle (compat=ggml, as llama.cpp) */
	enum pe_dtype dt;
	double *buf; /* one allocation: t, c, s, recurrence state, a double row pair, a scratch row */
	double *t, *c, *s, *row;
};

/* Which recurrence this table may use (pe_rope_rec_order, shared with sinusoidal.c): f64 output
 * and single rows are computed directly. */
static int recurrence_order(const struct job *j)
{
	if (j->dt == PE_F64 || j->len < 2)
		return PE_REC_DIRECT;
	double wmax = 0, last = (double)j->offset + (double)j->len;
	for (size_t i = 0; i < j->h; i++)
		wmax = fmax(wmax, fabs(j->pl.w[i]));
	return pe_rope_rec_order(last, wmax, j->pl.cfg.compat != PE_COMPAT_EXACT);
}

/* nrows: the rows this call writes (large f32 blocks bypass the cache). */
static int job_init(struct job *j, const struct pe_params *p, enum pe_dtype dt, size_t nrows)
{
	memset(j, 0, sizeof *j);
	int rc = pe_rope_plan_init(&j->pl, p);
	if (rc)
		return rc;
	j->k = pe_kernels();
	j->dt = dt;
	j->h = j->pl.cfg.h;
	j->dim = j->pl.cfg.dim;
	j->len = (size_t)pe_param_int(p, "len");
	j->offset = pe_param_int(p, "offset");
	j->fmode = j->pl.cfg.compat != PE_COMPAT_EXACT;
	j->interleaved = pe_param_enum(p, "layout") == L_INTERLEAVED;
	int order = recurrence_order(j);
	/* PyTorch's lanes are 8 consecutive pairs of a row: whole groups only */
	j->torch_trig = j->pl.cfg.compat == PE_COMPAT_HF && (float)j->pl.att != 1.0f && j->h % 8 == 0;
	j->libm_trig = j->pl.cfg.compat == PE_COMPAT_GGML;
	j->use_rec = order != PE_REC_DIRECT && !j->torch_trig && !j->libm_trig;
	j->stream = dt == PE_F32 && 2 * nrows * j->dim * 4 >= STREAM_BYTES;
	size_t h = j->h;
	j->block = BLOCK_ELEMS / h < 1 ? 1 : BLOCK_ELEMS / h > 64 ? 64 : BLOCK_ELEMS / h;
	j->buf = malloc(sizeof(double) * (j->block * h + 2 * h + 5 * h + 4 * j->dim) + sizeof(float) * h);
	if (!j->buf) {
		pe_rope_plan_destroy(&j->pl);
		return PE_ENOMEM;
	}
	j->t = j->buf;
	j->c = j->t + j->block * h;
	j->s = j->c + h;
	double *cw = j->s + h, *sw = cw + h;
	j->rec = (struct pe_rope_rec){h, j->pl.w, cw, sw, sw + h, sw + 2 * h, sw + 3 * h, order == PE_REC_FIRST_ORDER, NULL, NULL};
	j->row = sw + 4 * h;
	if (j->pl.cfg.compat == PE_COMPAT_HF) { /* the float frequencies, for the kernel's hf angles */
		float *wf = (float *)(j->row + 3 * j->dim);
		for (size_t i = 0; i < h; i++)
			wf[i] = (float)j->pl.w[i];
		j->rec.wf = wf;
	}
	j->k->sincos_f64(j->pl.w, sw, cw, h);
	return 0;
}

static void job_destroy(struct job *j)
{
	free(j->buf);
	pe_rope_plan_destroy(&j->pl);
}

/* A value as the table holds it before the dtype rounding (double; hf/ggml values are floats). */
static double scaled(const struct job *j, double v)
{
	return j->fmode ? (double)pe_rope_f32_value(v, j->pl.att, 1) : v * j->pl.att;
}

/* One plane's row in the layout, as doubles, then rounded once into the dtype. */
static void store_generic(const struct job *j, const double *v, char *o)
{
	for (size_t i = 0; i < j->h; i++) {
		double x = scaled(j, v[i]);
		if (j->interleaved)
			j->row[2 * i] = j->row[2 * i + 1] = x;
		else
			j->row[i] = j->row[j->h + i] = x;
	}
	pe_store_f64(j->dt, o, j->row, j->dim);
}

/* Row r's cos and sin into oc and os (either may be the scratch row pair when a block wants one
 * plane only). */
static void store_row(const struct job *j, char *oc, char *os)
{
	if (j->dt == PE_F32) {
		j->k->rope_store_f32(j->c, j->s, j->h, j->pl.att, j->fmode, j->interleaved, j->stream, (float *)oc,
				     (float *)os);
		return;
	}
	store_generic(j, j->c, oc);
	store_generic(j, j->s, os);
}

/* Rows [r0, r0 + n) of the cos plane into oc and of the sin plane into os (NULL: not wanted, the
 * row goes to a scratch row). The recurrence starts at the anchor at or before r0; rows before r0
 * are computed and dropped, so every block is byte for byte the whole table's rows. 0, or the
 * pe_cancelled() code that stopped it between blocks of rows. */
static int rows(struct job *j, size_t r0, size_t n, char *oc, char *os)
{
	size_t row_bytes = j->dim * pe_dtype_size(j->dt);
	size_t first = j->use_rec ? r0 - r0 % PE_ROPE_ANCHOR_ROWS : r0, end = r0 + n;
	char *scratch = (char *)(j->row + 2 * j->dim); /* a row of a plane not asked for */
	size_t every = pe_cancel_rows(2 * j->h), since = every;
	int rc = 0;
	for (size_t b0 = first; b0 < end; b0 += j->block) {
		size_t nb = end - b0 < j->block ? end - b0 : j->block;
		if ((since += nb) >= every) {
			since = 0;
			if ((rc = pe_cancelled()) != 0)
				break;
		}
		int formed_in_kernel = j->use_rec; /* exact and hf angles: ggml's take libm's trig */
		if (!formed_in_kernel)
			pe_rope_angles(&j->pl, j->offset + (int64_t)b0, nb, j->t);
		for (size_t b = 0; b < nb; b++) {
			size_t r = b0 + b;
			const double *t = formed_in_kernel ? NULL : j->t + b * j->h;
			if (j->use_rec)
				j->k->rope_row(&j->rec, (double)(j->offset + (int64_t)r), t, r % PE_ROPE_ANCHOR_ROWS == 0,
					       j->c, j->s);
			else if (j->torch_trig)
				pe_torch_sincosf(t, j->s, j->c, j->h);
			else if (j->libm_trig)
				pe_libm_sincosf(t, j->s, j->c, j->h);
			else
				j->k->sincos_f64(t, j->s, j->c, j->h);
			if (r < r0)
				continue;
			size_t at = (r - r0) * row_bytes;
			store_row(j, oc ? oc + at : scratch, os ? os + at : scratch);
		}
	}
	if (j->stream)
		j->k->rope_fence();
	return rc;
}

static int rope_compute_rows(const struct pe_params *p, enum pe_dtype dt, size_t r0, size_t n, void *const *out,
			     struct pe_err *err)
{
	struct job j;
	if (job_init(&j, p, dt, n) != 0)
		return pe_err_set(err, PE_ENOMEM, "", "out of memory");
	int rc = rows(&j, r0, n, out[0], out[1]);
	job_destroy(&j);
	return rc ? pe_cancel_err(rc, err) : 0;
}

static int rope_compute(const struct pe_params *p, enum pe_dtype dt, void *out, struct pe_err *err)
{
	struct job j;
	size_t len = (size_t)pe_param_int(p, "len");
	if (job_init(&j, p, dt, len) != 0)
		return pe_err_set(err, PE_ENOMEM, "", "out of memory");
	int rc = rows(&j, 0, len, out, (char *)out + len * j.dim * pe_dtype_size(dt));
	job_destroy(&j);
	return rc ? pe_cancel_err(rc, err) : 0;
}

/* The rows of one rope table's parameters at many offsets (per-token positions): one plan for all
 * of them, each span computed as rows() computes a table of that offset and length, so byte for
 * byte the table /v1/rope?offset=..&len=.. gives. p's own offset and len are not used. */
struct pe_rope_spans {
	struct job j;
};

struct pe_rope_spans *pe_rope_spans_new(const struct pe_params *p, enum pe_dtype dt)
{
	struct pe_rope_spans *s = malloc(sizeof *s);
	if (s && job_init(&s->j, p, dt, 1) != 0) {
		free(s);
		s = NULL;
	}
	return s;
}

int pe_rope_spans_rows(struct pe_rope_spans *s, int64_t offset, size_t len, void *oc, void *os, struct pe_err *err)
{
	struct job *j = &s->j;
	j->offset = offset;
	j->len = len;
	int order = recurrence_order(j);
	j->use_rec = order != PE_REC_DIRECT && !j->torch_trig && !j->libm_trig;
	j->rec.first_order = order == PE_REC_FIRST_ORDER;
	int rc = rows(j, 0, len, oc, os);
	return rc ? pe_cancel_err(rc, err) : 0;
}

void pe_rope_spans_free(struct pe_rope_spans *s)
{
	if (s)
		job_destroy(&s->j);
	free(s);
}

/* rope/inv_freq: exact and hf give the inverse frequencies; ggml, whose angles come from a float
 * chain rather than from a frequency, gives its angles at position 1. */
static int inv_freq_compute(const struct pe_params *p, enum pe_dtype dt, void *out, struct pe_err *err)
{
	struct pe_rope_plan pl;
	if (pe_rope_plan_init(&pl, p) != 0)
		return pe_err_set(err, PE_ENOMEM, "", "out of memory");
	if (pl.cfg.compat == PE_COMPAT_GGML)
		pe_rope_angles(&pl, 1, 1, pl.w);
	pe_store_f64(dt, out, pl.w, pl.cfg.h);
	pe_rope_plan_destroy(&pl);
	return 0;
}

/* How many of f16, bf16, f32 round v to infinity (more the larger v is). */
static int overflow_class(double v)
{
	return isinf(pe_f16_to_f32(pe_f64_to_f16(v))) + isinf(pe_bf16_to_f32(pe_f64_to_bf16(v))) + isinf((float)v);
}

/* The largest inverse frequency (a factor far below 1 makes them huge), for the dtype check. The
 * cheap bound's witness when every dtype's verdict is the same for it and for the bound (the true
 * maximum lies between them); else the plan scanned. 0 when it cannot be made (the computation then
 * fails). */
static double inv_freq_max_abs(const struct pe_params *p)
{
	struct pe_rope_cfg c;
	double m, u;
	pe_rope_cfg_get(p, &c);
	int r = force_scan ? -1 : c.compat == PE_COMPAT_GGML ? pe_rope_ggml_angle_bound(&c, &m, &u) : pe_rope_freq_bound(&c, &m, &u);
	if (r == 0 && !isnan(m) && isfinite(u) && overflow_class(m) == overflow_class(u))
		return m;
	struct pe_rope_plan pl;
	if (pe_rope_plan_init(&pl, p) != 0)
		return 0;
	if (pl.cfg.compat == PE_COMPAT_GGML)
		pe_rope_angles(&pl, 1, 1, pl.w);
	m = 0;
	for (size_t k = 0; k < pl.cfg.h; k++)
		m = fabs(pl.w[k]) > m ? fabs(pl.w[k]) : m;
	pe_rope_plan_destroy(&pl);
	return m;
}

/* cos and sin times attention_scaling: at most |attention_scaling| (reached at angle 0). */
static double rope_max_abs(const struct pe_params *p) { return fabs(attention_scaling(p)); }

const struct pe_table_def pe_table_rope = {
	.name = "rope",
	.summary = "Rotary position embedding cos/sin tables (RoPE) with every transformers scaling",
	.params = rope_params,
	.nparams = sizeof rope_params / sizeof rope_params[0],
	.fixed_dtype = PE_DTYPE_COUNT_,
	.check = check,
	.shape = rope_shape,
	.compute = rope_compute,
	.max_abs = rope_max_abs,
	.compute_rows = rope_compute_rows,
	.extra_name = "attention_scaling",
	.extra = attention_scaling,
	.panel_labels = pe_cos_sin_labels,
};

const struct pe_table_def pe_table_rope_inv_freq = {
	.name = "rope/inv_freq",
	.summary = "RoPE inverse frequencies (transformers' inv_freq) for every scaling",
	.params = inv_freq_params,
	.nparams = sizeof inv_freq_params / sizeof inv_freq_params[0],
	.fixed_dtype = PE_DTYPE_COUNT_,
	.check = check,
	.shape = inv_freq_shape,
	.compute = inv_freq_compute,
	.max_abs = inv_freq_max_abs,
	.extra_name = "attention_scaling",
	.extra = attention_scaling,
};
