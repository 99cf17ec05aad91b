/* The uncached job (oneshot.h), shared by the handlers whose answer depends on the body
 * (transform.c, order.c, plan.c, the tables of oneshot_table.c) or costs too much for the HTTP
 * thread (learned.c's list): the request is suspended on a waiter; a worker runs the job under
 * the waiter's deadline (a job that starts past it, or after shutdown cancelled everything, does
 * nothing at all) and completes the waiter with its result; the resumed request is answered 503
 * when it expired, else from the result. Not cached (no-store). */
#include "http/oneshot.h"
#include "posenc/warm.h"

#include <stdlib.h>

void pe_oneshot_result_free(void *p)
{
	struct pe_oneshot_result *res = p;
	pe_budget_give(res->budget, res->held);
	if (!pe_warm_give(res->warm, res->data)) /* written to its end: the next large answer's */
		free(res->data);
	free(res);
}

/* On a worker: the job stops at its request's deadline (job_timeout, when its waiter is answered
 * 503) like a table's: kernels check between blocks. */
static void job_cb(void *arg)
{
	struct pe_oneshot *j = arg;
	struct pe_oneshot_result *res = calloc(1, sizeof *res);
	pthread_mutex_lock(&j->h->wait_lock); /* the deadline is the waiter's, read where it is written */
	double deadline = j->w->deadline;
	pthread_mutex_unlock(&j->h->wait_lock);
	pe_cancel_set_deadline(deadline);
	int rc = pe_cancelled();
	if (res)
		res->warm = j->h->opt.warm;
	if (res && rc != 0)
		pe_cancel_err(rc, &res->err);
	else if (res)
		j->run(j, res);
	pe_cancel_set_deadline(0);
	pe_waiter_complete(j->w, NULL, res, res ? 0 : PE_ENOMEM);
	j->free(j);
}

static void free_result_cb(void *cls) { pe_oneshot_result_free(cls); }

/* Why there is no answer, as a problem; 0 when res holds one. */
static int problem_of(const struct waiter *w, const struct pe_oneshot_answer *how, struct pe_err *err)
{
	const struct pe_oneshot_result *res = w->result;
	int code = w->code ? w->code : PE_EINTERNAL;
	if (w->state == W_EXPIRED && w->shut_down)
		pe_err_set(err, PE_EDRAINING, "", "the service is shutting down: %s was called off", how->noun);
	else if (w->state == W_EXPIRED)
		pe_err_set(err, PE_ETIMEOUT, "", "%s did not finish within job_timeout", how->noun);
	else if ((w->code || !res) && how->failure)
		how->failure(code, err);
	else if (code == PE_EBUSY && (w->code || !res))
		pe_err_set(err, code, "", "the job queue is full; retry shortly");
	else if (w->code || !res)
		pe_err_set(err, code, "", "%s failed", how->noun);
	else if (res->err.code)
		*err = res->err;
	return err->code;
}

/* On the MHD thread, when the job completed or the deadline passed. */
static enum MHD_Result resume_cb(struct req *r, struct MHD_Connection *conn)
{
	const struct pe_oneshot_answer *how = r->resume_arg;
	struct waiter *w = r->w;
	struct pe_err err = {0};
	if (problem_of(w, how, &err))
		return pe_http_problem(r, conn, &err);
	struct pe_oneshot_result *res = w->result;
	w->result = NULL; /* the response frees it */
	struct MHD_Response *resp =
		MHD_create_response_from_buffer_with_free_callback_cls(res->len, res->data, free_result_cb, res);
	if (!resp) {
		pe_oneshot_result_free(res);
		return MHD_NO;
	}
	r->bytes = res->len;
	if (how->content_type)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, how->content_type);
	else {
		pe_http_out_headers(&res->out, resp);
		MHD_add_response_header(resp, "X-PE-Shape", res->shape);
		MHD_add_response_header(resp, "X-PE-Dtype", pe_dtype_name(res->out.dt));
	}
	if (res->extra_name[0])
		MHD_add_response_header(resp, res->extra_name, res->extra);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	pe_http_add_cors(r->h, conn, resp);
	return pe_http_queue(r, conn, 200, resp);
}

enum MHD_Result pe_oneshot_start(struct req *r, struct MHD_Connection *conn, struct pe_oneshot *job,
				 const struct pe_oneshot_answer *how)
{
	struct waiter *w = pe_waiter_new(r->h, conn);
	if (!w) {
		struct pe_err err = {0};
		job->free(job);
		pe_err_set(&err, PE_ENOMEM, "", "out of memory");
		return pe_http_problem(r, conn, &err);
	}
	w->result_free = pe_oneshot_result_free;
	job->w = w;
	r->w = w;
	r->on_resume = resume_cb;
	r->resume_arg = how;
	int rc = r->h->opt.hooks.submit(r->h->opt.hooks.ctx, job_cb, job);
	if (rc != 0) {
		job->free(job);
		pe_waiter_complete(w, NULL, NULL, rc);
	}
	pe_waiter_suspend(w);
	return MHD_YES;
}
