/* posenc output: what a client gets and how it is encoded, without any HTTP library's types, so
 * that posencd and the posenc CLI decide a request's output alike.
 *
 * Negotiation: format= beats Accept (quality values honoured, PE_ENOTACCEPT when nothing offered
 * is acceptable), dtype= (tables with a fixed dtype force it), gzip from Accept-Encoding (JSON and
 * CSV only), cmap= and scale= for format=png. If-None-Match matching for conditional requests.
 * Encoding: a computed tensor into response bytes in the chosen format. All functions are pure
 * (no shared state) and thread-safe. */
#ifndef PE_OUTPUT_H
#define PE_OUTPUT_H

#include "posenc/posenc.h"

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

struct pe_out {
	enum pe_format fmt;
	enum pe_dtype dt;
	int gzip;     /* Content-Encoding: gzip (json and csv only) */
	int cmap;     /* format=png: enum pe_cmap */
	int scale;    /* format=png: pixels per cell, 0 = automatic */
};

/* The query parameters this module owns ("format", "dtype", and for png "cmap", "scale"); the
 * rest belong to the table. */
int pe_out_is_param(const char *key);

struct pe_out_query {
	const char *format, *dtype, *cmap, *scale; /* NULL when absent */
};
/* Record one owned parameter (repeats and empty values are errors naming it). */
int pe_out_take(struct pe_out_query *q, const char *key, const char *value, struct pe_err *err);

/* The dtype of a table's output: s (dtype=, may be NULL: f32) or, for a table with a fixed dtype
 * (fixed != PE_DTYPE_COUNT_), that one; bf16 is refused with npy (no NumPy spelling). */
int pe_out_pick_dtype(const char *s, enum pe_dtype fixed, enum pe_format fmt, enum pe_dtype *dt,
		      struct pe_err *err);

/* Negotiate format (format= or accept), dtype (fixed_dtype forces it), gzip (accept_encoding).
 * accept and accept_encoding are the request's headers (NULL when absent). offered: mask of
 * PE_FMT_BIT(...). */
int pe_out_resolve(struct pe_out *o, const struct pe_out_query *q, const char *accept, const char *accept_encoding,
		   enum pe_dtype fixed_dtype, unsigned offered, struct pe_err *err);

/* "|f32|json|gz" into buf (the output part of a cache key). */
int pe_out_key(const struct pe_out *o, char *buf, size_t cap);

/* Encode t into out (appended). p (may be NULL) gives the JSON "encoding" and "params" fields;
 * par (may be NULL) lends threads to big JSON documents.
 * When o->fmt is bin, callers may compute straight into out instead (see pe_out_raw_direct). */
int pe_out_encode(const struct pe_out *o, const struct pe_parallel *par, const struct pe_params *p,
		  const struct pe_tensor_view *t, struct pe_buf *out, struct pe_err *err);
/* The most pe_out_encode holds on out's budget at once for a table of shape s encoded as o says:
 * the writer's bound (pe_<format>_bound) as a buffer holds it (pe_buf_bound); with gzip, the plain
 * text's buffer and its compressed copy together. params: as pe_json_bound's (JSON only); png: the
 * picture's layout (format=png; NULL there gives SIZE_MAX). Saturates at SIZE_MAX. */
size_t pe_out_bound(const struct pe_out *o, const struct pe_shape *s, size_t params, const struct pe_png_layout *png);
/* What a table's job holds on the response budget at most, as the server's 413 check counts it:
 * for bin and npy (not bf16) the output's bound `out` and the compute's scratch together; else
 * the raw table beside the larger of the scratch and the output (encode's order). Saturates. */
uint64_t pe_out_job_need(const struct pe_out *o, const struct pe_shape *s, uint64_t scratch, uint64_t out);
/* Room for any cache key of p's parameters (a list value at most 25 characters an element, a text
 * its own length, 4096 for the path and the output options). */
size_t pe_out_key_room(const struct pe_params *p);
/* pe_out_job_need for the table of p (finished) answered as o (not png), its JSON head sized for
 * the longest key p can have; *out: the output's bound (what max_response_bytes must hold).
 * UINT64_MAX when the table cannot be sized. Lets a caller outside the server (model plans) ask
 * whether a url's answer fits limits without the server. */
uint64_t pe_out_table_need(const struct pe_params *p, const struct pe_out *o, uint64_t *out);
/* Formats whose body is the raw tensor bytes, which a producer can write straight into the buffer. */
int pe_out_raw_direct(const struct pe_out *o);

#endif
