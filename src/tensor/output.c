/* Output options and encoding of tensor responses (see include/posenc/output.h). */
#include "posenc/output.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pe_out_is_param(const char *key)
{
	return !strcmp(key, "format") || !strcmp(key, "dtype") || !strcmp(key, "cmap") || !strcmp(key, "scale");
}

int pe_out_take(struct pe_out_query *q, const char *key, const char *value, struct pe_err *err)
{
	const char **slot = !strcmp(key, "format") ? &q->format
			    : !strcmp(key, "dtype") ? &q->dtype
			    : !strcmp(key, "cmap")  ? &q->cmap
						    : &q->scale;
	if (*slot)
		return pe_err_set(err, PE_EINVAL, key, "%s is given more than once", key);
	if (!value || !*value)
		return pe_err_set(err, PE_EINVAL, key, "%s has an empty value", key);
	*slot = value;
	return 0;
}

int pe_out_pick_dtype(const char *s, enum pe_dtype fixed, enum pe_format fmt, enum pe_dtype *dt, struct pe_err *err)
{
	if (fixed != PE_DTYPE_COUNT_) {
		*dt = fixed;
		if (s && strcmp(s, pe_dtype_name(fixed)) != 0)
			return pe_err_set(err, PE_EINVAL, "dtype", "this table is always %s", pe_dtype_name(fixed));
		return 0;
	}
	*dt = PE_F32;
	if (s && (pe_dtype_parse(s, dt) != 0 || *dt == PE_I32))
		return pe_err_set(err, PE_EINVAL, "dtype", "dtype must be one of: f32, f64, f16, bf16");
	if (fmt == PE_FMT_NPY && *dt == PE_BF16)
		return pe_err_set(err, PE_EINVAL, "dtype", "bf16 has no NumPy dtype; use format=bin");
	return 0;
}

static int compressible(enum pe_format f) { return f == PE_FMT_JSON || f == PE_FMT_CSV; }

/* cmap and scale: only with format=png. */
static int pick_png(struct pe_out *o, const struct pe_out_query *q, struct pe_err *err)
{
	o->cmap = PE_CMAP_VIRIDIS;
	o->scale = 0;
	if (o->fmt != PE_FMT_PNG) {
		if (q->cmap || q->scale)
			return pe_err_set(err, PE_EINVAL, q->cmap ? "cmap" : "scale", "%s applies to format=png only",
					  q->cmap ? "cmap" : "scale");
		return 0;
	}
	enum pe_cmap c;
	if (q->cmap && pe_cmap_parse(q->cmap, &c) != 0)
		return pe_err_set(err, PE_EINVAL, "cmap", "cmap must be viridis or RdBu");
	if (q->cmap)
		o->cmap = (int)c;
	if (q->scale) {
		char *end;
		long v = strtol(q->scale, &end, 10);
		if (*q->scale < '0' || *q->scale > '9' || *end || v < 0 || v > PE_PNG_MAX_SCALE)
			return pe_err_set(err, PE_EINVAL, "scale", "scale must be an integer from 0 (automatic) to %d",
					  PE_PNG_MAX_SCALE);
		o->scale = (int)v;
	}
	return 0;
}

int pe_out_resolve(struct pe_out *o, const struct pe_out_query *q, const char *accept, const char *accept_encoding,
		   enum pe_dtype fixed_dtype, unsigned offered, struct pe_err *err)
{
	int rc = pe_negotiate_format(q->format, accept, offered, &o->fmt, err);
	if (rc == 0)
		rc = pe_out_pick_dtype(q->dtype, fixed_dtype, o->fmt, &o->dt, err);
	if (rc == 0)
		rc = pick_png(o, q, err);
	o->gzip = rc == 0 && compressible(o->fmt) && pe_accepts_gzip(accept_encoding);
	return rc;
}

int pe_out_key(const struct pe_out *o, char *buf, size_t cap)
{
	int n = o->fmt == PE_FMT_PNG
			? snprintf(buf, cap, "|%s|png|%s|%d", pe_dtype_name(o->dt), pe_cmap_name(o->cmap), o->scale)
			: snprintf(buf, cap, "|%s|%s%s", pe_dtype_name(o->dt), pe_format_name(o->fmt), o->gzip ? "|gz" : "");
	return n < 0 || (size_t)n >= cap ? -1 : n;
}

/* The most a format's writer reserves or writes (SIZE_MAX for none). */
static size_t writer_bound(const struct pe_out *o, const struct pe_shape *s, size_t params,
			   const struct pe_png_layout *png)
{
	switch (o->fmt) {
	case PE_FMT_JSON:
		return pe_json_bound(s, o->dt, params);
	case PE_FMT_NPY:
		return pe_npy_bound(s, o->dt);
	case PE_FMT_BIN:
		return pe_bin_bound(s, o->dt);
	case PE_FMT_CSV:
		return pe_csv_bound(s, o->dt);
	case PE_FMT_PNG:
		return png ? pe_png_bound(png) : SIZE_MAX;
	default:
		return SIZE_MAX;
	}
}

size_t pe_out_bound(const struct pe_out *o, const struct pe_shape *s, size_t params, const struct pe_png_layout *png)
{
	size_t plain = writer_bound(o, s, params, png);
	if (plain == SIZE_MAX)
		return SIZE_MAX;
	size_t held = pe_buf_bound(plain);
	if (!o->gzip)
		return held;
	size_t gz = pe_buf_bound(pe_gzip_bound(plain)); /* the text stays while its copy is made */
	return held > SIZE_MAX - gz ? SIZE_MAX : held + gz;
}

int pe_out_raw_direct(const struct pe_out *o) { return o->fmt == PE_FMT_BIN; }

static uint64_t sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

uint64_t pe_out_job_need(const struct pe_out *o, const struct pe_shape *s, uint64_t scratch, uint64_t out)
{
	int overflow;
	if (pe_out_raw_direct(o) || (o->fmt == PE_FMT_NPY && o->dt != PE_BF16))
		return sat_add(out, scratch);
	uint64_t n = pe_shape_count(s, &overflow), size = pe_dtype_size(o->dt);
	uint64_t raw = overflow || (size && n > UINT64_MAX / size) ? UINT64_MAX : n * size;
	return sat_add(raw, scratch > out ? scratch : out);
}

size_t pe_out_key_room(const struct pe_params *p)
{
	size_t cap = 4096;
	for (int i = 0; i < p->def->nparams; i++) {
		const struct pe_param_val *v = &p->v[i];
		cap += strlen(p->def->params[i].name) + 32 + 26 * v->nlist + (v->text ? strlen(v->text) : 0);
	}
	return cap;
}

uint64_t pe_out_table_need(const struct pe_params *p, const struct pe_out *o, uint64_t *out)
{
	struct pe_shape s;
	struct pe_cost c;
	*out = UINT64_MAX;
	if (pe_table_shape(p, &s) != 0 || pe_table_cost(p, &c) != 0 || o->fmt == PE_FMT_PNG)
		return UINT64_MAX;
	size_t b = pe_out_bound(o, &s, 2 * pe_out_key_room(p) + 1024, NULL);
	*out = b == SIZE_MAX ? UINT64_MAX : b;
	return pe_out_job_need(o, &s, c.scratch_bytes, *out);
}

static int encode_plain(const struct pe_out *o, const struct pe_parallel *par, const struct pe_params *p,
			const struct pe_tensor_view *t, struct pe_buf *out, struct pe_err *err)
{
	switch (o->fmt) {
	case PE_FMT_JSON:
		/* p NULL: no encoding/params fields; big tables are encoded with par's threads */
		return pe_json_write_table_mt(out, p, t, par, err);
	case PE_FMT_NPY:
		return pe_npy_write(out, t, err);
	case PE_FMT_BIN:
		return pe_bin_write(out, t);
	case PE_FMT_CSV:
		return pe_csv_write(out, t, err);
	case PE_FMT_PNG: {
		struct pe_png_options po;
		pe_png_options_init(&po);
		po.cmap = (enum pe_cmap)o->cmap;
		po.scale = o->scale;
		po.labels = p ? p->def->panel_labels : NULL;
		return pe_png_write(out, t, &po, err);
	}
	default:
		return pe_err_set(err, PE_ENOTACCEPT, "format", "format=%s is not offered here", pe_format_name(o->fmt));
	}
}

int pe_out_encode(const struct pe_out *o, const struct pe_parallel *par, const struct pe_params *p,
		  const struct pe_tensor_view *t, struct pe_buf *out, struct pe_err *err)
{
	if (!o->gzip)
		return encode_plain(o, par, p, t, out, err);
	struct pe_buf plain;
	pe_buf_init(&plain, out->max);
	pe_buf_set_budget(&plain, out->budget); /* the uncompressed text counts too */
	int rc = encode_plain(o, par, p, t, &plain, err);
	if (rc == 0 && (rc = pe_gzip(out, plain.data, plain.len, 6)) != 0)
		pe_err_set(err, rc, "", "cannot compress the response");
	pe_buf_destroy(&plain);
	return rc;
}
