/* POST /v1/plan[?len=N]: a Hugging Face config.json in, the model's positional encodings out
 * (pe_plan_build in core, the same as `posenc plan`).
 *
 * The body is application/json of at most PE_PLAN_MAX_BODY (1 MiB) bytes, or max_body_bytes if
 * that is smaller: a larger Content-Length is a 413 before a byte is read. The plan is made on a
 * worker (oneshot.c), not on libmicrohttpd's thread: a body near that bound made of many small keys
 * took 11-25 ms to parse and plan, and on the HTTP thread every other connection on it waited that
 * long (a hostile client's 16 such POSTs held a bystander's 16x16 table up to 120 ms; session 12).
 * Not cached: the answer depends on the whole body. Every url is answered as given by this server:
 * len is capped by max_elements, and a table whose JSON would be over response_budget_bytes or
 * max_response_bytes is planned as format=npy (or, when even that is over, with a shorter len). Errors: 400 for JSON that does not parse,
 * 422 naming the key for a model family or rope_type posenc does not know, 400 naming len. */
#include "http/handler.h"
#include "http/oneshot.h"
#include "http/produce.h"
#include "posenc/output.h"
#include "posenc/plan.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static size_t body_limit(const struct pe_http *h)
{
	return h->opt.max_body_bytes < PE_PLAN_MAX_BODY ? (size_t)h->opt.max_body_bytes : PE_PLAN_MAX_BODY;
}

static enum MHD_Result refuse(struct req *r, int code, const char *param, const char *detail)
{
	struct pe_err err = {0};
	pe_err_set(&err, code, param, "%s", detail);
	return pe_http_refuse(r, &err, NULL);
}

static int is_json(const char *ctype)
{
	size_t n = ctype ? strcspn(ctype, "; \t") : 0;
	return n == 16 && strncasecmp(ctype, "application/json", n) == 0;
}

static enum MHD_Result begin_cb(struct req *r, struct MHD_Connection *conn, const char *url)
{
	struct pe_http *h = r->h;
	r->allow = "POST";
	if (strcmp(r->method, "POST") != 0)
		return refuse(r, PE_EMETHOD, "", "use POST with a config.json body");
	if (!is_json(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE)))
		return refuse(r, PE_EMEDIATYPE, "Content-Type", "the body must be application/json (a config.json)");
	const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	unsigned long long declared = cl ? strtoull(cl, NULL, 10) : 0;
	if (declared > body_limit(h)) {
		char d[128];
		snprintf(d, sizeof d, "the body is %llu bytes; a config.json may have %zu", declared, body_limit(h));
		return refuse(r, PE_ETOOBIG, "body", d);
	}
	pe_buf_init(&r->body, body_limit(h));
	r->body_wanted = 1;
	return MHD_YES;
}

/* The plan's fits_cb: would the table of p, as format (json with gzip, the larger; or npy), pass
 * this server's 413 check before a job (response_budget_bytes, table.c's count) and fit its
 * output buffer (max_response_bytes)? */
static int fits_cb(void *ctx, const struct pe_params *p, const char *format)
{
	const struct pe_http *h = ctx;
	struct pe_out o = {.fmt = strcmp(format, "npy") ? PE_FMT_JSON : PE_FMT_NPY, .gzip = !strcmp(format, "json")};
	if (pe_out_pick_dtype(NULL, p->def->fixed_dtype, o.fmt, &o.dt, NULL) != 0)
		return 0;
	uint64_t out, need = pe_table_need(p, &o, &out);
	struct pe_budget_stats st = {0};
	if (h->opt.budget)
		pe_budget_stats(h->opt.budget, &st);
	return need != UINT64_MAX && (!h->opt.budget || need <= st.limit) && out <= h->opt.max_response_bytes;
}

struct query {
	int64_t len;
	struct pe_err *err;
	int failed;
};

static enum MHD_Result query_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct query *q = cls;
	char *end;
	if (strcmp(key, "len") != 0) {
		q->failed = pe_err_set(q->err, PE_EINVAL, key, "unknown parameter '%.40s' for /v1/plan (only len)", key);
		return MHD_NO;
	}
	errno = 0;
	long long v = value && *value >= '0' && *value <= '9' ? strtoll(value, &end, 10) : -1;
	if (q->len || v < 1 || errno || *end || v > ((int64_t)1 << 30)) {
		q->failed = pe_err_set(q->err, PE_EINVAL, "len", "len must be given once, an integer from 1 to 2^30");
		return MHD_NO;
	}
	q->len = v;
	return MHD_YES;
}

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
	struct query q = {.err = &err};
	if (r->body_too_big) {
		pe_err_set(&err, PE_ETOOBIG, "body", "the body is over %zu bytes", body_limit(r->h));
		return pe_http_problem(r, conn, &err);
	}
	MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, query_arg, &q);
	if (q.failed)
		return pe_http_problem(r, conn, &err);
	struct plan_job *j = calloc(1, sizeof *j);
	if (!j) {
		pe_err_set(&err, PE_ENOMEM, "", "out of memory");
		return pe_http_problem(r, conn, &err);
	}
	j->os = (struct pe_oneshot){.h = r->h, .run = run_plan, .free = plan_job_free};
	j->opts = (struct pe_plan_opts){
		.len = q.len, .max_elements = r->h->opt.max_elements, .fits_cb = fits_cb, .fits_ctx = r->h};
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
	.allow = "POST, OPTIONS",
	.cors_methods = "POST, OPTIONS",
	.begin_cb = begin_cb,
	.body_cb = pe_http_body_collect,
	.finish_cb = finish_cb,
};
