/* Compute a validated request's table and write it, block by block.
 *
 * Tables with a row computation (pe_table_rows_supported: sinusoidal, sinusoidal2d, rope, rope2d,
 * alibi, relative/t5, relative/xl, and the analyses: similarity's Gram rows, rope-decay's
 * distances) are computed BLOCK_BYTES of rows at a time into one reused buffer, small enough to
 * stay in the cache, so no page of a large table is ever faulted in. Rank-1 tables' rows are their
 * elements; rope/mrope/positions' three rows (up to 16 Mi tokens each) go out a window of tokens at a
 * time (stream_positions). Rank-3 tables go out in C order, plane after plane: while the planes after the first
 * fit in SPILL_BYTES, every block computes all planes at once and the later ones wait in memory
 * (spill_planes: rope's sin plane costs no second pass); larger ones are computed plane by plane
 * (each block's other planes are computed and dropped). The tables left (slopes, frequencies: a
 * few thousand numbers at most; analysis/order, at most 2^18) are computed whole, then written the same way. bin and npy rows go
 * out as computed; json and csv rows are encoded by the tensor layer's row writer (pe_row_writer)
 * TEXT_ELEMS elements at a time into one reused text buffer (rows wider than that, as a rank-1 JSON
 * list, one row of the writer, a slice at a time: put_slices). The bytes equal the daemon's for the same
 * parameters (the row writer reproduces pe_json_write_table, pe_npy_write, pe_csv_write), except
 * that JSON gets a final newline as command-line output should. */
#include "cli/cli.h"
#include "core/mrope.h" /* pe_mrope_sequence_positions: a window of tokens */
#include "core/tables.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define BLOCK_BYTES ((size_t)256 << 10) /* rows computed per block: about this many bytes */
#define MIN_BLOCK_BYTES ((size_t)16 << 20) /* up to 64 rows even when rows are wide */
#define TEXT_ELEMS ((size_t)1 << 16)     /* elements encoded between two writes */
#define SPILL_BYTES ((size_t)32 << 20)   /* later planes held in memory up to this (spill_planes) */
#define POS_TOKENS ((size_t)1 << 16)     /* rope/mrope/positions: tokens per window (stream_positions) */

struct sink {
	struct cli_out *o;
	struct pe_row_writer w;
	struct pe_buf text;
	int raw; /* bin, npy: rows are written as they are */
	size_t done; /* elements written */
};

static int flush_text(struct sink *s, struct pe_err *err)
{
	int rc = cli_out_write(s->o, s->text.data, s->text.len, err);
	s->text.len = 0;
	return rc;
}

/* Elements [done, done + n) of a rank-1 or rank-2 JSON or CSV table, in slices of rows (a rank-1
 * JSON list is one row; rope/mrope/positions' rows are up to 16 Mi tokens wide): the numbers come
 * from a CSV row writer over [1, m] (pe_fmt_list, JSON's own printer for a row) TEXT_ELEMS at a
 * time, its newline dropped; a row opens with "[" (",[" after the first: the table's row writer
 * opened the outer list of rank 2) and closes with "]" in JSON, ends with a newline in CSV. The
 * table's row writer then only closes the document. */
static int put_slices(struct sink *s, const char *data, size_t n, struct pe_err *err)
{
	size_t esz = pe_dtype_size(s->w.dtype), width = s->w.width;
	int json = s->w.fmt == PE_FMT_JSON;
	if (s->w.shape.rank > 2 || !width)
		return pe_err_set(err, PE_EINTERNAL, "", "cannot write part of a row of this table");
	for (size_t i = 0; i < n;) {
		size_t col = s->done % width, m = n - i;
		m = m < TEXT_ELEMS ? m : TEXT_ELEMS;
		m = m < width - col ? m : width - col;
		struct pe_tensor_view t = {.shape = {.rank = 1, .dim = {m}}, .dtype = s->w.dtype, .data = data + i * esz};
		size_t bad = pe_first_nonfinite(&t, m);
		if (bad < m)
			return pe_err_set(err, PE_EINTERNAL, "", "element %zu is not finite", s->done + bad);
		struct pe_shape row = {.rank = 2, .dim = {1, m}};
		struct pe_row_writer cw;
		const char *open = !json ? "" : s->done ? ",[" : "[";
		int rc = col ? pe_buf_append(&s->text, ",", 1) : pe_buf_append(&s->text, open, strlen(open));
		if (rc == 0)
			rc = pe_row_writer_begin(&cw, PE_FMT_CSV, NULL, &row, s->w.dtype, &s->text, err);
		if (rc == 0)
			rc = pe_row_writer_rows(&cw, data + i * esz, 1, &s->text, err);
		if (rc == 0) {
			s->text.len--; /* the CSV line's newline */
			s->done += m;
			i += m;
			if (s->done % width == 0) {
				s->w.next = s->done / width;
				rc = pe_buf_append(&s->text, json ? "]" : "\n", 1);
			}
		}
		if (rc == 0)
			rc = flush_text(s, err);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* n elements of the table at data, continuing where the last call stopped: whole rows of the
 * writer (any n for bin, npy and rank-1 CSV, whose rows are elements; rank-1 JSON: any n). */
static int put(struct sink *s, const char *data, size_t n, struct pe_err *err)
{
	size_t width = s->w.width;
	if (s->raw) {
		s->done += n;
		s->w.next = width ? s->done / width : 0;
		return cli_out_write(s->o, data, n * pe_dtype_size(s->w.dtype), err);
	}
	if (n % width != 0 || s->done % width != 0)
		return put_slices(s, data, n, err);
	size_t row_bytes = width * pe_dtype_size(s->w.dtype), nrows = n / width;
	size_t step = width < TEXT_ELEMS ? TEXT_ELEMS / width : 1;
	for (size_t i = 0; i < nrows; i += step) {
		size_t k = nrows - i < step ? nrows - i : step;
		int rc = pe_row_writer_rows(&s->w, data + i * row_bytes, k, &s->text, err);
		if (rc == 0)
			rc = flush_text(s, err);
		if (rc != 0)
			return rc;
	}
	s->done += n;
	return 0;
}

/* Rows per block: BLOCK_BYTES worth, a multiple of 64 (rope's anchors) when that many fit, and at
 * least 64 while 64 rows take at most MIN_BLOCK_BYTES (blocks that start off an anchor replay up
 * to 63 rows). */
static size_t block_rows(size_t row_bytes, size_t rows)
{
	size_t n = BLOCK_BYTES / row_bytes;
	if (n >= 64)
		n -= n % 64;
	else if (row_bytes <= MIN_BLOCK_BYTES / 64)
		n = 64;
	n = n ? n : 1;
	return n < rows ? n : rows;
}

static int spill_planes(const struct cli_request *r, struct sink *s, size_t planes, size_t rows, size_t row_bytes,
			struct pe_err *err);

static int stream_rows(const struct cli_request *r, struct sink *s, struct pe_err *err)
{
	const struct pe_shape *sh = &r->shape;
	size_t planes = sh->rank == 3 ? sh->dim[0] : 1, rows = sh->rank >= 2 ? sh->dim[sh->rank - 2] : sh->dim[0];
	size_t row_elems = sh->rank >= 2 ? sh->dim[sh->rank - 1] : 1; /* rank 1: rows are elements */
	size_t row_bytes = row_elems * pe_dtype_size(r->dt), nb = block_rows(row_bytes, rows);
	if (planes > 1 && rows * row_bytes <= SPILL_BYTES / (planes - 1))
		return spill_planes(r, s, planes, rows, row_bytes, err);
	char *buf = aligned_alloc(64, (nb * row_bytes + 63) / 64 * 64);
	if (!buf)
		return pe_err_set(err, PE_ENOMEM, "", "out of memory for a block of %zu bytes", nb * row_bytes);
	int rc = 0;
	for (size_t p = 0; p < planes && rc == 0; p++)
		for (size_t r0 = 0; r0 < rows && rc == 0; r0 += nb) {
			size_t n = rows - r0 < nb ? rows - r0 : nb;
			rc = pe_table_compute_rows(&r->params, r->dt, p, r0, n, buf, err);
			if (rc == 0)
				rc = put(s, buf, n * row_elems, err);
		}
	free(buf);
	return rc;
}

/* Rank-3 tables whose later planes fit in SPILL_BYTES (rope up to 64 MiB): every plane of a block
 * at once, the first plane into the block buffer and written as computed, the others straight into
 * an anonymous mapping (huge pages where the kernel has them: a few faults instead of one per
 * 4 KiB) that is written once the first plane is out. Each row is computed once instead of once per
 * plane. */
static int spill_planes(const struct cli_request *r, struct sink *s, size_t planes, size_t rows, size_t row_bytes,
			struct pe_err *err)
{
	size_t plane_bytes = rows * row_bytes, nb = block_rows(row_bytes, rows), huge = (size_t)2 << 20;
	size_t map_len = (planes - 1) * plane_bytes + huge;
	char *buf = aligned_alloc(64, (nb * row_bytes + 63) / 64 * 64);
	void **outs = calloc(planes, sizeof *outs);
	char *map = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int rc = 0;
	if (!buf || !outs || map == MAP_FAILED) {
		rc = pe_err_set(err, PE_ENOMEM, "", "out of memory for %zu bytes of planes", map_len);
		goto out;
	}
	char *spill = (char *)(((uintptr_t)map + huge - 1) & ~(uintptr_t)(huge - 1));
	madvise(spill, map_len - (size_t)(spill - map), MADV_HUGEPAGE); /* a hint: fine if refused */
	outs[0] = buf;
	for (size_t r0 = 0; r0 < rows && rc == 0; r0 += nb) {
		size_t n = rows - r0 < nb ? rows - r0 : nb;
		for (size_t p = 1; p < planes; p++)
			outs[p] = spill + (p - 1) * plane_bytes + r0 * row_bytes;
		rc = pe_table_compute_planes(&r->params, r->dt, r0, n, outs, err);
		if (rc == 0)
			rc = put(s, buf, n * r->shape.dim[2], err);
	}
	for (size_t p = 1; p < planes && rc == 0; p++)
		rc = put(s, spill + (p - 1) * plane_bytes, rows * r->shape.dim[2], err);
out:
	free(buf);
	free(outs);
	if (map != MAP_FAILED)
		munmap(map, map_len);
	return rc;
}

/* rope/mrope/positions, [3, seq] with seq up to PE_MROPE_MAX_TOKENS: its rows (t, h, w) are too
 * wide to hold, so each row goes out POS_TOKENS tokens at a time, the window's three rows computed
 * (pe_mrope_sequence_positions: any window without the tokens before it) and its row kept. */
static int stream_positions(const struct cli_request *r, struct sink *s, struct pe_err *err)
{
	size_t seq = r->shape.dim[1];
	int32_t *buf = malloc(3 * POS_TOKENS * sizeof *buf);
	if (!buf)
		return pe_err_set(err, PE_ENOMEM, "", "out of memory");
	int rc = 0;
	for (size_t k = 0; k < 3 && rc == 0; k++)
		for (size_t first = 0; first < seq && rc == 0; first += POS_TOKENS) {
			size_t n = seq - first < POS_TOKENS ? seq - first : POS_TOKENS;
			rc = pe_mrope_sequence_positions(&r->params, first, n, buf, err);
			if (rc == 0)
				rc = s->raw ? put(s, (const char *)(buf + k * n), n, err)
					    : put_slices(s, (const char *)(buf + k * n), n, err);
		}
	free(buf);
	return rc;
}

static int whole_table(const struct cli_request *r, struct sink *s, struct pe_err *err)
{
	size_t raw = r->count * pe_dtype_size(r->dt); /* cannot overflow: checked by the request */
	char *table = malloc(raw ? raw : 1);
	if (!table)
		return pe_err_set(err, PE_ENOMEM, "", "out of memory for a table of %zu bytes", raw);
	int rc = pe_table_compute(&r->params, r->dt, table, err);
	if (rc == 0)
		rc = put(s, table, r->count, err);
	free(table);
	return rc;
}

int cli_render(const struct cli_request *r, struct cli_out *o, struct pe_err *err)
{
	struct sink s = {.o = o, .raw = r->fmt == PE_FMT_BIN || r->fmt == PE_FMT_NPY};
	pe_buf_init(&s.text, SIZE_MAX);
	int rc = pe_row_writer_begin(&s.w, r->fmt, &r->params, &r->shape, r->dt, &s.text, err);
	if (rc == 0)
		rc = flush_text(&s, err);
	if (rc == 0 && r->params.def == &pe_table_rope_mrope_positions)
		rc = stream_positions(r, &s, err);
	else if (rc == 0)
		rc = pe_table_rows_supported(&r->params) ? stream_rows(r, &s, err) : whole_table(r, &s, err);
	if (rc == 0)
		rc = pe_row_writer_end(&s.w, &s.text, err);
	if (rc == 0 && r->fmt == PE_FMT_JSON)
		rc = pe_buf_append(&s.text, "\n", 1);
	if (rc == 0)
		rc = flush_text(&s, err);
	if (rc == PE_ENOMEM && !err->detail[0])
		pe_err_set(err, rc, "", "out of memory while writing %s", pe_format_name(r->fmt));
	pe_buf_destroy(&s.text);
	return rc;
}
