/* Internal to the model plans: what the family rules (plan.c) call in out.c to fill an
 * encoding (parameters, notes, warnings) and to turn it into its table's canonical URL. */
#ifndef PE_PLAN_INTERNAL_H
#define PE_PLAN_INTERNAL_H

#include "posenc/plan.h"

/* A new encoding of kind on table (NULL: none), or NULL when the plan is full (PE_PLAN_MAX_ENC). */
struct pe_plan_enc *pe_plan_enc_add(struct pe_plan *plan, const char *kind, const char *table,
				    const char *len_key, const char *layers);
/* Append a parameter, a note, a warning (printf formats; silently dropped past their bounds or
 * when out of memory: they are words for a reader, and the bound is far above any family's). */
void pe_plan_param(struct pe_plan_enc *e, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void pe_plan_param_real(struct pe_plan_enc *e, const char *key, double v);
void pe_plan_note(struct pe_plan_enc *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void pe_plan_warn(struct pe_plan *plan, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The config key the parameter key of e was read from ("rope_scaling.factor"): a value the table
 * refuses is then a 422 naming it. Does nothing when e has no such parameter. */
void pe_plan_source(struct pe_plan_enc *e, const char *key, const char *source);
/* The shortest decimal that reads back as v (into buf of at least 32 bytes). */
void pe_plan_real_text(double v, char *buf);

/* The url of e for len positions (capped so the table holds at most o->max_elements), through
 * the table's own parameter checks and canonical form; e->attention_scaling from the table when
 * it reports one. Parameters the table refuses are PE_EUNPROCESSABLE in err naming the config
 * key they came from (pe_plan_source; the table's parameter when the plan chose the value). A
 * table this posenc lacks still gets a url (the parameters as planned) and a warning saying so.
 * 0, or an error in err. */
int pe_plan_finish_enc(struct pe_plan *plan, struct pe_plan_enc *e, int64_t len, const struct pe_plan_opts *o,
		       struct pe_err *err);

#endif
