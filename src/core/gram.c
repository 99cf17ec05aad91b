/* The Gram matrix G = X·Xᵀ of rows X (n rows of d doubles), a block of its rows at a time: what
 * /v1/analysis/similarity serves (analysis.c), the learned tables' similarity (pe_gram) and the
 * CLI streams (pe_table_compute_rows).
 *
 * Every product comes from the block kernel of the active ISA (gram.h), whose result for a pair
 * of rows does not depend on the tiling, so one routine, gram_rows, serves every caller: rows
 * [r0, r0 + m) of G are made of sub-blocks of output rows (the rows of X they need, xs); each
 * sub-block takes its own square once per pair and mirrored, the columns right of it that are
 * still among the output rows once and mirrored into those rows, and the columns outside the
 * output rows plainly. The whole matrix (r0 = 0, m = n, X in memory) is then the classic
 * each-pair-once loop over tiles on and above the diagonal.
 *
 * X comes whole from the caller (struct pe_gram_src.rows) or is made a block of rows at a time
 * (make): then at most GRAM_XS_BYTES of output rows' X and GRAM_YS_BYTES of column rows' X are
 * held (at least one row each), whatever n, and the column rows are made again for each
 * sub-block. Memory is then bounded; the work (each pair of the output rows once, every other
 * product of them once) stays within twice pe_gram_cost, plus making X once per sub-block. */
#include "core/gram.h"
#include "core/tables.h"

#include <stdint.h>
#include <stdlib.h>

#define GRAM_XS_BYTES ((size_t)8 << 20) /* X of a sub-block of output rows, when X is made */
#define GRAM_YS_BYTES ((size_t)2 << 20) /* X of a block of columns, when X is made */

typedef void (*block_fn)(const double *, const double *, size_t, size_t, size_t, double *);

struct gram_job {
	block_fn block;
	size_t n, d, r0;   /* output rows r0 .. of n columns */
	enum pe_dtype dt;
	size_t esz;
	char *out;
	int cancel;
	struct pe_err *err;
	double tile[PE_GRAM_BLOCK * PE_GRAM_BLOCK];
	double col[PE_GRAM_BLOCK];
};

/* A tile of ni rows (G rows i0..) by nj columns (j0..) into the output rows, and, when mirror,
 * transposed into output rows j0.. at columns i0.. */
static void store_tile(struct gram_job *g, size_t i0, size_t ni, size_t j0, size_t nj, int mirror)
{
	for (size_t a = 0; a < ni; a++)
		pe_store_f64(g->dt, g->out + ((i0 - g->r0 + a) * g->n + j0) * g->esz, g->tile + a * nj, nj);
	if (!mirror)
		return;
	for (size_t b = 0; b < nj; b++) {
		for (size_t a = 0; a < ni; a++)
			g->col[a] = g->tile[a * nj + b];
		pe_store_f64(g->dt, g->out + ((j0 - g->r0 + b) * g->n + i0) * g->esz, g->col, ni);
	}
}

/* The products of rows i0 .. i0+ni (at xs) with rows j0 .. j0+nj (at ys), tile by tile. same:
 * they are the same rows, each pair taken once (tiles on and above the diagonal, mirrored);
 * mirror: the columns are output rows too, so each tile is also stored transposed. */
static int part(struct gram_job *g, const double *xs, size_t i0, size_t ni, const double *ys, size_t j0, size_t nj,
		int same, int mirror)
{
	for (size_t a = 0; a < ni; a += PE_GRAM_BLOCK) {
		size_t ta = ni - a < PE_GRAM_BLOCK ? ni - a : PE_GRAM_BLOCK;
		for (size_t b = same ? a : 0; b < nj; b += PE_GRAM_BLOCK) {
			size_t tb = nj - b < PE_GRAM_BLOCK ? nj - b : PE_GRAM_BLOCK;
			int rc = g->cancel ? pe_cancelled() : 0;
			if (rc)
				return pe_cancel_err(rc, g->err);
			g->block(xs + a * g->d, ys + b * g->d, g->d, ta, tb, g->tile);
			store_tile(g, i0 + a, ta, j0 + b, tb, mirror && !(same && a == b));
		}
	}
	return 0;
}

/* Rows r0 .. r0+m of X: in place when the source holds X, else made into buf. */
static const double *x_rows(const struct pe_gram_src *s, size_t r0, size_t m, double *buf, int *rc,
			    struct pe_err *err)
{
	if (s->rows)
		return s->rows + r0 * s->d;
	*rc = s->make(s->ctx, r0, m, buf, err);
	return *rc ? NULL : buf;
}

/* Columns [c0, c1) against the sub-block's rows, GRAM_YS_BYTES of X at a time. */
static int columns(struct gram_job *g, const struct pe_gram_src *s, const double *xs, size_t i0, size_t ni,
		   size_t c0, size_t c1, int mirror, double *ybuf, size_t yrows)
{
	int rc = 0;
	for (size_t j0 = c0; j0 < c1 && rc == 0; j0 += yrows) {
		size_t nj = c1 - j0 < yrows ? c1 - j0 : yrows;
		const double *ys = x_rows(s, j0, nj, ybuf, &rc, g->err);
		if (ys)
			rc = part(g, xs, i0, ni, ys, j0, nj, 0, mirror);
	}
	return rc;
}

/* Rows of d doubles in bytes (at least one; a multiple of `align` when that many fit). */
static size_t rows_in(size_t bytes, size_t d, size_t align)
{
	size_t r = d ? bytes / (d * sizeof(double)) : SIZE_MAX;
	if (r >= align)
		r -= r % align;
	return r ? r : 1;
}

int pe_gram_rows(const struct pe_gram_src *s, size_t r0, size_t m, enum pe_dtype dt, void *out, int cancel,
		 struct pe_err *err)
{
	if (r0 > s->n || m > s->n - r0)
		return pe_err_set(err, PE_EINTERNAL, "", "rows %zu+%zu are outside the matrix", r0, m);
	struct gram_job job, *g = &job; /* on the stack: over rows in memory nothing is allocated */
	size_t xrows = s->rows ? m : rows_in(GRAM_XS_BYTES, s->d, PE_GRAM_BLOCK);
	size_t yrows = s->rows ? s->n : rows_in(GRAM_YS_BYTES, s->d, PE_TABLE_ROW_ALIGN);
	xrows = xrows < m ? xrows : m;
	yrows = yrows < s->n ? yrows : s->n;
	double *xbuf = s->rows ? NULL : malloc((xrows * s->d + 1) * sizeof(double));
	double *ybuf = s->rows ? NULL : malloc((yrows * s->d + 1) * sizeof(double));
	int rc = 0;
	if (!s->rows && (!xbuf || !ybuf)) {
		rc = pe_err_set(err, PE_ENOMEM, "", "out of memory");
		goto out;
	}
	*g = (struct gram_job){.block = pe_isa_active() >= PE_ISA_AVX2 ? pe_gram_block_avx2 : pe_gram_block_scalar,
			       .n = s->n, .d = s->d, .r0 = r0, .dt = dt, .esz = pe_dtype_size(dt), .out = out,
			       .cancel = cancel, .err = err};
	for (size_t i0 = r0; i0 < r0 + m && rc == 0; i0 += xrows) {
		size_t ni = r0 + m - i0 < xrows ? r0 + m - i0 : xrows, i1 = i0 + ni;
		const double *xs = x_rows(s, i0, ni, xbuf, &rc, err);
		if (!xs)
			break;
		/* columns [r0, i0) were stored, mirrored, by the sub-blocks before this one */
		rc = part(g, xs, i0, ni, xs, i0, ni, 1, 1);
		if (rc == 0)
			rc = columns(g, s, xs, i0, ni, i1, r0 + m, 1, ybuf, yrows);
		if (rc == 0)
			rc = columns(g, s, xs, i0, ni, 0, r0, 0, ybuf, yrows);
		if (rc == 0)
			rc = columns(g, s, xs, i0, ni, r0 + m, s->n, 0, ybuf, yrows);
	}
out:
	free(xbuf);
	free(ybuf);
	return rc;
}

static int gram(const double *rows, size_t n, size_t d, enum pe_dtype dt, void *out, int cancel, struct pe_err *err)
{
	struct pe_gram_src s = {.rows = rows, .n = n, .d = d};
	return pe_gram_rows(&s, 0, n, dt, out, cancel, err);
}

void pe_gram_f64(const double *rows, size_t n, size_t d, double *g) { gram(rows, n, d, PE_F64, g, 0, NULL); }

int pe_gram(const double *rows, size_t n, size_t d, enum pe_dtype dt, void *out, struct pe_err *err)
{
	return gram(rows, n, d, dt, out, 1, err);
}

uint64_t pe_gram_cost(uint64_t n, uint64_t d)
{
	uint64_t pairs = n % 2 == 0 ? n / 2 : (n + 1) / 2, other = n % 2 == 0 ? n + 1 : n, work;
	if (n == UINT64_MAX || __builtin_mul_overflow(pairs, other, &pairs) || __builtin_mul_overflow(pairs, d, &work))
		return UINT64_MAX;
	return work;
}
