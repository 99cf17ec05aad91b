/* posenc resampling of position tables: stretching a learned table to a longer context (linear over
 * the positions) or to a larger image grid (bicubic over the patch grid), the way practitioners do
 * it when they fine-tune at a new length or resolution. No I/O; every function is pure, re-entrant
 * and thread-safe, and frees what it allocates before it returns (the grid's intermediate may be the
 * caller's).
 *
 * Layout: a table is row-major [positions, d], one channel vector per position. A ViT table is
 * [prefix + h*w, d]: `prefix` class / register tokens, then the patches in row-major order (patch
 * (r, c) is row prefix + r*w + c), as timm and Hugging Face lay them out.
 *
 * Arithmetic: values are float64 throughout. Source coordinates and weights follow PyTorch's CPU
 * kernels for F.interpolate(..., align_corners=False) given an output size (scale = in/out), in the
 * precision PyTorch uses for the table's dtype `dt`: float64 for PE_F64, float32 for the others
 * (its opmath type; the source index itself is float64 in both). That matters: PyTorch's float32
 * scale for 1000 -> 333 rows puts sources ~1e-4 positions off the float64 ones, and a value as
 * much times the slope, so matching a float32 model within 1e-5 takes its float32 arithmetic.
 * Results agree with PyTorch to ~1e-15 (float64) and ~1e-6 (float32 tables, unit-scale values).
 *   linear    src = max(scale*(i+0.5) - 0.5, 0), taps floor(src) and the next one (clamped).
 *   bicubic   src = scale*(i+0.5) - 0.5, Keys' cubic with a = -0.75 on the 4 taps around floor(src),
 *             indices clamped to the edge; separable (along the width, then the height).
 *   antialias PyTorch's _upsample_bicubic2d_aa (PIL's resampler): Keys' cubic with a = -0.5 whose
 *             support (2) is widened by the scale when downsampling, taps clipped to the image and
 *             the weights normalised to sum 1; width first, then height. */
#ifndef POSENC_RESAMPLE_H
#define POSENC_RESAMPLE_H

#include <stddef.h>
#include "posenc/dtype.h"

/* out [m, d] from in [n, d]: F.interpolate(t.T[None], size=m, mode='linear',
 * align_corners=False)[0].T. 0, PE_EINVAL (a size is 0) or PE_ENOMEM. out must not overlap in. */
int pe_resample_linear(const double *in, size_t n, size_t d, double *out, size_t m, enum pe_dtype dt);

/* out [prefix + oh*ow, d] from in [prefix + h*w, d]: the prefix rows copied, the grid resampled as
 * timm.layers.resample_abs_pos_embed(..., interpolation='bicubic', antialias=antialias) does, i.e.
 * F.interpolate(grid.reshape(1, h, w, d).permute(0, 3, 1, 2), size=(oh, ow), mode='bicubic',
 * align_corners=False, antialias=antialias). The intermediate of its two passes goes in scratch,
 * pe_resample_grid_scratch(h, w, d, oh, ow) bytes the caller holds (NULL: allocated here). 0,
 * PE_EINVAL (a size is 0) or PE_ENOMEM. */
int pe_resample_grid(const double *in, size_t prefix, size_t h, size_t w, size_t d, double *out, size_t oh,
		     size_t ow, int antialias, enum pe_dtype dt, double *scratch);
/* The bytes of pe_resample_grid's intermediate: min(oh*w, h*ow) rows of d doubles (SIZE_MAX when
 * that overflows). The resampling taps it also allocates are a few per output row or column. */
size_t pe_resample_grid_scratch(size_t h, size_t w, size_t d, size_t oh, size_t ow);

#endif
