/* Internal: the block kernel of the Gram matrix (analysis.c), compiled once per ISA from
 * gram_block.h: gram_scalar.c (baseline x86-64, SSE2) and gram_avx2.c (AVX2 + FMA).
 *
 * acc[a * nj + b] = dot(rows[i0 + a], rows[j0 + b]) for a < ni, b < nj (both <= PE_GRAM_BLOCK),
 * rows of d doubles. Inside, the products are taken 4 rows by 2 rows at a time, L lanes of k
 * per vector (2 scalar, 4 AVX2), over chunks of PE_GRAM_KC columns so the rows in use stay in
 * L1/L2: each pair's sum is, per chunk, L lane sums of at most PE_GRAM_KC/L terms added
 * pairwise, then the chunks in order: |error| <= (PE_GRAM_KC/L + 2 + 3 + d/PE_GRAM_KC) u sum|x y|,
 * below (d/2 + 8) u sum|x y| for every d (u = 2^-53). */
#ifndef PE_CORE_GRAM_H
#define PE_CORE_GRAM_H

#include <stddef.h>

#define PE_GRAM_BLOCK 32
#define PE_GRAM_KC 512

void pe_gram_block_scalar(const double *rows, size_t d, size_t i0, size_t ni, size_t j0, size_t nj, double *acc);
void pe_gram_block_avx2(const double *rows, size_t d, size_t i0, size_t ni, size_t j0, size_t nj, double *acc);

#endif
