/* /v1/rope/axial: GET is the registry's table (a preset's grid in the query), answered by table.c
 * like any table; POST takes the ids in the body instead, an npy [S, n_axes] of floats or integers
 * (int32, int64, f16, bf16, f32, f64; fractional and negative allowed), and answers the
 * [2, S, sum(axes_dim)] table of those ids (pe_axial_body_def: the table's parameters without the
 * grid's). /v1/rope/axial/positions needs nothing here.
 *
 * The POST body is refused before it is read when its type is not application/x-npy or its
 * Content-Length is over max_body_bytes (its declaration, contract.h). The work runs on a worker as
 * an uncached job (body_table.c): the body's shape is checked, the table (S * sum(axes_dim) * 2)
 * against max_elements and it, the ids as doubles and the answer against the response budget
 * before anything is allocated, then the ids' values. Answers depend on the body: not cached. */
#include "core/axial.h"
#include "http/body_table.h"
#include "http/produce.h"

#include <stdlib.h>
#include <string.h>

#define PATH "/v1/rope/axial"
#define OFFERED (PE_FMT_BIT(PE_FMT_JSON) | PE_FMT_BIT(PE_FMT_NPY) | PE_FMT_BIT(PE_FMT_BIN) | PE_FMT_BIT(PE_FMT_CSV))

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
static int ids_view(struct pe_body_table *j, struct pe_tensor_view *v, int *wide, struct pe_err *err)
{
	int rc = pe_npy_parse_index(j->body.data, j->body.len, j->os.h->opt.max_elements, v, wide, err);
	if (rc != 0)
		return rc;
	if (v->shape.rank != 2 || v->shape.dim[0] == 0 || v->shape.dim[1] == 0 || v->shape.dim[1] > PE_AXIAL_MAX_AXES)
		return pe_err_set(err, PE_EBODY, "body", "ids are [S, n_axes] with S >= 1 and 1 .. %d axes", PE_AXIAL_MAX_AXES);
	return 0;
}

/* The table's width: the sum of axes_dim. */
static size_t width(const struct pe_params *p)
{
	size_t n, dim = 0;
	const double *ad = pe_param_list(p, "axes_dim", &n);
	for (size_t a = 0; a < n; a++)
		dim += (size_t)ad[a];
	return dim;
}

/* The params finished, the ids checked against them, the table sized (the ids as doubles on the
 * job's share with it) before anything is allocated. */
static void run(struct pe_oneshot *os, struct pe_oneshot_result *res)
{
	struct pe_body_table *j = (struct pe_body_table *)os;
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
	size_t seq = v.shape.dim[0], naxes = v.shape.dim[1];
	struct pe_shape s = {.rank = 3, .dim = {2, seq, width(&j->params)}};
	if ((rc = pe_body_table_check_size(j, &s, pe_produce_mul(seq * naxes, sizeof *ids), &more, err)) != 0 ||
	    (rc = pe_produce_share_open(j->os.h, more, &bg, err)) != 0)
		goto done;
	pe_buf_set_budget(&out, bg);
	if (!(ids = pe_budget_malloc(bg, seq * naxes * sizeof *ids, &rc)) ||
	    (rc = pe_axial_ids_from(v.data, v.dtype, wide, seq, naxes, ids, "body", err)) != 0 ||
	    !(table = pe_budget_malloc(bg, pe_shape_count(&s, &of) * pe_dtype_size(j->out.dt), &rc)) ||
	    (rc = pe_axial_table_compute(&j->params, ids, seq, j->out.dt, table, err)) != 0)
		goto done;
	struct pe_tensor_view t = {.shape = s, .dtype = j->out.dt, .data = table};
	rc = pe_body_table_answer(j, &t, &out, bg, res, err);
done:
	pe_body_table_fail(rc, err);
	pe_buf_destroy(&out);
	pe_budget_free_block(bg, table);
	pe_budget_free_block(bg, ids);
	pe_budget_share_close(bg);
}

static enum MHD_Result finish_cb(struct req *r, struct MHD_Connection *conn)
{
	return is_post(r) ? pe_body_table_post(r, conn, OFFERED, "ids", run) : pe_table_request(r, conn, &pe_table_rope_axial);
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
