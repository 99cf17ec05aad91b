/* Model plans, the output side: an encoding's parameters, notes and warnings as the family rules
 * (plan.c, rope.c) add them; its url, made by the table's own parameter code (pe_params_set, _finish,
 * _canonical: the url is the canonical GET, so its ETag is that of any hand-written query for the
 * same table, and parameters the table refuses are the plan's 422 naming the config key each came
 * from, never a url the server would refuse); the plan as JSON; and the pick of one encoding for
 * the CLI.
 *
 * len is capped here, not in the rules: the largest len whose table still fits max_elements is
 * found by bisection over the table's own shape function, so every table is capped by the count
 * the server will check, whatever its shape (rope 2·len·dim, alibi heads·len²). */
#include "plan/internal.h"
#include "posenc/core.h"
#include "posenc/output.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pe_plan_enc *pe_plan_enc_add(struct pe_plan *plan, const char *kind, const char *table,
				    const char *len_key, const char *layers)
{
	if (plan->nenc >= PE_PLAN_MAX_ENC)
		return NULL;
	struct pe_plan_enc *e = &plan->enc[plan->nenc++];
	memset(e, 0, sizeof *e);
	e->kind = kind;
	e->table = table;
	e->len_key = len_key;
	e->layers = layers;
	e->attention_scaling = 1;
	return e;
}

static char *vformat(const char *fmt, va_list ap)
{
	char *s = NULL;
	return vasprintf(&s, fmt, ap) < 0 ? NULL : s;
}

void pe_plan_param(struct pe_plan_enc *e, const char *key, const char *fmt, ...)
{
	va_list ap;
	if (e->nparams >= PE_PLAN_MAX_PARAMS)
		return;
	va_start(ap, fmt);
	char *v = vformat(fmt, ap);
	va_end(ap);
	if (v) {
		e->params[e->nparams].key = key;
		e->params[e->nparams++].value = v;
	}
}

void pe_plan_source(struct pe_plan_enc *e, const char *key, const char *source)
{
	for (size_t k = e->nparams; k-- > 0;)
		if (!strcmp(e->params[k].key, key)) {
			free(e->params[k].source);
			e->params[k].source = source ? strdup(source) : NULL; /* NULL when out of memory: unnamed */
			return;
		}
}

void pe_plan_real_text(double v, char *buf)
{
	if (v == 0 || (v == floor(v) && fabs(v) < 1e15)) { /* 10000, not 1e+04 */
		snprintf(buf, 32, "%.0f", v);
		return;
	}
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, 32, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			return;
	}
}

void pe_plan_param_real(struct pe_plan_enc *e, const char *key, double v)
{
	char buf[32];
	pe_plan_real_text(v, buf);
	pe_plan_param(e, key, "%s", buf);
}

void pe_plan_note(struct pe_plan_enc *e, const char *fmt, ...)
{
	va_list ap;
	if (e->nnotes >= PE_PLAN_MAX_NOTES)
		return;
	va_start(ap, fmt);
	char *v = vformat(fmt, ap);
	va_end(ap);
	if (v)
		e->notes[e->nnotes++] = v;
}

void pe_plan_warn(struct pe_plan *plan, const char *fmt, ...)
{
	va_list ap;
	if (plan->nwarnings >= PE_PLAN_MAX_WARNINGS)
		return;
	va_start(ap, fmt);
	char *v = vformat(fmt, ap);
	va_end(ap);
	if (v)
		plan->warnings[plan->nwarnings++] = v;
}

void pe_plan_destroy(struct pe_plan *plan)
{
	for (size_t i = 0; i < plan->nenc; i++) {
		struct pe_plan_enc *e = &plan->enc[i];
		for (size_t k = 0; k < e->nparams; k++) {
			free(e->params[k].value);
			free(e->params[k].source);
		}
		for (size_t k = 0; k < e->nnotes; k++)
			free(e->notes[k]);
		free(e->url);
	}
	for (size_t k = 0; k < plan->nwarnings; k++)
		free(plan->warnings[k]);
	free(plan->generator);
	memset(plan, 0, sizeof *plan);
}

/* ---- urls ---- */

/* The table's parameters for len positions, finished (defaults, cross checks). */
static int table_params(const struct pe_table_def *def, const struct pe_plan_enc *e, int64_t len,
			struct pe_params *p, struct pe_err *err)
{
	char lenbuf[40];
	int rc = 0;
	pe_params_init(p, def);
	for (size_t k = 0; k < e->nparams && rc == 0; k++)
		rc = pe_params_set(p, e->params[k].key, e->params[k].value, err);
	snprintf(lenbuf, sizeof lenbuf, "%s%lld", e->len_prefix ? e->len_prefix : "", (long long)len);
	if (rc == 0 && e->len_key)
		rc = pe_params_set(p, e->len_key, lenbuf, err);
	if (rc == 0)
		rc = pe_params_finish(p, err);
	if (rc != 0)
		pe_params_destroy(p);
	return rc;
}

/* Would the server whose limits o gives answer the table of p (finished) as format ("json" with
 * gzip, the larger; or "npy")? Its 413 check before a job (budget_bytes) and its output buffer
 * (max_response_bytes), from the writers' own bounds. */
static int response_fits(const struct pe_params *p, const char *format, const struct pe_plan_opts *o)
{
	struct pe_out out = {.fmt = strcmp(format, "npy") ? PE_FMT_JSON : PE_FMT_NPY, .gzip = !strcmp(format, "json")};
	if (pe_out_pick_dtype(NULL, p->def->fixed_dtype, out.fmt, &out.dt, NULL) != 0)
		return 0;
	uint64_t bound, need = pe_out_table_need(p, &out, &bound);
	return need != UINT64_MAX && (!o->budget_bytes || need <= o->budget_bytes) && bound <= o->max_response_bytes;
}

/* Does the table for len positions fit: at most max_elements, with any intermediate table (the
 * server's 413 checks), and with fmt ("json", "npy"; NULL: elements only) within the server's
 * response limits (response_fits)? Parameters that fail do not. */
static int len_fits(const struct pe_table_def *def, const struct pe_plan_enc *e, int64_t len,
		    const struct pe_plan_opts *o, const char *fmt)
{
	struct pe_params p;
	struct pe_shape s;
	struct pe_cost c;
	int of = 0;
	if (table_params(def, e, len, &p, NULL) != 0)
		return 0;
	size_t n = pe_table_shape(&p, &s) == 0 ? pe_shape_count(&s, &of) : 0;
	int ok = !of && pe_table_cost(&p, &c) == 0 &&
		 (!o->max_elements || (n <= o->max_elements && c.intermediate <= o->max_elements));
	if (ok && fmt && o->max_response_bytes)
		ok = response_fits(&p, fmt, o);
	pe_params_destroy(&p);
	return ok;
}

/* The largest len <= want that fits (len_fits), given that len 1 fits (checked by the caller:
 * a table too large at len 1 is a 422, not a url capped to a len the server refuses). */
static int64_t cap_len(const struct pe_table_def *def, const struct pe_plan_enc *e, int64_t want,
		       const struct pe_plan_opts *o, const char *fmt)
{
	if (!e->len_key || len_fits(def, e, want, o, fmt))
		return want;
	int64_t lo = 1, hi = want; /* fits(lo), not fits(hi) */
	while (hi - lo > 1) {
		int64_t mid = lo + (hi - lo) / 2;
		if (len_fits(def, e, mid, o, fmt))
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* u with every '+' (of an exponent, "1e+04") as %2B: in a query a '+' reads as a space. A new
 * string; u is freed. */
static char *escape_plus(char *u)
{
	size_t n = 0;
	for (const char *c = u; c && *c; c++)
		n += *c == '+';
	if (!u || !n)
		return u;
	char *o = malloc(strlen(u) + 2 * n + 1), *w = o;
	for (const char *c = u; o && *c; c++)
		w = *c == '+' ? memcpy(w, "%2B", 3), w + 3 : (*w = *c, w + 1);
	if (o)
		*w = 0;
	free(u);
	return o;
}

/* "/v1/<table>?k=v&...&<len_key>=len" as planned, for a table this posenc cannot check. */
static char *plain_url(const struct pe_plan_enc *e, int64_t len)
{
	size_t cap = 96 + strlen(e->table);
	for (size_t k = 0; k < e->nparams; k++)
		cap += strlen(e->params[k].key) + strlen(e->params[k].value) + 2;
	char *u = malloc(cap);
	if (!u)
		return NULL;
	size_t n = (size_t)snprintf(u, cap, "/v1/%s", e->table);
	for (size_t k = 0; k < e->nparams; k++)
		n += (size_t)snprintf(u + n, cap - n, "%c%s=%s", k ? '&' : '?', e->params[k].key, e->params[k].value);
	if (e->len_key)
		snprintf(u + n, cap - n, "%c%s=%s%lld", e->nparams ? '&' : '?', e->len_key, e->len_prefix ? e->len_prefix : "",
			 (long long)len);
	return escape_plus(u);
}

/* The canonical GET of p, with "&format=<fmt>" when fmt is given. */
static char *canonical_url(const struct pe_table_def *def, const struct pe_params *p, const char *fmt)
{
	size_t cap = (size_t)PE_MAX_LIST * 26 * 2 + 256;
	char *u = malloc(cap);
	if (!u)
		return NULL;
	int n = snprintf(u, cap, "/v1/%s?", def->name);
	int q = pe_params_canonical(p, u + n, cap - (size_t)n - 32);
	if (q < 0) {
		free(u);
		return NULL;
	}
	if (fmt)
		snprintf(u + n + q, cap - (size_t)(n + q), "&format=%s", fmt);
	return escape_plus(u);
}

/* Without a table posenc can check: rope-like tables are 2·len·rotary_dim elements. */
static int64_t cap_plain(const struct pe_plan_enc *e, int64_t len, uint64_t max)
{
	uint64_t per = e->rotary_dim > 0 ? 2 * (uint64_t)e->rotary_dim : 1;
	return max && e->len_key && (uint64_t)len > max / per ? (int64_t)(max / per ? max / per : 1) : len;
}

static void warn_capped(struct pe_plan *plan, const struct pe_plan_enc *e, int64_t want, int64_t len, uint64_t max)
{
	if (len < want)
		pe_plan_warn(plan, "%s (%s): len %lld capped to %lld, the most positions whose table fits max_elements (%llu)",
			     e->kind, e->layers ? e->layers : "listed layers", (long long)want, (long long)len,
			     (unsigned long long)max);
}

/* The format of e's url and its len, so that the url is answered as given by the server whose
 * limits o gives (len already fits max_elements).
 *
 * When the table's JSON would pass the response limits (any Accept-Encoding: gzip holds the text
 * and its copy), the url stays JSON. Else it asks for npy at the same len if that fits, and only
 * when even npy does not is len capped (to the most positions npy fits), with a warning naming
 * the cap. npy before a cap because the plan's len is the model's context, the table the user
 * asked for: a binary body loads in one call (numpy.load, torch) at 4 bytes a value, while a
 * capped JSON table would silently be a different (shorter) table than the model's. */
static int fit_response(struct pe_plan *plan, const struct pe_table_def *def, struct pe_plan_enc *e,
			int64_t *len, const struct pe_plan_opts *o)
{
	if (!o->max_response_bytes || len_fits(def, e, *len, o, "json"))
		return 0;
	e->format = "npy";
	if (!len_fits(def, e, e->len_key ? 1 : 0, o, "npy"))
		return -1;
	int64_t capped = *len ? cap_len(def, e, *len, o, "npy") : 0;
	if (capped < *len)
		pe_plan_warn(plan, "%s (%s): len %lld capped to %lld, the most positions whose table fits the server's "
			     "response limits (response_budget_bytes, max_response_bytes) even as npy",
			     e->kind, e->layers ? e->layers : "listed layers", (long long)*len, (long long)capped);
	pe_plan_note(e, "format=npy: as JSON this table would be over the server's response limits "
		     "(response_budget_bytes, max_response_bytes); npy loads with numpy.load");
	*len = capped;
	return 0;
}

/* Does the table take e's parameters: at len, or at len 1 when only the length is past the
 * table's own bound (M-RoPE's segments stop at 999999999, below ?len's 2^30)? The bisection of
 * cap_len then finds the largest len the table takes and the server serves. */
static int params_ok(const struct pe_table_def *def, const struct pe_plan_enc *e, int64_t len, struct pe_err *err)
{
	struct pe_params p;
	if (table_params(def, e, len ? len : 1, &p, err) == 0 ||
	    (len > 1 && table_params(def, e, 1, &p, NULL) == 0)) {
		pe_params_destroy(&p);
		return 1;
	}
	return 0;
}

/* The planned parameter of e named key, or NULL. */
static const struct pe_plan_param *planned(const struct pe_plan_enc *e, const char *key)
{
	for (size_t k = 0; k < e->nparams; k++)
		if (!strcmp(e->params[k].key, key))
			return &e->params[k];
	return NULL;
}

/* The table refused e's parameters (why: the table's problem, naming its parameter): a 422 naming
 * the config key that parameter was read from, with the value as planned and the table's reason. */
static int refused(const struct pe_plan_enc *e, const struct pe_err *why, struct pe_err *err)
{
	const struct pe_plan_param *p = planned(e, why->param);
	const char *key = p && p->source ? p->source : *why->param ? why->param : e->table;
	if (!p) /* a cross check naming no planned parameter */
		return pe_err_set(err, PE_EUNPROCESSABLE, key, "/v1/%s refuses the planned parameters (%.*s)", e->table,
				  PE_ERR_DETAIL_MAX / 2, why->detail);
	return pe_err_set(err, PE_EUNPROCESSABLE, key, "%.64s = %.40s: /v1/%s refuses it (%.*s)", key, p->value, e->table,
			  PE_ERR_DETAIL_MAX / 2, why->detail);
}

/* The table is over limit (max_elements, the response limits) at its smallest: len 1, or the
 * size the config fixes. A 422 naming the config key of the parameter that sizes the table
 * besides its length (rope's dim, alibi's heads, sinusoidal2d's height). */
static int too_big(const struct pe_plan_enc *e, const char *limit, struct pe_err *err)
{
	static const struct {
		const char *table, *param;
	} sizes[] = {{"rope", "dim"}, {"rope/mrope", "dim"}, {"alibi", "heads"}, {"sinusoidal2d", "height"},
		     {"relative/t5", "num_buckets"}};
	const struct pe_plan_param *p = NULL;
	for (size_t k = 0; k < sizeof sizes / sizeof sizes[0] && !p; k++)
		if (!strcmp(sizes[k].table, e->table))
			p = planned(e, sizes[k].param);
	for (size_t k = 0; k < e->nparams && (!p || !p->source); k++) /* else the first named parameter */
		if (e->params[k].source)
			p = &e->params[k];
	const char *key = p && p->source ? p->source : p ? p->key : e->table;
	return pe_err_set(err, PE_EUNPROCESSABLE, key, "%.64s makes the /v1/%s table (%s=%.40s) over %s even "
			  "at its smallest%s", key, e->table, p ? p->key : "?", p ? p->value : "?", limit,
			  e->len_key ? " (len 1)" : "");
}

/* The url is longer than the server's request line takes: a 422 naming the config key of its
 * longest value (a factor list). */
static int too_long(const struct pe_plan_enc *e, size_t n, size_t max, struct pe_err *err)
{
	const struct pe_plan_param *p = NULL;
	for (size_t k = 0; k < e->nparams; k++)
		if (!p || strlen(e->params[k].value) > strlen(p->value))
			p = &e->params[k];
	const char *key = p && p->source ? p->source : p ? p->key : e->table;
	return pe_err_set(err, PE_EUNPROCESSABLE, key, "%.64s makes the url of /v1/%s %zu bytes long; the server takes "
			  "urls of at most %zu (max_header_bytes less room for the headers)", key, e->table, n, max);
}

static int url_fits(const struct pe_plan_enc *e, const struct pe_plan_opts *o, struct pe_err *err)
{
	size_t max = o->max_url ? o->max_url : PE_PLAN_MAX_URL, n = e->url ? strlen(e->url) : 0;
	if (!e->url)
		return pe_err_set(err, PE_ENOMEM, "", "out of memory");
	return n > max ? too_long(e, n, max, err) : 0;
}

int pe_plan_finish_enc(struct pe_plan *plan, struct pe_plan_enc *e, int64_t len, const struct pe_plan_opts *o,
		       struct pe_err *err)
{
	if (!e->table || e->url) /* none, or finished already (a tower planned before) */
		return 0;
	const struct pe_table_def *def = pe_table_find(e->table);
	struct pe_params p;
	struct pe_err why = {0};
	if (!e->len_key)
		len = 0;
	if (def && !params_ok(def, e, len, &why))
		return refused(e, &why, err);
	if (def) {
		if (!len_fits(def, e, len ? 1 : 0, o, NULL))
			return too_big(e, "max_elements", err);
		int64_t capped = len ? cap_len(def, e, len, o, NULL) : 0;
		warn_capped(plan, e, len, capped, o->max_elements);
		if (fit_response(plan, def, e, &capped, o) != 0)
			return too_big(e, "the server's response limits (response_budget_bytes, max_response_bytes) as npy", err);
		if (table_params(def, e, capped ? capped : 1, &p, &why) != 0) /* passed above with a larger len */
			return pe_err_set(err, PE_EINTERNAL, "", "cannot form the url of %s", e->kind);
		e->url = canonical_url(def, &p, e->format);
		e->len = capped;
		if (def->extra)
			e->attention_scaling = def->extra(&p);
		pe_params_destroy(&p);
		return url_fits(e, o, err);
	}
	pe_plan_warn(plan, "%s: this posenc has no /v1/%s yet; the url names the table as planned", e->kind, e->table);
	e->len = cap_plain(e, len, o->max_elements);
	warn_capped(plan, e, len, e->len, o->max_elements);
	e->url = plain_url(e, e->len);
	return url_fits(e, o, err);
}

/* ---- JSON ---- */

struct sb {
	char *s;
	size_t n, cap;
	int oom;
};

static void put(struct sb *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->n + n + 1 > b->cap) {
		size_t cap = (b->cap + n + 1) * 2;
		char *t = realloc(b->s, cap);
		if (!t) {
			b->oom = 1;
			return;
		}
		b->s = t;
		b->cap = cap;
	}
	memcpy(b->s + b->n, s, n);
	b->n += n;
	b->s[b->n] = 0;
}

static void puts_(struct sb *b, const char *s) { put(b, s, strlen(s)); }

static void putf(struct sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(struct sb *b, const char *fmt, ...)
{
	char tmp[64];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	put(b, tmp, n < 0 ? 0 : (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

static void put_str(struct sb *b, const char *s)
{
	if (!s) {
		puts_(b, "null");
		return;
	}
	puts_(b, "\"");
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			putf(b, "\\%c", c);
		else if (c < 0x20)
			putf(b, "\\u%04x", c);
		else
			put(b, s, 1);
	}
	puts_(b, "\"");
}

static void put_real(struct sb *b, double v)
{
	char buf[32];
	if (!isfinite(v)) {
		puts_(b, "null");
		return;
	}
	pe_plan_real_text(v, buf);
	puts_(b, buf);
}

/* One value as JSON: a number, else a string. */
static void put_scalar(struct sb *b, const char *v)
{
	char *end;
	if (*v && (strtod(v, &end), !*end) && strspn(v, "0123456789.eE+-") == strlen(v))
		puts_(b, v);
	else
		put_str(b, v);
}

/* A parameter's value as JSON: an array for a comma list (numbers or strings: "col,row"), else one
 * value. */
static void put_value(struct sb *b, const char *v)
{
	if (!strchr(v, ',')) {
		put_scalar(b, v);
		return;
	}
	char *copy = strdup(v), *save = NULL;
	puts_(b, "[");
	for (char *t = copy ? strtok_r(copy, ",", &save) : NULL, *sep = ""; t; t = strtok_r(NULL, ",", &save), sep = ",") {
		puts_(b, sep);
		put_scalar(b, t);
	}
	puts_(b, "]");
	free(copy);
}

static void put_enc(struct sb *b, const struct pe_plan_enc *e)
{
	puts_(b, "{\"kind\":");
	put_str(b, e->kind);
	puts_(b, ",\"tower\":");
	put_str(b, e->tower ? e->tower : "text");
	puts_(b, ",\"layers\":");
	if (e->layers) {
		put_str(b, e->layers);
	} else {
		puts_(b, "[");
		for (size_t k = 0; k < e->nlayers; k++)
			putf(b, "%s%d", k ? "," : "", e->layer_list[k]);
		puts_(b, "]");
	}
	if (e->layers && e->nlayers) { /* a named set of layers, and which they are */
		puts_(b, ",\"layer_indices\":[");
		for (size_t k = 0; k < e->nlayers; k++)
			putf(b, "%s%d", k ? "," : "", e->layer_list[k]);
		puts_(b, "]");
	}
	puts_(b, ",\"url\":");
	put_str(b, e->url);
	if (e->format) { /* only when the url asks for a format: the answer is JSON otherwise */
		puts_(b, ",\"format\":");
		put_str(b, e->format);
	}
	puts_(b, ",\"params\":{");
	for (size_t k = 0; k < e->nparams; k++) {
		puts_(b, k ? "," : "");
		put_str(b, e->params[k].key);
		puts_(b, ":");
		put_value(b, e->params[k].value);
	}
	if (e->len_key && e->len)
		putf(b, e->len_prefix ? "%s\"%s\":\"%s%lld\"" : "%s\"%s\":%s%lld", e->nparams ? "," : "", e->len_key,
		     e->len_prefix ? e->len_prefix : "", (long long)e->len);
	puts_(b, "},\"head_dim\":");
	e->head_dim ? putf(b, "%d", e->head_dim) : puts_(b, "null");
	puts_(b, ",\"rotary_dim\":");
	e->rotary_dim ? putf(b, "%d", e->rotary_dim) : puts_(b, "null");
	puts_(b, ",\"layout\":");
	put_str(b, e->layout);
	puts_(b, ",\"attention_scaling\":");
	put_real(b, e->attention_scaling);
	puts_(b, ",\"softmax_scale\":");
	put_real(b, e->softmax_scale);
	if (e->bias_scale) {
		puts_(b, ",\"bias_scale\":");
		put_real(b, e->bias_scale);
	}
	puts_(b, ",\"notes\":[");
	for (size_t k = 0; k < e->nnotes; k++) {
		puts_(b, k ? "," : "");
		put_str(b, e->notes[k]);
	}
	puts_(b, "]}");
}

char *pe_plan_json(const struct pe_plan *plan, size_t *len)
{
	struct sb b = {0};
	puts_(&b, "{\"model_type\":");
	put_str(&b, plan->model_type);
	if (plan->generator) {
		puts_(&b, ",\"generator\":");
		puts_(&b, plan->generator);
	}
	puts_(&b, ",\"encodings\":[");
	for (size_t i = 0; i < plan->nenc; i++) {
		puts_(&b, i ? ",\n  " : "\n  ");
		put_enc(&b, &plan->enc[i]);
	}
	puts_(&b, "],\n \"warnings\":[");
	for (size_t k = 0; k < plan->nwarnings; k++) {
		puts_(&b, k ? ",\n  " : "\n  ");
		put_str(&b, plan->warnings[k]);
	}
	puts_(&b, "]}\n");
	if (b.oom) {
		free(b.s);
		return NULL;
	}
	if (len)
		*len = b.n;
	return b.s;
}

/* ---- the CLI's pick ---- */

static int kind_matches(const struct pe_plan_enc *e, const char *kind)
{
	if (!e->table)
		return 0;
	if (!strcmp(kind, "rope"))
		return !strcmp(e->kind, "rope") || !strcmp(e->kind, "mrope");
	return !strcmp(e->kind, kind) || !strcmp(e->table, kind);
}

static int layers_match(const struct pe_plan_enc *e, const char *layers)
{
	if (e->layers)
		return !strcmp(e->layers, layers);
	char *end;
	long n = strtol(layers, &end, 10);
	if (!*layers || *end)
		return 0;
	for (size_t k = 0; k < e->nlayers; k++)
		if (e->layer_list[k] == n)
			return 1;
	return 0;
}

const struct pe_plan_enc *pe_plan_pick(const struct pe_plan *plan, const char *kind, const char *layers,
				       struct pe_err *err)
{
	const struct pe_plan_enc *found = NULL;
	size_t nkind = 0, nfound = 0;
	char names[160] = "";
	for (size_t i = 0; i < plan->nenc; i++) {
		const struct pe_plan_enc *e = &plan->enc[i];
		if (!kind_matches(e, kind))
			continue;
		nkind++;
		size_t used = strlen(names);
		snprintf(names + used, sizeof names - used, "%s%s", used ? ", " : "", e->layers ? e->layers : "a layer number");
		if (!layers || layers_match(e, layers)) {
			found = e;
			nfound++;
		}
	}
	if (!nkind)
		return pe_err_set(err, PE_ENOTFOUND, "config", "the model's plan has no %s table", kind), NULL;
	if (nfound == 1)
		return found;
	if (!layers)
		return pe_err_set(err, PE_EINVAL, "layers", "the model has %zu %s tables: pick one with --layers (%s)",
				  nkind, kind, names), NULL;
	return pe_err_set(err, PE_EINVAL, "layers", "no %s table for layers '%.40s' (%s)", kind, layers, names), NULL;
}
