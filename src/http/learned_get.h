/* Reading learned tables (learned_get.c), for the learned-table handler (learned.c: routes, the
 * list, writes) and the analysis handler (the similarity of a stored table). */
#ifndef PE_HTTP_LEARNED_GET_H
#define PE_HTTP_LEARNED_GET_H

#include "http/internal.h"
#include "posenc/store.h"

/* GET /v1/learned/{name} (name checked). */
enum MHD_Result pe_learned_get(struct req *r, struct MHD_Connection *conn, const char *name);
/* /v1/analysis/similarity?encoding=learned:{name}: the stored table's position similarity. */
enum MHD_Result pe_learned_similarity(struct req *r, struct MHD_Connection *conn, const char *name);
/* The declarations of both (contract.h): the resampling parameters and the output options; the
 * similarity's also takes encoding=learned:{name}. */
extern const struct pe_contract pe_learned_get_contract, pe_learned_similarity_contract;
void pe_learned_hex(const uint8_t *p, size_t n, char *out); /* 2n hex digits and a NUL */

#endif
