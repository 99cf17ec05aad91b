/* rope/apply with axes_dim: rotate x [..., seq, ..., head_dim] by axial RoPE, as diffusers'
 * apply_rotary_emb(use_real=True, use_real_unbind_dim=-1) does with FluxPosEmbed's cos/sin: each
 * channel pair (2i, 2i+1) turns by the angle of its band's axis at the token's id, out = x*cos +
 * rotate(x)*sin with rotate the pair swap (-x[2i+1], x[2i]), each product rounded, then the sum.
 * The ids [seq, n_axes] come as the positions part; a token's cos/sin row is computed once (the
 * table's own row, axial.c, in the working dtype) and serves every vector of that token. Memory:
 * the ids as doubles, one row and the frequencies. */
#include "core/axial.h"
#include "core/kernels.h"
#include "core/tables.h"

#include <stdlib.h>
#include <string.h>

/* Rows of the working dtype from a double row (hf rows are floats already: exact). */
static void to_work(const double *row, size_t n, enum pe_dtype wd, void *out)
{
	for (size_t i = 0; i < n; i++)
		if (wd == PE_F64)
			((double *)out)[i] = row[i];
		else
			((float *)out)[i] = (float)row[i];
}

int pe_axial_apply(const struct pe_params *p, const struct pe_positions *pos, struct pe_tensor_mut *x,
		   const struct pe_axial_geometry *g, struct pe_err *err)
{
	size_t naxes;
	pe_param_list(p, "axes_dim", &naxes);
	const struct pe_shape *s = &pos->shape;
	if (s->rank != 2 || s->dim[0] != g->seq || s->dim[1] != naxes)
		return pe_err_set(err, PE_EINVAL, "positions", "axial positions are ids [seq, n_axes] = [%zu, %zu] (one per axes_dim)",
				  g->seq, naxes);
	struct pe_axial_rope r;
	size_t esz = pe_dtype_size(x->dtype), inverse = (size_t)pe_param_int(p, "inverse");
	double *ids = malloc((g->seq ? g->seq : 1) * naxes * sizeof *ids), *row = NULL;
	char *work = NULL;
	int rc = ids ? pe_axial_ids_from(pos->data, pos->dtype, pos->wide, g->seq, naxes, ids, "positions", err)
		     : pe_err_set(err, PE_ENOMEM, "", "out of memory");
	if (rc == 0 && pe_axial_rope_init(&r, p) != 0)
		rc = pe_err_set(err, PE_ENOMEM, "", "out of memory");
	else if (rc == 0) {
		r.interleaved = 1;
		if (!(row = malloc(2 * r.dim * sizeof *row)) || !(work = malloc(2 * r.dim * esz)))
			rc = pe_err_set(err, PE_ENOMEM, "", "out of memory");
		const struct pe_kernel_table *k = pe_kernels();
		for (size_t t = 0; rc == 0 && t < g->seq && g->outer * g->inner != 0; t++) {
			pe_axial_row(&r, ids + t * naxes, row, row + r.dim);
			to_work(row, 2 * r.dim, x->dtype, work);
			for (size_t o = 0; o < g->outer; o++)
				for (size_t i = 0; i < g->inner; i++) {
					size_t at = ((o * g->seq + t) * g->inner + i) * g->last;
					if (x->dtype == PE_F64)
						pe_rope_apply_f64((double *)x->data + at, (double *)x->data + at, (double *)work,
								  (double *)work + r.dim, r.dim, 1, (int)inverse);
					else
						k->rope_apply_f32((float *)x->data + at, (float *)x->data + at, (float *)work,
								  (float *)work + r.dim, r.dim, 1, (int)inverse);
				}
			int c = t % 64 == 63 ? pe_cancelled() : 0;
			if (c)
				rc = pe_cancel_err(c, err);
		}
		pe_axial_rope_destroy(&r);
	}
	free(ids);
	free(row);
	free(work);
	return rc;
}
