/* The RoPE families of the model plans: the base and the rotary share of a head (partial rotary),
 * Gemma's local and global bases, Llama 4's NoPE layers and DeepSeek's rotary head and mscale.
 * The scaling object (rope_scaling / rope_parameters) is scaling.c's; plan.c's header lists
 * the decisions. */
#include "plan/rope.h"
#include "posenc/core.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pe_plan_enc *plan_add_rope(struct cfg *c, const struct rope *r)
{
	struct pe_plan_enc *e = pe_plan_enc_add(c->plan, "rope", "rope", "len", r->layers);
	if (!e) {
		pe_err_set(c->err, PE_EINTERNAL, "", "too many encodings");
		return NULL;
	}
	e->head_dim = r->head_dim;
	e->rotary_dim = r->rotary_dim;
	e->layout = r->layout;
	e->softmax_scale = r->softmax_scale;
	pe_plan_param(e, "dim", "%d", r->rotary_dim);
	pe_plan_source(e, "dim", r->dim_key);
	pe_plan_param_real(e, "base", r->base);
	pe_plan_source(e, "base", r->base_key);
	int rc = plan_scaling_params(c, r, e);
	if (rc < 0)
		return NULL;
	/* an M-RoPE table is rotate_half's unless the model interleaves (GLM-4.1V): the key stays short */
	if (!strcmp(e->kind, "rope") || strcmp(r->layout, "half"))
		pe_plan_param(e, "layout", "%s", r->layout);
	if (r->rotary_dim < r->head_dim)
		pe_plan_note(e, "rotates the first %d of %d channels of each head; the rest pass unchanged", r->rotary_dim,
			     r->head_dim);
	return e;
}

/* The base a config without rope_theta gets: its transformers config class's default (the row's
 * theta: the class attribute default_theta, or the rope_theta default of its __init__). */
static double family_theta(const struct cfg *c) { return c->fam->theta ? c->fam->theta : 10000; }

/* base: rope_theta (also inside rope_parameters), GPT-NeoX's rotary_emb_base, else the family's
 * default (family_theta; a warning names it when it is not the usual 10000). */
int plan_rope_base(struct cfg *c, struct rope *r)
{
	double v = 0;
	int rc = 0;
	snprintf(r->base_key, sizeof r->base_key, "%s.rope_theta", r->scaling_name);
	if (r->scaling)
		rc = plan_num_of(c, plan_member(r->scaling, "rope_theta"), r->base_key, &v);
	if (rc == 0 && (rc = plan_num(c, "rope_theta", &v)) >= 0)
		snprintf(r->base_key, sizeof r->base_key, "rope_theta");
	if (rc == 0 && (rc = plan_num(c, "rotary_emb_base", &v)) >= 0)
		snprintf(r->base_key, sizeof r->base_key, rc ? "rotary_emb_base" : "rope_theta");
	const json_t *ac = NULL; /* DBRX keeps rope_theta in attn_config, which must then be an object */
	if (rc == 0 && (rc = plan_object_of(c, plan_get(c, "attn_config"), "attn_config", &ac)) >= 0 &&
	    (rc = plan_num_of(c, plan_member(ac, "rope_theta"), "attn_config.rope_theta", &v)) > 0)
		snprintf(r->base_key, sizeof r->base_key, "attn_config.rope_theta");
	if (rc == 0 && (rc = plan_num(c, "global_rope_theta", &v)) > 0)
		snprintf(r->base_key, sizeof r->base_key, "global_rope_theta"); /* ModernBERT */
	if (rc < 0)
		return rc;
	r->base = rc ? v : family_theta(c);
	int per_type = json_is_object(plan_member(r->scaling, "full_attention")) ||
		       json_is_object(plan_member(r->scaling, "sliding_attention")); /* each type gives its own */
	if (!rc && r->base != 10000 && !per_type)
		pe_plan_warn(c->plan, "no rope_theta: base %.0f (the default of transformers' %s config)", r->base,
			     plan_type(c));
	if (!(r->base > 0))
		return plan_bad(c, r->base_key, "%s must be > 0", r->base_key);
	return rc;
}

/* The rotary share a config without rotary_dim / partial_rotary_factor / rotary_pct gets: its
 * transformers config class's default (the row's; GPTNeoXConfig rotary_pct=0.25, PhiConfig
 * partial_rotary_factor=0.5); the others rotate whole heads. */
static double family_rotary_share(const struct cfg *c) { return c->fam->rotary_share ? c->fam->rotary_share : 1; }

/* The rotary share of a head: rotary_dim (GPT-J), partial_rotary_factor (Phi), rotary_pct (NeoX),
 * else the family's default (family_rotary_share; a warning names it when it is not the whole head). */
int plan_rope_rotary_dim(struct cfg *c, struct rope *r)
{
	double v = 0;
	int rc;
	r->rotary_dim = (int)(r->head_dim * family_rotary_share(c)); /* the class default: see below */
	r->dim_key = r->d->head_dim_key;
	snprintf(r->share_key, sizeof r->share_key, "%s.partial_rotary_factor", r->scaling_name);
	if ((rc = plan_channels(c, "rotary_dim", &v)) != 0) {
		if (rc > 0)
			r->rotary_dim = (int)v;
		r->dim_key = "rotary_dim";
	} else if ((rc = plan_num_of(c, plan_member(r->scaling, "partial_rotary_factor"), r->share_key, &v)) != 0 ||
		   (snprintf(r->share_key, sizeof r->share_key, "partial_rotary_factor"),
		    rc = plan_num(c, "partial_rotary_factor", &v)) != 0 ||
		   (snprintf(r->share_key, sizeof r->share_key, "rotary_pct"), rc = plan_num(c, "rotary_pct", &v)) != 0) {
		if (rc > 0 && !(v > 0 && v <= 1))
			return plan_bad(c, r->share_key, "%s must be in (0, 1]", r->share_key);
		if (rc > 0)
			r->rotary_dim = (int)(r->head_dim * v); /* transformers: int(head_dim * factor) */
		r->dim_key = r->share_key;
	}
	if (rc < 0)
		return rc;
	if (rc == 0 && family_rotary_share(c) != 1)
		pe_plan_warn(c->plan, "no rotary_pct / partial_rotary_factor: %g of each head rotates (the default of "
			     "transformers' %s config)", family_rotary_share(c), plan_type(c));
	if (r->rotary_dim < 2 || r->rotary_dim > r->head_dim || r->rotary_dim % 2)
		return plan_bad(c, r->dim_key ? r->dim_key : "head_dim",
				"the rotary dimensions (%d) must be even, at least 2 and within head_dim (%d)", r->rotary_dim,
				r->head_dim);
	return 0;
}

/* HunYuan's dynamic scaling with alpha (NTK by alpha): a fixed base theta * alpha^(d / (d - 2)),
 * d the head width, and no scaling of the table while the sequence stays within the context. */
static int ntk_alpha(struct cfg *c, struct rope *r)
{
	double alpha = 0;
	int rc = plan_scaling_num(c, r, "alpha", &alpha);
	if (rc <= 0)
		return rc;
	char name[96];
	snprintf(name, sizeof name, "%s.alpha", r->scaling_name);
	if (!(alpha > 0) || r->head_dim < 4)
		return plan_bad(c, name, "%s must be > 0 (with head_dim at least 4)", name);
	r->base *= pow(alpha, r->head_dim / (r->head_dim - 2.0));
	r->alpha = 1;
	snprintf(r->base_key, sizeof r->base_key, "%s", name);
	return 1;
}

/* The common RoPE model: one table for every layer. */
int plan_rope_init(struct cfg *c, struct rope *r, const struct dims *d, const char *layout)
{
	memset(r, 0, sizeof *r);
	r->d = d;
	r->layout = layout;
	r->layers = "all";
	r->head_dim = d->head_dim;
	/* head_dim**-0.5 (a pow, which can differ from 1/sqrt in the last bit of a double) */
	r->softmax_scale = c->fam->softmax_rsqrt ? 1 / sqrt((double)d->head_dim) : pow((double)d->head_dim, -0.5);
	int rc = plan_scaling_of(c, r);
	const char *type = rc == 0 ? plan_scaling_per_type(r) : NULL;
	if (type && !c->per_type_ok) {
		char name[96];
		snprintf(name, sizeof name, "%s.%.48s", r->scaling_name, type);
		return plan_bad(c, name, "%s is keyed by layer type: %s's plan has one rotation for every layer and "
				"cannot give %s its own", r->scaling_name, plan_type(c), type);
	}
	if (rc == 0)
		rc = plan_rope_base(c, r);
	if (rc < 0 || (rc = plan_rope_rotary_dim(c, r)) < 0 || (rc = ntk_alpha(c, r)) < 0)
		return rc;
	double m = 0;
	if (c->fam->softmax_key && (rc = plan_positive(c, c->fam->softmax_key, &m)) < 0)
		return rc;
	if (m > 0)
		r->softmax_scale = m; /* Granite: attention_multiplier scales q·k in place of head_dim^-1/2 */
	if (c->fam->softmax_fixed)
		r->softmax_scale = c->fam->softmax_fixed;
	return 0;
}


static int head_dim_note(struct cfg *c, const struct dims *d, struct pe_plan_enc *e)
{
	if (d->hidden && d->hidden != d->head_dim * d->heads)
		pe_plan_note(e, "head_dim is %d as the config gives it, not hidden_size / num_attention_heads (%d)", d->head_dim,
			     d->hidden / d->heads);
	return 0;
}

/* sliding_window (a number; null or absent: none) and use_sliding_window (a boolean): a note on e
 * (when not NULL) when the window applies. 0, or a 422 naming the key of the wrong type. */
static int sliding_window(struct cfg *c, struct pe_plan_enc *e, const char *note)
{
	double sw = 0;
	int use = 1, rc = plan_num(c, "sliding_window", &sw), has_use;
	if (rc < 0 || (has_use = plan_bool(c, "use_sliding_window", &use)) < 0)
		return rc < 0 ? rc : has_use;
	if (e && rc > 0 && sw >= 1 && use)
		note ? pe_plan_note(e, "%s", note)
		     : pe_plan_note(e, "attention is limited to a sliding window of %g tokens; the rotary table is the same", sw);
	return 0;
}

static int family_rope_layout(struct cfg *c, const char *layout)
{
	struct dims d;
	struct rope r;
	int rc;
	if ((rc = plan_read_dims(c, &d)) < 0 || (rc = plan_rope_init(c, &r, &d, layout)) < 0)
		return rc;
	plan_choose_len(c, &d);
	struct pe_plan_enc *e = plan_add_rope(c, &r);
	if (!e)
		return -1;
	head_dim_note(c, &d, e);
	if ((rc = sliding_window(c, e, NULL)) < 0)
		return rc;
	if (!strcmp(layout, "half"))
		pe_plan_note(e, "half layout, as transformers' rotate_half (the checkpoint's q/k weights are permuted for it)");
	if ((rc = plan_query_scale_beta(c, &r)) < 0)
		return rc;
	return plan_finish_all(c);
}

int plan_family_rope(struct cfg *c) { return family_rope_layout(c, c->fam->layout ? c->fam->layout : "half"); }

/* Qwen2-VL, 2.5-VL, 3-VL, GLM-4.1V, GLM-4.5V: M-RoPE on the text model (the row adds the vision
 * tower). */
int plan_family_qwen_vl(struct cfg *c)
{
	int rc = family_rope_layout(c, c->fam->layout ? c->fam->layout : "half");
	if (rc == 0 && c->plan->nenc && strcmp(c->plan->enc[0].kind, "mrope"))
		pe_plan_warn(c->plan, "a vision-language model without mrope_section: planned as plain RoPE");
	return rc;
}

/* query_pre_attn_scalar, else 256 as Gemma 2's and Gemma 3's configs default to (warned; Gemma 1
 * has none and scales by head_dim^-1/2): 1 with q set, 0 for Gemma 1 without one, or an error. */
static int gemma_query_scalar(struct cfg *c, double *q)
{
	int rc = plan_positive(c, "query_pre_attn_scalar", q);
	if (rc != 0 || !strcmp(plan_type(c), "gemma"))
		return rc;
	*q = 256;
	pe_plan_warn(c->plan, "no query_pre_attn_scalar: softmax_scale is 256^-1/2 (the default of %s's config)",
		     c->plan->model_type);
	return 1;
}

/* Gemma 2: one base for all layers; the query is scaled by query_pre_attn_scalar^-1/2. */
int plan_family_gemma(struct cfg *c)
{
	struct dims d;
	struct rope r;
	double q = 0;
	int rc;
	if ((rc = plan_read_dims(c, &d)) < 0 || (rc = plan_rope_init(c, &r, &d, "half")) < 0)
		return rc;
	plan_choose_len(c, &d);
	if ((rc = gemma_query_scalar(c, &q)) < 0)
		return rc;
	if (rc > 0)
		r.softmax_scale = 1 / sqrt(q);
	struct pe_plan_enc *e = plan_add_rope(c, &r);
	if (!e)
		return -1;
	head_dim_note(c, &d, e);
	if (rc > 0)
		pe_plan_note(e, "softmax_scale is query_pre_attn_scalar^-1/2 (%g), not head_dim^-1/2", q);
	if ((rc = sliding_window(c, e, "sliding-window and global layers alternate; both use this table")) < 0)
		return rc;
	return plan_finish_all(c);
}

/* Which layers are sliding: layer_types, else sliding_window_pattern (every pattern-th is global). */
static int gemma3_layers(struct cfg *c, const struct dims *d, int *sliding)
{
	const json_t *lt = plan_get(c, "layer_types");
	double pat = 0;
	if (lt) {
		if (!json_is_array(lt) || (int)json_array_size(lt) != d->layers)
			return plan_bad(c, "layer_types", "layer_types must list num_hidden_layers (%d) names", d->layers);
		int i = 0;
		for (size_t k = 0; k < json_array_size(lt); k++, i++) {
			const json_t *x = json_array_get(lt, k);
			if (!json_is_string(x) || (strcmp(json_string_value(x), "sliding_attention") && strcmp(json_string_value(x), "full_attention")))
				return plan_bad(c, "layer_types", "layer_types holds sliding_attention or full_attention");
			sliding[i] = !strcmp(json_string_value(x), "sliding_attention");
		}
		return 0;
	}
	int rc = plan_num(c, "sliding_window_pattern", &pat);
	if (rc < 0)
		return rc;
	if (rc == 0) {
		pat = 6;
		pe_plan_warn(c->plan, "no layer_types or sliding_window_pattern: every 6th layer is global (Gemma 3's default)");
	}
	if (pat < 1 || pat != floor(pat))
		return plan_bad(c, "sliding_window_pattern", "sliding_window_pattern must be a positive integer");
	pat = fmin(pat, PE_PLAN_MAX_LAYERS + 1); /* past the layers, the same: none global (and an int) */
	for (int i = 0; i < d->layers; i++)
		sliding[i] = (i + 1) % (int)pat != 0;
	return 0;
}

/* Gemma 3: sliding layers turn with rope_local_base_freq and no scaling, global ones with
 * rope_theta and rope_scaling (transformers' rotary_emb_local and rotary_emb). The newer spelling
 * gives rope_parameters per layer type. */
int plan_family_gemma3(struct cfg *c)
{
	struct dims d;
	struct rope g, l;
	int sliding[PE_PLAN_MAX_LAYERS], rc;
	double q = 0, local = 10000;
	c->per_type_ok = 1;
	if ((rc = plan_read_dims(c, &d)) < 0 || (rc = plan_rope_init(c, &g, &d, "half")) < 0)
		return rc;
	if (!d.layers)
		return plan_bad(c, "num_hidden_layers", "Gemma 3 needs num_hidden_layers");
	int no_theta = !plan_member(g.scaling, "rope_theta") && !plan_get(c, "rope_theta") && !plan_get(c, "rotary_emb_base") &&
		       !plan_member(plan_member(g.scaling, "full_attention"), "rope_theta");
	plan_choose_len(c, &d);
	if ((rc = gemma3_layers(c, &d, sliding)) < 0 || (rc = gemma_query_scalar(c, &q)) < 0)
		return rc;
	double scale = rc > 0 ? 1 / sqrt(q) : g.softmax_scale;
	const json_t *per_full, *per_slide;
	char fname[96], sname[96];
	snprintf(fname, sizeof fname, "%s.full_attention", g.scaling_name);
	snprintf(sname, sizeof sname, "%s.sliding_attention", g.scaling_name);
	if ((rc = plan_object_of(c, plan_member(g.scaling, "full_attention"), fname, &per_full)) < 0 ||
	    (rc = plan_object_of(c, plan_member(g.scaling, "sliding_attention"), sname, &per_slide)) < 0)
		return rc;
	if (!per_full != !per_slide)
		return plan_bad(c, per_full ? sname : fname, "%s gives %s without %s: a per-layer-type %s needs both",
				g.scaling_name, per_full ? "full_attention" : "sliding_attention",
				per_full ? "sliding_attention" : "full_attention", g.scaling_name);
	l = g;
	if (per_full && per_slide) { /* rope_parameters: {"full_attention": {...}, "sliding_attention": {...}} */
		g.scaling = per_full;
		g.scaling_name = "rope_parameters.full_attention";
		l.scaling = per_slide;
		l.scaling_name = "rope_parameters.sliding_attention";
		if ((rc = plan_rope_base(c, &g)) < 0 || (rc = plan_rope_base(c, &l)) < 0)
			return rc;
	} else {
		if ((rc = plan_num(c, "rope_local_base_freq", &local)) < 0)
			return rc;
		if (rc == 0)
			pe_plan_warn(c->plan, "no rope_local_base_freq: the sliding layers use 10000 (Gemma 3's default)");
		l.base = local;
		snprintf(l.base_key, sizeof l.base_key, "rope_local_base_freq");
		l.scaling = NULL;
		l.scaling_name = "rope_scaling";
	}
	if (no_theta) {
		g.base = 1e6;
		pe_plan_warn(c->plan, "no rope_theta: the global layers use 1000000 (Gemma 3's default)");
	}
	l.layers = "sliding_attention";
	g.layers = "full_attention";
	l.softmax_scale = g.softmax_scale = scale;
	int nsl = 0;
	for (int i = 0; i < d.layers; i++)
		nsl += sliding[i];
	struct pe_plan_enc *el = nsl ? plan_add_rope(c, &l) : NULL, *eg = nsl < d.layers ? plan_add_rope(c, &g) : NULL;
	if ((nsl && !el) || (nsl < d.layers && !eg))
		return -1;
	for (int i = 0; i < d.layers; i++) { /* the layer indices of each */
		struct pe_plan_enc *t = sliding[i] ? el : eg;
		t->layer_list[t->nlayers++] = i;
	}
	if ((rc = sliding_window(c, el, "sliding-window layers: base rope_local_base_freq, no scaling")) < 0)
		return rc;
	if (eg)
		pe_plan_note(eg, "global layers: base rope_theta with the config's scaling");
	return plan_finish_all(c);
}

static struct pe_plan_enc *query_scale(struct cfg *c, const char *variant);

/* Llama 4: interleaved RoPE on most layers, none on the NoPE layers (no_rope_layers[i] = 0, by
 * default every no_rope_layer_interval-th = 4th layer). */
int plan_family_llama4(struct cfg *c)
{
	struct dims d;
	struct rope r;
	int uses[PE_PLAN_MAX_LAYERS], rc, n = 0;
	if ((rc = plan_read_dims(c, &d)) < 0 || (rc = plan_rope_init(c, &r, &d, "interleaved")) < 0)
		return rc;
	plan_choose_len(c, &d);
	const json_t *nr;
	double interval = 4;
	if ((rc = plan_list_of(c, plan_get(c, "no_rope_layers"), "no_rope_layers", &nr)) < 0 ||
	    (rc = plan_int(c, "no_rope_layer_interval", 1, 1e15, &interval)) < 0)
		return rc;
	if (nr && json_array_size(nr)) { /* an empty list: the interval's default, as transformers */
		if ((int)json_array_size(nr) != d.layers)
			return plan_bad(c, "no_rope_layers", "no_rope_layers must have num_hidden_layers (%d) entries", d.layers);
		for (size_t k = 0; k < json_array_size(nr); k++, n++) {
			const json_t *x = json_array_get(nr, k);
			if (!json_is_number(x) || (json_number_value(x) != 0 && json_number_value(x) != 1))
				return plan_bad(c, "no_rope_layers", "no_rope_layers holds 0 or 1 per layer (0: the layer has no RoPE)");
			uses[n] = json_number_value(x) != 0;
		}
	} else {
		interval = fmin(interval, PE_PLAN_MAX_LAYERS + 1); /* past the layers, the same (and an int) */
		for (n = 0; n < d.layers; n++)
			uses[n] = (n + 1) % (int)interval != 0;
	}
	int nope = 0;
	for (int i = 0; i < n; i++)
		nope += !uses[i];
	struct pe_plan_enc *e = plan_add_rope(c, &r);
	if (!e)
		return -1;
	pe_plan_note(e, "interleaved layout: Llama 4 rotates adjacent pairs (complex multiplication)");
	if (!nope)
		return plan_finish_all(c);
	struct pe_plan_enc *none = pe_plan_enc_add(c->plan, "none", NULL, NULL, NULL);
	if (!none)
		return pe_err_set(c->err, PE_EINTERNAL, "", "too many encodings");
	e->layers = NULL;
	for (int i = 0; i < n; i++) {
		struct pe_plan_enc *t = uses[i] ? e : none;
		t->layer_list[t->nlayers++] = i;
	}
	none->head_dim = d.head_dim;
	none->softmax_scale = r.softmax_scale;
	pe_plan_note(none, "NoPE layers: no positional encoding");
	const json_t *tt = plan_get(c, "attn_temperature_tuning");
	if (json_is_true(tt) || (json_is_number(tt) && json_number_value(tt) != 0)) {
		double as = 0.1, fs = 8192; /* Llama4TextConfig's defaults */
		struct pe_plan_enc *q;
		if ((rc = plan_positive(c, "attn_scale", &as)) < 0 || (rc = plan_positive(c, "floor_scale", &fs)) < 0 ||
		    !(q = query_scale(c, "llama4")))
			return rc < 0 ? rc : -1;
		pe_plan_param_real(q, "attn_scale", as);
		pe_plan_source(q, "attn_scale", "attn_scale");
		pe_plan_param_real(q, "floor_scale", fs);
		pe_plan_source(q, "floor_scale", "floor_scale");
		q->layers = NULL;
		memcpy(q->layer_list, none->layer_list, none->nlayers * sizeof none->layer_list[0]);
		q->nlayers = none->nlayers;
		pe_plan_note(q, "attn_temperature_tuning: on the NoPE layers queries are multiplied by "
			     "1 + attn_scale * log(floor((pos + 1) / floor_scale) + 1)");
	}
	return plan_finish_all(c);
}

static struct pe_plan_enc *query_scale(struct cfg *c, const char *variant)
{
	/* the table's url only where this posenc serves it */
	const char *table = pe_table_find("rope/query-scale") ? "rope/query-scale" : NULL;
	struct pe_plan_enc *q = pe_plan_enc_add(c->plan, "query_scale", table, "len", "all");
	if (!q) {
		pe_err_set(c->err, PE_EINTERNAL, "", "too many encodings");
		return NULL;
	}
	pe_plan_param(q, "variant", "%s", variant);
	q->softmax_scale = NAN; /* a factor of the query, not an attention */
	if (!table)
		pe_plan_note(q, "this posenc does not serve GET /v1/rope/query-scale: no url");
	return q;
}

/* Ministral 3 / Mistral Large 3: llama_4_scaling_beta in the scaling object multiplies queries by
 * 1 + beta * log(1 + floor(pos / original_max_position_embeddings)) on every layer. 0, or a 422. */
int plan_query_scale_beta(struct cfg *c, const struct rope *r)
{
	double beta = 0, orig = 0;
	char name[96], oname[96];
	int rc = plan_scaling_num(c, r, "llama_4_scaling_beta", &beta);
	if (rc <= 0)
		return rc;
	snprintf(name, sizeof name, "%s.llama_4_scaling_beta", r->scaling_name);
	snprintf(oname, sizeof oname, "%s.original_max_position_embeddings", r->scaling_name);
	if ((rc = plan_scaling_num(c, r, "original_max_position_embeddings", &orig)) <= 0 || !(orig >= 1))
		return rc < 0 ? rc : plan_bad(c, oname, "llama_4_scaling_beta needs %s", oname);
	struct pe_plan_enc *q = query_scale(c, "ministral3");
	if (!q)
		return -1;
	pe_plan_param_real(q, "beta", beta);
	pe_plan_source(q, "beta", name);
	pe_plan_param_real(q, "original_max_position_embeddings", orig);
	pe_plan_source(q, "original_max_position_embeddings", oname);
	pe_plan_note(q, "queries are multiplied by 1 + beta * log(1 + floor(pos / original_max_position_embeddings))");
	return 0;
}

/* A value of the scaling object that the url may not carry (DeepSeek's softmax scale reads it
 * whatever the rope_type) through /v1/rope's own check of that parameter: 0, or a 422 naming
 * "<scaling_name>.<key>" with the table's reason. */
static int rope_value(struct cfg *c, const struct rope *r, const char *key, double v)
{
	struct pe_params p;
	struct pe_err why = {0};
	char text[32], name[96];
	pe_plan_real_text(v, text);
	pe_params_init(&p, pe_table_find("rope"));
	int rc = pe_params_set(&p, key, text, &why);
	pe_params_destroy(&p);
	snprintf(name, sizeof name, "%s.%s", r->scaling_name, key);
	return rc ? plan_bad(c, name, "%s = %s: /v1/rope refuses it (%s)", name, text, why.detail) : 0;
}

/* DeepSeek V2 / V3: MLA rotates qk_rope_head_dim channels (interleaved in the checkpoint); the
 * softmax scale is (qk_nope + qk_rope)^-1/2 times mscale(factor, mscale_all_dim)^2. */
int plan_family_deepseek(struct cfg *c)
{
	struct dims d;
	struct rope r;
	double nope = 0, ropedim = 0, mad = 0, factor = 1;
	int rc;
	if ((rc = plan_read_dims(c, &d)) < 0)
		return rc;
	if ((rc = plan_channels(c, "qk_rope_head_dim", &ropedim)) <= 0)
		return rc < 0 ? rc : plan_bad(c, "qk_rope_head_dim", "DeepSeek's MLA needs qk_rope_head_dim");
	if ((rc = plan_channels(c, "qk_nope_head_dim", &nope)) <= 0)
		return rc < 0 ? rc : plan_bad(c, "qk_nope_head_dim", "DeepSeek's MLA needs qk_nope_head_dim");
	if (ropedim < 2 || (int)ropedim % 2)
		return plan_bad(c, "qk_rope_head_dim", "qk_rope_head_dim must be even and at least 2");
	d.head_dim = (int)(nope + ropedim);
	/* DeepSeek-V3 reads rope_interleave (false: the checkpoint's rotary channels are halves);
	 * DeepSeek-V2's code never does and always interleaves */
	int interleave = 1;
	if (!strcmp(plan_type(c), "deepseek_v3") && (rc = plan_bool(c, "rope_interleave", &interleave)) < 0)
		return rc;
	if ((rc = plan_rope_init(c, &r, &d, interleave ? "interleaved" : "half")) < 0)
		return rc;
	r.rotary_dim = (int)ropedim;
	r.dim_key = "qk_rope_head_dim";
	plan_choose_len(c, &d);
	int has_mad, has_factor;
	if ((has_mad = plan_scaling_num(c, &r, "mscale_all_dim", &mad)) < 0 ||
	    (has_factor = plan_scaling_num(c, &r, "factor", &factor)) < 0)
		return has_mad < 0 ? has_mad : has_factor;
	if ((has_mad && (rc = rope_value(c, &r, "mscale_all_dim", mad)) < 0) ||
	    (has_factor && (rc = rope_value(c, &r, "factor", factor)) < 0))
		return rc;
	double m = mad && factor > 1 ? 0.1 * mad * log(factor) + 1 : 1;
	r.softmax_scale = pow((double)d.head_dim, -0.5) * m * m; /* transformers' order: qk_head_dim**-0.5 * m * m */
	if (!(isfinite(r.softmax_scale) && r.softmax_scale > 0)) {
		char name[96];
		snprintf(name, sizeof name, "%s.mscale_all_dim", r.scaling_name);
		return plan_bad(c, name, "%s (%g) with factor %g makes softmax_scale %g, not a finite scale", name, mad, factor,
				r.softmax_scale);
	}
	struct pe_plan_enc *e = plan_add_rope(c, &r);
	if (!e)
		return -1;
	pe_plan_note(e, "MLA: the rotary part is qk_rope_head_dim = %d channels of a %d-channel query/key head",
		     r.rotary_dim, d.head_dim);
	if (interleave)
		pe_plan_note(e, "interleaved layout: the checkpoint's rotary channels are pairs (DeepSeek permutes them to "
			     "halves before rotate_half)");
	else
		pe_plan_note(e, "rope_interleave is false: the rotary channels are halves, rotated as rotate_half");
	if (m != 1)
		pe_plan_note(e, "softmax_scale = mscale(factor, mscale_all_dim)^2 / sqrt(%d), mscale = %.17g", d.head_dim, m);
	if ((rc = plan_query_scale_beta(c, &r)) < 0) /* Mistral Large 3: DeepSeek-V3 with Ministral 3's query scale */
		return rc;
	return plan_finish_all(c);
}
