/* POST /v1/alibi/apply: attention scores [..., heads, q_len, k_len] + the /v1/alibi bias for those
 * sizes (heads, q_len, k_len taken from the body; offset, max_bias as given), plus the causal mask
 * with mask=causal. The bias table is computed once (rounded once into the working dtype) and
 * reused across the leading axes; masked entries (k > q_pos) are set to the lowest finite value of
 * the dtype the result is delivered in, as torch.finfo(dtype).min, never -inf. */
#include "core/tables.h"

#include <stdio.h>
#include <stdlib.h>

enum { MASK_NONE, MASK_CAUSAL };
static const char *const masks[] = {"none", "causal", NULL};

static const struct pe_param_spec params[] = {
	{"heads", PE_PT_INT, "", 1, 65536, NULL, "if given, must equal the heads axis of the body"},
	{"max_bias", PE_PT_REAL, "8", 0, 64, NULL, "slope of the last head is 2^-max_bias"},
	{"offset", PE_PT_INT, "", -PE_MAX_POSITION, PE_MAX_POSITION, NULL,
	 "position of the first query (default k_len - q_len)"},
	{"mask", PE_PT_ENUM, "none", 0, 0, masks, "causal: also mask keys after each query"},
};

static int out_shape(const struct pe_params *p, const struct pe_shape *in, struct pe_shape *out, struct pe_err *err)
{
	if (in->rank < 3)
		return pe_err_set(err, PE_EINVAL, "shape", "the body must be [..., heads, q_len, k_len] (rank >= 3)");
	size_t heads = in->dim[in->rank - 3];
	if (pe_param_isset(p, "heads") && (size_t)pe_param_int(p, "heads") != heads)
		return pe_err_set(err, PE_EINVAL, "heads", "heads=%lld but the body's heads axis is %zu",
				  (long long)pe_param_int(p, "heads"), heads);
	*out = *in;
	return 0;
}

/* The bias [heads, q, k] in the working dtype (caller frees); masked entries are overwritten by the
 * caller with the final dtype's lowest value. */
static void *make_bias(const struct pe_params *p, size_t heads, size_t q, size_t k, enum pe_dtype dt,
		       struct pe_err *err)
{
	char h[32], ql[32], kl[32];
	snprintf(h, sizeof h, "%zu", heads);
	snprintf(ql, sizeof ql, "%zu", q);
	snprintf(kl, sizeof kl, "%zu", k);
	const char *const kv[] = {"heads", h, "q_len", ql, "k_len", kl, NULL};
	return pe_table_derived(p, &pe_table_alibi, kv, dt, NULL, err);
}

#define DEFINE_ADD(T)                                                                                    \
	static void add_##T(const T *x, T *out, const T *bias, size_t n, size_t per, size_t q, size_t k,  \
			    int64_t offset, int causal, T lowest)                                        \
	{                                                                                                \
		for (size_t i = 0; i < n; i++) {                                                         \
			size_t j = i % per, col = j % k, row = (j / k) % q;                              \
			out[i] = causal && (int64_t)col > offset + (int64_t)row ? lowest : x[i] + bias[j];  \
		}                                                                                        \
	}
DEFINE_ADD(float)
DEFINE_ADD(double)

static int apply(const struct pe_params *p, const struct pe_tensor_mut *x, struct pe_tensor_mut *out,
		 enum pe_dtype final_dt, struct pe_err *err)
{
	const struct pe_shape *s = &x->shape;
	size_t heads = s->dim[s->rank - 3], q = s->dim[s->rank - 2], k = s->dim[s->rank - 1], n = 1;
	for (int i = 0; i < s->rank; i++)
		n *= s->dim[i];
	if (n == 0)
		return 0;
	void *bias = make_bias(p, heads, q, k, x->dtype, err);
	if (!bias)
		return err && err->code ? err->code : PE_ENOMEM;
	int64_t offset = pe_param_isset(p, "offset") ? pe_param_int(p, "offset") : (int64_t)k - (int64_t)q;
	int causal = pe_param_enum(p, "mask") == MASK_CAUSAL;
	double lowest = pe_dtype_lowest(final_dt == PE_I32 ? x->dtype : final_dt);
	if (x->dtype == PE_F64)
		add_double(x->data, out->data, bias, n, heads * q * k, q, k, offset, causal, lowest);
	else
		add_float(x->data, out->data, bias, n, heads * q * k, q, k, offset, causal, (float)lowest);
	free(bias);
	return 0;
}

const struct pe_table_def pe_transform_alibi_apply = {
	.name = "alibi/apply",
	.summary = "Add ALiBi biases (and the causal mask) to posted attention scores [..., heads, q_len, k_len]",
	.params = params,
	.nparams = sizeof params / sizeof params[0],
	.fixed_dtype = PE_DTYPE_COUNT_,
	.out_shape = out_shape,
	.apply = apply,
};
