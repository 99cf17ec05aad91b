/* /v1/analysis/order: self-attention on X and on X permuted, with and without a positional
 * encoding (src/core/order.c), answered as one JSON document: attention, attention_permuted,
 * output, output_permuted, output_difference, equivariant.
 *
 * GET draws X from the seeded generator: the answer depends on the query only, so it goes the
 * cached way of every table (produce.c: ETag, 304, single flight, the job on the pool). POST
 * takes X as an npy body [len, dim] (f64 or f32; len and dim, when given, must agree with it) and
 * runs as an uncached job like a transform (oneshot.c: waiter, suspend, answer on resume).
 *
 * Memory: what the core allocates (pe_order_bytes: X and its permutation, the encoding's table,
 * the two attention matrices and outputs) is reserved on the response budget around the
 * computation, the JSON text as it grows (pe_buf with the budget). Before a job exists the most
 * it can hold at once is added up; past the whole budget that is a 413 naming len, without work.
 * The parameters' own limits (len², len·dim) are the core's check.
 *
 * A GET with an output parameter (format=, dtype=, cmap=, scale=) is answered as the registered
 * table analysis/order, the attention pair [2, len, len], by table.c like every table (the
 * dashboard's Tables view and format=png/npy). */
#include "http/handler.h"
#include "http/oneshot.h"
#include "http/produce.h"
#include "posenc/order.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATH "/v1/analysis/order"
#define HEAD_BYTES 4096
/* The largest body that can hold a valid X: PE_ORDER_MAX_CELLS float64 values after the longest
 * npy header the reader accepts. A bigger body is refused as it arrives, not read whole (up to
 * max_body_bytes) to fail the npy parse. */
static uint64_t body_limit(const struct pe_http *h)
{
	uint64_t most = (uint64_t)PE_ORDER_MAX_CELLS * 8 + pe_npy_header_max();
	return h->opt.max_body_bytes < most ? h->opt.max_body_bytes : most;
}

static const struct pe_table_def *order_def(void) { return pe_table_find("analysis/order"); }

/* ---- the answer ---- */

static int put_matrix(struct pe_buf *b, const char *name, const double *v, size_t rows, size_t cols)
{
	char num[PE_NUM_MAX];
	int rc = pe_buf_printf(b, ",\"%s\":[", name);
	for (size_t i = 0; i < rows && rc == 0; i++) {
		rc = pe_buf_puts(b, i ? ",[" : "[");
		for (size_t c = 0; c < cols && rc == 0; c++) {
			size_t n = pe_fmt_f64(v[i * cols + c], num);
			rc = c ? pe_buf_append(b, ",", 1) : 0;
			if (rc == 0)
				rc = pe_buf_append(b, num, n);
		}
		if (rc == 0)
			rc = pe_buf_append(b, "]", 1);
	}
	return rc == 0 ? pe_buf_append(b, "]", 1) : rc;
}

static int put_document(struct pe_buf *b, const struct pe_params *p, const struct pe_order_result *r)
{
	char num[PE_NUM_MAX];
	size_t n, len = r->len;
	const double *perm = pe_param_list(p, "perm", &n);
	int rc = pe_buf_puts(b, "{\"encoding\":\"");
	if (rc == 0)
		rc = pe_buf_printf(b, "%s\",\"params\":", order_def()->params[0].choices[pe_param_enum(p, "encoding")]);
	if (rc == 0)
		rc = pe_json_write_params(b, p);
	if (rc == 0)
		rc = pe_buf_printf(b, ",\"len\":%zu,\"dim\":%zu,\"perm\":[", len, r->dim);
	for (size_t i = 0; i < len && rc == 0; i++)
		rc = pe_buf_printf(b, "%s%zu", i ? "," : "", perm ? (size_t)perm[i] : len - 1 - i);
	if (rc == 0)
		rc = pe_buf_append(b, "]", 1);
	if (rc == 0)
		rc = put_matrix(b, "attention", r->attention, len, len);
	if (rc == 0)
		rc = put_matrix(b, "attention_permuted", r->attention_permuted, len, len);
	if (rc == 0)
		rc = put_matrix(b, "output", r->output, len, r->dim);
	if (rc == 0)
		rc = put_matrix(b, "output_permuted", r->output_permuted, len, r->dim);
	if (rc == 0) {
		num[pe_fmt_f64(r->output_difference, num)] = 0;
		rc = pe_buf_printf(b, ",\"output_difference\":%s,\"equivariant\":%s}\n", num,
				   r->equivariant ? "true" : "false");
	}
	return rc;
}

/* The most the answer's text takes. */
static uint64_t text_bound(uint64_t len, uint64_t dim, size_t keylen)
{
	uint64_t nums = 2 * len * len + 2 * len * dim;
	return nums * pe_fmt_width(PE_F64) + 8 * len + 12 * len + 2 * keylen + HEAD_BYTES;
}

/* The most a job holds at once: the core's arrays (and a POST's float64 X) with the answer. */
static uint64_t job_need(const struct pe_params *p, size_t keylen, uint64_t extra)
{
	uint64_t len = (uint64_t)pe_param_int(p, "len"), dim = (uint64_t)pe_param_int(p, "dim");
	return pe_produce_add(pe_produce_add(pe_order_bytes(len, dim), text_bound(len, dim, keylen)), extra);
}

/* The analysis' work (pe_table_cost) against max_analysis_cost, as for every analysis (table.c). */
static int check_cost(const struct pe_http *h, const struct pe_params *p, const char *param, struct pe_err *err)
{
	struct pe_cost c;
	if (pe_table_cost(p, &c) != 0)
		return pe_err_set(err, PE_EINTERNAL, "", "cannot size this analysis");
	if (c.work > h->opt.max_analysis_cost)
		return pe_err_set(err, PE_ETOOBIG, param, "this would cost %" PRIu64 " multiply-adds; max_analysis_cost is %" PRIu64,
				  c.work, h->opt.max_analysis_cost);
	return 0;
}

/* Compute (X, or the generator's) and write the document into out, the core's arrays reserved on
 * out's budget (the job's share, when it has one) while they live. */
static int answer(const struct pe_params *p, const double *x, struct pe_buf *out, struct pe_err *err)
{
	size_t scratch = (size_t)pe_order_bytes((uint64_t)pe_param_int(p, "len"), (uint64_t)pe_param_int(p, "dim"));
	struct pe_order_result r;
	int rc = pe_budget_take(out->budget, scratch);
	if (rc != 0)
		return pe_err_set(err, rc, "", "the response memory budget is full; retry shortly");
	if ((rc = pe_order_compute(p, x, &r, err)) == 0) {
		if ((rc = put_document(out, p, &r)) != 0)
			pe_err_set(err, rc, "", rc == PE_EBUSY ? "the response memory budget is full; retry shortly"
							       : "the answer would exceed the size limit");
		pe_order_result_destroy(&r);
	}
	pe_budget_give(out->budget, scratch);
	return rc;
}

/* ---- GET: the cached way ---- */

struct job {
	struct pe_params params;
	uint64_t need; /* the most it holds on the budget at once (job_need): its share */
};

struct miss {
	struct pe_http *h;
	struct pe_params *params;
	size_t keylen;
};

static void *job_new_cb(void *ctx, struct pe_err *err)
{
	struct miss *m = ctx;
	uint64_t need = job_need(m->params, m->keylen, 0);
	if (pe_produce_budget_check(m->h, need, "len", err) != 0)
		return NULL;
	struct job *j = malloc(sizeof *j);
	if (!j)
		return NULL;
	*j = (struct job){.params = *m->params, .need = need};
	memset(m->params, 0, sizeof *m->params); /* the job owns the list allocations now */
	return j;
}

static int produce_cb(void *arg, struct pe_buf *out, struct pe_body_info *info, struct pe_err *err)
{
	struct job *j = arg;
	int rc = answer(&j->params, NULL, out, err);
	if (rc == 0)
		snprintf(info->shape, sizeof info->shape, "%lld,%lld", (long long)pe_param_int(&j->params, "len"),
			 (long long)pe_param_int(&j->params, "dim"));
	return rc;
}

static uint64_t need_cb(void *arg) { return ((struct job *)arg)->need; }

static void job_free_cb(void *arg)
{
	struct job *j = arg;
	pe_params_destroy(&j->params);
	free(j);
}

static void failure_cb(int code, struct pe_err *err)
{
	pe_err_set(err, code, "", "%s",
		   code == PE_EBUSY	? "the job queue or the response memory budget is full; retry shortly"
		   : code == PE_ETIMEOUT ? "the computation was stopped at job_timeout"
		   : code == PE_EDRAINING ? "the service is shutting down"
					  : "the computation failed");
}

static const struct pe_producer producer = {
	.cache_control = "public, max-age=31536000, immutable",
	.job_new_cb = job_new_cb,
	.produce_cb = produce_cb,
	.job_free_cb = job_free_cb,
	.need_cb = need_cb,
	.failure_cb = failure_cb,
};

#define KEY_MAX (PE_MAX_LIST * 2 * 26 + 4096) /* perm and tokens at their longest */

static enum MHD_Result serve_get(struct req *r, struct MHD_Connection *conn)
{
	struct pe_err err = {0};
	struct pe_params *p = &pe_contract_query(r)->params; /* the job takes its lists over on a miss */
	enum MHD_Result ret;
	char *key = malloc(KEY_MAX);
	int n = -1;
	if (!key)
		pe_err_set(&err, PE_ENOMEM, "", "out of memory");
	else if (check_cost(r->h, p, "len", &err) == 0) {
		n = snprintf(key, KEY_MAX, "v1/analysis/order?");
		int c = pe_params_canonical(p, key + n, KEY_MAX - (size_t)n - 8);
		n = c < 0 ? -1 : n + c + snprintf(key + n + c, 8, "|order");
		if (n < 0)
			pe_err_set(&err, PE_EINTERNAL, "", "cannot form the cache key");
	}
	if (n < 0) {
		ret = pe_http_problem(r, conn, &err);
	} else {
		struct pe_out o = {.fmt = PE_FMT_JSON, .dt = PE_F64};
		struct miss m = {.h = r->h, .params = p, .keylen = (size_t)n};
		ret = pe_produce_answer(r, conn, &producer, &o, key, (size_t)n, &m);
	}
	free(key);
	return ret;
}

/* ---- POST: X in the body ---- */

struct pjob {
	struct pe_oneshot os; /* first: the job as oneshot.c runs it */
	struct pe_params params;
	struct pe_held_body body; /* held on the response budget (pe_http_take_body) */
};

/* X's shape sets len and dim (a value given in the query must agree); then the parameters'
 * own checks, limits included. */
static int take_shape(struct pe_params *p, const struct pe_shape *s, struct pe_err *err)
{
	static const char *const names[] = {"len", "dim"};
	if (s->rank != 2)
		return pe_err_set(err, PE_EBODY, "body", "X must be a 2-D array [len, dim]");
	if ((double)s->dim[0] * (double)s->dim[0] > PE_ORDER_MAX_LEN2 ||
	    (double)s->dim[0] * (double)s->dim[1] > PE_ORDER_MAX_CELLS)
		return pe_err_set(err, PE_ETOOBIG, "body", "X is [%zu, %zu]: len^2 and len*dim must be at most %.0f",
				  s->dim[0], s->dim[1], PE_ORDER_MAX_CELLS);
	for (int k = 0; k < 2; k++) {
		char v[24];
		if (p->v[pe_param_index(p->def, names[k])].given) {
			if ((size_t)pe_param_int(p, names[k]) != s->dim[k])
				return pe_err_set(err, PE_EBODY, "body", "X has %s %zu but %s=%lld", names[k], s->dim[k],
						  names[k], (long long)pe_param_int(p, names[k]));
			continue;
		}
		snprintf(v, sizeof v, "%zu", s->dim[k]);
		int rc = pe_params_set(p, names[k], v, err);
		if (rc != 0)
			return rc;
	}
	return pe_params_finish(p, err);
}

/* X as float64 (f64 or f32 elements, any alignment), finite. */
static int to_f64(const struct pe_tensor_view *v, size_t n, double *x, struct pe_err *err)
{
	const char *d = v->data;
	for (size_t i = 0; i < n; i++) {
		if (v->dtype == PE_F64)
			memcpy(&x[i], d + 8 * i, 8);
		else {
			float f;
			memcpy(&f, d + 4 * i, 4);
			x[i] = f;
		}
		if (!(x[i] - x[i] == 0))
			return pe_err_set(err, PE_EBODY, "body", "X[%zu][%zu] is not finite", i / v->shape.dim[1],
					  i % v->shape.dim[1]);
	}
	return 0;
}

static void run_post(struct pe_oneshot *os, struct pe_oneshot_result *res)
{
	struct pjob *j = (struct pjob *)os;
	struct pe_err *err = &res->err;
	struct pe_tensor_view v;
	struct pe_buf out;
	struct pe_budget *bg = NULL; /* the job's share (pe_produce_share_open) */
	double *x = NULL;
	int rc, of;
	pe_buf_init(&out, j->os.h->opt.max_response_bytes);
	if ((rc = pe_npy_parse(j->body.data, j->body.len, (size_t)PE_ORDER_MAX_CELLS, &v, err)) != 0)
		goto done;
	if (v.dtype != PE_F64 && v.dtype != PE_F32) {
		rc = pe_err_set(err, PE_EBODY, "body", "X must be float64 or float32");
		goto done;
	}
	if ((rc = take_shape(&j->params, &v.shape, err)) != 0 || (rc = check_cost(j->os.h, &j->params, "body", err)) != 0)
		goto done;
	j->params.v[pe_param_index(j->params.def, "seed")].set = 0; /* X is the body's: no seed in the answer's params */
	size_t n = pe_shape_count(&v.shape, &of);
	size_t body = pe_http_body_figure(&j->body); /* as the budget may hold it (pe_http_take_body) */
	uint64_t need = job_need(&j->params, 0, pe_produce_add(body, n * 8));
	if ((rc = pe_produce_budget_check(j->os.h, need, "body", err)) != 0 ||
	    (rc = pe_produce_share_open(j->os.h, need - body, &bg, err)) != 0) /* the body is held already */
		goto done;
	pe_produce_answer_buf(j->os.h, &out, bg);
	if (!(x = pe_budget_malloc(bg, (n ? n : 1) * sizeof *x, &rc))) {
		pe_err_set(err, rc, "", "the response memory budget is full; retry shortly");
		goto done;
	}
	if ((rc = to_f64(&v, n, x, err)) != 0 || (rc = answer(&j->params, x, &out, err)) != 0)
		goto done;
	res->data = pe_buf_steal(&out, &res->len);
	res->budget = j->os.h->opt.budget;
	res->held = bg ? pe_mem_size(res->data) : 0;
	pe_budget_share_hand_over(bg, res->held); /* the answer outlives the share */
done:
	if (rc != 0 && !err->code)
		pe_err_set(err, rc, "", "the computation failed");
	pe_budget_free_block(bg, x);
	pe_buf_destroy(&out);
	pe_budget_share_close(bg);
}

static void pjob_free(struct pe_oneshot *os)
{
	struct pjob *j = (struct pjob *)os;
	pe_params_destroy(&j->params);
	pe_http_release_body(&j->body);
	free(j);
}

static const struct pe_oneshot_answer post_answer = {
	.noun = "the computation", .content_type = "application/json", .failure = failure_cb};

/* The query of a POST: no generator parameters (X is the body's). */
static int post_params(const struct pe_params *p, struct pe_err *err)
{
	static const char *const gen_only[] = {"seed", "tokens"};
	int rc = 0;
	for (size_t i = 0; i < 2 && rc == 0; i++)
		if (p->v[pe_param_index(p->def, gen_only[i])].given)
			rc = pe_err_set(err, PE_EINVAL, gen_only[i], "%s draws X for a GET; a POST brings X in its body",
					gen_only[i]);
	return rc;
}

static enum MHD_Result serve_post(struct req *r, struct MHD_Connection *conn)
{
	struct pe_err err = {0};
	struct pe_params *p = &pe_contract_query(r)->params;
	if (post_params(p, &err) != 0)
		return pe_http_problem(r, conn, &err);
	struct pjob *j = calloc(1, sizeof *j);
	if (!j)
		return MHD_NO;
	j->os.h = r->h;
	pe_contract_take_params(r, &j->params);
	pe_http_take_body(r, &j->body);
	j->os.run = run_post;
	j->os.free = pjob_free;
	return pe_oneshot_start(r, conn, &j->os, &post_answer);
}

/* ---- the handler ---- */

/* GET: the parameters (X from the seeded generator) and, to ask for the registered table, the
 * output options; POST: X as an npy body, at most the largest X's npy (or max_body_bytes), whose
 * shape completes the parameters (take_shape). */
static const struct pe_contract contract[] = {
	{.methods = "GET, HEAD", .target_params = 1, .output = 1, .finish = 1},
	{.methods = "POST", .target_params = 1, .media = "application/x-npy", .body_limit_cb = body_limit,
	 .limit_name = "the largest X as npy, or max_body_bytes"},
	{0},
};

/* A GET with format= (or dtype=, cmap=, scale=) asks for the registered table, the attention pair
 * [2, len, len], in any table format (table.c); without, the whole analysis as JSON. */
static int wants_table(struct req *r)
{
	const struct pe_out_query *o = &pe_contract_query(r)->out;
	return o->format || o->dtype || o->cmap || o->scale;
}

static enum MHD_Result finish_cb(struct req *r, struct MHD_Connection *conn)
{
	if (atomic_load(&r->h->draining)) {
		struct pe_err err = {0};
		pe_err_set(&err, PE_EDRAINING, "", "the service is shutting down");
		return pe_http_problem(r, conn, &err);
	}
	if (!strcmp(r->method, "POST"))
		return serve_post(r, conn);
	return wants_table(r) ? pe_table_request(r, conn, r->target) : serve_get(r, conn);
}

static int match_cb(void *hctx, const char *url, const void **target)
{
	if (strcmp(url, PATH) != 0)
		return -1;
	const struct pe_table_def *def = order_def();
	if (!def)
		return -1;
	*target = def;
	return pe_http_def_route(def);
}

const struct pe_handler pe_order_handler = {
	.name = "order",
	.match_cb = match_cb,
	.cors_methods = "GET, HEAD, POST, OPTIONS",
	.contract = contract,
	.finish_cb = finish_cb,
};
