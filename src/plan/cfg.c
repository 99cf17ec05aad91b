/* Reading a Hugging Face config for the model plans: errors naming the key, the text model's keys
 * (text_config first), numbers and channel counts checked before use, the model's dimensions and
 * the plan's length, and the urls of every encoding once the families have added them. */
#include "plan/cfg.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Depth and values of text outside its strings, counted before jansson allocates a node: a
 * value per container and per comma bounds the values from above. A raw NUL byte is refused
 * here (jansson would read past it in a string). 0, or the error. */
static int prescan(const char *text, size_t n, struct pe_err *err)
{
	size_t depth = 0, values = 1;
	int in_str = 0, esc = 0;
	for (size_t i = 0; i < n; i++) {
		char ch = text[i];
		if (!ch)
			return pe_err_set(err, PE_EBODY, "body", "a NUL byte at byte %zu", i);
		if (in_str) {
			in_str = esc || ch != '"';
			esc = !esc && ch == '\\';
			continue;
		}
		in_str = ch == '"';
		if (ch == '[' || ch == '{') {
			values++;
			if (++depth > PE_PLAN_MAX_DEPTH)
				return pe_err_set(err, PE_ETOOBIG, "body", "nested deeper than %d at byte %zu", PE_PLAN_MAX_DEPTH, i);
		} else if ((ch == ']' || ch == '}') && depth) {
			depth--;
		} else if (ch == ',' && ++values > PE_PLAN_MAX_NODES) {
			return pe_err_set(err, PE_ETOOBIG, "body", "more than %d values", PE_PLAN_MAX_NODES);
		}
	}
	return values > PE_PLAN_MAX_NODES ? pe_err_set(err, PE_ETOOBIG, "body", "more than %d values", PE_PLAN_MAX_NODES) : 0;
}

json_t *plan_parse(const char *text, size_t n, struct pe_err *err)
{
	json_error_t je;
	if (prescan(text, n, err) != 0)
		return NULL;
	/* strict: a duplicate key is refused (which value a model means is not ours to guess), and
	 * integers read as reals (a 20-digit integer is a number, not jansson's "too big") */
	json_t *v = json_loadb(text, n, JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL, &je);
	if (!v)
		pe_err_set(err, json_error_code(&je) == json_error_out_of_memory ? PE_ENOMEM : PE_EBODY, "body",
			   "not JSON at byte %d: %s", je.position, je.text);
	return v;
}

int plan_bad(struct cfg *c, const char *key, const char *fmt, ...)
{
	char d[PE_ERR_DETAIL_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(d, sizeof d, fmt, ap);
	va_end(ap);
	return pe_err_set(c->err, PE_EUNPROCESSABLE, key, "%s", d);
}

const char *plan_type(const struct cfg *c)
{
	const json_t *mt = c->text != c->root ? json_object_get(c->text, "model_type") : NULL;
	return json_is_string(mt) ? json_string_value(mt) : c->plan->model_type;
}

/* A warning once, however often the key is read. */
static void warn_once(struct pe_plan *plan, const char *text)
{
	for (size_t k = 0; k < plan->nwarnings; k++)
		if (!strcmp(plan->warnings[k], text))
			return;
	pe_plan_warn(plan, "%s", text);
}

/* A key of the text model (text_config first, then the top level, then the class default of the
 * family's row, warned); null counts as absent. */
const json_t *plan_get(const struct cfg *c, const char *key)
{
	const json_t *v = json_object_get(c->text, key);
	if (!v && c->text != c->root && !c->no_root)
		v = json_object_get(c->root, key);
	if ((!v || json_is_null(v)) && c->defaults && (v = json_object_get(c->defaults, key)) != NULL) {
		char text[160], *dump = json_dumps(v, JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
		snprintf(text, sizeof text, "no %s: %s (the default of transformers' %s config)", key, dump ? dump : "?",
			 plan_type(c));
		free(dump);
		warn_once(c->plan, text);
	}
	return v && !json_is_null(v) ? v : NULL;
}

const json_t *plan_member(const json_t *obj, const char *key)
{
	const json_t *v = json_object_get(obj, key);
	return v && !json_is_null(v) ? v : NULL;
}

/* A number member: 1 found, 0 absent, PE_EUNPROCESSABLE when it is not a number (true and false
 * are not: a config's rope_theta: true is a mistake, not 1). name is the key as messages show it
 * ("rope_scaling.factor"). */
int plan_num_of(struct cfg *c, const json_t *v, const char *name, double *out)
{
	if (!v)
		return 0;
	if (!json_is_number(v))
		return plan_bad(c, name, "%s must be a number", name);
	*out = json_number_value(v);
	return 1;
}

int plan_num(struct cfg *c, const char *key, double *out) { return plan_num_of(c, plan_get(c, key), key, out); }

int plan_object_of(struct cfg *c, const json_t *v, const char *name, const json_t **out)
{
	*out = NULL;
	if (!v)
		return 0;
	if (!json_is_object(v))
		return plan_bad(c, name, "%s must be a JSON object", name);
	*out = v;
	return 1;
}

int plan_bool_of(struct cfg *c, const json_t *v, const char *name, int *out)
{
	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return plan_bad(c, name, "%s must be true or false", name);
	*out = json_is_true(v);
	return 1;
}

int plan_bool(struct cfg *c, const char *key, int *out) { return plan_bool_of(c, plan_get(c, key), key, out); }

int plan_list_of(struct cfg *c, const json_t *v, const char *name, const json_t **out)
{
	*out = NULL;
	if (!v)
		return 0;
	if (!json_is_array(v))
		return plan_bad(c, name, "%s must be a list", name);
	*out = v;
	return 1;
}

int plan_int(struct cfg *c, const char *key, double lo, double hi, double *out)
{
	int rc = plan_num(c, key, out);
	return rc > 0 && (*out != floor(*out) || *out < lo || *out > hi) ?
		       plan_bad(c, key, "%s must be an integer from %.0f to %.0f", key, lo, hi) : rc;
}

/* The name err gives as a key of the text model, prefixed "text_config." when the text model
 * holds it: plan_get reads text_config first, so that is where the value came from. A tower
 * (no_root: "vision_config.", "audio_config.") reads only its own keys: always prefixed. */
void plan_name_text(const struct cfg *c, struct pe_err *err)
{
	char top[PE_ERR_PARAM_MAX], full[PE_ERR_PARAM_MAX + 16];
	const char *pre = c->prefix ? c->prefix : "text_config";
	if (c->text == c->root || !err->param[0] || !strncmp(err->param, pre, strlen(pre)))
		return;
	snprintf(top, sizeof top, "%.*s", (int)strcspn(err->param, "."), err->param);
	if (!c->no_root && !plan_member(c->text, top)) /* a tower's keys, even missing ones, are its own */
		return;
	size_t n = (size_t)snprintf(full, sizeof full, "%s.%s", pre, err->param);
	n = n < sizeof err->param - 1 ? n : sizeof err->param - 1; /* the longest key a family names fits */
	memcpy(err->param, full, n);
	err->param[n] = 0;
}

/* A number that must be > 0 (a scale, a scalar under a square root): 1 given, 0 absent, or an error. */
int plan_positive(struct cfg *c, const char *key, double *out)
{
	int rc = plan_num(c, key, out);
	return rc > 0 && !(*out > 0) ? plan_bad(c, key, "%s must be > 0", key) : rc;
}

/* A count of channels: an integer in [0, 65536] (checked before it becomes an int). */
int plan_channels(struct cfg *c, const char *key, double *out)
{
	int rc = plan_num(c, key, out);
	return rc > 0 && (*out != floor(*out) || *out < 0 || *out > 65536) ?
		       plan_bad(c, key, "%s must be an integer from 0 to 65536", key) : rc;
}

/* The first of keys the config has, as a positive integer: 1, 0 when none, or an error. */
static int first_int(struct cfg *c, const char *const *keys, int64_t *out, const char **which)
{
	for (; *keys; keys++) {
		double v = 0;
		int rc = plan_num(c, *keys, &v);
		if (rc < 0)
			return rc;
		if (rc == 0)
			continue;
		if (v != floor(v) || v < 1 || v > 1e15)
			return plan_bad(c, *keys, "%s must be a positive integer", *keys);
		*out = (int64_t)v;
		if (which)
			*which = *keys;
		return 1;
	}
	return 0;
}

int plan_read_dims(struct cfg *c, struct dims *d)
{
	static const char *const heads[] = {"num_attention_heads", "n_head", "num_heads", "n_heads", "encoder_attention_heads",
					    "attention_heads", NULL};
	static const char *const hidden[] = {"hidden_size", "n_embd", "d_model", "n_embed", "dim", "embed_dim", NULL};
	static const char *const layers[] = {"num_hidden_layers", "n_layer", "num_layers", "n_layers", "encoder_layers", "depth",
					     NULL};
	static const char *const positions[] = {"max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
						"n_ctx", NULL};
	static const char *const head_dim[] = {"head_dim", "d_kv", NULL}; /* d_kv: T5's head width */
	int64_t h = 0, w = 0, l = 0, hd = 0;
	int rc;
	memset(d, 0, sizeof *d);
	if ((rc = first_int(c, heads, &h, &d->heads_key)) <= 0)
		return rc < 0 ? rc : plan_bad(c, "num_attention_heads", "the config gives no number of attention heads");
	if ((rc = first_int(c, hidden, &w, &d->hidden_key)) < 0 || (rc = first_int(c, layers, &l, NULL)) < 0 ||
	    (rc = first_int(c, positions, &d->max_pos, NULL)) < 0 || (rc = first_int(c, head_dim, &hd, &d->head_dim_key)) < 0)
		return rc;
	if (!hd && (!w || w % h))
		return plan_bad(c, "hidden_size",
			   "no head_dim, and hidden_size (%lld) is not a multiple of num_attention_heads (%lld)", (long long)w,
			   (long long)h);
	if (h > 65536 || w > (1 << 24) || l > PE_PLAN_MAX_LAYERS || hd > 65536)
		return plan_bad(c, h > 65536 ? "num_attention_heads" : l > PE_PLAN_MAX_LAYERS ? "num_hidden_layers" : "hidden_size",
			   "beyond what a plan handles");
	d->heads = (int)h;
	d->hidden = (int)w;
	d->layers = (int)l;
	d->head_dim = hd ? (int)hd : (int)(w / h);
	if (!hd)
		d->head_dim_key = d->hidden_key; /* hidden_size / num_attention_heads */
	return 0;
}

/* The positions of every url: ?len=, else the config's context, else DEFAULT_LEN (warned). */
void plan_choose_len(struct cfg *c, const struct dims *d)
{
	if (c->opt->len > 0)
		c->len = c->opt->len;
	else if (d->max_pos > 0)
		c->len = d->max_pos;
	else {
		c->len = DEFAULT_LEN;
		pe_plan_warn(c->plan, "the config gives no context length (max_position_embeddings, n_positions, "
			     "max_seq_len): len is %d", DEFAULT_LEN);
	}
}


/* A query-scale table goes with the rotary tables of its model: the same positions, so its len is
 * theirs when a cap shortened them (the tables are finished first). */
int plan_finish_all(struct cfg *c)
{
	int64_t rope_len = c->len;
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < c->plan->nenc; i++) {
			struct pe_plan_enc *e = &c->plan->enc[i];
			int qs = !strcmp(e->kind, "query_scale");
			if (qs != pass)
				continue;
			int rc = pe_plan_finish_enc(c->plan, e, qs ? rope_len : c->len, c->opt, c->err);
			if (rc)
				return rc;
			if (e->len > 0 && e->len < rope_len && (!strcmp(e->kind, "rope") || !strcmp(e->kind, "mrope")))
				rope_len = e->len;
		}
	return 0;
}

int plan_use_family(struct cfg *c, const struct plan_family *fam)
{
	json_decref(c->defaults);
	c->defaults = NULL;
	c->fam = fam;
	if (fam->defaults && !(c->defaults = json_loads(fam->defaults, 0, NULL)))
		return pe_err_set(c->err, PE_ENOMEM, "", "out of memory");
	return 0;
}

/* A learned absolute table: the checkpoint holds it, so the encoding has no table, only its size. */
struct pe_plan_enc *plan_learned_enc(struct cfg *c, const struct dims *d, int64_t positions, const char *what)
{
	struct pe_plan_enc *e = pe_plan_enc_add(c->plan, "learned", NULL, NULL, "all");
	if (!e)
		return NULL;
	e->head_dim = d->head_dim;
	e->softmax_scale = 1 / sqrt((double)d->head_dim);
	e->url = strdup("/v1/learned");
	pe_plan_param(e, "positions", "%lld", (long long)positions);
	pe_plan_param(e, "dim", "%d", d->hidden);
	pe_plan_note(e, "learned absolute positions (%s): the checkpoint holds them; upload them with PUT "
		     "/v1/learned/{name} to serve and analyse them", what);
	return e;
}
