/* JSON tensors in: a bare nested array of numbers, or {"shape": [...], "data": [...]} where data
 * is nested to match the shape or flat with count(shape) numbers. The body must be that one JSON
 * value and nothing else; other members of the object are checked as JSON and skipped (our own
 * responses carry "dtype", so a response can be posted back as it is).
 *
 * Written by hand rather than through jansson because a tree of a million numbers costs tens of
 * bytes each, and a client controls the body: here the first pass only walks the bytes (shape,
 * rectangularity, count, no allocation), the count is checked against max_elements, and only then
 * is the float64 buffer taken and filled by a second pass. Numbers must be finite JSON numbers. */
#include "posenc/tensor.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

struct cursor {
	const char *p, *end;
	struct pe_err *err;
	/* pass 1 */
	struct pe_shape shape;
	int known[PE_MAX_RANK]; /* shape.dim[d] recorded */
	int depth_seen; /* rank fixed by the first leaf */
	size_t count;
	/* pass 2 */
	double *out;
	size_t written;
};

static void skip_ws(struct cursor *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
		c->p++;
}

/* The length of the JSON number at p, or -1 when there is none. */
static ptrdiff_t number_end(const char *p, const char *end)
{
	const char *q = p;
	if (q < end && *q == '-')
		q++;
	if (q >= end || !isdigit((unsigned char)*q))
		return -1;
	if (*q == '0')
		q++;
	else
		while (q < end && isdigit((unsigned char)*q))
			q++;
	if (q < end && *q == '.') {
		q++;
		if (q >= end || !isdigit((unsigned char)*q))
			return -1;
		while (q < end && isdigit((unsigned char)*q))
			q++;
	}
	if (q < end && (*q == 'e' || *q == 'E')) {
		q++;
		if (q < end && (*q == '+' || *q == '-'))
			q++;
		if (q >= end || !isdigit((unsigned char)*q))
			return -1;
		while (q < end && isdigit((unsigned char)*q))
			q++;
	}
	return (ptrdiff_t)(q - p);
}

#define NUMBER_MAX 400 /* characters of a number read (a float64 needs at most 17 digits) */

/* The number at c->p into v: 0; -1 when there is none; -2 when it is not finite (1e400);
 * -3 when it is longer than NUMBER_MAX characters (valid JSON, but nothing a tensor needs). */
static int read_number(struct cursor *c, double *v)
{
	ptrdiff_t n = number_end(c->p, c->end);
	if (n < 0)
		return -1;
	if (n > NUMBER_MAX)
		return -3;
	char tmp[NUMBER_MAX + 1];
	memcpy(tmp, c->p, (size_t)n);
	tmp[n] = 0;
	errno = 0;
	*v = strtod(tmp, NULL);
	c->p += n;
	return isfinite(*v) ? 0 : -2;
}

/* Walk one value at nesting depth d. Pass 1 (out == NULL) records the shape and checks that
 * every array at a depth has the same length; pass 2 stores the numbers. */
static int walk(struct cursor *c, int d, const char **whatp)
{
	skip_ws(c);
	if (c->p >= c->end)
		return *whatp = "unexpected end", -1;
	if (*c->p != '[') {
		if (c->depth_seen < 0)
			c->depth_seen = d;
		else if (c->depth_seen != d)
			return *whatp = "not rectangular (numbers at different depths)", -1;
		if (c->shape.rank > d) /* an (empty) array came earlier at this depth or deeper */
			return *whatp = "not rectangular (numbers at different depths)", -1;
		double v;
		int rc = read_number(c, &v);
		if (rc == -1)
			return *whatp = "expected a number or '['", -1;
		if (rc == -2)
			return *whatp = "numbers must be finite", -1;
		if (rc == -3)
			return *whatp = "a number longer than 400 characters", -1;
		if (c->out)
			c->out[c->written++] = v;
		else
			c->count++;
		return 0;
	}
	if (d >= PE_MAX_RANK)
		return *whatp = "nested deeper than the maximum rank", -1;
	c->p++;
	size_t n = 0;
	skip_ws(c);
	if (c->p < c->end && *c->p == ']') {
		c->p++;
		if (c->depth_seen >= 0 && c->depth_seen != d + 1)
			return *whatp = "not rectangular (empty array)", -1;
	} else
		for (;;) {
			if (walk(c, d + 1, whatp) != 0)
				return -1;
			n++;
			skip_ws(c);
			if (c->p < c->end && *c->p == ',') {
				c->p++;
				continue;
			}
			if (c->p < c->end && *c->p == ']') {
				c->p++;
				break;
			}
			return *whatp = "expected ',' or ']'", -1;
		}
	if (!c->out) {
		if (!c->known[d]) {
			c->known[d] = 1;
			c->shape.dim[d] = n;
			if (c->shape.rank < d + 1)
				c->shape.rank = d + 1;
		} else if (c->shape.dim[d] != n)
			return *whatp = "not rectangular (arrays of different lengths)", -1;
	}
	return 0;
}

static int error_at(struct cursor *c, const char *base, const char *what)
{
	return pe_err_set(c->err, PE_EBODY, "body", "JSON tensor: %s at byte %zu", what, (size_t)(c->p - base));
}

/* Skip one JSON value of a member the tensor does not use ("dtype" in our own output, ...). */
static int skip_value(struct cursor *c, int depth)
{
	static const char *const literals[] = {"true", "false", "null"};
	skip_ws(c);
	if (c->p >= c->end || depth > 64)
		return -1;
	if (*c->p == '"') {
		for (c->p++; c->p < c->end && *c->p != '"'; c->p++) {
			if ((unsigned char)*c->p < 0x20)
				return -1;
			if (*c->p == '\\') {
				if (++c->p >= c->end || !strchr("\"\\/bfnrtu", *c->p))
					return -1;
				for (int i = 0; *c->p == 'u' && i < 4; i++)
					if (c->p + 1 + i >= c->end || !isxdigit((unsigned char)c->p[1 + i]))
						return -1;
			}
		}
		if (c->p >= c->end)
			return -1;
		c->p++;
		return 0;
	}
	if (*c->p == '[' || *c->p == '{') {
		char close = *c->p == '[' ? ']' : '}';
		c->p++;
		skip_ws(c);
		if (c->p < c->end && *c->p == close) {
			c->p++;
			return 0;
		}
		for (;;) {
			if (close == '}') {
				skip_ws(c);
				if (c->p >= c->end || *c->p != '"' || skip_value(c, depth + 1) != 0)
					return -1;
				skip_ws(c);
				if (c->p >= c->end || *c->p++ != ':')
					return -1;
			}
			if (skip_value(c, depth + 1) != 0)
				return -1;
			skip_ws(c);
			if (c->p < c->end && *c->p == ',') {
				c->p++;
				continue;
			}
			if (c->p < c->end && *c->p == close) {
				c->p++;
				return 0;
			}
			return -1;
		}
	}
	for (int i = 0; i < 3; i++) {
		size_t n = strlen(literals[i]);
		if ((size_t)(c->end - c->p) >= n && memcmp(c->p, literals[i], n) == 0) {
			c->p += n;
			return 0;
		}
	}
	ptrdiff_t n = number_end(c->p, c->end); /* any JSON number: the member is not read */
	if (n < 0)
		return -1;
	c->p += n;
	return 0;
}

static int parse_shape(struct cursor *c, const char *base, struct pe_shape *s)
{
	skip_ws(c);
	if (c->p >= c->end || *c->p != '[')
		return error_at(c, base, "\"shape\" must be an array of sizes");
	c->p++;
	s->rank = 0;
	for (;;) {
		skip_ws(c);
		if (c->p < c->end && *c->p == ']' && s->rank == 0) {
			c->p++;
			return 0;
		}
		double v;
		if (s->rank >= PE_MAX_RANK || read_number(c, &v) != 0 || v < 0 || v != floor(v) || v > 1e15)
			return error_at(c, base, "\"shape\" must hold at most 8 non-negative integers");
		s->dim[s->rank++] = (size_t)v;
		skip_ws(c);
		if (c->p < c->end && *c->p == ',') {
			c->p++;
			continue;
		}
		if (c->p < c->end && *c->p == ']') {
			c->p++;
			return 0;
		}
		return error_at(c, base, "expected ',' or ']' in \"shape\"");
	}
}

int pe_json_tensor_parse(const void *data, size_t len, size_t max_elements, struct pe_tensor_mut *out,
			 struct pe_err *err)
{
	const char *base = data, *end = base + len;
	struct cursor c = {.p = base, .end = end, .err = err, .depth_seen = -1};
	const char *what = NULL, *start = NULL;
	struct pe_shape declared = {0};
	int have_declared = 0;
	skip_ws(&c);
	if (c.p < end && *c.p == '{') { /* members "data" and "shape"; any other is skipped */
		c.p++;
		skip_ws(&c);
		while (c.p < end && *c.p != '}') {
			const char *key = c.p;
			if (*c.p != '"' || skip_value(&c, 0) != 0)
				return error_at(&c, base, "expected a member name");
			size_t klen = (size_t)(c.p - key);
			skip_ws(&c);
			if (c.p >= end || *c.p++ != ':')
				return error_at(&c, base, "expected ':' after a member name");
			skip_ws(&c);
			if (klen == 6 && memcmp(key, "\"data\"", 6) == 0) {
				if (start)
					return error_at(&c, base, "\"data\" given twice");
				start = c.p;
				if (walk(&c, 0, &what) != 0)
					return error_at(&c, base, what);
			} else if (klen == 7 && memcmp(key, "\"shape\"", 7) == 0) {
				if (have_declared)
					return error_at(&c, base, "\"shape\" given twice");
				if (parse_shape(&c, base, &declared) != 0)
					return PE_EBODY;
				have_declared = 1;
			} else if (skip_value(&c, 0) != 0)
				return error_at(&c, base, "invalid JSON value");
			skip_ws(&c);
			if (c.p < end && *c.p == ',') {
				c.p++;
				skip_ws(&c);
				if (c.p < end && *c.p == '}')
					return error_at(&c, base, "expected a member name");
			} else if (c.p >= end || *c.p != '}')
				return error_at(&c, base, "expected ',' or '}'");
		}
		if (c.p >= end)
			return error_at(&c, base, "unexpected end");
		c.p++;
		if (!start)
			return error_at(&c, base, "an object body needs \"data\"");
	} else {
		start = c.p;
		if (walk(&c, 0, &what) != 0)
			return error_at(&c, base, what);
	}
	skip_ws(&c);
	if (c.p != end) /* the tensor must be the whole body */
		return error_at(&c, base, "unexpected bytes after the tensor");
	if (c.depth_seen < 0)
		c.shape.rank = c.shape.rank ? c.shape.rank : 1;
	int overflow;
	size_t n = pe_shape_count(have_declared ? &declared : &c.shape, &overflow);
	if (have_declared) {
		if (overflow || n != c.count)
			return pe_err_set(err, PE_EBODY, "shape", "\"shape\" holds %s elements but \"data\" has %zu",
					  overflow ? "too many" : "a different number of", c.count);
		/* data nested as the shape says, or flat */
		if (c.shape.rank > 1 && (c.shape.rank != declared.rank ||
					 memcmp(c.shape.dim, declared.dim, sizeof declared.dim[0] * (size_t)declared.rank) != 0))
			return pe_err_set(err, PE_EBODY, "shape", "\"data\" is nested differently from \"shape\"; "
					  "nest it as \"shape\" says, or send it flat");
		c.shape = declared;
	}
	if (c.count > max_elements)
		return pe_err_set(err, PE_ETOOBIG, "body", "the tensor has %zu elements; the limit is %zu", c.count,
				  max_elements);
	double *buf = malloc((c.count ? c.count : 1) * sizeof *buf);
	if (!buf)
		return pe_err_set(err, PE_ENOMEM, "body", "out of memory");
	struct cursor c2 = {.p = start, .end = end, .err = err, .depth_seen = -1, .out = buf};
	walk(&c2, 0, &what);
	out->shape = c.shape;
	out->dtype = PE_F64;
	out->data = buf;
	return 0;
}
