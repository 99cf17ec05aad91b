/* /v1/relative/t5 and /v1/relative/xl: relative-position tables.
 *
 * t5  Hugging Face transformers' T5Attention._relative_position_bucket of k - q, shape
 *     [q_len, k_len], int32. Reproduced operation for operation, including its float32 part:
 *     bucket = max_exact + int64(logf(float(rel) / float(max_exact)) / float(log(max_distance /
 *     max_exact)) * float(num_buckets - max_exact)), truncated toward zero, capped at num_buckets-1.
 *     A bucket depends on k - q only, so the q_len + k_len - 1 buckets are computed once and every
 *     row is a contiguous slice of them. Configurations on which transformers divides by zero
 *     (max_exact = 0, or max_distance = max_exact) or inverts its log scale (max_distance <
 *     max_exact) are refused with the parameter named.
 * xl  Transformer-XL's relative sinusoids: positions len-1 ... 0 (each clamped to clamp_len when
 *     clamp_len > 0), [sin | cos] with inv_freq = 1/base^(arange(0, dim, 2)/dim), shape [len, dim];
 *     compat=exact in double, compat=hf in torch float32 (angles.h). */
#include "core/angles.h"
#include "core/tables.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BUCKETS 65536.0

/* ---- t5 ---- */

static const struct pe_param_spec t5_params[] = {
	{"q_len", PE_PT_INT, NULL, 1, PE_MAX_LEN, NULL, "number of queries (rows)"},
	{"k_len", PE_PT_INT, "", 1, PE_MAX_LEN, NULL, "number of keys (columns; default q_len)"},
	{"num_buckets", PE_PT_INT, "32", 2, MAX_BUCKETS, NULL, "number of buckets (relative_attention_num_buckets)"},
	{"max_distance", PE_PT_INT, "128", 1, PE_MAX_LEN, NULL, "distance where the last bucket starts (relative_attention_max_distance)"},
	{"bidirectional", PE_PT_BOOL, "1", 0, 1, NULL, "1: encoder (both directions), 0: decoder (past keys only)"},
};

struct t5 {
	int bidirectional;
	int64_t half, max_exact, last; /* buckets per direction, exact buckets, last bucket */
	float fmax_exact, log_ratio, log_buckets;
};

static void t5_init(const struct pe_params *p, struct t5 *t)
{
	int64_t nb = pe_param_int(p, "num_buckets");
	t->bidirectional = (int)pe_param_int(p, "bidirectional");
	t->half = t->bidirectional ? nb / 2 : nb;
	t->max_exact = t->half / 2;
	t->last = t->half - 1;
	t->fmax_exact = (float)t->max_exact;
	t->log_ratio = (float)log((double)pe_param_int(p, "max_distance") / (double)t->max_exact);
	t->log_buckets = (float)(t->half - t->max_exact);
}

void pe_relative_k_len(struct pe_params *p)
{
	struct pe_param_val *k = &p->v[pe_param_index(p->def, "k_len")];
	if (!k->set) {
		k->set = 1;
		k->i = pe_param_int(p, "q_len");
		k->r = (double)k->i;
	}
}

int pe_relative_rows(const struct pe_params *p, int32_t (*value)(const void *ctx, int64_t k_minus_q), const void *ctx,
		     size_t r0, size_t n, int32_t *out, struct pe_err *err)
{
	size_t k_len = (size_t)pe_param_int(p, "k_len");
	if (n == 0)
		return 0;
	for (size_t k = 0; k < k_len; k++)
		out[k] = value(ctx, (int64_t)k - (int64_t)r0);
	/* row q is value(-q) followed by row q - 1 without its last entry */
	for (size_t i = 1; i < n; i++) {
		int32_t *row = out + i * k_len;
		row[0] = value(ctx, -(int64_t)(r0 + i));
		memcpy(row + 1, row - k_len, (k_len - 1) * sizeof *row);
	}
	return 0;
}

int pe_relative_cost(const struct pe_params *p, struct pe_cost *c)
{
	c->work_param = pe_param_int(p, "k_len") > pe_param_int(p, "q_len") ? "k_len" : "q_len";
	return 0;
}

static int t5_check(struct pe_params *p, struct pe_err *err)
{
	pe_relative_k_len(p);
	int64_t nb = pe_param_int(p, "num_buckets"), md = pe_param_int(p, "max_distance");
	int bi = (int)pe_param_int(p, "bidirectional");
	int64_t max_exact = (bi ? nb / 2 : nb) / 2;
	if (max_exact < 1)
		return pe_err_set(err, PE_EINVAL, "num_buckets",
				  "num_buckets must be at least 4 when bidirectional=1 (half of the buckets per direction, "
				  "half of those exact)");
	if (md <= max_exact)
		return pe_err_set(err, PE_EINVAL, "max_distance",
				  "max_distance must exceed the %lld exact buckets (num_buckets=%lld%s)",
				  (long long)max_exact, (long long)nb, bi ? ", bidirectional" : "");
	return 0;
}

static int t5_shape(const struct pe_params *p, struct pe_shape *s)
{
	s->rank = 2;
	s->dim[0] = (size_t)pe_param_int(p, "q_len");
	s->dim[1] = (size_t)pe_param_int(p, "k_len");
	return 0;
}

static int32_t t5_bucket(const void *ctx, int64_t rel)
{
	const struct t5 *t = ctx;
	int64_t bucket = 0, n;
	if (t->bidirectional) {
		bucket = rel > 0 ? t->half : 0;
		n = rel < 0 ? -rel : rel;
	} else {
		n = rel < 0 ? -rel : 0;
	}
	if (n < t->max_exact)
		return (int32_t)(bucket + n);
	float x = logf((float)n / t->fmax_exact) / t->log_ratio * t->log_buckets;
	int64_t large = x < (float)t->last ? t->max_exact + (int64_t)x : t->last; /* x >= 0 here */
	return (int32_t)(bucket + (large < t->last ? large : t->last));
}

/* Rows [r0, r0 + n) (query positions) of the table into out. */
static int t5_compute_rows(const struct pe_params *p, enum pe_dtype dt, size_t r0, size_t n, void *const *out,
			   struct pe_err *err)
{
	struct t5 t;
	t5_init(p, &t);
	return pe_relative_rows(p, t5_bucket, &t, r0, n, out[0], err);
}

static int t5_compute(const struct pe_params *p, enum pe_dtype dt, void *out, struct pe_err *err)
{
	return t5_compute_rows(p, dt, 0, (size_t)pe_param_int(p, "q_len"), &out, err);
}

/* ---- xl ---- */

static const struct pe_param_spec xl_params[] = {
	{"len", PE_PT_INT, NULL, 1, PE_MAX_LEN, NULL, "number of relative positions (klen = mlen + qlen)"},
	{"dim", PE_PT_INT, NULL, 2, PE_MAX_DIM, NULL, "embedding width (even)"},
	{"base", PE_PT_REAL, "10000", 1e-300, 1e300, NULL, "wavelength base (> 0)"},
	{"clamp_len", PE_PT_INT, "0", 0, PE_MAX_LEN, NULL, "clamp positions to at most this (0: no clamping)"},
	{"compat", PE_PT_ENUM, "exact", 0, 0, pe_compat_exact_hf, "arithmetic: exact (double) or hf (PyTorch float32)"},
};

static int xl_check(struct pe_params *p, struct pe_err *err)
{
	if (pe_param_int(p, "dim") % 2 != 0)
		return pe_err_set(err, PE_EINVAL, "dim", "dim must be even for relative/xl ([sin | cos] halves)");
	return pe_check_float32_range(p, "base", err);
}

static int xl_shape(const struct pe_params *p, struct pe_shape *s)
{
	s->rank = 2;
	s->dim[0] = (size_t)pe_param_int(p, "len");
	s->dim[1] = (size_t)pe_param_int(p, "dim");
	return 0;
}

/* Rows [r0, r0 + n) into out: each row from its own position, so any block is the table's. */
static int xl_compute_rows(const struct pe_params *p, enum pe_dtype dt, size_t r0, size_t n, void *const *out,
			   struct pe_err *err)
{
	int64_t len = pe_param_int(p, "len"), clamp = pe_param_int(p, "clamp_len");
	size_t dim = (size_t)pe_param_int(p, "dim"), h = dim / 2, esz = pe_dtype_size(dt);
	int hf = pe_param_enum(p, "compat") == PE_COMPAT_HF;
	double *buf = malloc(sizeof(double) * 4 * h);
	if (!buf)
		return pe_err_set(err, PE_ENOMEM, "", "out of memory");
	double *w = buf, *ang = w + h, *s = ang + h, *c = s + h;
	pe_inv_freq_pow(pe_param_real(p, "base"), h, 2, (double)dim, hf, w);
	char *o = out[0];
	for (int64_t r = (int64_t)r0; r < (int64_t)(r0 + n); r++, o += dim * esz) {
		int64_t pos = len - 1 - r;
		if (clamp > 0 && pos > clamp)
			pos = clamp;
		pe_sincos_at((double)pos, w, h, hf, ang, s, c);
		pe_store_f64(dt, o, s, h);
		pe_store_f64(dt, o + h * esz, c, h);
	}
	free(buf);
	return 0;
}

static int xl_compute(const struct pe_params *p, enum pe_dtype dt, void *out, struct pe_err *err)
{
	return xl_compute_rows(p, dt, 0, (size_t)pe_param_int(p, "len"), &out, err);
}

const struct pe_table_def pe_table_relative_t5 = {
	.name = "relative/t5",
	.summary = "T5 relative-position buckets of k - q (transformers' _relative_position_bucket), int32",
	.params = t5_params,
	.nparams = sizeof t5_params / sizeof t5_params[0],
	.fixed_dtype = PE_I32,
	.check = t5_check,
	.shape = t5_shape,
	.compute = t5_compute,
	.cost = pe_relative_cost,
	.compute_rows = t5_compute_rows,
};

const struct pe_table_def pe_table_relative_xl = {
	.name = "relative/xl",
	.summary = "Transformer-XL relative sinusoids, positions len-1 ... 0 with clamp_len",
	.params = xl_params,
	.nparams = sizeof xl_params / sizeof xl_params[0],
	.fixed_dtype = PE_DTYPE_COUNT_,
	.check = xl_check,
	.shape = xl_shape,
	.compute = xl_compute,
	.compute_rows = xl_compute_rows,
};
