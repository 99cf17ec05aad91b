/* POST /v1/rope/apply: rotate posted queries or keys by RoPE, as Hugging Face's
 * apply_rotary_pos_emb does: out = x·cos + rotate(x)·sin over the first rotary_dim channels of the
 * last axis (the rest pass through), with cos/sin the /v1/rope table (every scaling and compat,
 * attention_scaling included) for each vector's position along seq_axis.
 *
 * Positions are offset … offset+seq−1, or the explicit `positions` list. The cos/sin rows are
 * computed once through the rope table in the working dtype (float32 for f32/f16/bf16 bodies, as
 * HF's cos/sin tensors; float64 for f64) over the span of positions asked for, then indexed per
 * vector; a list spread wider than 4× its length computes each position's row on its own.
 * inverse=1 rotates back (sin negated). The kernels are in place (kernels.h rope_apply_*).
 *
 * Per-token positions (pe_rope_apply_positions: a positions tensor posted beside x, [seq],
 * [batch, seq], and for M-RoPE [3, seq] / [3, batch, seq]) use the same rows: the distinct
 * positions are sorted, and runs of them no sparser than one in four get one rope table each
 * (a lone position its own one-row table), all through one rope plan (pe_rope_spans), so a row is
 * the same bytes whichever request asked for it and a scattered position costs its row, not a
 * table's set-up. Memory is the distinct positions (8 bytes each), their cos/sin rows and one run's
 * table (at most 4096 rows), never the span; the server reserves it on its budget beforehand.
 * M-RoPE (mrope_section=t,h,w, Qwen2-VL's apply_multimodal_rotary_pos_emb; interleaved=1 for
 * Qwen3-VL): channel c turns with frequency k (c mod rd/2, or c/2 for layout=interleaved), whose
 * position is row pe_mrope_row_of(k) of the three; each vector's cos/sin are gathered from the
 * rows of its three positions. Axial RoPE (axes_dim, diffusers' image and video transformers) takes
 * ids [seq, n_axes] as the positions part and is apply_axial.c's. */
#include "core/axial.h"
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
	{"mrope_section", PE_PT_LIST, "", 0, PE_MAX_DIM, PE_LIST_INTEGERS,
	 "M-RoPE: frequencies following the t, h, w position rows (sum rotary_dim/2); needs a positions part"},
	{"interleaved", PE_PT_BOOL, "0", 0, 1, NULL, "M-RoPE: sections interleaved t h w t h w ... (Qwen3-VL)"},
	{"axes_dim", PE_PT_LIST, "", 2, PE_MAX_DIM, PE_LIST_INTEGERS,
	 "axial RoPE: rotary channels per axis of the ids [seq, n_axes] sent as a positions part (FLUX: 16,56,56)"},
};

/* Axial RoPE's parameters: its ids come as a part, its pairs are interleaved, no scaling. */
static int check_axial(struct pe_params *p, struct pe_err *err)
{
	if (pe_param_isset(p, "mrope_section"))
		return pe_err_set(err, PE_EINVAL, "axes_dim", "give axes_dim (axial) or mrope_section (M-RoPE), not both");
	if (pe_param_isset(p, "positions"))
		return pe_err_set(err, PE_EINVAL, "positions", "axial ids are [seq, n_axes]: send them as a positions part (multipart/form-data)");
	if (pe_param_enum(p, "scaling") != PE_ROPE_NONE)
		return pe_err_set(err, PE_EINVAL, "scaling", "axial RoPE takes no scaling");
	if (pe_param_enum(p, "compat") == PE_COMPAT_GGML)
		return pe_err_set(err, PE_EINVAL, "compat", "axial RoPE offers compat=exact and compat=hf");
	if (p->v[pe_param_index(p->def, "layout")].given && pe_param_enum(p, "layout") != 1)
		return pe_err_set(err, PE_EINVAL, "layout", "axial RoPE rotates interleaved pairs (layout=interleaved)");
	return pe_axial_axes_check(p, 0, err);
}

/* The channels axes_dim names (0 without it). */
static size_t axes_width(const struct pe_params *p)
{
	size_t n, w = 0;
	const double *ad = pe_param_list(p, "axes_dim", &n);
	for (size_t a = 0; ad && a < n; a++)
		w += (size_t)ad[a];
	return w;
}

static int check(struct pe_params *p, struct pe_err *err)
{
	int rc = pe_param_isset(p, "axes_dim") ? check_axial(p, err) : 0;
	if (rc)
		return rc;
	if (pe_param_isset(p, "dim") && pe_param_isset(p, "rotary_dim") &&
	    pe_param_int(p, "dim") != pe_param_int(p, "rotary_dim"))
		return pe_err_set(err, PE_EINVAL, "rotary_dim", "rotary_dim and dim name the same width; give one");
	if (pe_param_isset(p, "positions") && p->v[pe_param_index(p->def, "offset")].given)
		return pe_err_set(err, PE_EINVAL, "offset", "give positions or offset, not both");
	if (p->v[pe_param_index(p->def, "interleaved")].given && !pe_param_isset(p, "mrope_section"))
		return pe_err_set(err, PE_EINVAL, "interleaved", "interleaved is an M-RoPE parameter: give mrope_section");
	if (pe_param_isset(p, "mrope_section") && pe_param_isset(p, "positions"))
		return pe_err_set(err, PE_EINVAL, "positions",
				  "M-RoPE positions are [3, seq]: send them as a positions part (multipart/form-data)");
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
	if (pe_param_isset(p, "dim"))
		return (size_t)pe_param_int(p, "dim");
	return pe_param_isset(p, "axes_dim") ? axes_width(p) : last;
}

static int out_shape(const struct pe_params *p, const struct pe_shape *in, struct pe_shape *out, struct pe_err *err)
{
	int axis = (int)pe_param_int(p, "seq_axis");
	if (in->rank < 2 || -axis > in->rank)
		return pe_err_set(err, PE_EINVAL, "seq_axis", "seq_axis=%d is outside a rank-%d body", axis, in->rank);
	size_t last = in->dim[in->rank - 1], rd = rotary_width(p, last), seq = in->dim[in->rank + axis], n;
	if (axes_width(p) > last)
		return pe_err_set(err, PE_EINVAL, "axes_dim", "axes_dim sums to %zu channels, wider than the last axis (%zu)",
				  axes_width(p), last);
	if (rd > last)
		return pe_err_set(err, PE_EINVAL, "rotary_dim", "rotary_dim=%zu is wider than the last axis (%zu)", rd, last);
	if (rd & 1)
		return pe_err_set(err, PE_EINVAL, "rotary_dim", "the rotary width must be even, got %zu", rd);
	if (pe_param_isset(p, "axes_dim") && axes_width(p) != rd)
		return pe_err_set(err, PE_EINVAL, "axes_dim", "axes_dim sums to %zu channels; the rotary width is %zu", axes_width(p), rd);
	if (pe_param_list(p, "positions", &n) && n != seq)
		return pe_err_set(err, PE_EINVAL, "positions", "%zu positions for a sequence axis of %zu", n, seq);
	const double *sec = pe_param_list(p, "mrope_section", &n);
	if (sec && pe_mrope_sections_check(sec, n, rd / 2, (int)pe_param_int(p, "interleaved"), err) != 0)
		return PE_EINVAL;
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

static int check_last_position(const struct pe_params *p, size_t rd, int64_t last, struct pe_err *err);

static int apply(const struct pe_params *p, const struct pe_tensor_mut *x, struct pe_tensor_mut *out,
		 enum pe_dtype final_dt, struct pe_err *err)
{
	struct geometry g;
	geometry_of(p, &x->shape, &g);
	if (out->data != x->data)
		memcpy(out->data, x->data, g.outer * g.seq * g.inner * g.last * pe_dtype_size(x->dtype));
	if (pe_param_isset(p, "mrope_section"))
		return pe_err_set(err, PE_EINVAL, "positions",
				  "M-RoPE needs per-token positions [3, seq]: send x and positions as multipart/form-data");
	if (pe_param_isset(p, "axes_dim"))
		return pe_err_set(err, PE_EINVAL, "positions",
				  "axial RoPE needs ids [seq, n_axes]: send x and positions as multipart/form-data");
	if (g.seq == 0 || g.rd == 0)
		return 0;
	size_t npos, esz = pe_dtype_size(x->dtype);
	const double *list = pe_param_list(p, "positions", &npos);
	int64_t lo = pe_param_int(p, "offset"), hi = lo + (int64_t)g.seq - 1;
	for (size_t s = 0; list && s < npos; s++) {
		lo = s == 0 || (int64_t)list[s] < lo ? (int64_t)list[s] : lo;
		hi = s == 0 || (int64_t)list[s] > hi ? (int64_t)list[s] : hi;
	}
	if (g.outer * g.inner == 0) /* no vector to rotate; the positions are checked all the same */
		return check_last_position(p, g.rd, hi, err);
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

/* ---- per-token positions ---- */

struct pos_map {
	const struct pe_positions *pos;
	size_t batch, seq, rows;   /* positions [rows (3 for M-RoPE, else 1), batch, seq] */
	size_t per_batch;          /* outer indices of x per batch entry (batch 1: all of them) */
	int64_t *u;                /* the distinct positions, ascending */
	size_t nu;
	char *cs;                  /* [nu][2][rd]: cos then sin of each distinct position */
};

static int64_t pos_at(const struct pe_positions *pos, size_t i)
{
	return pos->wide ? ((const int64_t *)pos->data)[i] : ((const int32_t *)pos->data)[i];
}

/* The positions' shape against x's: [seq] / [batch, seq] (M-RoPE: [3, ...]); batch is 1 or the
 * first axis of x, which must come before seq_axis. */
static int map_shape(const struct geometry *g, const struct pe_shape *xs, int axis, int mrope,
		     struct pos_map *m, struct pe_err *err)
{
	const struct pe_shape *s = &m->pos->shape;
	int lead = mrope ? 1 : 0, r = s->rank - lead;
	if (mrope && (s->rank < 1 || s->dim[0] != 3))
		return pe_err_set(err, PE_EINVAL, "positions", "M-RoPE positions are [3, seq] or [3, batch, seq] (t, h, w rows)");
	if (r != 1 && r != 2)
		return pe_err_set(err, PE_EINVAL, "positions", "positions must be %s, got rank %d",
				  mrope ? "[3, seq] or [3, batch, seq]" : "[seq] or [batch, seq]", s->rank);
	m->rows = mrope ? 3 : 1;
	m->seq = s->dim[s->rank - 1];
	m->batch = r == 2 ? s->dim[lead] : 1;
	if (m->seq != g->seq)
		return pe_err_set(err, PE_EINVAL, "positions", "%zu positions per row for a sequence axis (seq_axis) of %zu",
				  m->seq, g->seq);
	if (r == 2 && (axis == 0 || (m->batch != 1 && m->batch != xs->dim[0])))
		return pe_err_set(err, PE_EINVAL, "positions", axis == 0 ? "[batch, seq] positions need a batch axis before seq_axis"
				  : "positions have %zu batch rows; x's first axis has %zu", m->batch, xs->dim[0]);
	m->per_batch = m->batch <= 1 ? g->outer : g->outer / m->batch; /* batch 0: x is empty */
	return 0;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* Every position in range; the distinct ones sorted into m->u. */
static int distinct_positions(struct pos_map *m, size_t count, struct pe_err *err)
{
	m->u = malloc((count ? count : 1) * sizeof *m->u);
	if (!m->u)
		return pe_err_set(err, PE_ENOMEM, "", "out of memory");
	for (size_t i = 0; i < count; i++) {
		int64_t v = pos_at(m->pos, i);
		if (v < 0 || (double)v > PE_MAX_POSITION)
			return pe_err_set(err, PE_EINVAL, "positions", "position %lld (element %zu) is outside 0 .. 2^52",
					  (long long)v, i);
		m->u[i] = v;
	}
	qsort(m->u, count, sizeof *m->u, cmp_i64);
	size_t n = 0;
	for (size_t i = 0; i < count; i++)
		if (n == 0 || m->u[i] != m->u[n - 1])
			m->u[n++] = m->u[i];
	m->nu = n;
	return 0;
}

#define RUN_MAX 4096 /* rows of one rope table */

/* The /v1/rope parameters of this request's rows: its own, at the largest position (so the
 * table's checks of its angles cover every row) and one row long; spans take their offsets. */
static int rope_params_at(const struct pe_params *p, size_t rd, int64_t last, struct pe_params *t, struct pe_err *err)
{
	char dim[32], off[32], seq_len[32];
	snprintf(dim, sizeof dim, "%zu", rd);
	snprintf(off, sizeof off, "%lld", (long long)last);
	snprintf(seq_len, sizeof seq_len, "%lld", (long long)last + 1);
	int scaling = pe_param_enum(p, "scaling");
	int reads_seq_len = scaling == PE_ROPE_DYNAMIC || scaling == PE_ROPE_LONGROPE;
	const char *const kv[] = {"dim", dim, "offset", off, "len", "1", reads_seq_len ? "seq_len" : NULL, seq_len, NULL};
	pe_params_init(t, &pe_table_rope);
	int rc = pe_params_derive(p, t, err);
	for (size_t i = 0; kv[i] && rc == 0; i += 2)
		if (!t->v[pe_param_index(t->def, kv[i])].given)
			rc = pe_params_set(t, kv[i], kv[i + 1], err);
	if (rc == 0 && (rc = pe_params_finish(t, err)) != 0 && err && !strcmp(err->param, "offset"))
		snprintf(err->param, sizeof err->param, "positions"); /* the largest position is past its range */
	return rc;
}

/* The table's own checks at the largest position, without computing a row (an empty x). */
static int check_last_position(const struct pe_params *p, size_t rd, int64_t last, struct pe_err *err)
{
	struct pe_params t;
	int rc = rope_params_at(p, rd, last, &t, err);
	pe_params_destroy(&t);
	return rc;
}

/* Rows of the distinct positions: runs of u at most four rows per position apart (and at most
 * RUN_MAX rows) each computed as one rope table would hold them (a lone position as a one-row
 * table), all through one plan (pe_rope_spans), so a position costs its row, not a table's set-up. */
static int gather_rows(const struct pe_params *p, struct pos_map *m, size_t rd, enum pe_dtype dt, struct pe_err *err)
{
	size_t esz = pe_dtype_size(dt), row = rd * esz;
	struct pe_params t;
	struct pe_rope_spans *sp = NULL;
	char *tab = NULL;
	size_t most = m->nu < RUN_MAX / 4 ? 4 * m->nu : RUN_MAX; /* the longest span a run can have */
	int rc = rope_params_at(p, rd, m->u[m->nu - 1], &t, err);
	if (rc == 0 && (m->nu > SIZE_MAX / (2 * row) || !(m->cs = malloc(m->nu * 2 * row)) ||
			!(tab = malloc(2 * most * row)) || !(sp = pe_rope_spans_new(&t, dt))))
		rc = pe_err_set(err, PE_ENOMEM, "", "out of memory");
	for (size_t i = 0; rc == 0 && i < m->nu;) {
		size_t j = i + 1;
		while (j < m->nu && (uint64_t)(m->u[j] - m->u[i]) < RUN_MAX &&
		       (uint64_t)(m->u[j] - m->u[i] + 1) <= 4 * (uint64_t)(j - i + 1))
			j++;
		size_t span = (size_t)(m->u[j - 1] - m->u[i] + 1);
		if ((rc = pe_rope_spans_rows(sp, m->u[i], span, tab, tab + span * row, err)) != 0)
			break;
		for (size_t k = i; k < j; k++) {
			size_t r = (size_t)(m->u[k] - m->u[i]);
			memcpy(m->cs + (2 * k) * row, tab + r * row, row);
			memcpy(m->cs + (2 * k + 1) * row, tab + (span + r) * row, row);
		}
		i = j;
	}
	pe_rope_spans_free(sp);
	free(tab);
	pe_params_destroy(&t);
	return rc;
}

/* Index of position v in m->u (present by construction). */
static size_t row_of(const struct pos_map *m, int64_t v)
{
	size_t lo = 0, hi = m->nu;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->u[mid] <= v)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* M-RoPE: cos/sin of one token from its three positions' rows, channel c from row chan_row[c]. */
static void gather_mrope(const struct pos_map *m, const unsigned char *chan_row, size_t rd, size_t esz, size_t b,
			 size_t s, char *cs, char *sn)
{
	const char *src[3];
	for (size_t r = 0; r < 3; r++)
		src[r] = m->cs + 2 * row_of(m, pos_at(m->pos, (r * m->batch + b) * m->seq + s)) * rd * esz;
	for (size_t c = 0; c < rd; c++) {
		const char *row = src[chan_row[c]];
		memcpy(cs + c * esz, row + c * esz, esz);
		memcpy(sn + c * esz, row + (rd + c) * esz, esz);
	}
}

/* Which of the three position rows each rotary channel follows. */
static void mrope_channels(const struct pe_params *p, size_t rd, unsigned char *chan_row)
{
	size_t n;
	const double *sec = pe_param_list(p, "mrope_section", &n);
	int interleaved = pe_param_enum(p, "layout") == 1, mi = (int)pe_param_int(p, "interleaved");
	for (size_t c = 0; c < rd; c++)
		chan_row[c] = (unsigned char)pe_mrope_row_of(sec, mi, interleaved ? c / 2 : c % (rd / 2));
}

static int rotate_tokens(const struct pe_params *p, const struct geometry *g, struct pos_map *m,
			 struct pe_tensor_mut *x, struct pe_err *err)
{
	size_t esz = pe_dtype_size(x->dtype);
	int interleaved = pe_param_enum(p, "layout") == 1, inverse = (int)pe_param_int(p, "inverse");
	unsigned char *chan_row = NULL;
	char *tmp = NULL;
	if (m->rows == 3 && (!(chan_row = malloc(g->rd)) || !(tmp = malloc(2 * g->rd * esz)))) {
		free(chan_row);
		return pe_err_set(err, PE_ENOMEM, "", "out of memory");
	}
	if (chan_row)
		mrope_channels(p, g->rd, chan_row);
	struct geometry one = *g;
	one.outer = 1;
	int rc = 0;
	for (size_t o = 0; o < g->outer && rc == 0; o++) {
		size_t b = m->batch == 1 ? 0 : o / m->per_batch;
		struct pe_tensor_mut xo = *x;
		xo.data = (char *)x->data + o * g->seq * g->inner * g->last * esz;
		for (size_t s = 0; s < g->seq; s++) {
			const char *cs, *sn;
			if (chan_row) {
				gather_mrope(m, chan_row, g->rd, esz, b, s, tmp, tmp + g->rd * esz);
				cs = tmp, sn = tmp + g->rd * esz;
			} else {
				cs = m->cs + 2 * row_of(m, pos_at(m->pos, b * m->seq + s)) * g->rd * esz;
				sn = cs + g->rd * esz;
			}
			rotate_position(&one, &xo, s, cs, sn, interleaved, inverse);
		}
		int c = o % 64 == 63 ? pe_cancelled() : 0;
		if (c)
			rc = pe_cancel_err(c, err);
	}
	free(chan_row);
	free(tmp);
	return rc;
}

int pe_rope_apply_positions(const struct pe_params *p, const struct pe_positions *pos, struct pe_tensor_mut *x,
			    struct pe_err *err)
{
	if (p->def != &pe_transform_rope_apply)
		return pe_err_set(err, PE_EINVAL, "positions", "per-token positions are for rope/apply only");
	if (x->dtype != PE_F32 && x->dtype != PE_F64)
		return pe_err_set(err, PE_EINTERNAL, "", "transforms work in f32 or f64");
	if (pe_param_isset(p, "positions"))
		return pe_err_set(err, PE_EINVAL, "positions", "positions given twice: as a query parameter and as a part");
	if (p->v[pe_param_index(p->def, "offset")].given)
		return pe_err_set(err, PE_EINVAL, "offset", "give a positions part or offset, not both");
	int rc = pe_cancelled();
	if (rc)
		return pe_cancel_err(rc, err);
	struct pe_shape os;
	if ((rc = out_shape(p, &x->shape, &os, err)) != 0)
		return rc;
	struct geometry g;
	geometry_of(p, &x->shape, &g);
	if (pe_param_isset(p, "axes_dim")) {
		struct pe_axial_geometry ag = {g.outer, g.seq, g.inner, g.last};
		return pe_axial_apply(p, pos, x, &ag, err);
	}
	struct pos_map m = {.pos = pos};
	int overflow;
	size_t count = pe_shape_count(&pos->shape, &overflow);
	int axis = x->shape.rank + (int)pe_param_int(p, "seq_axis");
	if ((rc = map_shape(&g, &x->shape, axis, pe_param_isset(p, "mrope_section"), &m, err)) != 0)
		return rc;
	if (overflow || count == 0)
		return 0;
	/* every position is checked, also when x is empty: the answer must not depend on x's size */
	if ((rc = distinct_positions(&m, count, err)) == 0 && g.rd != 0) {
		if (g.outer * g.inner == 0)
			rc = check_last_position(p, g.rd, m.u[m.nu - 1], err);
		else if ((rc = gather_rows(p, &m, g.rd, x->dtype, err)) == 0)
			rc = rotate_tokens(p, &g, &m, x, err);
	}
	free(m.u);
	free(m.cs);
	return rc;
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
