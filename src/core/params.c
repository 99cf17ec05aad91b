/* Table parameters: strict parsing of key=value strings against a table's spec, defaults, ranges
 * (the canonical key: params_key.c). Shared by the HTTP layer and the CLI so both validate identically.
 *
 * Integers accept only an optional '-' and decimal digits (no '+', exponents or spaces) and must
 * fit in 64 bits; reals are finite decimals (exponents allowed; no leading '+', hex, NaN or Inf)
 * that a double holds: 0, or a magnitude from DBL_MIN to DBL_MAX. */
#include "core/tables.h"
#include "posenc/core.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pe_param_index(const struct pe_table_def *def, const char *name)
{
	for (int i = 0; i < def->nparams; i++)
		if (strcmp(def->params[i].name, name) == 0)
			return i;
	return -1;
}

static int index_or_abort(const struct pe_params *p, const char *name)
{
	int i = pe_param_index(p->def, name);
	if (i < 0)
		abort(); /* a table implementation asked for a parameter its spec lacks: a bug */
	return i;
}

void pe_params_init(struct pe_params *p, const struct pe_table_def *def)
{
	memset(p, 0, sizeof *p);
	p->def = def;
}

void pe_params_destroy(struct pe_params *p)
{
	for (int i = 0; i < PE_MAX_PARAMS; i++) {
		if (p->v[i].list) {
			free(p->v[i].list);
			p->v[i].list = NULL;
		}
		if (p->v[i].text) {
			free(p->v[i].text);
			p->v[i].text = NULL;
		}
	}
}

static int parse_int(const char *s, int64_t *out)
{
	const char *q = s;
	if (*q == '-')
		q++;
	if (!*q)
		return -1;
	for (const char *c = q; *c; c++)
		if (*c < '0' || *c > '9')
			return -1;
	errno = 0;
	long long v = strtoll(s, NULL, 10);
	if (errno == ERANGE)
		return -1;
	*out = v;
	return 0;
}

/* A real written as an integer of at most 15 digits ("10000", a default's usual form): its value
 * is exact in a double, the one strtod returns ("-0" is -0). 0 when s is not such a text. */
static int parse_small_integer(const char *s, size_t len, double *out)
{
	size_t neg = len && s[0] == '-';
	if (len - neg == 0 || len - neg > 15)
		return 0;
	uint64_t v = 0;
	for (size_t i = neg; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return 0;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	*out = neg ? -(double)v : (double)v;
	return 1;
}

/* What parse_real read: a double, no decimal real, or one beyond a double's normal range. */
enum { REAL_OK = 0, REAL_BAD = -1, REAL_LONG = -2, REAL_HUGE = 1, REAL_TINY = 2 }; /* < 0: no value */
#define REAL_CHARS_MAX 63 /* a double needs at most 17 significant digits; longer text is refused */

/* A decimal real (len bytes of s). Beyond a double's range (REAL_HUGE: past +-DBL_MAX; REAL_TINY:
 * nonzero but below DBL_MIN in magnitude, a subnormal that keeps only part of its digits) *out
 * stands for the value: same sign, +-inf or a subnormal, so a range check places it. */
static int parse_real(const char *s, size_t len, double *out)
{
	char tmp[REAL_CHARS_MAX + 1];
	if (parse_small_integer(s, len, out))
		return 0;
	if (len == 0 || s[0] == '+')
		return REAL_BAD;
	for (size_t i = 0; i < len; i++)
		if (!strchr("0123456789.eE+-", s[i]))
			return REAL_BAD;
	if (len > REAL_CHARS_MAX)
		return REAL_LONG;
	memcpy(tmp, s, len);
	tmp[len] = 0;
	char *end;
	errno = 0;
	double v = strtod(tmp, &end);
	if (end != tmp + len || (!isfinite(v) && errno != ERANGE))
		return REAL_BAD;
	if (errno == ERANGE && isinf(v)) {
		*out = v;
		return REAL_HUGE;
	}
	if (errno == ERANGE && fabs(v) < DBL_MIN) { /* strtod may flag a value that rounds to DBL_MIN */
		*out = v != 0 ? v : copysign(DBL_TRUE_MIN, v);
		return REAL_TINY;
	}
	*out = v;
	return REAL_OK;
}

#define LIST_INT_MAX (UINT64_C(1) << 53) /* list values are doubles, exact up to 2^53 */

/* One integer of a list (len bytes of s): decimal digits only, as parse_int, read into a double.
 * 0; -1 when it is no decimal integer; 1 when it is one beyond 2^53, which a double could not
 * hold exactly (out of range). */
static int parse_int_n(const char *s, size_t len, double *out)
{
	size_t neg = len && s[0] == '-', at = neg;
	uint64_t v = 0;
	if (len == neg)
		return -1;
	for (size_t i = neg; i < len; i++)
		if (s[i] < '0' || s[i] > '9')
			return -1;
	while (at + 1 < len && s[at] == '0')
		at++;
	if (len - at > 16) /* 10^16 > 2^53 */
		return 1;
	for (; at < len; at++)
		v = v * 10 + (uint64_t)(s[at] - '0');
	if (v > LIST_INT_MAX)
		return 1;
	*out = neg ? -(double)v : (double)v;
	return 0;
}

/* A bound as a message shows it: the fewest of 15, 16 and 17 significant digits that read back as
 * v (1e300, not 1.0000000000000001e+300). Not the key's shortest form (params_key.c), which
 * writes 10 as 1e+01. */
struct bound_text {
	char s[32];
};

static struct bound_text bound_text(double v)
{
	struct bound_text t;
	for (int digits = 15; digits <= 17; digits++) {
		snprintf(t.s, sizeof t.s, "%.*g", digits, v);
		if (strtod(t.s, NULL) == v)
			break;
	}
	return t;
}

/* v within the parameter's range; item 0 a single value, else a list's value by its place. */
static int check_range(const struct pe_param_spec *sp, double v, size_t item, struct pe_err *err)
{
	if (v >= sp->min && v <= sp->max)
		return 0;
	if (item)
		return pe_err_set(err, PE_EINVAL, sp->name, "%s: value %zu must be between %s and %s", sp->name, item,
				  bound_text(sp->min).s, bound_text(sp->max).s);
	return pe_err_set(err, PE_EINVAL, sp->name, "%s must be between %s and %s", sp->name, bound_text(sp->min).s,
			  bound_text(sp->max).s);
}

/* A real parameter's value (item 0) or list value (item 1, 2, ...): parsed, then in range, then
 * held by a double. A decimal past a double's range is refused by the parameter's range when that
 * leaves it out (1e400 above 1e300, 1e-320 below 1e-300), else for what it is. */
static int real_value(const struct pe_param_spec *sp, const char *s, size_t len, size_t item, double *out,
		      struct pe_err *err)
{
	int rc = parse_real(s, len, out);
	if (rc >= REAL_OK && check_range(sp, *out, item, err) != 0)
		return PE_EINVAL;
	if (rc == REAL_OK)
		return 0;
	char what[PE_ERR_PARAM_MAX + 48]; /* the value named: a list's by its place, a single one as given */
	if (item)
		snprintf(what, sizeof what, "%s: value %zu", sp->name, item);
	else
		snprintf(what, sizeof what, "%s=%.40s", sp->name, s);
	if (rc == REAL_TINY)
		return pe_err_set(err, PE_EINVAL, sp->name, "%s is too close to 0 for a double: a nonzero value needs a "
				  "magnitude of at least %.17g", what, DBL_MIN);
	if (rc == REAL_LONG)
		return pe_err_set(err, PE_EINVAL, sp->name, "%s has more than %d characters: a double needs at most 17 "
				  "significant digits", what, REAL_CHARS_MAX);
	if (item)
		return pe_err_set(err, PE_EINVAL, sp->name, "%s is not a finite number", what);
	return pe_err_set(err, PE_EINVAL, sp->name, "%s must be a finite number, got '%.40s'", sp->name, s);
}

static int parse_bool(const char *s, int64_t *out)
{
	if (!strcmp(s, "1") || !strcmp(s, "true"))
		*out = 1;
	else if (!strcmp(s, "0") || !strcmp(s, "false"))
		*out = 0;
	else
		return -1;
	return 0;
}

static int parse_enum(const struct pe_param_spec *sp, const char *s, int64_t *out)
{
	for (int i = 0; sp->choices[i]; i++)
		if (!strcmp(sp->choices[i], s)) {
			*out = i;
			return 0;
		}
	return -1;
}

static size_t choices_text(const struct pe_param_spec *sp, char *buf, size_t cap)
{
	size_t len = 0;
	buf[0] = 0;
	for (int i = 0; sp->choices[i] && len < cap; i++) {
		int w = snprintf(buf + len, cap - len, "%s%s", i ? ", " : "", sp->choices[i]);
		if (w < 0)
			break;
		len += (size_t)w;
	}
	return len;
}

/* Value item (1, 2, ...) of an integer list: parsed, held exactly by a double, then in range. */
static int int_value(const struct pe_param_spec *sp, const char *s, size_t len, size_t item, double *out,
		     struct pe_err *err)
{
	int rc = parse_int_n(s, len, out);
	if (rc > 0)
		return pe_err_set(err, PE_EINVAL, sp->name, "%s: value %zu is out of range: it must be between "
				  "%s and %s", sp->name, item, bound_text(fmax(sp->min, -(double)LIST_INT_MAX)).s,
				  bound_text(fmin(sp->max, (double)LIST_INT_MAX)).s);
	if (rc != 0)
		return pe_err_set(err, PE_EINVAL, sp->name, "%s: value %zu is not a decimal integer", sp->name, item);
	return check_range(sp, *out, item, err);
}

static int parse_list(const struct pe_param_spec *sp, const char *s, struct pe_param_val *v,
		      struct pe_err *err)
{
	size_t n = 1;
	for (const char *c = s; *c; c++)
		n += *c == ',';
	if (n > PE_MAX_LIST)
		return pe_err_set(err, PE_EINVAL, sp->name, "%s has more than %d values", sp->name, PE_MAX_LIST);
	double *vals = malloc(n * sizeof *vals);
	if (!vals)
		return pe_err_set(err, PE_ENOMEM, sp->name, "out of memory");
	const char *c = s;
	for (size_t i = 0; i < n; i++) {
		const char *e = strchr(c, ',');
		size_t len = e ? (size_t)(e - c) : strlen(c);
		int rc = sp->choices == PE_LIST_INTEGERS ? int_value(sp, c, len, i + 1, &vals[i], err)
							  : real_value(sp, c, len, i + 1, &vals[i], err);
		if (rc != 0) {
			free(vals);
			return rc;
		}
		c = e ? e + 1 : c + len;
	}
	v->list = vals;
	v->nlist = n;
	return 0;
}

static int parse_value(const struct pe_param_spec *sp, const char *s, struct pe_param_val *v,
		       struct pe_err *err)
{
	char choices[256];
	switch (sp->type) {
	case PE_PT_INT:
		if (parse_int(s, &v->i) != 0)
			return pe_err_set(err, PE_EINVAL, sp->name, "%s must be a decimal integer, got '%.40s'",
					  sp->name, s);
		v->r = (double)v->i;
		return check_range(sp, v->r, 0, err);
	case PE_PT_REAL:
		return real_value(sp, s, strlen(s), 0, &v->r, err);
	case PE_PT_BOOL:
		if (parse_bool(s, &v->i) != 0)
			return pe_err_set(err, PE_EINVAL, sp->name, "%s must be 0 or 1", sp->name);
		v->r = (double)v->i;
		return 0;
	case PE_PT_ENUM:
		if (parse_enum(sp, s, &v->i) != 0) {
			choices_text(sp, choices, sizeof choices);
			pe_err_set(err, PE_EINVAL, sp->name, "%s must be one of: %s", sp->name, choices);
			if (err)
				err->choices = 1;
			return PE_EINVAL;
		}
		return 0;
	case PE_PT_LIST:
		return parse_list(sp, s, v, err);
	case PE_PT_TEXT:
		if ((double)strlen(s) > sp->max)
			return pe_err_set(err, PE_EINVAL, sp->name, "%s is longer than %.0f bytes", sp->name, sp->max);
		if (!(v->text = strdup(s)))
			return pe_err_set(err, PE_ENOMEM, sp->name, "out of memory");
		return 0;
	}
	return PE_EINTERNAL;
}

int pe_params_set(struct pe_params *p, const char *key, const char *value, struct pe_err *err)
{
	int i = pe_param_index(p->def, key);
	if (i < 0)
		return pe_err_set(err, PE_EINVAL, key, "unknown parameter '%.40s' for /v1/%s", key, p->def->name);
	const struct pe_param_spec *sp = &p->def->params[i];
	struct pe_param_val *v = &p->v[i];
	if (v->given)
		return pe_err_set(err, PE_EINVAL, key, "%s is given more than once", key);
	if (!value || !*value)
		return pe_err_set(err, PE_EINVAL, key, "%s has an empty value", key);
	struct pe_param_val nv = {0};
	int rc = parse_value(sp, value, &nv, err);
	if (rc != 0)
		return rc;
	nv.set = nv.given = 1;
	*v = nv;
	return 0;
}

int pe_params_finish(struct pe_params *p, struct pe_err *err)
{
	const struct pe_table_def *def = p->def;
	for (int i = 0; i < def->nparams; i++) {
		const struct pe_param_spec *sp = &def->params[i];
		struct pe_param_val *v = &p->v[i];
		if (v->set)
			continue;
		if (!sp->def)
			return pe_err_set(err, PE_EINVAL, sp->name, "%s is required", sp->name);
		if (!*sp->def)
			continue;
		int rc = parse_value(sp, sp->def, v, err);
		if (rc != 0)
			return rc; /* a bad built-in default: caught by the registry test */
		v->set = 1;
	}
	return def->check ? def->check(p, err) : 0;
}

int64_t pe_param_int(const struct pe_params *p, const char *name) { return p->v[index_or_abort(p, name)].i; }
double pe_param_real(const struct pe_params *p, const char *name) { return p->v[index_or_abort(p, name)].r; }
int pe_param_enum(const struct pe_params *p, const char *name) { return (int)p->v[index_or_abort(p, name)].i; }
int pe_param_isset(const struct pe_params *p, const char *name) { return p->v[index_or_abort(p, name)].set; }

const double *pe_param_list(const struct pe_params *p, const char *name, size_t *n)
{
	const struct pe_param_val *v = &p->v[index_or_abort(p, name)];
	*n = v->nlist;
	return v->list;
}

int pe_table_shape(const struct pe_params *p, struct pe_shape *s)
{
	memset(s, 0, sizeof *s);
	return p->def->shape(p, s);
}

int pe_table_compute(const struct pe_params *p, enum pe_dtype dt, void *out, struct pe_err *err)
{
	if (p->def->fixed_dtype != PE_DTYPE_COUNT_ && dt != p->def->fixed_dtype)
		return pe_err_set(err, PE_EINVAL, "dtype", "/v1/%s is always %s", p->def->name,
				  pe_dtype_name(p->def->fixed_dtype));
	int rc = pe_cancelled();
	return rc ? pe_cancel_err(rc, err) : p->def->compute(p, dt, out, err);
}

/* Does v round to infinity in dt? (Only for finite v; i32 tables never get here.) */
static int overflows(double v, enum pe_dtype dt)
{
	switch (dt) {
	case PE_F16:
		return isinf(pe_f16_to_f32(pe_f64_to_f16(v)));
	case PE_BF16:
		return isinf(pe_bf16_to_f32(pe_f64_to_bf16(v)));
	case PE_F32:
		return isinf((float)v);
	default:
		return 0;
	}
}

static int dtype_too_narrow(double v, enum pe_dtype dt, struct pe_err *err)
{
	return pe_err_set(err, PE_EINVAL, "dtype", "values reach %.6g, which %s cannot hold (it rounds to infinity): "
			  "choose a wider dtype (%s)", v, pe_dtype_name(dt), dt == PE_F32 ? "f64" : "f32, f64");
}

int pe_table_check_dtype(const struct pe_params *p, enum pe_dtype dt, struct pe_err *err)
{
	double m = p->def->max_abs ? p->def->max_abs(p) : 0;
	return overflows(m, dt) ? dtype_too_narrow(m, dt, err) : 0;
}

int pe_check_dtype_range(const double *v, size_t n, enum pe_dtype dt, struct pe_err *err)
{
	for (size_t i = 0; i < n; i++)
		if (isfinite(v[i]) && overflows(v[i], dt))
			return dtype_too_narrow(v[i], dt, err);
	return 0;
}

int pe_table_cost(const struct pe_params *p, struct pe_cost *c)
{
	memset(c, 0, sizeof *c);
	c->intermediate_param = c->work_param = "";
	return p->def->cost ? p->def->cost(p, c) : 0;
}

int pe_table_rows_supported(const struct pe_params *p)
{
	struct pe_shape s;
	return p->def->compute_rows && p->def->shape && p->def->shape(p, &s) == 0 && s.rank >= 1 && s.rank <= 3;
}

/* The table's planes and rows per plane, or PE_EINTERNAL for a table without row computation. */
static int row_layout(const struct pe_params *p, size_t *planes, size_t *rows, size_t *row_bytes, enum pe_dtype dt,
		      struct pe_err *err)
{
	struct pe_shape s;
	if (!pe_table_rows_supported(p) || p->def->shape(p, &s) != 0)
		return pe_err_set(err, PE_EINTERNAL, "", "/v1/%s is computed whole only", p->def->name);
	if (p->def->fixed_dtype != PE_DTYPE_COUNT_ && dt != p->def->fixed_dtype)
		return pe_err_set(err, PE_EINVAL, "dtype", "/v1/%s is always %s", p->def->name,
				  pe_dtype_name(p->def->fixed_dtype));
	*planes = s.rank == 3 ? s.dim[0] : 1;
	*rows = s.rank >= 2 ? s.dim[s.rank - 2] : s.dim[0]; /* rank 1: a row is one element */
	*row_bytes = (s.rank >= 2 ? s.dim[s.rank - 1] : 1) * pe_dtype_size(dt);
	return 0;
}

int pe_table_compute_planes(const struct pe_params *p, enum pe_dtype dt, size_t row0, size_t nrows,
			    void *const *out, struct pe_err *err)
{
	size_t planes = 0, rows = 0, row_bytes = 0;
	int rc = row_layout(p, &planes, &rows, &row_bytes, dt, err);
	if (rc != 0)
		return rc;
	if (row0 > rows || nrows > rows - row0)
		return pe_err_set(err, PE_EINTERNAL, "", "rows %zu+%zu are outside the table", row0, nrows);
	return nrows ? p->def->compute_rows(p, dt, row0, nrows, out, err) : 0;
}

int pe_table_compute_rows(const struct pe_params *p, enum pe_dtype dt, size_t plane, size_t row0, size_t nrows,
			  void *out, struct pe_err *err)
{
	size_t planes = 0, rows = 0, row_bytes = 0;
	int rc = row_layout(p, &planes, &rows, &row_bytes, dt, err);
	if (rc != 0)
		return rc;
	if (plane >= planes && plane != PE_TABLE_ALL_PLANES)
		return pe_err_set(err, PE_EINTERNAL, "", "the table has no plane %zu", plane);
	void **outs = calloc(planes, sizeof *outs);
	if (!outs)
		return pe_err_set(err, PE_ENOMEM, "", "out of memory");
	for (size_t k = 0; k < planes; k++)
		if (plane == k || plane == PE_TABLE_ALL_PLANES)
			outs[k] = (char *)out + (plane == k ? 0 : k * nrows * row_bytes);
	rc = pe_table_compute_planes(p, dt, row0, nrows, outs, err);
	free(outs);
	return rc;
}

int pe_transform_shape(const struct pe_params *p, const struct pe_shape *in, struct pe_shape *out,
		       struct pe_err *err)
{
	memset(out, 0, sizeof *out);
	return p->def->out_shape(p, in, out, err);
}

int pe_transform_apply(const struct pe_params *p, const struct pe_tensor_mut *x, struct pe_tensor_mut *out,
		       enum pe_dtype final_dt, struct pe_err *err)
{
	if (x->dtype != PE_F32 && x->dtype != PE_F64)
		return pe_err_set(err, PE_EINTERNAL, "", "transforms work in f32 or f64");
	int rc = pe_cancelled();
	return rc ? pe_cancel_err(rc, err) : p->def->apply(p, x, out, final_dt, err);
}

enum pe_dtype pe_transform_work_dtype(enum pe_dtype in) { return in == PE_F64 ? PE_F64 : PE_F32; }

/* The parameters of from that were given and that to's table also has, copied into to through
 * their canonical text (pe_params_set parses them as a client's). */
int pe_params_derive(const struct pe_params *from, struct pe_params *to, struct pe_err *err)
{
	char *buf = malloc(PE_MAX_LIST * 26 + 64);
	if (!buf)
		return pe_err_set(err, PE_ENOMEM, "", "out of memory");
	int rc = 0;
	for (int i = 0; i < from->def->nparams && rc == 0; i++) {
		const struct pe_param_spec *sp = &from->def->params[i];
		if (!from->v[i].given || pe_param_index(to->def, sp->name) < 0)
			continue;
		if (pe_param_value_text(sp, &from->v[i], buf, PE_MAX_LIST * 26 + 64) < 0)
			rc = pe_err_set(err, PE_EINTERNAL, sp->name, "cannot copy %s", sp->name);
		else
			rc = pe_params_set(to, sp->name, buf, err);
	}
	free(buf);
	return rc;
}

void *pe_table_derived(const struct pe_params *from, const struct pe_table_def *def, const char *const *kv,
		       enum pe_dtype dt, size_t *count, struct pe_err *err)
{
	struct pe_params t;
	struct pe_shape shape;
	int of;
	void *out = NULL;
	pe_params_init(&t, def);
	int rc = pe_params_derive(from, &t, err);
	for (size_t i = 0; kv && kv[i] && rc == 0; i += 2)
		if (!t.v[pe_param_index(def, kv[i])].given)
			rc = pe_params_set(&t, kv[i], kv[i + 1], err);
	if (rc == 0)
		rc = pe_params_finish(&t, err);
	if (rc == 0)
		rc = pe_table_shape(&t, &shape);
	size_t n = rc == 0 ? pe_shape_count(&shape, &of) : 0;
	if (rc == 0 && !(out = malloc((n ? n : 1) * pe_dtype_size(dt))))
		pe_err_set(err, PE_ENOMEM, "", "out of memory");
	if (out && pe_table_compute(&t, dt, out, err) != 0) {
		free(out);
		out = NULL;
	}
	if (out && count)
		*count = n;
	if (!out && err && !err->code)
		pe_err_set(err, rc ? rc : PE_ENOMEM, "", "cannot compute /v1/%s", def->name);
	pe_params_destroy(&t);
	return out;
}

int pe_check_float32_range(const struct pe_params *p, const char *name, struct pe_err *err)
{
	int c = pe_param_index(p->def, "compat");
	if (c < 0 || p->v[c].i != PE_COMPAT_HF || !pe_param_isset(p, name))
		return 0;
	double v = fabs(pe_param_real(p, name));
	if (v != 0 && (v < 0x1p-126 || v > 0x1.fffffep127))
		return pe_err_set(err, PE_EINVAL, name,
				  "compat=hf computes in float32: %s must be between 1.2e-38 and 3.4e38 in magnitude", name);
	return 0;
}
