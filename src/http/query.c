/* The query parser of every declared route (query.h). Which list a name belongs to is decided
 * here, once, before its value is read, so an unknown name is refused with the same problem on
 * every route whatever its value; values are read by the core (pe_params_set) or, for the
 * output options, recorded for negotiation (pe_out_take). The split of a query's text into its
 * parameters and the percent-decoding of paths and parameters live here too, free of
 * libmicrohttpd, so the fuzzer (tests/fuzz/fuzz_query.c) drives the code the server runs. */
#include "http/query.h"

#include <string.h>

static const struct pe_table_def no_params = {.name = "", .fixed_dtype = PE_DTYPE_COUNT_};

/* A list the route does not declare has no values to clear: no name is ever found in it (every
 * reader walks def->nparams), and pe_query_destroy passes it by. */
static void list_init(struct pe_params *p, const struct pe_table_def *def)
{
	if (def)
		pe_params_init(p, def);
	else
		p->def = &no_params;
}

void pe_query_init(struct pe_query *q, const struct pe_table_def *params, const struct pe_table_def *extras,
		   int output, const char *route)
{
	memset(&q->out, 0, sizeof q->out);
	memset(&q->late, 0, sizeof q->late);
	list_init(&q->params, params);
	list_init(&q->extras, extras);
	q->output = output;
	q->route = route;
}

int pe_query_take(struct pe_query *q, const char *key, size_t key_len, const char *value, size_t value_len,
		  struct pe_err *err)
{
	if (strlen(key) != key_len || (value && strlen(value) != value_len))
		return pe_err_set(err, PE_EINVAL, key, "%s contains a NUL byte (%%00)", *key ? key : "a query parameter");
	if (!*key)
		return pe_err_set(err, PE_EINVAL, "", "a query parameter has an empty name");
	if (!value)
		value = "";
	if (pe_param_index(q->params.def, key) >= 0)
		return pe_params_set(&q->params, key, value, err);
	if (q->output && pe_out_is_param(key))
		return pe_out_take(&q->out, key, value, err);
	if (pe_param_index(q->extras.def, key) >= 0)
		return pe_params_set(&q->extras, key, value, err);
	return pe_err_set(err, PE_EINVAL, key, "unknown parameter '%.40s' for %s", key, q->route);
}

size_t pe_query_count(const char *query)
{
	size_t n = 1, len = strlen(query);
	for (const char *p = query; *p; p++)
		n += *p == '&';
	return n - (!len || query[len - 1] == '&'); /* a last empty piece is none (pe_query_split) */
}

static int hex_value(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Percent-decoding of paths and query values, as MHD's own, except that %00 and %2F stay as they
 * are: a decoded NUL would silently cut a C string (a table name, a number) short, and a decoded
 * '/' would route /v1%2Fsinusoidal as /v1/sinusoidal; the literals are refused by every route and
 * parser instead (404, or a 400 naming the parameter). */
size_t pe_query_unescape(char *s)
{
	char *w = s;
	for (const char *p = s; *p;) {
		int hi, lo;
		if (p[0] == '%' && (hi = hex_value(p[1])) >= 0 && (lo = hex_value(p[2])) >= 0 && (hi | lo) &&
		    hi * 16 + lo != '/') {
			*w++ = (char)(hi * 16 + lo);
			p += 3;
		} else
			*w++ = *p++;
	}
	*w = 0;
	return (size_t)(w - s);
}

static void plus_to_space(char *s)
{
	for (; (s = strchr(s, '+')) != NULL; s++)
		*s = ' ';
}

size_t pe_query_split(char *s, struct pe_query_arg *args, size_t max, size_t (*unescape)(char *s))
{
	size_t n = 0;
	while (s && *s && n < max) {
		char *amp = strchr(s, '&'), *eq = strchr(s, '=');
		if (amp)
			*amp = 0;
		if (eq && amp && eq > amp) /* "name&x=1": this piece has no value */
			eq = NULL;
		struct pe_query_arg *a = &args[n++];
		if (eq)
			*eq = 0;
		plus_to_space(s);
		a->key = s;
		a->key_len = unescape(s);
		a->value = NULL;
		a->value_len = 0;
		if (eq) {
			plus_to_space(eq + 1);
			a->value = eq + 1;
			a->value_len = unescape(eq + 1);
		}
		s = amp ? amp + 1 : NULL;
	}
	return n;
}

const char *pe_query_extra(const struct pe_query *q, const char *name)
{
	int i = pe_param_index(q->extras.def, name);
	return i >= 0 && q->extras.v[i].given ? q->extras.v[i].text : NULL;
}

void pe_query_destroy(struct pe_query *q)
{
	if (q->params.def != &no_params)
		pe_params_destroy(&q->params);
	if (q->extras.def != &no_params)
		pe_params_destroy(&q->extras);
}
