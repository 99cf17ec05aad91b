/* Output options of a tensor response (format, dtype, gzip, heatmap options), parsed once from
 * the query and headers, and the encoder that turns a computed tensor into response bytes. Shared
 * by every route that answers with a tensor (tables now; learned tables and transforms later). */
#ifndef PE_HTTP_OUTPUT_H
#define PE_HTTP_OUTPUT_H

#include <microhttpd.h>
#include "posenc/posenc.h"

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

/* Negotiate format (format= or Accept), dtype (fixed_dtype forces it), gzip (Accept-Encoding).
 * offered: mask of PE_FMT_BIT(...). */
int pe_out_resolve(struct pe_out *o, const struct pe_out_query *q, struct MHD_Connection *conn,
		   enum pe_dtype fixed_dtype, unsigned offered, struct pe_err *err);

/* "|f32|json|gz" into buf (the output part of a cache key). */
int pe_out_key(const struct pe_out *o, char *buf, size_t cap);

/* Encode t into out (appended). p (may be NULL) gives the JSON "encoding" and "params" fields;
 * par (may be NULL) lends threads to big JSON documents.
 * When o->fmt is bin, callers may compute straight into out instead (see pe_out_raw_direct). */
int pe_out_encode(const struct pe_out *o, const struct pe_parallel *par, const struct pe_params *p,
		  const struct pe_tensor_view *t, struct pe_buf *out, struct pe_err *err);
/* Formats whose body is the raw tensor bytes, which a producer can write straight into the buffer. */
int pe_out_raw_direct(const struct pe_out *o);

/* Content headers: Content-Type, Content-Encoding, Vary. */
void pe_out_headers(const struct pe_out *o, struct MHD_Response *resp);

#endif
