/* The POST form of a table whose body replaces some of its query parameters (body_table.h): the
 * job's life (oneshot.c runs it), the replaced parameters refused, the size checked before the
 * table is allocated, the answer encoded on the job's share of the budget. Answers depend on the
 * body: not cached (Cache-Control: no-store, oneshot.c). */
#include "http/body_table.h"
#include "http/produce.h"

#include <inttypes.h>
#include <stdlib.h>

static void job_free(struct pe_oneshot *os)
{
	struct pe_body_table *j = (struct pe_body_table *)os;
	pe_params_destroy(&j->params);
	pe_http_release_body(&j->body);
	free(j);
}

/* A replaced parameter given: 0 when there is none. */
static int replaced_given(const struct pe_query *q, const char *gives, struct pe_err *err)
{
	for (int i = 0; q->extras.def && i < q->extras.def->nparams; i++)
		if (q->extras.v[i].given)
			return pe_err_set(err, PE_EINVAL, q->extras.def->params[i].name,
					  "%s does not apply to POST: the body gives the %s", q->extras.def->params[i].name, gives);
	return 0;
}

static const struct pe_oneshot_answer answer = {.noun = "the table"};

enum MHD_Result pe_body_table_post(struct req *r, struct MHD_Connection *conn, unsigned offered, const char *gives,
				   void (*run)(struct pe_oneshot *, struct pe_oneshot_result *))
{
	struct pe_err err = {0};
	struct pe_body_table *j = calloc(1, sizeof *j);
	if (!j) {
		pe_err_set(&err, PE_ENOMEM, "", "out of memory");
		return pe_http_problem(r, conn, &err);
	}
	j->os.h = r->h;
	j->os.run = run;
	j->os.free = job_free;
	struct pe_query *q = pe_contract_query(r);
	pe_contract_take_params(r, &j->params);
	int rc = replaced_given(q, gives, &err);
	if (rc == 0)
		rc = pe_http_out_resolve(&j->out, &q->out, conn, PE_DTYPE_COUNT_, offered, &err);
	if (rc != 0) {
		job_free(&j->os);
		return pe_http_problem(r, conn, &err);
	}
	pe_http_take_body(r, &j->body);
	return pe_oneshot_start(r, conn, &j->os, &answer);
}

int pe_body_table_check_size(struct pe_body_table *j, const struct pe_shape *s, uint64_t more_bytes, uint64_t *more,
			     struct pe_err *err)
{
	int of;
	size_t n = pe_shape_count(s, &of);
	if (of || n > j->os.h->opt.max_elements)
		return pe_err_set(err, PE_ETOOBIG, "body", "the table would have more than %" PRIu64 " elements",
				  j->os.h->opt.max_elements);
	*more = pe_produce_add(more_bytes, pe_produce_mul(n, pe_dtype_size(j->out.dt)));
	*more = pe_produce_add(*more, pe_produce_out_bound(&j->out, s, 4096, NULL));
	uint64_t need = pe_produce_add(pe_http_body_figure(&j->body), *more); /* the body as the budget may hold it */
	return pe_produce_budget_check(j->os.h, need, j->out.fmt == PE_FMT_JSON || j->out.fmt == PE_FMT_CSV ? "format" : "body",
				       err);
}

int pe_body_table_answer(struct pe_body_table *j, const struct pe_tensor_view *t, struct pe_buf *out,
			 struct pe_budget *bg, struct pe_oneshot_result *res, struct pe_err *err)
{
	int rc = pe_out_encode(&j->out, &j->os.h->opt.parallel, &j->params, t, out, err);
	if (rc != 0)
		return rc;
	res->out = j->out;
	pe_shape_format(&t->shape, res->shape, sizeof res->shape);
	res->data = pe_buf_steal(out, &res->len);
	res->budget = j->os.h->opt.budget;
	res->held = bg ? pe_mem_size(res->data) : 0;
	pe_budget_share_hand_over(bg, res->held); /* the answer outlives the share */
	return 0;
}

void pe_body_table_fail(int rc, struct pe_err *err)
{
	if (rc == PE_EBUSY && !err->code)
		pe_err_set(err, rc, "", "the response memory budget is full; retry shortly");
	else if (rc != 0 && !err->code)
		pe_err_set(err, rc, "", "the table failed");
}
