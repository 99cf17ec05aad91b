/* posenc order analysis: why position matters. One head of self-attention with identity
 * projections, in float64, on token embeddings X [len, dim] and on X with its rows permuted, with
 * no positional encoding or with one of sinusoidal, rope, alibi (src/core/order.c says how each
 * enters). Without an encoding self-attention is permutation-equivariant: out(perm X) equals
 * perm(out X); an encoding breaks that (ALiBi only through distances: a permutation that keeps
 * every |i - j|, such as reversal, leaves it equivariant too).
 *
 * The parameters are those of the registered table "analysis/order" (pe_table_find): encoding,
 * len, dim, perm, seed, tokens and the encodings' own. That table is the pair of attention
 * matrices [2, len, len] (the CLI's posenc analysis/order); pe_order_compute gives everything.
 * Thread-safe, re-entrant. */
#ifndef POSENC_ORDER_H
#define POSENC_ORDER_H

#include <stddef.h>
#include <stdint.h>
#include "posenc/core.h"

/* Documented limits, checked by pe_params_finish before anything is allocated: len² and len·dim
 * (PE_ETOOBIG naming len, or dim). */
#define PE_ORDER_MAX_LEN2 262144.0   /* 2^18: len <= 512 */
#define PE_ORDER_MAX_CELLS 262144.0  /* 2^18 elements of X */
#define PE_ORDER_EQUIVARIANT_TOL 1e-9

struct pe_order_result {
	size_t len, dim;
	double *attention, *attention_permuted; /* [len, len], row-stochastic */
	double *output, *output_permuted;       /* [len, dim] */
	double output_difference;               /* max |output_permuted - perm(output)| */
	int equivariant;                        /* output_difference <= PE_ORDER_EQUIVARIANT_TOL */
	void *block;                            /* owns the four arrays */
};

/* The seeded standard-normal generator of the GET (openapi.yaml states it for other languages):
 * row t of the table is SplitMix64 from state seed + t·2^32·0x9E3779B97F4A7C15 (mod 2^64), each
 * output z made a uniform u = ((z >> 12) + 0.5)·2^-52 in (0, 1), each pair (u1, u2) two normals
 * by Box–Muller: r = sqrt(-2·log(u1)), a = 6.283185307179586·u2, X[c] = r·cos(a),
 * X[c+1] = r·sin(a) (the last sine dropped for an odd dim). Writes rows[k] for each k < n into
 * x[k·dim ...]: the token ids of `tokens`, or 0 .. n-1 when tokens is NULL. */
void pe_order_draw(uint64_t seed, const double *tokens, size_t n, size_t dim, double *x);

/* Compute for finished parameters (pe_params_finish on the "analysis/order" table). x: X as
 * [len, dim] float64 (finite; the caller checks), or NULL to draw it (pe_order_draw with the
 * parameters' seed and tokens). 0, or PE_ENOMEM / PE_EINVAL ("body": the values overflow) /
 * a cancellation code, with err set. Free the result with pe_order_result_destroy. */
int pe_order_compute(const struct pe_params *p, const double *x, struct pe_order_result *r, struct pe_err *err);
void pe_order_result_destroy(struct pe_order_result *r);

/* The most bytes pe_order_compute allocates, result included, for len and dim. */
uint64_t pe_order_bytes(uint64_t len, uint64_t dim);

#endif
