/* A model config's JSON as a small tree (see plan_json.h for why not jansson). Recursive descent
 * over the bytes; the depth is bounded so the recursion is, and the node count is bounded so a
 * 1 MiB body of "[[],[],...]" cannot take more than PE_JSON_MAX_NODES nodes. */
#include "core/plan_json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct rd {
	const char *p, *start, *end;
	const char *str_end; /* the closing quote of the string being read */
	size_t nodes;
	struct pe_err *err;
	int failed;
};

static int fail(struct rd *r, int code, const char *what)
{
	if (!r->failed)
		pe_err_set(r->err, code, "body", "%s at byte %zu", what, (size_t)(r->p - r->start));
	r->failed = 1;
	return -1;
}

static void ws(struct rd *r)
{
	while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
		r->p++;
}

static struct pe_json *node(struct rd *r, enum pe_json_type t)
{
	if (++r->nodes > PE_JSON_MAX_NODES) {
		fail(r, PE_ETOOBIG, "more than 100000 JSON values");
		return NULL;
	}
	struct pe_json *v = calloc(1, sizeof *v);
	if (!v)
		fail(r, PE_ENOMEM, "out of memory");
	else
		v->type = t;
	return v;
}

void pe_json_free(struct pe_json *v)
{
	while (v) {
		struct pe_json *next = v->next;
		pe_json_free(v->child);
		free(v->str);
		free(v->key);
		free(v);
		v = next;
	}
}

static int hex4(const char *p, unsigned *out)
{
	unsigned u = 0;
	for (int i = 0; i < 4; i++) {
		char c = p[i];
		u <<= 4;
		if (c >= '0' && c <= '9')
			u |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			u |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			u |= (unsigned)(c - 'A' + 10);
		else
			return -1;
	}
	*out = u;
	return 0;
}

static size_t put_utf8(char *o, unsigned cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | cp >> 6);
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | cp >> 12);
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | cp >> 18);
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* A \uXXXX escape (and its low surrogate) at r->p (after the 'u'): the code point. */
static int unicode_escape(struct rd *r, unsigned *cp)
{
	if (r->str_end - r->p < 4 || hex4(r->p, cp) != 0)
		return fail(r, PE_EBODY, "bad \\u escape");
	r->p += 4;
	if (*cp >= 0xdc00 && *cp < 0xe000)
		return fail(r, PE_EBODY, "lone low surrogate");
	if (*cp >= 0xd800 && *cp < 0xdc00) {
		unsigned lo;
		if (r->str_end - r->p < 6 || r->p[0] != '\\' || r->p[1] != 'u' || hex4(r->p + 2, &lo) != 0 || lo < 0xdc00 ||
		    lo >= 0xe000)
			return fail(r, PE_EBODY, "lone high surrogate");
		r->p += 6;
		*cp = 0x10000 + ((*cp - 0xd800) << 10) + (lo - 0xdc00);
	}
	return *cp ? 0 : fail(r, PE_EBODY, "\\u0000 in a string");
}

/* The length of the well-formed UTF-8 sequence at p (lead byte c >= 0x80, before end), or 0:
 * no overlong forms, no surrogates, nothing past U+10FFFF (RFC 3629). */
static size_t utf8_len(const unsigned char *p, const unsigned char *end)
{
	unsigned char c = p[0];
	size_t n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
	if (!n || (size_t)(end - p) < n)
		return 0;
	unsigned char lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
	unsigned char hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n;
}

/* A string at r->p (the opening quote): a new NUL-terminated copy, escapes resolved. */
static char *string(struct rd *r)
{
	const char *q = ++r->p;
	while (q < r->end && *q != '"')
		q += *q == '\\' && q + 1 < r->end ? 2 : 1;
	if (q >= r->end) {
		fail(r, PE_EBODY, "unterminated string");
		return NULL;
	}
	r->str_end = q;
	char *out = malloc((size_t)(q - r->p) + 1), *o = out;
	if (!out) {
		fail(r, PE_ENOMEM, "out of memory");
		return NULL;
	}
	while (*r->p != '"') {
		unsigned char c = (unsigned char)*r->p++;
		if (c < 0x20) {
			fail(r, PE_EBODY, "control character in a string");
			goto bad;
		}
		if (c >= 0x80) {
			size_t n = utf8_len((const unsigned char *)r->p - 1, (const unsigned char *)r->str_end);
			if (!n) {
				r->p--;
				fail(r, PE_EBODY, "invalid UTF-8 in a string");
				goto bad;
			}
			memcpy(o, r->p - 1, n);
			o += n;
			r->p += n - 1;
			continue;
		}
		if (c != '\\') {
			*o++ = (char)c;
			continue;
		}
		char e = *r->p++;
		const char *map = strchr("\"\"\\\\//b\bf\fn\nr\rt\t", e);
		unsigned cp;
		if (e && map && (map - "\"\"\\\\//b\bf\fn\nr\rt\t") % 2 == 0)
			*o++ = map[1];
		else if (e == 'u' && unicode_escape(r, &cp) == 0)
			o += put_utf8(o, cp); /* 6 escaped bytes give at most 3, 12 at most 4 */
		else {
			fail(r, PE_EBODY, "bad escape in a string");
			goto bad;
		}
	}
	r->p++;
	*o = 0;
	return out;
bad:
	free(out);
	return NULL;
}

static const char *digits(const char *q, const char *end)
{
	while (q < end && *q >= '0' && *q <= '9')
		q++;
	return q;
}

/* A number by JSON's grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, finite as a double. */
static int number(struct rd *r, double *out)
{
	const char *q = r->p, *e = r->end, *d;
	if (q < e && *q == '-')
		q++;
	if (q >= e || *q < '0' || *q > '9')
		return fail(r, PE_EBODY, "bad number");
	q = *q == '0' ? q + 1 : digits(q, e);
	if (q < e && *q == '.') {
		if ((d = digits(q + 1, e)) == q + 1)
			return fail(r, PE_EBODY, "bad number");
		q = d;
	}
	if (q < e && (*q == 'e' || *q == 'E')) {
		q++;
		if (q < e && (*q == '+' || *q == '-'))
			q++;
		if ((d = digits(q, e)) == q)
			return fail(r, PE_EBODY, "bad number");
		q = d;
	}
	char small[64], *tmp = small;
	size_t n = (size_t)(q - r->p);
	if (n >= sizeof small && !(tmp = malloc(n + 1))) /* valid JSON has no length bound: n <= the body */
		return fail(r, PE_ENOMEM, "out of memory");
	memcpy(tmp, r->p, n);
	tmp[n] = 0;
	*out = strtod(tmp, NULL);
	if (tmp != small)
		free(tmp);
	if (!isfinite(*out))
		return fail(r, PE_EBODY, "number out of range");
	r->p = q;
	return 0;
}

static int literal(struct rd *r, const char *word)
{
	size_t n = strlen(word);
	if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n) != 0)
		return fail(r, PE_EBODY, "unexpected character");
	r->p += n;
	return 0;
}

static struct pe_json *value(struct rd *r, int depth);

static int by_key(const void *a, const void *b)
{
	return strcmp((*(const struct pe_json *const *)a)->key, (*(const struct pe_json *const *)b)->key);
}

/* An object's members, read: refuse it when two share a key. Sorted, so n log n and not n^2
 * (an object of 100000 members is within the bounds). */
static int check_keys(struct rd *r, const struct pe_json *obj)
{
	if (obj->n < 2)
		return 0;
	const struct pe_json **m = malloc(obj->n * sizeof *m);
	if (!m)
		return fail(r, PE_ENOMEM, "out of memory");
	size_t i = 0;
	for (const struct pe_json *x = obj->child; x; x = x->next)
		m[i++] = x;
	qsort(m, obj->n, sizeof *m, by_key);
	for (i = 1; i < obj->n && strcmp(m[i - 1]->key, m[i]->key); i++)
		;
	int dup = i < obj->n;
	free(m);
	return dup ? fail(r, PE_EBODY, "duplicate key in the object ending") : 0;
}

/* The elements or members of an array or object at r->p (its opening bracket), into v. */
static int container(struct rd *r, struct pe_json *v, int depth)
{
	int obj = v->type == PE_JSON_OBJ;
	char close = obj ? '}' : ']';
	struct pe_json **tail = &v->child;
	r->p++;
	ws(r);
	if (r->p < r->end && *r->p == close) {
		r->p++;
		return 0;
	}
	for (;;) {
		char *key = NULL;
		ws(r);
		if (obj) {
			if (r->p >= r->end || *r->p != '"')
				return fail(r, PE_EBODY, "expected a key");
			if (!(key = string(r)))
				return -1;
			ws(r);
			if (r->p >= r->end || *r->p != ':') {
				free(key);
				return fail(r, PE_EBODY, "expected ':'");
			}
			r->p++;
		}
		struct pe_json *m = value(r, depth + 1);
		if (!m) {
			free(key);
			return -1;
		}
		m->key = key;
		*tail = m;
		tail = &m->next;
		v->n++;
		ws(r);
		if (r->p < r->end && *r->p == ',') {
			r->p++;
			continue;
		}
		if (r->p < r->end && *r->p == close) {
			r->p++;
			return obj ? check_keys(r, v) : 0;
		}
		return fail(r, PE_EBODY, obj ? "expected ',' or '}'" : "expected ',' or ']'");
	}
}

static struct pe_json *value(struct rd *r, int depth)
{
	ws(r);
	if (depth > PE_JSON_MAX_DEPTH) {
		fail(r, PE_ETOOBIG, "JSON nested deeper than 64");
		return NULL;
	}
	if (r->p >= r->end) {
		fail(r, PE_EBODY, "unexpected end of the body");
		return NULL;
	}
	char c = *r->p;
	enum pe_json_type t = c == '{' ? PE_JSON_OBJ : c == '[' ? PE_JSON_ARR : c == '"' ? PE_JSON_STR :
			      c == 't' || c == 'f' ? PE_JSON_BOOL : c == 'n' ? PE_JSON_NULL : PE_JSON_NUM;
	struct pe_json *v = node(r, t);
	if (!v)
		return NULL;
	int rc = 0;
	if (t == PE_JSON_OBJ || t == PE_JSON_ARR)
		rc = container(r, v, depth);
	else if (t == PE_JSON_STR)
		rc = (v->str = string(r)) ? 0 : -1;
	else if (t == PE_JSON_BOOL)
		rc = literal(r, c == 't' ? "true" : "false"), v->num = c == 't';
	else if (t == PE_JSON_NULL)
		rc = literal(r, "null");
	else
		rc = number(r, &v->num);
	if (rc != 0) {
		pe_json_free(v);
		return NULL;
	}
	return v;
}

struct pe_json *pe_json_parse(const char *text, size_t len, struct pe_err *err)
{
	struct rd r = {.p = text, .start = text, .end = text + len, .err = err};
	struct pe_json *v = value(&r, 0);
	ws(&r);
	if (v && r.p != r.end) {
		fail(&r, PE_EBODY, "text after the JSON value");
		pe_json_free(v);
		return NULL;
	}
	return v;
}

const struct pe_json *pe_json_get(const struct pe_json *v, const char *key)
{
	if (!v || v->type != PE_JSON_OBJ)
		return NULL;
	for (const struct pe_json *m = v->child; m; m = m->next)
		if (!strcmp(m->key, key))
			return m;
	return NULL;
}
