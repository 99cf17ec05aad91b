/* Model parts besides a decoder's text model: a multimodal config's text model (planned by the
 * family of text_config.model_type) before its vision tower (vision.c) and its audio tower (Gemma
 * 3n's conformer), and the encoders: Whisper's audio encoder, BART / OPT / RoBERTa learned tables
 * with their position offset, MPNet's relative buckets, DeBERTa-v2's log-bucketed relative
 * positions. Every encoding says its tower. */
#include "plan/rope.h"
#include "posenc/core.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Gemma 3n's audio conformer: each layer projects a fixed sinusoid (tensor2tensor's layout, sin
 * then cos over hidden_size channels) of the relative positions context_left - 1 down to
 * -context_right through its pos_proj into per-head keys, Transformer-XL's relative term. The
 * sinusoid is /v1/sinusoidal's t2t table over 0 .. context_left - 1 (context_right is 0 in the
 * published configs; a model looking ahead has negative positions this table does not hold). */
static int gemma3n_audio(struct cfg *c)
{
	double hidden = 1536, left = 13, right = 0;
	int rc;
	if ((rc = plan_int(c, "hidden_size", 2, 1 << 20, &hidden)) < 0 ||
	    (rc = plan_int(c, "conf_attention_context_left", 1, 1 << 20, &left)) < 0 ||
	    (rc = plan_int(c, "conf_attention_context_right", 0, 1 << 20, &right)) < 0)
		return rc;
	struct pe_plan_enc *e = pe_plan_enc_add(c->plan, "sinusoidal", right ? NULL : "sinusoidal", "len", "all");
	if (!e)
		return pe_err_set(c->err, PE_EINTERNAL, "", "too many encodings");
	e->tower = "audio";
	e->softmax_scale = NAN; /* the query's scale is learned: head_dim^-0.5 / ln 2 * softplus(per_dim_scale) */
	pe_plan_param(e, "dim", "%g", hidden);
	pe_plan_source(e, "dim", "hidden_size");
	pe_plan_param(e, "variant", "t2t");
	pe_plan_note(e, "relative positions %g down to %g (row p is distance p into the past): each conformer layer "
		     "projects them by its learned pos_proj into per-head keys (a Transformer-XL relative term)",
		     left - 1, right ? -right : 0.0);
	pe_plan_note(e, "q·k's scale is learned (head_dim^-0.5 / ln 2 times softplus(per_dim_scale)): no softmax_scale");
	if (right) {
		pe_plan_warn(c->plan, "audio_config.conf_attention_context_right %g: positions below 0 are not a table "
			     "posenc serves (sin(-x) = -sin(x) of its rows): no url", right);
		return 0;
	}
	c->len = (int64_t)left;
	if (c->opt->len > c->len)
		pe_plan_warn(c->plan, "sinusoidal (audio): len %lld capped to %lld, conf_attention_context_left (the "
			     "relative positions the conformer attends to, always that many)", (long long)c->opt->len,
			     (long long)c->len);
	return plan_finish_all(c);
}

/* The audio tower of a multimodal config, planned with audio_config's keys alone (errors name them
 * under it); a type posenc does not plan is a warning. */
static int audio_tower(struct cfg *c)
{
	const json_t *ac = plan_member(c->root, "audio_config"), *mt = plan_member(ac, "model_type");
	if (!ac)
		return 0;
	if (!json_is_string(mt) || strcmp(json_string_value(mt), "gemma3n_audio")) {
		pe_plan_warn(c->plan, "audio_config (%.40s): this audio tower is not planned",
			     json_is_string(mt) ? json_string_value(mt) : "no model_type");
		return 0;
	}
	static const struct plan_family tower = {.names = {"audio"}};
	struct cfg acfg = *c;
	acfg.fam = &tower;
	acfg.text = ac;
	acfg.prefix = "audio_config";
	acfg.no_root = 1;
	acfg.defaults = NULL;
	int rc = gemma3n_audio(&acfg);
	if (rc < 0 && c->err->code == PE_EUNPROCESSABLE)
		plan_name_text(&acfg, c->err);
	return rc;
}

/* A vision-language config: its text model as the family of text_config.model_type says, then
 * its vision tower and its audio tower. */
int plan_family_multimodal(struct cfg *c)
{
	const json_t *mt = c->text != c->root ? plan_member(c->text, "model_type") : NULL;
	const struct plan_family *tf = json_is_string(mt) ? c->find(json_string_value(mt)) : NULL;
	if (c->text == c->root)
		return plan_bad(c, "text_config", "a %s config plans its text model from text_config", c->plan->model_type);
	if (!tf || tf->build == plan_family_multimodal)
		return plan_bad(c, "text_config.model_type", "text_config.model_type '%.40s' is not a family posenc knows",
				json_is_string(mt) ? json_string_value(mt) : "(none)");
	int rc = plan_use_family(c, tf);
	if (rc < 0 || (rc = plan_family_build(c)) < 0)
		return rc;
	for (size_t i = 0; i < c->plan->nenc; i++)
		c->plan->enc[i].tower = tf->tower ? tf->tower : "text";
	if ((rc = plan_vision_tower(c)) < 0)
		return rc;
	return audio_tower(c);
}

/* ---- encoders ---- */

/* Where learned positions start: RoBERTa-style models number them from padding_idx + 1 (their
 * pad_token_id, 1 by default), BART / mBART / OPT from 2 (their embedding's offset). */
static int position_offset(struct cfg *c, const char **key)
{
	const char *mt = c->plan->model_type;
	*key = NULL;
	if (!strcmp(mt, "bart") || !strcmp(mt, "mbart") || !strcmp(mt, "opt"))
		return 2;
	if (strcmp(mt, "roberta") && strcmp(mt, "xlm-roberta") && strcmp(mt, "mpnet"))
		return 0;
	double pad = 1;
	*key = "pad_token_id";
	return plan_int(c, "pad_token_id", 0, 1 << 30, &pad) < 0 ? -1 : (int)pad + 1;
}

static struct pe_plan_enc *offset_learned(struct cfg *c, const struct dims *d, int64_t positions, const char *layers)
{
	const char *key;
	int off = position_offset(c, &key);
	if (off < 0)
		return NULL;
	struct pe_plan_enc *e = plan_learned_enc(c, d, positions, "position_embeddings");
	if (!e) {
		pe_err_set(c->err, PE_EINTERNAL, "", "too many encodings");
		return NULL;
	}
	e->layers = layers;
	pe_plan_param(e, "position_offset", "%d", off);
	pe_plan_source(e, "position_offset", key);
	if (off)
		pe_plan_note(e, "position p is row p + %d of the table (%s): its first %d rows are never used for text", off,
			     key ? "padding_idx + 1" : "the embedding's offset", off);
	return e;
}

/* BERT-like encoders: a learned table (RoBERTa's offset), and MPNet's relative buckets. */
int plan_family_encoder(struct cfg *c)
{
	struct dims d;
	int rc = plan_read_dims(c, &d), sin = 0;
	if (rc < 0 || (rc = plan_bool(c, "sinusoidal_pos_embds", &sin)) < 0)
		return rc;
	plan_choose_len(c, &d);
	const char *key;
	int off = position_offset(c, &key);
	if (off < 0)
		return -1;
	if (sin) { /* DistilBERT's fixed table: sin on even columns, cos on odd */
		struct pe_plan_enc *e = pe_plan_enc_add(c->plan, "sinusoidal", "sinusoidal", "len", "all");
		if (!e)
			return pe_err_set(c->err, PE_EINTERNAL, "", "too many encodings");
		e->head_dim = d.head_dim;
		e->softmax_scale = 1 / sqrt((double)d.head_dim);
		pe_plan_param(e, "dim", "%d", d.hidden);
		pe_plan_source(e, "dim", d.hidden_key);
		pe_plan_param(e, "variant", "vaswani");
	} else if (!offset_learned(c, &d, d.max_pos ? d.max_pos - off : c->len, "all")) {
		return -1;
	}
	if (!strcmp(c->plan->model_type, "mpnet")) {
		double nb = 32;
		if ((rc = plan_int(c, "relative_attention_num_buckets", 2, 65536, &nb)) < 0)
			return rc;
		struct pe_plan_enc *e = pe_plan_enc_add(c->plan, "relative/t5", "relative/t5", "q_len", "all");
		if (!e)
			return pe_err_set(c->err, PE_EINTERNAL, "", "too many encodings");
		e->head_dim = d.head_dim;
		e->softmax_scale = 1 / sqrt((double)d.head_dim);
		pe_plan_param_real(e, "num_buckets", nb);
		pe_plan_source(e, "num_buckets", "relative_attention_num_buckets");
		pe_plan_param(e, "max_distance", "128");
		pe_plan_param(e, "bidirectional", "1");
		pe_plan_note(e, "bucket indices into the learned relative_attention_bias [num_buckets, %d heads], shared by the "
			     "layers and added to the scaled scores beside the absolute table", d.heads);
	}
	return plan_finish_all(c);
}

/* BART, mBART (encoder and decoder) and OPT (decoder): learned tables from row 2. */
int plan_family_seq2seq(struct cfg *c)
{
	struct dims d;
	int rc = plan_read_dims(c, &d);
	if (rc < 0)
		return rc;
	plan_choose_len(c, &d);
	int dec_only = !strcmp(c->plan->model_type, "opt");
	for (int k = dec_only; k < 2; k++)
		if (!offset_learned(c, &d, d.max_pos ? d.max_pos : c->len, dec_only ? "all" : k ? "decoder" : "encoder"))
			return -1;
	return 0;
}

/* Whisper: the audio encoder's fixed sinusoids (tensor2tensor's layout: sin of every timescale,
 * then cos) over max_source_positions frames, the text decoder's learned table. */
int plan_family_whisper(struct cfg *c)
{
	struct dims d;
	double src = 1500, tgt = 448;
	int rc = plan_read_dims(c, &d);
	if (rc < 0 || (rc = plan_int(c, "max_source_positions", 1, 1 << 24, &src)) < 0 ||
	    (rc = plan_int(c, "max_target_positions", 1, 1 << 24, &tgt)) < 0)
		return rc;
	struct pe_plan_enc *e = pe_plan_enc_add(c->plan, "sinusoidal", "sinusoidal", "len", "encoder");
	if (!e)
		return pe_err_set(c->err, PE_EINTERNAL, "", "too many encodings");
	e->tower = "audio";
	e->head_dim = d.head_dim;
	e->softmax_scale = 1 / sqrt((double)d.head_dim);
	pe_plan_param(e, "dim", "%d", d.hidden);
	pe_plan_source(e, "dim", d.hidden_key);
	pe_plan_param(e, "variant", "t2t");
	pe_plan_note(e, "the encoder's fixed table over max_source_positions (%g) frames of 20 ms", src);
	c->len = c->opt->len > 0 && c->opt->len < (int64_t)src ? c->opt->len : (int64_t)src;
	if (c->opt->len > (int64_t)src)
		pe_plan_warn(c->plan, "sinusoidal (encoder): len %lld capped to %lld, max_source_positions (the encoder's "
			     "frames, always that many)", (long long)c->opt->len, (long long)src);
	if ((rc = plan_finish_all(c)) < 0)
		return rc;
	struct pe_plan_enc *l = plan_learned_enc(c, &d, (int64_t)tgt, "the decoder's embed_positions");
	if (!l)
		return pe_err_set(c->err, PE_EINTERNAL, "", "too many encodings");
	l->layers = "decoder";
	l->tower = "text";
	return 0;
}

/* DeBERTa-v2 / v3: log-bucketed relative positions (make_log_bucket_position) indexing the
 * relative embeddings; q·k scaled by (head_dim · (1 + the pos_att_type terms))^-1/2. */
int plan_family_deberta(struct cfg *c)
{
	struct dims d;
	double buckets = -1, maxrel = -1;
	int rc = plan_read_dims(c, &d);
	if (rc < 0 || (rc = plan_int(c, "position_buckets", -1, 1 << 20, &buckets)) < 0 ||
	    (rc = plan_int(c, "max_relative_positions", -1, 1 << 30, &maxrel)) < 0)
		return rc;
	plan_choose_len(c, &d);
	if (maxrel < 1)
		maxrel = d.max_pos ? (double)d.max_pos : 512;
	const json_t *pat = plan_get(c, "pos_att_type");
	int terms = 0;
	if (json_is_string(pat))
		terms = (strstr(json_string_value(pat), "c2p") != NULL) + (strstr(json_string_value(pat), "p2c") != NULL);
	/* the table's url only where this posenc serves it */
	const char *table = pe_table_find("relative/deberta") ? "relative/deberta" : NULL;
	struct pe_plan_enc *e = pe_plan_enc_add(c->plan, "relative/deberta", table, "q_len", "all");
	if (!e)
		return pe_err_set(c->err, PE_EINTERNAL, "", "too many encodings");
	e->head_dim = d.head_dim;
	/* the model divides by a float32 sqrt(head_dim * (1 + terms)) */
	e->softmax_scale = 1 / (double)sqrtf((float)d.head_dim * (float)(1 + terms));
	if (buckets > 0) {
		pe_plan_param_real(e, "position_buckets", buckets);
		pe_plan_source(e, "position_buckets", "position_buckets");
	}
	pe_plan_param_real(e, "max_relative_positions", maxrel);
	pe_plan_source(e, "max_relative_positions", "max_relative_positions");
	pe_plan_note(e, "int32 relative positions (log-bucketed past position_buckets / 2) indexing rel_embeddings; "
		     "softmax_scale counts the %d position terms of pos_att_type", terms);
	if (!table)
		pe_plan_note(e, "this posenc does not serve GET /v1/relative/deberta: no url");
	return plan_finish_all(c);
}
