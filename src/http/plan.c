/* POST /v1/plan[?len=N]: a Hugging Face config.json in, the model's positional encodings out
 * (pe_plan_build of src/plan, the same as `posenc plan`).
 *
 * The body is application/json of at most PE_PLAN_MAX_BODY (1 MiB) bytes, or max_body_bytes if
 * that is smaller: a larger Content-Length is a 413 before a byte is read. The plan is made on a
 * worker (oneshot.c), not on libmicrohttpd's thread: a body near that bound made of many small keys
 * takes 11-25 ms to parse and plan, and on the HTTP thread every other connection on it would wait
 * that long (16 such POSTs would hold a bystander's 16x16 table up to 120 ms).
 * Not cached: the answer depends on the whole body. Every url is answered as given by this server:
 * len is capped by max_elements, and a table whose JSON would be over response_budget_bytes or
 * max_response_bytes is planned as format=npy (or, when even that is over, with a shorter len). Errors: 400 for JSON that does not parse,
 * 422 naming the key for a model family or rope_type posenc does not know, 400 naming len. */
#include "http/handler.h"
#include "http/oneshot.h"
#include "http/produce.h"
#include "posenc/output.h"
#include "posenc/plan.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The response budget's whole limit (0: none), what a job's 413 check compares with. */
static uint64_t budget_limit(const struct pe_http *h)
{
	struct pe_budget_stats st = {0};
	if (h->opt.budget)
		pe_budget_stats(h->opt.budget, &st);
	return h->opt.budget ? st.limit : 0;
}

static uint64_t body_limit(const struct pe_http *h)
{
	return h->opt.max_body_bytes < PE_PLAN_MAX_BODY ? h->opt.max_body_bytes : PE_PLAN_MAX_BODY;
}

/* ?len=N: the longest sequence to plan for. */
static const struct pe_param_spec specs[] = {
	{"len", PE_PT_INT, "", 1, 1 << 30, NULL, "the longest sequence the plan's urls cover"},
};
static const struct pe_table_def params = {.name = "plan", .params = specs, .nparams = 1, .fixed_dtype = PE_DTYPE_COUNT_};

static const struct pe_contract contract[] = {
	{.methods = "POST", .params = &params, .finish = 1, .media = "application/json", .body_limit_cb = body_limit,
	 .limit_name = "a config.json: 1 MiB, or max_body_bytes"},
	{0},
};

/* A plan to make on a worker: the body (held on the response budget) and the options. */
struct plan_job {
	struct pe_oneshot os; /* first: the job as oneshot.c runs it */
	struct pe_plan_opts opts;
	struct pe_held_body body; /* held on the response budget (pe_http_take_body) */
};

static void run_plan(struct pe_oneshot *os, struct pe_oneshot_result *res)
{
	struct plan_job *j = (struct plan_job *)os;
	struct pe_plan plan;
	if (pe_plan_build(j->body.data ? j->body.data : "", j->body.len, &j->opts, &plan, &res->err) != 0) {
		if (!res->err.code)
			pe_err_set(&res->err, PE_EINTERNAL, "", "the plan failed");
		return;
	}
	res->data = pe_plan_json(&plan, &res->len);
	pe_plan_destroy(&plan);
	if (!res->data)
		pe_err_set(&res->err, PE_ENOMEM, "", "out of memory");
}

static void plan_job_free(struct pe_oneshot *os)
{
	struct plan_job *j = (struct plan_job *)os;
	pe_http_release_body(&j->body);
	free(j);
}

static const struct pe_oneshot_answer plan_answer = {.noun = "the plan", .content_type = "application/json"};

static enum MHD_Result finish_cb(struct req *r, struct MHD_Connection *conn)
{
	struct pe_err err = {0};
	const struct pe_params *p = &pe_contract_query(r)->params;
	struct plan_job *j = calloc(1, sizeof *j);
	if (!j) {
		pe_err_set(&err, PE_ENOMEM, "", "out of memory");
		return pe_http_problem(r, conn, &err);
	}
	j->os = (struct pe_oneshot){.h = r->h, .run = run_plan, .free = plan_job_free};
	j->opts = (struct pe_plan_opts){
		.len = pe_param_isset(p, "len") ? pe_param_int(p, "len") : 0, .max_elements = r->h->opt.max_elements,
		.max_response_bytes = r->h->opt.max_response_bytes, .budget_bytes = budget_limit(r->h),
		/* the request line this server reads (0: libmicrohttpd's pool is its 32 KiB default) */
		.max_url = (r->h->opt.max_header_bytes ? r->h->opt.max_header_bytes : 32768) - PE_PLAN_URL_ROOM};
	pe_http_take_body(r, &j->body);
	return pe_oneshot_start(r, conn, &j->os, &plan_answer);
}

static int match_cb(void *hctx, const char *url, const void **target)
{
	return strcmp(url, "/v1/plan") == 0 ? PE_ROUTE_PLAN : -1;
}

const struct pe_handler pe_plan_handler = {
	.name = "plan",
	.match_cb = match_cb,
	.cors_methods = "POST, OPTIONS",
	.contract = contract,
	.finish_cb = finish_cb,
};
