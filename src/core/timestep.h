/* Internal: diffusers' get_timestep_embedding, for the table (timesteps in the query, timestep.c)
 * and for POST /v1/sinusoidal/timestep (timesteps in the body, src/http/timestep.c). */
#ifndef PE_CORE_TIMESTEP_H
#define PE_CORE_TIMESTEP_H

#include "posenc/core.h"

/* Largest |timestep|: a float32 holds it (compat=hf converts it) and double angles stay finite. */
#define PE_TIMESTEP_MAX 1e30

/* The POST form: the table's parameters without timesteps (finished as usual: pe_params_finish).
 * pe_timestep_check_value says whether a body value is a timestep (0, or PE_EBODY naming "body").
 * pe_timestep_compute writes the [n, dim] table of t[0..n) into out. */
extern const struct pe_table_def pe_timestep_body_def;
int pe_timestep_check_value(double t, size_t i, struct pe_err *err);
/* Are the angles scale * (t * f_k) of t[0..n) finite in the params' arithmetic (float32 for
 * compat=hf), and every frequency? 0, or PE_EINVAL naming downscale_freq_shift or `who`. */
int pe_timestep_check_angles(const struct pe_params *p, const double *t, size_t n, const char *who, struct pe_err *err);
int pe_timestep_compute(const struct pe_params *p, const double *t, size_t n, enum pe_dtype dt, void *out,
			struct pe_err *err);

/* sin and cos of the 8 floats at x, as SLEEF's AVX2 u10 kernels give them (timestep_avx2.c; call
 * only where the CPU has AVX2 and FMA). */
void pe_timestep_sincos8_avx2(const float *x, float *s, float *c);

#endif
