/* PNG heatmaps: every image is decoded back with libpng's simplified API and checked pixel by
 * pixel where it matters: the layout numbers, cell colours against the colormap (min cell = first
 * colour, max = last, RdBu's 0 = #f7f7f7), the colour bar and its printed range, rank-3 panels and
 * their labels, non-finite and masked cells, every dtype, downsampling, limits and errors. */
#include "posenc/tensor.h"
#include "support/pe_check.h"
#include "tensor/png.h"

#include <float.h>
#include <math.h>
#include <png.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The layout constants of png.c that tests recompute by hand. */
#define MARGIN 8
#define DECOR_W 174 /* bar gap 12 + bar 16 + number gap 6 + 11 characters * 12 + margin 8 */
#define BAR_MIN_H 58
#define STRIP 20

static const uint8_t VIR_FIRST[3] = {68, 1, 84}, VIR_LAST[3] = {253, 231, 37};
static const uint8_t RDBU_FIRST[3] = {103, 0, 31}, RDBU_MID[3] = {247, 247, 247}, RDBU_LAST[3] = {5, 48, 97};
static const uint8_t BAD[3] = {PE_PNG_BAD_R, PE_PNG_BAD_G, PE_PNG_BAD_B};
static const uint8_t WHITE[3] = {255, 255, 255}, BLACK[3] = {0, 0, 0};

struct img {
	uint32_t w, h;
	uint8_t *px; /* RGB */
};

static struct pe_shape shape_of(int rank, const size_t *dim)
{
	struct pe_shape s;
	memset(&s, 0, sizeof s);
	s.rank = rank;
	for (int i = 0; i < rank; i++)
		s.dim[i] = dim[i];
	return s;
}

static void decode(const struct pe_buf *b, struct img *im)
{
	static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
	ck_assert_uint_ge(b->len, 8);
	ck_assert(memcmp(b->data, sig, 8) == 0);
	png_image pi;
	memset(&pi, 0, sizeof pi);
	pi.version = PNG_IMAGE_VERSION;
	ck_assert_msg(png_image_begin_read_from_memory(&pi, b->data, b->len), "%s", pi.message);
	ck_assert_uint_eq(pi.format, PNG_FORMAT_RGB); /* 8-bit RGB, no alpha, no palette */
	ck_assert_uint_eq(PNG_IMAGE_SAMPLE_COMPONENT_SIZE(pi.format), 1);
	im->w = pi.width;
	im->h = pi.height;
	im->px = malloc(PNG_IMAGE_SIZE(pi));
	ck_assert_ptr_nonnull(im->px);
	ck_assert_msg(png_image_finish_read(&pi, NULL, im->px, 0, NULL), "%s", pi.message);
}

/* Write, decode and check the size against the plan. */
static void render(const struct pe_tensor_view *t, const struct pe_png_options *o, struct img *im,
		   struct pe_png_layout *lay)
{
	struct pe_buf b;
	struct pe_err err;
	pe_buf_init(&b, 64 << 20);
	ck_assert_msg(pe_png_write(&b, t, o, &err) == 0, "%s", err.detail);
	ck_assert_int_eq(pe_png_plan(t, o, lay, &err), 0);
	decode(&b, im);
	ck_assert_uint_eq(im->w, lay->width);
	ck_assert_uint_eq(im->h, lay->height);
	ck_assert_uint_le(im->w, PE_PNG_MAX_SIDE);
	ck_assert_uint_le(im->h, PE_PNG_MAX_SIDE);
	pe_buf_destroy(&b);
}

static const uint8_t *px(const struct img *im, size_t x, size_t y)
{
	ck_assert_uint_lt(x, im->w);
	ck_assert_uint_lt(y, im->h);
	return im->px + 3 * ((size_t)y * im->w + x);
}

#define ck_rgb(im, x, y, want)                                                                     \
	do {                                                                                       \
		const uint8_t *p_ = px(im, x, y), *w_ = (want);                                     \
		ck_assert_msg(memcmp(p_, w_, 3) == 0, "pixel (%zu,%zu) is %u,%u,%u, want %u,%u,%u",      \
			      (size_t)(x), (size_t)(y), p_[0], p_[1], p_[2], w_[0], w_[1], w_[2]);        \
	} while (0)

/* Every pixel of panel p's cell (r, c) is rgb. */
static void ck_cell(const struct img *im, const struct pe_png_layout *l, size_t p, size_t r, size_t c,
		    const uint8_t *rgb)
{
	size_t x = l->x0 + c * l->cell_w, y = l->y0 + p * l->panel_pitch + r * l->cell_h;
	for (size_t dy = 0; dy < l->cell_h; dy++)
		for (size_t dx = 0; dx < l->cell_w; dx++)
			ck_rgb(im, x + dx, y + dy, rgb);
}

/* The box [x, x + 12*len) x [y, y + 14) holds exactly string s in the 5x7 font at scale 2. */
static void ck_text(const struct img *im, size_t x, size_t y, const char *s)
{
	size_t n = strlen(s), S = PE_PNG_TEXT_SCALE, adv = (PE_FONT_W + 1) * S;
	for (size_t yy = 0; yy < PE_FONT_H * S; yy++)
		for (size_t xx = 0; xx < n * adv; xx++) {
			size_t ci = xx / adv, gx = (xx % adv) / S, gy = yy / S;
			int ink = gx < PE_FONT_W && (pe_font_glyph(s[ci])[gy] >> (PE_FONT_W - 1 - gx)) & 1;
			const uint8_t *p = px(im, x + xx, y + yy);
			ck_assert_msg(memcmp(p, ink ? BLACK : WHITE, 3) == 0,
				      "text \"%s\" at (%zu,%zu): pixel (%zu,%zu) of char %zu wrong", s, x, y, xx,
				      yy, ci);
		}
}

/* The bar: top row the last colour, bottom row the first, indices never increasing downwards. */
static void ck_bar(const struct img *im, const struct pe_png_layout *l, enum pe_cmap cm)
{
	size_t n = pe_cmap_size(cm), prev = n;
	ck_rgb(im, l->bar_x, l->bar_y, pe_cmap_rgb(cm, n - 1));
	ck_rgb(im, l->bar_x + l->bar_w - 1, l->bar_y + l->bar_h - 1, pe_cmap_rgb(cm, 0));
	for (size_t y = l->bar_y; y < l->bar_y + l->bar_h; y++) {
		size_t i = 0;
		while (i < n && memcmp(px(im, l->bar_x + l->bar_w / 2, y), pe_cmap_rgb(cm, i), 3) != 0)
			i++;
		ck_assert_msg(i < n && i <= prev, "bar row %zu: not a colormap colour in order", y);
		prev = i;
	}
	ck_rgb(im, l->bar_x - 1, l->bar_y, WHITE);
	/* no tick marks between the bar and its numbers: beside "1" a tick reads as "-1" */
	for (size_t y = l->bar_y; y < l->bar_y + l->bar_h; y++)
		for (size_t x = l->bar_x + l->bar_w; x < l->bar_x + l->bar_w + PE_PNG_NUM_GAP; x++)
			ck_rgb(im, x, y, WHITE);
}

static void ck_bar_numbers(const struct img *im, const struct pe_png_layout *l, const char *top,
			   const char *bottom, const char *mid)
{
	size_t x = l->bar_x + l->bar_w + PE_PNG_NUM_GAP, th = PE_FONT_H * PE_PNG_TEXT_SCALE;
	ck_text(im, x, l->bar_y, top);
	ck_text(im, x, l->bar_y + l->bar_h - th, bottom);
	if (mid)
		ck_text(im, x, l->bar_y + (l->bar_h - 1) / 2 - th / 2, mid);
}

/* Panel 0's and panel 1's labels read first and second. */
static void ck_labels(const struct img *im, const struct pe_png_layout *l, const char *first, const char *second)
{
	ck_text(im, l->x0, MARGIN + PE_PNG_LABEL_PAD, first);
	ck_text(im, l->x0, MARGIN + l->panel_pitch + PE_PNG_LABEL_PAD, second);
}

/* One field of a layout and the value it must have (ck_layout). */
struct lay_field {
	size_t off;
	const char *name;
	size_t want;
};
#define LAY(field, value) {offsetof(struct pe_png_layout, field), #field, (value)}

static void ck_layout_fields(const struct pe_png_layout *l, const struct lay_field *f, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		size_t got;
		memcpy(&got, (const char *)l + f[i].off, sizeof got);
		ck_assert_msg(got == f[i].want, "layout %s is %zu, want %zu", f[i].name, got, f[i].want);
	}
}

/* The layout's fields as listed: ck_layout(&l, LAY(rows, 3), LAY(cols, 4)). */
#define ck_layout(l, ...)                                                                          \
	do {                                                                                       \
		const struct lay_field f_[] = {__VA_ARGS__};                                        \
		ck_layout_fields(l, f_, sizeof f_ / sizeof f_[0]);                                  \
	} while (0)

/* pe_png_options_init's options. */
static struct pe_png_options defaults(void)
{
	struct pe_png_options o;
	pe_png_options_init(&o);
	return o;
}

/* Options with colormap cm, scale (0: automatic) and panel labels (NULL: by index). */
static struct pe_png_options opts(enum pe_cmap cm, int scale, const char *const *labels)
{
	struct pe_png_options o;
	pe_png_options_init(&o);
	o.cmap = cm;
	o.scale = scale;
	o.labels = labels;
	return o;
}

/* A table drawn: the view and options it was drawn from (change them and draw again with
 * render(&s.t, &s.o, &s.im, &s.l)), the decoded picture and its layout. */
struct shot {
	struct pe_tensor_view t;
	struct pe_png_options o;
	struct img im;
	struct pe_png_layout l;
};

/* The table of dtype dt at v, of this rank and dims, drawn with options o (by_default: with
 * none, pe_png_write's NULL). */
static void shoot_(struct shot *s, enum pe_dtype dt, const void *v, int rank, const size_t *dim,
		   const struct pe_png_options *o)
{
	s->t = (struct pe_tensor_view){shape_of(rank, dim), dt, v};
	pe_png_options_init(&s->o);
	if (o)
		s->o = *o;
	render(&s->t, o, &s->im, &s->l);
}

static void shoot(struct shot *s, enum pe_dtype dt, const void *v, int rank, const size_t *dim,
		  struct pe_png_options o)
{
	shoot_(s, dt, v, rank, dim, &o);
}

static void shoot_by_default(struct shot *s, enum pe_dtype dt, const void *v, int rank, const size_t *dim)
{
	shoot_(s, dt, v, rank, dim, NULL);
}

static const uint8_t *cmap_of(enum pe_cmap cm, double v, double lo, double hi)
{
	return pe_cmap_rgb(cm, pe_cmap_index(cm, (v - lo) / (hi - lo)));
}

/* ---- colormaps and font ---- */

START_TEST(cmap_parse_names)
{
	enum pe_cmap c = PE_CMAP_COUNT_;
	ck_assert_int_eq(pe_cmap_parse("viridis", &c), 0);
	ck_assert_int_eq(c, PE_CMAP_VIRIDIS);
	ck_assert_int_eq(pe_cmap_parse("RdBu", &c), 0);
	ck_assert_int_eq(c, PE_CMAP_RDBU);
	ck_assert_int_eq(pe_cmap_parse("rdbu", &c), 0);
	ck_assert_int_eq(c, PE_CMAP_RDBU);
	ck_assert_int_eq(pe_cmap_parse("VIRIDIS", &c), 0);
	ck_assert_int_eq(c, PE_CMAP_VIRIDIS);
	const char *bad[] = {"jet", "", "viridis ", "RdBu_r", "magma", "viridi"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		ck_assert_int_eq(pe_cmap_parse(bad[i], &c), PE_EINVAL);
	ck_assert_int_eq(pe_cmap_parse(NULL, &c), PE_EINVAL);
	ck_assert_str_eq(pe_cmap_name(PE_CMAP_VIRIDIS), "viridis");
	ck_assert_str_eq(pe_cmap_name(PE_CMAP_RDBU), "RdBu");
}
END_TEST

/* Entries checked against matplotlib 3.6.3 (viridis) and ColorBrewer's 11-class RdBu hex codes. */
START_TEST(cmap_tables)
{
	ck_assert_uint_eq(pe_cmap_size(PE_CMAP_VIRIDIS), 256);
	ck_assert_uint_eq(pe_cmap_size(PE_CMAP_RDBU), 251);
	ck_assert(memcmp(pe_cmap_rgb(PE_CMAP_VIRIDIS, 0), VIR_FIRST, 3) == 0);
	ck_assert(memcmp(pe_cmap_rgb(PE_CMAP_VIRIDIS, 128), (uint8_t[]){33, 145, 140}, 3) == 0);
	ck_assert(memcmp(pe_cmap_rgb(PE_CMAP_VIRIDIS, 255), VIR_LAST, 3) == 0);
	static const uint32_t brewer[11] = {0x67001f, 0xb2182b, 0xd6604d, 0xf4a582, 0xfddbc7, 0xf7f7f7,
					    0xd1e5f0, 0x92c5de, 0x4393c3, 0x2166ac, 0x053061};
	for (int k = 0; k < 11; k++) {
		const uint8_t *c = pe_cmap_rgb(PE_CMAP_RDBU, 25 * (size_t)k);
		ck_assert_uint_eq(((uint32_t)c[0] << 16) | ((uint32_t)c[1] << 8) | c[2], brewer[k]);
	}
	/* a fifth of the way from anchor 0 to 1: 103 + 0.2 * 75, 0 + 0.2 * 24, 31 + 0.2 * 12 */
	ck_assert(memcmp(pe_cmap_rgb(PE_CMAP_RDBU, 5), (uint8_t[]){118, 5, 33}, 3) == 0);
	/* the bad colour is far from every colormap entry */
	for (int cm = 0; cm < PE_CMAP_COUNT_; cm++)
		for (size_t i = 0; i < pe_cmap_size(cm); i++) {
			const uint8_t *c = pe_cmap_rgb(cm, i);
			int d = abs(c[0] - BAD[0]) + abs(c[1] - BAD[1]) + abs(c[2] - BAD[2]);
			ck_assert_msg(d >= 60, "%s entry %zu is close to the bad colour", pe_cmap_name(cm), i);
		}
}
END_TEST

START_TEST(cmap_index_rule)
{
	ck_assert_uint_eq(pe_cmap_index(PE_CMAP_VIRIDIS, 0.0), 0);
	ck_assert_uint_eq(pe_cmap_index(PE_CMAP_VIRIDIS, 1.0), 255);
	ck_assert_uint_eq(pe_cmap_index(PE_CMAP_VIRIDIS, 0.5), 128);
	ck_assert_uint_eq(pe_cmap_index(PE_CMAP_VIRIDIS, 0.99), 253);
	ck_assert_uint_eq(pe_cmap_index(PE_CMAP_VIRIDIS, 1.0 / 256), 1);
	ck_assert_uint_eq(pe_cmap_index(PE_CMAP_VIRIDIS, nextafter(1.0 / 256, 0)), 0);
	ck_assert_uint_eq(pe_cmap_index(PE_CMAP_VIRIDIS, -3), 0);
	ck_assert_uint_eq(pe_cmap_index(PE_CMAP_VIRIDIS, 7), 255);
	ck_assert_uint_eq(pe_cmap_index(PE_CMAP_VIRIDIS, NAN), 0);
	ck_assert_uint_eq(pe_cmap_index(PE_CMAP_RDBU, 0.5), 125);
	ck_assert_uint_eq(pe_cmap_index(PE_CMAP_RDBU, 1.0), 250);
	ck_assert_uint_eq(pe_cmap_index(PE_CMAP_RDBU, 0.75), 188);
}
END_TEST

START_TEST(font_glyphs)
{
	static const uint8_t one[7] = {0x04, 0x0c, 0x04, 0x04, 0x04, 0x04, 0x0e};
	static const uint8_t minus[7] = {0, 0, 0, 0x1f, 0, 0, 0};
	ck_assert(memcmp(pe_font_glyph('1'), one, 7) == 0);
	ck_assert(memcmp(pe_font_glyph('-'), minus, 7) == 0);
	ck_assert_ptr_eq(pe_font_glyph('C'), pe_font_glyph('c'));
	ck_assert_ptr_eq(pe_font_glyph('~'), pe_font_glyph('?'));
	ck_assert_ptr_eq(pe_font_glyph('\n'), pe_font_glyph('?'));
	/* every character a %.4g number or the labels use has its own glyph, none blank but space */
	const char *need = "0123456789+-.eacinosdh";
	for (const char *c = need; *c; c++) {
		const uint8_t *g = pe_font_glyph(*c);
		ck_assert(*c == '?' || g != pe_font_glyph('?'));
		int ink = 0;
		for (int r = 0; r < PE_FONT_H; r++) {
			ck_assert_uint_lt(g[r], 1u << PE_FONT_W);
			ink |= g[r];
		}
		ck_assert(ink);
	}
}
END_TEST

/* ---- heatmaps ---- */

/* 3x4 with min -2 at (0,0) and max 6 at (2,3); scale 10. Every cell checked. */
START_TEST(rank2_viridis)
{
	static const float v[12] = {-2, 0, 1, 2, 3, 4, 5, 5.5f, -1, 0.25f, 2.5f, 6};
	size_t dim[] = {3, 4};
	struct shot s;
	shoot(&s, PE_F32, v, 2, dim, opts(PE_CMAP_VIRIDIS, 10, NULL));
	ck_layout(&s.l,
		  LAY(panels, 1),
		  LAY(rows, 3),
		  LAY(cols, 4),
		  LAY(row_step, 1),
		  LAY(col_step, 1),
		  LAY(cell_w, 10),
		  LAY(cell_h, 10),
		  LAY(x0, MARGIN),
		  LAY(y0, MARGIN),
		  LAY(label_h, 0),
		  LAY(bar_x, MARGIN + 40 + 12),
		  LAY(bar_y, MARGIN),
		  LAY(bar_h, BAR_MIN_H), /* 30 px of heatmap, bar at its minimum */
		  LAY(width, MARGIN + 40 + DECOR_W),
		  LAY(height, MARGIN + BAR_MIN_H + MARGIN));
	ck_assert(s.l.lo == -2 && s.l.hi == 6);
	/* position 0 at the top, dimension 0 at the left */
	ck_cell(&s.im, &s.l, 0, 0, 0, VIR_FIRST);
	ck_cell(&s.im, &s.l, 0, 2, 3, VIR_LAST);
	for (size_t r = 0; r < 3; r++)
		for (size_t c = 0; c < 4; c++)
			ck_cell(&s.im, &s.l, 0, r, c, cmap_of(PE_CMAP_VIRIDIS, v[r * 4 + c], -2, 6));
	/* 0 is at t = 0.25: entry 64 */
	ck_cell(&s.im, &s.l, 0, 0, 1, pe_cmap_rgb(PE_CMAP_VIRIDIS, 64));
	/* white margins around the heatmap */
	ck_rgb(&s.im, MARGIN - 1, MARGIN, WHITE);
	ck_rgb(&s.im, MARGIN, MARGIN - 1, WHITE);
	ck_rgb(&s.im, MARGIN + 40, MARGIN, WHITE);
	ck_rgb(&s.im, MARGIN, MARGIN + 30, WHITE);
	ck_bar(&s.im, &s.l, PE_CMAP_VIRIDIS);
	ck_bar_numbers(&s.im, &s.l, "6", "-2", NULL);
	free(s.im.px);
}
END_TEST

/* RdBu is centred on 0: range [-4, 4] although the data are in [-4, 2]. */
START_TEST(rank2_rdbu_centred)
{
	static const double v[6] = {-4, 0, 2, -1, 1, 0.5};
	size_t dim[] = {2, 3};
	struct shot s;
	shoot(&s, PE_F64, v, 2, dim, opts(PE_CMAP_RDBU, 7, NULL));
	ck_assert(s.l.lo == -4 && s.l.hi == 4);
	ck_cell(&s.im, &s.l, 0, 0, 0, RDBU_FIRST);
	ck_cell(&s.im, &s.l, 0, 0, 1, RDBU_MID);
	ck_cell(&s.im, &s.l, 0, 0, 2, pe_cmap_rgb(PE_CMAP_RDBU, 188)); /* 2 -> t = 0.75 */
	for (size_t i = 0; i < 6; i++)
		ck_cell(&s.im, &s.l, 0, i / 3, i % 3, cmap_of(PE_CMAP_RDBU, v[i], -4, 4));
	ck_bar(&s.im, &s.l, PE_CMAP_RDBU);
	ck_bar_numbers(&s.im, &s.l, "4", "-4", "0");
	free(s.im.px);

	/* a positive-only table still puts 0 at the centre, so its minimum is not the first colour */
	static const double w[3] = {1, 2, 3};
	dim[0] = 1;
	s.t = (struct pe_tensor_view){shape_of(2, dim), PE_F64, w};
	render(&s.t, &s.o, &s.im, &s.l);
	ck_assert(s.l.lo == -3 && s.l.hi == 3);
	ck_cell(&s.im, &s.l, 0, 0, 2, RDBU_LAST);
	ck_cell(&s.im, &s.l, 0, 0, 0, pe_cmap_rgb(PE_CMAP_RDBU, 167)); /* t = 4/6 */
	ck_bar_numbers(&s.im, &s.l, "3", "-3", "0");
	free(s.im.px);
}
END_TEST

/* Rank 1 is one row at least 32 px tall; rank 0 one cell. Automatic scale. */
START_TEST(rank1_and_rank0)
{
	static const float v[5] = {0.5f, -0.25f, 1.5f, 0, 1};
	size_t dim[] = {5};
	struct shot s;
	shoot_by_default(&s, PE_F32, v, 1, dim);
	ck_layout(&s.l,
		  LAY(rows, 1),
		  LAY(cols, 5),
		  LAY(cell_w, 32), /* automatic: min(32, 512 / 5) */
		  LAY(cell_h, 32),
		  LAY(width, MARGIN + 5 * 32 + DECOR_W),
		  LAY(height, MARGIN + BAR_MIN_H + MARGIN));
	ck_cell(&s.im, &s.l, 0, 0, 1, VIR_FIRST);
	ck_cell(&s.im, &s.l, 0, 0, 2, VIR_LAST);
	ck_cell(&s.im, &s.l, 0, 0, 3, cmap_of(PE_CMAP_VIRIDIS, 0, -0.25, 1.5));
	ck_bar_numbers(&s.im, &s.l, "1.5", "-0.25", NULL);
	free(s.im.px);

	pe_png_options_init(&s.o);
	s.o.scale = 2; /* a one-row table keeps its 32 px height at any scale */
	render(&s.t, &s.o, &s.im, &s.l);
	ck_layout(&s.l,
		  LAY(cell_w, 2),
		  LAY(cell_h, 32));
	ck_cell(&s.im, &s.l, 0, 0, 2, VIR_LAST);
	free(s.im.px);

	static const float one = 3.25f;
	s.t = (struct pe_tensor_view){shape_of(0, NULL), PE_F32, &one};
	render(&s.t, NULL, &s.im, &s.l);
	ck_assert_uint_eq(s.l.rows * s.l.cols * s.l.panels, 1);
	ck_assert_uint_eq(s.l.cell_w, 32);
	ck_cell(&s.im, &s.l, 0, 0, 0, VIR_FIRST); /* a constant is drawn as t = 0, like matplotlib */
	ck_bar_numbers(&s.im, &s.l, "3.25", "3.25", NULL);
	free(s.im.px);
}
END_TEST

/* Rank 3 [2, 3, 4]: two labelled panels, one shared scale (min in panel 0, max in panel 1). */
START_TEST(rank3_panels)
{
	float v[24];
	for (int i = 0; i < 24; i++)
		v[i] = (float)i * 0.5f - 3; /* -3 .. 8.5 */
	size_t dim[] = {2, 3, 4};
	static const char *const cs[] = {"cos", "sin", NULL};
	struct shot s;
	shoot(&s, PE_F32, v, 3, dim, opts(PE_CMAP_VIRIDIS, 12, cs));
	ck_layout(&s.l,
		  LAY(panels, 2),
		  LAY(rows, 3),
		  LAY(cols, 4),
		  LAY(label_h, STRIP),
		  LAY(y0, MARGIN + STRIP),
		  LAY(panel_pitch, STRIP + 36),
		  LAY(bar_y, s.l.y0),
		  LAY(bar_h, 2 * (STRIP + 36) - STRIP), /* from panel 0's top to panel 1's bottom */
		  LAY(height, MARGIN + 2 * (STRIP + 36) + MARGIN),
		  LAY(width, MARGIN + 48 + DECOR_W));
	for (size_t p = 0; p < 2; p++)
		for (size_t r = 0; r < 3; r++)
			for (size_t c = 0; c < 4; c++)
				ck_cell(&s.im, &s.l, p, r, c, cmap_of(PE_CMAP_VIRIDIS, v[(p * 3 + r) * 4 + c], -3, 8.5));
	ck_cell(&s.im, &s.l, 0, 0, 0, VIR_FIRST);
	ck_cell(&s.im, &s.l, 1, 2, 3, VIR_LAST);
	ck_labels(&s.im, &s.l, "cos", "sin");
	/* the strip between the panels is white where there is no text */
	ck_rgb(&s.im, s.l.x0 + 40, MARGIN + s.l.panel_pitch + 1, WHITE);
	ck_rgb(&s.im, s.l.x0 + 47, s.l.y0 + 36, WHITE);
	ck_bar(&s.im, &s.l, PE_CMAP_VIRIDIS);
	ck_bar_numbers(&s.im, &s.l, "8.5", "-3", NULL);
	free(s.im.px);

	/* no labels: indices; a short list: the rest by index */
	s.o.labels = NULL;
	render(&s.t, &s.o, &s.im, &s.l);
	ck_labels(&s.im, &s.l, "0", "1");
	free(s.im.px);
	static const char *const one[] = {"head", NULL};
	s.o.labels = one;
	render(&s.t, &s.o, &s.im, &s.l);
	ck_labels(&s.im, &s.l, "head", "1");
	free(s.im.px);
}
END_TEST

/* A narrow rank-3 table: the bar moves right so that "cos" is not cut. */
START_TEST(rank3_narrow_labels)
{
	float v[2 * 4 * 2] = {0};
	v[15] = 1;
	size_t dim[] = {2, 4, 2};
	static const char *const cs[] = {"cos", "sin", NULL};
	struct shot s;
	shoot(&s, PE_F32, v, 3, dim, opts(PE_CMAP_VIRIDIS, 3, cs));
	ck_assert_uint_eq(s.l.bar_x, MARGIN + 3 * 12 + 12);
	ck_labels(&s.im, &s.l, "cos", "sin");
	ck_cell(&s.im, &s.l, 1, 3, 1, VIR_LAST);
	ck_rgb(&s.im, s.l.x0 + 6, s.l.y0, WHITE); /* right of the 6 px wide heatmap */
	free(s.im.px);
}
END_TEST

/* NaN, +-Inf and masks (the dtype's lowest finite value) are grey and out of the range. */
START_TEST(non_finite_and_masked)
{
	float v[6] = {NAN, 1, -FLT_MAX, INFINITY, -INFINITY, 3};
	size_t dim[] = {2, 3};
	struct shot s;
	shoot(&s, PE_F32, v, 2, dim, opts(PE_CMAP_VIRIDIS, 4, NULL));
	ck_assert(s.l.lo == 1 && s.l.hi == 3);
	ck_cell(&s.im, &s.l, 0, 0, 0, BAD);
	ck_cell(&s.im, &s.l, 0, 0, 1, VIR_FIRST);
	ck_cell(&s.im, &s.l, 0, 0, 2, BAD);
	ck_cell(&s.im, &s.l, 0, 1, 0, BAD);
	ck_cell(&s.im, &s.l, 0, 1, 1, BAD);
	ck_cell(&s.im, &s.l, 0, 1, 2, VIR_LAST);
	ck_bar_numbers(&s.im, &s.l, "3", "1", NULL);
	free(s.im.px);

	/* f16's lowest is -65504; i32 has no mask: INT32_MIN is a value like any other */
	uint16_t h[3] = {pe_f64_to_f16(-65504.0), pe_f64_to_f16(2), pe_f64_to_f16(-2)};
	size_t d3[] = {3};
	s.t = (struct pe_tensor_view){shape_of(1, d3), PE_F16, h};
	render(&s.t, &s.o, &s.im, &s.l);
	ck_cell(&s.im, &s.l, 0, 0, 0, BAD);
	ck_cell(&s.im, &s.l, 0, 0, 2, VIR_FIRST);
	free(s.im.px);
	int32_t k[3] = {INT32_MIN, 0, INT32_MAX};
	s.t = (struct pe_tensor_view){shape_of(1, d3), PE_I32, k};
	render(&s.t, &s.o, &s.im, &s.l);
	ck_cell(&s.im, &s.l, 0, 0, 0, VIR_FIRST);
	ck_cell(&s.im, &s.l, 0, 0, 1, pe_cmap_rgb(PE_CMAP_VIRIDIS, 128)); /* t = 2^31 / (2^32 - 1) */
	ck_cell(&s.im, &s.l, 0, 0, 2, VIR_LAST);
	ck_bar_numbers(&s.im, &s.l, "2.147e+09", "-2.147e+09", NULL);
	free(s.im.px);

	/* nothing finite: all grey, the range is NaN and printed so */
	float nan4[4] = {NAN, NAN, INFINITY, -FLT_MAX};
	size_t d4[] = {4};
	s.t = (struct pe_tensor_view){shape_of(1, d4), PE_F32, nan4};
	render(&s.t, &s.o, &s.im, &s.l);
	ck_assert(isnan(s.l.lo) && isnan(s.l.hi));
	for (size_t c = 0; c < 4; c++)
		ck_cell(&s.im, &s.l, 0, 0, c, BAD);
	ck_bar_numbers(&s.im, &s.l, "nan", "nan", NULL);
	free(s.im.px);
}
END_TEST

/* Constant tables: viridis draws t = 0, RdBu draws 0 at the centre (and all-zero RdBu too). */
START_TEST(constant_tables)
{
	float v[4] = {0.5f, 0.5f, 0.5f, 0.5f}, z[4] = {0, -0.0f, 0, 0};
	size_t dim[] = {2, 2};
	struct shot s;
	shoot(&s, PE_F32, v, 2, dim, defaults());
	ck_cell(&s.im, &s.l, 0, 1, 1, VIR_FIRST);
	ck_bar_numbers(&s.im, &s.l, "0.5", "0.5", NULL);
	free(s.im.px);
	s.o.cmap = PE_CMAP_RDBU;
	render(&s.t, &s.o, &s.im, &s.l);
	ck_cell(&s.im, &s.l, 0, 1, 1, RDBU_LAST); /* 0.5 is the top of [-0.5, 0.5] */
	free(s.im.px);
	s.t.data = z;
	render(&s.t, &s.o, &s.im, &s.l);
	ck_cell(&s.im, &s.l, 0, 0, 1, RDBU_MID);
	ck_cell(&s.im, &s.l, 0, 1, 1, RDBU_MID);
	ck_bar_numbers(&s.im, &s.l, "0", "0", "0"); /* never "-0" */
	free(s.im.px);
}
END_TEST

/* The same values in every dtype give the same picture, byte for byte. */
START_TEST(every_dtype)
{
	static const double vals[6] = {-3, 0, 1, 2, 5, -1};
	float f32[6];
	double f64[6];
	uint16_t f16[6], bf16[6];
	int32_t i32[6];
	for (int i = 0; i < 6; i++) {
		f32[i] = (float)vals[i];
		f64[i] = vals[i];
		f16[i] = pe_f64_to_f16(vals[i]);
		bf16[i] = pe_f64_to_bf16(vals[i]);
		i32[i] = (int32_t)vals[i];
	}
	const void *data[PE_DTYPE_COUNT_] = {[PE_F32] = f32, [PE_F64] = f64, [PE_F16] = f16,
					     [PE_BF16] = bf16, [PE_I32] = i32};
	size_t dim[] = {2, 3};
	struct pe_buf first;
	pe_buf_init(&first, 1 << 20);
	for (int dt = 0; dt < PE_DTYPE_COUNT_; dt++) {
		struct pe_tensor_view t = {shape_of(2, dim), (enum pe_dtype)dt, data[dt]};
		struct img im;
		struct pe_png_layout l;
		render(&t, NULL, &im, &l);
		ck_assert(l.lo == -3 && l.hi == 5);
		for (size_t i = 0; i < 6; i++)
			ck_cell(&im, &l, 0, i / 3, i % 3, cmap_of(PE_CMAP_VIRIDIS, vals[i], -3, 5));
		ck_cell(&im, &l, 0, 0, 0, VIR_FIRST);
		ck_cell(&im, &l, 0, 1, 1, VIR_LAST);
		free(im.px);
		struct pe_buf b;
		pe_buf_init(&b, 1 << 20);
		ck_assert_int_eq(pe_png_write(&b, &t, NULL, NULL), 0);
		if (dt == 0)
			ck_assert_int_eq(pe_buf_append(&first, b.data, b.len), 0);
		else
			ck_assert_msg(b.len == first.len && memcmp(b.data, first.data, b.len) == 0,
				      "%s differs from f32", pe_dtype_name(dt));
		pe_buf_destroy(&b);
	}
	pe_buf_destroy(&first);
}
END_TEST

/* Scale: automatic for small and large tables, explicit, and lowered to fit 4096 px. */
START_TEST(scales)
{
	size_t dim[2] = {1, 1};
	struct pe_png_layout l;
	struct pe_png_options o;
	pe_png_options_init(&o);
	float *v = calloc(5000 * 5000, sizeof *v);
	ck_assert_ptr_nonnull(v);
	struct pe_tensor_view t = {shape_of(2, dim), PE_F32, v};
	struct {
		size_t r, c;
		int scale;
		size_t want_scale, want_rs, want_cs;
	} cases[] = {
		{128, 64, 0, 4, 1, 1},      /* automatic: 512 / 128 */
		{2, 3, 0, 32, 1, 1},        /* automatic, capped at 32 */
		{512, 768, 0, 1, 1, 1},     /* automatic: one pixel per cell */
		{128, 64, 9, 9, 1, 1},      /* explicit */
		{100, 100, 100, 39, 1, 1},  /* explicit, lowered: (4096 - 8 - 174) / 100 = 39 */
		{5000, 5000, 3, 1, 2, 2},   /* downsampled by 2 both ways */
		{4080, 3914, 1, 1, 1, 1},   /* the largest table drawn whole */
		{4081, 3915, 1, 1, 2, 2},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		dim[0] = cases[i].r;
		dim[1] = cases[i].c;
		t.shape = shape_of(2, dim);
		o.scale = cases[i].scale;
		ck_assert_int_eq(pe_png_plan(&t, &o, &l, NULL), 0);
		ck_assert_msg(l.cell_w == cases[i].want_scale && l.row_step == cases[i].want_rs &&
				      l.col_step == cases[i].want_cs,
			      "case %zu: scale %zu steps %zu,%zu", i, l.cell_w, l.row_step, l.col_step);
		ck_assert_uint_le(l.width, PE_PNG_MAX_SIDE);
		ck_assert_uint_le(l.height, PE_PNG_MAX_SIDE);
	}
	ck_layout(&l,
		  LAY(rows, 2041),
		  LAY(cols, 1958));
	free(v);
}
END_TEST

/* Downsampling averages blocks: rows 3k..3k+2 of v(r) = r show 3k + 1; the last block is row
 * 9999 alone. Also the image at the limit decodes at its planned size. */
START_TEST(downsample_averages)
{
	size_t n = 10000;
	float *v = malloc(n * sizeof *v);
	for (size_t r = 0; r < n; r++)
		v[r] = (float)r;
	size_t dim[] = {n, 1};
	struct shot s;
	shoot(&s, PE_F32, v, 2, dim, opts(PE_CMAP_VIRIDIS, 1, NULL));
	ck_layout(&s.l,
		  LAY(row_step, 3),
		  LAY(rows, 3334),
		  LAY(height, MARGIN + 3334 + MARGIN));
	for (size_t k = 0; k < 3333; k += 111)
		ck_cell(&s.im, &s.l, 0, k, 0, cmap_of(PE_CMAP_VIRIDIS, 3.0 * k + 1, 0, 9999));
	ck_cell(&s.im, &s.l, 0, 0, 0, pe_cmap_rgb(PE_CMAP_VIRIDIS, 0)); /* mean 1 */
	ck_cell(&s.im, &s.l, 0, 3333, 0, VIR_LAST);                     /* 9999 alone */
	free(s.im.px);

	/* columns: NaN in a block is left out of its average; an all-NaN block is grey */
	float w[2 * 8000];
	for (size_t c = 0; c < 8000; c++)
		w[c] = w[8000 + c] = (float)(c % 3);
	w[0] = NAN;           /* block 0 = {NaN, 1, 2}: mean 1.5 */
	w[3] = w[4] = w[5] = NAN;
	w[8000 + 3] = w[8000 + 4] = w[8000 + 5] = NAN; /* block 1 has nothing finite */
	size_t d2[] = {2, 8000};
	s.t = (struct pe_tensor_view){shape_of(2, d2), PE_F32, w};
	render(&s.t, &s.o, &s.im, &s.l);
	ck_layout(&s.l,
		  LAY(col_step, 3),
		  LAY(row_step, 1),
		  LAY(cols, 2667));
	ck_cell(&s.im, &s.l, 0, 0, 0, pe_cmap_rgb(PE_CMAP_VIRIDIS, 192)); /* {NaN, 1, 2}: mean 1.5 */
	ck_cell(&s.im, &s.l, 0, 1, 0, pe_cmap_rgb(PE_CMAP_VIRIDIS, 128)); /* {0,1,2}: mean 1 */
	ck_cell(&s.im, &s.l, 0, 0, 1, BAD);
	ck_cell(&s.im, &s.l, 0, 1, 1, BAD);
	ck_cell(&s.im, &s.l, 0, 0, 2666, pe_cmap_rgb(PE_CMAP_VIRIDIS, 64)); /* columns 7998, 7999: {0, 1} */
	free(s.im.px);
	free(v);
}
END_TEST

/* f64 extremes: hi - lo overflows a double, the halves do not. (-DBL_MAX itself is f64's mask.) */
START_TEST(extreme_range)
{
	double x = nextafter(DBL_MAX, 0), v[3] = {-x, 0, x};
	size_t dim[] = {3};
	struct shot s;
	shoot_by_default(&s, PE_F64, v, 1, dim);
	ck_cell(&s.im, &s.l, 0, 0, 0, VIR_FIRST);
	ck_cell(&s.im, &s.l, 0, 0, 1, pe_cmap_rgb(PE_CMAP_VIRIDIS, 128));
	ck_cell(&s.im, &s.l, 0, 0, 2, VIR_LAST);
	ck_bar_numbers(&s.im, &s.l, "1.798e+308", "-1.798e+308", NULL);
	free(s.im.px);
}
END_TEST

START_TEST(errors)
{
	float v[16] = {0};
	struct pe_buf b;
	struct pe_err err;
	struct pe_png_options o;
	pe_png_options_init(&o);
	pe_buf_init(&b, 1 << 20);
	ck_assert_int_eq(pe_buf_append(&b, "keep", 4), 0);

	size_t d4[] = {1, 2, 2, 4};
	struct pe_tensor_view t = {shape_of(4, d4), PE_F32, v};
	ck_assert_int_eq(pe_png_write(&b, &t, &o, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "format");
	ck_assert_ptr_nonnull(strstr(err.detail, "rank 4"));

	size_t d0[] = {0, 4};
	t = (struct pe_tensor_view){shape_of(2, d0), PE_F32, v};
	ck_assert_int_eq(pe_png_write(&b, &t, &o, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "format");

	/* 300 panels need 300 label strips: more than 4096 px */
	float *many = calloc(300, sizeof *many);
	size_t d3[] = {300, 1, 1};
	t = (struct pe_tensor_view){shape_of(3, d3), PE_F32, many};
	ck_assert_int_eq(pe_png_write(&b, &t, &o, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "format");
	d3[0] = 194; /* (4096 - 16) / 21 = 194 fits */
	t = (struct pe_tensor_view){shape_of(3, d3), PE_F32, many};
	struct pe_png_layout l;
	ck_assert_int_eq(pe_png_plan(&t, &o, &l, &err), 0);
	ck_assert_uint_le(l.height, PE_PNG_MAX_SIDE);
	free(many);

	size_t d2[] = {4, 4};
	t = (struct pe_tensor_view){shape_of(2, d2), PE_F32, v};
	o.cmap = (enum pe_cmap)7;
	ck_assert_int_eq(pe_png_write(&b, &t, &o, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "cmap");
	o.cmap = PE_CMAP_VIRIDIS;
	o.scale = -1;
	ck_assert_int_eq(pe_png_write(&b, &t, &o, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "scale");
	o.scale = PE_PNG_MAX_SCALE + 1;
	ck_assert_int_eq(pe_png_write(&b, &t, &o, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "scale");
	o.scale = PE_PNG_MAX_SCALE; /* accepted, lowered to fit */
	ck_assert_int_eq(pe_png_plan(&t, &o, &l, &err), 0);
	ck_assert_uint_eq(l.cell_w, (4096 - 8 - 174) / 4);

	ck_assert_uint_eq(b.len, 4); /* nothing written by the failures */
	ck_assert(memcmp(b.data, "keep", 4) == 0);
	pe_buf_destroy(&b);
}
END_TEST

/* The buffer's limit: one byte short fails with PE_ETOOBIG and leaves the buffer as it was;
 * exactly enough succeeds with the same bytes. */
START_TEST(buffer_limit)
{
	float v[64];
	for (int i = 0; i < 64; i++)
		v[i] = sinf((float)i);
	size_t dim[] = {8, 8};
	struct pe_tensor_view t = {shape_of(2, dim), PE_F32, v};
	struct pe_buf full;
	pe_buf_init(&full, 1 << 20);
	ck_assert_int_eq(pe_png_write(&full, &t, NULL, NULL), 0);
	size_t sizes[] = {0, 8, 100, full.len - 1, full.len, full.len + 1};
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		struct pe_buf b;
		struct pe_err err;
		pe_buf_init(&b, sizes[i] + 2);
		ck_assert_int_eq(pe_buf_append(&b, "ab", 2), 0);
		int rc = pe_png_write(&b, &t, NULL, &err);
		if (sizes[i] >= full.len) {
			ck_assert_int_eq(rc, 0);
			ck_assert(b.len == full.len + 2 && memcmp(b.data + 2, full.data, full.len) == 0);
		} else {
			ck_assert_int_eq(rc, PE_ETOOBIG);
			ck_assert_uint_eq(b.len, 2);
			ck_assert(memcmp(b.data, "ab", 2) == 0);
		}
		pe_buf_destroy(&b);
	}
	pe_buf_destroy(&full);
}
END_TEST

/* A 512x768 f32 sinusoid: the same bytes every time and the picture's size. Its speed is measured
 * by make bench, never asserted here. */
START_TEST(big_table_deterministic)
{
	size_t R = 512, C = 768;
	float *v = malloc(R * C * sizeof *v);
	for (size_t p = 0; p < R; p++)
		for (size_t i = 0; i < C; i++) {
			double w = pow(10000.0, -(double)(i & ~(size_t)1) / (double)C);
			v[p * C + i] = (float)(i % 2 ? cos((double)p * w) : sin((double)p * w));
		}
	size_t dim[] = {R, C};
	struct pe_tensor_view t = {shape_of(2, dim), PE_F32, v};
	struct pe_buf a, b;
	pe_buf_init(&a, 16 << 20);
	pe_buf_init(&b, 16 << 20);
	ck_assert_int_eq(pe_png_write(&a, &t, NULL, NULL), 0);
	ck_assert_int_eq(pe_png_write(&b, &t, NULL, NULL), 0);
	ck_assert(a.len == b.len && memcmp(a.data, b.data, a.len) == 0);
	struct img im;
	decode(&a, &im);
	ck_assert_uint_eq(im.w, MARGIN + 768 + DECOR_W);
	ck_assert_uint_eq(im.h, MARGIN + 512 + MARGIN);
	free(im.px);
	pe_buf_destroy(&a);
	pe_buf_destroy(&b);
	free(v);
}
END_TEST

static Suite *png_suite(void)
{
	Suite *s = suite_create("png");
	TCase *tc = tcase_create("png");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, cmap_parse_names);
	tcase_add_test(tc, cmap_tables);
	tcase_add_test(tc, cmap_index_rule);
	tcase_add_test(tc, font_glyphs);
	tcase_add_test(tc, rank2_viridis);
	tcase_add_test(tc, rank2_rdbu_centred);
	tcase_add_test(tc, rank1_and_rank0);
	tcase_add_test(tc, rank3_panels);
	tcase_add_test(tc, rank3_narrow_labels);
	tcase_add_test(tc, non_finite_and_masked);
	tcase_add_test(tc, constant_tables);
	tcase_add_test(tc, every_dtype);
	tcase_add_test(tc, scales);
	tcase_add_test(tc, downsample_averages);
	tcase_add_test(tc, extreme_range);
	tcase_add_test(tc, errors);
	tcase_add_test(tc, buffer_limit);
	tcase_add_test(tc, big_table_deterministic);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(png_suite)
