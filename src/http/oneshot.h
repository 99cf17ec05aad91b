/* The uncached POST job (oneshot.c): a handler whose answer depends on the request's body runs
 * one job on a worker under its waiter's deadline, then answers the resumed request from the
 * job's result. The handler keeps what differs: its body parsing, its run function, its nouns. */
#ifndef PE_HTTP_ONESHOT_H
#define PE_HTTP_ONESHOT_H

#include "http/internal.h"

/* What a job leaves for its request: a problem, or the answer's bytes and their reservation. */
struct pe_oneshot_result {
	struct pe_err err;  /* err.code != 0: answer with this problem */
	char *data;         /* the answer (freed with the response) */
	size_t len;
	struct pe_out out;  /* format, gzip and dtype of a tensor answer */
	char shape[160];    /* X-PE-Shape of a tensor answer */
	char extra_name[64], extra[64]; /* one more header when extra_name[0] */
	struct pe_budget *budget; /* data's reservation: held bytes given back on free */
	size_t held;
	struct pe_warm *warm; /* where data's block goes when the answer is done with it (else freed) */
};

/* The first member of a handler's job: the worker calls run, then free. */
struct pe_oneshot {
	struct pe_http *h;
	struct waiter *w;
	void (*run)(struct pe_oneshot *job, struct pe_oneshot_result *res);
	void (*free)(struct pe_oneshot *job);
};

/* How a handler's resumed request is answered. */
struct pe_oneshot_answer {
	const char *noun;         /* "the transform": "... did not finish within job_timeout", "... failed" */
	const char *content_type; /* a fixed type; NULL: a tensor's headers (out, X-PE-Shape, X-PE-Dtype) */
	void (*failure)(int code, struct pe_err *err); /* the job never answered; NULL: queue full / noun failed */
};

void pe_oneshot_result_free(void *res);
/* Submit job (its h, run and free set) for r and suspend r; answered with how. The job is
 * freed on every path. */
enum MHD_Result pe_oneshot_start(struct req *r, struct MHD_Connection *conn, struct pe_oneshot *job,
				 const struct pe_oneshot_answer *how);

/* The POST job of a table whose values come from the body (oneshot_table.c; mrope.c, axial.c,
 * timestep.c): the query's parameters, the answer's output options, the body held on the budget,
 * and which of the route's declared body types the Content-Type is. A handler's run parses the
 * body and calls pe_table_job_answer with the table's shape and how to fill it. */
struct pe_table_job {
	struct pe_oneshot os; /* first: the job as oneshot.c runs it */
	struct pe_params params;
	struct pe_out out;
	struct pe_held_body body; /* held on the response budget (pe_http_take_body) */
	int media;                /* index of the Content-Type in the route's contract media list */
};

/* Start r's job running run: a parameter of the query's extras given is refused (a 400 naming it:
 * "... does not apply to POST: the body gives <what>"), the output resolved among `offered`
 * formats, the body taken; then as pe_oneshot_start. */
enum MHD_Result pe_table_job_start(struct req *r, struct MHD_Connection *conn, unsigned offered, const char *what,
				   void (*run)(struct pe_oneshot *job, struct pe_oneshot_result *res));

/* fill(j, values, s, table, scratch, err) writes the elements of the table of shape s (dtype
 * j->out.dt) from the body's values as run parsed them; scratch: the bytes asked for besides the
 * table (NULL when none). 0, or the code with err set. */
typedef int (*pe_table_fill_cb)(struct pe_table_job *j, const void *values, const struct pe_shape *s, void *table,
				void *scratch, struct pe_err *err);
/* j's answer: the table of shape s filled by fill and encoded as j->out into res. Sized first:
 * elements against max_elements, then the body (as the budget holds it), `scratch` bytes, the
 * table and its encoding against the response budget (413 / 503 naming "body", or "format" for a
 * text answer), all but the body then taken as the job's share (pe_produce_share_open) before
 * anything is allocated. 0, or the code with res->err set. */
int pe_table_job_answer(struct pe_table_job *j, const struct pe_shape *s, size_t scratch, pe_table_fill_cb fill,
			const void *values, struct pe_oneshot_result *res);

#endif
