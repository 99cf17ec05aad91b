/* Request framing per RFC 9112, decided from the request line and header fields alone: is there a
 * body, how is it delimited, and is the head one that a proxy and this server could read
 * differently (request smuggling)? Pure string functions, no MHD types, so the fuzzer
 * (tests/fuzz/fuzz_framing.c) and the unit tests drive exactly what the server runs.
 *
 * Use: pe_framing_init, pe_framing_header for every header field as received (name as the parser
 * split it, so "Content-Length " with a space before the colon arrives as such), then
 * pe_framing_finish. Refused heads are answered and the connection closed, the body unread. */
#ifndef PE_HTTP_FRAMING_H
#define PE_HTTP_FRAMING_H

#include <stddef.h>
#include <stdint.h>
#include "posenc/err.h"

enum pe_body_kind { PE_BODY_NONE, PE_BODY_LENGTH, PE_BODY_CHUNKED };

struct pe_framing {
	/* the verdict, once pe_framing_finish returned 0 */
	enum pe_body_kind body;
	uint64_t length;     /* Content-Length (PE_BODY_LENGTH; 0 is PE_BODY_NONE) */
	int expect_continue; /* Expect: 100-continue on HTTP/1.1 */
	/* collected field by field */
	unsigned n_length, n_te, n_host, n_type;
	int length_bad;      /* a Content-Length that is not 1*DIGIT, or past 2^64 - 1 */
	int length_overflow;
	int te_chunked;      /* the (only) Transfer-Encoding is exactly "chunked" */
	int te_blank;        /* a Transfer-Encoding that is "chunked" only once blanks are trimmed */
	int bad_field;       /* a field name that is not a token, or a control byte in a value */
	char bad_name[48];   /* that name, printable, for the problem's detail */
};

void pe_framing_init(struct pe_framing *f);
/* One header field; name and value need not be NUL-terminated. */
void pe_framing_header(struct pe_framing *f, const char *name, size_t name_len, const char *value,
		       size_t value_len);
/* Mark the field name malformed (400, param "header"): for what only the caller can see, such as
 * a field libmicrohttpd joined from an obs-fold or a value cut short by a NUL byte. */
void pe_framing_bad(struct pe_framing *f, const char *name, size_t name_len);
/* The verdict for a request of this version ("HTTP/1.1"; MHD admits HTTP/1.x only). 0: the request
 * may go on (f->body says what follows); else, with err filled: PE_EBODY (400, param
 * Content-Length or Transfer-Encoding), PE_EINVAL (400, param Host or Content-Type given twice,
 * or "header" for a malformed field), PE_ETOOBIG (413, a Content-Length past 64 bits) or PE_ENOTIMPL (501, a transfer coding
 * other than chunked). */
int pe_framing_finish(struct pe_framing *f, const char *version, struct pe_err *err);

#endif
