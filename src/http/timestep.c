/* /v1/sinusoidal/timestep: GET is the registry's table (timesteps in the query, at most
 * PE_MAX_LIST of them), answered by table.c like any table; POST takes the timesteps in the body
 * instead, an npy vector [N] (float32/64, float16, int32 or int64, NumPy's defaults) or a JSON
 * array of numbers, and answers the same [N, dim] table (pe_timestep_body_def: the table's
 * parameters without timesteps).
 *
 * The POST body is refused before it is read when its type is neither, or its Content-Length is
 * over max_body_bytes, then collected under that bound (its declaration, contract.h). The work
 * runs on a worker as an uncached table job (oneshot_table.c): the body's shape and values are
 * checked, the table (N·dim against max_elements) and the job's memory against the response
 * budget before anything is allocated. Answers depend on the body: not cached (Cache-Control:
 * no-store). */
#include "core/timestep.h"
#include "http/handler.h"
#include "http/oneshot.h"
#include "http/produce.h"
#include "tensor/vector.h"

#include <stdlib.h>
#include <string.h>

#define PATH "/v1/sinusoidal/timestep"
#define OFFERED (PE_FMT_BIT(PE_FMT_JSON) | PE_FMT_BIT(PE_FMT_NPY) | PE_FMT_BIT(PE_FMT_BIN) | PE_FMT_BIT(PE_FMT_CSV))
#define BODY_TYPES "application/x-npy, application/json" /* j->media 0: npy, 1: JSON */

extern const struct pe_table_def pe_table_sinusoidal_timestep;

static int is_post(const struct req *r) { return !strcmp(r->method, "POST"); }

/* timesteps: known to the route, refused by a POST (the body gives them). */
static const struct pe_param_spec list_spec[] = {
	{"timesteps", PE_PT_LIST, "", -PE_TIMESTEP_MAX, PE_TIMESTEP_MAX, NULL, "the timesteps (GET only)"},
};
static const struct pe_table_def list_param = {.name = "sinusoidal/timestep", .params = list_spec, .nparams = 1,
					       .fixed_dtype = PE_DTYPE_COUNT_};

/* GET: the registry's table; POST: its parameters without timesteps, an npy or JSON body. */
static const struct pe_contract contract[] = {
	{.methods = "GET, HEAD", .target_params = 1, .output = 1, .finish = 1},
	{.methods = "POST", .params = &pe_timestep_body_def, .output = 1, .extras = &list_param, .finish = 1,
	 .media = BODY_TYPES},
	{0},
};

/* ---- the job (worker) ---- */

/* The body's timesteps as n doubles into *t (caller frees): a vector [N], N >= 1, each finite
 * within PE_TIMESTEP_MAX. */
static int timesteps(struct pe_table_job *j, double **t, size_t *n, struct pe_err *err)
{
	int rc = pe_vector_parse(j->body.data, j->body.len, j->media == 1, j->os.h->opt.max_elements, "timesteps", t, n, err);
	for (size_t i = 0; rc == 0 && i < *n; i++)
		rc = pe_timestep_check_value((*t)[i], i, err);
	return rc ? rc : pe_timestep_check_angles(&j->params, *t, *n, "body", err);
}

/* values: the timesteps, [N] doubles. */
static int fill_cb(struct pe_table_job *j, const void *values, const struct pe_shape *s, void *table, void *scratch,
		   struct pe_err *err)
{
	return pe_timestep_compute(&j->params, values, s->dim[0], j->out.dt, table, err);
}

static void run(struct pe_oneshot *os, struct pe_oneshot_result *res)
{
	struct pe_table_job *j = (struct pe_table_job *)os;
	double *t = NULL;
	size_t n = 0;
	if (timesteps(j, &t, &n, &res->err) == 0) {
		struct pe_shape s = {.rank = 2, .dim = {n, (size_t)pe_param_int(&j->params, "dim")}};
		pe_table_job_answer(j, &s, 0, fill_cb, t, res);
	}
	free(t);
}

static enum MHD_Result finish_cb(struct req *r, struct MHD_Connection *conn)
{
	return is_post(r) ? pe_table_job_start(r, conn, OFFERED, "the timesteps", run)
			  : pe_table_request(r, conn, &pe_table_sinusoidal_timestep);
}

static int match_cb(void *hctx, const char *url, const void **target)
{
	if (strcmp(url, PATH) != 0)
		return -1;
	*target = &pe_table_sinusoidal_timestep;
	return pe_http_def_route(&pe_table_sinusoidal_timestep);
}

const struct pe_handler pe_timestep_handler = {
	.name = "timestep",
	.match_cb = match_cb,
	.cors_methods = "GET, HEAD, POST, OPTIONS",
	.contract = contract,
	.finish_cb = finish_cb,
};
