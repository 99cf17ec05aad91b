/* The scaling object of a RoPE config (rope_scaling, or the newer rope_parameters) as the rope
 * table's parameters: its rope_type in every spelling (default, linear, dynamic, yarn, longrope /
 * su, llama3, mrope), the original context, and each type's own keys. Each value is read with the
 * config key it came from, so a value the table refuses is a 422 naming that key (out.c). */
#include "plan/rope.h"
#include "posenc/core.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int list_param(struct cfg *c, struct pe_plan_enc *e, const json_t *v, const char *pname,
		      const char *name, size_t want)
{
	if (!v || !json_is_array(v))
		return plan_bad(c, name, "%s must be a list of numbers", name);
	if (json_array_size(v) != want)
		return plan_bad(c, name, "%s has %zu values; the rotary dimensions need %zu", name, json_array_size(v), want);
	char *s = malloc(json_array_size(v) * 26 + 1);
	size_t n = 0;
	if (!s)
		return pe_err_set(c->err, PE_ENOMEM, "", "out of memory");
	s[0] = 0;
	for (size_t k = 0; k < json_array_size(v); k++) {
		const json_t *x = json_array_get(v, k);
		if (!json_is_number(x)) {
			free(s);
			return plan_bad(c, name, "%s must be a list of numbers", name);
		}
		if (n)
			s[n++] = ',';
		pe_plan_real_text(json_number_value(x), s + n);
		n += strlen(s + n);
	}
	pe_plan_param(e, pname, "%s", s);
	pe_plan_source(e, pname, name);
	free(s);
	return 0;
}

/* A number of the scaling object into the table parameter pname (1 given, 0 absent, <0 error). */
static int scaling_num(struct cfg *c, const struct rope *r, struct pe_plan_enc *e, const char *key, const char *pname)
{
	char name[96];
	double v = 0;
	int rc = plan_scaling_num(c, r, key, &v);
	if (rc == 1 && pname) {
		snprintf(name, sizeof name, "%s.%s", r->scaling_name, key);
		pe_plan_param_real(e, pname, v);
		pe_plan_source(e, pname, name);
	}
	return rc;
}

int plan_scaling_num(struct cfg *c, const struct rope *r, const char *key, double *v)
{
	char name[96];
	snprintf(name, sizeof name, "%s.%s", r->scaling_name, key);
	return plan_num_of(c, plan_member(r->scaling, key), name, v);
}

/* rope_type, or the legacy type; "default" when the config has no scaling. */
static const char *scaling_type(struct cfg *c, const struct rope *r, char *which, size_t cap)
{
	const json_t *rt = plan_member(r->scaling, "rope_type"), *t = plan_member(r->scaling, "type");
	snprintf(which, cap, "%s.%s", r->scaling_name, rt ? "rope_type" : "type");
	if (rt && t && json_is_string(t) && json_is_string(rt) && strcmp(json_string_value(rt), json_string_value(t)))
		pe_plan_warn(c->plan, "%s.rope_type (%s) and %s.type (%s) differ: rope_type is used", r->scaling_name,
			     json_string_value(rt), r->scaling_name, json_string_value(t));
	if (rt && t && !json_is_string(t)) /* the legacy key is read too: a mistyped one is not dropped */
		snprintf(which, cap, "%s.type", r->scaling_name);
	const json_t *v = rt && (!t || json_is_string(t)) ? rt : t;
	if (!v)
		return "default";
	return json_is_string(v) ? json_string_value(v) : NULL;
}

static int orig_positions(struct cfg *c, const struct rope *r, struct pe_plan_enc *e, int64_t *orig)
{
	double v = 0;
	char name[96];
	snprintf(name, sizeof name, "%s.original_max_position_embeddings", r->scaling_name);
	int rc = plan_num_of(c, plan_member(r->scaling, "original_max_position_embeddings"), name, &v);
	if (rc == 0 && (rc = plan_num(c, "original_max_position_embeddings", &v)) > 0) /* Phi-3 keeps it at the top */
		snprintf(name, sizeof name, "original_max_position_embeddings");
	if (rc < 0)
		return rc;
	if (rc == 0) {
		if (!r->d->max_pos)
			return plan_bad(c, name, "the scaling needs original_max_position_embeddings or max_position_embeddings");
		snprintf(name, sizeof name, "max_position_embeddings");
		v = (double)r->d->max_pos;
		pe_plan_note(e, "original_max_position_embeddings is max_position_embeddings (%lld): the config gives none",
			     (long long)r->d->max_pos);
	}
	if (v != floor(v) || v < 1 || v > 1e15)
		return plan_bad(c, name, "%s must be a positive integer", name);
	*orig = (int64_t)v;
	pe_plan_param(e, "original_max_position_embeddings", "%lld", (long long)*orig);
	pe_plan_source(e, "original_max_position_embeddings", name);
	return 1;
}

static int need_factor(struct cfg *c, const struct rope *r, struct pe_plan_enc *e, double *factor)
{
	char name[96];
	snprintf(name, sizeof name, "%s.factor", r->scaling_name);
	int rc = plan_num_of(c, plan_member(r->scaling, "factor"), name, factor);
	if (rc == 0)
		return plan_bad(c, name, "%s is required for this rope_type", name);
	if (rc > 0) {
		pe_plan_param_real(e, "factor", *factor);
		pe_plan_source(e, "factor", name);
	}
	return rc < 0 ? rc : 0;
}

static int yarn(struct cfg *c, const struct rope *r, struct pe_plan_enc *e)
{
	double factor = 1;
	int64_t orig = 0;
	int rc;
	pe_plan_param(e, "scaling", "yarn");
	if ((rc = need_factor(c, r, e, &factor)) < 0 || (rc = orig_positions(c, r, e, &orig)) < 0)
		return rc;
	if (plan_member(r->scaling, "original_max_position_embeddings") && r->d->max_pos &&
	    (double)r->d->max_pos / (double)orig != factor)
		pe_plan_warn(c->plan, "YaRN: %s.factor (%g) is used; max_position_embeddings / "
			     "original_max_position_embeddings is %g, which recent transformers use instead",
			     r->scaling_name, factor, (double)r->d->max_pos / (double)orig);
	int m = plan_member(r->scaling, "mscale") != NULL, mad = plan_member(r->scaling, "mscale_all_dim") != NULL;
	if ((rc = scaling_num(c, r, e, "beta_fast", "beta_fast")) < 0 || (rc = scaling_num(c, r, e, "beta_slow", "beta_slow")) < 0 ||
	    (rc = scaling_num(c, r, e, "attention_factor", "attention_factor")) < 0)
		return rc;
	if (m && mad && !plan_member(r->scaling, "attention_factor")) {
		if ((rc = scaling_num(c, r, e, "mscale", "mscale")) < 0 || (rc = scaling_num(c, r, e, "mscale_all_dim", "mscale_all_dim")) < 0)
			return rc;
	} else if (m != mad) {
		pe_plan_warn(c->plan, "%s.%s is given without %s: ignored, as transformers does", r->scaling_name,
			     m ? "mscale" : "mscale_all_dim", m ? "mscale_all_dim" : "mscale");
	}
	const json_t *t = plan_member(r->scaling, "truncate");
	if (t && json_is_boolean(t))
		pe_plan_param(e, "truncate", "%d", json_is_true(t));
	else if (t) {
		char name[96];
		snprintf(name, sizeof name, "%s.truncate", r->scaling_name);
		return plan_bad(c, name, "%s must be true or false", name);
	}
	return 0;
}

static int longrope(struct cfg *c, const struct rope *r, struct pe_plan_enc *e)
{
	int64_t orig = 0;
	char sname[96], lname[96];
	int rc;
	pe_plan_param(e, "scaling", "longrope");
	snprintf(sname, sizeof sname, "%s.short_factor", r->scaling_name);
	snprintf(lname, sizeof lname, "%s.long_factor", r->scaling_name);
	if ((rc = list_param(c, e, plan_member(r->scaling, "short_factor"), "short_factor", sname, (size_t)r->rotary_dim / 2)) < 0 ||
	    (rc = list_param(c, e, plan_member(r->scaling, "long_factor"), "long_factor", lname, (size_t)r->rotary_dim / 2)) < 0)
		return rc;
	if ((rc = orig_positions(c, r, e, &orig)) < 0)
		return rc;
	if (plan_member(r->scaling, "attention_factor"))
		return scaling_num(c, r, e, "attention_factor", "attention_factor") < 0 ? -1 : 0;
	/* PhiMoE scales the tables by short_mscale / long_mscale instead of LongRoPE's factor */
	double sm = 0, lm = 0;
	int hs = plan_scaling_num(c, r, "short_mscale", &sm), hl = plan_scaling_num(c, r, "long_mscale", &lm);
	if (hs < 0 || hl < 0)
		return -1;
	if (hs && hl) {
		int64_t len = c->len > 0 ? c->len : r->d->max_pos;
		double m = len > orig ? lm : sm;
		snprintf(sname, sizeof sname, "%s.%s", r->scaling_name, len > orig ? "long_mscale" : "short_mscale");
		if (sm != lm)
			pe_plan_warn(c->plan, "%s: the table is scaled by %s (%g) at len %lld; past %lld positions the other "
				     "mscale applies", r->scaling_name, sname, m, (long long)len, (long long)orig);
		pe_plan_param_real(e, "attention_factor", m);
		pe_plan_source(e, "attention_factor", sname);
		return 0;
	}
	char fname[96];
	double factor = 1;
	/* an explicit factor is the length ratio (rope_parameters' longrope factor); else
	 * max_position_embeddings / original_max_position_embeddings */
	int given = plan_scaling_num(c, r, "factor", &factor);
	if (given < 0)
		return given;
	int derived = !given && r->d->max_pos && orig;
	if (derived)
		factor = (double)r->d->max_pos / (double)orig;
	snprintf(fname, sizeof fname, "%s.factor", r->scaling_name);
	pe_plan_param_real(e, "factor", factor);
	pe_plan_source(e, "factor", derived ? "max_position_embeddings" : fname);
	pe_plan_note(e, "LongRoPE: factor is %s (%g), which sets the attention factor sqrt(1 + ln factor / ln original)",
		     given ? "the config's factor" : "max_position_embeddings / original_max_position_embeddings", factor);
	pe_plan_note(e, "short_factor applies while offset + len <= original_max_position_embeddings (%lld), "
		     "long_factor beyond: the table picks by its own positions", (long long)orig);
	return 0;
}

static int llama3(struct cfg *c, const struct rope *r, struct pe_plan_enc *e)
{
	double factor = 1;
	int64_t orig;
	int rc;
	pe_plan_param(e, "scaling", "llama3");
	if ((rc = need_factor(c, r, e, &factor)) < 0 || (rc = orig_positions(c, r, e, &orig)) < 0 ||
	    (rc = scaling_num(c, r, e, "low_freq_factor", "low_freq_factor")) < 0 ||
	    (rc = scaling_num(c, r, e, "high_freq_factor", "high_freq_factor")) < 0)
		return rc;
	double low = 1, high = 4; /* read and checked above */
	plan_scaling_num(c, r, "low_freq_factor", &low);
	plan_scaling_num(c, r, "high_freq_factor", &high);
	if (low == high)
		pe_plan_note(e, "low_freq_factor = high_freq_factor: no smoothing band, each frequency is divided by factor "
			     "or kept (Llama 4)");
	return 0;
}

/* M-RoPE (Qwen2-VL and later): the table is /v1/rope/mrope with the config's mrope_section. */
static int mrope(struct cfg *c, const struct rope *r, struct pe_plan_enc *e)
{
	char name[96];
	const json_t *sec = plan_member(r->scaling, "mrope_section");
	int interleaved = 0;
	snprintf(name, sizeof name, "%s.mrope_interleaved", r->scaling_name);
	if (plan_bool_of(c, plan_member(r->scaling, "mrope_interleaved"), name, &interleaved) < 0)
		return -1;
	snprintf(name, sizeof name, "%s.mrope_section", r->scaling_name);
	if (!sec || !json_is_array(sec) || json_array_size(sec) != 3)
		return plan_bad(c, name, "%s must be three integers (t, h, w)", name);
	int s[3], k = 0;
	for (size_t j = 0; j < 3; j++, k++) {
		const json_t *x = json_array_get(sec, j);
		if (!json_is_number(x) || json_number_value(x) != floor(json_number_value(x)) || json_number_value(x) < 0 || json_number_value(x) > 65536)
			return plan_bad(c, name, "%s must be three integers (t, h, w)", name);
		s[k] = (int)json_number_value(x);
	}
	if (s[0] + s[1] + s[2] != r->rotary_dim / 2)
		return plan_bad(c, name, "%s sums to %d, not head_dim / 2 = %d", name, s[0] + s[1] + s[2], r->rotary_dim / 2);
	e->kind = "mrope";
	e->table = "rope/mrope";
	e->len_key = "segments"; /* the url's sequence: len text tokens */
	e->len_prefix = "text:";
	pe_plan_param(e, "mrope_section", "%d,%d,%d", s[0], s[1], s[2]);
	pe_plan_source(e, "mrope_section", name);
	pe_plan_param(e, "interleaved", "%d", interleaved);
	if (c->fam->mrope_variant) /* how its videos are numbered (the family's row says why) */
		pe_plan_param(e, "variant", "%s", c->fam->mrope_variant);
	pe_plan_note(e, "positions are three rows (temporal, height, width); the url's sequence is len text tokens, "
		     "where all three are the token index and the table equals /v1/rope's: give segments= with the "
		     "images and videos of a prompt for theirs");
	return 0;
}

/* Does /v1/rope take key=value? */
static int rope_takes(const char *key, const char *value)
{
	struct pe_params p;
	const struct pe_table_def *def = pe_table_find("rope");
	if (!def)
		return 0;
	pe_params_init(&p, def);
	int ok = pe_params_set(&p, key, value, NULL) == 0;
	pe_params_destroy(&p);
	return ok;
}

/* Gemma 4's proportional rope: frequencies base^(-2i/head_dim) for the first partial_rotary_factor
 * of them, zero past it (those channels pass unrotated). */
static int proportional(struct cfg *c, const struct rope *r, struct pe_plan_enc *e)
{
	double f = 1;
	char name[96];
	int rc = plan_scaling_num(c, r, "partial_rotary_factor", &f);
	snprintf(name, sizeof name, "%s.partial_rotary_factor", r->scaling_name);
	if (rc < 0)
		return rc;
	if (!(f > 0 && f <= 1))
		return plan_bad(c, name, "%s must be in (0, 1]", name);
	pe_plan_note(e, "proportional: frequencies base^(-2i/%d) for the first %g of them, zero past it", r->head_dim, f);
	if (!rope_takes("scaling", "proportional")) {
		e->table = NULL;
		pe_plan_warn(c->plan, "%s: this posenc's /v1/rope has no scaling=proportional: no url", r->scaling_name);
		return 0;
	}
	pe_plan_param(e, "scaling", "proportional");
	pe_plan_param_real(e, "partial_rotary_factor", f);
	pe_plan_source(e, "partial_rotary_factor", name);
	return 0;
}

int plan_scaling_params(struct cfg *c, const struct rope *r, struct pe_plan_enc *e)
{
	char which[96];
	const char *type = scaling_type(c, r, which, sizeof which);
	if (!type)
		return plan_bad(c, which, "%s must be a string", which);
	int has_sections = plan_member(r->scaling, "mrope_section") != NULL;
	if (!strcmp(type, "mrope") || (has_sections && !strcmp(type, "default")))
		return mrope(c, r, e);
	if (!strcmp(type, "default"))
		return 0;
	if (!strcmp(type, "proportional"))
		return proportional(c, r, e);
	if (!strcmp(type, "dynamic") && r->alpha) {
		pe_plan_note(e, "dynamic with alpha (NTK by alpha): base is rope_theta * alpha^(head_dim / (head_dim - 2)), "
			     "unscaled within max_position_embeddings");
		return 0;
	}
	if (!strcmp(type, "linear") || !strcmp(type, "dynamic")) {
		double f = 0;
		int64_t orig;
		int rc;
		pe_plan_param(e, "scaling", "%s", type);
		if ((rc = need_factor(c, r, e, &f)) < 0)
			return rc;
		if (!strcmp(type, "dynamic")) {
			if ((rc = orig_positions(c, r, e, &orig)) < 0)
				return rc;
			pe_plan_note(e, "dynamic NTK depends on the sequence seen: the table uses seq_len = offset + len");
		}
		return 0;
	}
	if (!strcmp(type, "yarn"))
		return yarn(c, r, e);
	if (!strcmp(type, "longrope") || !strcmp(type, "su"))
		return longrope(c, r, e);
	if (!strcmp(type, "llama3"))
		return llama3(c, r, e);
	return plan_bad(c, which, "%s '%.40s' is not one posenc knows (default, linear, dynamic, yarn, longrope, llama3, mrope, proportional)",
		   which, type);
}

const char *plan_scaling_per_type(const struct rope *r)
{
	const char *key;
	const json_t *v;
	if (!json_is_object(r->scaling))
		return NULL;
	json_object_foreach((json_t *)r->scaling, key, v)
		if (json_is_object(v))
			return key;
	return NULL;
}

/* The scaling object: rope_scaling, or the newer rope_parameters; which one, for messages. Either
 * of another JSON type (a string "llama3", a list) is a 422 naming it, not a model without scaling. */
int plan_scaling_of(struct cfg *c, struct rope *r)
{
	const json_t *rp, *rs;
	int rc;
	if ((rc = plan_object_of(c, plan_get(c, "rope_parameters"), "rope_parameters", &rp)) < 0 ||
	    (rc = plan_object_of(c, plan_get(c, "rope_scaling"), "rope_scaling", &rs)) < 0)
		return rc;
	r->scaling = rp ? rp : rs;
	r->scaling_name = rp ? "rope_parameters" : "rope_scaling";
	return 0;
}
