/* posenc tensor formats: tensors in and out (npy, raw bin, JSON, CSV), growable bounded buffers and
 * shortest round-trip number printing.
 *
 * Writers append to a struct pe_buf, a growable byte buffer with a hard maximum (like curl's
 * dynbuf): growing past it fails with PE_ETOOBIG instead of taking memory. Readers never trust a
 * header: declared shapes are checked against the bytes, counts are computed without overflow.
 * A struct pe_tensor_view borrows its data; nothing here takes ownership of a caller's memory.
 * All functions are re-entrant. */
#ifndef POSENC_TENSOR_H
#define POSENC_TENSOR_H

#include <stddef.h>
#include <stdint.h>
#include "posenc/core.h"
#include "posenc/dtype.h"
#include "posenc/err.h"

/* ---- byte budget ----
 * A count of bytes in use against a limit, shared by threads (atomics; nothing blocks). take()
 * admits a reservation only while the total stays within the limit, else it fails with PE_EBUSY
 * and counts a refusal; charge() adds bytes that already exist (memory handed over from elsewhere),
 * even past the limit; give() returns either. The daemon uses one for every response being built
 * or sent (the cache's own bytes are bounded separately, by cache_bytes). A NULL budget admits
 * everything and counts nothing, so every function below accepts NULL. */
struct pe_budget;
struct pe_budget_stats {
	size_t used, limit;
	uint64_t refused;
};
struct pe_budget *pe_budget_new(size_t limit);
void pe_budget_free(struct pe_budget *b);
/* 0; PE_EBUSY when it does not fit now; PE_ETOOBIG when n exceeds the whole limit (never fits). */
int pe_budget_take(struct pe_budget *b, size_t n);
/* take(), or when it does not fit now, wait for room until `until` (CLOCK_MONOTONIC seconds, as
 * pe_monotonic gives): one caller at a time waits, and while it does the bytes it wants are kept
 * back from every other take of PE_BUDGET_SMALL_TAKE bytes or more (smaller ones pass: they are
 * given back soon, and a small table's answer is not refused for a large job's sake); a second
 * caller that would wait gets PE_EBUSY at once. For a job
 * that already holds memory (its body) and needs more: two such jobs would otherwise refuse each
 * other. give() wakes the waiter. A waiter also stops when pe_cancelled() says so (its thread's
 * deadline, shutdown), with that code (PE_ETIMEOUT, PE_EDRAINING). */
int pe_budget_take_wait(struct pe_budget *b, size_t n, double until);
#define PE_BUDGET_SMALL_TAKE ((size_t)64 * 1024)
/* A share: n bytes taken from parent at once (pe_budget_take_wait until `until`), as a budget of
 * its own limited to n, for one job's blocks. A take past the share spills to the parent (a plain
 * take there), so a share never refuses what the parent alone would have admitted. NULL with *rc
 * PE_EBUSY / PE_ETOOBIG / PE_ENOMEM; NULL with *rc 0 when parent is NULL (no budget). */
struct pe_budget *pe_budget_share_open(struct pe_budget *parent, size_t n, double until, int *rc);
/* n bytes of a block reserved on the share now held on the parent (an answer outliving the job). */
void pe_budget_share_hand_over(struct pe_budget *s, size_t n);
/* Gives the share's bytes back to the parent and frees it; its blocks must all be given back or
 * handed over first. NULL is fine. */
void pe_budget_share_close(struct pe_budget *s);
void pe_budget_charge(struct pe_budget *b, size_t n);
void pe_budget_give(struct pe_budget *b, size_t n);
void pe_budget_stats(const struct pe_budget *b, struct pe_budget_stats *out);
/* Bytes the allocator actually holds for a block from malloc (its usable size; 0 for NULL). */
size_t pe_mem_size(const void *p);
/* The most pe_mem_size can be for a block malloc'd, or realloc'd last, to n bytes, whichever block
 * the allocator picked: what a figure told to clients counts, so it is the same for every request
 * of that size. */
size_t pe_mem_bound(size_t n);
/* Called after each block a thread keeps (a cached body): every few calls, moves the calling
 * thread's arena's grown part a block's worth past its top, so the next small blocks kept do not
 * each grow it by a system call (budget.c says why). Any thread; costs no memory. */
void pe_mem_keep_headroom(void);
/* malloc(n) with a reservation of exactly pe_mem_size(block) on b; NULL with *rc PE_EBUSY (the
 * budget is full), PE_ETOOBIG (n is over its limit) or PE_ENOMEM. Free it with
 * pe_budget_free_block(b, block). */
void *pe_budget_malloc(struct pe_budget *b, size_t n, int *rc);
void pe_budget_free_block(struct pe_budget *b, void *p); /* gives back pe_mem_size(p); NULL is fine */
/* The widest a text writer (JSON data, CSV) prints one element of dt, its separator included: the
 * per-element worst case a budget estimate multiplies by the element count. */
size_t pe_budget_text_width(enum pe_dtype dt);

/* ---- bounded buffer ----
 * With a budget (pe_buf_set_budget, before anything is written), the buffer holds a reservation
 * of exactly the allocation it holds: growth reserves first and fails (PE_EBUSY, PE_ETOOBIG)
 * before any memory is taken when the budget has no room. */
struct pe_buf {
	char *data;
	size_t len, cap, max;
	struct pe_budget *budget; /* NULL: none */
	size_t held;              /* reserved on budget for data: pe_mem_size(data) */
	int borrowed;             /* data is the caller's memory (pe_buf_use): never freed or grown */
};

void pe_buf_init(struct pe_buf *b, size_t max);
void pe_buf_set_budget(struct pe_buf *b, struct pe_budget *budget);
void pe_buf_destroy(struct pe_buf *b);
/* 0, PE_ETOOBIG (over max, or over the budget's whole limit), PE_EBUSY (the budget is full now) or
 * PE_ENOMEM. */
int pe_buf_reserve(struct pe_buf *b, size_t more);
int pe_buf_append(struct pe_buf *b, const void *p, size_t n);
/* The bytes b's block will take once pe_buf_reserve(b, more) has grown it, without a budget (an
 * allocator may round up by less than a page); 0 when more is past max. For a caller that counts
 * a buffer's memory itself (the HTTP layer's request bodies). */
size_t pe_buf_block_after(const struct pe_buf *b, size_t more);
/* pe_buf_reserve and pe_buf_block_after growing to a block of at most `most` bytes (as
 * pe_buf_block_after counts it) when the bytes wanted fit in one: for a caller that holds the
 * block against a limit itself, whom doubling past the limit would refuse a body within it. */
int pe_buf_reserve_within(struct pe_buf *b, size_t more, size_t most);
size_t pe_buf_block_within(const struct pe_buf *b, size_t more, size_t most);
int pe_buf_puts(struct pe_buf *b, const char *s);
int pe_buf_printf(struct pe_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hand the bytes to the caller; the buffer is left empty. The block is first shrunk to len + 1
 * (its NUL), so what a caller keeps is what it holds, not the capacity it grew to. It is free()d,
 * or with a budget pe_budget_free_block()ed: the reservation (pe_mem_size of the block) goes with
 * it to the caller. */
char *pe_buf_steal(struct pe_buf *b, size_t *len);
/* pe_buf_steal with the reason when no block can be handed out: 0 and *out set, or PE_EBUSY or
 * PE_ETOOBIG (the budget refused the copy of a borrowed buffer) or PE_ENOMEM, and *out NULL. */
int pe_buf_take(struct pe_buf *b, char **out, size_t *len);
/* Let an empty b write into the caller's n bytes at mem first (n - 1 of them: the spare byte),
 * neither allocated nor reserved on the budget; growth past them moves the bytes to the heap as
 * the first block would be (64-byte aligned), and pe_buf_steal of bytes still there copies them
 * into a block of exactly len + 1, reserved on the budget then. For a writer whose output is
 * usually small (one malloc of the exact size instead of an estimate's block shrunk after); mem
 * (64-byte aligned if SIMD writers fill it) must outlive the buffer's use. */
void pe_buf_use(struct pe_buf *b, void *mem, size_t n);
/* Fault in the whole pages of [p, p + n) for writing, in one system call (Linux 5.14's
 * MADV_POPULATE_WRITE) instead of a page fault per 4 KiB page; a no-op where unsupported. For
 * large buffers about to be written in full. */
void pe_mem_prefault(void *p, size_t n);

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

/* Index of the first NaN or infinity of t's first count elements, or count if there is none. */
size_t pe_first_nonfinite(const struct pe_tensor_view *t, size_t count);

/* ---- npy (NumPy format) ---- */
/* Version 1.0 header + data. bf16 has no NumPy dtype: PE_EINVAL naming "dtype". */
int pe_npy_write(struct pe_buf *b, const struct pe_tensor_view *t, struct pe_err *err);
/* Header length (with padding: the offset where data starts, a multiple of 64) that pe_npy_write
 * will produce for this shape and dtype; 0 for bf16. */
size_t pe_npy_header_len(const struct pe_tensor_view *t);
/* Only the header (pe_npy_header_len(t) bytes, t->data unused) into out; returns its length, 0
 * when npy cannot hold t. Lets producers compute the data straight after it. */
size_t pe_npy_write_header(char *out, const struct pe_tensor_view *t);
/* Parse a whole .npy file held in memory (versions 1.0, 2.0, 3.0). On success the view borrows
 * data, which may be unaligned when a hand-made header has an odd length. max_elements bounds the
 * declared count (PE_ETOOBIG past it); other errors are PE_EBODY with a detail. */
int pe_npy_parse(const void *data, size_t len, size_t max_elements, struct pe_tensor_view *out,
		 struct pe_err *err);
/* The same, for index arrays (positions) that NumPy saves as int64 by default: '<i8' is accepted
 * besides the float dtypes and '<i4'. For '<i8' data *wide is set and out->dtype is PE_I32 (posenc
 * has no 64-bit dtype): its elements are then 8 bytes each. */
int pe_npy_parse_index(const void *data, size_t len, size_t max_elements, struct pe_tensor_view *out, int *wide,
		       struct pe_err *err);

/* ---- bin: raw little-endian elements ---- */
int pe_bin_write(struct pe_buf *b, const struct pe_tensor_view *t);

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

/* ---- gzip ---- */
/* Append the gzip (RFC 1952) compression of data to out at level 1..12 (libdeflate's scale).
 * 0, PE_ETOOBIG (out's maximum), PE_ENOMEM. Thread-safe: each thread keeps its compressors for the
 * last PE_GZIP_LEVELS_KEPT levels it used (freed when it exits), so a call allocates nothing
 * beyond out's growth once its level is kept. */
#define PE_GZIP_LEVELS_KEPT 2
int pe_gzip(struct pe_buf *out, const void *data, size_t len, int level);

/* ---- CSV ---- */
int pe_csv_write(struct pe_buf *b, const struct pe_tensor_view *t, struct pe_err *err);

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
