/* POST /v1/rope/apply: rotate posted queries or keys by RoPE, as Hugging Face's
 * apply_rotary_pos_emb does: out = x·cos + rotate(x)·sin over the first rotary_dim channels of the
 * last axis (the rest pass through), with cos/sin the /v1/rope table (every scaling and compat,
 * attention_scaling included) for each vector's position along seq_axis.
 *
 * Positions are offset … offset+seq−1, or the explicit `positions` list. The cos/sin rows are
 * computed once through the rope table in the working dtype (float32 for f32/f16/bf16 bodies, as
 * HF's cos/sin tensors; float64 for f64) over the span of positions asked for, then indexed per
 * vector; a list spread wider than 4× its length computes each position's row on its own.
 * inverse=1 rotates back (sin negated). The kernels are in place (kernels.h rope_apply_*). */
#include "core/kernels.h"
#include "core/rope.h"
#include "core/tables.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct pe_param_spec params[] = {
	{"offset", PE_PT_INT, "0", 0, PE_MAX_POSITION, NULL, "position of the first vector along seq_axis"},
	PE_ROPE_LAYOUT_PARAM,
	PE_ROPE_PARAMS_COMMON(""),
	{"positions", PE_PT_LIST, "", 0, PE_MAX_POSITION, PE_LIST_INTEGERS,
	 "explicit positions, one per index of seq_axis"},
	{"seq_axis", PE_PT_INT, "-2", -PE_MAX_RANK, -2, NULL, "sequence axis from the end (-2: [b,h,s,d]; -3: [b,s,h,d])"},
	{"rotary_dim", PE_PT_INT, "", 2, PE_MAX_DIM, NULL, "channels rotated (default: the last axis; the rest pass through)"},
	{"inverse", PE_PT_BOOL, "0", 0, 1, NULL, "1: rotate back (sin negated)"},
};

static int check(struct pe_params *p, struct pe_err *err)
{
	if (pe_param_isset(p, "dim") && pe_param_isset(p, "rotary_dim") &&
	    pe_param_int(p, "dim") != pe_param_int(p, "rotary_dim"))
		return pe_err_set(err, PE_EINVAL, "rotary_dim", "rotary_dim and dim name the same width; give one");
	if (pe_param_isset(p, "positions") && p->v[pe_param_index(p->def, "offset")].given)
		return pe_err_set(err, PE_EINVAL, "offset", "give positions or offset, not both");
	size_t n;
	const double *pos = pe_param_list(p, "positions", &n);
	for (size_t i = 0; pos && i < n; i++)
		if (pos[i] != (double)(int64_t)pos[i])
			return pe_err_set(err, PE_EINVAL, "positions", "positions must be integers");
	return 0;
}

static size_t rotary_width(const struct pe_params *p, size_t last)
{
	if (pe_param_isset(p, "rotary_dim"))
		return (size_t)pe_param_int(p, "rotary_dim");
	return pe_param_isset(p, "dim") ? (size_t)pe_param_int(p, "dim") : last;
}

static int out_shape(const struct pe_params *p, const struct pe_shape *in, struct pe_shape *out, struct pe_err *err)
{
	int axis = (int)pe_param_int(p, "seq_axis");
	if (in->rank < 2 || -axis > in->rank)
		return pe_err_set(err, PE_EINVAL, "seq_axis", "seq_axis=%d is outside a rank-%d body", axis, in->rank);
	size_t last = in->dim[in->rank - 1], rd = rotary_width(p, last), seq = in->dim[in->rank + axis], n;
	if (rd > last)
		return pe_err_set(err, PE_EINVAL, "rotary_dim", "rotary_dim=%zu is wider than the last axis (%zu)", rd, last);
	if (rd & 1)
		return pe_err_set(err, PE_EINVAL, "rotary_dim", "the rotary width must be even, got %zu", rd);
	if (pe_param_list(p, "positions", &n) && n != seq)
		return pe_err_set(err, PE_EINVAL, "positions", "%zu positions for a sequence axis of %zu", n, seq);
	*out = *in;
	return 0;
}

/* The rope table [2, len, rd] for positions first … first+len−1 in dt (caller frees). seq_len,
 * where the scaling reads it and the client did not give it, is the end of the whole request. */
static void *rope_rows(const struct pe_params *p, size_t rd, int64_t first, size_t len, int64_t end,
		       enum pe_dtype dt, struct pe_err *err)
{
	char dim[32], off[32], n[32], seq_len[32];
	snprintf(dim, sizeof dim, "%zu", rd);
	snprintf(off, sizeof off, "%lld", (long long)first);
	snprintf(n, sizeof n, "%zu", len);
	snprintf(seq_len, sizeof seq_len, "%lld", (long long)end);
	int scaling = pe_param_enum(p, "scaling");
	int reads_seq_len = scaling == PE_ROPE_DYNAMIC || scaling == PE_ROPE_LONGROPE;
	const char *const kv[] = {"dim", dim, "offset", off, "len", n, reads_seq_len ? "seq_len" : NULL, seq_len, NULL};
	return pe_table_derived(p, &pe_table_rope, kv, dt, NULL, err);
}

struct geometry {
	size_t outer, seq, inner, last, rd;
};

static void geometry_of(const struct pe_params *p, const struct pe_shape *s, struct geometry *g)
{
	int a = s->rank + (int)pe_param_int(p, "seq_axis");
	g->outer = g->inner = 1;
	for (int i = 0; i < a; i++)
		g->outer *= s->dim[i];
	for (int i = a + 1; i < s->rank - 1; i++)
		g->inner *= s->dim[i];
	g->seq = s->dim[a];
	g->last = s->dim[s->rank - 1];
	g->rd = rotary_width(p, g->last);
}

/* Rotate every vector whose position is row `r` of the cos/sin table (rows of rd values). */
static void rotate_position(const struct geometry *g, const struct pe_tensor_mut *y, size_t s, const void *cs,
			    const void *sn, int interleaved, int inverse)
{
	const struct pe_kernel_table *k = pe_kernels();
	for (size_t o = 0; o < g->outer; o++)
		for (size_t i = 0; i < g->inner; i++) {
			size_t at = ((o * g->seq + s) * g->inner + i) * g->last;
			if (y->dtype == PE_F64)
				pe_rope_apply_f64((double *)y->data + at, (double *)y->data + at, cs, sn, g->rd,
						  interleaved, inverse);
			else
				k->rope_apply_f32((float *)y->data + at, (float *)y->data + at, cs, sn, g->rd,
						  interleaved, inverse);
		}
}

static int apply(const struct pe_params *p, const struct pe_tensor_mut *x, struct pe_tensor_mut *out,
		 enum pe_dtype final_dt, struct pe_err *err)
{
	struct geometry g;
	geometry_of(p, &x->shape, &g);
	if (out->data != x->data)
		memcpy(out->data, x->data, g.outer * g.seq * g.inner * g.last * pe_dtype_size(x->dtype));
	if (g.seq == 0 || g.outer * g.inner == 0 || g.rd == 0)
		return 0;
	size_t npos, esz = pe_dtype_size(x->dtype);
	const double *list = pe_param_list(p, "positions", &npos);
	int64_t lo = pe_param_int(p, "offset"), hi = lo + (int64_t)g.seq - 1;
	for (size_t s = 0; list && s < npos; s++) {
		lo = s == 0 || (int64_t)list[s] < lo ? (int64_t)list[s] : lo;
		hi = s == 0 || (int64_t)list[s] > hi ? (int64_t)list[s] : hi;
	}
	int interleaved = pe_param_enum(p, "layout") == 1, inverse = (int)pe_param_int(p, "inverse");
	size_t span = (size_t)(hi - lo + 1);
	int one_table = !list || span <= 4 * g.seq;
	char *rows = one_table ? rope_rows(p, g.rd, lo, span, hi + 1, x->dtype, err) : NULL;
	if (one_table && !rows)
		return err && err->code ? err->code : PE_ENOMEM;
	for (size_t s = 0; s < g.seq; s++) {
		int64_t pos = list ? (int64_t)list[s] : lo + (int64_t)s;
		char *own = one_table ? NULL : rope_rows(p, g.rd, pos, 1, hi + 1, x->dtype, err);
		if (!one_table && !own)
			return err && err->code ? err->code : PE_ENOMEM;
		size_t r = one_table ? (size_t)(pos - lo) : 0, n = one_table ? span : 1;
		const char *base = one_table ? rows : own;
		rotate_position(&g, out, s, base + r * g.rd * esz, base + (n + r) * g.rd * esz, interleaved, inverse);
		free(own);
	}
	free(rows);
	(void)final_dt;
	return 0;
}

const struct pe_table_def pe_transform_rope_apply = {
	.name = "rope/apply",
	.summary = "Rotate posted queries or keys by RoPE (HF apply_rotary_pos_emb; partial rotary, inverse)",
	.params = params,
	.nparams = sizeof params / sizeof params[0],
	.fixed_dtype = PE_DTYPE_COUNT_,
	.check = check,
	.out_shape = out_shape,
	.apply = apply,
};
