/* Internal to rope_freq.c and rope_bound.c: the scalars and single frequencies of the three
 * arithmetics, which the plans (rope_freq.c) and the cheap validation bounds (rope_bound.c) both
 * compute, so that a bound's witness is exactly the plan's own value. Pure and thread-safe. */
#ifndef PE_CORE_ROPE_FREQ_H
#define PE_CORE_ROPE_FREQ_H

#include "core/rope.h"

double pe_rope_ntk_base(const struct pe_rope_cfg *c);
double pe_rope_ntk_base_hf(const struct pe_rope_cfg *c);
void pe_rope_yarn_range(const struct pe_rope_cfg *c, double *low, double *high);
const double *pe_rope_longrope_factors(const struct pe_rope_cfg *c);
double pe_rope_x_exact(const struct pe_rope_cfg *c, size_t i);
double pe_rope_llama3_exact(const struct pe_rope_cfg *c, double w);
float pe_rope_llama3_hf(const struct pe_rope_cfg *c, float w);
float pe_rope_yarn_hf(const struct pe_rope_cfg *c, size_t i, float pos, double low, double high);
float pe_rope_llama3_ggml_factor(const struct pe_rope_cfg *c, float freq);
int pe_rope_plan_ggml(const struct pe_rope_cfg *c, struct pe_rope_ggml *g);
float pe_rope_ggml_ramp_mix(const struct pe_rope_ggml *g, size_t i);
float pe_rope_ggml_angle(const struct pe_rope_ggml *g, float theta, size_t i, float ramp_mix);
double pe_rope_ggml_step(const struct pe_rope_ggml *g, size_t i);

#endif
