/* End-to-end: one request contract for every declared route (src/http/contract.h). The routes are
 * found, not listed: every table and transform of the core's registry, and the paths no registry
 * entry names (the learned tables, /v1/plan, a learned similarity), each served by the handler of
 * pe_http_handlers[] that claims it, with the methods its preflight's Allow lists, the media type
 * its 415 names and a typed parameter of its declaration. Every handler that declares a contract
 * must claim one of those paths, so a new route is covered without a line here; examples[] gives
 * a well-formed request where a route needs one to be answered 2xx.
 *
 * Every kind of malformed request is sent to every route that declares what it breaks, and every
 * route answers it with the same problem (status, type, the parameter named):
 *   - the query: an empty name, a name given twice, %00 in a name and in a value, an unknown name,
 *     a value that is not of the declared type, an empty value: 400 naming the parameter (the
 *     empty name: none);
 *   - the method: one no entry lists: 405 with the preflight's Allow;
 *   - the body's framing, on every route that takes a body: a Content-Type missing or of another
 *     type (415 naming Content-Type), a Content-Length that is not a number (400 naming
 *     Content-Length), one past the route's limit (413 naming body).
 * Media-type parameter names are case-insensitive in every header that carries them (RFC 9110
 * §8.3.1): a multipart body with BOUNDARY=, a JSON body with CHARSET=, a part's Content-Type with
 * a parameter, Accept and Accept-Encoding with Q=. */
#include "support/pe_check.h"
#include "support/pe_daemon.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http/handler.h"
#include "posenc/posenc.h"
#include "test_apply_positions_form.h"

enum body { NONE, X_F32, X_F64, POSITIONS, IDS, TIMESTEPS, TIMESTEPS_JSON, CONFIG, TABLE, NBODIES };

/* A well-formed request, answered 2xx; sent in this order (the learned table exists from its PUT
 * to its DELETE, last). */
struct example {
	const char *method, *path, *query, *ctype;
	enum body body;
	const char *typed, *good; /* a typed parameter where the test cannot see the declaration's */
};

static const struct example examples[] = {
	{"GET", "/v1/sinusoidal", "len=4&dim=4", NULL, NONE, NULL, NULL},
	{"GET", "/v1/analysis/order", "len=4&dim=4", NULL, NONE, NULL, NULL},
	{"POST", "/v1/analysis/order", "", "application/x-npy", X_F64, NULL, NULL},
	{"GET", "/v1/analysis/similarity", "len=4&dim=4", NULL, NONE, NULL, NULL},
	{"GET", "/v1/rope/mrope", "dim=16&mrope_section=4,2,2", NULL, NONE, NULL, NULL},
	{"POST", "/v1/rope/mrope", "dim=16&mrope_section=4,2,2", "application/x-npy", POSITIONS, NULL, NULL},
	{"POST", "/v1/rope/axial", "preset=flux", "application/x-npy", IDS, NULL, NULL},
	{"POST", "/v1/sinusoidal/timestep", "dim=8", "application/x-npy", TIMESTEPS, NULL, NULL},
	{"POST", "/v1/sinusoidal/timestep", "dim=8", "application/json", TIMESTEPS_JSON, NULL, NULL},
	{"POST", "/v1/rope/apply", "", "application/x-npy", X_F32, NULL, NULL},
	{"POST", "/v1/sinusoidal/apply", "", "application/x-npy", X_F32, NULL, NULL},
	{"POST", "/v1/alibi/apply", "", "application/x-npy", X_F32, NULL, NULL},
	{"POST", "/v1/plan", "", "application/json", CONFIG, NULL, NULL},
	{"PUT", "/v1/learned/c", "", "application/x-npy", TABLE, "prefix_tokens", "1"},
	{"GET", "/v1/learned/c", "", NULL, NONE, "len", "4"},
	{"GET", "/v1/analysis/similarity", "encoding=learned:c", NULL, NONE, "len", "4"},
	{"GET", "/v1/learned", "", NULL, NONE, NULL, NULL},
	{"DELETE", "/v1/learned/c", "", NULL, NONE, NULL, NULL},
};
#define NEXAMPLES (sizeof examples / sizeof examples[0])

/* The paths no table or transform of the registry names, with the query that selects their
 * declaration. */
static const struct {
	const char *path, *query;
} other_paths[] = {
	{"/v1/learned", ""}, {"/v1/learned/c", ""}, {"/v1/plan", ""}, {"/v1/analysis/similarity", "encoding=learned:c"}};
#define NOTHER (sizeof other_paths / sizeof other_paths[0])

/* A route as found: one method of one path. */
struct route {
	char method[16], path[96], query[64];
	char typed[40], good[40]; /* a declared integer (or real) parameter and a value it takes; "" none */
	char ctype[96];           /* the first media type its body takes; "" no body */
	char allow[128];          /* its preflight's Allow */
	enum body body;           /* an example's body ("x" when none is given) */
};

#define MAX_ROUTES 128
static struct route routes[MAX_ROUTES];
static size_t nroutes;

struct bodies {
	char *data[NBODIES];
	size_t len[NBODIES];
};

static void make_bodies(struct bodies *b)
{
	static const char config[] = "{\"model_type\":\"llama\",\"hidden_size\":64,\"num_attention_heads\":4,"
				     "\"max_position_embeddings\":128,\"rope_theta\":10000}";
	size_t x[] = {2, 4, 8}, x2[] = {4, 4}, t[] = {6, 8}, p[] = {3, 4}, q[] = {4, 3}, ts[] = {3};
	int64_t pos[12] = {0, 1, 2, 3, 0, 1, 1, 2, 0, 1, 2, 2}, ids[12] = {0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 1, 1};
	memset(b, 0, sizeof *b);
	b->data[NONE] = strdup("x");
	b->len[NONE] = 1;
	b->data[X_F32] = npy_reals(PE_F32, x, 3, &b->len[X_F32]);
	b->data[X_F64] = npy_reals(PE_F64, x2, 2, &b->len[X_F64]);
	b->data[TABLE] = npy_reals(PE_F32, t, 2, &b->len[TABLE]);
	b->data[POSITIONS] = npy_ints(pos, p, 2, 1, &b->len[POSITIONS]);
	b->data[IDS] = npy_ints(ids, q, 2, 1, &b->len[IDS]);
	b->data[TIMESTEPS] = npy_reals(PE_F64, ts, 1, &b->len[TIMESTEPS]);
	b->data[TIMESTEPS_JSON] = strdup("[1, 500, 999]");
	b->len[TIMESTEPS_JSON] = strlen(b->data[TIMESTEPS_JSON]);
	b->data[CONFIG] = strdup(config);
	b->len[CONFIG] = strlen(config);
}

static void free_bodies(struct bodies *b)
{
	for (int i = 0; i < NBODIES; i++)
		free(b->data[i]);
}

/* ---- finding the routes ---- */

/* The declared handler that serves url (the first of pe_http_handlers[] to claim it), and the
 * registry entry it matched. Handlers without a declaration answer no query: passed by (their
 * match_cb may need the context init_cb makes; a declared handler's is asked without one). */
static const struct pe_handler *handler_of(const char *url, const struct pe_table_def **target)
{
	for (size_t i = 0; i < pe_http_nhandlers; i++) {
		const struct pe_handler *hd = pe_http_handlers[i];
		const void *t = NULL;
		if ((hd->contract || hd->contract_cb) && hd->match_cb(NULL, url, &t) >= 0) {
			*target = t;
			return hd;
		}
	}
	return NULL;
}

/* The declaration's parameters for method: a static entry's own, else (contract_cb: transforms,
 * analysis tables) those of the registry entry matched. */
static const struct pe_table_def *declared_params(const struct pe_handler *hd, const char *method,
						  const struct pe_table_def *target)
{
	for (const struct pe_contract *c = hd->contract; c && c->methods; c++)
		if (strstr(c->methods, method))
			return c->target_params ? target : c->params;
	return hd->contract ? NULL : target;
}

/* A typed parameter of def and a value it takes (its default, else its minimum). */
static void pick_typed(const struct pe_table_def *def, struct route *rt)
{
	for (int pass = 0; def && pass < 2 && !rt->typed[0]; pass++)
		for (int i = 0; i < def->nparams && !rt->typed[0]; i++) {
			const struct pe_param_spec *sp = &def->params[i];
			if (sp->type != (pass ? PE_PT_REAL : PE_PT_INT))
				continue;
			snprintf(rt->typed, sizeof rt->typed, "%s", sp->name);
			if (sp->def && *sp->def)
				snprintf(rt->good, sizeof rt->good, "%s", sp->def);
			else
				snprintf(rt->good, sizeof rt->good, "%.17g", sp->min);
		}
}

static const struct example *example_of(const char *method, const char *path, const char *query)
{
	for (size_t i = 0; i < NEXAMPLES; i++)
		if (!strcmp(examples[i].method, method) && !strcmp(examples[i].path, path) &&
		    (!*query || strstr(examples[i].query, query)))
			return &examples[i];
	return NULL;
}

/* The first media type a 415 names ("... with Content-Type one of: a, b" or "... Content-Type a"). */
static void media_of(const struct pe_daemon *d, struct route *rt, const struct bodies *b)
{
	char url[256];
	struct pe_resp r;
	const char *hs[] = {"Content-Type: text/x-none", NULL};
	snprintf(url, sizeof url, "%s%s%s", rt->path, *rt->query ? "?" : "", rt->query);
	pe_request(d, rt->method, url, hs, b->data[NONE], b->len[NONE], &r);
	ck_assert_msg(r.status == 415, "%s %s with text/x-none: %ld %s", rt->method, url, r.status, r.body);
	json_t *doc = pe_resp_json(&r);
	const char *detail = json_string_value(json_object_get(doc, "detail"));
	const char *at = detail ? strstr(detail, "Content-Type ") : NULL;
	ck_assert_msg(at, "%s %s: 415 '%s' names no type", rt->method, url, detail ? detail : "");
	at += strlen("Content-Type ");
	if (!strncmp(at, "one of: ", 8))
		at += 8;
	snprintf(rt->ctype, sizeof rt->ctype, "%.*s", (int)strcspn(at, ", "), at);
	json_decref(doc);
	pe_resp_free(&r);
}

/* The path's methods, from its preflight's Allow (GET stands for HEAD; OPTIONS is the router's). */
static void add_routes(const struct pe_daemon *d, const char *path, const char *query, const struct bodies *b)
{
	char url[256], allow[128];
	struct pe_resp r;
	const struct pe_table_def *target = NULL;
	const struct pe_handler *hd = handler_of(path, &target);
	ck_assert_msg(hd, "%s: no declared handler claims it", path);
	snprintf(url, sizeof url, "%s%s%s", path, *query ? "?" : "", query);
	pe_request(d, "OPTIONS", url, NULL, NULL, 0, &r);
	ck_assert_msg(r.status == 204 && pe_resp_header(&r, "Allow", allow, sizeof allow), "OPTIONS %s: %ld", url, r.status);
	pe_resp_free(&r);
	for (char *m = allow, *end; *m; m = end + (*end != 0)) {
		m += strspn(m, " ");
		end = m + strcspn(m, ",");
		char method[16];
		snprintf(method, sizeof method, "%.*s", (int)(end - m), m);
		if (!strcmp(method, "HEAD") || !strcmp(method, "OPTIONS"))
			continue;
		ck_assert_uint_lt(nroutes, MAX_ROUTES);
		struct route *rt = &routes[nroutes++];
		const struct example *ex = example_of(method, path, query);
		memset(rt, 0, sizeof *rt);
		snprintf(rt->method, sizeof rt->method, "%s", method);
		snprintf(rt->path, sizeof rt->path, "%s", path);
		snprintf(rt->query, sizeof rt->query, "%s", query);
		snprintf(rt->allow, sizeof rt->allow, "%s", allow);
		if (ex && ex->typed) {
			snprintf(rt->typed, sizeof rt->typed, "%s", ex->typed);
			snprintf(rt->good, sizeof rt->good, "%s", ex->good);
		} else
			pick_typed(declared_params(hd, method, target), rt);
		rt->body = ex ? ex->body : NONE;
		if (!strcmp(method, "POST") || !strcmp(method, "PUT"))
			media_of(d, rt, b);
	}
}

/* Every route of the registry and of other_paths; every declared handler serves one of them. */
static void find_routes(const struct pe_daemon *d, const struct bodies *b)
{
	size_t nt, nx;
	const struct pe_table_def *const *defs[2] = {pe_table_all(&nt), pe_transform_all(&nx)};
	char path[96];
	nroutes = 0;
	for (int k = 0; k < 2; k++)
		for (size_t i = 0; i < (k ? nx : nt); i++) {
			snprintf(path, sizeof path, "/v1/%s", defs[k][i]->name);
			add_routes(d, path, "", b);
		}
	for (size_t i = 0; i < NOTHER; i++)
		add_routes(d, other_paths[i].path, other_paths[i].query, b);
	for (size_t i = 0; i < pe_http_nhandlers; i++) {
		const struct pe_handler *hd = pe_http_handlers[i];
		int served = !(hd->contract || hd->contract_cb);
		for (size_t k = 0; k < nroutes && !served; k++) {
			const struct pe_table_def *t;
			served = handler_of(routes[k].path, &t) == hd;
		}
		ck_assert_msg(served, "handler %s declares a contract but no route found here reaches it: add its path "
			      "to other_paths", hd->name);
	}
	for (size_t i = 0; i < NEXAMPLES; i++) {
		int found = 0;
		for (size_t k = 0; k < nroutes && !found; k++)
			found = !strcmp(routes[k].method, examples[i].method) && !strcmp(routes[k].path, examples[i].path);
		ck_assert_msg(found, "example %s %s: no such route", examples[i].method, examples[i].path);
	}
}

/* ---- sending ---- */

/* The route's request with this query and Content-Type header ("Content-Type:" removes curl's). */
static void send_route(const struct pe_daemon *d, const struct route *rt, const char *query, const char *ctype_header,
		       const struct bodies *b, struct pe_resp *r)
{
	char url[1024];
	snprintf(url, sizeof url, "%s%s%s", rt->path, *query ? "?" : "", query);
	const char *hs[] = {ctype_header, NULL};
	pe_request(d, rt->method, url, ctype_header ? hs : NULL, rt->ctype[0] ? b->data[rt->body] : NULL,
		   rt->ctype[0] ? b->len[rt->body] : 0, r);
}

static void send_example(const struct pe_daemon *d, const struct example *ex, const struct bodies *b)
{
	char ct[128], url[1024];
	struct pe_resp r;
	snprintf(ct, sizeof ct, "Content-Type: %s", ex->ctype ? ex->ctype : "");
	snprintf(url, sizeof url, "%s%s%s", ex->path, *ex->query ? "?" : "", ex->query);
	const char *hs[] = {ct, NULL};
	pe_request(d, ex->method, url, ex->ctype ? hs : NULL, ex->ctype ? b->data[ex->body] : NULL,
		   ex->ctype ? b->len[ex->body] : 0, &r);
	ck_assert_msg(r.status >= 200 && r.status < 300, "%s %s: %ld %s", ex->method, url, r.status, r.body);
	pe_resp_free(&r);
}

/* The problem's "type", to compare across routes. */
static void problem_type(const struct pe_resp *r, char *out, size_t cap)
{
	json_t *doc = pe_resp_json(r);
	snprintf(out, cap, "%s", json_string_value(json_object_get(doc, "type")));
	json_decref(doc);
}

/* The same problem type for every route refused for one fault: the first seen is kept in type0. */
static void same_type(const struct pe_resp *r, char *type0, size_t cap, const char *what)
{
	char type[128];
	problem_type(r, type, sizeof type);
	if (!type0[0])
		snprintf(type0, cap, "%s", type);
	ck_assert_msg(!strcmp(type, type0), "%s: type %s, another route said %s", what, type, type0);
}

static void detail_has(const struct pe_resp *r, const char *want, const char *what)
{
	json_t *doc = pe_resp_json(r);
	const char *detail = json_string_value(json_object_get(doc, "detail"));
	ck_assert_msg(detail && strstr(detail, want), "%s: detail '%s' lacks '%s'", what, detail ? detail : "", want);
	if (!strcmp(want, "empty name"))
		ck_assert_msg(!json_object_get(doc, "param"), "%s: an empty name is no parameter to name", what);
	json_decref(doc);
}

/* ---- the malformed requests ---- */

/* A malformed query: what is added to the route's own, and the parameter it must name. */
struct fault {
	const char *what;
	const char *fmt;   /* printf format; %1$s: the route's typed parameter, %2$s a value it takes */
	int typed;         /* needs a typed parameter */
	const char *param; /* named by the problem; "%s": the typed parameter; NULL: none */
	const char *detail;
};

static const struct fault faults[] = {
	{"an empty name", "=1", 0, NULL, "empty name"},
	{"an empty name, no value", "&=", 0, NULL, "empty name"},
	{"a name given twice", "%1$s=%2$s&%1$s=%2$s", 1, "%s", "more than once"},
	{"%00 in a name", "a%%00b=1", 0, "a%00b", "unknown parameter"},
	{"%00 in a value", "%1$s=%%00", 1, "%s", NULL},
	{"an unknown name", "nope=1", 0, "nope", "unknown parameter 'nope'"},
	{"a value not of the declared type", "%1$s=1.5x", 1, "%s", NULL},
	{"an empty value", "%1$s=", 1, "%s", "empty value"},
};
#define NFAULTS (sizeof faults / sizeof faults[0])

/* Every fault on every route that declares what it breaks: one status, one type, the parameter.
 * The route's own query (the one selecting its declaration) goes first; the others are not
 * needed: an unknown, repeated or mistyped name is refused as it is read, before required values
 * are looked for. */
static void query_faults(const struct pe_daemon *d, const struct bodies *b)
{
	char type0[NFAULTS][128] = {{0}};
	for (size_t f = 0; f < NFAULTS; f++)
		for (size_t i = 0; i < nroutes; i++) {
			const struct route *rt = &routes[i];
			const struct fault *fa = &faults[f];
			char add[256], query[512], param[64], what[1024], ct[128];
			struct pe_resp r;
			if (fa->typed && !rt->typed[0])
				continue;
			snprintf(add, sizeof add, fa->fmt, rt->typed, rt->good);
			snprintf(query, sizeof query, "%s%s%s", rt->query, *rt->query ? "&" : "", add);
			snprintf(what, sizeof what, "%s: %s %s?%s", fa->what, rt->method, rt->path, query);
			snprintf(ct, sizeof ct, "Content-Type: %s", rt->ctype);
			send_route(d, rt, query, rt->ctype[0] ? ct : NULL, b, &r);
			if (fa->param) /* "%s": the typed parameter */
				snprintf(param, sizeof param, "%s", strcmp(fa->param, "%s") ? fa->param : rt->typed);
			ck_assert_msg(r.status == 400, "%s: %ld %s", what, r.status, r.body);
			pe_assert_problem(&r, 400, fa->param ? param : NULL);
			if (fa->detail)
				detail_has(&r, fa->detail, what);
			same_type(&r, type0[f], sizeof type0[f], what);
			pe_resp_free(&r);
		}
}

/* Every route: a method its declaration does not list is the same 405, with the preflight's Allow. */
static void method_faults(const struct pe_daemon *d, const struct bodies *b)
{
	char type0[128] = "";
	for (size_t i = 0; i < nroutes; i++) {
		struct route rt = routes[i];
		struct pe_resp r;
		char allow[128], what[256];
		snprintf(rt.method, sizeof rt.method, "PATCH");
		snprintf(what, sizeof what, "PATCH %s?%s", rt.path, rt.query);
		send_route(d, &rt, rt.query, NULL, b, &r);
		pe_assert_problem(&r, 405, NULL);
		ck_assert_msg(pe_resp_header(&r, "Allow", allow, sizeof allow) && !strcmp(allow, rt.allow),
			      "%s: Allow '%s', the preflight's '%s'", what, allow, rt.allow);
		same_type(&r, type0, sizeof type0, what);
		pe_resp_free(&r);
	}
}

/* Every route that takes a body: the same 415 naming Content-Type, whether it is missing or wrong. */
static void media_faults(const struct pe_daemon *d, const struct bodies *b)
{
	static const char *const headers[] = {"Content-Type:", "Content-Type: text/plain",
					      "Content-Type: application/x-www-form-urlencoded", "Content-Type: npy"};
	char type0[128] = "";
	for (size_t i = 0; i < nroutes; i++)
		for (size_t k = 0; routes[i].ctype[0] && k < sizeof headers / sizeof headers[0]; k++) {
			struct pe_resp r;
			char what[512];
			snprintf(what, sizeof what, "%.15s %.95s with '%.100s'", routes[i].method, routes[i].path, headers[k]);
			send_route(d, &routes[i], routes[i].query, headers[k], b, &r);
			ck_assert_msg(r.status == 415, "%s: %ld %s", what, r.status, r.body);
			pe_assert_problem(&r, 415, "Content-Type");
			same_type(&r, type0, sizeof type0, what);
			pe_resp_free(&r);
		}
}

/* A raw request to the route with this Content-Length (and no body): the answer's status line and
 * problem into buf. */
static void raw_length(const struct pe_daemon *d, const struct route *rt, const char *length, char *buf, size_t cap)
{
	char req[1024];
	int n = snprintf(req, sizeof req, "%s %s%s%s HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\nContent-Length: %s\r\n"
			 "Connection: close\r\n\r\n", rt->method, rt->path, *rt->query ? "?" : "", rt->query, rt->ctype,
			 length);
	pe_raw_exchange(d, req, (size_t)n, buf, cap, 5000);
}

/* Every route that takes a body: a Content-Length that is no number is the same 400 naming it, one
 * past any limit the same 413 naming body, both before a byte of body is read. */
static void length_faults(const struct pe_daemon *d)
{
	static const struct {
		const char *length, *status, *param;
	} cases[] = {
		{"12x", "HTTP/1.1 400 ", "\"param\":\"Content-Length\""},
		{"-1", "HTTP/1.1 400 ", "\"param\":\"Content-Length\""},
		{"1099511627776", "HTTP/1.1 413 ", "\"param\":\"body\""},
	};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		char type0[256] = "";
		for (size_t i = 0; i < nroutes; i++) {
			char buf[8192];
			if (!routes[i].ctype[0])
				continue;
			raw_length(d, &routes[i], cases[c].length, buf, sizeof buf);
			const char *type = strstr(buf, "\"type\":");
			ck_assert_msg(!strncmp(buf, cases[c].status, strlen(cases[c].status)) && strstr(buf, cases[c].param) && type,
				      "%s %s with Content-Length %s: %.300s", routes[i].method, routes[i].path, cases[c].length, buf);
			char t[256];
			snprintf(t, sizeof t, "%.*s", (int)strcspn(type + 7, ","), type + 7);
			if (!type0[0])
				snprintf(type0, sizeof type0, "%s", t);
			ck_assert_msg(!strcmp(t, type0), "%s %s with Content-Length %s: type %s, another route said %s",
				      routes[i].method, routes[i].path, cases[c].length, t, type0);
		}
	}
}

/* ---- the daemon ---- */

struct fixture {
	struct pe_daemon d;
	struct bodies b;
	char dir[32];
};

/* A daemon on its own data_dir (extra arguments after it, or NULL) and the routes it serves. */
static void up(struct fixture *fx, const char *const *extra)
{
	const char *args[16] = {"--data-dir", fx->dir};
	size_t n = 2;
	snprintf(fx->dir, sizeof fx->dir, "/tmp/pe_contract_XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(fx->dir));
	for (; extra && *extra && n < 15; extra++)
		args[n++] = *extra;
	args[n] = NULL;
	make_bodies(&fx->b);
	pe_daemon_start(&fx->d, args);
	find_routes(&fx->d, &fx->b);
}

static void down(struct fixture *fx)
{
	char cmd[256];
	ck_assert_int_eq(pe_daemon_stop(&fx->d, 15), 0);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", fx->dir);
	ck_assert_int_eq(system(cmd), 0);
	free_bodies(&fx->b);
}

START_TEST(every_route_refuses_alike)
{
	struct fixture fx;
	up(&fx, NULL);
	for (size_t i = 0; i + 1 < NEXAMPLES; i++)
		send_example(&fx.d, &examples[i], &fx.b);
	query_faults(&fx.d, &fx.b);
	method_faults(&fx.d, &fx.b);
	media_faults(&fx.d, &fx.b);
	length_faults(&fx.d);
	send_example(&fx.d, &examples[NEXAMPLES - 1], &fx.b); /* the DELETE, last: the table was there throughout */
	down(&fx);
}
END_TEST

/* rope/apply with a form of one part x (of this Content-Type) is answered 200 under each of the
 * n Content-Type headers. */
static void forms_taken(const struct pe_daemon *d, const char *const *headers, size_t n, const char *part_type,
			const struct bodies *b)
{
	struct pe_resp r;
	struct form_part parts[] = {{"x", part_type, b->data[X_F32], b->len[X_F32]}};
	size_t len;
	char *body = form_body(parts, 1, &len);
	for (size_t i = 0; i < n; i++) {
		const char *hs[] = {headers[i], NULL};
		pe_request(d, "POST", "/v1/rope/apply?format=npy", hs, body, len, &r);
		ck_assert_msg(r.status == 200, "%s: %ld %s", headers[i], r.status, r.body);
		pe_resp_free(&r);
	}
	free(body);
}

/* One reading of Content-Type's parameters on every body route: a list that does not parse is a
 * 400 naming Content-Type on npy and JSON routes as on multipart ones; a multipart boundary may be
 * followed by empty parameters and be 1 byte long (RFC 2046: 1 to 70) between quotes (MHD takes
 * 2 bytes at least as written), and the limits told are the ones applied, quotes counted. */
START_TEST(content_type_parameters)
{
	struct fixture fx;
	struct pe_resp r;
	up(&fx, NULL);
	static const char *const bad[] = {"; a=\"x", "; a", "; a=", " x"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		for (size_t k = 0; k < nroutes; k++) {
			if (!routes[k].ctype[0])
				continue;
			char ct[128];
			snprintf(ct, sizeof ct, "Content-Type: %s%s", routes[k].ctype, bad[i]);
			send_route(&fx.d, &routes[k], routes[k].query, ct, &fx.b, &r);
			ck_assert_msg(r.status == 400, "%s %s with '%s': %ld %s", routes[k].method, routes[k].path, ct,
				      r.status, r.body);
			pe_assert_problem(&r, 400, "Content-Type");
			pe_resp_free(&r);
		}
	static const char *const boundaries[] = {"Content-Type: multipart/form-data; boundary=" FORM_BOUNDARY ";",
						 "Content-Type: multipart/form-data; boundary=\"" FORM_BOUNDARY "\"; ; "};
	forms_taken(&fx.d, boundaries, 2, "application/x-npy", &fx.b);
	/* a one-byte boundary: between quotes; without, the 400 says how */
	char one[1024];
	const char *hs1[] = {"Content-Type: multipart/form-data; boundary=\"q\"", NULL};
	const char *hs2[] = {"Content-Type: multipart/form-data; boundary=q", NULL};
	int n = snprintf(one, sizeof one, "--q\r\nContent-Disposition: form-data; name=\"x\"\r\nContent-Type: "
			 "application/json\r\n\r\n[[1,2,3,4]]\r\n--q--\r\n");
	pe_request(&fx.d, "POST", "/v1/rope/apply", hs1, one, (size_t)n, &r);
	ck_assert_msg(r.status == 200, "boundary=\"q\": %ld %s", r.status, r.body);
	pe_resp_free(&r);
	pe_request(&fx.d, "POST", "/v1/rope/apply", hs2, one, (size_t)n, &r);
	pe_assert_problem(&r, 400, "Content-Type");
	detail_has(&r, "boundary=\"q\"", "boundary=q");
	pe_resp_free(&r);
	/* quoted: 4093 bytes taken, 4094 refused by the limit its message gives (4095, quotes counted) */
	for (size_t q = 4093; q <= 4094; q++) {
		char *hdr = malloc(q + 64);
		int at = snprintf(hdr, 64, "Content-Type: multipart/form-data; boundary=\"");
		memset(hdr + at, 'b', q);
		snprintf(hdr + at + q, 8, "\"");
		const char *hq[] = {hdr, NULL};
		pe_request(&fx.d, "POST", "/v1/rope/apply", hq, "--", 2, &r);
		if (q == 4093) /* read as a boundary: the body, no delimiter, is what is refused */
			ck_assert_msg(r.status == 400 && !strstr(r.body, "boundary="), "4093 quoted: %ld %s", r.status, r.body);
		else {
			pe_assert_problem(&r, 400, "Content-Type");
			detail_has(&r, "2 to 4095 bytes, its quotes counted", "4094 quoted");
		}
		pe_resp_free(&r);
		free(hdr);
	}
	down(&fx);
}
END_TEST

/* Parameter names of media types in any case, in every header that carries them. */
START_TEST(parameter_names_any_case)
{
	struct fixture fx;
	struct pe_resp r;
	up(&fx, NULL);
	/* multipart/form-data: BOUNDARY=, Boundary=, and a parameter in the part's own Content-Type */
	static const char *const forms[] = {"Content-Type: multipart/form-data; BOUNDARY=" FORM_BOUNDARY,
					    "Content-Type: Multipart/Form-Data; charset=utf-8; Boundary=\"" FORM_BOUNDARY "\""};
	forms_taken(&fx.d, forms, 2, "application/x-npy; Version=1", &fx.b);
	/* a JSON body with CHARSET= */
	const char *json[] = {"Content-Type: application/json; CHARSET=UTF-8", NULL};
	pe_request(&fx.d, "POST", "/v1/plan", json, fx.b.data[CONFIG], fx.b.len[CONFIG], &r);
	ck_assert_msg(r.status == 200, "CHARSET=: %ld %s", r.status, r.body);
	pe_resp_free(&r);
	/* Accept's weight as Q= */
	const char *accept[] = {"Accept: application/json; Q=0, application/x-npy", NULL};
	pe_request(&fx.d, "GET", "/v1/sinusoidal?len=4&dim=4", accept, NULL, 0, &r);
	char ct[64];
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(pe_resp_header(&r, "Content-Type", ct, sizeof ct), "application/x-npy");
	pe_resp_free(&r);
	/* Accept-Encoding's weight as Q=: gzip refused, so the JSON goes uncompressed */
	const char *ae[] = {"Accept-Encoding: gzip;Q=0, identity", NULL};
	pe_request(&fx.d, "GET", "/v1/sinusoidal?len=4&dim=4", ae, NULL, 0, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_ptr_null(pe_resp_header(&r, "Content-Encoding", ct, sizeof ct));
	pe_resp_free(&r);
	down(&fx);
}
END_TEST

/* How many responses buf holds, and whether the first said Connection: close. */
static int count_answers(const char *buf, int *first_closes)
{
	int n = 0;
	const char *first_end = strstr(buf, "\r\n\r\n");
	*first_closes = 0;
	for (const char *p = buf; (p = strstr(p, "HTTP/1.1 ")) != NULL; p++)
		n++;
	for (const char *p = buf; first_end && (p = strcasestr(p, "\r\nConnection: close")) && p < first_end; p++)
		*first_closes = 1;
	return n;
}

/* A refusal keeps the connection open as any answer does, when no body was dropped with it: two
 * requests in one write, the first refused, are both answered. */
START_TEST(refusals_keep_the_connection)
{
	static const struct {
		const char *head; /* request line and headers, without the empty line */
		const char *body;
		const char *status;
	} cases[] = {
		{"GET /v1/sinusoidal?len=1&dim=2&zzz=1 HTTP/1.1", "", "400"},
		{"GET /v1/sinusoidal?len=1&dim=2&dim=2 HTTP/1.1", "", "400"},
		{"GET /v1/sinusoidal?len=x&dim=2 HTTP/1.1", "", "400"},
		{"GET /v1/learned/c?zzz=1 HTTP/1.1", "", "400"},
		{"GET /v1/learned?zzz=1 HTTP/1.1", "", "400"},
		{"GET /v1/analysis/similarity?zzz=1 HTTP/1.1", "", "400"},
		{"DELETE /v1/learned/c?zzz=1 HTTP/1.1", "", "400"},
		{"POST /v1/rope/apply?zzz=1 HTTP/1.1\r\nContent-Type: application/x-npy\r\nContent-Length: 4", "abcd", "400"},
		{"POST /v1/plan?zzz=1 HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2", "{}", "400"},
		{"POST /v1/rope/mrope?zzz=1 HTTP/1.1\r\nContent-Type: application/x-npy\r\nTransfer-Encoding: chunked",
		 "4\r\nabcd\r\n0\r\n\r\n", "400"},
		{"POST /v1/rope/apply HTTP/1.1\r\nContent-Type: text/plain\r\nContent-Length: 0", "", "415"},
		{"POST /v1/sinusoidal?len=1&dim=2 HTTP/1.1\r\nContent-Length: 0", "", "405"},
		{"DELETE /v1/sinusoidal HTTP/1.1", "", "405"},
		{"GET /v1/nosuch HTTP/1.1", "", "404"},
	};
	struct fixture fx;
	up(&fx, NULL);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char req[1024], buf[16384], want[32];
		int n = snprintf(req, sizeof req, "%s\r\nHost: x\r\n\r\n%sGET /healthz HTTP/1.1\r\nHost: x\r\n"
				 "Connection: close\r\n\r\n", cases[i].head, cases[i].body);
		pe_raw_exchange(&fx.d, req, (size_t)n, buf, sizeof buf, 5000);
		int closes, answers = count_answers(buf, &closes);
		snprintf(want, sizeof want, "HTTP/1.1 %s ", cases[i].status);
		ck_assert_msg(!strncmp(buf, want, strlen(want)), "%s: first answer %.40s", cases[i].head, buf);
		ck_assert_msg(answers == 2 && !closes, "%s: %d answers, the first %s", cases[i].head, answers,
			      closes ? "with Connection: close" : "keeping the connection");
		ck_assert_msg(strstr(buf, "HTTP/1.1 200 "), "%s: the request after it answered 200", cases[i].head);
	}
	down(&fx);
}
END_TEST

/* A client that waits for 100 Continue has sent no body: a refused query is answered at once on
 * every body route, with no 100 before it (the client would then send the body in vain). */
START_TEST(expect_continue_refused_at_once)
{
	struct fixture fx;
	up(&fx, NULL);
	for (size_t i = 0; i < nroutes; i++) {
		if (!routes[i].ctype[0])
			continue;
		char req[1024], buf[8192];
		int n = snprintf(req, sizeof req, "%s %s?zzz=1 HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\n"
				 "Content-Length: 4096\r\nExpect: 100-continue\r\n\r\n", routes[i].method,
				 routes[i].path, routes[i].ctype);
		pe_raw_exchange(&fx.d, req, (size_t)n, buf, sizeof buf, 5000);
		ck_assert_msg(!strncmp(buf, "HTTP/1.1 400 ", 13), "%s %s: first answer %.40s", routes[i].method,
			      routes[i].path, buf);
		ck_assert_msg(!strstr(buf, "100 Continue") && strstr(buf, "\"param\":\"zzz\""), "%s %s: %.300s",
			      routes[i].method, routes[i].path, buf);
	}
	down(&fx);
}
END_TEST

/* Expect: 100-continue on a request without a body, with the next request already sent behind
 * it: libmicrohttpd 0.9.75 sends 100 Continue and calls the handler once more with the next
 * request's bytes (size 0) before the final call. Both requests are answered, in order, whether
 * the first is served or refused. */
START_TEST(expect_without_body_pipelined)
{
	struct fixture fx;
	static const struct {
		const char *first;
		const char *status;
	} cases[] = {
		{"GET /v1/sinusoidal?len=2&dim=2 HTTP/1.1", "HTTP/1.1 200 "},
		{"GET /v1/sinusoidal?len=2&dim=2&zzz=1 HTTP/1.1", "HTTP/1.1 400 "},
		{"POST /v1/rope/apply?zzz=1 HTTP/1.1\r\nContent-Type: application/x-npy\r\nContent-Length: 0",
		 "HTTP/1.1 400 "},
	};
	up(&fx, NULL);
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		char req[1024], buf[16384];
		int n = snprintf(req, sizeof req, "%s\r\nHost: x\r\nExpect: 100-continue\r\n\r\n"
				 "GET /v1/sinusoidal?len=2&dim=2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
				 cases[i].first);
		pe_raw_exchange(&fx.d, req, (size_t)n, buf, sizeof buf, 5000);
		const char *a = strstr(buf, cases[i].status);
		ck_assert_msg(a, "%s: no first answer: %.200s", cases[i].first, buf);
		ck_assert_msg(strstr(a + 1, "HTTP/1.1 200 "), "%s: the pipelined request went unanswered: %.300s",
			      cases[i].first, buf);
	}
	down(&fx);
}
END_TEST

/* GET /v1/sinusoidal?len=2&dim=2 with nparams unknown parameters p0=1 ..., the last one's value
 * pad bytes long, and nheaders header fields; the answer's problem must name param. */
static void many_params(const struct pe_daemon *d, size_t nparams, size_t pad, size_t nheaders, const char *param)
{
	size_t cap = 64 + nparams * 16 + pad + nheaders * 32 + 128, at = 0;
	char *req = malloc(cap), buf[16384];
	at += (size_t)snprintf(req + at, cap - at, "GET /v1/sinusoidal?len=2&dim=2");
	for (size_t i = 0; i < nparams; i++)
		at += (size_t)snprintf(req + at, cap - at, "&p%zu=1", i);
	memset(req + at, 'a', pad);
	at += pad;
	at += (size_t)snprintf(req + at, cap - at, " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n");
	for (size_t i = 0; i < nheaders; i++)
		at += (size_t)snprintf(req + at, cap - at, "X-H%zu: 1\r\n", i);
	at += (size_t)snprintf(req + at, cap - at, "\r\n");
	pe_raw_exchange(d, req, at, buf, sizeof buf, 5000);
	char want[128];
	snprintf(want, sizeof want, "\"param\":\"%s\"", param);
	ck_assert_msg(!strncmp(buf, "HTTP/1.1 400 ", 13) && strstr(buf, want),
		      "%zu + 2 parameters, %zu more bytes, %zu header fields (%zu bytes): a 400 naming %s, got %.300s",
		      nparams, pad, nheaders, at, param, buf);
	free(req);
}

/* Every query within the limits is read and answered; past PE_QUERY_MAX_PARAMS (64) parameters,
 * a 400 naming the query instead of libmicrohttpd's silence. */
START_TEST(query_limits)
{
	struct fixture fx;
	up(&fx, NULL);
	many_params(&fx.d, 62, 0, 0, "p0");
	many_params(&fx.d, 62, 0, 60, "p0");
	many_params(&fx.d, 62, 30000, 20, "p0"); /* a head near max_header_bytes (32 KiB) */
	many_params(&fx.d, 63, 0, 0, "query");
	many_params(&fx.d, 260, 0, 0, "query");
	many_params(&fx.d, 3000, 0, 0, "query");
	/* too many parameters in a head too large for the pool: libmicrohttpd's own 431 (the query
	 * was cut, the access handler never runs), and the daemon serves on */
	size_t n = 0, cap = 80000;
	char *req = malloc(cap), buf[4096];
	n += (size_t)snprintf(req, cap, "GET /v1/sinusoidal?len=2&dim=2");
	for (int i = 0; i < 100; i++)
		n += (size_t)snprintf(req + n, cap - n, "&p%d=1", i);
	n += (size_t)snprintf(req + n, cap - n, " HTTP/1.1\r\nHost: x\r\nX-Big: ");
	memset(req + n, 'a', 60000);
	n += 60000;
	n += (size_t)snprintf(req + n, cap - n, "\r\n\r\n");
	pe_raw_exchange(&fx.d, req, n, buf, sizeof buf, 5000);
	ck_assert_msg(!strncmp(buf, "HTTP/1.1 431 ", 13), "100 parameters and a 60 KiB header: %.60s", buf);
	free(req);
	struct pe_resp r;
	pe_get(&fx.d, "/healthz", &r);
	ck_assert_int_eq(r.status, 200);
	pe_resp_free(&r);
	down(&fx);
}
END_TEST

/* The Allow of a route's 405 is that of its preflight, OPTIONS among them; and a method the
 * preflight lists is not answered 405. */
START_TEST(allow_from_the_declaration)
{
	static const struct {
		const char *path, *refused, *allow;
	} cases[] = {
		{"/v1/sinusoidal?len=2&dim=2", "POST", "GET, HEAD, OPTIONS"},
		{"/v1/rope/mrope", "PUT", "GET, HEAD, POST, OPTIONS"},
		{"/v1/rope/apply", "GET", "POST, OPTIONS"},
		{"/v1/plan", "GET", "POST, OPTIONS"},
		{"/v1/analysis/similarity?len=4&dim=4", "POST", "GET, HEAD, OPTIONS"},
		{"/v1/learned", "PUT", "GET, HEAD, OPTIONS"},
		{"/v1/learned/c", "POST", "GET, HEAD, PUT, DELETE, OPTIONS"},
		{"/healthz", "POST", "GET, HEAD, OPTIONS"},
	};
	struct fixture fx;
	up(&fx, NULL);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct pe_resp r;
		char allow[128], pre[128];
		pe_request(&fx.d, cases[i].refused, cases[i].path, NULL, NULL, 0, &r);
		pe_assert_problem(&r, 405, NULL);
		ck_assert_msg(pe_resp_header(&r, "Allow", allow, sizeof allow) && !strcmp(allow, cases[i].allow),
			      "%s %s: 405 with Allow '%s', want '%s'", cases[i].refused, cases[i].path, allow, cases[i].allow);
		pe_resp_free(&r);
		pe_request(&fx.d, "OPTIONS", cases[i].path, NULL, NULL, 0, &r);
		ck_assert_int_eq(r.status, 204);
		ck_assert_msg(pe_resp_header(&r, "Allow", pre, sizeof pre) && !strcmp(pre, cases[i].allow),
			      "OPTIONS %s: Allow '%s', want '%s'", cases[i].path, pre, cases[i].allow);
		pe_resp_free(&r);
	}
	down(&fx);
}
END_TEST

/* The problem's detail of a raw exchange's answer into out. */
static void raw_detail(const struct pe_daemon *d, const char *req, size_t len, char *out, size_t cap)
{
	char buf[16384];
	pe_raw_exchange(d, req, len, buf, sizeof buf, 5000);
	const char *body = strstr(buf, "\r\n\r\n");
	json_t *doc = body ? json_loads(body + 4, 0, NULL) : NULL;
	const char *detail = doc ? json_string_value(json_object_get(doc, "detail")) : NULL;
	snprintf(out, cap, "%.200s", detail ? detail : buf);
	json_decref(doc);
}

/* A chunked body of n bytes (of fill) after head and before tail, to path with Content-Type ctype. */
static size_t chunked(char *req, size_t cap, const char *ctype, const char *head, size_t n, const char *tail)
{
	size_t at = (size_t)snprintf(req, cap, "POST /v1/rope/apply HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\n"
				     "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n%zx\r\n%s",
				     ctype, strlen(head) + n + strlen(tail), head);
	memset(req + at, 'a', n);
	at += n;
	return at + (size_t)snprintf(req + at, cap - at, "%s\r\n0\r\n\r\n", tail);
}

/* Details name what is wrong: an integer out of range is not called "not an integer", a missing
 * learned table of encoding= is named by encoding, and a chunked body past the limit is told the
 * same way plain or multipart. */
START_TEST(details_name_the_fault)
{
	struct fixture fx;
	struct pe_resp r;
	char plain[512], form[512];
	const char *args[] = {"--max-body-bytes", "1000", NULL};
	up(&fx, args);
	const char *json[] = {"Content-Type: application/json", NULL};
	pe_request(&fx.d, "POST", "/v1/rope/apply?positions=4611686018427387904", json, "[[1,2]]", 7, &r);
	pe_assert_problem(&r, 400, "positions");
	detail_has(&r, "out of range", "positions=2^62");
	pe_resp_free(&r);
	pe_get(&fx.d, "/v1/analysis/similarity?encoding=learned:nosuch", &r);
	pe_assert_problem(&r, 404, "encoding");
	pe_resp_free(&r);
	/* encoding chooses the declaration; the one chosen refuses a repeat, and a %00, naming encoding */
	pe_get(&fx.d, "/v1/analysis/similarity?encoding=learned:nosuch&encoding=learned:nosuch", &r);
	pe_assert_problem(&r, 400, "encoding");
	detail_has(&r, "more than once", "encoding twice");
	pe_resp_free(&r);
	pe_get(&fx.d, "/v1/analysis/similarity?encoding=learned:no%00such", &r);
	pe_assert_problem(&r, 400, "encoding");
	pe_resp_free(&r);
	/* a decimal past a double's range: below the range's bound, or too close to 0 inside it */
	pe_get(&fx.d, "/v1/sinusoidal?len=4&dim=4&base=1e-320", &r);
	pe_assert_problem(&r, 400, "base");
	detail_has(&r, "base must be between 1e-300 and ", "base=1e-320");
	pe_resp_free(&r);
	pe_get(&fx.d, "/v1/sinusoidal?len=4&dim=4&base=1e400", &r);
	pe_assert_problem(&r, 400, "base");
	detail_has(&r, "base must be between 1e-300 and ", "base=1e400");
	pe_resp_free(&r);
	pe_get(&fx.d, "/v1/rope?len=4&dim=4&base=1e-400", &r);
	pe_assert_problem(&r, 400, "base");
	detail_has(&r, "base=1e-400 is too close to 0 for a double: a nonzero value needs a magnitude of at least "
		   "2.2250738585072014e-308", "rope base=1e-400");
	pe_resp_free(&r);
	static char req[8192];
	size_t n = chunked(req, sizeof req, "application/x-npy", "", 2000, "");
	raw_detail(&fx.d, req, n, plain, sizeof plain);
	n = chunked(req, sizeof req, "multipart/form-data; boundary=XyZ",
		    "--XyZ\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\n", 2000, "\r\n--XyZ--\r\n");
	raw_detail(&fx.d, req, n, form, sizeof form);
	ck_assert_msg(strstr(plain, "1000") && !strcmp(plain, form), "plain: '%s', multipart: '%s'", plain, form);
	down(&fx);
}
END_TEST

static Suite *contract_suite(void)
{
	Suite *s = suite_create("contract");
	TCase *tc = tcase_create("contract");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, every_route_refuses_alike);
	tcase_add_test(tc, parameter_names_any_case);
	tcase_add_test(tc, refusals_keep_the_connection);
	tcase_add_test(tc, expect_continue_refused_at_once);
	tcase_add_test(tc, expect_without_body_pipelined);
	tcase_add_test(tc, query_limits);
	tcase_add_test(tc, allow_from_the_declaration);
	tcase_add_test(tc, details_name_the_fault);
	tcase_add_test(tc, content_type_parameters);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(contract_suite)
