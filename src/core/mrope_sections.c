/* M-RoPE's split of the rotary frequencies among the three position rows (t, h, w), shared by the
 * M-RoPE tables (/v1/rope/mrope) and RoPE applied with per-token M-RoPE positions (/v1/rope/apply).
 *
 * Frequency k (0 <= k < dim/2) turns with the position row pe_mrope_row_of(k):
 * - sections in order (Qwen2-VL, Qwen2.5-VL): the first s0 frequencies follow t, the next s1 h, the
 *   last s2 w (transformers splits cat(freqs, freqs) into mrope_section * 2 chunks, chunk i taking
 *   row i % 3, which is the same map on each half);
 * - interleaved (Qwen3-VL): frequency k follows h when k % 3 == 1 and k < 3*s1, w when k % 3 == 2
 *   and k < 3*s2, and t otherwise. */
#include "core/rope.h"

int pe_mrope_sections_check(const double *sec, size_t n, size_t half, int interleaved, struct pe_err *err)
{
	if (n != 3)
		return pe_err_set(err, PE_EINVAL, "mrope_section", "three sections (t, h, w), got %zu", n);
	double sum = 0;
	for (size_t i = 0; i < 3; i++) {
		if (sec[i] < 0 || sec[i] != (double)(int64_t)sec[i])
			return pe_err_set(err, PE_EINVAL, "mrope_section", "sections are non-negative integers");
		sum += sec[i];
	}
	if (sum != (double)half)
		return pe_err_set(err, PE_EINVAL, "mrope_section", "sections sum to %.0f, not dim/2 = %zu", sum, half);
	if (interleaved && (3 * sec[1] > (double)half || 3 * sec[2] > (double)half))
		return pe_err_set(err, PE_EINVAL, "mrope_section",
				  "interleaved: 3 * each of the h and w sections must be at most dim/2 = %zu", half);
	return 0;
}

int pe_mrope_row_of(const double sec[3], int interleaved, size_t k)
{
	if (interleaved) {
		if (k % 3 == 1 && (double)k < 3 * sec[1])
			return 1;
		if (k % 3 == 2 && (double)k < 3 * sec[2])
			return 2;
		return 0;
	}
	if ((double)k < sec[0])
		return 0;
	return (double)k < sec[0] + sec[1] ? 1 : 2;
}
