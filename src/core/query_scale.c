/* /v1/rope/query-scale: the position-dependent factor some models multiply queries by, [len] for
 * positions 0 .. len-1.
 *
 * llama4      Llama 4's attention temperature tuning (its NoPE layers):
 *             1 + attn_scale * log(floor((p + 1) / floor_scale) + 1)
 * ministral3  Ministral 3 / Mistral Large 3 (rope_parameters' llama_4_scaling_beta):
 *             1 + beta * log(1 + floor(p / original_max_position_embeddings))
 *
 * compat=exact: the floor of an integer quotient, then log, multiply and add in long double (x87;
 * not fmal, which glibc does in software, 40 times slower), one rounding to double and one to the
 * dtype (within 1 ulp of the real value in every dtype). compat=hf: transformers' float32 tensor
 * arithmetic: positions float(p) (llama4: + 1.0f), divided by float(the integer), floorf, + 1.0f,
 * torch.log (pe_torch_logf), times float(the Python float), + 1.0f. The two differ where float(p)
 * is rounded (p > 2^24) and in the last bit of the log. */
#include "core/angles.h"
#include "core/tables.h"
#include "core/torchmath.h"

#include <float.h>
#include <math.h>
#include <string.h>

enum { V_LLAMA4, V_MINISTRAL3 };
static const char *const variants[] = {"llama4", "ministral3", NULL};

static const struct pe_param_spec qs_params[] = {
	{"len", PE_PT_INT, NULL, 1, PE_MAX_LEN, NULL, "number of positions"},
	{"variant", PE_PT_ENUM, NULL, 0, 0, variants, "llama4 (attention temperature tuning) or ministral3 (llama_4_scaling_beta)"},
	{"attn_scale", PE_PT_REAL, "0.1", -1e30, 1e30, NULL, "llama4: attn_scale"},
	{"floor_scale", PE_PT_INT, "8192", 1, PE_MAX_POSITION, NULL, "llama4: floor_scale"},
	{"beta", PE_PT_REAL, "", -1e30, 1e30, NULL, "ministral3: llama_4_scaling_beta (required)"},
	{"original_max_position_embeddings", PE_PT_INT, "", 1, PE_MAX_POSITION, NULL,
	 "ministral3: rope_parameters' original_max_position_embeddings (required)"},
	{"compat", PE_PT_ENUM, "exact", 0, 0, pe_compat_exact_hf, "arithmetic: exact (double) or hf (PyTorch float32)"},
};

/* Which variant each variant-specific parameter belongs to. */
static const struct {
	const char *name;
	int variant, required;
} owned[] = {
	{"attn_scale", V_LLAMA4, 0},
	{"floor_scale", V_LLAMA4, 0},
	{"beta", V_MINISTRAL3, 1},
	{"original_max_position_embeddings", V_MINISTRAL3, 1},
};

struct qs {
	int variant, hf;
	double scale;    /* attn_scale or beta */
	int64_t div;     /* floor_scale or original_max_position_embeddings */
	int64_t shift;   /* 1 for llama4's p + 1 */
};

static void qs_init(const struct pe_params *p, struct qs *q)
{
	q->variant = pe_param_enum(p, "variant");
	q->hf = pe_param_enum(p, "compat") == PE_COMPAT_HF;
	int l4 = q->variant == V_LLAMA4;
	q->scale = pe_param_real(p, l4 ? "attn_scale" : "beta");
	q->div = pe_param_int(p, l4 ? "floor_scale" : "original_max_position_embeddings");
	q->shift = l4;
}

/* The log's argument at position pos: the integer m (exact), or the float the model forms (hf). */
static double qs_arg(const struct qs *q, int64_t pos)
{
	if (!q->hf)
		return (double)((pos + q->shift) / q->div + 1);
	float x = (float)pos;
	if (q->shift)
		x = x + 1.0f;
	return (double)(floorf(x / (float)q->div) + 1.0f);
}

/* The factor for the log's argument m, as a double (hf: a float held exactly). */
static double qs_of_arg(const struct qs *q, double m)
{
	if (!q->hf) /* long double: a double log's rounding, times the scale, can pass 1 ulp of the sum */
		return (double)(1.0L + (long double)q->scale * logl((long double)m));
	return (double)(pe_torch_logf((float)m) * (float)q->scale + 1.0f);
}

static double qs_value(const struct qs *q, int64_t pos) { return qs_of_arg(q, qs_arg(q, pos)); }

static int qs_check(struct pe_params *p, struct pe_err *err)
{
	int variant = pe_param_enum(p, "variant");
	for (size_t k = 0; k < sizeof owned / sizeof owned[0]; k++) {
		struct pe_param_val *v = &p->v[pe_param_index(p->def, owned[k].name)];
		if (owned[k].variant != variant) {
			if (v->given)
				return pe_err_set(err, PE_EINVAL, owned[k].name, "%s does not apply to variant=%s",
						  owned[k].name, variants[variant]);
			v->set = 0;
		} else if (owned[k].required && !v->set) {
			return pe_err_set(err, PE_EINVAL, owned[k].name, "%s is required for variant=%s", owned[k].name,
					  variants[variant]);
		}
	}
	return 0;
}

static int qs_shape(const struct pe_params *p, struct pe_shape *s)
{
	s->rank = 1;
	s->dim[0] = (size_t)pe_param_int(p, "len");
	return 0;
}

/* The factor moves one way with the position (log of a non-decreasing integer): the ends bound it. */
static double qs_max_abs(const struct pe_params *p)
{
	struct qs q;
	qs_init(p, &q);
	double a = fabs(qs_value(&q, 0)), b = fabs(qs_value(&q, pe_param_int(p, "len") - 1));
	return a > b ? a : b;
}

static int qs_compute_rows(const struct pe_params *p, enum pe_dtype dt, size_t r0, size_t n, void *const *out,
			   struct pe_err *err)
{
	struct qs q;
	qs_init(p, &q);
	double buf[256], last = -1, v = 0; /* runs of positions share the argument: one log per run */
	char *o = out[0];
	size_t esz = pe_dtype_size(dt);
	for (size_t i = 0; i < n; i += 256) {
		size_t m = n - i < 256 ? n - i : 256;
		for (size_t j = 0; j < m; j++) {
			double a = qs_arg(&q, (int64_t)(r0 + i + j));
			if (a != last)
				v = qs_of_arg(&q, last = a);
			buf[j] = v;
		}
		pe_store_f64(dt, o + i * esz, buf, m);
	}
	return 0;
}

static int qs_compute(const struct pe_params *p, enum pe_dtype dt, void *out, struct pe_err *err)
{
	return qs_compute_rows(p, dt, 0, (size_t)pe_param_int(p, "len"), &out, err);
}

const struct pe_table_def pe_table_rope_query_scale = {
	.name = "rope/query-scale",
	.summary = "Position-dependent query scale: Llama 4's attention temperature, Ministral 3's llama_4_scaling_beta",
	.params = qs_params,
	.nparams = sizeof qs_params / sizeof qs_params[0],
	.fixed_dtype = PE_DTYPE_COUNT_,
	.check = qs_check,
	.shape = qs_shape,
	.compute = qs_compute,
	.compute_rows = qs_compute_rows,
	.max_abs = qs_max_abs,
};
