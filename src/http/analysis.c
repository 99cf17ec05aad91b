/* GET /v1/analysis/...: the analysis tables of the registry (similarity, ...), answered like every
 * table (table.c); /v1/analysis/similarity?encoding=learned:{name} is the similarity of a table
 * that lives in the store, not the core (learned_get.c). */
#include "http/handler.h"
#include "http/learned_get.h"

#include <string.h>

#define PREFIX "/v1/analysis/"

static int match_cb(void *hctx, const char *url, const void **target)
{
	const struct pe_table_def *def = strncmp(url, PREFIX, strlen(PREFIX)) == 0 ? pe_table_find(url + 4) : NULL;
	*target = def;
	return def ? pe_http_def_route(def) : -1;
}

/* The stored table's name when the request asks for a learned table's similarity, else NULL. */
static const char *learned_name(const struct req *r, struct MHD_Connection *conn)
{
	const struct pe_table_def *def = r->target;
	const char *enc = !strcmp(def->name, "analysis/similarity") ? pe_contract_query_value(r, "encoding") : NULL;
	return enc && !strncmp(enc, "learned:", 8) ? enc + 8 : NULL;
}

static const struct pe_contract table_contract = {.methods = "GET, HEAD", .target_params = 1, .output = 1, .finish = 1};

/* A table's declaration, or the learned similarity's (learned_get.c). */
static const struct pe_contract *contract_cb(struct req *r, struct MHD_Connection *conn, const char *url)
{
	return pe_contract_only(r, learned_name(r, conn) ? &pe_learned_similarity_contract : &table_contract);
}

static enum MHD_Result finish_cb(struct req *r, struct MHD_Connection *conn)
{
	const char *name = learned_name(r, conn);
	return name ? pe_learned_similarity(r, conn, name) : pe_table_request(r, conn, r->target);
}

const struct pe_handler pe_analysis_handler = {
	.name = "analysis",
	.match_cb = match_cb,
	.contract_cb = contract_cb,
	.cors_methods = "GET, HEAD, OPTIONS",
	.finish_cb = finish_cb,
};
