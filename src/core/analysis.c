/* /v1/analysis/similarity and /v1/analysis/rope-decay: the figures the study notes draw, as tables.
 *
 * similarity: [len, len] dot products between the encodings of every pair of positions. For
 * sinusoidal tables the rows themselves; for RoPE the rotated all-ones vectors q_i = R(i)·1, whose
 * products q_i·k_j depend only on i − j (RoPE's relative property; attention_scaling² included).
 * The encoding's own table is computed through its row computation with the parameters the client
 * gave (the main ones of each encoding are accepted here; one that does not apply to the chosen
 * encoding is a 400 naming it), in double, and the products are summed in double (gram.c). Both
 * tables also compute any block of their rows (compute_rows, what the CLI streams), with the
 * whole table's bytes: the whole similarity makes its encoding rows X once and takes each pair
 * once; a block of rows makes X a block at a time, so its memory does not grow with len or dim.
 *
 * rope-decay: RoFormer §3.4.3's long-term decay, the mean over j = 1..d/2 of |Σ_{k<j} e^{i·r·θ_k}|
 * with θ_k = base^(−2k/d), for relative distances r = 0 .. max_distance−1.
 *
 * Both are bounded before they start (pe_table_cost): similarity's encoding table (len·dim, twice
 * that for rope's two planes) is an intermediate table, and its work is len·(len+1)/2·dim
 * multiply-adds (a block of rows costs at most twice its share: pairs with rows outside it);
 * rope-decay's is max_distance·dim/2 terms, each counted as PE_DECAY_TERM_COST multiply-adds (a
 * term is a complex rotation, an addition and a square root: about that many multiply-adds' time).
 * The kernels check pe_cancelled() between blocks: a Gram block of 32×32 pairs, 64 distances.
 * Their allocations are counted in scratch_bytes (the float64 rows X, rope's sin rows; rope-decay's
 * 2·dim doubles), which a server reserves on its memory budget before the job computes. */
#include "core/gram.h"
#include "core/kernels.h"
#include "core/tables.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ENC_SINUSOIDAL, ENC_ROPE };
static const char *const encodings[] = {"sinusoidal", "rope", NULL};
static const char *const compats[] = {"exact", "hf", "ggml", NULL};
static const char *const variants[] = {"vaswani", "concat", "t2t", NULL};
static const char *const scalings[] = {"none", "linear", "ntk", "dynamic", "yarn", "longrope", "llama3", NULL};

#define MAX_SIM_LEN 8192.0
#define DECAY_BLOCK 64 /* distances between cancellation checks */

static const struct pe_param_spec sim_params[] = {
	{"encoding", PE_PT_ENUM, "sinusoidal", 0, 0, encodings, "which encoding's positions to compare"},
	{"len", PE_PT_INT, NULL, 1, MAX_SIM_LEN, NULL, "number of positions"},
	{"dim", PE_PT_INT, NULL, 1, PE_MAX_DIM, NULL, "embedding (or rotary) width"},
	{"base", PE_PT_REAL, "", 1e-300, 1e300, NULL, "wavelength base (default the encoding's)"},
	{"offset", PE_PT_INT, "", 0, PE_MAX_POSITION, NULL, "position of the first row"},
	{"compat", PE_PT_ENUM, "", 0, 0, compats, "arithmetic of the encoding's table"},
	{"variant", PE_PT_ENUM, "", 0, 0, variants, "sinusoidal: column layout"},
	{"scaling", PE_PT_ENUM, "", 0, 0, scalings, "rope: frequency scaling"},
	{"factor", PE_PT_REAL, "", 1e-300, 1e300, NULL, "rope: scaling factor"},
	{"original_max_position_embeddings", PE_PT_INT, "", 1, PE_MAX_LEN, NULL, "rope: pre-scaling context length"},
};

/* The definition of an encoding analysed here, named as in encodings[]; NULL for another name.
 * By reference, not through the registry (which lists these analyses: no cycle between files). */
static const struct pe_table_def *encoding_def(const char *name)
{
	return !strcmp(name, "sinusoidal") ? &pe_table_sinusoidal : !strcmp(name, "rope") ? &pe_table_rope : NULL;
}

/* A refused choice of the encoding's own parameters says whose list it is: similarity lists every
 * encoding's values (compat ggml is rope's only). */
static int name_encoding(struct pe_err *err, const char *encoding)
{
	char param[PE_ERR_PARAM_MAX], detail[PE_ERR_DETAIL_MAX];
	memcpy(param, err->param, sizeof param);
	memcpy(detail, err->detail, sizeof detail);
	return pe_err_set(err, err->code, param, "%.200s when encoding=%s", detail, encoding);
}

static int sim_check(struct pe_params *p, struct pe_err *err)
{
	static const char *const rope_only[] = {"scaling", "factor", "original_max_position_embeddings"};
	if (pe_param_enum(p, "encoding") == ENC_SINUSOIDAL) {
		for (size_t i = 0; i < sizeof rope_only / sizeof rope_only[0]; i++)
			if (pe_param_isset(p, rope_only[i]))
				return pe_err_set(err, PE_EINVAL, rope_only[i], "%s applies to encoding=rope only",
						  rope_only[i]);
	} else if (pe_param_isset(p, "variant"))
		return pe_err_set(err, PE_EINVAL, "variant", "variant applies to encoding=sinusoidal only");
	/* the encoding's own checks, now, so an error names its parameter instead of failing later */
	const struct pe_table_def *def = encoding_def(encodings[pe_param_enum(p, "encoding")]);
	if (!def)
		return pe_err_set(err, PE_EINVAL, "encoding", "this encoding is not available");
	struct pe_params t;
	pe_params_init(&t, def);
	int rc = pe_params_derive(p, &t, err);
	if (rc == 0)
		rc = pe_params_finish(&t, err);
	pe_params_destroy(&t);
	if (rc != 0 && err && err->choices) /* the encoding's own list, narrower than similarity's */
		rc = name_encoding(err, encodings[pe_param_enum(p, "encoding")]);
	return rc;
}

static int sim_shape(const struct pe_params *p, struct pe_shape *s)
{
	s->rank = 2;
	s->dim[0] = s->dim[1] = (size_t)pe_param_int(p, "len");
	return 0;
}

/* The rows X the similarity compares, made a block at a time: the encoding's table through its
 * own row computation, in double (so any block has the bytes of the whole table); for RoPE the
 * cos and sin planes of ENC_SCRATCH_BYTES of rows at a time (half layout, the default:
 * rotate_half(1) is [-1 | +1]) made into the rotated all-ones vectors x·cos + rotate_half(x)·sin. */
#define ENC_SCRATCH_BYTES ((size_t)1 << 20)

struct enc {
	struct pe_params t; /* the encoding's parameters, finished */
	int rope;
	size_t d;
	double *sn;    /* rope: the sin plane of sn_rows rows */
	size_t sn_rows;
};

/* Rows of RoPE's sin plane made at once: ENC_SCRATCH_BYTES of them (whole blocks of
 * PE_TABLE_ROW_ALIGN when that many fit), at least one, at most len. */
static size_t sin_rows(size_t len, size_t d)
{
	size_t n = ENC_SCRATCH_BYTES / (d * sizeof(double));
	n = n >= PE_TABLE_ROW_ALIGN ? n - n % PE_TABLE_ROW_ALIGN : n ? n : 1;
	return n < len ? n : len;
}

static int enc_init(struct enc *e, const struct pe_params *p, struct pe_err *err)
{
	memset(e, 0, sizeof *e);
	e->rope = pe_param_enum(p, "encoding") == ENC_ROPE;
	e->d = (size_t)pe_param_int(p, "dim");
	const struct pe_table_def *def = encoding_def(encodings[pe_param_enum(p, "encoding")]);
	if (!def)
		return pe_err_set(err, PE_EINVAL, "encoding", "this encoding is not available");
	pe_params_init(&e->t, def);
	int rc = pe_params_derive(p, &e->t, err);
	if (rc == 0)
		rc = pe_params_finish(&e->t, err);
	if (rc == 0 && e->rope) {
		e->sn_rows = sin_rows((size_t)pe_param_int(p, "len"), e->d);
		if (!(e->sn = malloc(e->sn_rows * e->d * sizeof(double))))
			rc = pe_err_set(err, PE_ENOMEM, "", "out of memory");
	}
	return rc;
}

static void enc_destroy(struct enc *e)
{
	if (e->t.def)
		pe_params_destroy(&e->t);
	free(e->sn);
}

/* x·cos + rotate_half(x)·sin for x = 1, over the cos rows. */
static void rotate_ones(double *cs, const double *sn, size_t nrows, size_t dim)
{
	for (size_t i = 0; i < nrows * dim; i++)
		cs[i] = i % dim < dim / 2 ? cs[i] - sn[i] : cs[i] + sn[i];
}

/* struct pe_gram_src's make: rows [r0, r0 + m) of X into out. */
static int enc_rows_cb(void *ctx, size_t r0, size_t m, double *out, struct pe_err *err)
{
	struct enc *e = ctx;
	if (!e->rope)
		return pe_table_compute_rows(&e->t, PE_F64, 0, r0, m, out, err);
	int rc = 0;
	for (size_t k = 0; k < m && rc == 0; k += e->sn_rows) {
		size_t c = m - k < e->sn_rows ? m - k : e->sn_rows;
		void *planes[2] = {out + k * e->d, e->sn};
		rc = pe_table_compute_planes(&e->t, PE_F64, r0 + k, c, planes, err);
		if (rc == 0)
			rotate_ones(out + k * e->d, e->sn, c, e->d);
	}
	return rc;
}

/* Rows [r0, r0 + n) of the similarity: X made a block at a time (memory bounded whatever len and
 * dim, see gram.c), or, for the whole table, X made whole first and each pair taken once. */
static int sim_rows(const struct pe_params *p, enum pe_dtype dt, size_t r0, size_t n, int whole, void *out,
		    struct pe_err *err)
{
	struct enc e;
	size_t len = (size_t)pe_param_int(p, "len");
	int rc = enc_init(&e, p, err);
	struct pe_gram_src s = {.make = enc_rows_cb, .ctx = &e, .n = len, .d = e.d};
	double *x = NULL;
	if (rc == 0 && whole) {
		if (!(x = malloc(len * e.d * sizeof *x)))
			rc = pe_err_set(err, PE_ENOMEM, "", "out of memory");
		else if ((rc = enc_rows_cb(&e, 0, len, x, err)) == 0)
			s.rows = x;
	}
	if (rc == 0)
		rc = pe_gram_rows(&s, r0, n, dt, out, 1, err);
	free(x);
	enc_destroy(&e);
	return rc;
}

static int sim_compute_rows(const struct pe_params *p, enum pe_dtype dt, size_t r0, size_t n, void *const *out,
			    struct pe_err *err)
{
	return sim_rows(p, dt, r0, n, 0, out[0], err);
}

static int sim_compute(const struct pe_params *p, enum pe_dtype dt, void *out, struct pe_err *err)
{
	return sim_rows(p, dt, 0, (size_t)pe_param_int(p, "len"), 1, out, err);
}

static int sim_cost(const struct pe_params *p, struct pe_cost *c)
{
	uint64_t len = (uint64_t)pe_param_int(p, "len"), dim = (uint64_t)pe_param_int(p, "dim");
	c->intermediate = (pe_param_enum(p, "encoding") == ENC_ROPE ? 2 : 1) * len * dim;
	c->intermediate_param = "dim";
	/* sim_compute's: X whole in double and RoPE's sin rows (at most as many again) */
	uint64_t sn = pe_param_enum(p, "encoding") == ENC_ROPE ? sin_rows((size_t)len, (size_t)dim) * dim : 0;
	c->scratch_bytes = (len * dim + sn) * sizeof(double);
	c->work = pe_gram_cost(len, dim);
	c->work_param = "len";
	return 0;
}

/* |G_ij| <= G_ii by Cauchy-Schwarz. Sinusoidal rows hold dim/2 sin/cos pairs: G_ii <= dim/2 + 1,
 * within f16 for every dim allowed (nothing to decide). RoPE's rotated all-ones vectors keep the
 * norm of the all-ones vector scaled by attention_scaling: G_ii = dim * att^2. */
static double sim_max_abs(const struct pe_params *p)
{
	if (pe_param_enum(p, "encoding") != ENC_ROPE)
		return 0;
	const struct pe_table_def *def = &pe_table_rope;
	struct pe_params t;
	double att = 1;
	pe_params_init(&t, def);
	if (def && def->extra && pe_params_derive(p, &t, NULL) == 0 && pe_params_finish(&t, NULL) == 0)
		att = def->extra(&t);
	pe_params_destroy(&t);
	return (double)pe_param_int(p, "dim") * att * att;
}

const struct pe_table_def pe_table_analysis_similarity = {
	.name = "analysis/similarity",
	.summary = "Dot products between the encodings of every pair of positions (sinusoidal, rope)",
	.params = sim_params,
	.nparams = sizeof sim_params / sizeof sim_params[0],
	.fixed_dtype = PE_DTYPE_COUNT_,
	.check = sim_check,
	.shape = sim_shape,
	.compute = sim_compute,
	.compute_rows = sim_compute_rows,
	.cost = sim_cost,
	.max_abs = sim_max_abs,
};

/* ---- rope-decay ---- */

static const struct pe_param_spec decay_params[] = {
	{"dim", PE_PT_INT, "128", 2, PE_MAX_DIM, NULL, "rotary dims (even)"},
	{"base", PE_PT_REAL, "10000", 1e-300, 1e300, NULL, "RoPE base"},
	{"max_distance", PE_PT_INT, "256", 1, 1u << 20, NULL, "relative distances 0 .. max_distance-1"},
};

static int decay_check(struct pe_params *p, struct pe_err *err)
{
	if (pe_param_int(p, "dim") & 1)
		return pe_err_set(err, PE_EINVAL, "dim", "dim must be even");
	return 0;
}

static int decay_shape(const struct pe_params *p, struct pe_shape *s)
{
	s->rank = 1;
	s->dim[0] = (size_t)pe_param_int(p, "max_distance");
	return 0;
}

static int decay_cost(const struct pe_params *p, struct pe_cost *c)
{
	c->work = (uint64_t)pe_param_int(p, "max_distance") * (uint64_t)(pe_param_int(p, "dim") / 2) *
		  PE_DECAY_TERM_COST;
	c->work_param = "max_distance";
	c->scratch_bytes = 4 * (uint64_t)(pe_param_int(p, "dim") / 2) * sizeof(double); /* decay_compute's */
	c->intermediate_param = "dim";
	return 0;
}

/* v[r] for r in [r0, r0 + n): the angles r·θ_k in one vectorised sin/cos (within 1 ulp each), then
 * the partial sums in order of k, |z| as sqrt(re² + im²) (|z| <= h: no overflow). */
static void decay_rows(const double *theta, size_t h, size_t r0, size_t n, double *scratch, double *v)
{
	const struct pe_kernel_table *k = pe_kernels();
	double *ang = scratch, *sn = scratch + h, *cs = scratch + 2 * h;
	for (size_t r = r0; r < r0 + n; r++) {
		for (size_t i = 0; i < h; i++)
			ang[i] = (double)r * theta[i];
		k->sincos_f64(ang, sn, cs, h);
		double re = 0, im = 0, acc = 0;
		for (size_t i = 0; i < h; i++) {
			re += cs[i];
			im += sn[i];
			acc += sqrt(re * re + im * im);
		}
		v[r - r0] = acc / (double)h;
	}
}

/* Distances [r0, r0 + n) (the whole table is its one block): each value depends on its distance
 * alone, so any block has the whole table's bytes. */
static int decay_compute_rows(const struct pe_params *p, enum pe_dtype dt, size_t r0, size_t n, void *const *out,
			      struct pe_err *err)
{
	size_t h = (size_t)pe_param_int(p, "dim") / 2;
	size_t esz = pe_dtype_size(dt);
	double base = pe_param_real(p, "base");
	double v[DECAY_BLOCK], *theta = malloc(4 * h * sizeof *theta);
	if (!theta)
		return pe_err_set(err, PE_ENOMEM, "", "out of memory");
	for (size_t k = 0; k < h; k++)
		theta[k] = pow(base, -(double)(2 * k) / (double)(2 * h));
	int rc = 0;
	for (size_t b = 0; b < n && rc == 0; b += DECAY_BLOCK) {
		size_t m = n - b < DECAY_BLOCK ? n - b : DECAY_BLOCK;
		if ((rc = pe_cancelled()) != 0)
			break;
		decay_rows(theta, h, r0 + b, m, theta + h, v);
		pe_store_f64(dt, (char *)out[0] + b * esz, v, m);
	}
	free(theta);
	return rc ? pe_cancel_err(rc, err) : 0;
}

static int decay_compute(const struct pe_params *p, enum pe_dtype dt, void *out, struct pe_err *err)
{
	return decay_compute_rows(p, dt, 0, (size_t)pe_param_int(p, "max_distance"), &out, err);
}

const struct pe_table_def pe_table_analysis_rope_decay = {
	.name = "analysis/rope-decay",
	.summary = "RoFormer's long-term decay of RoPE with relative distance (section 3.4.3)",
	.params = decay_params,
	.nparams = sizeof decay_params / sizeof decay_params[0],
	.fixed_dtype = PE_DTYPE_COUNT_,
	.check = decay_check,
	.shape = decay_shape,
	.compute = decay_compute,
	.compute_rows = decay_compute_rows,
	.cost = decay_cost,
};
