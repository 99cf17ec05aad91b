/* The POST job of a table whose body gives its values in place of some query parameters
 * (oneshot.h): mrope.c (positions), axial.c (ids) and timestep.c (timesteps) parse their body and
 * compute their table; the start of the job, the refusal of the replaced parameters, the size
 * checks before anything is allocated, the job's share of the budget and the encoded answer are
 * here. Answers depend on the body: not cached (Cache-Control: no-store, oneshot.c). */
#include "http/contract.h"
#include "http/media.h"
#include "http/oneshot.h"
#include "http/produce.h"

#include <inttypes.h>
#include <stdlib.h>

/* Could the table and its answer ever fit? Elements against max_elements, bytes (the body as the
 * budget may hold it, scratch, the table, the encoded answer) against the response budget, named
 * by "body" (the body says how large the table is; "format" when a text encoding is what does not
 * fit). *more: what the job takes on the budget besides the body (its share). */
static int check_size(struct pe_table_job *j, const struct pe_shape *s, size_t scratch, uint64_t *more,
		      struct pe_err *err)
{
	int of;
	size_t n = pe_shape_count(s, &of);
	if (of || n > j->os.h->opt.max_elements)
		return pe_err_set(err, PE_ETOOBIG, "body", "the table would have more than %" PRIu64 " elements",
				  j->os.h->opt.max_elements);
	*more = pe_produce_add(scratch, pe_produce_mul(n, pe_dtype_size(j->out.dt)));
	*more = pe_produce_add(*more, pe_produce_out_bound(&j->out, s, 4096, NULL));
	uint64_t need = pe_produce_add(pe_http_body_figure(&j->body), *more);
	return pe_produce_budget_check(j->os.h, need,
				       j->out.fmt == PE_FMT_JSON || j->out.fmt == PE_FMT_CSV ? "format" : "body", err);
}

/* The encoded table into res; the share hands the answer over (it outlives the share). */
static int answer_with(struct pe_table_job *j, const struct pe_tensor_view *t, struct pe_buf *enc,
		       struct pe_budget *bg, struct pe_oneshot_result *res)
{
	int rc = pe_out_encode(&j->out, &j->os.h->opt.parallel, &j->params, t, enc, &res->err);
	if (rc != 0)
		return rc;
	res->out = j->out;
	pe_shape_format(&t->shape, res->shape, sizeof res->shape);
	res->data = pe_buf_steal(enc, &res->len);
	res->budget = j->os.h->opt.budget;
	res->held = bg ? pe_mem_size(res->data) : 0;
	pe_budget_share_hand_over(bg, res->held);
	return 0;
}

int pe_table_job_answer(struct pe_table_job *j, const struct pe_shape *s, size_t scratch, pe_table_fill_cb fill,
			const void *values, struct pe_oneshot_result *res)
{
	struct pe_err *err = &res->err;
	struct pe_buf enc;
	struct pe_budget *bg = NULL; /* the job's share (pe_produce_share_open) */
	void *table = NULL, *work = NULL; /* work: the fill's scratch */
	uint64_t more = 0;
	int rc, of;
	pe_buf_init(&enc, j->os.h->opt.max_response_bytes);
	if ((rc = check_size(j, s, scratch, &more, err)) != 0 || (rc = pe_produce_share_open(j->os.h, more, &bg, err)) != 0)
		goto done;
	pe_produce_answer_buf(j->os.h, &enc, bg);
	if ((scratch && !(work = pe_budget_malloc(bg, scratch, &rc))) ||
	    !(table = pe_budget_malloc(bg, pe_shape_count(s, &of) * pe_dtype_size(j->out.dt), &rc)))
		goto done;
	struct pe_tensor_view v = {.shape = *s, .dtype = j->out.dt, .data = table};
	if ((rc = fill(j, values, s, table, work, err)) == 0)
		rc = answer_with(j, &v, &enc, bg, res);
done:
	if (rc == PE_EBUSY && !err->code)
		pe_err_set(err, rc, "", "the response memory budget is full; retry shortly");
	else if (rc != 0 && !err->code)
		pe_err_set(err, rc, "", "the table failed");
	pe_buf_destroy(&enc);
	pe_budget_free_block(bg, table);
	pe_budget_free_block(bg, work);
	pe_budget_share_close(bg);
	return rc;
}

static void job_free(struct pe_oneshot *os)
{
	struct pe_table_job *j = (struct pe_table_job *)os;
	pe_params_destroy(&j->params);
	pe_http_release_body(&j->body);
	free(j);
}

static const struct pe_oneshot_answer answer = {.noun = "the table"};

/* The query's extras are what the body replaces: 0 when none was given. */
static int extras_given(const struct pe_query *q, const char *what, struct pe_err *err)
{
	for (int i = 0; q->extras.def && i < q->extras.def->nparams; i++)
		if (q->extras.v[i].given)
			return pe_err_set(err, PE_EINVAL, q->extras.def->params[i].name, "%s does not apply to POST: the body gives %s",
					  q->extras.def->params[i].name, what);
	return 0;
}

enum MHD_Result pe_table_job_start(struct req *r, struct MHD_Connection *conn, unsigned offered, const char *what,
				   void (*run)(struct pe_oneshot *job, struct pe_oneshot_result *res))
{
	struct pe_err err = {0};
	struct pe_table_job *j = calloc(1, sizeof *j);
	if (!j) {
		pe_err_set(&err, PE_ENOMEM, "", "out of memory");
		return pe_http_problem(r, conn, &err);
	}
	j->os.h = r->h;
	j->os.run = run;
	j->os.free = job_free;
	struct pe_query *q = pe_contract_query(r);
	pe_contract_take_params(r, &j->params);
	const char *type = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
	j->media = r->contract && r->contract->media ? pe_media_match(type, r->contract->media) : -1;
	if (extras_given(q, what, &err) != 0 ||
	    pe_http_out_resolve(&j->out, &q->out, conn, PE_DTYPE_COUNT_, offered, &err) != 0) {
		job_free(&j->os);
		return pe_http_problem(r, conn, &err);
	}
	pe_http_take_body(r, &j->body);
	return pe_oneshot_start(r, conn, &j->os, &answer);
}
