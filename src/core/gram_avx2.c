/* The Gram block kernel with AVX2 + FMA (built with -mavx2 -mfma; see gram.h, gram_block.h). */
#include "core/gram.h"

#define GRAM_BLOCK_NAME pe_gram_block_avx2
#define GRAM_LANES 4
#include "core/gram_block.h"
