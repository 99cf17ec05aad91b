/* posenc error codes: one table defines every error once (name, HTTP status, type slug, title).
 *
 * Functions return 0 or a negative PE_E* code; constructors return NULL. Detail meant for the user
 * (which parameter, which byte of a body) goes into an optional struct pe_err out-parameter; only
 * the HTTP layer turns it into RFC 9457 problem+json. Every function here is thread-safe. */
#ifndef POSENC_ERR_H
#define POSENC_ERR_H

#include <stddef.h>

/* X(name, http_status, type_slug, title) */
#define PE_ERRNO_MAP(X)                                                              \
	X(INVAL, 400, "invalid-parameter", "Invalid parameter")                      \
	X(BODY, 400, "invalid-body", "Invalid request body")                         \
	X(UNAUTH, 401, "unauthorized", "Authentication required")                    \
	X(FORBIDDEN, 403, "forbidden", "Forbidden")                                  \
	X(NOTFOUND, 404, "not-found", "Not found")                                   \
	X(METHOD, 405, "method-not-allowed", "Method not allowed")                   \
	X(NOTACCEPT, 406, "not-acceptable", "Not acceptable")                        \
	X(TOOBIG, 413, "too-large", "Content too large")                             \
	X(MEDIATYPE, 415, "unsupported-media-type", "Unsupported media type")        \
	X(UNPROCESSABLE, 422, "unsupported-config", "Unsupported model configuration") \
	X(NOMEM, 500, "out-of-memory", "Out of memory")                              \
	X(INTERNAL, 500, "internal", "Internal error")                               \
	X(IO, 500, "io", "Input/output error")                                       \
	X(STORE, 500, "store-error", "Store error")                                  \
	X(BUSY, 503, "overloaded", "Service overloaded")                             \
	X(DRAINING, 503, "draining", "Service draining")                             \
	X(TIMEOUT, 503, "job-timeout", "Computation timed out")                      \
	X(UNAVAIL, 503, "store-unavailable", "Store unavailable")                   \
	X(NOSPACE, 507, "insufficient-storage", "Insufficient storage")              \
	X(NOTIMPL, 501, "not-implemented", "Not implemented")                        \
	X(HEADTOOBIG, 431, "header-too-large", "Request header fields too large")     \
	X(URITOOLONG, 414, "uri-too-long", "URI too long")

enum pe_errno {
	PE_OK = 0,
#define PE_ERR_ENUM_(name, status, slug, title) PE_E##name,
	PE_ERR_FIRST_ = -100,
	PE_ERRNO_MAP(PE_ERR_ENUM_)
#undef PE_ERR_ENUM_
	PE_ERR_LAST_
};

#define PE_ERR_PARAM_MAX 64
#define PE_ERR_DETAIL_MAX 256

/* Detail for the user. param is the offending query parameter, body field or config key ("" if none).
 * choices: 1 when detail ends with the list of the values param takes (a refused choice), so that
 * a caller that takes forms of its own besides them may append those; pe_err_set clears it. */
struct pe_err {
	int code;
	char param[PE_ERR_PARAM_MAX];
	char detail[PE_ERR_DETAIL_MAX];
	int choices;
};

/* Fill err (which may be NULL) and return code, so callers can write `return pe_err_set(...)`. */
int pe_err_set(struct pe_err *err, int code, const char *param, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
void pe_err_clear(struct pe_err *err);

int pe_err_status(int code);        /* HTTP status; 500 for unknown codes */
const char *pe_err_slug(int code);  /* the problem "type" suffix */
const char *pe_err_title(int code); /* the problem "title" */

#endif
