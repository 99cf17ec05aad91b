/* The body of pe_gram_block_<isa> (see gram.h), included by gram_scalar.c and gram_avx2.c with
 * GRAM_BLOCK_NAME and GRAM_LANES (doubles per vector: 2 for SSE2's xmm, 4 for AVX2's ymm) defined.
 * Written with GCC vector extensions, so one body serves both. */
#include <string.h>

typedef double gram_v4 __attribute__((vector_size(8 * GRAM_LANES)));

static inline gram_v4 gram_load(const double *p)
{
	gram_v4 v;
	memcpy(&v, p, sizeof v);
	return v;
}

static inline double gram_hsum(gram_v4 v)
{
#if GRAM_LANES == 4
	return (v[0] + v[1]) + (v[2] + v[3]);
#else
	return v[0] + v[1];
#endif
}

/* acc[r * ldacc + c] += dot(a[r], b[c]) over kn columns, for r < ra (<= 4), c < rb (<= 2); the
 * missing rows of a partial tile repeat the last one and their sums are dropped. */
static inline void gram_tile(const double *const a[4], const double *const b[2], size_t kn, size_t ra,
			     size_t rb, double *acc, size_t ldacc)
{
	gram_v4 s00 = {0}, s01 = {0}, s10 = {0}, s11 = {0}, s20 = {0}, s21 = {0}, s30 = {0}, s31 = {0};
	size_t k = 0;
	for (; k + GRAM_LANES <= kn; k += GRAM_LANES) {
		gram_v4 b0 = gram_load(b[0] + k), b1 = gram_load(b[1] + k);
		gram_v4 x = gram_load(a[0] + k);
		s00 += x * b0;
		s01 += x * b1;
		x = gram_load(a[1] + k);
		s10 += x * b0;
		s11 += x * b1;
		x = gram_load(a[2] + k);
		s20 += x * b0;
		s21 += x * b1;
		x = gram_load(a[3] + k);
		s30 += x * b0;
		s31 += x * b1;
	}
	double t[4][2] = {{gram_hsum(s00), gram_hsum(s01)},
			  {gram_hsum(s10), gram_hsum(s11)},
			  {gram_hsum(s20), gram_hsum(s21)},
			  {gram_hsum(s30), gram_hsum(s31)}};
	for (; k < kn; k++)
		for (size_t r = 0; r < 4; r++)
			for (size_t c = 0; c < 2; c++)
				t[r][c] += a[r][k] * b[c][k];
	for (size_t r = 0; r < ra; r++)
		for (size_t c = 0; c < rb; c++)
			acc[r * ldacc + c] += t[r][c];
}

void GRAM_BLOCK_NAME(const double *xs, const double *ys, size_t d, size_t ni, size_t nj, double *acc)
{
	for (size_t x = 0; x < ni * nj; x++)
		acc[x] = 0;
	for (size_t k0 = 0; k0 < d; k0 += PE_GRAM_KC) {
		size_t kn = d - k0 < PE_GRAM_KC ? d - k0 : PE_GRAM_KC;
		for (size_t i = 0; i < ni; i += 4) {
			size_t ra = ni - i < 4 ? ni - i : 4;
			const double *a[4];
			for (size_t r = 0; r < 4; r++)
				a[r] = xs + (i + (r < ra ? r : ra - 1)) * d + k0;
			for (size_t j = 0; j < nj; j += 2) {
				size_t rb = nj - j < 2 ? nj - j : 2;
				const double *b[2];
				for (size_t c = 0; c < 2; c++)
					b[c] = ys + (j + (c < rb ? c : rb - 1)) * d + k0;
				gram_tile(a, b, kn, ra, rb, acc + i * nj + j, nj);
			}
		}
	}
}
