/* posenc tensor formats: tensors in and out (npy, raw bin, JSON, CSV, PNG, gzip), the row writer
 * that streams them, and shortest round-trip number printing.
 *
 * Writers append to a struct pe_buf (posenc/budget.h), a growable byte buffer with a hard maximum
 * (like curl's dynbuf): growing past it fails with PE_ETOOBIG instead of taking memory. Each
 * writer answers for the most it can write (pe_<format>_bound, as libdeflate's compress_bound):
 * its output and its own up-front reservations in the buffer, for a shape and dtype, so that a
 * caller can refuse a table too big for its memory before any of it is computed. Readers never
 * trust a header: declared shapes are checked against the bytes, counts are computed without
 * overflow. A struct pe_tensor_view borrows its data; nothing here takes ownership of a caller's
 * memory. All functions are re-entrant and thread-safe (gzip's kept compressors are per thread). */
#ifndef POSENC_TENSOR_H
#define POSENC_TENSOR_H

#include <stddef.h>
#include <stdint.h>
#include "posenc/budget.h"
#include "posenc/core.h"
#include "posenc/dtype.h"
#include "posenc/err.h"

/* ---- views ---- */
struct pe_tensor_view {
	struct pe_shape shape;
	enum pe_dtype dtype;
	const void *data; /* count(shape) * dtype size bytes, little-endian, C order */
};

/* ---- formats ---- */
enum pe_format { PE_FMT_JSON, PE_FMT_NPY, PE_FMT_BIN, PE_FMT_CSV, PE_FMT_PNG, PE_FMT_COUNT_ };
int pe_format_parse(const char *s, enum pe_format *out);
const char *pe_format_name(enum pe_format f);
const char *pe_format_mime(enum pe_format f);

/* ---- shortest numbers ----
 * Write the shortest decimal that reads back (round to nearest even) to exactly the same value of
 * the given type. No terminating NUL; returns the length. buf needs PE_NUM_MAX bytes. Non-finite
 * values are written as NaN / Infinity / -Infinity (callers that need valid JSON check first). */
#define PE_NUM_MAX 32
size_t pe_fmt_f64(double x, char *buf);
size_t pe_fmt_f32(float x, char *buf);
size_t pe_fmt_f16(uint16_t h, char *buf);
size_t pe_fmt_bf16(uint16_t h, char *buf);
/* Element i of a view, shortest for its dtype (i32 printed as an integer). */
size_t pe_fmt_elem(const struct pe_tensor_view *t, size_t i, char *buf);
/* The widest shortest form of one element of dt with the separator after it ("-1.17549435e-38,"
 * for f32): the most a text writer (JSON data, CSV) prints per element. */
size_t pe_fmt_width(enum pe_dtype dt);

/* Index of the first NaN or infinity of t's first count elements, or count if there is none. */
size_t pe_first_nonfinite(const struct pe_tensor_view *t, size_t count);

/* ---- npy (NumPy format) ---- */
/* Version 1.0 header + data. bf16 has no NumPy dtype: PE_EINVAL naming "dtype". */
int pe_npy_write(struct pe_buf *b, const struct pe_tensor_view *t, struct pe_err *err);
/* Header length (with padding: the offset where data starts, a multiple of 64) that pe_npy_write
 * will produce for this shape and dtype; 0 for bf16. */
size_t pe_npy_header_len(const struct pe_tensor_view *t);
/* The most pe_npy_write (or pe_row_writer's npy) writes for shape s and dtype dt: the header and
 * the data, exactly. SIZE_MAX when npy cannot hold them (bf16, a bad rank) or they overflow. */
size_t pe_npy_bound(const struct pe_shape *s, enum pe_dtype dt);
/* Only the header (pe_npy_header_len(t) bytes, t->data unused) into out; returns its length, 0
 * when npy cannot hold t. Lets producers compute the data straight after it. */
size_t pe_npy_write_header(char *out, const struct pe_tensor_view *t);
/* Parse a whole .npy file held in memory (versions 1.0, 2.0, 3.0). On success the view borrows
 * data, which may be unaligned when a hand-made header has an odd length. max_elements bounds the
 * declared count (PE_ETOOBIG past it); other errors are PE_EBODY with a detail. */
int pe_npy_parse(const void *data, size_t len, size_t max_elements, struct pe_tensor_view *out,
		 struct pe_err *err);
/* The most bytes pe_npy_parse and pe_npy_parse_index accept before the data (preamble and header,
 * any version): a body limit for an npy upload is its data's limit plus this. A longer declared
 * header is PE_EBODY. */
size_t pe_npy_header_max(void);
/* The same, for index arrays (positions) that NumPy saves as int64 by default: '<i8' is accepted
 * besides the float dtypes and '<i4'. For '<i8' data *wide is set and out->dtype is PE_I32 (posenc
 * has no 64-bit dtype): its elements are then 8 bytes each. */
int pe_npy_parse_index(const void *data, size_t len, size_t max_elements, struct pe_tensor_view *out, int *wide,
		       struct pe_err *err);

/* ---- bin: raw little-endian elements ---- */
int pe_bin_write(struct pe_buf *b, const struct pe_tensor_view *t);
/* What pe_bin_write writes for shape s and dtype dt, exactly; SIZE_MAX on overflow. */
size_t pe_bin_bound(const struct pe_shape *s, enum pe_dtype dt);

/* ---- JSON ---- */
/* The table document of the contract:
 * {"encoding":..,"params":{..canonical..},"shape":[..],"dtype":"f32",<extra>,"data":[nested]}
 * Numbers shortest for the dtype; non-finite values are an error (PE_EINTERNAL). p may be NULL
 * (then "encoding" and "params" are omitted). */
int pe_json_write_table(struct pe_buf *b, const struct pe_params *p, const struct pe_tensor_view *t,
			struct pe_err *err);
/* Threads an encoder may borrow: this layer starts none. run(ctx, n, fn, arg) calls fn(arg, k)
 * once for each k in [0, n), on the calling thread and on whichever of the owner's threads are free
 * to help, and returns when every call has returned; it must finish when none is free (the caller
 * then runs every chunk). width: threads that can work at once, the caller included. run NULL:
 * the caller runs the chunks one after the other (the same bytes; tests, and callers without
 * threads). The daemon's worker pool is one (pe_pool_parallel_hook). */
struct pe_parallel {
	void (*run)(void *ctx, size_t n, void (*fn)(void *arg, size_t k), void *arg);
	void *ctx;
	unsigned width;
};
/* The same bytes as pe_json_write_table; a big table's rows are split into par->width chunks (at
 * most 8) encoded through par. par NULL or width 1, or a small table: this thread alone. */
int pe_json_write_table_mt(struct pe_buf *b, const struct pe_params *p, const struct pe_tensor_view *t,
			   const struct pe_parallel *par, struct pe_err *err);
/* The most pe_json_write_table and pe_json_write_table_mt reserve in b or write for a table of
 * shape s and dtype dt, every number at its widest, when the encoding, its parameters and the
 * table's extra value take at most `params` bytes of the head (0 when p is NULL); the shape, the
 * dtype and the brackets are counted here. Saturates at SIZE_MAX. */
size_t pe_json_bound(const struct pe_shape *s, enum pe_dtype dt, size_t params);
/* Only the nested "data" array. */
int pe_json_write_data(struct pe_buf *b, const struct pe_tensor_view *t, struct pe_err *err);
/* A JSON tensor body: a bare nested array of numbers, or {"shape":[...],"data":[...]} (data
 * nested or flat). Rectangular and finite; the count is checked against max_elements before the
 * float64 buffer out->data (caller frees) is allocated. Errors: PE_EBODY / PE_ETOOBIG naming
 * "body" or "shape". */
int pe_json_tensor_parse(const void *data, size_t len, size_t max_elements, struct pe_tensor_mut *out,
			 struct pe_err *err);
/* The canonical parameters as a JSON object (ints as integers, reals shortest, enums as strings). */
int pe_json_write_params(struct pe_buf *b, const struct pe_params *p);

/* ---- PNG heatmaps (src/tensor/png.c; the picture's rules are in src/tensor/png.h) ---- */

enum pe_cmap { PE_CMAP_VIRIDIS, PE_CMAP_RDBU, PE_CMAP_COUNT_ };
/* "viridis" or "RdBu", ASCII case-insensitive: 0, or PE_EINVAL for any other name. */
int pe_cmap_parse(const char *name, enum pe_cmap *out);
const char *pe_cmap_name(enum pe_cmap c); /* "viridis", "RdBu" */

#define PE_PNG_MAX_SIDE 4096
#define PE_PNG_MAX_SCALE 4096 /* largest scale accepted (it is then lowered to fit the image) */

struct pe_png_options {
	enum pe_cmap cmap;
	int scale;                 /* pixels per cell, 1..PE_PNG_MAX_SCALE; 0 = automatic */
	/* Rank 3: panel labels, NULL-terminated (borrowed); panels past its end, or all when NULL,
	 * are labelled with their index. At most 16 characters are drawn. */
	const char *const *labels;
};
void pe_png_options_init(struct pe_png_options *o); /* viridis, automatic scale, no labels */

/* Where everything is, in pixels from the top-left corner. Panel p's cell (r, c) covers
 * x in [x0 + c*cell_w, +cell_w), y in [y0 + p*panel_pitch + r*cell_h, +cell_h). */
struct pe_png_layout {
	size_t width, height;          /* the image */
	size_t panels, rows, cols;     /* cells drawn (after downsampling) */
	size_t row_step, col_step;     /* table rows / columns averaged into one cell (1 = none) */
	size_t cell_w, cell_h;         /* pixels per cell (cell_w is the scale in effect) */
	size_t x0, y0, panel_pitch;
	size_t label_h;                /* height of the label strip above each panel (0 below rank 3) */
	size_t bar_x, bar_y, bar_w, bar_h; /* the colour bar: top row is the last colour */
	double lo, hi;                 /* values at the bar's bottom and top (NaN if nothing finite) */
};

/* Plan the picture without drawing it (reads the data once for its range). Errors as below.
 * t->data NULL: only the shape is checked and laid out (no range: lo = hi = NaN), which decides
 * every error but memory before the table exists. */
int pe_png_plan(const struct pe_tensor_view *t, const struct pe_png_options *o,
		struct pe_png_layout *out, struct pe_err *err);
/* Append the PNG of t to b. o may be NULL (defaults). Errors: PE_EINVAL naming "format" (rank > 3,
 * empty table, too many panels for the maximum image), "scale" or "cmap" (bad option values);
 * PE_ETOOBIG / PE_ENOMEM when b's limit or memory runs out. On error b is back at its length on
 * entry. */
int pe_png_write(struct pe_buf *b, const struct pe_tensor_view *t, const struct pe_png_options *o,
		 struct pe_err *err);
/* The most pe_png_write writes for a picture laid out as lay (pe_png_plan's, for the same table
 * and options): every row's pixels stored uncompressed, with zlib's and PNG's framing. Saturates
 * at SIZE_MAX. */
size_t pe_png_bound(const struct pe_png_layout *lay);

/* ---- gzip ---- */
/* Append the gzip (RFC 1952) compression of data to out at level 1..12 (libdeflate's scale).
 * 0, PE_ETOOBIG (out's maximum), PE_ENOMEM. Thread-safe: each thread keeps its compressors for the
 * last PE_GZIP_LEVELS_KEPT levels it used (freed when it exits), so a call allocates nothing
 * beyond out's growth once its level is kept. */
#define PE_GZIP_LEVELS_KEPT 2
int pe_gzip(struct pe_buf *out, const void *data, size_t len, int level);
/* The most pe_gzip reserves in out or writes for len bytes of input at any level, incompressible
 * data included (libdeflate's bound). Saturates at SIZE_MAX. */
size_t pe_gzip_bound(size_t len);

/* ---- CSV ---- */
int pe_csv_write(struct pe_buf *b, const struct pe_tensor_view *t, struct pe_err *err);
/* The most pe_csv_write reserves in b or writes for shape s and dtype dt, every number at its
 * widest, the shape comment of rank 3 and above included. Saturates at SIZE_MAX. */
size_t pe_csv_bound(const struct pe_shape *s, enum pe_dtype dt);

/* ---- streamed documents (src/tensor/rows.c) ----
 * A table in any of json, npy, bin or csv, written a block of rows at a time into a buffer the
 * caller empties between blocks, so that a table of any size needs only a block's memory. The
 * bytes are exactly those of pe_json_write_table, pe_npy_write, pe_bin_write and pe_csv_write for
 * the whole table. A row is `width` elements of the last axis (rank 0 and CSV's rank 1: one
 * element); rows come in C order, `rows` in all. begin writes the header, end the trailer. */
struct pe_row_writer {
	enum pe_format fmt;
	struct pe_shape shape;
	enum pe_dtype dtype;
	size_t width, rows, next; /* elements per row, rows in the table, rows written */
};
/* PE_EINVAL naming "format" (png) or "dtype" (bf16 npy); p may be NULL (JSON then has no
 * "encoding" and "params"). */
int pe_row_writer_begin(struct pe_row_writer *w, enum pe_format fmt, const struct pe_params *p,
			const struct pe_shape *s, enum pe_dtype dt, struct pe_buf *b, struct pe_err *err);
/* Append nrows rows (nrows * width elements at data). Past the table's rows: PE_EINTERNAL; a
 * NaN or infinity in json or csv: PE_EINTERNAL naming the element's index in the table. */
int pe_row_writer_rows(struct pe_row_writer *w, const void *data, size_t nrows, struct pe_buf *b,
		       struct pe_err *err);
/* The trailer, once every row is written (else PE_EINTERNAL). */
int pe_row_writer_end(struct pe_row_writer *w, struct pe_buf *b, struct pe_err *err);

#endif
