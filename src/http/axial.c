/* /v1/rope/axial: GET is the registry's table (a preset's grid in the query), answered by table.c
 * like any table; POST takes the ids in the body instead, an npy [S, n_axes] of floats or integers
 * (int32, int64, f16, bf16, f32, f64; fractional and negative allowed), and answers the
 * [2, S, sum(axes_dim)] table of those ids (pe_axial_body_def: the table's parameters without the
 * grid's). /v1/rope/axial/positions needs nothing here.
 *
 * The POST body is refused before it is read when its type is not application/x-npy or its
 * Content-Length is over max_body_bytes (its declaration, contract.h). The work runs on a worker as
 * an uncached job (oneshot.c): the body's shape is checked, the table (S * sum(axes_dim) * 2)
 * against max_elements and it, the ids as doubles and the answer against the response budget
 * before anything is allocated, then the ids' values. Answers depend on the body: not cached. */
#include "core/axial.h"
#include "http/handler.h"
#include "http/oneshot.h"
#include "http/produce.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATH "/v1/rope/axial"
#define OFFERED (PE_FMT_BIT(PE_FMT_JSON) | PE_FMT_BIT(PE_FMT_NPY) | PE_FMT_BIT(PE_FMT_BIN) | PE_FMT_BIT(PE_FMT_CSV))

struct ajob {
	struct pe_oneshot os; /* first: the job as oneshot.c runs it */
	struct pe_params params;
	struct pe_out out;
	struct pe_held_body body; /* held on the response budget (pe_http_take_body) */
};

static int is_post(const struct req *r) { return !strcmp(r->method, "POST"); }

/* The grid's parameters: known to the route, refused by a POST (the body gives the ids). */
static const struct pe_param_spec grid_specs[] = {PE_AXIAL_GRID_PARAMS};
static const struct pe_table_def grid_params = {.name = "rope/axial", .params = grid_specs,
						.nparams = sizeof grid_specs / sizeof grid_specs[0],
						.fixed_dtype = PE_DTYPE_COUNT_};

static const struct pe_contract contract[] = {
	{.methods = "GET, HEAD", .target_params = 1, .output = 1, .finish = 1},
	{.methods = "POST", .params = &pe_axial_body_def, .output = 1, .extras = &grid_params, .media = "application/x-npy"},
	{0},
};

/* ---- the job (worker) ---- */

/* The body's ids tensor: [S, n_axes], S >= 1, 1 .. PE_AXIAL_MAX_AXES axes. */
static int ids_view(struct ajob *j, struct pe_tensor_view *v, int *wide, struct pe_err *err)
{
	int rc = pe_npy_parse_index(j->body.data, j->body.len, j->os.h->opt.max_elements, v, wide, err);
	if (rc != 0)
		return rc;
	if (v->shape.rank != 2 || v->shape.dim[0] == 0 || v->shape.dim[1] == 0 || v->shape.dim[1] > PE_AXIAL_MAX_AXES)
		return pe_err_set(err, PE_EBODY, "body", "ids are [S, n_axes] with S >= 1 and 1 .. %d axes", PE_AXIAL_MAX_AXES);
	return 0;
}

/* Could the table and its answer ever fit? Elements against max_elements, bytes (the body, the ids
 * as doubles, the table, the encoded answer) against the response budget. *more: the job's share. */
static int check_size(struct ajob *j, const struct pe_shape *s, size_t nids, uint64_t *more, struct pe_err *err)
{
	int of;
	size_t n = pe_shape_count(s, &of);
	if (of || n > j->os.h->opt.max_elements)
		return pe_err_set(err, PE_ETOOBIG, "body", "the table would have more than %" PRIu64 " elements",
				  j->os.h->opt.max_elements);
	*more = pe_produce_add(pe_produce_mul(nids, 8), pe_produce_mul(n, pe_dtype_size(j->out.dt)));
	*more = pe_produce_add(*more, pe_produce_out_bound(&j->out, s, 4096, NULL));
	uint64_t need = pe_produce_add(pe_http_body_figure(&j->body), *more);
	return pe_produce_budget_check(j->os.h, need, j->out.fmt == PE_FMT_JSON || j->out.fmt == PE_FMT_CSV ? "format" : "body",
				       err);
}

static void run(struct pe_oneshot *os, struct pe_oneshot_result *res)
{
	struct ajob *j = (struct ajob *)os;
	struct pe_err *err = &res->err;
	struct pe_buf out;
	struct pe_tensor_view v;
	int wide = 0, rc, of;
	double *ids = NULL;
	void *table = NULL;
	struct pe_budget *bg = NULL; /* the job's share (pe_produce_share_open) */
	uint64_t more = 0;
	pe_buf_init(&out, j->os.h->opt.max_response_bytes);
	if ((rc = pe_params_finish(&j->params, err)) != 0 || (rc = ids_view(j, &v, &wide, err)) != 0 ||
	    (rc = pe_axial_body_check(&j->params, v.shape.dim[1], err)) != 0 ||
	    (rc = pe_table_check_dtype(&j->params, j->out.dt, err)) != 0)
		goto done;
	size_t seq = v.shape.dim[0], naxes = v.shape.dim[1], dim = 0, nl;
	const double *ad = pe_param_list(&j->params, "axes_dim", &nl);
	for (size_t a = 0; a < nl; a++)
		dim += (size_t)ad[a];
	struct pe_shape s = {.rank = 3, .dim = {2, seq, dim}};
	if ((rc = check_size(j, &s, seq * naxes, &more, err)) != 0 || (rc = pe_produce_share_open(j->os.h, more, &bg, err)) != 0)
		goto done;
	pe_buf_set_budget(&out, bg);
	if (!(ids = pe_budget_malloc(bg, seq * naxes * sizeof *ids, &rc)) ||
	    (rc = pe_axial_ids_from(v.data, v.dtype, wide, seq, naxes, ids, "body", err)) != 0)
		goto done;
	if (!(table = pe_budget_malloc(bg, pe_shape_count(&s, &of) * pe_dtype_size(j->out.dt), &rc)))
		goto done;
	if ((rc = pe_axial_table_compute(&j->params, ids, seq, j->out.dt, table, err)) != 0)
		goto done;
	struct pe_tensor_view t = {.shape = s, .dtype = j->out.dt, .data = table};
	if ((rc = pe_out_encode(&j->out, &j->os.h->opt.parallel, &j->params, &t, &out, err)) != 0)
		goto done;
	res->out = j->out;
	pe_shape_format(&s, res->shape, sizeof res->shape);
	res->data = pe_buf_steal(&out, &res->len);
	res->budget = j->os.h->opt.budget;
	res->held = bg ? pe_mem_size(res->data) : 0;
	pe_budget_share_hand_over(bg, res->held); /* the answer outlives the share */
done:
	if (rc == PE_EBUSY && !err->code)
		pe_err_set(err, rc, "", "the response memory budget is full; retry shortly");
	else if (rc != 0 && !err->code)
		pe_err_set(err, rc, "", "the table failed");
	pe_buf_destroy(&out);
	pe_budget_free_block(bg, table);
	pe_budget_free_block(bg, ids);
	pe_budget_share_close(bg);
}

static void ajob_free(struct pe_oneshot *os)
{
	struct ajob *j = (struct ajob *)os;
	pe_params_destroy(&j->params);
	pe_http_release_body(&j->body);
	free(j);
}

static const struct pe_oneshot_answer answer = {.noun = "the table"};

/* A grid parameter given to a POST: 0 when there is none. */
static int grid_given(const struct pe_query *q, struct pe_err *err)
{
	for (int i = 0; i < q->extras.def->nparams; i++)
		if (q->extras.v[i].given)
			return pe_err_set(err, PE_EINVAL, q->extras.def->params[i].name, "%s does not apply to POST: the body gives the ids",
					  q->extras.def->params[i].name);
	return 0;
}

static struct ajob *ajob_new(struct req *r, struct MHD_Connection *conn, struct pe_err *err)
{
	struct ajob *j = calloc(1, sizeof *j);
	if (!j) {
		pe_err_set(err, PE_ENOMEM, "", "out of memory");
		return NULL;
	}
	j->os.h = r->h;
	struct pe_query *q = pe_contract_query(r);
	pe_contract_take_params(r, &j->params);
	int rc = grid_given(q, err);
	if (rc == 0)
		rc = pe_http_out_resolve(&j->out, &q->out, conn, PE_DTYPE_COUNT_, OFFERED, err);
	if (rc != 0) {
		ajob_free(&j->os);
		return NULL;
	}
	pe_http_take_body(r, &j->body);
	return j;
}

static enum MHD_Result post(struct req *r, struct MHD_Connection *conn)
{
	struct pe_err err = {0};
	struct ajob *j = ajob_new(r, conn, &err);
	if (!j)
		return pe_http_problem(r, conn, &err);
	j->os.run = run;
	j->os.free = ajob_free;
	return pe_oneshot_start(r, conn, &j->os, &answer);
}

static enum MHD_Result finish_cb(struct req *r, struct MHD_Connection *conn)
{
	return is_post(r) ? post(r, conn) : pe_table_request(r, conn, &pe_table_rope_axial);
}

static int match_cb(void *hctx, const char *url, const void **target)
{
	if (strcmp(url, PATH) != 0)
		return -1;
	*target = &pe_table_rope_axial;
	return pe_http_def_route(&pe_table_rope_axial);
}

const struct pe_handler pe_axial_handler = {
	.name = "axial",
	.match_cb = match_cb,
	.cors_methods = "GET, HEAD, POST, OPTIONS",
	.contract = contract,
	.finish_cb = finish_cb,
};
