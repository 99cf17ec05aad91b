/* /v1/analysis/order: self-attention with and without a positional encoding, on X and on X with
 * its rows permuted (the study notes' "I love you" against "you love I").
 *
 * One head, identity projections, float64. X is the client's (POST) or drawn by the seeded
 * generator below (GET; tokens= picks which rows, so repeated tokens share a vector). Position i
 * is row i of the sequence, whichever token sits there. How each encoding enters:
 *   none        Q = K = V = X
 *   sinusoidal  Q = K = V = X + PE, PE the sinusoidal table
 *   rope        Q = K = R(X) (x·cos + rotate_half(x)·sin, the rope table, half layout), V = X
 *   alibi       Q = K = V = X, scores − m·|i − j| with m the one-head slope 2^−max_bias
 * scores = QKᵀ/√dim (+ bias), row softmax with the row maximum subtracted, output = softmax · V.
 * The encodings' tables come from their own table definitions through pe_table_derived with the
 * client's parameters (sinusoidal: base, variant; rope: base, scaling, factor,
 * original_max_position_embeddings; alibi/slopes: max_bias), so there is one formula of each.
 *
 * Limits (posenc/order.h) are checked in the parameters' check, before any allocation: len² and
 * len·dim. As a registered table ("analysis/order", for the CLI and the registry), the table is
 * the two attention matrices [2, len, len] (no extra value: it would compute everything again,
 * outside what a server reserves for compute); the HTTP handler (src/http/order.c) answers the
 * whole result as JSON. */
#include "posenc/order.h"
#include "core/tables.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ENC_NONE, ENC_SINUSOIDAL, ENC_ROPE, ENC_ALIBI };
static const char *const encodings[] = {"none", "sinusoidal", "rope", "alibi", NULL};
static const char *const variants[] = {"vaswani", "concat", "t2t", NULL};
static const char *const scalings[] = {"none", "linear", "ntk", "dynamic", "yarn", "llama3", NULL};
static const char *const labels[] = {"attention", "attention_permuted", NULL};

#define MAX_TOKEN 2147483647.0
#define SPLITMIX_GAMMA 0x9E3779B97F4A7C15ull
#define TWO_PI 6.283185307179586

static const struct pe_param_spec order_params[] = {
	{"encoding", PE_PT_ENUM, "none", 0, 0, encodings, "positional encoding: none, sinusoidal, rope, alibi"},
	{"len", PE_PT_INT, "8", 1, PE_MAX_LEN, NULL, "tokens (rows of X); len^2 <= 262144"},
	{"dim", PE_PT_INT, "16", 1, PE_MAX_DIM, NULL, "embedding width (columns of X); len*dim <= 262144"},
	{"perm", PE_PT_LIST, "", 0, PE_MAX_LEN, PE_LIST_INTEGERS, "a permutation of 0..len-1 (default reversed)"},
	{"seed", PE_PT_INT, "0", 0, PE_MAX_POSITION, NULL, "seed of the standard-normal generator of X"},
	{"tokens", PE_PT_LIST, "", 0, MAX_TOKEN, PE_LIST_INTEGERS, "token ids: row i of X is the generator's row tokens[i]"},
	{"base", PE_PT_REAL, "", 1e-300, 1e300, NULL, "sinusoidal, rope: wavelength base (default 10000)"},
	{"variant", PE_PT_ENUM, "", 0, 0, variants, "sinusoidal: column layout"},
	{"scaling", PE_PT_ENUM, "", 0, 0, scalings, "rope: frequency scaling"},
	{"factor", PE_PT_REAL, "", 1e-300, 1e300, NULL, "rope: scaling factor"},
	{"original_max_position_embeddings", PE_PT_INT, "", 1, PE_MAX_LEN, NULL, "rope: pre-scaling context length"},
	{"max_bias", PE_PT_REAL, "", 0, 64, NULL, "alibi: the one head's slope is 2^-max_bias (default 8)"},
};

/* ---- the generator ---- */

static uint64_t splitmix_next(uint64_t *s)
{
	uint64_t z = (*s += SPLITMIX_GAMMA);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static double uniform_open(uint64_t *s) { return ((double)(splitmix_next(s) >> 12) + 0.5) * 0x1p-52; }

static void draw_row(uint64_t seed, uint64_t token, size_t dim, double *x)
{
	uint64_t s = seed + token * (SPLITMIX_GAMMA << 32); /* mod 2^64: output number token·2^32 */
	for (size_t c = 0; c < dim; c += 2) {
		double u1 = uniform_open(&s), u2 = uniform_open(&s);
		double r = sqrt(-2.0 * log(u1)), a = TWO_PI * u2;
		x[c] = r * cos(a);
		if (c + 1 < dim)
			x[c + 1] = r * sin(a);
	}
}

void pe_order_draw(uint64_t seed, const double *tokens, size_t n, size_t dim, double *x)
{
	for (size_t k = 0; k < n; k++)
		draw_row(seed, tokens ? (uint64_t)tokens[k] : (uint64_t)k, dim, x + k * dim);
}

/* ---- parameters ---- */

static const struct pe_table_def *encoding_def(int enc)
{
	return enc == ENC_SINUSOIDAL ? &pe_table_sinusoidal : enc == ENC_ROPE ? &pe_table_rope
			: enc == ENC_ALIBI ? &pe_table_alibi_slopes : NULL;
}

/* The name, value pairs the encoding's table needs beyond what the client gave (kv of
 * pe_table_derived); buf holds the numbers. */
static void encoding_kv(const struct pe_params *p, int enc, char buf[2][24], const char *kv[5])
{
	snprintf(buf[0], 24, "%lld", (long long)pe_param_int(p, "len"));
	snprintf(buf[1], 24, "%lld", (long long)pe_param_int(p, "dim"));
	if (enc == ENC_ALIBI) {
		kv[0] = "heads", kv[1] = "1", kv[2] = NULL;
		return;
	}
	kv[0] = "len", kv[1] = buf[0], kv[2] = "dim", kv[3] = buf[1], kv[4] = NULL;
}

/* Which encoding each optional parameter belongs to (bit per encoding). */
static const struct {
	const char *name;
	unsigned encs;
} owners[] = {
	{"base", 1u << ENC_SINUSOIDAL | 1u << ENC_ROPE},
	{"variant", 1u << ENC_SINUSOIDAL},
	{"scaling", 1u << ENC_ROPE},
	{"factor", 1u << ENC_ROPE},
	{"original_max_position_embeddings", 1u << ENC_ROPE},
	{"max_bias", 1u << ENC_ALIBI},
};

static int check_owners(const struct pe_params *p, int enc, struct pe_err *err)
{
	for (size_t i = 0; i < sizeof owners / sizeof owners[0]; i++)
		if (pe_param_isset(p, owners[i].name) && !(owners[i].encs >> enc & 1))
			return pe_err_set(err, PE_EINVAL, owners[i].name, "%s does not apply to encoding=%s",
					  owners[i].name, encodings[enc]);
	return 0;
}

/* The encoding's own checks now, so that an error names its parameter (dim odd for rope, ...). */
static int check_encoding(const struct pe_params *p, int enc, struct pe_err *err)
{
	const struct pe_table_def *def = encoding_def(enc);
	if (!def)
		return 0;
	char buf[2][24];
	const char *kv[5];
	struct pe_params t;
	encoding_kv(p, enc, buf, kv);
	pe_params_init(&t, def);
	int rc = pe_params_derive(p, &t, err);
	for (size_t i = 0; kv[i] && rc == 0; i += 2)
		if (!t.v[pe_param_index(def, kv[i])].given)
			rc = pe_params_set(&t, kv[i], kv[i + 1], err);
	if (rc == 0)
		rc = pe_params_finish(&t, err);
	pe_params_destroy(&t);
	return rc;
}

static void set_int(struct pe_params *p, const char *name, int64_t v)
{
	struct pe_param_val *pv = &p->v[pe_param_index(p->def, name)];
	pv->i = v;
	pv->r = (double)v;
}

/* tokens sets len (a len given too must agree). */
static int check_tokens(struct pe_params *p, struct pe_err *err)
{
	size_t n;
	const double *t = pe_param_list(p, "tokens", &n);
	if (!t)
		return 0;
	if (p->v[pe_param_index(p->def, "len")].given && (size_t)pe_param_int(p, "len") != n)
		return pe_err_set(err, PE_EINVAL, "tokens", "tokens has %zu ids but len=%lld", n,
				  (long long)pe_param_int(p, "len"));
	set_int(p, "len", (int64_t)n);
	return 0;
}

static int check_limits(const struct pe_params *p, struct pe_err *err)
{
	double len = (double)pe_param_int(p, "len"), dim = (double)pe_param_int(p, "dim");
	const char *lp = pe_param_isset(p, "tokens") && !p->v[pe_param_index(p->def, "len")].given ? "tokens" : "len";
	if (len * len > PE_ORDER_MAX_LEN2)
		return pe_err_set(err, PE_ETOOBIG, lp, "%s: len^2 is %.0f; the limit is %.0f (len <= 512)", lp, len * len,
				  PE_ORDER_MAX_LEN2);
	if (len * dim > PE_ORDER_MAX_CELLS)
		return pe_err_set(err, PE_ETOOBIG, "dim", "dim: len*dim is %.0f; the limit is %.0f", len * dim,
				  PE_ORDER_MAX_CELLS);
	return 0;
}

static int check_perm(const struct pe_params *p, struct pe_err *err)
{
	size_t n, len = (size_t)pe_param_int(p, "len");
	const double *v = pe_param_list(p, "perm", &n);
	unsigned char seen[512] = {0}; /* len <= 512 (check_limits) */
	if (!v)
		return 0;
	if (n != len)
		return pe_err_set(err, PE_EINVAL, "perm", "perm has %zu entries; it must be a permutation of 0..%zu", n,
				  len - 1);
	for (size_t i = 0; i < n; i++) {
		if (v[i] >= (double)len || seen[(size_t)v[i]])
			return pe_err_set(err, PE_EINVAL, "perm", "perm must be a permutation of 0..%zu: %.0f is %s", len - 1,
					  v[i], v[i] >= (double)len ? "out of range" : "repeated");
		seen[(size_t)v[i]] = 1;
	}
	return 0;
}

static int order_check(struct pe_params *p, struct pe_err *err)
{
	int enc = pe_param_enum(p, "encoding"), rc;
	if ((rc = check_tokens(p, err)) != 0 || (rc = check_limits(p, err)) != 0 || (rc = check_perm(p, err)) != 0 ||
	    (rc = check_owners(p, enc, err)) != 0)
		return rc;
	return check_encoding(p, enc, err);
}

/* ---- attention ---- */

struct work {
	size_t len, dim;
	int enc;
	const double *table; /* sinusoidal [len, dim]; rope [2, len, dim] (cos, sin) */
	double slope;        /* alibi */
	double *tmp;         /* [len, dim]: X + PE or R(X) */
};

/* Q (= K) and V of the sequence y. */
static void project(const struct work *w, const double *y, const double **qk, const double **v)
{
	size_t n = w->len * w->dim, h = w->dim / 2;
	*qk = *v = y;
	if (w->enc == ENC_SINUSOIDAL) {
		for (size_t i = 0; i < n; i++)
			w->tmp[i] = y[i] + w->table[i];
		*qk = *v = w->tmp;
	} else if (w->enc == ENC_ROPE) {
		const double *cs = w->table, *sn = w->table + n;
		for (size_t i = 0; i < n; i++) {
			size_t c = i % w->dim;
			double rot = c < h ? -y[i + h] : y[i - h];
			w->tmp[i] = y[i] * cs[i] + rot * sn[i];
		}
		*qk = w->tmp;
	}
}

/* a [len, len] and out [len, dim] for the sequence y; cancellable between rows. */
static int attend(const struct work *w, const double *y, double *a, double *out, struct pe_err *err)
{
	size_t len = w->len, dim = w->dim;
	const double *qk, *v;
	double scale = 1.0 / sqrt((double)dim);
	project(w, y, &qk, &v);
	for (size_t i = 0; i < len; i++) {
		int rc = pe_cancelled();
		if (rc)
			return pe_cancel_err(rc, err);
		double *row = a + i * len, mx = -INFINITY, sum = 0;
		for (size_t j = 0; j < len; j++) {
			double s = 0;
			for (size_t c = 0; c < dim; c++)
				s += qk[i * dim + c] * qk[j * dim + c];
			row[j] = s * scale;
			if (w->enc == ENC_ALIBI)
				row[j] -= w->slope * fabs((double)i - (double)j);
			mx = row[j] > mx ? row[j] : mx;
		}
		for (size_t j = 0; j < len; j++)
			sum += row[j] = exp(row[j] - mx);
		for (size_t j = 0; j < len; j++)
			row[j] /= sum;
		double *o = out + i * dim;
		memset(o, 0, dim * sizeof *o);
		for (size_t j = 0; j < len; j++)
			for (size_t c = 0; c < dim; c++)
				o[c] += row[j] * v[j * dim + c];
	}
	return 0;
}

uint64_t pe_order_bytes(uint64_t len, uint64_t dim)
{
	/* results 2·len² + 2·len·dim; X, perm(X), tmp; the encoding's table (rope: 2·len·dim); perm */
	return (2 * len * len + 7 * len * dim + len) * sizeof(double) + 64;
}

static void perm_of(const struct pe_params *p, size_t len, size_t *perm)
{
	size_t n;
	const double *v = pe_param_list(p, "perm", &n);
	for (size_t i = 0; i < len; i++)
		perm[i] = v ? (size_t)v[i] : len - 1 - i;
}

/* The encoding's table (and alibi's slope) into w; 0 or an error. */
static int load_encoding(const struct pe_params *p, struct work *w, double **table, struct pe_err *err)
{
	const struct pe_table_def *def = encoding_def(w->enc);
	char buf[2][24];
	const char *kv[5];
	size_t count;
	*table = NULL;
	if (!def)
		return 0;
	encoding_kv(p, w->enc, buf, kv);
	if (!(*table = pe_table_derived(p, def, kv, PE_F64, &count, err)))
		return err && err->code ? err->code : PE_ENOMEM;
	w->table = *table;
	w->slope = w->enc == ENC_ALIBI ? (*table)[0] : 0;
	return 0;
}

static double max_difference(const double *out, const double *outp, const size_t *perm, size_t len, size_t dim)
{
	double d = 0;
	for (size_t i = 0; i < len; i++)
		for (size_t c = 0; c < dim; c++) {
			double e = fabs(outp[i * dim + c] - out[perm[i] * dim + c]);
			d = e > d || e != e ? e : d;
		}
	return d;
}

static int all_finite(const double *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isfinite(v[i]))
			return 0;
	return 1;
}

int pe_order_compute(const struct pe_params *p, const double *x, struct pe_order_result *r, struct pe_err *err)
{
	size_t len = (size_t)pe_param_int(p, "len"), dim = (size_t)pe_param_int(p, "dim"), nx = len * dim, nt;
	struct work w = {.len = len, .dim = dim, .enc = pe_param_enum(p, "encoding")};
	double *table = NULL;
	memset(r, 0, sizeof *r);
	size_t *perm = malloc(len * sizeof *perm);
	double *b = malloc((2 * len * len + 5 * nx) * sizeof *b);
	int rc = 0;
	if (!perm || !b) {
		rc = pe_err_set(err, PE_ENOMEM, "", "out of memory");
		goto out;
	}
	r->len = len, r->dim = dim, r->block = b;
	r->attention = b, r->attention_permuted = b + len * len;
	r->output = b + 2 * len * len, r->output_permuted = r->output + nx;
	double *xs = r->output_permuted + nx, *xp = xs + nx;
	w.tmp = xp + nx;
	if (x)
		memcpy(xs, x, nx * sizeof *xs);
	else
		pe_order_draw((uint64_t)pe_param_int(p, "seed"), pe_param_list(p, "tokens", &nt), len, dim, xs);
	perm_of(p, len, perm);
	for (size_t i = 0; i < len; i++)
		memcpy(xp + i * dim, xs + perm[i] * dim, dim * sizeof *xp);
	if ((rc = load_encoding(p, &w, &table, err)) != 0 || (rc = attend(&w, xs, r->attention, r->output, err)) != 0 ||
	    (rc = attend(&w, xp, r->attention_permuted, r->output_permuted, err)) != 0)
		goto out;
	if (!all_finite(r->attention, 2 * len * len + 2 * nx)) {
		rc = pe_err_set(err, PE_EINVAL, "body", "the attention scores overflow: X's values are too large");
		goto out;
	}
	r->output_difference = max_difference(r->output, r->output_permuted, perm, len, dim);
	r->equivariant = r->output_difference <= PE_ORDER_EQUIVARIANT_TOL;
out:
	free(table);
	free(perm);
	if (rc != 0)
		pe_order_result_destroy(r);
	return rc;
}

void pe_order_result_destroy(struct pe_order_result *r)
{
	free(r->block);
	memset(r, 0, sizeof *r);
}

/* ---- as a registered table: the two attention matrices ---- */

static int order_shape(const struct pe_params *p, struct pe_shape *s)
{
	s->rank = 3;
	s->dim[0] = 2;
	s->dim[1] = s->dim[2] = (size_t)pe_param_int(p, "len");
	return 0;
}

static int order_compute(const struct pe_params *p, enum pe_dtype dt, void *out, struct pe_err *err)
{
	struct pe_order_result r;
	int rc = pe_order_compute(p, NULL, &r, err);
	if (rc != 0)
		return rc;
	pe_store_f64(dt, out, r.attention, 2 * r.len * r.len); /* attention_permuted follows it */
	pe_order_result_destroy(&r);
	return 0;
}

static int order_cost(const struct pe_params *p, struct pe_cost *c)
{
	uint64_t len = (uint64_t)pe_param_int(p, "len"), dim = (uint64_t)pe_param_int(p, "dim");
	c->intermediate = 2 * len * dim; /* rope's table */
	c->intermediate_param = "dim";
	c->work = 2 * (2 * len * len * dim + len * dim); /* both sequences: scores, output, projection */
	c->work_param = "len";
	c->scratch_bytes = pe_order_bytes(len, dim);
	return 0;
}

const struct pe_table_def pe_table_analysis_order = {
	.name = "analysis/order",
	.summary = "Self-attention on X and on X permuted, with and without a positional encoding",
	.params = order_params,
	.nparams = sizeof order_params / sizeof order_params[0],
	.fixed_dtype = PE_DTYPE_COUNT_,
	.check = order_check,
	.shape = order_shape,
	.compute = order_compute,
	.cost = order_cost,
	.panel_labels = labels,
};
