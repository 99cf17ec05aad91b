/* GET /v1/analysis/...: the analysis tables of the registry (similarity, ...), answered like every
 * table (table.c); /v1/analysis/similarity?encoding=learned:{name} is the similarity of a table
 * that lives in the store, not the core (learned_get.c), and a refused encoding lists that form too. */
#include "http/handler.h"
#include "http/learned_get.h"

#include <stdio.h>
#include <string.h>

#define PREFIX "/v1/analysis/"

static int match_cb(void *hctx, const char *url, const void **target)
{
	const struct pe_table_def *def = strncmp(url, PREFIX, strlen(PREFIX)) == 0 ? pe_table_find(url + 4) : NULL;
	*target = def;
	return def ? pe_http_def_route(def) : -1;
}

/* Whether similarity's encoding= names a stored table, as the one query parser reads encoding
 * under the learned declaration: the declaration depends on that value, so it is read before the
 * whole query. The declaration chosen then parses the whole query, so a repeated encoding is
 * refused as a repeat, and one with %00 (never taken here) as the table's. */
static int wants_learned(const struct req *r)
{
	const struct pe_table_def *def = r->target;
	struct pe_query q;
	struct pe_err err = {0};
	pe_query_init(&q, NULL, pe_learned_similarity_contract.extras, 0, def->name);
	for (size_t i = 0; i < r->nargs && !err.code; i++) {
		const struct pe_query_arg *a = &r->args[i];
		if (a->key_len == strlen("encoding") && memcmp(a->key, "encoding", a->key_len) == 0)
			pe_query_take(&q, a->key, a->key_len, a->value, a->value_len, &err);
	}
	const char *enc = pe_query_extra(&q, "encoding");
	int learned = enc && !strncmp(enc, "learned:", 8);
	pe_query_destroy(&q);
	return learned;
}

/* A table's declaration: its parameters, the output options, the cross checks. */
#define TABLE_DECLARATION .methods = "GET, HEAD", .target_params = 1, .output = 1, .finish = 1

static const struct pe_contract table_contract = {TABLE_DECLARATION};

/* Similarity's core table: the route takes a stored table's encoding too (learned:{name},
 * case-sensitive like the rest), so a refused encoding lists it. */
static const struct pe_contract similarity_contract = {
	TABLE_DECLARATION, .more_choices_param = "encoding", .more_choices = "learned:{name}"};

static int is_similarity(const struct req *r)
{
	const struct pe_table_def *def = r->target;
	return strcmp(def->name, "analysis/similarity") == 0;
}

/* A table's declaration, or the learned similarity's (learned_get.c). */
static const struct pe_contract *contract_cb(struct req *r, struct MHD_Connection *conn, const char *url)
{
	if (!is_similarity(r))
		return pe_contract_only(r, &table_contract);
	return pe_contract_only(r, wants_learned(r) ? &pe_learned_similarity_contract : &similarity_contract);
}

static enum MHD_Result finish_cb(struct req *r, struct MHD_Connection *conn)
{
	if (r->contract != &pe_learned_similarity_contract)
		return pe_table_request(r, conn, r->target);
	return pe_learned_similarity(r, conn, pe_query_extra(pe_contract_query(r), "encoding") + strlen("learned:"));
}

const struct pe_handler pe_analysis_handler = {
	.name = "analysis",
	.match_cb = match_cb,
	.contract_cb = contract_cb,
	.cors_methods = "GET, HEAD, OPTIONS",
	.finish_cb = finish_cb,
};
