/* RFC 9457 problem+json responses built from a struct pe_err. */
#ifndef PE_HTTP_PROBLEM_H
#define PE_HTTP_PROBLEM_H

#include <microhttpd.h>
#include "posenc/err.h"

#define PE_PROBLEM_TYPE_BASE "https://posenc.dev/problems/"
/* Retry-After of every 503 (overloaded, draining, job timeout, and /readyz while draining). */
#define PE_HTTP_RETRY_AFTER "1"

/* A fresh response (caller queues and destroys it); *status gets the HTTP status. Adds Allow for
 * 405 (allow may be NULL) and Retry-After for 503; *len gets the body's length. NULL only when out of memory. */
struct MHD_Response *pe_problem_response(const struct pe_err *err, const char *allow, int *status, size_t *len);
/* The problem document alone (malloc'd, NUL-terminated, caller frees); NULL when out of memory. */
char *pe_problem_json(const struct pe_err *err, int *status, size_t *len);

#endif
