/* The transform handler's job (transform.c) and its decoding on the worker (transform_decode.c):
 * the body as a tensor, the positions part, and the dtype conversions into the working dtype and
 * out of it. Private to src/http. */
#ifndef PE_HTTP_TRANSFORM_H
#define PE_HTTP_TRANSFORM_H

#include "http/oneshot.h"
#include "posenc/core.h"
#include "posenc/budget.h"

enum body_kind { BODY_NPY, BODY_BIN, BODY_JSON };

struct tjob {
	struct pe_oneshot os; /* first: the job as oneshot.c runs it */
	struct pe_params params;
	enum body_kind kind;
	struct pe_out out;   /* format and gzip decided on the MHD thread; dtype in the job */
	struct pe_shape raw_shape; /* shape= as parsed (has_shape: given) */
	int has_shape;
	char *dtype; /* the query's dtype= (a copy) or NULL */
	struct pe_held_body body; /* reserved on the budget by its usable size (budget NULL without one) */
	struct pe_held_body pos;  /* the positions part (npy; data NULL without one), on the same budget */
	int multipart;
};

/* The body as a tensor; *owned is set when t->data was allocated (JSON), else it points into the
 * body. Errors name the body or the query parameter at fault. */
int pe_tjob_decode(struct tjob *j, struct pe_tensor_mut *t, int *owned, struct pe_err *err);
/* The positions part: an npy int32/int64 tensor, aligned for its elements, errors naming it. */
int pe_tjob_decode_positions(struct tjob *j, struct pe_positions *pos, struct pe_err *err);
/* t in the working dtype wd: t itself when it already is (in place), else a converted copy. */
int pe_tjob_to_work(const struct pe_tensor_mut *t, enum pe_dtype wd, size_t n, struct pe_tensor_mut *x, void **alloc,
		    struct pe_budget *bg, struct pe_err *err);
/* Round the working result into the output dtype in place (narrower or equal) or into a new buffer. */
int pe_tjob_to_output(struct pe_tensor_mut *y, enum pe_dtype dt, size_t n, void **alloc, struct pe_budget *bg,
		      struct pe_err *err);

#endif
