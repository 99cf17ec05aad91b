/* RoPE models whose layers have types: which type each layer is (layer_types, else a pattern:
 * sliding_window_pattern, full_attention_interval, no_rope_layers, no_rope_layer_interval), and
 * one encoding per way a type is rotated: the config's scaling, plain (no scaling, the local
 * base), its own rope_parameters entry (keyed by layer type), or none (NoPE, linear attention,
 * mamba: the family row's nope_types). Each encoding lists its layers. */
#include "plan/rope.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOPE "no_rope" /* a layer no_rope_layers turns off */

/* Is name in the comma list? */
static int listed(const char *list, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = list; p && *p;) {
		size_t k = strcspn(p, ",");
		if (k == n && !strncmp(p, name, n))
			return 1;
		p += k + (p[k] == ',');
	}
	return 0;
}

/* no_rope_layers (1: the layer rotates, 0: NoPE), as Llama 4 and SmolLM3 spell it: 1 read, 0 absent. */
static int no_rope_list(struct cfg *c, const struct dims *d, const char **types)
{
	const json_t *nr;
	int rc = plan_list_of(c, plan_get(c, "no_rope_layers"), "no_rope_layers", &nr);
	if (rc <= 0 || !json_array_size(nr)) /* absent or [] (the family default: 0), or refused */
		return rc < 0 ? rc : 0;
	if ((int)json_array_size(nr) != d->layers)
		return plan_bad(c, "no_rope_layers", "no_rope_layers must have num_hidden_layers (%d) entries", d->layers);
	for (int i = 0; i < d->layers; i++) {
		const json_t *x = json_array_get(nr, (size_t)i);
		if (!json_is_number(x) || (json_number_value(x) != 0 && json_number_value(x) != 1))
			return plan_bad(c, "no_rope_layers", "no_rope_layers holds 0 or 1 per layer (0: the layer has no RoPE)");
		types[i] = json_number_value(x) != 0 ? "full_attention" : NOPE;
	}
	return 1;
}

/* cross_attention_layers (Mllama): those layers attend to the image, without RoPE. 1, 0 absent. */
static int cross_layers(struct cfg *c, const struct dims *d, const char **types)
{
	const json_t *cl;
	int rc = plan_list_of(c, plan_get(c, "cross_attention_layers"), "cross_attention_layers", &cl);
	if (rc <= 0)
		return rc;
	for (int i = 0; i < d->layers; i++)
		types[i] = "full_attention";
	for (size_t k = 0; k < json_array_size(cl); k++) {
		const json_t *x = json_array_get(cl, k);
		double v = json_is_number(x) ? json_number_value(x) : -1;
		if (v < 0 || v >= d->layers || v != floor(v))
			return plan_bad(c, "cross_attention_layers", "cross_attention_layers holds layer numbers below %d", d->layers);
		types[(int)v] = "cross_attention";
	}
	return 1;
}

/* A pattern of every n-th layer: (i + 1 - first) % n == 0 is `every`, the others `other`. 1, 0
 * absent. first 1: layer 0 is `every` (ModernBERT's global_attn_every_n_layers). */
static int every_nth_from(struct cfg *c, const struct dims *d, const char *key, const char *every, const char *other,
			  const char **types, int first)
{
	double n = 0;
	int rc = plan_int(c, key, 1, 1e15, &n);
	if (rc <= 0)
		return rc;
	n = fmin(n, PE_PLAN_MAX_LAYERS + 1); /* past the layers, the same (and an int) */
	for (int i = 0; i < d->layers; i++)
		types[i] = (i + 1 - first) % (int)n ? other : every;
	return 1;
}

static int every_nth(struct cfg *c, const struct dims *d, const char *key, const char *every, const char *other,
		     const char **types)
{
	return every_nth_from(c, d, key, every, other, types, 0);
}

/* sliding_window_pattern as EXAONE 4 spells it: a string of L (sliding) and G (global), repeated. */
static int pattern_string(struct cfg *c, const struct dims *d, const char **types)
{
	const json_t *p = plan_get(c, "sliding_window_pattern");
	if (!json_is_string(p))
		return 0;
	const char *s = json_string_value(p);
	size_t n = strlen(s);
	if (!n || strspn(s, "LG") != n)
		return plan_bad(c, "sliding_window_pattern", "sliding_window_pattern is a number or a string of L and G");
	for (int i = 0; i < d->layers; i++)
		types[i] = s[(size_t)i % n] == 'L' ? "sliding_attention" : "full_attention";
	return 1;
}

/* The names a plan's layers may carry (its strings outlive the config): the type's own, or
 * "other" for one this posenc does not name. */
static const char *intern(const char *t)
{
	static const char *const known[] = {"full_attention", "sliding_attention", "chunked_attention", "linear_attention",
					    "attention", "mamba", "conv", "cross_attention", NULL};
	for (int i = 0; known[i]; i++)
		if (!strcmp(known[i], t))
			return known[i];
	return "other";
}

static int layer_types(struct cfg *c, const struct dims *d, const char **types)
{
	const json_t *lt;
	int rc = plan_list_of(c, plan_get(c, "layer_types"), "layer_types", &lt);
	if (rc < 0)
		return rc;
	if (lt) {
		if ((int)json_array_size(lt) != d->layers)
			return plan_bad(c, "layer_types", "layer_types must list num_hidden_layers (%d) names", d->layers);
		for (int i = 0; i < d->layers; i++) {
			const json_t *x = json_array_get(lt, (size_t)i);
			if (!json_is_string(x) || strlen(json_string_value(x)) > 48)
				return plan_bad(c, "layer_types", "layer_types holds one name per layer");
			types[i] = intern(json_string_value(x));
		}
		return 0;
	}
	if ((rc = no_rope_list(c, d, types)) != 0 || (rc = pattern_string(c, d, types)) != 0 ||
	    (rc = cross_layers(c, d, types)) != 0 ||
	    (rc = every_nth_from(c, d, "global_attn_every_n_layers", "full_attention", "sliding_attention", types, 1)) != 0 ||
	    (rc = every_nth(c, d, "sliding_window_pattern", "full_attention", "sliding_attention", types)) != 0 ||
	    (rc = every_nth(c, d, "full_attention_interval", "full_attention", "linear_attention", types)) != 0 ||
	    (rc = every_nth(c, d, "no_rope_layer_interval", NOPE, "full_attention", types)) != 0)
		return rc < 0 ? rc : 0;
	for (int i = 0; i < d->layers; i++)
		types[i] = "full_attention";
	return 0;
}

/* How a layer of type t is rotated: NULL for none, "" for the config's scaling, "plain" for
 * plain_types, or t itself when rope_parameters has an entry for it (every family whose rows
 * rotate all layers alike comes here too when its rope_parameters is keyed by layer type). */
static const char *variant(struct cfg *c, const struct rope *r, const char *t, int window, int nope_all)
{
	if (nope_all || !strcmp(t, NOPE) || (listed(c->fam->nope_types, t) && (!c->fam->nope_needs_window || window)))
		return NULL;
	if (json_is_object(plan_member(r->scaling, t)))
		return t;
	return listed(c->fam->plain_types, t) ? "plain" : "";
}

struct group {
	const char *variant; /* as variant() */
	const char *type;    /* the one layer type of its layers, or NULL when several */
	struct pe_plan_enc *e;
	struct pe_plan_enc *q; /* its llama_4_scaling_beta query scale, or NULL */
};

/* The rope of a group: r for the config's scaling; without scaling (and rope_local_base_freq when
 * given) for "plain"; else the rope_parameters entry of the layer type. */
static int group_rope(struct cfg *c, const struct rope *main, const char *v, struct rope *r, char *name, size_t cap)
{
	*r = *main;
	if (!*v)
		return 0;
	if (!strcmp(v, "plain")) {
		double local = 0;
		const char *key = c->fam->local_theta_key ? c->fam->local_theta_key : "rope_local_base_freq";
		int rc = plan_num(c, key, &local);
		if (rc < 0)
			return rc;
		if (rc > 0) {
			r->base = local;
			snprintf(r->base_key, sizeof r->base_key, "%s", key);
		}
		r->scaling = NULL;
		r->scaling_name = "rope_scaling";
		return 0;
	}
	snprintf(name, cap, "%s.%s", main->scaling_name, v);
	r->scaling = plan_member(main->scaling, v);
	r->scaling_name = name;
	if (plan_rope_base(c, r) < 0)
		return -1;
	const json_t *rt = plan_member(r->scaling, "rope_type");
	double g = 0;
	int rc, prop = json_is_string(rt) && !strcmp(json_string_value(rt), "proportional");
	/* the type's own share of the head (proportional keeps the whole head: see below) */
	if (!prop && plan_member(r->scaling, "partial_rotary_factor") && (rc = plan_rope_rotary_dim(c, r)) < 0)
		return rc;
	if (prop) {
		/* Gemma 4's global layers: heads of global_head_dim, the whole head in the table (its
		 * frequencies past partial_rotary_factor are zero) */
		if (!strcmp(v, "full_attention") && (rc = plan_channels(c, "global_head_dim", &g)) != 0) {
			if (rc < 0)
				return rc;
			r->head_dim = (int)g;
			r->dim_key = "global_head_dim";
		}
		r->rotary_dim = r->head_dim;
		if (r->rotary_dim < 2 || r->rotary_dim % 2)
			return plan_bad(c, r->dim_key, "%s must be even", r->dim_key);
	}
	return 0;
}

static struct pe_plan_enc *group_enc(struct cfg *c, const struct rope *main, const struct dims *d, struct group *g,
				     const char *layers)
{
	struct rope r;
	char name[96];
	if (!g->variant) {
		struct pe_plan_enc *e = pe_plan_enc_add(c->plan, "none", NULL, NULL, layers);
		if (!e) {
			pe_err_set(c->err, PE_EINTERNAL, "", "too many encodings");
			return NULL;
		}
		e->head_dim = d->head_dim;
		e->softmax_scale = main->softmax_scale;
		pe_plan_note(e, "no positional encoding on these layers (%s)", g->type ? g->type : "several layer types");
		return e;
	}
	if (group_rope(c, main, g->variant, &r, name, sizeof name) < 0)
		return NULL;
	r.layers = layers;
	struct pe_plan_enc *e = plan_add_rope(c, &r);
	size_t n = c->plan->nenc;
	if (!e || plan_query_scale_beta(c, &r) < 0)
		return NULL;
	if (c->plan->nenc > n) { /* on the group's layers: filled with them */
		g->q = &c->plan->enc[n];
		g->q->layers = layers;
	}
	return e;
}

int plan_family_typed(struct cfg *c)
{
	struct dims d;
	struct rope r;
	const char *types[PE_PLAN_MAX_LAYERS];
	struct group g[PE_PLAN_MAX_ENC];
	int gi[PE_PLAN_MAX_LAYERS], ng = 0, rc;
	double sw = 0;
	const char *layout = c->fam->layout ? c->fam->layout : "half";
	c->per_type_ok = 1;
	if ((rc = plan_read_dims(c, &d)) < 0 || (rc = plan_rope_init(c, &r, &d, layout)) < 0)
		return rc;
	const char *per_type = plan_scaling_per_type(&r);
	if (!d.layers)
		return plan_bad(c, "num_hidden_layers", "a model with layer types needs num_hidden_layers");
	plan_choose_len(c, &d);
	int use_sw = 1; /* use_sliding_window, read for its type: the layer types decide the rotation */
	if ((rc = layer_types(c, &d, types)) < 0 || (rc = plan_num(c, "sliding_window", &sw)) < 0 ||
	    (rc = plan_bool(c, "use_sliding_window", &use_sw)) < 0)
		return rc;
	const json_t *pet = plan_get(c, "position_embedding_type"); /* Granite 4 hybrid: "nope" or "rope" */
	int nope_all = json_is_string(pet) && !strcmp(json_string_value(pet), "nope");
	for (int i = 0; i < d.layers; i++) {
		const char *v = variant(c, &r, types[i], sw > 0, nope_all);
		int k = 0;
		if (v && !*v && per_type) { /* keyed by layer type, and this type has no entry */
			char name[96];
			snprintf(name, sizeof name, "%s.%s", r.scaling_name, types[i]);
			return plan_bad(c, name, "%s is keyed by layer type and has no object for %s (layer %d)",
					r.scaling_name, types[i], i);
		}
		/* one group per rotation; unrotated layers one per type (attention and mamba apart) */
		while (k < ng && !(v ? g[k].variant && !strcmp(v, g[k].variant)
				   : !g[k].variant && g[k].type && !strcmp(g[k].type, types[i])))
			k++;
		if (k == ng) {
			if (ng == PE_PLAN_MAX_ENC)
				return plan_bad(c, "layer_types", "more than %d ways of rotating layers", PE_PLAN_MAX_ENC);
			g[ng++] = (struct group){.variant = v, .type = types[i]};
		} else if (g[k].type && strcmp(g[k].type, types[i])) {
			g[k].type = NULL;
		}
		gi[i] = k;
	}
	for (int k = 0; k < ng; k++) {
		const char *layers = ng == 1 ? "all" : g[k].type && strcmp(g[k].type, NOPE) ? g[k].type : NULL;
		if (!(g[k].e = group_enc(c, &r, &d, &g[k], layers)))
			return -1;
	}
	for (int i = 0; i < d.layers; i++) {
		struct group *t = &g[gi[i]];
		t->e->layer_list[t->e->nlayers++] = i;
		if (t->q)
			t->q->layer_list[t->q->nlayers++] = i;
	}
	if (sw > 0)
		for (int k = 0; k < ng; k++)
			if (g[k].e->table && g[k].type && !strcmp(g[k].type, "sliding_attention"))
				pe_plan_note(g[k].e, "attention is limited to a sliding window of %g tokens", sw);
	return plan_finish_all(c);
}

int plan_family_build(struct cfg *c)
{
	struct rope r = {0};
	int (*build)(struct cfg *) = c->fam->build;
	/* rope_parameters keyed by layer type: the rows that turn every layer alike plan each type's
	 * rotation on its layers here; the others refuse it in plan_rope_init */
	if (build == plan_family_rope || build == plan_family_qwen_vl) {
		int rc = plan_scaling_of(c, &r);
		if (rc < 0)
			return rc;
		if (plan_scaling_per_type(&r))
			build = plan_family_typed;
	}
	return build(c);
}

/* ChatGLM (remote code): rotates kv_channels / 2 channels of each head in pairs, base 10000 ·
 * rope_ratio; q·k scaled by kv_channels^-1/2 (the layer-number coefficient cancels in fp32). */
int plan_family_chatglm(struct cfg *c)
{
	struct dims d;
	struct rope r;
	double kv = 0, ratio = 1;
	int rc;
	if ((rc = plan_read_dims(c, &d)) < 0)
		return rc;
	if ((rc = plan_channels(c, "kv_channels", &kv)) < 0 || (rc = plan_positive(c, "rope_ratio", &ratio)) < 0)
		return rc;
	if (kv >= 4)
		d.head_dim = (int)kv;
	d.head_dim_key = kv >= 4 ? "kv_channels" : d.head_dim_key;
	if ((rc = plan_rope_init(c, &r, &d, "interleaved")) < 0)
		return rc;
	r.rotary_dim = d.head_dim / 2;
	r.dim_key = d.head_dim_key;
	if (ratio != 1) {
		r.base *= ratio;
		snprintf(r.base_key, sizeof r.base_key, "rope_ratio");
	}
	plan_choose_len(c, &d);
	struct pe_plan_enc *e = plan_add_rope(c, &r);
	if (!e)
		return -1;
	pe_plan_note(e, "ChatGLM rotates the first half of each head (kv_channels / 2 = %d channels) in pairs", r.rotary_dim);
	return plan_finish_all(c);
}
