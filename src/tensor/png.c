/* PNG heatmaps (format=png): what is drawn is described in tensor/png.h; this is how.
 *
 * Two passes over the table: one for the colour range (finite, unmasked values only), one that
 * turns every drawn cell into a colormap index (averaging blocks when the table is downsampled).
 * The picture is then streamed to libpng one pixel row at a time, each row rendered from the cell
 * indices, the colour bar and the label strings, so memory is one row plus one index per cell,
 * never the whole image. libpng writes through a callback straight into the caller's pe_buf (no
 * temporary file); a full buffer aborts the encoder through png_error and its longjmp, which is
 * kept inside encode() with nothing but locals that are set before setjmp.
 * Speed: zlib level 1 (Z_BEST_SPEED), filter "none", no per-row filter search. Every pixel is one
 * of ~257 colours, so the unfiltered rows are full of repeats that deflate finds, while "sub"/"up"
 * differences of colormap colours are noise: on a 512x768 sinusoidal table "none" was both the
 * fastest and the smallest (330 KB vs 500 KB for "up", 510 KB for libpng's adaptive choice),
 * and level 3 or the default 6 cost 1.5-2.5x the time for 20-25% fewer bytes. */
#include "tensor/png.h"
#include "tensor/internal.h"

#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* Layout, in pixels. Text is the 5x7 font drawn FONT_SCALE times larger. */
#define MARGIN 8
#define FONT_SCALE PE_PNG_TEXT_SCALE
#define TEXT_H (PE_FONT_H * FONT_SCALE)
#define TEXT_ADV ((PE_FONT_W + 1) * FONT_SCALE)
#define LABEL_PAD PE_PNG_LABEL_PAD
#define LABEL_STRIP (TEXT_H + 2 * LABEL_PAD) /* above each panel of a rank-3 table */
#define BAR_GAP 12                /* heatmap to colour bar */
#define BAR_W 16
#define NUM_GAP PE_PNG_NUM_GAP     /* colour bar to its numbers */
#define NUM_CHARS 11              /* "-1.234e+308" */
#define DECOR_W (BAR_GAP + BAR_W + NUM_GAP + NUM_CHARS * TEXT_ADV + MARGIN)
#define BAR_MIN_H (3 * TEXT_H + 16) /* room for the top, middle and bottom numbers */
#define LABEL_MAX_CHARS 16        /* longer panel labels are cut */
#define ROW1_MIN_H 32             /* a rank-0/1 table's single row is at least this tall */
#define AUTO_TARGET 512           /* automatic scale: heatmaps up to about this many pixels */
#define AUTO_MAX_SCALE 32

#define INK 0x00
#define PAPER 0xff

void pe_png_options_init(struct pe_png_options *o)
{
	memset(o, 0, sizeof *o);
	o->cmap = PE_CMAP_VIRIDIS;
}

/* ---- reading the table ---- */

/* Convert n elements from index i into doubles through the dtype helpers. */
static void to_double(const struct pe_tensor_view *t, size_t i, size_t n, double *out)
{
	const unsigned char *d = (const unsigned char *)t->data + i * pe_dtype_size(t->dtype);
	float f;
	uint16_t h;
	int32_t k;
	switch (t->dtype) {
	case PE_F32:
		for (size_t j = 0; j < n; j++) {
			memcpy(&f, d + 4 * j, 4);
			out[j] = f;
		}
		break;
	case PE_F64:
		memcpy(out, d, 8 * n);
		break;
	case PE_F16:
		for (size_t j = 0; j < n; j++) {
			memcpy(&h, d + 2 * j, 2);
			out[j] = pe_f16_to_f32(h);
		}
		break;
	case PE_BF16:
		for (size_t j = 0; j < n; j++) {
			memcpy(&h, d + 2 * j, 2);
			out[j] = pe_bf16_to_f32(h);
		}
		break;
	default: /* PE_I32 */
		for (size_t j = 0; j < n; j++) {
			memcpy(&k, d + 4 * j, 4);
			out[j] = k;
		}
		break;
	}
}

/* A value that takes part in the colour scale: finite and not a mask (the dtype's lowest). */
static int usable(double v, double lowest) { return isfinite(v) && v != lowest; }

struct geom {
	size_t panels, rows, cols; /* of the table: [panels, rows, cols] */
	double lowest;             /* mask value, or NaN for i32 (no masks) */
};

static void table_geom(const struct pe_tensor_view *t, struct geom *g)
{
	const size_t *d = t->shape.dim;
	g->panels = t->shape.rank == 3 ? d[0] : 1;
	g->rows = t->shape.rank == 3 ? d[1] : t->shape.rank == 2 ? d[0] : 1;
	g->cols = t->shape.rank >= 2 ? d[t->shape.rank - 1] : t->shape.rank == 1 ? d[0] : 1;
	g->lowest = pe_dtype_is_float(t->dtype) ? pe_dtype_lowest(t->dtype) : NAN;
}

/* Min and max of the usable values into lay->lo, lay->hi (NaN if there are none), then the
 * colour range of the colormap. */
static int scan_range(const struct pe_tensor_view *t, const struct geom *g, enum pe_cmap cmap,
		      struct pe_png_layout *lay)
{
	double *row = malloc(g->cols * sizeof *row), lo = INFINITY, hi = -INFINITY;
	if (!row)
		return PE_ENOMEM;
	size_t nrows = g->panels * g->rows;
	for (size_t r = 0; r < nrows; r++) {
		to_double(t, r * g->cols, g->cols, row);
		for (size_t c = 0; c < g->cols; c++) {
			double v = row[c];
			if (!usable(v, g->lowest))
				continue;
			lo = v < lo ? v : lo;
			hi = v > hi ? v : hi;
		}
	}
	free(row);
	if (lo > hi) {
		lay->lo = lay->hi = NAN;
		return 0;
	}
	if (cmap == PE_CMAP_RDBU) {
		double m = fabs(lo) > fabs(hi) ? fabs(lo) : fabs(hi);
		lo = -m;
		hi = m;
	}
	lay->lo = lo + 0.0; /* no "-0" labels */
	lay->hi = hi + 0.0;
	return 0;
}

/* Position of v in the colour range, in [0, 1]. Halves keep hi - lo finite for any doubles. */
static double t_of(double v, double lo, double hi, double flat)
{
	double span = hi * 0.5 - lo * 0.5;
	if (!(span > 0))
		return flat;
	double t = (v * 0.5 - lo * 0.5) / span;
	return t < 0 ? 0 : t > 1 ? 1 : t;
}

static size_t div_up(size_t a, size_t b) { return a / b + (a % b != 0); }

/* Label of panel p: the caller's (a NULL-terminated list that may be short) or the index. */
static const char *panel_label(const char *const *labels, size_t p, char *idx, size_t cap)
{
	for (size_t i = 0; labels && labels[i]; i++)
		if (i == p)
			return labels[i];
	snprintf(idx, cap, "%zu", p);
	return idx;
}

/* Width of the widest panel label, so that no label is cut by the colour bar. */
static size_t labels_width(const char *const *labels, size_t panels)
{
	size_t w = 0;
	char idx[24];
	for (size_t p = 0; p < panels; p++) {
		size_t n = strlen(panel_label(labels, p, idx, sizeof idx));
		n = n < LABEL_MAX_CHARS ? n : LABEL_MAX_CHARS;
		w = n > w ? n : w;
	}
	return w * TEXT_ADV;
}

int pe_png_plan(const struct pe_tensor_view *t, const struct pe_png_options *o,
		struct pe_png_layout *lay, struct pe_err *err)
{
	struct pe_png_options defaults;
	if (!o) {
		pe_png_options_init(&defaults);
		o = &defaults;
	}
	memset(lay, 0, sizeof *lay);
	if ((unsigned)o->cmap >= PE_CMAP_COUNT_)
		return pe_err_set(err, PE_EINVAL, "cmap", "unknown colormap (viridis, RdBu)");
	if (o->scale < 0 || o->scale > PE_PNG_MAX_SCALE)
		return pe_err_set(err, PE_EINVAL, "scale", "scale must be 1 to %d pixels per cell",
				  PE_PNG_MAX_SCALE);
	if (t->shape.rank < 0 || t->shape.rank > 3)
		return pe_err_set(err, PE_EINVAL, "format",
				  "PNG draws tables of rank 0 to 3 (rank 3 as panels); this one has rank %d",
				  t->shape.rank);
	if (pe_dtype_size(t->dtype) == 0)
		return pe_err_set(err, PE_EINTERNAL, "", "PNG: invalid dtype");
	int overflow;
	size_t count = pe_shape_count(&t->shape, &overflow);
	if (overflow)
		return pe_err_set(err, PE_ETOOBIG, "", "PNG: the shape has more elements than fit in memory");
	if (count == 0)
		return pe_err_set(err, PE_EINVAL, "format", "PNG cannot draw an empty table");

	struct geom g;
	table_geom(t, &g);
	size_t strip = t->shape.rank == 3 ? LABEL_STRIP : 0;
	size_t max_w = PE_PNG_MAX_SIDE - MARGIN - DECOR_W, avail_h = PE_PNG_MAX_SIDE - 2 * MARGIN;
	if (g.panels > avail_h / (strip + 1))
		return pe_err_set(err, PE_EINVAL, "format",
				  "PNG: %zu panels do not fit in a %d-pixel image (at most %zu)", g.panels,
				  PE_PNG_MAX_SIDE, avail_h / (strip + 1));
	size_t max_ph = avail_h / g.panels - strip;

	lay->panels = g.panels;
	lay->col_step = div_up(g.cols, max_w);
	lay->cols = div_up(g.cols, lay->col_step);
	lay->row_step = div_up(g.rows, max_ph);
	lay->rows = div_up(g.rows, lay->row_step);

	size_t tall = lay->rows * lay->panels, big = lay->cols > tall ? lay->cols : tall;
	size_t s = o->scale ? (size_t)o->scale : AUTO_TARGET / big;
	if (!o->scale && s > AUTO_MAX_SCALE)
		s = AUTO_MAX_SCALE;
	if (s > max_w / lay->cols)
		s = max_w / lay->cols;
	if (s > max_ph / lay->rows)
		s = max_ph / lay->rows;
	if (s < 1)
		s = 1;
	lay->cell_w = lay->cell_h = s;
	if (t->shape.rank <= 1 && lay->cell_h < ROW1_MIN_H)
		lay->cell_h = ROW1_MIN_H;

	lay->label_h = strip;
	lay->x0 = MARGIN;
	lay->y0 = MARGIN + strip;
	lay->panel_pitch = strip + lay->rows * lay->cell_h;
	size_t stack_bottom = MARGIN + lay->panels * lay->panel_pitch;
	size_t area_w = lay->cols * lay->cell_w, label_w = strip ? labels_width(o->labels, g.panels) : 0;
	lay->bar_x = lay->x0 + (area_w > label_w ? area_w : label_w) + BAR_GAP;
	lay->bar_y = lay->y0;
	lay->bar_w = BAR_W;
	lay->bar_h = stack_bottom - lay->y0 > BAR_MIN_H ? stack_bottom - lay->y0 : BAR_MIN_H;
	lay->width = lay->bar_x - BAR_GAP + DECOR_W;
	lay->height = lay->bar_y + lay->bar_h + MARGIN;
	if (!t->data) { /* the shape alone (pe_png_plan's contract) */
		lay->lo = lay->hi = NAN;
		return 0;
	}

	int rc = scan_range(t, &g, o->cmap, lay);
	return rc ? pe_err_set(err, rc, "", "out of memory planning the PNG") : 0;
}

/* ---- cells ---- */

#define CELL_BAD UINT16_MAX

/* The colormap index of every drawn cell ([panels][rows][cols]), averaging the usable values of
 * each row_step x col_step block in colour-range units (t), so huge doubles cannot overflow. */
static int make_cells(const struct pe_tensor_view *t, enum pe_cmap cmap, const struct pe_png_layout *lay,
		      uint16_t **out)
{
	struct geom g;
	table_geom(t, &g);
	size_t ncell = lay->panels * lay->rows * lay->cols;
	uint16_t *cells = malloc(ncell * sizeof *cells);
	double *row = malloc(g.cols * sizeof *row), *acc = malloc(lay->cols * sizeof *acc);
	size_t *cnt = malloc(lay->cols * sizeof *cnt);
	int rc = PE_ENOMEM;
	if (!cells || !row || !acc || !cnt)
		goto out;
	double flat = cmap == PE_CMAP_RDBU ? 0.5 : 0.0;
	uint16_t *dst = cells;
	for (size_t p = 0; p < lay->panels; p++) {
		for (size_t r0 = 0; r0 < g.rows; r0 += lay->row_step) {
			size_t r1 = r0 + lay->row_step < g.rows ? r0 + lay->row_step : g.rows;
			memset(acc, 0, lay->cols * sizeof *acc);
			memset(cnt, 0, lay->cols * sizeof *cnt);
			for (size_t r = r0; r < r1; r++) {
				to_double(t, (p * g.rows + r) * g.cols, g.cols, row);
				for (size_t c = 0, oc = 0, next = lay->col_step; c < g.cols; c++) {
					if (c == next) {
						oc++;
						next += lay->col_step;
					}
					if (usable(row[c], g.lowest)) {
						acc[oc] += t_of(row[c], lay->lo, lay->hi, flat);
						cnt[oc]++;
					}
				}
			}
			for (size_t c = 0; c < lay->cols; c++)
				*dst++ = cnt[c] ? (uint16_t)pe_cmap_index(cmap, acc[c] / (double)cnt[c]) : CELL_BAD;
		}
	}
	*out = cells;
	cells = NULL;
	rc = 0;
out:
	free(cells);
	free(row);
	free(acc);
	free(cnt);
	return rc;
}

/* ---- drawing one pixel row ---- */

struct label {
	char text[32];
	size_t x, y, xmax; /* top-left corner; nothing drawn at or past xmax */
};

struct picture {
	const struct pe_png_layout *lay;
	enum pe_cmap cmap;
	const uint16_t *cells;
	uint8_t palette[257][3]; /* the colormap, then CELL_BAD's colour at [n] */
	struct label nums[3];    /* colour bar numbers: top, bottom, middle */
	size_t nnums;
	const char *const *labels;
	unsigned char *row;      /* width * 3 bytes */
};

static void put_px(unsigned char *row, size_t x, const uint8_t rgb[3]) { memcpy(row + 3 * x, rgb, 3); }

/* Row yy (0..TEXT_H-1) of text s drawn at x, clipped at xmax. */
static void draw_text_row(unsigned char *row, size_t yy, size_t x, size_t xmax, const char *s)
{
	static const uint8_t ink[3] = {INK, INK, INK};
	for (; *s; s++, x += TEXT_ADV) {
		uint8_t bits = pe_font_glyph(*s)[yy / FONT_SCALE];
		for (size_t k = 0; k < PE_FONT_W * FONT_SCALE; k++)
			if ((bits >> (PE_FONT_W - 1 - k / FONT_SCALE)) & 1 && x + k < xmax)
				put_px(row, x + k, ink);
	}
}

static void render_row(struct picture *pic, size_t y)
{
	const struct pe_png_layout *lay = pic->lay;
	unsigned char *row = pic->row;
	memset(row, PAPER, lay->width * 3);

	/* heatmap: panel p's cells, or its label strip */
	if (y >= MARGIN && y < MARGIN + lay->panels * lay->panel_pitch) {
		size_t p = (y - MARGIN) / lay->panel_pitch, in = (y - MARGIN) % lay->panel_pitch;
		if (in >= lay->label_h) {
			const uint16_t *cell = pic->cells + (p * lay->rows + (in - lay->label_h) / lay->cell_h) * lay->cols;
			unsigned char *px = row + 3 * lay->x0;
			size_t n = pe_cmap_size(pic->cmap);
			for (size_t c = 0; c < lay->cols; c++) {
				const uint8_t *rgb = pic->palette[cell[c] == CELL_BAD ? n : cell[c]];
				for (size_t k = 0; k < lay->cell_w; k++, px += 3)
					memcpy(px, rgb, 3);
			}
		} else if (in >= LABEL_PAD && in < LABEL_PAD + TEXT_H) {
			char idx[24];
			const char *s = panel_label(pic->labels, p, idx, sizeof idx);
			size_t xmax = lay->x0 + LABEL_MAX_CHARS * TEXT_ADV;
			draw_text_row(row, in - LABEL_PAD, lay->x0, xmax < lay->bar_x ? xmax : lay->bar_x, s);
		}
	}

	/* colour bar, last colour at the top */
	if (y >= lay->bar_y && y < lay->bar_y + lay->bar_h) {
		double t = 1.0 - (double)(y - lay->bar_y) / (double)(lay->bar_h - 1);
		const uint8_t *rgb = pic->palette[pe_cmap_index(pic->cmap, t)];
		for (size_t x = lay->bar_x; x < lay->bar_x + lay->bar_w; x++)
			put_px(row, x, rgb);
	}
	for (size_t i = 0; i < pic->nnums; i++) {
		const struct label *l = &pic->nums[i];
		if (y >= l->y && y < l->y + TEXT_H)
			draw_text_row(row, y - l->y, l->x, l->xmax, l->text);
	}
}

/* At most NUM_CHARS characters: "-1.234e+308" is the longest %.4g of a double. */
static void format_num(char *buf, size_t cap, double v) { snprintf(buf, cap, "%.4g", v); }

static void setup_picture(struct picture *pic, const struct pe_png_layout *lay, enum pe_cmap cmap,
			  const uint16_t *cells, const struct pe_png_options *o)
{
	pic->lay = lay;
	pic->cmap = cmap;
	pic->cells = cells;
	pic->labels = o ? o->labels : NULL;
	size_t n = pe_cmap_size(cmap);
	for (size_t i = 0; i < n; i++)
		memcpy(pic->palette[i], pe_cmap_rgb(cmap, i), 3);
	pic->palette[n][0] = PE_PNG_BAD_R;
	pic->palette[n][1] = PE_PNG_BAD_G;
	pic->palette[n][2] = PE_PNG_BAD_B;

	/* No tick marks: beside a number a tick reads as a minus sign. The numbers sit flush with the
	 * bar's ends, and 0 is centred on the bar's middle row. */
	size_t x = lay->bar_x + lay->bar_w + NUM_GAP, bottom = lay->bar_y + lay->bar_h;
	pic->nnums = cmap == PE_CMAP_RDBU ? 3 : 2;
	format_num(pic->nums[0].text, sizeof pic->nums[0].text, lay->hi);
	pic->nums[0].y = lay->bar_y;
	format_num(pic->nums[1].text, sizeof pic->nums[1].text, lay->lo);
	pic->nums[1].y = bottom - TEXT_H;
	if (pic->nnums == 3) {
		format_num(pic->nums[2].text, sizeof pic->nums[2].text, isnan(lay->lo) ? NAN : 0.0);
		pic->nums[2].y = lay->bar_y + (lay->bar_h - 1) / 2 - TEXT_H / 2;
	}
	for (size_t i = 0; i < pic->nnums; i++) {
		pic->nums[i].x = x;
		pic->nums[i].xmax = lay->width;
	}
}

/* ---- libpng ---- */

struct sink {
	struct pe_buf *b;
	int rc;
	char msg[128];
};

static void write_cb(png_structp png, png_bytep data, size_t n)
{
	struct sink *s = png_get_io_ptr(png);
	int rc = pe_buf_append(s->b, data, n);
	if (rc != 0) {
		s->rc = rc;
		png_error(png, "output buffer full");
	}
}

static void flush_cb(png_structp png) { (void)png; }

static void error_cb(png_structp png, png_const_charp msg)
{
	struct sink *s = png_get_error_ptr(png);
	snprintf(s->msg, sizeof s->msg, "%s", msg);
	if (s->rc == 0)
		s->rc = strstr(msg, "emory") ? PE_ENOMEM : PE_EINTERNAL;
	png_longjmp(png, 1);
}

static void warn_cb(png_structp png, png_const_charp msg)
{
	(void)png;
	(void)msg;
}

/* Everything that libpng may longjmp across lives in *s and *pic, set before setjmp. */
static int encode(struct sink *s, struct picture *pic)
{
	const struct pe_png_layout *lay = pic->lay;
	png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, s, error_cb, warn_cb);
	if (!png)
		return PE_ENOMEM;
	png_infop info = png_create_info_struct(png);
	if (!info) {
		png_destroy_write_struct(&png, NULL);
		return PE_ENOMEM;
	}
	if (setjmp(png_jmpbuf(png))) {
		png_destroy_write_struct(&png, &info);
		return s->rc ? s->rc : PE_EINTERNAL;
	}
	png_set_write_fn(png, s, write_cb, flush_cb);
	png_set_compression_level(png, Z_BEST_SPEED);
	png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_FILTER_NONE);
	png_set_IHDR(png, info, (png_uint_32)lay->width, (png_uint_32)lay->height, 8, PNG_COLOR_TYPE_RGB,
		     PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
	png_write_info(png, info);
	for (size_t y = 0; y < lay->height; y++) {
		render_row(pic, y);
		png_write_row(png, pic->row);
	}
	png_write_end(png, NULL);
	png_destroy_write_struct(&png, &info);
	return 0;
}

/* The image data as stored, uncompressed: a filter byte and the RGB pixels of each row. zlib (level
 * 1 keeps a block that does not shrink as a stored block, 5 bytes per at most 16 KiB) and libpng
 * (IDAT chunks of 8 KiB, 12 bytes each) add less than 1/256 of it; the signature, IHDR, IEND and
 * the zlib header and checksum are the rest. */
size_t pe_png_bound(const struct pe_png_layout *lay)
{
	size_t raw = pe_sat_mul(pe_sat_add(pe_sat_mul(lay->width, 3), 1), lay->height);
	return pe_sat_add(pe_sat_add(raw, raw / 256), 4096);
}

int pe_png_write(struct pe_buf *b, const struct pe_tensor_view *t, const struct pe_png_options *o,
		 struct pe_err *err)
{
	struct pe_png_layout lay;
	int rc = pe_png_plan(t, o, &lay, err);
	if (rc != 0)
		return rc;
	enum pe_cmap cmap = o ? o->cmap : PE_CMAP_VIRIDIS;
	struct sink s = {b, 0, ""};
	struct picture pic;
	uint16_t *cells = NULL;
	size_t start = b->len;
	memset(&pic, 0, sizeof pic);
	rc = make_cells(t, cmap, &lay, &cells);
	if (rc == 0) {
		setup_picture(&pic, &lay, cmap, cells, o);
		pic.row = malloc(lay.width * 3);
		rc = pic.row ? encode(&s, &pic) : PE_ENOMEM;
	}
	free(pic.row);
	free(cells);
	if (rc == 0)
		return 0;
	b->len = start;
	if (rc == PE_ETOOBIG)
		return pe_err_set(err, rc, "", "the PNG output exceeds the limit of %zu bytes", b->max);
	if (rc == PE_ENOMEM)
		return pe_err_set(err, rc, "", "out of memory writing PNG");
	return pe_err_set(err, rc, "", "libpng: %s", s.msg);
}
