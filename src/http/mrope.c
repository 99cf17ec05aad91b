/* /v1/rope/mrope: GET is the registry's table (segments in the query), answered by table.c like any
 * table; POST takes the positions in the body instead, an int32 or int64 npy [3, seq] (rows t, h,
 * w, as get_rope_index returns them or /v1/rope/mrope/positions serves them), and answers the same
 * [2, seq, dim] table of those positions (pe_mrope_body_def: the table's parameters without the
 * sequence's). /v1/rope/mrope/positions needs nothing here: its delta header is the table's extra.
 *
 * The POST body is refused before it is read when its type is not application/x-npy or its
 * Content-Length is over max_body_bytes, then collected under that bound (its declaration,
 * contract.h). The work runs on a worker as an uncached job (oneshot.c): the body's shape, dtype
 * and values are checked, the table is sized against max_elements and the response budget before
 * it is allocated (body_table.c, as POST /v1/rope/axial). Answers depend on the body: not cached
 * (Cache-Control: no-store). */
#include "core/mrope.h"
#include "http/body_table.h"
#include "http/produce.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATH "/v1/rope/mrope"
#define OFFERED (PE_FMT_BIT(PE_FMT_JSON) | PE_FMT_BIT(PE_FMT_NPY) | PE_FMT_BIT(PE_FMT_BIN) | PE_FMT_BIT(PE_FMT_CSV))

extern const struct pe_table_def pe_table_rope_mrope;

static int is_post(const struct req *r) { return !strcmp(r->method, "POST"); }

/* The sequence's parameters: known to the route, refused by a POST (the body gives the positions). */
static const struct pe_param_spec sequence_specs[] = {PE_MROPE_SEQUENCE_PARAMS};
static const struct pe_table_def sequence_params = {.name = "rope/mrope", .params = sequence_specs,
						    .nparams = sizeof sequence_specs / sizeof sequence_specs[0],
						    .fixed_dtype = PE_DTYPE_COUNT_};

/* GET: the registry's table; POST: the table's parameters without the sequence's, and the
 * positions as an npy body within max_body_bytes. */
static const struct pe_contract contract[] = {
	{.methods = "GET, HEAD", .target_params = 1, .output = 1, .finish = 1},
	{.methods = "POST", .params = &pe_mrope_body_def, .output = 1, .extras = &sequence_params,
	 .media = "application/x-npy"},
	{0},
};

/* ---- the job (worker) ---- */

/* int64 positions narrowed to int32 in place (element i moves from byte 8i to 4i, read before any
 * later write reaches it); each within 0 .. PE_MROPE_MAX_POSITION, else a 400 naming the body. */
static int narrow_positions(char *data, size_t n, struct pe_err *err)
{
	for (size_t i = 0; i < n; i++) {
		int64_t v;
		memcpy(&v, data + 8 * i, 8);
		if (v < 0)
			return pe_err_set(err, PE_EBODY, "body", "position %zu is negative (%" PRId64 ")", i, v);
		if ((double)v > PE_MROPE_MAX_POSITION)
			return pe_err_set(err, PE_EBODY, "body", "position %zu (%" PRId64 ") is over %.0f", i, v,
					  PE_MROPE_MAX_POSITION);
		int32_t w = (int32_t)v;
		memcpy(data + 4 * i, &w, 4);
	}
	return 0;
}

/* The body's positions: an int32 or int64 [3, seq] npy (NumPy's default int and get_rope_index's
 * dtype are int64) of values >= 0, as int32 at the start of the body; their largest into *max. */
static int positions(struct pe_body_table *j, const int32_t **pos, size_t *seq, int64_t *max, struct pe_err *err)
{
	struct pe_tensor_view v;
	int wide = 0, of, rc = pe_npy_parse_index(j->body.data, j->body.len, j->os.h->opt.max_elements, &v, &wide, err);
	if (rc != 0)
		return rc;
	if (v.dtype != PE_I32)
		return pe_err_set(err, PE_EBODY, "body", "positions must be integers ('<i4' or '<i8'), got %s",
				  pe_dtype_name(v.dtype));
	if (v.shape.rank != 2 || v.shape.dim[0] != 3 || v.shape.dim[1] == 0)
		return pe_err_set(err, PE_EBODY, "body", "positions are [3, seq] (rows t, h, w) with seq >= 1");
	*seq = v.shape.dim[1];
	size_t n = pe_shape_count(&v.shape, &of);
	memmove(j->body.data, v.data, n * (wide ? 8 : 4)); /* the buffer start is malloc-aligned */
	if (wide && (rc = narrow_positions(j->body.data, n, err)) != 0)
		return rc;
	*pos = (const int32_t *)(void *)j->body.data;
	*max = 0;
	for (size_t i = 0; i < n; i++) {
		if ((*pos)[i] < 0)
			return pe_err_set(err, PE_EBODY, "body", "position %zu is negative (%d)", i, (int)(*pos)[i]);
		*max = (*pos)[i] > *max ? (*pos)[i] : *max;
	}
	return 0;
}

static void run(struct pe_oneshot *os, struct pe_oneshot_result *res)
{
	struct pe_body_table *j = (struct pe_body_table *)os;
	struct pe_err *err = &res->err;
	struct pe_buf out;
	const int32_t *pos = NULL;
	size_t seq = 0;
	int64_t max = 0;
	void *table = NULL;
	struct pe_budget *bg = NULL; /* the job's share (pe_produce_share_open) */
	uint64_t more = 0;
	int rc;
	pe_buf_init(&out, j->os.h->opt.max_response_bytes);
	if ((rc = positions(j, &pos, &seq, &max, err)) != 0 || (rc = pe_mrope_body_finish(&j->params, max, err)) != 0 ||
	    (rc = pe_table_check_dtype(&j->params, j->out.dt, err)) != 0)
		goto done;
	struct pe_shape s = {.rank = 3, .dim = {2, seq, (size_t)pe_param_int(&j->params, "dim")}};
	if ((rc = pe_body_table_check_size(j, &s, 0, &more, err)) != 0 ||
	    (rc = pe_produce_share_open(j->os.h, more, &bg, err)) != 0)
		goto done;
	pe_buf_set_budget(&out, bg);
	int of;
	if (!(table = pe_budget_malloc(bg, pe_shape_count(&s, &of) * pe_dtype_size(j->out.dt), &rc)))
		goto done;
	if ((rc = pe_mrope_table_compute(&j->params, pos, seq, j->out.dt, table, err)) != 0)
		goto done;
	struct pe_tensor_view v = {.shape = s, .dtype = j->out.dt, .data = table};
	if ((rc = pe_body_table_answer(j, &v, &out, bg, res, err)) != 0)
		goto done;
	res->extra[pe_fmt_f64(j->params.def->extra(&j->params), res->extra)] = 0;
	pe_table_extra_header(&pe_mrope_body_def, res->extra_name, sizeof res->extra_name);
done:
	pe_body_table_fail(rc, err);
	pe_buf_destroy(&out);
	pe_budget_free_block(bg, table);
	pe_budget_share_close(bg);
}

static enum MHD_Result finish_cb(struct req *r, struct MHD_Connection *conn)
{
	return is_post(r) ? pe_body_table_post(r, conn, OFFERED, "positions", run) : pe_table_request(r, conn, &pe_table_rope_mrope);
}

static int match_cb(void *hctx, const char *url, const void **target)
{
	if (strcmp(url, PATH) != 0)
		return -1;
	*target = &pe_table_rope_mrope;
	return pe_http_def_route(&pe_table_rope_mrope);
}

const struct pe_handler pe_mrope_handler = {
	.name = "mrope",
	.match_cb = match_cb,
	.cors_methods = "GET, HEAD, POST, OPTIONS",
	.contract = contract,
	.finish_cb = finish_cb,
};
