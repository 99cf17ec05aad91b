/* Who may write (auth.c): the bearer token of writes, or loopback clients when no token is
 * configured; and the answer to a refusal, which carries the Bearer challenge on a 401. */
#ifndef PE_HTTP_AUTH_H
#define PE_HTTP_AUTH_H

#include "http/internal.h"

/* May this request write? 0; PE_EUNAUTH (401: no credentials) or PE_EFORBIDDEN (403: the wrong
 * token, or a client that is not loopback when no auth_token is configured), err naming
 * Authorization. Thread: MHD. */
int pe_auth_check(struct req *r, struct MHD_Connection *conn, struct pe_err *err);
/* pe_http_problem, plus WWW-Authenticate: Bearer on a 401 (RFC 9110 §11.6.1). */
enum MHD_Result pe_auth_problem(struct req *r, struct MHD_Connection *conn, const struct pe_err *err);

#endif
