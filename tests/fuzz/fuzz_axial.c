/* libFuzzer target: axial RoPE's grid parser (pe_axial_grid_parse, src/core/axial.c) and its ids
 * bodies (an npy [S, n_axes] through pe_npy_parse_index and pe_axial_ids_from, as POST
 * /v1/rope/axial and rope/apply's positions part read them), and what each builds.
 *
 * Input: one byte of options, then the grid text (a NUL-terminated heap copy, so ASan sees any
 * overread) or the ids body. Options bit 0: grid (0) or ids (1); bits 1..3: the preset; bit 4:
 * compat=hf. A refused grid must be PE_EINVAL naming "grid"; an accepted one holds at most
 * PE_AXIAL_MAX_TOKENS tokens and its canonical text parses back to the same grid; a grid of up to
 * 2^14 tokens gives finite ids, the image's within the grid's span. Refused ids must name
 * "body"; accepted ids of up to 2^12 tokens give a finite table within [-1, 1]. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/axial.h"
#include "posenc/tensor.h"

#define FAIL(...)                                            \
	do {                                                 \
		fprintf(stderr, "fuzz_axial: " __VA_ARGS__); \
		fputc('\n', stderr);                         \
		abort();                                     \
	} while (0)

static void check_ids(const struct pe_axial_layout *l)
{
	size_t n = pe_axial_tokens(l);
	double *ids = malloc(3 * n * sizeof *ids), span = (double)(l->grid.t + l->grid.h + l->grid.w + l->text);
	if (!ids)
		abort();
	pe_axial_positions(l, 0, n, ids);
	for (size_t i = 0; i < 3 * n; i++)
		if (!(fabs(ids[i]) <= span + (double)l->base_width + (double)l->base_height))
			FAIL("id %zu is %g for grid %lldx%lldx%lld", i, ids[i], (long long)l->grid.t, (long long)l->grid.h,
			     (long long)l->grid.w);
	free(ids);
}

static void grid(const char *text, int preset, int hf)
{
	struct pe_axial_grid g, back;
	struct pe_err err = {0};
	char canon[64];
	int rc = pe_axial_grid_parse(text, &g, &err);
	if (rc != 0) {
		if (rc != PE_EINVAL || strcmp(err.param, "grid") || !strstr(err.detail, "grid"))
			FAIL("failure %d with err {'%s', '%s'}", rc, err.param, err.detail);
		return;
	}
	if (g.t < 1 || g.h < 1 || g.w < 1 || g.t * g.h * g.w > (int64_t)PE_AXIAL_MAX_TOKENS)
		FAIL("accepted %lldx%lldx%lld", (long long)g.t, (long long)g.h, (long long)g.w);
	if (pe_axial_grid_format(&g, canon, sizeof canon) < 0 || pe_axial_grid_parse(canon, &back, &err) != 0 ||
	    back.rank != g.rank || back.t != g.t || back.h != g.h || back.w != g.w)
		FAIL("'%s' does not parse back to the same grid", canon);
	struct pe_axial_layout l = {.preset = preset, .grid = g, .text = 3, .base_width = 45, .base_height = 30,
				    .scale_rope = preset == PE_AXIAL_QWENIMAGE, .hf = hf};
	if (pe_axial_tokens(&l) <= (1u << 14))
		check_ids(&l);
}

static void body(const uint8_t *data, size_t size, int preset, int hf)
{
	struct pe_tensor_view v;
	struct pe_err err = {0};
	int wide = 0;
	if (pe_npy_parse_index(data, size, 1u << 16, &v, &wide, &err) != 0 || v.shape.rank != 2 || v.shape.dim[0] == 0 ||
	    v.shape.dim[1] == 0 || v.shape.dim[1] > PE_AXIAL_MAX_AXES || v.shape.dim[0] > (1u << 12))
		return;
	size_t s = v.shape.dim[0], na = v.shape.dim[1];
	double *ids = malloc(s * na * sizeof *ids);
	if (!ids)
		abort();
	int rc = pe_axial_ids_from(v.data, v.dtype, wide, s, na, ids, "body", &err);
	if (rc != 0) {
		if (rc != PE_EBODY || strcmp(err.param, "body"))
			FAIL("ids refused %d naming '%s'", rc, err.param);
		free(ids);
		return;
	}
	char axes[64] = "", *at = axes;
	for (size_t a = 0; a < na; a++)
		at += snprintf(at, sizeof axes - (size_t)(at - axes), "%s%d", a ? "," : "", 2 + 2 * (int)(a % 3));
	struct pe_params p;
	pe_params_init(&p, &pe_axial_body_def);
	if (pe_params_set(&p, "axes_dim", axes, &err) || pe_params_set(&p, "compat", hf ? "hf" : "exact", &err) ||
	    (preset == PE_AXIAL_HUNYUANVIDEO && hf && pe_params_set(&p, "freqs_dtype", "f32", &err)) ||
	    pe_params_finish(&p, &err) || pe_axial_body_check(&p, na, &err))
		FAIL("params refused: %s", err.detail);
	size_t dim = 0, n;
	const double *ad = pe_param_list(&p, "axes_dim", &n);
	for (size_t a = 0; a < n; a++)
		dim += (size_t)ad[a];
	float *out = malloc(2 * s * dim * sizeof *out);
	if (!out || pe_axial_table_compute(&p, ids, s, PE_F32, out, &err) != 0)
		FAIL("table failed: %s", err.detail);
	for (size_t i = 0; i < 2 * s * dim; i++)
		if (!(fabsf(out[i]) <= 1))
			FAIL("table value %zu is %g", i, (double)out[i]);
	pe_params_destroy(&p);
	free(out);
	free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	int preset = 1 + (data[0] >> 1 & 7) % 5, hf = data[0] >> 4 & 1;
	if (data[0] & 1) {
		body(data + 1, size - 1, preset, hf);
		return 0;
	}
	char *text = malloc(size);
	if (!text)
		abort();
	memcpy(text, data + 1, size - 1);
	text[size - 1] = 0;
	grid(text, preset, hf);
	free(text);
	return 0;
}
