/* Internal to the model plans: the config being read (struct cfg), the model's dimensions, the
 * readers every family uses (cfg.c) and the RoPE families (rope.c, their scaling object in
 * scaling.c) that the family table in plan.c dispatches to. */
#ifndef PE_PLAN_CFG_H
#define PE_PLAN_CFG_H

#include "plan/internal.h"
#include <jansson.h>

#include <stdint.h>

#define DEFAULT_LEN 2048

struct cfg;

/* One model family: one row of plan.c's table. Everything a family differs in is here; the
 * builder reads the row (and the config) and yields the encodings. */
struct plan_family {
	const char *names[6];        /* its model_type names */
	int (*build)(struct cfg *c); /* the encodings it yields */
	const char *layout;          /* RoPE: "half" (rotate_half) or "interleaved" (pairs) */
	double theta;                /* rope_theta of the config class (0: 10000) */
	double rotary_share;         /* the class's partial rotary share (0: the whole head) */
	/* Class defaults for keys a config (or its text_config) omits, as a JSON object: what the
	 * config class's from_dict fills in (gemma-3-4b-it's text_config has no num_attention_heads). */
	const char *defaults;
	/* Layer types (layer_types, sliding_window_pattern, no_rope_layers...) that are not rotated
	 * ("linear_attention,mamba"), and those that rotate without the config's scaling, with
	 * rope_local_base_freq when the config has one ("sliding_attention"); comma lists. */
	const char *nope_types, *plain_types;
	int nope_needs_window;       /* nope_types are NoPE only when sliding_window is set (Cohere 2, EXAONE 4) */
	const char *softmax_key;     /* the config key that is softmax_scale (Granite's attention_multiplier), or NULL */
	const char *tower;           /* "text" (default), "vision", "audio" */
	double softmax_fixed;        /* nonzero: the attention's scale of q·k (Gemma 3n: 1) */
	int softmax_rsqrt;           /* q·k divided by math.sqrt(head_dim) (remote code: ChatGLM, InternLM2), not
				      * multiplied by head_dim**-0.5 as transformers' attention modules do */
	const char *local_theta_key; /* the key of the plain_types' base (NULL: rope_local_base_freq) */
	int vision;                  /* the builder plans the text model: the vision tower follows (vision.c) */
	const char *mrope_variant;   /* M-RoPE: the variant of get_rope_index its url names (NULL: qwen2vl's) */
};

struct cfg {
	const struct plan_family *fam;
	const struct plan_family *(*find)(const char *model_type); /* plan.c's table, for a text_config's row */
	json_t *defaults;          /* fam->defaults read (NULL: none) */
	const json_t *root, *text; /* text: text_config, else the root (a tower's config while it plans) */
	const char *prefix;        /* the key errors name text's keys under (NULL: "text_config") */
	int no_root;               /* a tower's keys are its own: the root is not read for them */
	struct pe_plan *plan;
	const struct pe_plan_opts *opt;
	struct pe_err *err;
	int64_t len;
	int per_type_ok; /* the family plans a rope_parameters keyed by layer type, group by group */
};

/* The model's dimensions, read once per family. */
struct dims {
	int heads, hidden, head_dim, layers;
	int64_t max_pos; /* 0 when the config has none */
	const char *heads_key, *hidden_key, *head_dim_key; /* the keys read ("n_head"...); NULL: none */
};

/* The model_type of the part being planned (text_config's, a tower's), else the config's. */
const char *plan_type(const struct cfg *c);

/* The config as jansson reads it, strictly (duplicate keys refused), within PE_PLAN_MAX_DEPTH and
 * PE_PLAN_MAX_NODES (checked before any node is allocated): a new reference, or NULL with err
 * (PE_EBODY naming "body" and the byte; PE_ETOOBIG past the bounds; PE_ENOMEM). */
json_t *plan_parse(const char *text, size_t n, struct pe_err *err);

/* Readers (cfg.c): each returns 0, or a 422 in c->err naming the key. */
int plan_bad(struct cfg *c, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
const json_t *plan_get(const struct cfg *c, const char *key);
const json_t *plan_member(const json_t *obj, const char *key);
int plan_num_of(struct cfg *c, const json_t *v, const char *name, double *out);
int plan_num(struct cfg *c, const char *key, double *out);
/* An object member (rope_scaling, text_config...): 1 found (*out), 0 absent (*out NULL), or a 422
 * naming name when it is another JSON type (a mistyped object is not silently dropped). */
int plan_object_of(struct cfg *c, const json_t *v, const char *name, const json_t **out);
/* A boolean (true / false, not 1 or "true") and a list: 1 found, 0 absent, or a 422 naming name. */
int plan_bool_of(struct cfg *c, const json_t *v, const char *name, int *out);
int plan_bool(struct cfg *c, const char *key, int *out);
int plan_list_of(struct cfg *c, const json_t *v, const char *name, const json_t **out);
/* An integer in [lo, hi]: 1 given, 0 absent, or a 422 naming key. */
int plan_int(struct cfg *c, const char *key, double lo, double hi, double *out);
/* err's key prefixed "text_config." when the text model holds it (plan_get's first place). */
void plan_name_text(const struct cfg *c, struct pe_err *err);
int plan_positive(struct cfg *c, const char *key, double *out);
int plan_channels(struct cfg *c, const char *key, double *out);
int plan_read_dims(struct cfg *c, struct dims *d);
void plan_choose_len(struct cfg *c, const struct dims *d);
int plan_finish_all(struct cfg *c);

/* c planned as the family fam from now on (its defaults). */
int plan_use_family(struct cfg *c, const struct plan_family *fam);
/* A learned absolute table of positions rows (learned: the checkpoint holds it), NULL when full. */
struct pe_plan_enc *plan_learned_enc(struct cfg *c, const struct dims *d, int64_t positions, const char *what);

/* The vision tower of vision_config, if any (vision.c): 0, or an error. */
int plan_vision_tower(struct cfg *c);
/* Multimodal configs and encoders (towers.c). */
int plan_family_multimodal(struct cfg *c);
int plan_family_whisper(struct cfg *c);
int plan_family_seq2seq(struct cfg *c);
int plan_family_encoder(struct cfg *c);
int plan_family_deberta(struct cfg *c);

/* RoPE families (rope.c). */
int plan_family_deepseek(struct cfg *c);
int plan_family_gemma(struct cfg *c);
int plan_family_gemma3(struct cfg *c);
int plan_family_llama4(struct cfg *c);
int plan_family_qwen_vl(struct cfg *c);
int plan_family_rope(struct cfg *c);
/* A RoPE model whose layers have types (layers.c). */
int plan_family_typed(struct cfg *c);
/* c->fam's build, or plan_family_typed for a one-rotation RoPE row whose rope_parameters is keyed
 * by layer type. */
int plan_family_build(struct cfg *c);
int plan_family_chatglm(struct cfg *c);

#endif
