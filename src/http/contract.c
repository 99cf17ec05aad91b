/* The begin phase of every declared route (contract.h): the checks that are the same for all,
 * run once, before the handler's code. The order is the one a client can act on: the method,
 * then who asks (guard_cb), then what the URL asks (query), then the body's type and size. */
#include "http/contract.h"
#include "http/handler.h"
#include "http/media.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static enum MHD_Result refuse(struct req *r, int code, const char *param, const char *detail)
{
	struct pe_err err = {0};
	pe_err_set(&err, code, param, "%s", detail);
	return pe_http_refuse(r, &err, NULL);
}

/* methods appended to r->allow_buf (a list so far at bytes), ", " between; the new length. */
static size_t allow_add(struct req *r, size_t at, const char *methods)
{
	size_t n = strlen(methods);
	if (at + n + 3 < sizeof r->allow_buf) {
		if (at)
			memcpy(r->allow_buf + at, ", ", 2), at += 2;
		memcpy(r->allow_buf + at, methods, n + 1);
		at += n;
	}
	return at;
}

/* The entry for this request, or NULL (405) with r->allow the methods the route takes, OPTIONS
 * (the router's preflight) with them: one list for a 405 and a preflight alike. */
static const struct pe_contract *select_entry(struct req *r, struct MHD_Connection *conn, const char *url)
{
	const struct pe_handler *hd = r->handler;
	size_t at = 0;
	r->allow_buf[0] = 0;
	if (hd->contract_cb) {
		const struct pe_contract *c = hd->contract_cb(r, conn, url);
		if (c)
			return c;
		at = allow_add(r, at, r->allow);
	} else
		for (const struct pe_contract *c = hd->contract; c->methods; c++) {
			if (pe_http_method_listed(c->methods, r->method))
				return c;
			at = allow_add(r, at, c->methods);
		}
	allow_add(r, at, "OPTIONS");
	r->allow = r->allow_buf;
	return NULL;
}

void pe_contract_allow(struct req *r, struct MHD_Connection *conn, const char *url)
{
	if (select_entry(r, conn, url))
		r->allow = NULL; /* a route that declares OPTIONS itself: none does */
}

/* A refused choice of the declaration's more_choices_param lists the route's own forms too. */
static void append_more_choices(const struct pe_contract *c, struct pe_err *err)
{
	size_t n = strlen(err->detail);
	if (err->choices && c->more_choices_param && strcmp(err->param, c->more_choices_param) == 0)
		snprintf(err->detail + n, sizeof err->detail - n, ", %s", c->more_choices);
}

/* The query into r->query: 0, or a refusal. A route that takes a body holds the query's refusal
 * (r->query->late) until the body has been read, unless its query comes first: a client that
 * sends its body regardless then reads the 400 on a connection that stays open. A client that
 * waits for 100 Continue has sent no body byte yet: it gets the 400 at once, and no 100. */
static int read_query(struct req *r, const struct pe_contract *c, const char *url)
{
	struct pe_query *q = r->query = &r->query_store;
	struct pe_err err = {0};
	const struct pe_table_def *params = c->target_params ? r->target : c->params;
	pe_query_init(q, params, c->extras, c->output, url);
	for (size_t i = 0; i < r->nargs && !err.code; i++) {
		const struct pe_query_arg *a = &r->args[i];
		pe_query_take(q, a->key, a->key_len, a->value, a->value_len, &err);
	}
	if (!err.code && c->finish)
		pe_params_finish(&q->params, &err);
	if (!err.code)
		return 0;
	append_more_choices(c, &err);
	if (c->media && !c->query_first && !r->expect_continue) {
		q->late = err;
		return 0;
	}
	pe_http_refuse(r, &err, NULL);
	return err.code;
}

uint64_t pe_contract_body_limit(const struct req *r)
{
	const struct pe_contract *c = r->contract;
	return c && c->body_limit_cb ? c->body_limit_cb(r->h) : r->h->opt.max_body_bytes;
}

static const char *limit_name(const struct req *r)
{
	return r->contract->limit_name ? r->contract->limit_name : "max_body_bytes";
}

/* Content-Type, Content-Length (framing's), and the body wanted within the limit. */
static enum MHD_Result begin_body(struct req *r, struct MHD_Connection *conn)
{
	const struct pe_contract *c = r->contract;
	struct pe_err err = {0};
	uint64_t limit = pe_contract_body_limit(r);
	const char *ct = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
	if (atomic_load(&r->h->draining))
		return refuse(r, PE_EDRAINING, "", "the service is shutting down");
	if (pe_media_match(ct, c->media) < 0) {
		pe_err_set(&err, PE_EMEDIATYPE, "Content-Type", "the body must be sent with Content-Type %s%s",
			   strchr(c->media, ',') ? "one of: " : "", c->media);
		return pe_http_refuse(r, &err, NULL);
	}
	if (pe_media_check(ct) < 0)
		return refuse(r, PE_EINVAL, "Content-Type", "Content-Type must be type/subtype and parameters "
			      "name=value (a token or a quoted string), each after a ';'");
	if (r->declared > limit) {
		pe_err_set(&err, PE_ETOOBIG, "body", "the body is %" PRIu64 " bytes; the limit is %" PRIu64 " (%s)",
			   r->declared, limit, limit_name(r));
		return pe_http_refuse(r, &err, NULL);
	}
	if (pe_media_match(ct, "multipart/form-data") < 0) { /* multipart: the handler reads the parts */
		pe_buf_init(&r->body, (size_t)limit);
		if (r->declared && pe_buf_reserve(&r->body, (size_t)r->declared) != 0)
			return refuse(r, PE_ENOMEM, "body", "out of memory");
		r->body_wanted = 1;
	}
	return MHD_YES;
}

enum MHD_Result pe_contract_begin(struct req *r, struct MHD_Connection *conn, const char *url)
{
	const struct pe_handler *hd = r->handler;
	struct pe_err err = {0};
	const struct pe_contract *c = r->contract = select_entry(r, conn, url);
	if (!c) {
		pe_err_set(&err, PE_EMETHOD, "", "%s is not allowed here; use %s", r->method, r->allow);
		return pe_http_refuse(r, &err, NULL);
	}
	enum MHD_Result rc = hd->guard_cb ? hd->guard_cb(r, conn, url) : MHD_YES;
	if (rc != MHD_YES || r->refusal.code)
		return rc;
	if (read_query(r, c, url) != 0)
		return MHD_YES;
	if (c->media && (rc = begin_body(r, conn)) != MHD_YES)
		return rc;
	if (r->refusal.code || !hd->begin_cb)
		return MHD_YES;
	return hd->begin_cb(r, conn, url);
}

enum MHD_Result pe_contract_finish(struct req *r, struct MHD_Connection *conn, int *answered)
{
	struct pe_err err = {0};
	*answered = r->contract && (r->body_too_big || (r->query && r->query->late.code));
	if (!*answered)
		return MHD_YES;
	if (!r->body_too_big)
		return pe_http_problem(r, conn, &r->query->late);
	pe_err_set(&err, PE_ETOOBIG, "body", "the body is over %" PRIu64 " bytes (%s)", pe_contract_body_limit(r),
		   limit_name(r));
	return pe_http_problem(r, conn, &err);
}

struct pe_query *pe_contract_query(struct req *r) { return r->query; }

const char *pe_contract_query_value(const struct req *r, const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; i < r->nargs; i++)
		if (r->args[i].key_len == n && !strncasecmp(r->args[i].key, name, n))
			return r->args[i].value;
	return NULL;
}

void pe_contract_take_params(struct req *r, struct pe_params *to)
{
	*to = r->query->params;
	memset(&r->query->params, 0, sizeof r->query->params);
}

const struct pe_contract *pe_contract_only(struct req *r, const struct pe_contract *c)
{
	if (pe_http_method_listed(c->methods, r->method))
		return c;
	r->allow = c->methods;
	return NULL;
}

void pe_contract_end(struct req *r)
{
	if (r->query) {
		pe_query_destroy(r->query);
		r->query = NULL;
	}
}
