/* /v1/learned: user-uploaded learned position tables (issue 6). Not implemented yet: every request
 * is answered 404 so the routes exist without pretending to work. */
#include "http/internal.h"

enum MHD_Result pe_learned_begin(struct req *r, struct MHD_Connection *conn)
{
	struct pe_err err = {0};
	pe_err_set(&err, PE_ENOTFOUND, "", "learned tables are not available yet");
	r->answered = 1;
	return pe_http_problem(r, conn, &err);
}

enum MHD_Result pe_learned_request(struct req *r, struct MHD_Connection *conn)
{
	return pe_learned_begin(r, conn);
}
