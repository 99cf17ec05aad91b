/* The finiteness check shared by the text writers (JSON and CSV cannot hold NaN or infinity). */
#include "tensor/internal.h"

#include <string.h>

/* Index of the first NaN or infinity (all exponent bits set), or count if there is none. One
 * tight loop per element width: this pass runs over every table before it is printed. */
size_t pe_first_nonfinite(const struct pe_tensor_view *t, size_t count)
{
	const unsigned char *d = t->data;
	size_t i = 0;
	if (t->dtype == PE_F32) {
		for (uint32_t w; i < count; i++)
			if (memcpy(&w, d + 4 * i, 4), (w & 0x7f800000u) == 0x7f800000u)
				break;
	} else if (t->dtype == PE_F64) {
		for (uint64_t w; i < count; i++)
			if (memcpy(&w, d + 8 * i, 8), (w & 0x7ff0000000000000ull) == 0x7ff0000000000000ull)
				break;
	} else if (t->dtype == PE_F16 || t->dtype == PE_BF16) {
		uint16_t m = t->dtype == PE_F16 ? 0x7c00 : 0x7f80;
		for (uint16_t w; i < count; i++)
			if (memcpy(&w, d + 2 * i, 2), (w & m) == m)
				break;
	} else {
		i = count; /* i32 */
	}
	return i;
}

