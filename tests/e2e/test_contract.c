/* End-to-end: one request contract for every declared route (src/http/contract.h). Table-driven:
 * every kind of malformed request is sent to every route that declares what it breaks, and every
 * route answers it with the same problem (status, type, the parameter named):
 *   - the query: an empty name, a name given twice, %00 in a name and in a value, an unknown name,
 *     a value that is not of the declared type: 400 naming the parameter (the empty name: none);
 *   - the body's Content-Type, on every route that takes a body: missing, or another type: 415
 *     naming Content-Type.
 * Each route's well-formed request is answered 2xx first, so a refusal is the malformation's.
 * Media-type parameter names are case-insensitive in every header that carries them (RFC 9110
 * §8.3.1): a multipart body with BOUNDARY=, a JSON body with CHARSET=, a part's Content-Type with
 * a parameter, Accept and Accept-Encoding with Q=. */
#include "support/pe_check.h"
#include "support/pe_daemon.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "posenc/posenc.h"
#include "test_apply_positions_form.h"

enum body { NONE, X_F32, X_F64, POSITIONS, CONFIG, TABLE };

struct route {
	const char *method, *path;
	const char *query; /* a well-formed query ("" none) */
	const char *typed; /* a declared integer parameter */
	const char *good;  /* a value it takes */
	const char *ctype; /* the body's Content-Type (NULL: the route takes no body) */
	enum body body;
};

static const struct route routes[] = {
	{"GET", "/v1/sinusoidal", "len=4&dim=4", "len", "4", NULL, NONE},
	{"GET", "/v1/analysis/order", "len=4&dim=4", "len", "4", NULL, NONE},
	{"POST", "/v1/analysis/order", "", "len", "4", "application/x-npy", X_F64},
	{"GET", "/v1/rope/mrope", "dim=16&mrope_section=4,2,2", "dim", "16", NULL, NONE},
	{"POST", "/v1/rope/mrope", "dim=16&mrope_section=4,2,2", "dim", "16", "application/x-npy", POSITIONS},
	{"POST", "/v1/rope/apply", "", "offset", "0", "application/x-npy", X_F32},
	{"POST", "/v1/sinusoidal/apply", "", "offset", "0", "application/x-npy", X_F32},
	{"POST", "/v1/alibi/apply", "", "offset", "0", "application/x-npy", X_F32},
	{"POST", "/v1/plan", "", "len", "64", "application/json", CONFIG},
	{"PUT", "/v1/learned/c", "", "prefix_tokens", "1", "application/x-npy", TABLE},
	{"GET", "/v1/learned/c", "", "len", "4", NULL, NONE},
	{"GET", "/v1/learned", "", NULL, NULL, NULL, NONE},
	{"DELETE", "/v1/learned/c", "", NULL, NULL, NULL, NONE},
};
#define NROUTES (sizeof routes / sizeof routes[0])

/* A malformed query: what is added to the well-formed one, and the parameter it must name. */
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

struct bodies {
	char *data[TABLE + 1];
	size_t len[TABLE + 1];
};

static void make_bodies(struct bodies *b)
{
	static const char config[] = "{\"model_type\":\"llama\",\"hidden_size\":64,\"num_attention_heads\":4,"
				     "\"max_position_embeddings\":128,\"rope_theta\":10000}";
	size_t x[] = {2, 4, 8}, x2[] = {4, 4}, t[] = {6, 8}, p[] = {3, 4};
	int64_t pos[12] = {0, 1, 2, 3, 0, 1, 1, 2, 0, 1, 2, 2};
	memset(b, 0, sizeof *b);
	b->data[X_F32] = npy_reals(PE_F32, x, 3, &b->len[X_F32]);
	b->data[X_F64] = npy_reals(PE_F64, x2, 2, &b->len[X_F64]);
	b->data[TABLE] = npy_reals(PE_F32, t, 2, &b->len[TABLE]);
	b->data[POSITIONS] = npy_ints(pos, p, 2, 1, &b->len[POSITIONS]);
	b->data[CONFIG] = strdup(config);
	b->len[CONFIG] = strlen(config);
}

static void free_bodies(struct bodies *b)
{
	for (int i = 0; i <= TABLE; i++)
		free(b->data[i]);
}

/* The route's request with this query and Content-Type header ("Content-Type:" removes curl's). */
static void send_route(const struct pe_daemon *d, const struct route *rt, const char *query, const char *ctype_header,
		       const struct bodies *b, struct pe_resp *r)
{
	char url[1024];
	snprintf(url, sizeof url, "%s%s%s", rt->path, *query ? "?" : "", query);
	const char *hs[] = {ctype_header, NULL};
	pe_request(d, rt->method, url, ctype_header ? hs : NULL, rt->body != NONE ? b->data[rt->body] : NULL,
		   rt->body != NONE ? b->len[rt->body] : 0, r);
}

static void send_ok(const struct pe_daemon *d, const struct route *rt, const struct bodies *b)
{
	char ct[128];
	struct pe_resp r;
	snprintf(ct, sizeof ct, "Content-Type: %s", rt->ctype ? rt->ctype : "");
	send_route(d, rt, rt->query, rt->ctype ? ct : NULL, b, &r);
	ck_assert_msg(r.status >= 200 && r.status < 300, "%s %s?%s: %ld %s", rt->method, rt->path, rt->query, r.status,
		      r.body);
	pe_resp_free(&r);
}

/* The problem's "type", to compare across routes. */
static void problem_type(const struct pe_resp *r, char *out, size_t cap)
{
	json_t *doc = pe_resp_json(r);
	snprintf(out, cap, "%s", json_string_value(json_object_get(doc, "type")));
	json_decref(doc);
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

/* query without the parameter name (NULL: all of it) into out. */
static void without(const char *query, const char *name, char *out, size_t cap)
{
	size_t at = 0, n = name ? strlen(name) : 0;
	out[0] = 0;
	for (const char *p = query; *p;) {
		size_t k = strcspn(p, "&");
		if (!(name && k > n && !strncmp(p, name, n) && p[n] == '='))
			at += (size_t)snprintf(out + at, cap - at, "%s%.*s", at ? "&" : "", (int)k, p);
		p += k + (p[k] == '&');
	}
}

/* Every fault on every route that declares what it breaks: one status, one type, the parameter. */
static void query_faults(const struct pe_daemon *d, const struct bodies *b)
{
	char type0[NFAULTS][128] = {{0}};
	for (size_t f = 0; f < NFAULTS; f++)
		for (size_t i = 0; i < NROUTES; i++) {
			const struct route *rt = &routes[i];
			const struct fault *fa = &faults[f];
			char add[256], query[512], param[64], what[1024], ct[128], type[128];
			struct pe_resp r;
			if (fa->typed && !rt->typed)
				continue;
			char base[256];
			snprintf(add, sizeof add, fa->fmt, rt->typed ? rt->typed : "", rt->good ? rt->good : "");
			without(rt->query, fa->typed ? rt->typed : NULL, base, sizeof base);
			snprintf(query, sizeof query, "%s%s%s", base, *base ? "&" : "", add);
			snprintf(what, sizeof what, "%s: %s %s?%s", fa->what, rt->method, rt->path, query);
			snprintf(ct, sizeof ct, "Content-Type: %s", rt->ctype ? rt->ctype : "");
			send_route(d, rt, query, rt->ctype ? ct : NULL, b, &r);
			if (fa->param) /* "%s": the typed parameter */
				snprintf(param, sizeof param, "%s", strcmp(fa->param, "%s") ? fa->param : rt->typed);
			ck_assert_msg(r.status == 400, "%s: %ld %s", what, r.status, r.body);
			pe_assert_problem(&r, 400, fa->param ? param : NULL);
			if (fa->detail)
				detail_has(&r, fa->detail, what);
			problem_type(&r, type, sizeof type);
			if (!type0[f][0])
				snprintf(type0[f], sizeof type0[f], "%s", type);
			ck_assert_msg(!strcmp(type, type0[f]), "%s: type %s, another route said %s", what, type, type0[f]);
			pe_resp_free(&r);
		}
}

/* Every route that takes a body: the same 415 naming Content-Type, whether it is missing or wrong. */
static void media_faults(const struct pe_daemon *d, const struct bodies *b)
{
	static const char *const headers[] = {"Content-Type:", "Content-Type: text/plain",
					      "Content-Type: application/x-www-form-urlencoded", "Content-Type: npy"};
	char type0[128] = "";
	for (size_t i = 0; i < NROUTES; i++)
		for (size_t k = 0; routes[i].ctype && k < sizeof headers / sizeof headers[0]; k++) {
			struct pe_resp r;
			char type[128];
			send_route(d, &routes[i], routes[i].query, headers[k], b, &r);
			ck_assert_msg(r.status == 415, "%s %s with '%s': %ld %s", routes[i].method, routes[i].path, headers[k],
				      r.status, r.body);
			pe_assert_problem(&r, 415, "Content-Type");
			problem_type(&r, type, sizeof type);
			if (!type0[0])
				snprintf(type0, sizeof type0, "%s", type);
			ck_assert_str_eq(type, type0);
			pe_resp_free(&r);
		}
}

static void start(struct pe_daemon *d, char *dir)
{
	ck_assert_ptr_nonnull(mkdtemp(dir));
	const char *args[] = {"--data-dir", dir, NULL};
	pe_daemon_start(d, args);
}

static void stop(struct pe_daemon *d, const char *dir)
{
	char cmd[256];
	pe_daemon_stop(d, 15);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

START_TEST(every_route_refuses_alike)
{
	struct pe_daemon d;
	struct bodies b;
	char dir[] = "/tmp/pe_contract_XXXXXX";
	make_bodies(&b);
	start(&d, dir);
	for (size_t i = 0; i < NROUTES; i++)
		if (strcmp(routes[i].method, "DELETE") != 0)
			send_ok(&d, &routes[i], &b);
	query_faults(&d, &b);
	media_faults(&d, &b);
	send_ok(&d, &routes[NROUTES - 1], &b); /* the DELETE, last: the table was there throughout */
	stop(&d, dir);
	free_bodies(&b);
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
	struct pe_daemon d;
	struct bodies b;
	struct pe_resp r;
	char dir[] = "/tmp/pe_contract_XXXXXX";
	make_bodies(&b);
	start(&d, dir);
	static const char *const bad[] = {"; a=\"x", "; a", "; a=", " x"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		for (size_t k = 0; k < NROUTES; k++) {
			if (!routes[k].ctype)
				continue;
			char ct[128];
			snprintf(ct, sizeof ct, "Content-Type: %s%s", routes[k].ctype, bad[i]);
			send_route(&d, &routes[k], routes[k].query, ct, &b, &r);
			ck_assert_msg(r.status == 400, "%s %s with '%s': %ld %s", routes[k].method, routes[k].path, ct,
				      r.status, r.body);
			pe_assert_problem(&r, 400, "Content-Type");
			pe_resp_free(&r);
		}
	static const char *const boundaries[] = {"Content-Type: multipart/form-data; boundary=" FORM_BOUNDARY ";",
						 "Content-Type: multipart/form-data; boundary=\"" FORM_BOUNDARY "\"; ; "};
	forms_taken(&d, boundaries, 2, "application/x-npy", &b);
	/* a one-byte boundary: between quotes; without, the 400 says how */
	char one[1024];
	const char *hs1[] = {"Content-Type: multipart/form-data; boundary=\"q\"", NULL};
	const char *hs2[] = {"Content-Type: multipart/form-data; boundary=q", NULL};
	int n = snprintf(one, sizeof one, "--q\r\nContent-Disposition: form-data; name=\"x\"\r\nContent-Type: "
			 "application/json\r\n\r\n[[1,2,3,4]]\r\n--q--\r\n");
	pe_request(&d, "POST", "/v1/rope/apply", hs1, one, (size_t)n, &r);
	ck_assert_msg(r.status == 200, "boundary=\"q\": %ld %s", r.status, r.body);
	pe_resp_free(&r);
	pe_request(&d, "POST", "/v1/rope/apply", hs2, one, (size_t)n, &r);
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
		pe_request(&d, "POST", "/v1/rope/apply", hq, "--", 2, &r);
		if (q == 4093) /* read as a boundary: the body, no delimiter, is what is refused */
			ck_assert_msg(r.status == 400 && !strstr(r.body, "boundary="), "4093 quoted: %ld %s", r.status, r.body);
		else {
			pe_assert_problem(&r, 400, "Content-Type");
			detail_has(&r, "2 to 4095 bytes, its quotes counted", "4094 quoted");
		}
		pe_resp_free(&r);
		free(hdr);
	}
	stop(&d, dir);
	free_bodies(&b);
}
END_TEST

/* Parameter names of media types in any case, in every header that carries them. */
START_TEST(parameter_names_any_case)
{
	struct pe_daemon d;
	struct bodies b;
	struct pe_resp r;
	char dir[] = "/tmp/pe_contract_XXXXXX";
	make_bodies(&b);
	start(&d, dir);
	/* multipart/form-data: BOUNDARY=, Boundary=, and a parameter in the part's own Content-Type */
	static const char *const forms[] = {"Content-Type: multipart/form-data; BOUNDARY=" FORM_BOUNDARY,
					    "Content-Type: Multipart/Form-Data; charset=utf-8; Boundary=\"" FORM_BOUNDARY "\""};
	forms_taken(&d, forms, 2, "application/x-npy; Version=1", &b);
	/* a JSON body with CHARSET= */
	const char *json[] = {"Content-Type: application/json; CHARSET=UTF-8", NULL};
	pe_request(&d, "POST", "/v1/plan", json, b.data[CONFIG], b.len[CONFIG], &r);
	ck_assert_msg(r.status == 200, "CHARSET=: %ld %s", r.status, r.body);
	pe_resp_free(&r);
	/* Accept's weight as Q= */
	const char *accept[] = {"Accept: application/json; Q=0, application/x-npy", NULL};
	pe_request(&d, "GET", "/v1/sinusoidal?len=4&dim=4", accept, NULL, 0, &r);
	char ct[64];
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(pe_resp_header(&r, "Content-Type", ct, sizeof ct), "application/x-npy");
	pe_resp_free(&r);
	/* Accept-Encoding's weight as Q=: gzip refused, so the JSON goes uncompressed */
	const char *ae[] = {"Accept-Encoding: gzip;Q=0, identity", NULL};
	pe_request(&d, "GET", "/v1/sinusoidal?len=4&dim=4", ae, NULL, 0, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_ptr_null(pe_resp_header(&r, "Content-Encoding", ct, sizeof ct));
	pe_resp_free(&r);
	stop(&d, dir);
	free_bodies(&b);
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
	struct pe_daemon d;
	char dir[] = "/tmp/pe_contract_XXXXXX";
	start(&d, dir);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char req[1024], buf[16384], want[32];
		int n = snprintf(req, sizeof req, "%s\r\nHost: x\r\n\r\n%sGET /healthz HTTP/1.1\r\nHost: x\r\n"
				 "Connection: close\r\n\r\n", cases[i].head, cases[i].body);
		pe_raw_exchange(&d, req, (size_t)n, buf, sizeof buf, 5000);
		int closes, answers = count_answers(buf, &closes);
		snprintf(want, sizeof want, "HTTP/1.1 %s ", cases[i].status);
		ck_assert_msg(!strncmp(buf, want, strlen(want)), "%s: first answer %.40s", cases[i].head, buf);
		ck_assert_msg(answers == 2 && !closes, "%s: %d answers, the first %s", cases[i].head, answers,
			      closes ? "with Connection: close" : "keeping the connection");
		ck_assert_msg(strstr(buf, "HTTP/1.1 200 "), "%s: the request after it answered 200", cases[i].head);
	}
	stop(&d, dir);
}
END_TEST

/* A client that waits for 100 Continue has sent no body: a refused query is answered at once on
 * every body route, with no 100 before it (the client would then send the body in vain). */
START_TEST(expect_continue_refused_at_once)
{
	struct pe_daemon d;
	char dir[] = "/tmp/pe_contract_XXXXXX";
	start(&d, dir);
	for (size_t i = 0; i < NROUTES; i++) {
		if (!routes[i].ctype)
			continue;
		char req[1024], buf[8192];
		int n = snprintf(req, sizeof req, "%s %s?zzz=1 HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\n"
				 "Content-Length: 4096\r\nExpect: 100-continue\r\n\r\n", routes[i].method,
				 routes[i].path, routes[i].ctype);
		pe_raw_exchange(&d, req, (size_t)n, buf, sizeof buf, 5000);
		ck_assert_msg(!strncmp(buf, "HTTP/1.1 400 ", 13), "%s %s: first answer %.40s", routes[i].method,
			      routes[i].path, buf);
		ck_assert_msg(!strstr(buf, "100 Continue") && strstr(buf, "\"param\":\"zzz\""), "%s %s: %.300s",
			      routes[i].method, routes[i].path, buf);
	}
	stop(&d, dir);
}
END_TEST

/* Expect: 100-continue on a request without a body, with the next request already sent behind
 * it: libmicrohttpd 0.9.75 sends 100 Continue and calls the handler once more with the next
 * request's bytes (size 0) before the final call. Both requests are answered, in order, whether
 * the first is served or refused. */
START_TEST(expect_without_body_pipelined)
{
	struct pe_daemon d;
	char dir[] = "/tmp/pe_contract_XXXXXX";
	static const struct {
		const char *first;
		const char *status;
	} cases[] = {
		{"GET /v1/sinusoidal?len=2&dim=2 HTTP/1.1", "HTTP/1.1 200 "},
		{"GET /v1/sinusoidal?len=2&dim=2&zzz=1 HTTP/1.1", "HTTP/1.1 400 "},
		{"POST /v1/rope/apply?zzz=1 HTTP/1.1\r\nContent-Type: application/x-npy\r\nContent-Length: 0",
		 "HTTP/1.1 400 "},
	};
	start(&d, dir);
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		char req[1024], buf[16384];
		int n = snprintf(req, sizeof req, "%s\r\nHost: x\r\nExpect: 100-continue\r\n\r\n"
				 "GET /v1/sinusoidal?len=2&dim=2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
				 cases[i].first);
		pe_raw_exchange(&d, req, (size_t)n, buf, sizeof buf, 5000);
		const char *a = strstr(buf, cases[i].status);
		ck_assert_msg(a, "%s: no first answer: %.200s", cases[i].first, buf);
		ck_assert_msg(strstr(a + 1, "HTTP/1.1 200 "), "%s: the pipelined request went unanswered: %.300s",
			      cases[i].first, buf);
	}
	stop(&d, dir);
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
	struct pe_daemon d;
	char dir[] = "/tmp/pe_contract_XXXXXX";
	start(&d, dir);
	many_params(&d, 62, 0, 0, "p0");
	many_params(&d, 62, 0, 60, "p0");
	many_params(&d, 62, 30000, 20, "p0"); /* a head near max_header_bytes (32 KiB) */
	many_params(&d, 63, 0, 0, "query");
	many_params(&d, 260, 0, 0, "query");
	many_params(&d, 3000, 0, 0, "query");
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
	pe_raw_exchange(&d, req, n, buf, sizeof buf, 5000);
	ck_assert_msg(!strncmp(buf, "HTTP/1.1 431 ", 13), "100 parameters and a 60 KiB header: %.60s", buf);
	free(req);
	struct pe_resp r;
	pe_get(&d, "/healthz", &r);
	ck_assert_int_eq(r.status, 200);
	pe_resp_free(&r);
	stop(&d, dir);
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
	struct pe_daemon d;
	char dir[] = "/tmp/pe_contract_XXXXXX";
	start(&d, dir);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct pe_resp r;
		char allow[128], pre[128];
		pe_request(&d, cases[i].refused, cases[i].path, NULL, NULL, 0, &r);
		pe_assert_problem(&r, 405, NULL);
		ck_assert_msg(pe_resp_header(&r, "Allow", allow, sizeof allow) && !strcmp(allow, cases[i].allow),
			      "%s %s: 405 with Allow '%s', want '%s'", cases[i].refused, cases[i].path, allow, cases[i].allow);
		pe_resp_free(&r);
		pe_request(&d, "OPTIONS", cases[i].path, NULL, NULL, 0, &r);
		ck_assert_int_eq(r.status, 204);
		ck_assert_msg(pe_resp_header(&r, "Allow", pre, sizeof pre) && !strcmp(pre, cases[i].allow),
			      "OPTIONS %s: Allow '%s', want '%s'", cases[i].path, pre, cases[i].allow);
		pe_resp_free(&r);
	}
	stop(&d, dir);
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
	struct pe_daemon d;
	struct pe_resp r;
	char dir[] = "/tmp/pe_contract_XXXXXX", plain[512], form[512];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	const char *args[] = {"--data-dir", dir, "--max-body-bytes", "1000", NULL};
	pe_daemon_start(&d, args);
	const char *json[] = {"Content-Type: application/json", NULL};
	pe_request(&d, "POST", "/v1/rope/apply?positions=4611686018427387904", json, "[[1,2]]", 7, &r);
	pe_assert_problem(&r, 400, "positions");
	detail_has(&r, "out of range", "positions=2^62");
	pe_resp_free(&r);
	pe_get(&d, "/v1/analysis/similarity?encoding=learned:nosuch", &r);
	pe_assert_problem(&r, 404, "encoding");
	pe_resp_free(&r);
	static char req[8192];
	size_t n = chunked(req, sizeof req, "application/x-npy", "", 2000, "");
	raw_detail(&d, req, n, plain, sizeof plain);
	n = chunked(req, sizeof req, "multipart/form-data; boundary=XyZ",
		    "--XyZ\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\n", 2000, "\r\n--XyZ--\r\n");
	raw_detail(&d, req, n, form, sizeof form);
	ck_assert_msg(strstr(plain, "1000") && !strcmp(plain, form), "plain: '%s', multipart: '%s'", plain, form);
	stop(&d, dir);
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
