/* Content negotiation and conditional requests: which format a client gets (format= beats Accept,
 * quality values honoured, 406 when nothing offered is acceptable) and If-None-Match matching.
 * Pure string functions, no MHD types, so they are unit-tested directly. */
#ifndef PE_HTTP_NEGOTIATE_H
#define PE_HTTP_NEGOTIATE_H

#include "posenc/err.h"
#include "posenc/tensor.h"

#define PE_FMT_BIT(f) (1u << (f))

/* Pick the response format. format_param (may be NULL) wins; else the Accept header (may be NULL:
 * JSON). offered is a mask of PE_FMT_BIT(...). Returns 0, PE_EINVAL (unknown format= value, param
 * "format") or PE_ENOTACCEPT (nothing offered is acceptable). */
int pe_negotiate_format(const char *format_param, const char *accept, unsigned offered, enum pe_format *out,
			struct pe_err *err);

/* Does Accept-Encoding (may be NULL) allow gzip? "gzip", "x-gzip" or "*" with q > 0, unless gzip
 * itself is listed with q=0. */
int pe_accepts_gzip(const char *accept_encoding);

/* Does an If-None-Match header value match this strong etag (quoted, e.g. "\"abc\"")? Weak
 * comparison as RFC 9110 requires for If-None-Match; "*" matches anything. */
int pe_etag_matches(const char *if_none_match, const char *etag);

#endif
