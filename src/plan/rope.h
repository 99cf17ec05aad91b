/* Internal to the model plans: one RoPE table as the RoPE families (rope.c) read it from the
 * config, and the reader of its scaling object (scaling.c) that turns rope_scaling /
 * rope_parameters into the table's parameters. */
#ifndef PE_PLAN_ROPE_H
#define PE_PLAN_ROPE_H

#include "plan/cfg.h"

struct rope {
	const char *layout, *layers;
	int head_dim, rotary_dim;
	double base, softmax_scale;
	const json_t *scaling; /* rope_scaling / rope_parameters, or NULL */
	const char *scaling_name;
	/* The config keys base and the rotary width were read from, or would be (rope_theta, head_dim)
	 * when a default gave them: a value the table refuses is a 422 naming its key. */
	char base_key[96];
	char share_key[96]; /* the key the rotary share was read from (rotary_pct, partial_rotary_factor...) */
	const char *dim_key;
	const struct dims *d;
	int alpha; /* the base holds HunYuan's NTK alpha: the scaling adds no parameter */
};

/* A rope (or mrope) encoding of r on r->layers: its parameters and notes; NULL with c->err set. */
struct pe_plan_enc *plan_add_rope(struct cfg *c, const struct rope *r);
/* r for the model of d in layout: scaling object, base, rotary width (0, or a 422). */
int plan_rope_init(struct cfg *c, struct rope *r, const struct dims *d, const char *layout);
/* r->base from r->scaling's rope_theta, the config's, or the row's default: 1 given, 0 defaulted. */
int plan_rope_base(struct cfg *c, struct rope *r);

/* A query-scale table of llama_4_scaling_beta when the scaling object has one: 0, or a 422. */
int plan_query_scale_beta(struct cfg *c, const struct rope *r);

/* The scaling object: rope_parameters, else rope_scaling (r->scaling NULL when neither). 0, or a
 * 422 naming the key when one of them is not a JSON object. */
int plan_scaling_of(struct cfg *c, struct rope *r);
/* The scaling's parameters of e (scaling=..., factor, ...; M-RoPE turns e into /v1/rope/mrope):
 * 0, or a 422 in c->err naming the config key. */
int plan_scaling_params(struct cfg *c, const struct rope *r, struct pe_plan_enc *e);
/* The first key of a scaling object keyed by layer type ({"full_attention": {...}, ...}), or
 * NULL when it is one scaling for every layer. */
const char *plan_scaling_per_type(const struct rope *r);
/* r->rotary_dim from rotary_dim / partial_rotary_factor (r->scaling's, else the config's) /
 * rotary_pct, else the family's share: 0, or a 422 naming the key. */
int plan_rope_rotary_dim(struct cfg *c, struct rope *r);
/* A number of the scaling object: 1 given (*v), 0 absent (*v as it was), or a 422 naming
 * "<scaling_name>.<key>" when it is not a number. */
int plan_scaling_num(struct cfg *c, const struct rope *r, const char *key, double *v);

#endif
