/* JSON output: the table document of the contract, its nested "data" array and the canonical
 * parameters object, written straight into a pe_buf.
 *
 * This is the hot path of the default format (a 512x768 f32 table is 393,216 numbers), so it does
 * not build a jansson tree (jansson prints %.17g and allocates per value). The buffer is reserved
 * once up front from a per-dtype bound on the number width (clamped to the buffer's max), and the
 * numbers are printed by pe_fmt_elem straight at a write pointer held in locals; only when fewer
 * than PE_NUM_MAX + 1 bytes are left does a number go through a scratch array and an exact append,
 * so the buffer's max is enforced to the byte, not against the estimate. Values are checked for
 * NaN/Infinity in one pass before anything is written (JSON has no spelling for them: that is
 * PE_EINTERNAL, a table should never hold one). Output is compact: no spaces, no newline. On any
 * error the buffer is put back to the length it had on entry. */
#include "posenc/tensor.h"
#include "tensor/internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- the write cursor ---- */

/* p and end mirror b->data + b->len and b->data + b->cap between syncs. */
struct out {
	struct pe_buf *b;
	char *p, *end;
};

static void out_open(struct out *o, struct pe_buf *b)
{
	o->b = b;
	o->p = b->data + b->len;
	o->end = b->data + b->cap;
}

static void out_sync(struct out *o) { o->b->len = (size_t)(o->p - o->b->data); }

/* Make room for n more bytes; may move the buffer. */
static int out_room(struct out *o, size_t n)
{
	if ((size_t)(o->end - o->p) >= n)
		return 0;
	out_sync(o);
	int rc = pe_buf_reserve(o->b, n);
	out_open(o, o->b);
	return rc;
}

static int out_put(struct out *o, const char *s, size_t n)
{
	int rc = out_room(o, n);
	if (rc != 0)
		return rc;
	memcpy(o->p, s, n);
	o->p += n;
	return 0;
}

static int out_char(struct out *o, char c) { return out_put(o, &c, 1); }

/* One element, preceded by `sep` when it is not 0. */
static int out_elem(struct out *o, const struct pe_tensor_view *t, size_t i, char sep)
{
	char tmp[PE_NUM_MAX + 1];
	size_t n = 0;
	if (sep)
		tmp[n++] = sep;
	n += pe_fmt_elem(t, i, tmp + n);
	return out_put(o, tmp, n);
}

/* ---- checks shared by the writers ---- */

/* Element count of a writable view, or an error (bad rank or dtype, overflow, NaN/Infinity). */
static int check_view(const struct pe_tensor_view *t, size_t *count, struct pe_err *err)
{
	int overflow;
	if (t->shape.rank < 0 || t->shape.rank > PE_MAX_RANK || pe_dtype_size(t->dtype) == 0)
		return pe_err_set(err, PE_EINTERNAL, "", "JSON: invalid view (rank %d, dtype %d)", t->shape.rank,
				  (int)t->dtype);
	*count = pe_shape_count(&t->shape, &overflow);
	if (overflow)
		return pe_err_set(err, PE_ETOOBIG, "", "JSON: the shape has more elements than fit in memory");
	size_t bad = pe_first_nonfinite(t, *count);
	if (bad < *count)
		return pe_err_set(err, PE_EINTERNAL, "",
				  "element %zu is not finite and has no JSON representation", bad);
	return 0;
}

/* ---- the nested data array ---- */

#define HEAD_GUESS 256 /* bytes before "data" in most documents: encoding, params, shape, dtype */

/* Bytes the data array will take at most (saturating): elements plus brackets and commas. */
static size_t data_estimate(const struct pe_tensor_view *t, size_t count)
{
	size_t est = pe_sat_mul(count, pe_fmt_width(t->dtype)), lists = 1;
	for (int k = 0; k + 1 < t->shape.rank; k++) {
		lists = pe_sat_mul(lists, t->shape.dim[k]);
		est = pe_sat_add(est, pe_sat_mul(lists, 3));
	}
	return pe_sat_add(est, 16);
}

/* One innermost list: n elements from `start`. The fast path prints the whole row in place when
 * its widest form fits; near the buffer's end, element by element at a local pointer. */
static int write_row(struct out *o, const struct pe_tensor_view *t, size_t start, size_t n)
{
	if ((size_t)(o->end - o->p) / pe_fmt_width(t->dtype) > n + PE_NUM_MAX) {
		*o->p++ = '[';
		o->p += pe_fmt_list(t, start, n, o->p);
		*o->p++ = ']';
		return 0;
	}
	int rc = out_char(o, '[');
	char *p = o->p, *end = o->end;
	for (size_t i = 0; i < n && rc == 0; i++) {
		if ((size_t)(end - p) > PE_NUM_MAX) {
			if (i)
				*p++ = ',';
			p += pe_fmt_elem(t, start + i, p);
			continue;
		}
		o->p = p;
		rc = out_elem(o, t, start + i, i ? ',' : 0);
		p = o->p;
		end = o->end;
	}
	o->p = p;
	return rc ? rc : out_char(o, ']');
}

/* The lists of axis `level` and below; *next is the index of the next element to print. */
static int write_level(struct out *o, const struct pe_tensor_view *t, int level, size_t *next)
{
	size_t n = t->shape.dim[level];
	if (level == t->shape.rank - 1) {
		int rc = write_row(o, t, *next, n);
		*next += n;
		return rc;
	}
	int rc = out_char(o, '[');
	for (size_t i = 0; i < n && rc == 0; i++) {
		if (i)
			rc = out_char(o, ',');
		if (rc == 0)
			rc = write_level(o, t, level + 1, next);
	}
	return rc ? rc : out_char(o, ']');
}

/* The data of a checked view; a rank-0 view is a bare number. */
static int write_data(struct pe_buf *b, const struct pe_tensor_view *t, size_t count)
{
	size_t est = data_estimate(t, count), left = b->max - b->len;
	int rc = pe_buf_reserve(b, est < left ? est : left);
	if (rc != 0)
		return rc;
	struct out o;
	out_open(&o, b);
	size_t next = 0;
	rc = t->shape.rank == 0 ? out_elem(&o, t, 0, 0) : write_level(&o, t, 0, &next);
	out_sync(&o);
	return rc;
}

static int size_error(struct pe_err *err, int rc, const struct pe_buf *b)
{
	if (rc == PE_ETOOBIG)
		return pe_err_set(err, rc, "", "the JSON output exceeds the limit of %zu bytes", b->max);
	return pe_err_set(err, rc, "", "out of memory writing JSON");
}

int pe_json_write_data(struct pe_buf *b, const struct pe_tensor_view *t, struct pe_err *err)
{
	size_t count = 0, start = b->len;
	int rc = check_view(t, &count, err);
	if (rc != 0)
		return rc;
	rc = write_data(b, t, count);
	if (rc != 0) {
		b->len = start;
		return size_error(err, rc, b);
	}
	return 0;
}

/* ---- small values: strings, reals, the params object ---- */

/* A JSON string: '"' and '\\' escaped, control bytes as \u00XX, other bytes (UTF-8) as they are.
 * Runs of bytes that need no escape are appended whole (names and enum values are all such runs:
 * byte by byte was a visible share of a small table's head). */
static int put_string(struct pe_buf *b, const char *s)
{
	int rc = pe_buf_append(b, "\"", 1);
	const char *c = s;
	while (rc == 0 && *c) {
		size_t run = 0;
		while ((unsigned char)c[run] >= 0x20 && c[run] != '"' && c[run] != '\\')
			run++; /* stops at the NUL too */
		if (run) {
			rc = pe_buf_append(b, c, run);
			c += run;
			continue;
		}
		unsigned char u = (unsigned char)*c++;
		if (u == '"' || u == '\\')
			rc = pe_buf_printf(b, "\\%c", u);
		else
			rc = pe_buf_printf(b, "\\u%04x", u);
	}
	return rc ? rc : pe_buf_append(b, "\"", 1);
}

/* "key": */
static int put_key(struct pe_buf *b, const char *key)
{
	int rc = put_string(b, key);
	return rc ? rc : pe_buf_append(b, ":", 1);
}

static int put_real(struct pe_buf *b, double x)
{
	char tmp[PE_NUM_MAX];
	if (!isfinite(x))
		return PE_EINTERNAL;
	return pe_buf_append(b, tmp, pe_fmt_f64(x, tmp));
}

static int put_list(struct pe_buf *b, const double *v, size_t n)
{
	int rc = pe_buf_append(b, "[", 1);
	for (size_t i = 0; i < n && rc == 0; i++) {
		if (i)
			rc = pe_buf_append(b, ",", 1);
		if (rc == 0)
			rc = put_real(b, v[i]);
	}
	return rc ? rc : pe_buf_append(b, "]", 1);
}

/* A size in decimal (the head is written for every table: printf's parser was a visible share). */
static int put_size(struct pe_buf *b, size_t v)
{
	char digits[24];
	size_t i = sizeof digits;
	do
		digits[--i] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	return pe_buf_append(b, digits + i, sizeof digits - i);
}

static int put_value(struct pe_buf *b, const struct pe_param_spec *sp, const struct pe_param_val *v)
{
	switch (sp->type) {
	case PE_PT_INT:
	case PE_PT_BOOL: {
		int rc = v->i < 0 ? pe_buf_append(b, "-", 1) : 0;
		return rc ? rc : put_size(b, v->i < 0 ? (size_t)(0ull - (unsigned long long)v->i) : (size_t)v->i);
	}
	case PE_PT_REAL:
		return put_real(b, v->r);
	case PE_PT_ENUM:
		return put_string(b, sp->choices[v->i]);
	case PE_PT_LIST:
		return put_list(b, v->list, v->nlist);
	case PE_PT_TEXT:
		return put_string(b, v->text);
	}
	return PE_EINTERNAL;
}

static int write_params(struct pe_buf *b, const struct pe_params *p)
{
	int rc = pe_buf_append(b, "{", 1), first = 1;
	for (int i = 0; i < p->def->nparams && rc == 0; i++) {
		if (!p->v[i].set)
			continue;
		if (!first)
			rc = pe_buf_append(b, ",", 1);
		first = 0;
		if (rc == 0)
			rc = put_key(b, p->def->params[i].name);
		if (rc == 0)
			rc = put_value(b, &p->def->params[i], &p->v[i]);
	}
	return rc ? rc : pe_buf_append(b, "}", 1);
}

int pe_json_write_params(struct pe_buf *b, const struct pe_params *p)
{
	size_t start = b->len;
	int rc = write_params(b, p);
	if (rc != 0)
		b->len = start;
	return rc;
}

/* ---- the table document ---- */

/* Everything before "data": encoding, params, shape, dtype and the table's extra scalar. */
static int write_head(struct pe_buf *b, const struct pe_params *p, const struct pe_tensor_view *t)
{
	int rc = pe_buf_append(b, "{", 1);
	if (rc == 0 && p) {
		rc = put_key(b, "encoding");
		if (rc == 0)
			rc = put_string(b, p->def->name);
		if (rc == 0)
			rc = pe_buf_puts(b, ",\"params\":");
		if (rc == 0)
			rc = write_params(b, p);
		if (rc == 0)
			rc = pe_buf_append(b, ",", 1);
	}
	if (rc == 0)
		rc = pe_buf_puts(b, "\"shape\":[");
	for (int k = 0; k < t->shape.rank && rc == 0; k++) {
		if (k)
			rc = pe_buf_append(b, ",", 1);
		if (rc == 0)
			rc = put_size(b, t->shape.dim[k]);
	}
	if (rc == 0)
		rc = pe_buf_puts(b, "],\"dtype\":\"");
	if (rc == 0)
		rc = pe_buf_puts(b, pe_dtype_name(t->dtype));
	if (rc == 0)
		rc = pe_buf_puts(b, "\",");
	if (rc == 0 && p && p->def->extra_name && p->def->extra) {
		rc = put_key(b, p->def->extra_name);
		if (rc == 0)
			rc = put_real(b, p->def->extra(p));
		if (rc == 0)
			rc = pe_buf_append(b, ",", 1);
	}
	return rc ? rc : pe_buf_puts(b, "\"data\":");
}

int pe_json_write_head(struct pe_buf *b, const struct pe_params *p, const struct pe_tensor_view *t)
{
	return write_head(b, p, t);
}

int pe_json_write_table(struct pe_buf *b, const struct pe_params *p, const struct pe_tensor_view *t,
			struct pe_err *err)
{
	size_t count = 0, start = b->len;
	int rc = check_view(t, &count, err);
	if (rc != 0)
		return rc;
	/* one block for the document (the head is rarely longer than HEAD_GUESS): a small table's
	 * buffer was otherwise grown four times, each growth a realloc on the HTTP thread */
	size_t want = pe_sat_add(data_estimate(t, count), HEAD_GUESS), left = b->max - b->len;
	rc = pe_buf_reserve(b, want < left ? want : left);
	if (rc == 0)
		rc = write_head(b, p, t);
	if (rc == PE_EINTERNAL) {
		b->len = start;
		return pe_err_set(err, rc, "", "a parameter or %s is not finite",
				  p && p->def->extra_name ? p->def->extra_name : "extra value");
	}
	if (rc == 0)
		rc = write_data(b, t, count);
	if (rc == 0)
		rc = pe_buf_append(b, "}", 1);
	if (rc != 0) {
		b->len = start;
		return size_error(err, rc, b);
	}
	return 0;
}

/* ---- the table document, encoded by several threads ----
 * The rows of the outermost axis are split into chunks, each encoded as one call of the caller's
 * pe_parallel (numbers are printed independently, so the bytes equal the one-thread document).
 * This layer starts no thread: the threads are the daemon's workers (pe_parallel in tensor.h).
 * Every chunk writes straight into its own window of the final buffer, reserved once from the
 * width bound (the window's pe_buf has max == cap, so it can never move or grow: a chunk that did
 * not fit would fail with PE_ETOOBIG, and the document falls back to one thread); the chunks are
 * then moved together in order. No scratch buffers: each page of the answer is faulted in once, by
 * the thread that writes it and in one call (pe_mem_prefault). Worth it from about 64 Ki elements. */

#define MAX_CHUNKS 8

struct chunk {
	struct pe_tensor_view view;
	struct pe_buf win; /* a window of the final buffer */
	size_t at, count;  /* its offset there; the chunk's elements */
	int rc;
};

static void encode_chunk(void *arg, size_t k)
{
	struct chunk *c = (struct chunk *)arg + k;
	pe_mem_prefault(c->win.data, c->win.cap); /* each thread its own window's pages */
	c->rc = write_data(&c->win, &c->view, c->count); /* the whole view was checked */
}

static void chunk_view(const struct pe_tensor_view *t, size_t r0, size_t r1, struct pe_tensor_view *v)
{
	int of;
	struct pe_shape row = t->shape;
	row.dim[0] = 1;
	size_t per_row = pe_shape_count(&row, &of);
	*v = *t;
	v->shape.dim[0] = r1 - r0;
	v->data = (const char *)t->data + r0 * per_row * pe_dtype_size(t->dtype);
}

/* Windows for the chunks after b->len, each as wide as its data can be; 0 when they do not all
 * fit within b's max or memory (then one thread writes the document). */
static int plan_windows(struct pe_buf *b, const struct pe_tensor_view *t, struct chunk *c, unsigned n)
{
	size_t rows = t->shape.dim[0], total = 0;
	for (unsigned k = 0; k < n; k++) {
		chunk_view(t, rows * k / n, rows * (k + 1) / n, &c[k].view);
		c[k].at = total;
		c[k].count = pe_shape_count(&c[k].view.shape, &(int){0});
		total = pe_sat_add(total, data_estimate(&c[k].view, c[k].count));
	}
	total = pe_sat_add(total, 1); /* the closing brace */
	if (total > b->max - b->len || pe_buf_reserve(b, total) != 0)
		return 0;
	for (unsigned k = 0; k < n; k++) {
		size_t end = k + 1 < n ? c[k + 1].at : total - 1;
		c[k].at += b->len;
		c[k].win = (struct pe_buf){.data = b->data + c[k].at, .cap = end + b->len - c[k].at,
					   .max = end + b->len - c[k].at};
		c[k].rc = 0;
	}
	return 1;
}

/* Every chunk, through par when it can run them (else here, in order). */
static void run_chunks(const struct pe_parallel *par, struct chunk *c, unsigned n)
{
	if (par->run) {
		par->run(par->ctx, n, encode_chunk, c);
		return;
	}
	for (unsigned k = 0; k < n; k++)
		encode_chunk(c, k);
}

/* Move the chunks together: "[rows]" of each joined as "[rows,rows...]". */
static void join_chunks(struct pe_buf *b, const struct chunk *c, unsigned n)
{
	b->len = c[0].at + c[0].win.len;
	for (unsigned k = 1; k < n; k++) {
		b->data[b->len - 1] = ','; /* "...]" of the previous chunk becomes "...," */
		memmove(b->data + b->len, c[k].win.data + 1, c[k].win.len - 1);
		b->len += c[k].win.len - 1;
	}
}

int pe_json_write_table_mt(struct pe_buf *b, const struct pe_params *p, const struct pe_tensor_view *t,
			   const struct pe_parallel *par, struct pe_err *err)
{
	size_t count = 0;
	if (check_view(t, &count, err) != 0)
		return err && err->code ? err->code : PE_EINTERNAL;
	unsigned n = par ? par->width : 1;
	if (n > MAX_CHUNKS)
		n = MAX_CHUNKS;
	if (n < 2 || t->shape.rank < 2 || t->shape.dim[0] < n || count < 65536)
		return pe_json_write_table(b, p, t, err);
	size_t start = b->len;
	struct chunk c[MAX_CHUNKS];
	int rc = write_head(b, p, t);
	if (rc == 0 && !plan_windows(b, t, c, n)) {
		b->len = start; /* too big for the windows' bound: one thread, to the byte */
		return pe_json_write_table(b, p, t, err);
	}
	if (rc == 0) {
		run_chunks(par, c, n);
		for (unsigned k = 0; k < n && rc == 0; k++)
			rc = c[k].rc;
	}
	if (rc == PE_ETOOBIG) { /* a window was too narrow (the bound is wrong): one thread */
		b->len = start;
		return pe_json_write_table(b, p, t, err);
	}
	if (rc == 0) {
		join_chunks(b, c, n);
		rc = pe_buf_append(b, "}", 1);
	}
	if (rc != 0) {
		b->len = start;
		return size_error(err, rc, b);
	}
	return 0;
}

/* ---- the bound ----
 * One thread reserves the data's estimate (data_estimate: every number at its widest, the lists'
 * brackets and commas, 16 spare) with HEAD_GUESS for the head, or the head and then the estimate
 * when the head is longer; several threads write the head and then up to MAX_CHUNKS windows, each
 * an estimate of its own rows (the lists add up to the whole table's), and "}". */
size_t pe_json_bound(const struct pe_shape *s, enum pe_dtype dt, size_t params)
{
	if (s->rank < 0 || s->rank > PE_MAX_RANK || pe_dtype_size(dt) == 0)
		return SIZE_MAX;
	struct pe_tensor_view t = {.shape = *s, .dtype = dt};
	char mem[PE_MAX_RANK * 24 + 64];
	struct pe_buf b;
	pe_buf_init(&b, sizeof mem - 1);
	pe_buf_use(&b, mem, sizeof mem); /* the shape and dtype fit: never grown */
	size_t head = write_head(&b, NULL, &t) == 0 ? b.len : SIZE_MAX;
	pe_buf_destroy(&b);
	head = pe_sat_add(head, params);
	size_t data = data_estimate(&t, pe_shape_count_sat(s)) - 16; /* the windows' spares below */
	data = pe_sat_add(data, 16 * MAX_CHUNKS + 1);
	return pe_sat_add(data, head > HEAD_GUESS ? head : HEAD_GUESS);
}
