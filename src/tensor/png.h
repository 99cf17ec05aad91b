/* PNG heatmaps of tensors (format=png), their colormaps and the bitmap font of their labels.
 *
 * The public part (options, layout, pe_png_plan, pe_png_write, pe_png_bound) is in
 * include/posenc/tensor.h; what is declared here is internal to src/tensor (the colormap tables
 * and the font) and is what tests look colours and glyphs up in. Everything here is re-entrant and thread-safe: the tables are const data.
 *
 * Picture, like the seeds' `plt.pcolormesh(table, cmap='viridis'); plt.colorbar()`:
 *   - x = the last axis (embedding dimension, key), y = the first (position, query). Position 0 is
 *     the TOP row, as an image is read (pcolormesh puts row 0 at the bottom; imshow, which people
 *     also use for these tables, at the top).
 *   - rank 0 is one cell, rank 1 one row (drawn at least 32 px tall), rank 2 one heatmap, rank 3
 *     [n, rows, cols] n heatmaps stacked top to bottom, each under a label strip ("cos"/"sin" when
 *     the caller passes them, else the index), all sharing one colour scale; the bar moves right
 *     if a label is wider than the heatmap. Rank > 3 is
 *     PE_EINVAL naming "format".
 *   - A colour bar on the right, max at the top and min at the bottom, with the two end values
 *     printed beside it (and 0 at the middle for RdBu), as "%.4g".
 *   - viridis spans [min, max] of the table; RdBu is diverging and centred on 0: it spans
 *     [-m, m] with m = max |value|, so 0 is ColorBrewer's centre grey #f7f7f7 exactly. Colour of a
 *     value: t = (v - lo) / (hi - lo), entry min(floor(t * n), n - 1) of the n-entry table
 *     (matplotlib's rule); a constant table is drawn in the colour of t = 0 (viridis) or t = 0.5.
 *   - NaN, +-Inf and masked entries (exactly the lowest finite value of a float dtype, which is how
 *     the contract writes causal masks) are drawn in PE_PNG_BAD_RGB and left out of the range.
 *   - Size: 'scale' pixels per cell (0 = automatic: the largest of 1..32 that keeps the heatmaps
 *     within about 512 px). The whole image never exceeds PE_PNG_MAX_SIDE on either side: scale
 *     is lowered to fit, and a table too big even at one pixel per cell is downsampled by
 *     AVERAGING blocks of row_step x col_step cells (box filter over the finite, unmasked values;
 *     striding would alias the high-frequency sinusoid columns into false stripes). The colour
 *     range is always that of the full table.
 * Output: 8-bit RGB, non-interlaced, zlib level 1 (Z_BEST_SPEED), filter "none", no time or
 * text chunks, so equal tables give equal bytes (the ETag depends only on the request). */
#ifndef POSENC_TENSOR_PNG_H
#define POSENC_TENSOR_PNG_H

#include <stddef.h>
#include <stdint.h>
#include "posenc/tensor.h"

/* The public part (options, layout, pe_png_write) is in include/posenc/tensor.h. */

/* ---- internal to src/tensor (and its tests) ---- */

/* Drawn for NaN, +-Inf and masked entries: neutral mid grey, far from every entry of both
 * colormaps (viridis has no grey, RdBu's greys are all near white). */
#define PE_PNG_BAD_R 128
#define PE_PNG_BAD_G 128
#define PE_PNG_BAD_B 128

/* Where text goes: glyphs are drawn PE_PNG_TEXT_SCALE times larger (a glyph is 10x14 pixels,
 * one every 12), in black on white. A rank-3 panel's label starts at (x0, its strip's top +
 * PE_PNG_LABEL_PAD); the bar's numbers start PE_PNG_NUM_GAP right of the bar: the max flush with
 * its top, the min flush with its bottom, RdBu's 0 centred on its middle row. */
#define PE_PNG_TEXT_SCALE 2
#define PE_PNG_LABEL_PAD 3
#define PE_PNG_NUM_GAP 6

/* Colormap tables (colormap.c, generated from matplotlib). */
extern const uint8_t pe_cmap_viridis_rgb[256][3];
extern const uint8_t pe_cmap_rdbu_rgb[251][3]; /* ColorBrewer's 11 anchors at entries 25k */
size_t pe_cmap_size(enum pe_cmap c);
const uint8_t *pe_cmap_rgb(enum pe_cmap c, size_t i); /* i < pe_cmap_size(c) */
/* Entry for t in [0, 1] (NaN and t < 0 give 0, t >= 1 the last): min(floor(t * n), n - 1). */
size_t pe_cmap_index(enum pe_cmap c, double t);

/* 5x7 bitmap font (font.c): rows top to bottom, bit 4 = leftmost pixel. Digits, + - . , : = ? _
 * ( ) [ ] / space and a-z; A-Z are drawn as a-z and anything else as '?'. */
#define PE_FONT_W 5
#define PE_FONT_H 7
const uint8_t *pe_font_glyph(char ch);

#endif
