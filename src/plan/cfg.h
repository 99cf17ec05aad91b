/* Internal to the model plans: the config being read (struct cfg), the model's dimensions, the
 * readers every family uses (cfg.c) and the RoPE families (rope.c, their scaling object in
 * scaling.c) that the family table in plan.c dispatches to. */
#ifndef PE_PLAN_CFG_H
#define PE_PLAN_CFG_H

#include "plan/internal.h"
#include <jansson.h>

#include <stdint.h>

#define DEFAULT_LEN 2048

struct cfg {
	const json_t *root, *text; /* text: text_config, else the root */
	struct pe_plan *plan;
	const struct pe_plan_opts *opt;
	struct pe_err *err;
	int64_t len;
};

/* The model's dimensions, read once per family. */
struct dims {
	int heads, hidden, head_dim, layers;
	int64_t max_pos; /* 0 when the config has none */
	const char *heads_key, *hidden_key, *head_dim_key; /* the keys read ("n_head"...); NULL: none */
};

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

/* RoPE families (rope.c). */
int plan_family_deepseek(struct cfg *c);
int plan_family_gemma(struct cfg *c);
int plan_family_gemma3(struct cfg *c);
int plan_family_gptj(struct cfg *c);
int plan_family_llama4(struct cfg *c);
int plan_family_qwen_vl(struct cfg *c);
int plan_family_rope(struct cfg *c);

#endif
