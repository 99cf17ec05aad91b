/* CSV output: one line per row of the last axis, values comma-separated, shortest for the dtype.
 *
 * Rank 2 is the natural case (one line per position); rank 1 is one value per line and rank 0 a
 * single line. Higher ranks are flattened to rows of the last axis in C order, preceded by one
 * comment line "# shape: 2,16,64; rows are the last axis flattened in C order" so the reader can
 * reshape (np.loadtxt(f, delimiter=",", comments="#").reshape(2, 16, 64)). Lines end in LF, not
 * RFC 4180's CRLF: np.loadtxt, pandas and spreadsheets all read LF, and it is what
 * numpy.savetxt writes. No header row. NaN/Infinity are refused with PE_EINTERNAL as in JSON, so
 * every format fails alike. Numbers are printed in place as json.c does; on error the buffer is
 * put back to its length on entry. */
#include "posenc/tensor.h"
#include "tensor/internal.h"

#include <stdio.h>
#include <string.h>

/* Print element i (after `sep` if not 0) at b->len: in place when PE_NUM_MAX + 1 bytes are free,
 * else through a scratch array and an exact append so max holds to the byte. */
static int put_elem(struct pe_buf *b, const struct pe_tensor_view *t, size_t i, char sep)
{
	char tmp[PE_NUM_MAX + 1], *p = b->data + b->len;
	if (b->cap - b->len > PE_NUM_MAX) {
		if (sep)
			*p++ = sep;
		p += pe_fmt_elem(t, i, p);
		b->len = (size_t)(p - b->data);
		return 0;
	}
	size_t n = 0;
	if (sep)
		tmp[n++] = sep;
	n += pe_fmt_elem(t, i, tmp + n);
	return pe_buf_append(b, tmp, n);
}

static int put_row(struct pe_buf *b, const struct pe_tensor_view *t, size_t start, size_t n)
{
	if ((b->cap - b->len) / pe_fmt_width(t->dtype) > n + PE_NUM_MAX) { /* the row's widest form fits */
		b->len += pe_fmt_list(t, start, n, b->data + b->len);
		b->data[b->len++] = '\n';
		return 0;
	}
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = put_elem(b, t, start + i, i ? ',' : 0);
	return rc ? rc : pe_buf_append(b, "\n", 1);
}

#define COMMENT "# shape: %s; rows are the last axis flattened in C order\n"

static int put_shape_comment(struct pe_buf *b, const struct pe_shape *s)
{
	char dims[PE_MAX_RANK * 21 + 1];
	pe_shape_format(s, dims, sizeof dims);
	return pe_buf_printf(b, COMMENT, dims);
}

/* The shape comment's length (0 below rank 3). */
static size_t comment_len(const struct pe_shape *s)
{
	char dims[PE_MAX_RANK * 21 + 1];
	if (s->rank < 3)
		return 0;
	pe_shape_format(s, dims, sizeof dims);
	int n = snprintf(NULL, 0, COMMENT, dims);
	return n > 0 ? (size_t)n : 0;
}

/* Rows and row length: rank 0 is one row of one, rank 1 n rows of one. Saturates (a bound's shape
 * may not fit in memory; a written view's rows are a prefix of its count's product). */
static void row_layout(const struct pe_shape *s, size_t count, size_t *rows, size_t *width)
{
	*rows = count;
	*width = 1;
	if (s->rank >= 2) {
		*width = s->dim[s->rank - 1];
		*rows = 1;
		for (int k = 0; k + 1 < s->rank; k++)
			*rows = pe_sat_mul(*rows, s->dim[k]);
	}
}

/* Every element at its widest with its separator (a comma, or the line's end), and a line end for
 * each row, empty rows included. */
static size_t rows_estimate(const struct pe_shape *s, enum pe_dtype dt, size_t count)
{
	size_t rows, width;
	row_layout(s, count, &rows, &width);
	return pe_sat_add(pe_sat_mul(count, pe_fmt_width(dt)), rows);
}

size_t pe_csv_bound(const struct pe_shape *s, enum pe_dtype dt)
{
	if (s->rank < 0 || s->rank > PE_MAX_RANK || pe_dtype_size(dt) == 0)
		return SIZE_MAX;
	return pe_sat_add(comment_len(s), rows_estimate(s, dt, pe_shape_count_sat(s)));
}

static int write_rows(struct pe_buf *b, const struct pe_tensor_view *t, size_t count)
{
	size_t rows, width;
	row_layout(&t->shape, count, &rows, &width);
	int rc = t->shape.rank >= 3 ? put_shape_comment(b, &t->shape) : 0;
	/* one up-front reservation of the widest rows, clamped to what max allows: the output never
	 * grows the buffer after it, so pe_csv_bound holds the buffer's block too */
	size_t est = rows_estimate(&t->shape, t->dtype, count), left = b->max - b->len;
	if (rc == 0)
		rc = pe_buf_reserve(b, est < left ? est : left);
	for (size_t r = 0; r < rows && rc == 0; r++)
		rc = put_row(b, t, r * width, width);
	return rc;
}

int pe_csv_write(struct pe_buf *b, const struct pe_tensor_view *t, struct pe_err *err)
{
	int overflow;
	if (t->shape.rank < 0 || t->shape.rank > PE_MAX_RANK || pe_dtype_size(t->dtype) == 0)
		return pe_err_set(err, PE_EINTERNAL, "", "CSV: invalid view (rank %d)", t->shape.rank);
	size_t count = pe_shape_count(&t->shape, &overflow), start = b->len;
	if (overflow)
		return pe_err_set(err, PE_ETOOBIG, "", "CSV: the shape has more elements than fit in memory");
	size_t bad = pe_first_nonfinite(t, count);
	if (bad < count)
		return pe_err_set(err, PE_EINTERNAL, "", "element %zu is not finite", bad);
	int rc = write_rows(b, t, count);
	if (rc != 0) {
		b->len = start;
		return pe_err_set(err, rc, "", rc == PE_ETOOBIG ? "the CSV output exceeds the limit of %zu bytes"
							   : "out of memory writing CSV (limit %zu bytes)",
				  b->max);
	}
	return 0;
}
