/* /v1/relative/deberta: DeBERTa-v2/v3's relative positions, int32 [q_len, k_len].
 *
 * transformers' build_relative_position: entry [q][k] is q - k; with position_buckets > 0 it goes
 * through make_log_bucket_position, which keeps |q - k| <= mid = position_buckets / 2 as it is and
 * maps a larger one to sign * (mid + ceil(log(|q - k| / mid) / log((max_relative_positions - 1) /
 * mid) * (mid - 1))). With position_buckets <= 0 the entry is q - k unclipped, as the function
 * returns it (the attention clamps its index into the embedding table later, not here), and
 * max_relative_positions plays no part.
 *
 * Arithmetic is the model's float32 PyTorch, operation for operation, because the ceil turns a
 * last-bit difference into a different bucket: |q - k| / mid is float(|q - k|) / float(mid); the
 * denominator's ratio is a Python double rounded to float (torch.tensor); both logs are torch.log
 * on float32 (pe_torch_logf); the quotient, the product with float(mid - 1) and + mid are float32
 * (exact below 2^24). A bucket depends on q - k only: the q_len + k_len - 1 of them are computed
 * once and every row is a contiguous slice (pe_relative_rows). Configurations where transformers
 * divides by log 1 = 0 or turns the log scale over (max_relative_positions - 1 <= mid), and
 * buckets past int32, are refused naming the parameter. */
#include "core/tables.h"
#include "core/torchmath.h"

#include <math.h>

static const struct pe_param_spec deberta_params[] = {
	{"q_len", PE_PT_INT, NULL, 1, PE_MAX_LEN, NULL, "number of queries (rows)"},
	{"k_len", PE_PT_INT, "", 1, PE_MAX_LEN, NULL, "number of keys (columns; default q_len)"},
	{"position_buckets", PE_PT_INT, "256", -1, 65536, NULL, "position_buckets (<= 0: plain q - k)"},
	{"max_relative_positions", PE_PT_INT, "512", 1, PE_MAX_LEN, NULL,
	 "max_relative_positions (the model's max_position_embeddings when the config has -1)"},
};

struct deberta {
	int64_t mid;   /* position_buckets / 2; 0: no buckets */
	float fmid, fmid1, log_den;
};

static void deberta_init(const struct pe_params *p, struct deberta *d)
{
	int64_t pb = pe_param_int(p, "position_buckets");
	d->mid = pb > 0 ? pb / 2 : 0;
	if (!d->mid)
		return;
	d->fmid = (float)d->mid;
	d->fmid1 = (float)(d->mid - 1);
	d->log_den = pe_torch_logf((float)((double)(pe_param_int(p, "max_relative_positions") - 1) / (double)d->mid));
}

/* The model's value for rel = q - k, as a double (finite; int32 range checked by deberta_check). */
static double deberta_value(const struct deberta *d, int64_t rel)
{
	int64_t a = rel < 0 ? -rel : rel;
	if (!d->mid || a <= d->mid)
		return (double)rel;
	float x = pe_torch_logf((float)a / d->fmid) / d->log_den * d->fmid1;
	double b = (double)(ceilf(x) + d->fmid); /* a float32 sum, as the model's */
	return rel < 0 ? -b : b;
}

/* The entry for k - q (pe_relative_rows' callback). */
static int32_t deberta_entry(const void *ctx, int64_t k_minus_q) { return (int32_t)deberta_value(ctx, -k_minus_q); }

static int deberta_check(struct pe_params *p, struct pe_err *err)
{
	pe_relative_k_len(p);
	struct pe_param_val *pb = &p->v[pe_param_index(p->def, "position_buckets")];
	if (pb->i < 0) { /* -1 (the config's "none") and 0 give the same table: one key */
		pb->i = 0;
		pb->r = 0;
	}
	if (pb->i == 0) {
		p->v[pe_param_index(p->def, "max_relative_positions")].set = 0;
		return 0;
	}
	if (pb->i == 1)
		return pe_err_set(err, PE_EINVAL, "position_buckets",
				  "position_buckets must be at least 2 (mid = position_buckets / 2 divides), or <= 0 for none");
	int64_t mid = pb->i / 2, mrp = pe_param_int(p, "max_relative_positions");
	if (mrp - 1 <= mid)
		return pe_err_set(err, PE_EINVAL, "max_relative_positions",
				  "max_relative_positions - 1 must exceed position_buckets / 2 = %lld (the log scale divides by "
				  "log((max_relative_positions - 1) / mid))", (long long)mid);
	struct deberta d;
	deberta_init(p, &d);
	/* |bucket| grows with |q - k| (monotone float steps): the widest distance bounds the table */
	int64_t far = pe_param_int(p, "q_len") - 1, kf = pe_param_int(p, "k_len") - 1;
	if (kf > far)
		far = kf;
	if (!(fabs(deberta_value(&d, far)) <= 2147483647.0))
		return pe_err_set(err, PE_EINVAL, "max_relative_positions",
				  "max_relative_positions is so close to position_buckets / 2 + 1 that buckets leave int32");
	return 0;
}

static int deberta_shape(const struct pe_params *p, struct pe_shape *s)
{
	s->rank = 2;
	s->dim[0] = (size_t)pe_param_int(p, "q_len");
	s->dim[1] = (size_t)pe_param_int(p, "k_len");
	return 0;
}

/* Rows [r0, r0 + n) (query positions) of the table into out. */
static int deberta_compute_rows(const struct pe_params *p, enum pe_dtype dt, size_t r0, size_t n, void *const *out,
				struct pe_err *err)
{
	struct deberta d;
	deberta_init(p, &d);
	return pe_relative_rows(p, deberta_entry, &d, r0, n, out[0], err);
}

static int deberta_compute(const struct pe_params *p, enum pe_dtype dt, void *out, struct pe_err *err)
{
	return deberta_compute_rows(p, dt, 0, (size_t)pe_param_int(p, "q_len"), &out, err);
}

const struct pe_table_def pe_table_relative_deberta = {
	.name = "relative/deberta",
	.summary = "DeBERTa-v2/v3 relative positions q - k, log-bucketed (transformers' build_relative_position), int32",
	.params = deberta_params,
	.nparams = sizeof deberta_params / sizeof deberta_params[0],
	.fixed_dtype = PE_I32,
	.check = deberta_check,
	.shape = deberta_shape,
	.compute = deberta_compute,
	.cost = pe_relative_cost,
	.compute_rows = deberta_compute_rows,
};
