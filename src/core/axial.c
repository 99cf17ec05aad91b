/* Axial RoPE's presets, token grids, position ids and frequencies (axial.h).
 *
 * Position ids per preset, in the model's token order (T, H, W: the token grid after patching):
 *   flux          text tokens at (0, 0, 0), then the image row-major at (0, row, col)
 *                 (the pipeline's text_ids and _prepare_latent_image_ids, text first in the joint
 *                 sequence).
 *   hunyuanvideo, wan   (frame, row, col), frames outermost (meshgrid "ij" / the expand of the
 *                 per-axis tables); no text positions. Wan's tables hold positions below 1024.
 *   cogvideox     (frame, y_row, x_col) with y, x on get_3d_rotary_pos_embed's linspace grid over
 *                 the crop region get_resize_crop_region_for_grid places the grid in (base_width x
 *                 base_height, 45 x 30 for CogVideoX-5B); frames 0 .. T-1.
 *   qwenimage     text first, every axis at m + j (m = max(H/2, W/2) with scale_rope, max(H, W)
 *                 without), then the image at (frame, row - (H - H/2), col - (W - W/2)) with
 *                 scale_rope (rows and columns centred on zero), (frame, row, col) without.
 * compat=exact positions are the float64 values (NumPy's linspace for CogVideoX); compat=hf the
 * float32 values the model's tensors hold (torch.linspace's float32 arithmetic, emulated below).
 *
 * Frequencies: axis a's k-th is 1 / theta^(2k / axes_dim[a]), in float64 (exact, and hf for FLUX
 * and Wan, whose float32 positions and float64 frequencies give float64 angles, rounded to float
 * after cos/sin), or in PyTorch's float32 for HunyuanVideo, CogVideoX and Qwen-Image
 * (float(2k)/float(d), torch.pow through pe_torch_powf, 1/x, float angle = float(pos) * freq),
 * whose cos/sin PyTorch takes of a whole tensor 8 lanes at a time (pe_axial_row_torch), except
 * Qwen-Image's torch.polar, element by element: std::cos and std::sin of each float angle, which
 * are libm's cosf and sinf (pe_axial_row calls them; correctly rounded values differed from
 * torch.polar's in about 0.4% of the elements). */
#include "core/axial.h"
#include "core/kernels.h"
#include "core/tables.h"
#include "core/torchmath.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const pe_axial_preset_names[] = {"none", "flux", "hunyuanvideo", "wan", "cogvideox", "qwenimage", NULL};

static const struct pe_axial_preset presets[] = {
	[PE_AXIAL_FLUX] = {"flux", 3, "16,56,56", 10000, 0, 1, 0, 0},
	[PE_AXIAL_HUNYUANVIDEO] = {"hunyuanvideo", 3, "16,56,56", 256, 1, 0, 1, 0},
	[PE_AXIAL_WAN] = {"wan", 3, "44,42,42", 10000, 0, 0, 1, 1023},
	[PE_AXIAL_COGVIDEOX] = {"cogvideox", 3, "16,24,24", 10000, 1, 0, 1, 0},
	[PE_AXIAL_QWENIMAGE] = {"qwenimage", 3, "16,56,56", 10000, 1, 1, 1, 4095},
};

const struct pe_axial_preset *pe_axial_preset(int id)
{
	return id > PE_AXIAL_NONE && id <= PE_AXIAL_QWENIMAGE ? &presets[id] : NULL;
}

int pe_axial_preset_of_class(const char *class_name)
{
	static const char *const classes[] = {
		[PE_AXIAL_FLUX] = "FluxTransformer2DModel",
		[PE_AXIAL_HUNYUANVIDEO] = "HunyuanVideoTransformer3DModel",
		[PE_AXIAL_WAN] = "WanTransformer3DModel",
		[PE_AXIAL_COGVIDEOX] = "CogVideoXTransformer3DModel",
		[PE_AXIAL_QWENIMAGE] = "QwenImageTransformer2DModel",
	};
	for (int i = PE_AXIAL_FLUX; class_name && i <= PE_AXIAL_QWENIMAGE; i++)
		if (!strcmp(class_name, classes[i]))
			return i;
	return PE_AXIAL_NONE;
}

int pe_axial_head_split(int preset, int64_t head_dim, int64_t axes[3])
{
	int64_t d = head_dim;
	if (preset == PE_AXIAL_WAN) {
		axes[1] = axes[2] = 2 * (d / 6);
		axes[0] = d - axes[1] - axes[2];
	} else if (preset == PE_AXIAL_COGVIDEOX) {
		axes[0] = d / 4;
		axes[1] = axes[2] = d / 8 * 3;
	} else {
		return PE_EINVAL;
	}
	for (int a = 0; a < 3; a++)
		if (axes[a] < 2 || axes[a] % 2)
			return PE_EINVAL;
	return 0;
}

/* ---- the grid ---- */

/* One side: decimal digits up to the next 'x' or the end, 1 .. PE_AXIAL_MAX_SIDE. */
static int side(const char **s, int64_t *v)
{
	int64_t n = 0;
	const char *c = *s;
	if (*c < '0' || *c > '9')
		return -1;
	for (; *c >= '0' && *c <= '9'; c++)
		if ((n = n * 10 + (*c - '0')) > PE_AXIAL_MAX_SIDE)
			return -1;
	*s = c;
	*v = n;
	return n >= 1 ? 0 : -1;
}

int pe_axial_grid_parse(const char *text, struct pe_axial_grid *g, struct pe_err *err)
{
	int64_t v[3];
	int n = 0;
	const char *s = text ? text : "";
	for (;;) {
		if (n == 3 || side(&s, &v[n]) != 0)
			return pe_err_set(err, PE_EINVAL, "grid",
					  "grid must be HxW or TxHxW, each side 1 .. %d (decimal digits)", PE_AXIAL_MAX_SIDE);
		n++;
		if (*s == 0)
			break;
		if (*s++ != 'x')
			return pe_err_set(err, PE_EINVAL, "grid", "grid must be HxW or TxHxW ('x' between sides)");
	}
	if (n < 2)
		return pe_err_set(err, PE_EINVAL, "grid", "grid must be HxW or TxHxW, got one side");
	g->rank = n;
	g->t = n == 3 ? v[0] : 1;
	g->h = v[n - 2];
	g->w = v[n - 1];
	if ((double)g->t * (double)g->h * (double)g->w > PE_AXIAL_MAX_TOKENS)
		return pe_err_set(err, PE_EINVAL, "grid", "grid holds more than %u tokens", PE_AXIAL_MAX_TOKENS);
	return 0;
}

int pe_axial_grid_format(const struct pe_axial_grid *g, char *buf, size_t cap)
{
	int n = g->rank == 3 ? snprintf(buf, cap, "%lldx%lldx%lld", (long long)g->t, (long long)g->h, (long long)g->w)
			     : snprintf(buf, cap, "%lldx%lld", (long long)g->h, (long long)g->w);
	return n < 0 || (size_t)n >= cap ? -1 : n;
}

int pe_axial_query(int preset, const struct pe_axial_grid *g, int64_t text, char *buf, size_t cap)
{
	char grid[64];
	const struct pe_axial_preset *pr = pe_axial_preset(preset);
	if (!pr || pe_axial_grid_format(g, grid, sizeof grid) < 0)
		return -1;
	int n = pr->text && text ? snprintf(buf, cap, "preset=%s&grid=%s&text_tokens=%lld", pr->name, grid, (long long)text)
				 : snprintf(buf, cap, "preset=%s&grid=%s", pr->name, grid);
	return n < 0 || (size_t)n >= cap ? -1 : n;
}

/* ---- positions ---- */

size_t pe_axial_tokens(const struct pe_axial_layout *l)
{
	const struct pe_axial_preset *pr = pe_axial_preset(l->preset);
	return (size_t)(l->grid.t * l->grid.h * l->grid.w) + (pr && pr->text ? (size_t)l->text : 0);
}

/* NumPy's float64 linspace(a, b, n): i * step + a, the last exactly b. */
static double linspace_f64(double a, double b, int64_t n, int64_t i)
{
	if (n == 1)
		return a;
	return i == n - 1 ? b : (double)i * ((b - a) / (double)(n - 1)) + a;
}

/* torch.linspace(a, b, n, dtype=float32) on the CPU: step = (float(b) - float(a)) / (n - 1) in
 * float; blocks of 16 go through 8-lane vectors whose lane j is base + j * step (two roundings),
 * base taken from the vector's first index k, a + step * k below n / 2, b - step * (n - k - 1)
 * after, each one fused multiply-add as PyTorch's compiled kernel computes it; the remainder is
 * that fused expression per index (with the product and the sum rounded apart, 7 of the 34 row
 * ids of a 34-row CogVideoX grid are 1 ulp off torch's, and the table hundreds of ulps). The
 * Makefile turns contraction off (-ffp-contract=off), so the lanes' sum stays two roundings. */
static float linspace_f32(double a, double b, int64_t n, int64_t i)
{
	float fa = (float)a, fb = (float)b;
	if (n == 1)
		return fa;
	float step = (fb - fa) / (float)(n - 1);
	int64_t half = n / 2, vec_end = n / 16 * 16, base_i = i < vec_end ? i / 8 * 8 : i;
	float base = base_i < half ? fmaf(step, (float)base_i, fa) : fmaf(-step, (float)(n - base_i - 1), fb);
	return base_i == i ? base : base + (float)(i - base_i) * step;
}

/* CogVideoX's crop region of an h x w grid inside tw x th (get_resize_crop_region_for_grid; Python's
 * round is half to even, as rint). */
static void crop_region(int64_t h, int64_t w, int64_t tw, int64_t th, double *top, double *left, double *bottom,
			double *right)
{
	double rh, rw;
	if ((double)h / (double)w > (double)th / (double)tw) {
		rh = (double)th;
		rw = rint((double)th / (double)h * (double)w);
	} else {
		rw = (double)tw;
		rh = rint((double)tw / (double)w * (double)h);
	}
	*top = rint(((double)th - rh) / 2.0);
	*left = rint(((double)tw - rw) / 2.0);
	*bottom = *top + rh;
	*right = *left + rw;
}

/* CogVideoX's coordinate i of n on the axis from start to stop * (n - 1) / n. */
static double cog_coord(const struct pe_axial_layout *l, double start, double stop, int64_t n, int64_t i)
{
	double end = stop * (double)(n - 1) / (double)n;
	return l->hf ? (double)linspace_f32(start, end, n, i) : linspace_f64(start, end, n, i);
}

/* One image token k (grid order) of l into o[3]. */
static void image_token(const struct pe_axial_layout *l, const double crop[4], int64_t k, double *o)
{
	int64_t h = l->grid.h, w = l->grid.w, f = k / (h * w), r = k / w % h, c = k % w;
	o[0] = (double)f;
	o[1] = (double)r;
	o[2] = (double)c;
	if (l->preset == PE_AXIAL_FLUX)
		o[0] = 0;
	if (l->preset == PE_AXIAL_COGVIDEOX) {
		o[1] = cog_coord(l, crop[0], crop[2], h, r);
		o[2] = cog_coord(l, crop[1], crop[3], w, c);
	}
	if (l->preset == PE_AXIAL_QWENIMAGE && l->scale_rope) {
		o[1] = (double)(r - (h - h / 2));
		o[2] = (double)(c - (w - w / 2));
	}
}

void pe_axial_positions(const struct pe_axial_layout *l, size_t first, size_t count, double *out)
{
	const struct pe_axial_preset *pr = pe_axial_preset(l->preset);
	int64_t text = pr->text ? l->text : 0, h = l->grid.h, w = l->grid.w;
	int64_t m = l->scale_rope ? (h / 2 > w / 2 ? h / 2 : w / 2) : (h > w ? h : w); /* qwenimage's text start */
	double crop[4] = {0, 0, 0, 0};
	if (l->preset == PE_AXIAL_COGVIDEOX)
		crop_region(h, w, l->base_width, l->base_height, &crop[0], &crop[1], &crop[2], &crop[3]);
	for (size_t i = 0; i < count; i++) {
		int64_t k = (int64_t)(first + i);
		double *o = out + 3 * i;
		if (k < text)
			o[0] = o[1] = o[2] = l->preset == PE_AXIAL_QWENIMAGE ? (double)(m + k) : 0;
		else
			image_token(l, crop, k - text, o);
	}
}

/* ---- frequencies and rows ---- */

int pe_axial_ids_check(const double *ids, size_t n, size_t naxes, const char *who, struct pe_err *err)
{
	for (size_t i = 0; i < n * naxes; i++)
		if (!(fabs(ids[i]) <= PE_AXIAL_MAX_ABS))
			return pe_err_set(err, PE_EBODY, who, "%s: id [%zu, %zu] is %g; ids are finite, |id| <= 2^52", who,
					  i / naxes, i % naxes, ids[i]);
	return 0;
}

int pe_axial_ids_from(const void *data, enum pe_dtype dt, int wide, size_t n, size_t naxes, double *out,
		      const char *who, struct pe_err *err)
{
	size_t esz = dt == PE_I32 && wide ? 8 : pe_dtype_size(dt);
	const char *b = data;
	for (size_t i = 0; i < n * naxes; i++, b += esz) {
		float f;
		uint16_t u;
		int32_t i32;
		int64_t i64;
		switch (dt) {
		case PE_F64:
			memcpy(&out[i], b, 8);
			break;
		case PE_F32:
			memcpy(&f, b, 4);
			out[i] = f;
			break;
		case PE_F16:
		case PE_BF16:
			memcpy(&u, b, 2);
			out[i] = dt == PE_F16 ? pe_f16_to_f32(u) : pe_bf16_to_f32(u);
			break;
		default:
			if (wide)
				memcpy(&i64, b, 8);
			else
				memcpy(&i32, b, 4), i64 = i32;
			out[i] = (double)i64;
		}
	}
	return pe_axial_ids_check(out, n, naxes, who, err);
}

/* The k-th of h frequencies of a band of width d. */
static double freq(const struct pe_axial_rope *r, size_t d, size_t k)
{
	if (!r->freqs_f32)
		return 1.0 / pow(r->theta, (double)(2 * k) / (double)d);
	float e = (float)(2 * k) / (float)d;
	return (double)(1.0f / pe_torch_powf((float)r->theta, e, k, d / 2));
}

int pe_axial_rope_init(struct pe_axial_rope *r, const struct pe_params *p)
{
	size_t n;
	const double *ad = pe_param_list(p, "axes_dim", &n);
	int has_theta = pe_param_index(p->def, "theta") >= 0;
	memset(r, 0, sizeof *r);
	r->naxes = n;
	for (size_t a = 0; a < n; a++)
		r->dim += r->axes_dim[a] = (size_t)ad[a];
	r->theta = has_theta ? pe_param_real(p, "theta") : pe_param_real(p, "base");
	r->hf = pe_param_enum(p, "compat") == 1;
	r->freqs_f32 = r->hf && pe_param_index(p->def, "freqs_dtype") >= 0 && pe_param_enum(p, "freqs_dtype") == 1;
	r->interleaved = pe_param_enum(p, "layout") == 1;
	int polar = pe_param_index(p->def, "preset") >= 0 && pe_param_enum(p, "preset") == PE_AXIAL_QWENIMAGE;
	r->torch_vec = r->freqs_f32 && !polar;
	r->polar = r->freqs_f32 && polar;
	if (!(r->freq = malloc(sizeof(double) * (r->dim ? 3 * r->dim : 1))))
		return PE_ENOMEM;
	for (size_t a = 0, off = 0; a < n; off += r->axes_dim[a] / 2, a++)
		for (size_t k = 0; k < r->axes_dim[a] / 2; k++)
			r->freq[off + k] = freq(r, r->axes_dim[a], k);
	return 0;
}

void pe_axial_rope_destroy(struct pe_axial_rope *r)
{
	free(r->freq);
	r->freq = NULL;
}

/* The angle of frequency f at coordinate x in the mode's arithmetic. */
static double angle(const struct pe_axial_rope *r, double x, double f)
{
	if (!r->hf)
		return x * f;
	if (!r->freqs_f32)
		return (double)(float)x * f;
	return (double)((float)x * (float)f);
}

/* The rows cs and sn from each frequency's cos c[] and sin s[], in the layout. */
static void write_row(const struct pe_axial_rope *r, const double *c, const double *s, double *cs, double *sn)
{
	for (size_t a = 0, off = 0; a < r->naxes; off += r->axes_dim[a] / 2, a++) {
		size_t ha = r->axes_dim[a] / 2;
		for (size_t k = 0; k < ha; k++) {
			double cv = r->hf ? (double)(float)c[off + k] : c[off + k];
			double sv = r->hf ? (double)(float)s[off + k] : s[off + k];
			size_t i0 = r->interleaved ? 2 * (off + k) : 2 * off + k, i1 = r->interleaved ? i0 + 1 : i0 + ha;
			cs[i0] = cs[i1] = cv;
			sn[i0] = sn[i1] = sv;
		}
	}
}

void pe_axial_row(const struct pe_axial_rope *r, const double *ids, double *cs, double *sn)
{
	size_t h = r->dim / 2;
	double *t = r->freq + h, *s = t + h, *c = s + h; /* scratch after the frequencies (init) */
	for (size_t a = 0, off = 0; a < r->naxes; off += r->axes_dim[a] / 2, a++)
		for (size_t k = 0; k < r->axes_dim[a] / 2; k++)
			t[off + k] = angle(r, ids[a], r->freq[off + k]);
	if (r->polar)
		pe_libm_sincosf(t, s, c, h);
	else
		pe_kernels()->sincos_f64(t, s, c, h);
	write_row(r, c, s, cs, sn);
}

/* Axis a's band: the groups of 8 of its [rows, ha] tensor that hold this row's elements, each
 * group's angles float(id of its row) * freq, zeros past the tensor's end. */
static void torch_band(const struct pe_axial_rope *r, size_t a, size_t off, const struct pe_axial_src *src, double *c,
		       double *s)
{
	size_t ha = r->axes_dim[a] / 2, first = src->row * ha, end = first + ha, total = src->rows * ha;
	for (size_t g = first / 8 * 8; g < end; g += 8) {
		float x[8] = {0}, oc[8], os[8];
		for (size_t j = 0; j < 8 && g + j < total; j++)
			x[j] = (float)src->pos(src->ctx, a, (g + j) / ha) * (float)r->freq[off + (g + j) % ha];
		pe_torch_sincosf8(x, os, oc);
		for (size_t j = 0; j < 8; j++)
			if (g + j >= first && g + j < end) {
				c[off + g + j - first] = oc[j];
				s[off + g + j - first] = os[j];
			}
	}
}

void pe_axial_row_torch(const struct pe_axial_rope *r, const struct pe_axial_src *src, double *cs, double *sn)
{
	size_t h = r->dim / 2;
	double *s = r->freq + 2 * h, *c = s + h;
	for (size_t a = 0, off = 0; a < r->naxes; off += r->axes_dim[a] / 2, a++)
		torch_band(r, a, off, &src[a], c, s);
	write_row(r, c, s, cs, sn);
}

int pe_axial_axes_check(const struct pe_params *p, size_t naxes, struct pe_err *err)
{
	size_t n;
	const double *ad = pe_param_list(p, "axes_dim", &n);
	double sum = 0;
	if (!ad || n == 0)
		return pe_err_set(err, PE_EINVAL, "axes_dim", "axes_dim is required without a preset");
	if (n > PE_AXIAL_MAX_AXES)
		return pe_err_set(err, PE_EINVAL, "axes_dim", "axes_dim has %zu entries; at most %d axes", n, PE_AXIAL_MAX_AXES);
	if (naxes && n != naxes)
		return pe_err_set(err, PE_EINVAL, "axes_dim", "axes_dim has %zu entries for ids of %zu axes", n, naxes);
	for (size_t a = 0; a < n; a++) {
		if (ad[a] < 2 || (int64_t)ad[a] % 2)
			return pe_err_set(err, PE_EINVAL, "axes_dim", "axes_dim entry %zu is %g; each must be even and >= 2", a,
					  ad[a]);
		sum += ad[a];
	}
	if (sum > PE_MAX_DIM)
		return pe_err_set(err, PE_EINVAL, "axes_dim", "axes_dim sums to %g; at most %g", sum, PE_MAX_DIM);
	return 0;
}
