/* The Gram block kernel for any x86-64 (see gram.h, gram_block.h). */
#include "core/gram.h"

#define GRAM_BLOCK_NAME pe_gram_block_scalar
#define GRAM_LANES 2
#include "core/gram_block.h"
