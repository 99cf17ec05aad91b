/* Internal: the Gram matrix by blocks of rows (gram.c) and its block kernel, compiled once per
 * ISA from gram_block.h: gram_scalar.c (baseline x86-64, SSE2) and gram_avx2.c (AVX2 + FMA).
 *
 * acc[a * nj + b] = dot(xs[a], ys[b]) for a < ni, b < nj (both <= PE_GRAM_BLOCK), rows of d
 * doubles (xs and ys may be the same rows). Inside, the products are taken 4 rows by 2 rows at a
 * time, L lanes of k per vector (2 scalar, 4 AVX2), over chunks of PE_GRAM_KC columns so the rows
 * in use stay in L1/L2: each pair's sum is, per chunk, L lane sums of at most PE_GRAM_KC/L terms
 * added pairwise, then the chunks in order: |error| <= (PE_GRAM_KC/L + 2 + 3 + d/PE_GRAM_KC) u sum|x y|,
 * below (d/2 + 8) u sum|x y| for every d (u = 2^-53).
 *
 * Each product is a function of its two rows alone, bit for bit: every (row, row) pair has its own
 * accumulator, the terms are taken in the same order whichever tile, position in a tile or side
 * (xs or ys) the rows are on, and a product (or fused multiply-add) is the same with its factors
 * swapped. So G[i][j] = G[j][i], and any tiling of the matrix (a block of its rows, each pair once
 * and mirrored, X held whole or made a block at a time) gives the same bytes for one ISA. */
#ifndef PE_CORE_GRAM_H
#define PE_CORE_GRAM_H

#include <stddef.h>
#include "posenc/core.h"

#define PE_GRAM_BLOCK 32
#define PE_GRAM_KC 512

void pe_gram_block_scalar(const double *xs, const double *ys, size_t d, size_t ni, size_t nj, double *acc);
void pe_gram_block_avx2(const double *xs, const double *ys, size_t d, size_t ni, size_t nj, double *acc);

/* The rows X of a Gram matrix: n rows of d doubles, held whole (rows), or made on demand: make
 * writes rows [r0, r0 + m) into out (m * d doubles) and returns 0, or an error code with err set. */
struct pe_gram_src {
	const double *rows;
	int (*make)(void *ctx, size_t r0, size_t m, double *out, struct pe_err *err);
	void *ctx;
	size_t n, d;
};

/* Rows [r0, r0 + m) of G = X·Xᵀ into out (m rows of n elements of dt), each element the bytes the
 * whole matrix has there (see gram.c for the tiling and the memory it takes when X is made).
 * cancel: check pe_cancelled() between tiles. 0, or an error code with err set (out is then
 * partly written). */
int pe_gram_rows(const struct pe_gram_src *s, size_t r0, size_t m, enum pe_dtype dt, void *out, int cancel,
		 struct pe_err *err);

#endif
