/* Streamed documents: a table written a block of rows at a time (tensor.h, pe_row_writer), for the
 * CLI, which must not hold a table of any size in memory.
 *
 * The bytes are the whole-table writers' (json.c, npy.c, bin.c, csv.c), rebuilt from the same
 * pieces: the JSON head comes from json.c, the npy header from npy.c, numbers from pe_fmt_list.
 * What the whole-table writers get from recursion, the nesting of the JSON data, is computed here
 * from the row index: between rows g-1 and g, each axis whose index in g has wrapped to 0 closes
 * and reopens a list, so the separator is "]" * z + "," + "[" * z with z the number of trailing
 * zero indices of g over the leading axes. Each block is checked for NaN and infinity before any
 * of it is printed (JSON and CSV have no spelling for them), as the whole-table writers check the
 * whole table first; a streamed document can therefore fail halfway, and the caller discards it. */
#include "posenc/tensor.h"
#include "tensor/internal.h"

#include <string.h>

static int levels(const struct pe_row_writer *w) { return w->shape.rank > 1 ? w->shape.rank - 1 : 0; }

/* Rows and row length: JSON's innermost lists (a rank-0 table is one row of one), CSV's lines
 * (one value per line below rank 2), raw formats like JSON. */
static void layout(struct pe_row_writer *w, size_t count)
{
	const struct pe_shape *s = &w->shape;
	w->width = s->rank >= 1 ? s->dim[s->rank - 1] : 1;
	if (w->fmt == PE_FMT_CSV && s->rank < 2)
		w->width = 1;
	w->rows = w->width ? count / w->width : 0;
}

static int csv_begin(const struct pe_row_writer *w, struct pe_buf *b)
{
	if (w->shape.rank < 3)
		return 0;
	char dims[PE_MAX_RANK * 21 + 1];
	pe_shape_format(&w->shape, dims, sizeof dims);
	return pe_buf_printf(b, "# shape: %s; rows are the last axis flattened in C order\n", dims);
}

static int npy_begin(const struct pe_row_writer *w, struct pe_buf *b, struct pe_err *err)
{
	struct pe_tensor_view t = {.shape = w->shape, .dtype = w->dtype, .data = NULL};
	size_t n = pe_npy_header_len(&t);
	if (n == 0 || w->dtype == PE_BF16)
		return pe_err_set(err, PE_EINVAL, "dtype", "bf16 has no NumPy dtype");
	int rc = pe_buf_reserve(b, n);
	if (rc == 0)
		b->len += pe_npy_write_header(b->data + b->len, &t);
	return rc;
}

int pe_row_writer_begin(struct pe_row_writer *w, enum pe_format fmt, const struct pe_params *p,
			const struct pe_shape *s, enum pe_dtype dt, struct pe_buf *b, struct pe_err *err)
{
	int overflow;
	memset(w, 0, sizeof *w);
	w->fmt = fmt;
	w->shape = *s;
	w->dtype = dt;
	size_t count = pe_shape_count(s, &overflow);
	if (s->rank < 0 || s->rank > PE_MAX_RANK || overflow || pe_dtype_size(dt) == 0 || count == 0)
		return pe_err_set(err, PE_EINTERNAL, "", "cannot stream a table of this shape or dtype");
	layout(w, count);
	size_t start = b->len;
	int rc = 0;
	switch (fmt) {
	case PE_FMT_JSON: {
		struct pe_tensor_view t = {.shape = *s, .dtype = dt, .data = NULL};
		rc = pe_json_write_head(b, p, &t);
		for (int k = 0; k < levels(w) && rc == 0; k++)
			rc = pe_buf_append(b, "[", 1);
		break;
	}
	case PE_FMT_NPY:
		rc = npy_begin(w, b, err);
		break;
	case PE_FMT_BIN:
		break;
	case PE_FMT_CSV:
		rc = csv_begin(w, b);
		break;
	default:
		return pe_err_set(err, PE_EINVAL, "format", "%s cannot be streamed", pe_format_name(fmt));
	}
	if (rc != 0) {
		b->len = start;
		if (rc != PE_EINVAL) /* npy_begin's own error names the dtype */
			pe_err_set(err, rc, "", "cannot write the %s header", pe_format_name(fmt));
	}
	return rc;
}

/* Trailing zero indices of row g over the leading axes (g > 0): the lists that close before it. */
static int wrapped(const struct pe_row_writer *w, size_t g)
{
	int z = 0;
	for (int k = w->shape.rank - 2; k >= 0 && g % w->shape.dim[k] == 0; k--) {
		z++;
		g /= w->shape.dim[k];
	}
	return z;
}

/* One JSON row at p (room checked by the caller); returns the new end. */
static char *json_row(const struct pe_row_writer *w, const struct pe_tensor_view *t, size_t i, char *p)
{
	size_t g = w->next + i;
	if (g > 0) {
		int z = wrapped(w, g);
		memset(p, ']', (size_t)z);
		p[z] = ',';
		memset(p + z + 1, '[', (size_t)z);
		p += 2 * z + 1;
	}
	if (w->shape.rank == 0)
		return p + pe_fmt_list(t, 0, 1, p);
	*p++ = '[';
	p += pe_fmt_list(t, i * w->width, w->width, p);
	*p++ = ']';
	return p;
}

static int text_rows(struct pe_row_writer *w, const struct pe_tensor_view *t, size_t nrows, struct pe_buf *b,
		     struct pe_err *err)
{
	size_t count = nrows * w->width, bad = pe_first_nonfinite(t, count);
	if (bad < count)
		return pe_err_set(err, PE_EINTERNAL, "", "element %zu is not finite", w->next * w->width + bad);
	/* per row: the widest numbers, the spare bytes pe_fmt_list may touch, separators and brackets */
	size_t per_row = w->width * pe_fmt_width(w->dtype) + PE_NUM_MAX + 2 * (size_t)levels(w) + 4;
	for (size_t i = 0; i < nrows; i++) {
		int rc = pe_buf_reserve(b, per_row);
		if (rc != 0)
			return pe_err_set(err, rc, "", "out of memory writing %s", pe_format_name(w->fmt));
		char *p = b->data + b->len;
		if (w->fmt == PE_FMT_JSON) {
			p = json_row(w, t, i, p);
		} else {
			p += pe_fmt_list(t, i * w->width, w->width, p);
			*p++ = '\n';
		}
		b->len = (size_t)(p - b->data);
	}
	return 0;
}

int pe_row_writer_rows(struct pe_row_writer *w, const void *data, size_t nrows, struct pe_buf *b,
		       struct pe_err *err)
{
	if (nrows > w->rows - w->next)
		return pe_err_set(err, PE_EINTERNAL, "", "more rows than the table has");
	struct pe_tensor_view t = {.shape = {.rank = 1, .dim = {nrows * w->width}}, .dtype = w->dtype, .data = data};
	size_t start = b->len;
	int rc;
	if (w->fmt == PE_FMT_JSON || w->fmt == PE_FMT_CSV)
		rc = text_rows(w, &t, nrows, b, err);
	else if ((rc = pe_buf_append(b, data, nrows * w->width * pe_dtype_size(w->dtype))) != 0)
		rc = pe_err_set(err, rc, "", "out of memory");
	if (rc != 0) {
		b->len = start;
		return rc;
	}
	w->next += nrows;
	return 0;
}

int pe_row_writer_end(struct pe_row_writer *w, struct pe_buf *b, struct pe_err *err)
{
	if (w->next != w->rows)
		return pe_err_set(err, PE_EINTERNAL, "", "%zu of %zu rows written", w->next, w->rows);
	if (w->fmt != PE_FMT_JSON)
		return 0;
	int rc = 0;
	for (int k = 0; k < levels(w) && rc == 0; k++)
		rc = pe_buf_append(b, "]", 1);
	if (rc == 0)
		rc = pe_buf_append(b, "}", 1);
	return rc ? pe_err_set(err, rc, "", "out of memory") : 0;
}
