/* HTTP assertions shared by the end-to-end tests (responses read with libcurl, support/pe_daemon.h)
 * and the fault tests (responses read from raw sockets, tests/support/pe_fault.h): header lookup, the
 * RFC 9457 problem document check, a Prometheus sample. Predicates only, no libcheck: each caller
 * turns a false answer into its own kind of failure, with the reason these functions write. */
#ifndef PE_TEST_HTTP_H
#define PE_TEST_HTTP_H

#include <stddef.h>

/* Value of header name (case-insensitive) in a raw header block ("Name: value" lines separated by
 * CRLF; a status line and several blocks are fine, the first match wins) into buf, without
 * leading spaces, truncated to cap - 1 bytes; NULL if absent. */
const char *pe_http_header(const char *head, const char *name, char *buf, size_t cap);

/* Is this response an RFC 9457 problem document for want_status: status == want_status, Content-Type
 * exactly application/problem+json, a JSON object body with "status" == want_status, string "title"
 * and "detail", a "type" under https://posenc.dev/problems/, and "param" == param when param is not
 * NULL? 1 if so; 0 with the first reason it is not in why. content_type may be NULL (absent). */
int pe_http_is_problem(long status, const char *content_type, const char *body, size_t len, long want_status,
		       const char *param, char *why, size_t cap);

/* The first sample of metric name in a Prometheus text exposition (a line that starts with name
 * followed by a space or '{'): 1 with *v set, 0 if there is none. */
int pe_http_metric(const char *text, const char *name, double *v);

#endif
