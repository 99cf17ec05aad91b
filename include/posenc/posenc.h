/* posenc: positional encodings computed, cached and served. Umbrella header for libposenc.a.
 * Layers: core (tables, no I/O) < tensor (budget.h: memory; tensor.h: formats) < cache (LRU). See
 * each header for ownership. */
#ifndef POSENC_POSENC_H
#define POSENC_POSENC_H

#include "posenc/version.h"
#include "posenc/err.h"
#include "posenc/dtype.h"
#include "posenc/core.h"
#include "posenc/budget.h"
#include "posenc/tensor.h"
#include "posenc/cache.h"

#endif
