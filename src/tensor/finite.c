/* The finiteness check shared by the text writers (JSON and CSV cannot hold NaN or infinity). */
#include "tensor/internal.h"

#include <string.h>

#define BLOCK 64 /* elements tested per step without an early exit, so the compiler vectorises */

/* Index of the first NaN or infinity (all exponent bits set), or count if there is none. This pass
 * runs over every table before it is printed (serially, before the printing threads start), so
 * each element width tests whole blocks branch-free and looks inside a block only when it holds
 * one (a loop that stops at the first hit does not vectorise). */
#define FIRST_NONFINITE(T, mask)                                                          \
	do {                                                                              \
		const T m = (mask);                                                       \
		for (; i + BLOCK <= count; i += BLOCK) {                                  \
			int hit = 0;                                                      \
			for (size_t k = 0; k < BLOCK; k++) {                              \
				T w;                                                      \
				memcpy(&w, d + sizeof(T) * (i + k), sizeof(T));           \
				hit |= (w & m) == m;                                      \
			}                                                                 \
			if (hit)                                                          \
				break;                                                    \
		}                                                                         \
		for (T w; i < count; i++)                                                 \
			if (memcpy(&w, d + sizeof(T) * i, sizeof(T)), (w & m) == m)       \
				break;                                                    \
	} while (0)

size_t pe_first_nonfinite(const struct pe_tensor_view *t, size_t count)
{
	const unsigned char *d = t->data;
	size_t i = 0;
	if (t->dtype == PE_F32)
		FIRST_NONFINITE(uint32_t, 0x7f800000u);
	else if (t->dtype == PE_F64)
		FIRST_NONFINITE(uint64_t, 0x7ff0000000000000ull);
	else if (t->dtype == PE_F16)
		FIRST_NONFINITE(uint16_t, 0x7c00);
	else if (t->dtype == PE_BF16)
		FIRST_NONFINITE(uint16_t, 0x7f80);
	else
		i = count; /* i32 */
	return i;
}
