/* multipart/form-data request bodies (multipart.c): libmicrohttpd's MHD_PostProcessor splits the
 * body into parts as it arrives; this layer keeps the parts a handler asked for by name, each in a
 * bounded buffer on the response budget, and refuses everything else with the part's name. */
#ifndef PE_HTTP_MULTIPART_H
#define PE_HTTP_MULTIPART_H

#include "http/internal.h"

#define PE_MP_MAX_PARTS 4
/* MHD_PostProcessor's own buffer: the longest part header line, and twice the boundary. */
#define PE_MP_PP_BUFFER 8192
/* What a post processor holds besides the parts: its buffer and at most four copies of header
 * values (name, filename, type, transfer encoding), each shorter than the buffer. */
#define PE_MP_PP_BYTES (5 * PE_MP_PP_BUFFER)
#define PE_MP_TYPE_MAX 64

struct pe_mp_part {
	const char *name;     /* as the handler wants it (a static string) */
	size_t max;           /* largest size of its bytes (413 beyond) */
	struct pe_buf buf;    /* its bytes, on the budget */
	const char *types;    /* the Content-Types it may have, "a, b, c" (none is fine too) */
	char type[PE_MP_TYPE_MAX]; /* its Content-Type, truncated; "" when it has none */
	int seen;
};

/* Where the boundary scan (multipart.c) is in the body, as MHD's parser reads it. */
enum pe_mp_phase { PE_MP_PREAMBLE, PE_MP_AFTER_DELIM, PE_MP_HEADERS, PE_MP_VALUE, PE_MP_DONE };

struct pe_mp {
	struct pe_mp_part part[PE_MP_MAX_PARTS];
	size_t nparts;
	struct pe_mp_part *cur;  /* the part whose bytes arrive now */
	/* the boundary scan: "\r\n--" boundary, how much of it matched, the delimiter lines MHD
	 * was given in full, how many of them the callbacks had seen, and the part headers' scan */
	char delim[PE_MP_PP_BUFFER / 2 + 4];
	size_t dlen, matched;
	uint64_t delims, cb_delims;
	enum pe_mp_phase phase;
	size_t line_len, kw;     /* the header line's length; how much of "multipart/" it matched */
	size_t head_bytes;       /* bytes of the part's header block so far (PE_MP_PP_BUFFER at most) */
	int skip_lf, dashes, nested;
	uint64_t fed, max_body;  /* body bytes given to pe_mp_feed, and their limit */
	uint64_t declared;       /* the body's Content-Length; 0 when chunked */
	struct pe_budget *budget;
	size_t held;             /* PE_MP_PP_BYTES while a post processor lives */
	struct MHD_PostProcessor *pp;
	struct pe_err err;       /* the first failure */
	int past_budget;         /* it was that the parts can never fit the whole budget (a 413) */
};

/* Is this Content-Type multipart/form-data (parameters aside)? */
int pe_mp_is_form(const char *content_type);
void pe_mp_init(struct pe_mp *m, uint64_t max_body, struct pe_budget *budget);
/* A part the caller wants, by name, of at most max bytes, with no Content-Type or one of types
 * ("application/x-npy, application/octet-stream": media types, parameters aside); any other
 * name or type is refused. */
void pe_mp_want(struct pe_mp *m, const char *name, size_t max, const char *types);
/* The post processor over conn's Content-Type (its boundary), for a body of declared bytes
 * (framing's Content-Length; 0 when chunked). 0, or a code with err set (400 naming
 * Content-Type; 503 / 413 when the budget cannot hold the processor). */
int pe_mp_begin(struct pe_mp *m, struct MHD_Connection *conn, uint64_t declared, struct pe_err *err);
/* Body bytes as they arrive. 0, or a code with m->err set; the parts are then released. */
int pe_mp_feed(struct pe_mp *m, const char *data, size_t n);
/* The body has ended: 0 when the closing boundary was read, else a code with err set. */
int pe_mp_end(struct pe_mp *m, struct pe_err *err);
/* A wanted part that arrived, or NULL. */
struct pe_mp_part *pe_mp_get(struct pe_mp *m, const char *name);
/* The post processor, the parts' bytes and their reservations (any time; twice is fine). */
void pe_mp_destroy(struct pe_mp *m);
/* The post processor's data callback (an MHD_PostDataIterator, cls = the struct pe_mp): where
 * the parts are assembled; public for the fuzz target, which drives it without a connection. */
enum MHD_Result pe_mp_data_cb(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
			      const char *content_type, const char *transfer_encoding, const char *data,
			      uint64_t off, size_t size);

#endif
