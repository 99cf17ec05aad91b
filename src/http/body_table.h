/* A table answered to a POST whose body replaces some of its query parameters (body_table.c):
 * POST /v1/rope/mrope (positions) and POST /v1/rope/axial (ids). The job, its refusal of the
 * replaced parameters, its size check and its answer are the same for both; a handler keeps its
 * body parsing and its computation (its run function). */
#ifndef PE_HTTP_BODY_TABLE_H
#define PE_HTTP_BODY_TABLE_H

#include "http/handler.h"
#include "http/oneshot.h"

/* The job: the table's parameters from the query, the output asked for, the body held. */
struct pe_body_table {
	struct pe_oneshot os; /* first: the job as oneshot.c runs it */
	struct pe_params params;
	struct pe_out out;
	struct pe_held_body body; /* held on the response budget (pe_http_take_body) */
};

/* Start r's job: refuse a replaced parameter given (the contract's extras: "%s does not apply to
 * POST: the body gives the <gives>"), resolve the output among offered, take the body, run `run`
 * on a worker and answer with the table. */
enum MHD_Result pe_body_table_post(struct req *r, struct MHD_Connection *conn, unsigned offered, const char *gives,
				   void (*run)(struct pe_oneshot *, struct pe_oneshot_result *));
/* Could table s and its answer ever fit? Elements against max_elements, bytes (the body as held,
 * `more_bytes` of the job's own, the table, the encoded answer) against the response budget.
 * *more: what the job takes on the budget besides the body (its share). Refusals name `body`
 * (`format` for a text answer over the budget). */
int pe_body_table_check_size(struct pe_body_table *j, const struct pe_shape *s, uint64_t more_bytes, uint64_t *more,
			     struct pe_err *err);
/* Encode table t into out (on share bg) and fill res with it; the share hands the answer over. */
int pe_body_table_answer(struct pe_body_table *j, const struct pe_tensor_view *t, struct pe_buf *out,
			 struct pe_budget *bg, struct pe_oneshot_result *res, struct pe_err *err);
/* The problem of a failed run that set none (rc != 0). */
void pe_body_table_fail(int rc, struct pe_err *err);

#endif
