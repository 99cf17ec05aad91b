/* /v1/sinusoidal: the fixed sin/cos tables of "Attention Is All You Need" and its variants.
 *
 *   vaswani  column 2i = sin(p*w_i), 2i+1 = cos(p*w_i), w_i = base^(-2i/dim) (odd dim: last is sin)
 *   concat   [sin(p*w_0..w_{h-1}) | cos(...)], same w, h = dim/2 (dim even)
 *   t2t      tensor2tensor / fairseq: [sin | cos] with w_k = min_ts*exp(-k*ln(max_ts/min_ts)/max(h-1,1)),
 *            a zero column last when dim is odd
 *
 * compat=exact: frequencies and angles in double (w as libm pow/exp give it, the angle p*w one
 * double product, as a float64 NumPy reference computes them), sin/cos within 1 ulp in double
 * (f64 output; the other dtypes see below), one rounding to the dtype. compat=hf: PyTorch's
 * float32 order: w = expf(float(2i) * float(-ln(base)/dim)) (fairseq: expf(float(k) *
 * float(-log_inc))), angle = float(p) * w rounded to float, then sin/cos of that float angle,
 * rounded to float.
 *
 * Rows are produced in order, each written once; compute_rows starts a block anywhere by replaying
 * the anchors before it (seek), so blocks are byte for byte the whole table's rows. For f32/f16/bf16 output, sin/cos come from RoPE's
 * angle-addition recurrence (kernels.h rope_row, as rope.c uses it): anchored every
 * PE_ROPE_ANCHOR_ROWS rows on directly computed values and corrected to each row's own angle (the
 * exact double product or hf's float one), so every value is within 2^-44 of the exact sin/cos of
 * that angle, and directly computed below 2^-16 in magnitude; one rounding to the dtype is then
 * within 1 ulp of the correctly rounded value, the same bound as the direct path. f64 output (where
 * 2^-44 would be hundreds of ulps), single rows and angles beyond the recurrence's range
 * (pe_rope_rec_order) take the direct path: SLEEF's or glibc's sincos of every angle.
 *
 * Exact f32 tables of sin/cos pairs whose angles stay below PE_SIN_MAX_ANGLE (nearly all) take the
 * fused path instead: one kernel per row (kernels.h sin_row_f32: the recurrence by three shears,
 * the correction only where angles exceed PE_SIN_UNCORRECTED_ANGLE, rounding and layout in the same
 * pass). Its anchors: every DIRECT_ROWS rows one row computed directly; between them, every
 * CHECKPOINT_ROWS rows a checkpoint rotated by 64 w (cos 64w and sin 64w computed directly) restarts
 * the recurrence, so the error bound is that of 16 + 63 steps. A per-thread memo keeps the
 * frequency set between tables that differ only in offset or length. Other dtypes go through a
 * double row and pe_store_f64; the hf and odd-vaswani f32 rows through sincos_store_f32. */
#include "core/kernels.h"
#include "core/tables.h"
#include "core/torchmath.h"

#include <math.h>
#include <stddef.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { V_VASWANI, V_CONCAT, V_T2T };
static const char *const variants[] = {"vaswani", "concat", "t2t", NULL};

static const struct pe_param_spec params[] = {
	{"len", PE_PT_INT, NULL, 1, PE_MAX_LEN, NULL, "number of positions (rows)"},
	{"dim", PE_PT_INT, NULL, 1, PE_MAX_DIM, NULL, "embedding width (columns)"},
	{"base", PE_PT_REAL, "10000", 1e-300, 1e300, NULL, "wavelength base (> 0)"},
	{"offset", PE_PT_INT, "0", 0, PE_MAX_POSITION, NULL, "position of the first row"},
	{"variant", PE_PT_ENUM, "vaswani", 0, 0, variants, "column layout"},
	{"compat", PE_PT_ENUM, "exact", 0, 0, pe_compat_exact_hf, "arithmetic: exact (double) or hf (PyTorch float32)"},
	{"min_timescale", PE_PT_REAL, "1", 1e-300, 1e300, NULL, "t2t: shortest timescale"},
	{"max_timescale", PE_PT_REAL, "", 1e-300, 1e300, NULL, "t2t: longest timescale (default: base)"},
};

static double log_ratio(double mx, double mn);

/* The largest angle, last position × largest frequency, must be finite in the arithmetic used
 * (float32 for hf): frequencies span [min(1, 1/base), max(1, 1/base)] for vaswani/concat, and
 * min_ts down to min_ts²/max_ts (tensor2tensor's formula) for t2t. Checked on logarithms. */
static int check_angles(const struct pe_params *p, int variant, struct pe_err *err)
{
	double last = (double)pe_param_int(p, "offset") + (double)pe_param_int(p, "len");
	double h = (double)(pe_param_int(p, "dim") / 2), lw;
	const char *name = "base";
	if (variant == V_T2T) {
		double lmn = log(pe_param_real(p, "min_timescale"));
		double llast = h > 1 ? lmn - log_ratio(pe_param_real(p, "max_timescale"), pe_param_real(p, "min_timescale")) : lmn;
		lw = fmax(lmn, llast);
		name = "min_timescale";
	} else
		lw = fmax(0.0, -log(pe_param_real(p, "base")));
	double limit = pe_param_enum(p, "compat") == PE_COMPAT_HF ? log(0x1p127) : log(0x1p1023);
	if (lw + log(last) > limit)
		return pe_err_set(err, PE_EINVAL, name, "the angles (position x frequency) would overflow %s: choose %s "
				  "closer to the defaults or fewer positions",
				  pe_param_enum(p, "compat") == PE_COMPAT_HF ? "float32" : "double", name);
	return 0;
}

static int check(struct pe_params *p, struct pe_err *err)
{
	int variant = pe_param_enum(p, "variant");
	int64_t dim = pe_param_int(p, "dim");
	if (variant == V_CONCAT && (dim & 1))
		return pe_err_set(err, PE_EINVAL, "dim", "dim must be even for variant=concat");
	if (variant != V_T2T && (pe_param_isset(p, "max_timescale") &&
				 p->v[pe_param_index(p->def, "max_timescale")].given))
		return pe_err_set(err, PE_EINVAL, "max_timescale", "max_timescale applies to variant=t2t only");
	if (variant != V_T2T && p->v[pe_param_index(p->def, "min_timescale")].given)
		return pe_err_set(err, PE_EINVAL, "min_timescale", "min_timescale applies to variant=t2t only");
	if (variant == V_T2T && !pe_param_isset(p, "max_timescale")) {
		int i = pe_param_index(p->def, "max_timescale");
		p->v[i].set = 1;
		p->v[i].r = pe_param_real(p, "base");
	}
	if (variant != V_T2T) { /* keep the canonical key free of parameters that do not apply */
		p->v[pe_param_index(p->def, "min_timescale")].set = 0;
	}
	int rc = pe_check_float32_range(p, "base", err);
	if (rc == 0)
		rc = pe_check_float32_range(p, "min_timescale", err);
	if (rc == 0)
		rc = pe_check_float32_range(p, "max_timescale", err);
	return rc ? rc : check_angles(p, variant, err);
}

static int shape(const struct pe_params *p, struct pe_shape *s)
{
	s->rank = 2;
	s->dim[0] = (size_t)pe_param_int(p, "len");
	s->dim[1] = (size_t)pe_param_int(p, "dim");
	return 0;
}

/* ln(mx / mn) as tensor2tensor computes it, or as ln mx − ln mn when the ratio itself overflows or
 * vanishes (timescales more than 1e308 apart). */
static double log_ratio(double mx, double mn)
{
	double r = mx / mn;
	return isfinite(r) && r > 0 ? log(r) : log(mx) - log(mn);
}

/* Frequencies, h = number of sin/cos pairs. */
static void freqs_exact(const struct pe_params *p, int variant, size_t h, double *w)
{
	double dim = (double)pe_param_int(p, "dim"), base = pe_param_real(p, "base");
	if (variant == V_T2T) {
		double mn = pe_param_real(p, "min_timescale"), mx = pe_param_real(p, "max_timescale");
		double inc = log_ratio(mx, mn) / (double)(h > 1 ? h - 1 : 1);
		for (size_t k = 0; k < h; k++)
			w[k] = mn * exp(-(double)k * inc);
	} else {
		for (size_t i = 0; i < h; i++)
			w[i] = pow(base, -(double)(2 * i) / dim);
	}
}

static void freqs_hf(const struct pe_params *p, int variant, size_t h, float *w)
{
	double dim = (double)pe_param_int(p, "dim"), base = pe_param_real(p, "base");
	if (variant == V_T2T) {
		double mn = pe_param_real(p, "min_timescale"), mx = pe_param_real(p, "max_timescale");
		float neg_inc = (float)(-(log_ratio(mx, mn) / (double)(h > 1 ? h - 1 : 1)));
		for (size_t k = 0; k < h; k++) {
			float e = pe_torch_expf((float)k * neg_inc);
			w[k] = mn == 1.0 ? e : (float)mn * e;
		}
	} else {
		float scale = (float)(-log(base) / dim);
		for (size_t i = 0; i < h; i++)
			w[i] = pe_torch_expf((float)(2 * i) * scale);
	}
}

/* Place sin/cos of the h angles into a row of width dim by the variant's layout. */
static void layout_row(int variant, size_t dim, size_t h, const double *s, const double *c, double *row)
{
	if (variant == V_VASWANI) {
		for (size_t i = 0; i < h; i++) {
			row[2 * i] = s[i];
			row[2 * i + 1] = c[i];
		}
		if (dim & 1)
			row[dim - 1] = s[h];
	} else {
		memcpy(row, s, h * sizeof *row);
		memcpy(row + h, c, h * sizeof *row);
		if (dim & 1)
			row[dim - 1] = 0.0;
	}
}

/* Everything one table computation needs; rows are produced in order. */
/* Arrays of up to 4 KiB (dim up to 64) live in the job, on the stack: a 16x16 table's aligned_alloc,
 * malloc and frees were 2.4% of a cold small request's HTTP thread (perf). */
#define SMALL_DOUBLES 512
#define SMALL_FLOATS 64

struct job {
	const struct pe_kernel_table *k;
	struct pe_rope_rec rec;
	size_t len, dim, h, nf;
	int64_t offset;
	int variant, hf, use_rec, fused, tangents; /* tangents: tw holds tan(w/2) (cos w >= 0) */
	size_t lo, hi; /* fused: the columns that need the angle correction (kernels.h sin_row_f32) */
	double wmax;   /* the largest |w| */
	enum pe_dtype dt;
	double *buf; /* one allocation: the arrays below (job_alloc), or small */
	float *wf;
	double *w, *cw, *sw, *tw, *ang, *s, *c, *row;
	double *kc, *ks, *c64, *s64; /* fused: the checkpoint's cos/sin, and cos/sin of 64 w */
	/* a small table's arrays, in the job itself (kept last: job_init does not clear them) */
	_Alignas(64) double small[SMALL_DOUBLES];
	float small_wf[SMALL_FLOATS];
};

static void freqs(struct job *j, const struct pe_params *p)
{
	if (!j->hf) {
		freqs_exact(p, j->variant, j->nf, j->w);
		return;
	}
	freqs_hf(p, j->variant, j->nf, j->wf);
	for (size_t i = 0; i < j->nf; i++) /* the recurrence's rotation is by the float frequency */
		j->w[i] = (double)j->wf[i];
}

/* The recurrence for f32/f16/bf16 when its corrections stay in range (kernels.h); f64 output, where
 * its 2^-44 would be hundreds of ulps, and single rows take the direct path. */
static double max_frequency(const struct job *j)
{
	double wmax = 0;
	for (size_t i = 0; i < j->nf; i++)
		wmax = fmax(wmax, fabs(j->w[i]));
	return wmax;
}

/* One past the last position. */
static double end_position(const struct job *j) { return (double)j->offset + (double)j->len; }

static int recurrence_order(const struct job *j)
{
	if (j->dt == PE_F64 || j->len < 2)
		return PE_REC_DIRECT;
	return pe_rope_rec_order(end_position(j), j->wmax, j->hf);
}

/* One 64-byte aligned allocation (no vector load splits a cache line): w, cos w, sin w, the
 * recurrence's c, s, d0, then ang, s, c, tan(w/2), the checkpoint's cos and sin, cos 64w, sin 64w
 * and a double row; and the float frequencies. */
static int job_alloc(struct job *j)
{
	size_t stride = (j->nf + 7) / 8 * 8, doubles = 14 * stride + (j->dim + 7) / 8 * 8;
	int small = doubles <= SMALL_DOUBLES && j->nf + 1 <= SMALL_FLOATS;
	j->buf = small ? j->small : aligned_alloc(64, sizeof(double) * doubles);
	j->wf = small ? j->small_wf : malloc(sizeof(float) * (j->nf + 1)); /* t2t dim=1 has no frequency */
	if (!j->buf || !j->wf)
		return PE_ENOMEM;
	double *w = j->buf, *cw = w + stride, *sw = cw + stride, *st = sw + stride;
	j->rec = (struct pe_rope_rec){j->nf, w, cw, sw, st, st + stride, st + 2 * stride, 0, NULL, NULL};
	j->w = w;
	j->cw = cw;
	j->sw = sw;
	j->ang = st + 3 * stride;
	j->s = j->ang + stride;
	j->c = j->s + stride;
	j->tw = j->c + stride;
	j->rec.tw = j->tw;
	j->kc = j->tw + stride;
	j->ks = j->kc + stride;
	j->c64 = j->ks + stride;
	j->s64 = j->c64 + stride;
	j->row = j->s64 + stride;
	return 0;
}

static void job_destroy(struct job *j)
{
	if (j->buf != j->small)
		free(j->buf);
	if (j->wf != j->small_wf)
		free(j->wf);
}

/* The fused kernel's shears, tan(w/2) from cos w and sin w; 0 when some cos w < 0 (|tan| > 1),
 * where the fused kernel does not serve. */
static int half_tangents(struct job *j)
{
	for (size_t i = 0; i < j->nf; i++)
		if (!(j->cw[i] >= 0))
			return 0;
	for (size_t i = 0; i < j->nf; i++) /* a loop the compiler vectorises */
		j->tw[i] = j->sw[i] / (1 + j->cw[i]);
	return 1;
}

/* The fused kernel's correction range: every column whose angles may exceed
 * PE_SIN_UNCORRECTED_ANGLE (the high frequencies: a prefix for base > 1, a suffix below). */
static void corrected_columns(struct job *j)
{
	double last = end_position(j);
	j->lo = j->nf;
	j->hi = 0;
	for (size_t i = 0; i < j->nf; i++)
		if (last * fabs(j->w[i]) > PE_SIN_UNCORRECTED_ANGLE) {
			j->lo = i < j->lo ? i : j->lo;
			j->hi = i + 1;
		}
	if (j->hi == 0)
		j->lo = 0;
}

/* The fused path's anchors (see the file comment): every CHECKPOINT_ROWS rows the checkpoint
 * advances by 64 w, and the recurrence restarts one step before it, so that the kernel's own step
 * lands on it; every DIRECT_ROWS rows the anchor is computed directly. */
#define CHECKPOINT_ROWS PE_ROPE_ANCHOR_ROWS
#define DIRECT_ROWS (16 * CHECKPOINT_ROWS)
_Static_assert(CHECKPOINT_ROWS == 64, "checkpoints rotate by 64 w");

/* The checkpoint holds the state one row before the next checkpoint row: the anchor's state
 * rotated back by w, once. */
static void checkpoint_save(struct job *j)
{
	for (size_t i = 0; i < j->nf; i++) {
		double c = j->rec.c[i], s = j->rec.s[i];
		j->kc[i] = c * j->cw[i] + s * j->sw[i];
		j->ks[i] = s * j->cw[i] - c * j->sw[i];
	}
}

/* Advance the checkpoint by 64 w and restart the recurrence from it. */
static void checkpoint_advance(struct job *j)
{
	for (size_t i = 0; i < j->nf; i++) {
		double kc = j->kc[i] * j->c64[i] - j->ks[i] * j->s64[i];
		double ks = j->ks[i] * j->c64[i] + j->kc[i] * j->s64[i];
		j->kc[i] = kc;
		j->ks[i] = ks;
	}
	memcpy(j->rec.c, j->kc, j->nf * sizeof *j->kc);
	memcpy(j->rec.s, j->ks, j->nf * sizeof *j->ks);
}

/* The fused kernel (kernels.h sin_row_f32) serves exact f32 tables in the recurrence's range
 * whose angles stay below PE_SIN_MAX_ANGLE, laid out as sin/cos pairs only (no odd vaswani
 * column) and with cos w >= 0 for its shears. */
static int fusable(struct job *j, int order)
{
	if (j->dt != PE_F32 || j->hf || order == PE_REC_DIRECT || j->nf != j->h ||
	    !(end_position(j) * j->wmax < PE_SIN_MAX_ANGLE))
		return 0;
	if (!j->tangents)
		j->tangents = half_tangents(j);
	return j->tangents;
}

/* ---- the frequency memo ----
 * A thread's last fused frequency set: w and what the fused path derives from it (cos w, sin w,
 * tan(w/2), cos 64w, sin 64w), keyed by what they depend on (variant, dim, base, timescales and
 * the kernels, whose sincos may differ in the last bit), so
 * that a run of tables differing only in offset or length (cold requests at new offsets, and
 * benchmarks) skips the pow calls, three sincos passes and the divisions. One per thread, no lock;
 * freed at thread exit; widths up to MEMO_MAX_NF pairs. */
#define MEMO_MAX_NF 8192
#define MEMO_ARRAYS 6

struct memo {
	const struct pe_kernel_table *k; /* the kernels that computed it (the ISA's sincos) */
	int variant;
	size_t dim, nf;
	double base, mn, mx;
	double a[]; /* MEMO_ARRAYS * nf */
};

static pthread_key_t memo_key;
static pthread_once_t memo_once = PTHREAD_ONCE_INIT;
static int memo_ok;

static void memo_key_init(void) { memo_ok = pthread_key_create(&memo_key, free) == 0; }

/* The job's key fields into m (the arrays aside). */
static void memo_key_of(const struct job *j, const struct pe_params *p, struct memo *m)
{
	m->k = j->k;
	m->variant = j->variant;
	m->dim = j->dim;
	m->nf = j->nf;
	m->base = pe_param_real(p, "base");
	m->mn = j->variant == V_T2T ? pe_param_real(p, "min_timescale") : 0;
	m->mx = j->variant == V_T2T ? pe_param_real(p, "max_timescale") : 0;
}

static int memo_same(const struct memo *a, const struct memo *b)
{
	return a->k == b->k && a->variant == b->variant && a->dim == b->dim && a->nf == b->nf && a->base == b->base &&
	       a->mn == b->mn && a->mx == b->mx;
}

/* The job's memo arrays, in memo order. */
static void memo_arrays(struct job *j, double *v[MEMO_ARRAYS])
{
	v[0] = j->w, v[1] = j->cw, v[2] = j->sw, v[3] = j->tw, v[4] = j->c64, v[5] = j->s64;
}

static int memo_load(struct job *j, const struct pe_params *p)
{
	if (j->dt != PE_F32 || j->hf || j->nf > MEMO_MAX_NF || pthread_once(&memo_once, memo_key_init) || !memo_ok)
		return 0;
	struct memo key, *m = pthread_getspecific(memo_key);
	memo_key_of(j, p, &key);
	if (!m || !memo_same(m, &key))
		return 0;
	double *v[MEMO_ARRAYS];
	memo_arrays(j, v);
	for (int k = 0; k < MEMO_ARRAYS; k++)
		memcpy(v[k], m->a + k * j->nf, j->nf * sizeof(double));
	j->tangents = 1;
	return 1;
}

/* Keep a fused job's frequency set (nothing is kept when memory is short). */
static void memo_store(struct job *j, const struct pe_params *p)
{
	if (j->nf > MEMO_MAX_NF || pthread_once(&memo_once, memo_key_init) || !memo_ok)
		return;
	struct memo *m = pthread_getspecific(memo_key);
	if (!m || m->nf != j->nf) {
		struct memo *n = malloc(sizeof *n + MEMO_ARRAYS * j->nf * sizeof(double));
		if (!n || pthread_setspecific(memo_key, n) != 0) {
			free(n);
			return;
		}
		free(m);
		m = n;
	}
	memo_key_of(j, p, m);
	double *v[MEMO_ARRAYS];
	memo_arrays(j, v);
	for (int k = 0; k < MEMO_ARRAYS; k++)
		memcpy(m->a + k * j->nf, v[k], j->nf * sizeof(double));
}

static int job_init(struct job *j, const struct pe_params *p, enum pe_dtype dt)
{
	memset(j, 0, offsetof(struct job, small));
	j->k = pe_kernels();
	j->dt = dt;
	j->len = (size_t)pe_param_int(p, "len");
	j->dim = (size_t)pe_param_int(p, "dim");
	j->offset = pe_param_int(p, "offset");
	j->variant = pe_param_enum(p, "variant");
	j->hf = pe_param_enum(p, "compat") == PE_COMPAT_HF;
	/* vaswani with odd dim has one extra sin column with its own frequency */
	j->h = j->dim / 2;
	j->nf = j->variant == V_VASWANI ? (j->dim + 1) / 2 : j->h;
	if (job_alloc(j) != 0) {
		job_destroy(j);
		return PE_ENOMEM;
	}
	int remembered = memo_load(j, p); /* w, cos w, sin w, tan(w/2), cos 64w, sin 64w */
	if (!remembered)
		freqs(j, p);
	j->wmax = max_frequency(j);
	int order = recurrence_order(j);
	j->use_rec = order != PE_REC_DIRECT;
	j->rec.first_order = order == PE_REC_FIRST_ORDER;
	j->rec.wf = j->hf ? j->wf : NULL;
	if (j->use_rec && !remembered) /* the rotation by one row: cos w, sin w */
		j->k->sincos_f64(j->w, j->sw, j->cw, j->nf);
	j->fused = fusable(j, order);
	if (j->fused)
		corrected_columns(j);
	if (j->fused && !remembered) {
		for (size_t i = 0; i < j->nf; i++)
			j->ang[i] = 64 * j->w[i]; /* exact: a power of two */
		j->k->sincos_f64(j->ang, j->s64, j->c64, j->nf);
		memo_store(j, p);
	}
	return 0;
}

/* sin/cos of row r's angles into j->s, j->c: the recurrence (anchored every PE_ROPE_ANCHOR_ROWS
 * rows), or directly from the angles formed as the mode forms them. */
static void row_sincos(struct job *j, size_t r)
{
	int64_t pos = j->offset + (int64_t)r;
	if (j->use_rec) {
		j->k->rope_row(&j->rec, (double)pos, NULL, r % PE_ROPE_ANCHOR_ROWS == 0, j->c, j->s);
		return;
	}
	if (j->hf) {
		float pf = (float)pos;
		for (size_t i = 0; i < j->nf; i++)
			j->ang[i] = (double)(pf * j->wf[i]);
	} else {
		double pd = (double)pos;
		for (size_t i = 0; i < j->nf; i++)
			j->ang[i] = pd * j->w[i];
	}
	j->k->sincos_f64(j->ang, j->s, j->c, j->nf);
}

/* f32: laid out and rounded in one pass (one rounding: hf's float sin/cos is the same float). */
static void store_f32(const struct job *j, float *o)
{
	j->k->sincos_store_f32(j->s, j->c, j->h, j->variant == V_VASWANI, o);
	if (j->dim & 1)
		o[j->dim - 1] = j->variant == V_VASWANI ? (float)j->s[j->h] : 0.0f;
}

/* Other dtypes: the row in double, hf's values rounded to float first as PyTorch's float32
 * tensors hold them, then one rounding to the dtype. */
static void store_generic(const struct job *j, void *o)
{
	layout_row(j->variant, j->dim, j->h, j->s, j->c, j->row);
	if (j->hf)
		for (size_t i = 0; i < j->dim; i++)
			j->row[i] = (double)(float)j->row[i];
	pe_store_f64(j->dt, o, j->row, j->dim);
}

/* Bring the state to row r0 as if rows from the last anchor on had been produced (compute_rows
 * starting inside the table): the fused path's direct row, its checkpoints up to r0 and the steps
 * since the last one (into the row buffer); the recurrence's anchor row and the rows after it. */
static void seek(struct job *j, size_t r0)
{
	if (j->fused && r0 % DIRECT_ROWS != 0) {
		size_t d = r0 - r0 % DIRECT_ROWS, c = r0 - r0 % CHECKPOINT_ROWS;
		row_sincos(j, d);
		checkpoint_save(j);
		for (size_t k = d + CHECKPOINT_ROWS; k < r0; k += CHECKPOINT_ROWS)
			checkpoint_advance(j);
		for (size_t r = c > d ? c : d + 1; r < r0; r++)
			j->k->sin_row_f32(&j->rec, (double)(j->offset + (int64_t)r), j->lo, j->hi,
					  j->variant == V_VASWANI, (float *)j->row);
	} else if (!j->fused && j->use_rec) {
		for (size_t r = r0 - r0 % PE_ROPE_ANCHOR_ROWS; r < r0; r++)
			row_sincos(j, r);
	}
}

/* Rows [r0, r0 + n) of the table into out: 0, or the pe_cancelled() code that stopped it. */
static int rows(struct job *j, size_t r0, size_t n, void *out)
{
	size_t row_bytes = j->dim * pe_dtype_size(j->dt), every = pe_cancel_rows(j->dim);
	int rc = 0;
	seek(j, r0);
	for (size_t r = r0; r < r0 + n; r++) {
		char *o = (char *)out + (r - r0) * row_bytes;
		if ((r - r0) % every == 0 && (rc = pe_cancelled()) != 0)
			break;
		if (j->fused && r % DIRECT_ROWS != 0) {
			if (r % CHECKPOINT_ROWS == 0)
				checkpoint_advance(j);
			j->k->sin_row_f32(&j->rec, (double)(j->offset + (int64_t)r), j->lo, j->hi,
					  j->variant == V_VASWANI, (float *)o);
			if (j->dim & 1) /* t2t's zero column (vaswani with odd dim is not fused) */
				((float *)o)[j->dim - 1] = 0.0f;
			continue;
		}
		row_sincos(j, r);
		if (j->fused)
			checkpoint_save(j);
		if (j->dt == PE_F32)
			store_f32(j, (float *)o);
		else
			store_generic(j, o);
	}
	return rc;
}

static int compute_rows(const struct pe_params *p, enum pe_dtype dt, size_t r0, size_t n, void *const *out,
			struct pe_err *err)
{
	struct job j;
	if (!out[0])
		return 0;
	if (job_init(&j, p, dt) != 0)
		return pe_err_set(err, PE_ENOMEM, "", "out of memory");
	int rc = rows(&j, r0, n, out[0]);
	job_destroy(&j);
	return rc ? pe_cancel_err(rc, err) : 0;
}

static int compute(const struct pe_params *p, enum pe_dtype dt, void *out, struct pe_err *err)
{
	return compute_rows(p, dt, 0, (size_t)pe_param_int(p, "len"), &out, err);
}

const struct pe_table_def pe_table_sinusoidal = {
	.name = "sinusoidal",
	.summary = "Fixed sinusoidal position encodings (Vaswani, concat, tensor2tensor/fairseq)",
	.params = params,
	.nparams = sizeof params / sizeof params[0],
	.fixed_dtype = PE_DTYPE_COUNT_,
	.check = check,
	.shape = shape,
	.compute = compute,
	.compute_rows = compute_rows,
};
