/* /v1/rope/axial: GET is the registry's table (a preset's grid in the query), answered by table.c
 * like any table; POST takes the ids in the body instead, an npy [S, n_axes] of floats or integers
 * (int32, int64, f16, bf16, f32, f64; fractional and negative allowed), and answers the
 * [2, S, sum(axes_dim)] table of those ids (pe_axial_body_def: the table's parameters without the
 * grid's). /v1/rope/axial/positions needs nothing here.
 *
 * The POST body is refused before it is read when its type is not application/x-npy or its
 * Content-Length is over max_body_bytes (its declaration, contract.h). The work runs on a worker as
 * an uncached table job (oneshot_table.c): the body's shape is checked, the table
 * (S * sum(axes_dim) * 2) against max_elements and it, the ids as doubles and the answer against
 * the response budget before anything is allocated, then the ids' values. Answers depend on the
 * body: not cached. */
#include "core/axial.h"
#include "http/handler.h"
#include "http/oneshot.h"
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
static int ids_view(struct pe_table_job *j, struct pe_tensor_view *v, int *wide, struct pe_err *err)
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

/* The body's ids as pe_npy_parse_index found them. */
struct ids {
	struct pe_tensor_view v;
	int wide;
};

/* values: the ids; their values as doubles into scratch (one per id), then the table of them. */
static int fill_cb(struct pe_table_job *j, const void *values, const struct pe_shape *s, void *table, void *scratch,
		   struct pe_err *err)
{
	const struct ids *ids = values;
	size_t seq = ids->v.shape.dim[0], naxes = ids->v.shape.dim[1];
	int rc = pe_axial_ids_from(ids->v.data, ids->v.dtype, ids->wide, seq, naxes, scratch, "body", err);
	return rc != 0 ? rc : pe_axial_table_compute(&j->params, scratch, seq, j->out.dt, table, err);
}

/* The params finished, the ids checked against them; the table sized with the ids as doubles as
 * its scratch. */
static void run(struct pe_oneshot *os, struct pe_oneshot_result *res)
{
	struct pe_table_job *j = (struct pe_table_job *)os;
	struct pe_err *err = &res->err;
	struct ids ids = {.wide = 0};
	if (pe_params_finish(&j->params, err) != 0 || ids_view(j, &ids.v, &ids.wide, err) != 0 ||
	    pe_axial_body_check(&j->params, ids.v.shape.dim[1], err) != 0 ||
	    pe_table_check_dtype(&j->params, j->out.dt, err) != 0)
		return;
	size_t seq = ids.v.shape.dim[0], naxes = ids.v.shape.dim[1];
	struct pe_shape s = {.rank = 3, .dim = {2, seq, width(&j->params)}};
	pe_table_job_answer(j, &s, seq * naxes * sizeof(double), fill_cb, &ids, res);
}

static enum MHD_Result finish_cb(struct req *r, struct MHD_Connection *conn)
{
	return is_post(r) ? pe_table_job_start(r, conn, OFFERED, "the ids", run)
			  : pe_table_request(r, conn, &pe_table_rope_axial);
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
