/* The last step of an uncached job whose answer is a computed table (oneshot.h): sized against
 * max_elements and the response budget before anything is allocated, computed into a block on
 * the job's budget share, encoded, handed to the result; and the start of such a job from a
 * POST whose body gives the table's values. mrope.c (positions in the body) and timestep.c
 * (timesteps in the body) are made of these. */
#include "http/contract.h"
#include "http/media.h"
#include "http/oneshot.h"
#include "http/produce.h"

#include <inttypes.h>
#include <stdlib.h>

/* Could the table and its answer ever fit? Elements against max_elements, bytes (the body held by
 * the server, the table, the encoded answer) against the response budget, both named by "body"
 * (the body says how large the table is; "format" when the encoding is what does not fit).
 * *more: what the job takes on the budget besides the body (its share). */
static int check_size(struct pe_oneshot *os, const struct pe_out *out, const struct pe_held_body *body,
		      const struct pe_shape *s, uint64_t *more, struct pe_err *err)
{
	int of;
	size_t n = pe_shape_count(s, &of);
	if (of || n > os->h->opt.max_elements)
		return pe_err_set(err, PE_ETOOBIG, "body", "the table would have more than %" PRIu64 " elements",
				  os->h->opt.max_elements);
	*more = pe_produce_add(pe_produce_mul(n, pe_dtype_size(out->dt)), pe_produce_out_bound(out, s, 4096, NULL));
	uint64_t need = pe_produce_add(pe_http_body_figure(body), *more); /* the body as the budget may hold it */
	return pe_produce_budget_check(os->h, need, out->fmt == PE_FMT_JSON || out->fmt == PE_FMT_CSV ? "format" : "body", err);
}

int pe_oneshot_table(struct pe_oneshot *os, const struct pe_params *p, const struct pe_out *out,
		     const struct pe_held_body *body, const struct pe_shape *s, pe_oneshot_fill_cb fill, void *ctx,
		     struct pe_oneshot_result *res)
{
	struct pe_err *err = &res->err;
	struct pe_buf enc;
	struct pe_budget *bg = NULL; /* the job's share (pe_produce_share_open) */
	void *table = NULL;
	uint64_t more = 0;
	int rc, of;
	pe_buf_init(&enc, os->h->opt.max_response_bytes);
	if ((rc = check_size(os, out, body, s, &more, err)) != 0 || (rc = pe_produce_share_open(os->h, more, &bg, err)) != 0)
		goto done;
	pe_buf_set_budget(&enc, bg);
	if (!(table = pe_budget_malloc(bg, pe_shape_count(s, &of) * pe_dtype_size(out->dt), &rc)))
		goto done;
	if ((rc = fill(ctx, out->dt, table, err)) != 0)
		goto done;
	struct pe_tensor_view v = {.shape = *s, .dtype = out->dt, .data = table};
	if ((rc = pe_out_encode(out, &os->h->opt.parallel, p, &v, &enc, err)) != 0)
		goto done;
	res->out = *out;
	pe_shape_format(s, res->shape, sizeof res->shape);
	res->data = pe_buf_steal(&enc, &res->len);
	res->budget = os->h->opt.budget;
	res->held = bg ? pe_mem_size(res->data) : 0;
	pe_budget_share_hand_over(bg, res->held); /* the answer outlives the share */
done:
	if (rc == PE_EBUSY && !err->code)
		pe_err_set(err, rc, "", "the response memory budget is full; retry shortly");
	else if (rc != 0 && !err->code)
		pe_err_set(err, rc, "", "the table failed");
	pe_buf_destroy(&enc);
	pe_budget_free_block(bg, table);
	pe_budget_share_close(bg);
	return rc;
}

static void table_job_free(struct pe_oneshot *os)
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

enum MHD_Result pe_table_job_start(struct req *r, struct MHD_Connection *conn, size_t size, unsigned offered,
				   const char *media, const char *what,
				   void (*run)(struct pe_oneshot *job, struct pe_oneshot_result *res))
{
	struct pe_err err = {0};
	struct pe_table_job *j = calloc(1, size);
	if (!j) {
		pe_err_set(&err, PE_ENOMEM, "", "out of memory");
		return pe_http_problem(r, conn, &err);
	}
	j->os.h = r->h;
	j->os.run = run;
	j->os.free = table_job_free;
	struct pe_query *q = pe_contract_query(r);
	pe_contract_take_params(r, &j->params);
	j->media = pe_media_match(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE), media);
	if (extras_given(q, what, &err) != 0 || pe_http_out_resolve(&j->out, &q->out, conn, PE_DTYPE_COUNT_, offered, &err) != 0) {
		table_job_free(&j->os);
		return pe_http_problem(r, conn, &err);
	}
	pe_http_take_body(r, &j->body);
	return pe_oneshot_start(r, conn, &j->os, &answer);
}
