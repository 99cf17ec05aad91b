/* multipart/form-data bodies, parsed by libmicrohttpd's MHD_PostProcessor as they arrive; the
 * parts are assembled here (pe_mp_data_cb), each in a pe_buf bounded by the handler's maximum and
 * reserved on the response budget before it grows, so a multipart body costs what its wanted
 * parts hold. A buffer doubles as it grows, but with a Content-Length never past what the rest of
 * the body could add to it: a body held half sent costs about what was sent, not twice that.
 *
 * What a hostile body meets:
 *  - the body's bytes are counted against max_body_bytes (chunked ones included): 413 past it;
 *  - a part's header lines over PE_MP_PP_BUFFER together: 400 naming body, before MHD reads past
 *    them (MHD moves its buffer once per header line: a block of 2-byte lines cost ~360 ns a byte
 *    on the HTTP thread);
 *  - a part header line longer than PE_MP_PP_BUFFER, a boundary that does not fit it, garbage
 *    between parts, data after the closing boundary: MHD's parser fails, a 400 naming body;
 *  - a part with another name, or without one, or one given twice (empty or not): a 400 naming
 *    that part, at once, its bytes never kept (MHD passes part headers one line at a time through
 *    its fixed buffer, so many of them cost time, not memory); a Content-Type the part does not
 *    take, or multipart/mixed: a 400 naming the part and saying what it takes;
 *  - a part larger than its maximum: 413 naming it; a budget that cannot hold it now: 503; one
 *    that never could (the parts and the post processor's reservation past the whole budget): 413
 *    naming body, by the body's whole size as for a plain body (pe_http_body_past_budget);
 *  - a transfer encoding other than binary / 7bit / 8bit (base64 would be read as raw bytes): 400;
 *  - a body that ends before its closing boundary: 400 at the end (pe_mp_end).
 * The server's lingering close and slow-client rules apply to the rest of the body as to any.
 *
 * Where a part begins: MHD calls the iterator at least once for every part, empty ones included
 * (0.9.75: a first call of size 0), with the value's offset, and says nothing else about where a
 * part ends: a second part of the same name also starts at offset 0, and so does the rest of a
 * part whose first call had no bytes yet (MHD held them back to look for the boundary), and a
 * part of type multipart/mixed is split by MHD into nested values, each from offset 0 under the
 * outer name. The callback's arguments cannot tell these apart (tests/http/test_multipart.c shows
 * it), so pe_mp_feed scans the body for the boundary itself ("\r\n--" boundary, the one string
 * MHD ends a value at) and gives MHD the body in pieces that end right after each delimiter: a
 * callback after a delimiter was fed is the first of a new part, any other continues the current
 * one. The scan also reads each part's header lines for "multipart/" and refuses a nested
 * multipart (MHD would take it apart under one name). It adds no parser of parts: MHD still
 * finds the parts, names and values; the scan only tells the callback where MHD is.
 * MHD never sees a preamble: it is given the body from the first delimiter line the scan found,
 * one that starts the body or a line (so "preamble--boundary", which MHD alone would take for the
 * first delimiter, is preamble to both; and a preamble of dashes cannot make MHD move its 8 KiB
 * buffer once per byte on the HTTP thread). A body whose data holds
 * "\r\n--" boundary right at its start is refused: the scan and MHD could disagree, and RFC 2046
 * forbids it. So is a boundary line among a part's
 * header lines: MHD reads it as one more header line, while the scan would count a new part (and
 * after "--boundary--" there, stop scanning while MHD went on to further parts). */
#include "http/multipart.h"
#include "http/media.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int pe_mp_is_form(const char *ctype) { return pe_media_match(ctype, "multipart/form-data") == 0; }

void pe_mp_init(struct pe_mp *m, uint64_t max_body, struct pe_budget *budget)
{
	memset(m, 0, sizeof *m);
	m->max_body = max_body;
	m->budget = budget;
}

void pe_mp_want(struct pe_mp *m, const char *name, size_t max, const char *types)
{
	if (m->nparts >= PE_MP_MAX_PARTS)
		return;
	struct pe_mp_part *p = &m->part[m->nparts++];
	p->name = name;
	p->max = max;
	p->types = types;
	pe_buf_init(&p->buf, max);
	pe_buf_set_budget(&p->buf, m->budget);
}

/* MHD_PostProcessor takes the boundary as everything after the first "boundary=" of the
 * Content-Type, matched case-sensitively (quotes stripped): a parameter after it
 * (`boundary=B; charset=utf-8`), or that text inside another parameter's value, would make it look
 * for a boundary the body does not have, and the whole body would pass as a preamble. Such a
 * header is refused rather than misread. The boundary parameter is found as RFC 9110 §8.3.1 reads
 * parameters (media.c: its name in any case), and its name is written in lower case where it
 * stands, so that MHD's search finds "BOUNDARY=" too; then MHD must find it there, as the last
 * parameter, one token or one quoted string without quotes or escapes inside. at: the
 * parameter's name; v, len: its value. */
static int boundary_misread(const char *ctype, const char *at, const char *v, size_t len, int quoted)
{
	if (strstr(ctype, "boundary=") != at || v[len + (quoted ? 1 : 0)] != 0)
		return 1;
	return quoted && (memchr(v, '"', len) != NULL || memchr(v, '\\', len) != NULL);
}

/* Empty parameters after the boundary ("boundary=B;", which RFC 9110 allows) cut off where they
 * start, in the header's own bytes, so that MHD's boundary ends where the parameter does. */
static void drop_empty_tail(const char *v, size_t len, int quoted)
{
	char *end = (char *)v + len + (quoted ? 1 : 0);
	if (end[strspn(end, "; \t")] == 0)
		*end = 0;
}

/* The delimiter MHD ends a value at, "\r\n--" and the boundary. The scan starts as if a line
 * break came before the body, so that "--boundary" opens it. */
static void boundary_copy(struct pe_mp *m, const char *b, size_t n)
{
	memcpy(m->delim, "\r\n--", 4);
	memcpy(m->delim + 4, b, n);
	m->dlen = n + 4;
	m->matched = 2;
	m->phase = PE_MP_PREAMBLE;
}

/* MHD takes a boundary of 2 to PE_MP_PP_BUFFER / 2 - 1 bytes as written, its quotes counted (so
 * RFC 2046's one-byte boundary only between quotes). */
#define BOUNDARY_MIN 2
#define BOUNDARY_MAX (PE_MP_PP_BUFFER / 2 - 1)

static int boundary_size(struct pe_err *err)
{
	return pe_err_set(err, PE_EINVAL, "Content-Type", "multipart/form-data needs a boundary= of %d to %d bytes, "
			  "its quotes counted (one byte: boundary=\"q\")", BOUNDARY_MIN, BOUNDARY_MAX);
}

/* The boundary of ctype into m: 0, or a 400 naming Content-Type. */
static int read_boundary(struct pe_mp *m, const char *ctype, struct pe_err *err)
{
	const char *v = NULL, *at = NULL;
	size_t len = 0;
	int has = pe_media_param(ctype, "boundary", &v, &len, &at), quoted = has > 0 && v[-1] == '"';
	if (has > 0) {
		memcpy((char *)at, "boundary", 8); /* the header's own bytes, as MHD's search reads them */
		drop_empty_tail(v, len, quoted);
	}
	if (has < 0 || (has > 0 && boundary_misread(ctype, at, v, len, quoted)))
		return pe_err_set(err, PE_EINVAL, "Content-Type", "boundary= must be the last parameter of Content-Type, "
				  "one token or one quoted string (multipart/form-data; boundary=XYZ)");
	if (!has || len < 1 || len + (quoted ? 2 : 0) < BOUNDARY_MIN || len + (quoted ? 2 : 0) > BOUNDARY_MAX)
		return boundary_size(err);
	boundary_copy(m, v, len);
	return 0;
}

int pe_mp_begin(struct pe_mp *m, struct MHD_Connection *conn, uint64_t declared, struct pe_err *err)
{
	const char *ctype = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
	int rc = read_boundary(m, ctype, err);
	if (rc != 0)
		return rc;
	if ((rc = pe_budget_take(m->budget, PE_MP_PP_BYTES)) != 0)
		return pe_err_set(err, rc, "body", "the memory budget for request bodies and responses is full; retry");
	m->held = PE_MP_PP_BYTES;
	m->declared = declared;
	m->pp = MHD_create_post_processor(conn, PE_MP_PP_BUFFER, pe_mp_data_cb, m);
	if (!m->pp) {
		pe_mp_destroy(m);
		return boundary_size(err);
	}
	return 0;
}

static void release_parts(struct pe_mp *m)
{
	for (size_t i = 0; i < m->nparts; i++)
		pe_buf_destroy(&m->part[i].buf);
}

/* Record the first failure and let go of everything held (MHD's processor stays until destroy:
 * it may still be inside the call that failed). */
static int fail(struct pe_mp *m, int code, const char *param, const char *detail)
{
	if (!m->err.code)
		pe_err_set(&m->err, code, param, "%s", detail);
	release_parts(m);
	return m->err.code;
}

static struct pe_mp_part *find(struct pe_mp *m, const char *name)
{
	for (size_t i = 0; name && i < m->nparts; i++)
		if (!strcmp(m->part[i].name, name))
			return &m->part[i];
	return NULL;
}

static int plain_encoding(const char *te)
{
	return !te || !strcasecmp(te, "binary") || !strcasecmp(te, "8bit") || !strcasecmp(te, "7bit");
}

/* A new part named p begins: 0, or a failure. */
static int part_begins(struct pe_mp *m, struct pe_mp_part *p, const char *ctype, const char *te)
{
	char d[200];
	if (p->seen) {
		snprintf(d, sizeof d, "the part %s is given twice (once %s); send each part once", p->name,
			 p->buf.len ? "with data" : "empty");
		return fail(m, PE_EBODY, p->name, d);
	}
	if (m->nested) {
		snprintf(d, sizeof d, "the part %s is itself multipart (multipart/mixed); send one value per part, as "
			 "%s", p->name, p->types);
		return fail(m, PE_EBODY, p->name, d);
	}
	if (!plain_encoding(te)) {
		snprintf(d, sizeof d, "the part %s has Content-Transfer-Encoding %.32s; send its bytes as they are "
			 "(binary)", p->name, te);
		return fail(m, PE_EBODY, p->name, d);
	}
	if (ctype && *ctype && (pe_media_match(ctype, p->types) < 0 || pe_media_check(ctype) < 0)) {
		snprintf(d, sizeof d, "the part %s has Content-Type %.40s; it takes %s (or no Content-Type)", p->name,
			 ctype, p->types);
		return fail(m, PE_EBODY, p->name, d);
	}
	p->seen = 1;
	snprintf(p->type, sizeof p->type, "%s", ctype ? ctype : "");
	m->cur = p;
	return 0;
}

/* Could the parts, with size bytes more, and the post processor's reservation ever fit in the
 * whole budget? (The bytes themselves, their buffers' doubling aside: a buffer grows by just what
 * it needs when doubling finds no room.) */
static int could_fit(const struct pe_mp *m, size_t size)
{
	struct pe_budget_stats st;
	pe_budget_stats(m->budget, &st);
	uint64_t need = (uint64_t)m->held + size;
	for (size_t i = 0; i < m->nparts; i++)
		need += m->part[i].buf.len;
	return !st.limit || need <= st.limit;
}

static int append(struct pe_mp *m, struct pe_mp_part *p, const char *data, size_t size)
{
	char d[160];
	if (size > p->max - p->buf.len) {
		snprintf(d, sizeof d, "the part %s is over its limit of %zu bytes", p->name, p->max);
		return fail(m, PE_ETOOBIG, p->name, d);
	}
	int rc = size ? pe_buf_append(&p->buf, data, size) : 0;
	if (rc == PE_EBUSY && !could_fit(m, size))
		rc = PE_ETOOBIG; /* a 503 would be retried forever, even on an idle server */
	if (rc == PE_ETOOBIG) {
		m->past_budget = 1;
		return fail(m, rc, "body", "the body's parts need more memory than the server's whole budget "
			    "(response_budget_bytes)");
	}
	if (rc != 0)
		return fail(m, rc == PE_EBUSY ? PE_EBUSY : PE_ENOMEM, "body",
			    "the memory budget for request bodies and responses is full; retry");
	return 0;
}

/* The first call of a part (a delimiter was fed since the last call): its name and headers. */
static int first_call(struct pe_mp *m, const char *key, const char *ctype, const char *te, uint64_t off)
{
	char d[200];
	if (off != 0)
		return fail(m, PE_EBODY, "body", "the boundary occurs inside a part's data; choose a boundary the "
			    "data does not contain");
	m->cb_delims = m->delims;
	m->cur = NULL;
	if (!key || !*key)
		return fail(m, PE_EBODY, "body", "a part has no name (Content-Disposition: form-data; name=\"x\")");
	struct pe_mp_part *p = find(m, key);
	if (!p) {
		size_t at = (size_t)snprintf(d, sizeof d, "unexpected part %.40s; the parts are", key);
		for (size_t i = 0; i < m->nparts && at < sizeof d; i++)
			at += (size_t)snprintf(d + at, sizeof d - at, "%s %s", i ? "," : "", m->part[i].name);
		return fail(m, PE_EBODY, key, d);
	}
	return part_begins(m, p, ctype, te);
}

enum MHD_Result pe_mp_data_cb(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
			      const char *content_type, const char *transfer_encoding, const char *data,
			      uint64_t off, size_t size)
{
	struct pe_mp *m = cls;
	char d[200];
	if (m->err.code)
		return MHD_NO;
	if (!m->delims)
		return fail(m, PE_EBODY, "body", "the first boundary line must start the body or a line "
			    "(CRLF --boundary)"), MHD_NO;
	if (m->delims != m->cb_delims || !m->cur) {
		if (first_call(m, key, content_type, transfer_encoding, off) != 0)
			return MHD_NO;
	} else if (!key || strcmp(key, m->cur->name) != 0 || off != m->cur->buf.len) {
		/* no delimiter since the last call: the same value goes on, at the offset it reached */
		snprintf(d, sizeof d, off == 0 ? "the part %s holds more than one value (multipart/mixed); send one "
			 "value per part" : "the part %s arrived out of order", m->cur->name);
		return fail(m, PE_EBODY, m->cur->name, d), MHD_NO;
	}
	return append(m, m->cur, data, size) == 0 ? MHD_YES : MHD_NO;
}

/* ---- the boundary scan ---- */

/* A byte of a part's header lines: the line breaks as MHD reads them (CR, LF or CRLF; an empty
 * line ends the headers), and "multipart/" anywhere in them (MHD takes a part apart when a line
 * holds "Content-type: multipart/mixed"). */
static void header_byte(struct pe_mp *m, char c)
{
	static const char kw[] = "multipart/";
	if (m->skip_lf) {
		m->skip_lf = 0;
		if (c == '\n')
			return;
	}
	if (c == '\r' || c == '\n') {
		if (m->line_len == 0)
			m->phase = PE_MP_VALUE;
		m->line_len = 0;
		m->skip_lf = c == '\r';
		return;
	}
	m->line_len++;
	char l = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
	m->kw = l == kw[m->kw] ? m->kw + 1 : l == kw[0];
	if (m->kw == sizeof kw - 1)
		m->nested = 1, m->kw = 0;
}

/* After a delimiter: "--" closes the body, else a line break and the next part's headers. */
static void after_delim_byte(struct pe_mp *m, char c)
{
	if (c == '-' && ++m->dashes == 2) {
		m->phase = PE_MP_DONE;
		return;
	}
	if (c == '-')
		return;
	m->phase = PE_MP_HEADERS;
	m->line_len = 0;
	m->head_bytes = 0;
	m->kw = 0;
	m->skip_lf = c == '\r';
	if (c != '\r' && c != '\n')
		header_byte(m, c);
}

/* How many bytes of data, from the start, MHD may have next: up to and including the first
 * delimiter that ends in them (*delim set), else all. The delimiter starts with the only CR it
 * holds, so a mismatch restarts the match at 1 (a CR) or 0, and the scan skips to the next CR. */
static size_t scan(struct pe_mp *m, const char *data, size_t n, int *delim)
{
	*delim = 0;
	for (size_t i = 0; i < n; i++) {
		char c = data[i];
		if (m->phase == PE_MP_DONE)
			return n;
		if (m->phase == PE_MP_AFTER_DELIM)
			after_delim_byte(m, c);
		else if (m->phase == PE_MP_HEADERS && ++m->head_bytes > PE_MP_PP_BUFFER)
			return i; /* feed_pp refuses the part before MHD reads more of its header lines */
		else if (m->phase == PE_MP_HEADERS)
			header_byte(m, c);
		if (c == m->delim[m->matched]) {
			if (++m->matched == m->dlen) {
				m->matched = 0;
				*delim = 1;
				return i + 1;
			}
		} else if (c == '\r')
			m->matched = 1;
		else if (m->matched != 0 || (m->phase != PE_MP_VALUE && m->phase != PE_MP_PREAMBLE))
			m->matched = 0;
		else { /* the fast path through a value's data (or a preamble) */
			const char *cr = memchr(data + i + 1, '\r', n - i - 1);
			i = cr ? (size_t)(cr - data) - 1 : n - 1;
		}
	}
	return n;
}

/* MHD is given what was scanned; a delimiter it has been given in full starts the next part. */
static int feed_pp(struct pe_mp *m, const char *data, size_t n)
{
	while (n > 0) {
		int delim;
		size_t k = scan(m, data, n, &delim);
		if (m->head_bytes > PE_MP_PP_BUFFER)
			return fail(m, PE_EBODY, "body", "a part's header lines are over 8 KiB together; a part needs "
				    "Content-Disposition and perhaps Content-Type"), -1;
		if (delim && m->phase == PE_MP_HEADERS) /* MHD reads it as a header line, not a part's end */
			return fail(m, PE_EBODY, "body", "a boundary line inside a part's headers (before the empty "
				    "line that ends them); send the part's headers, an empty line, then its data"), -1;
		/* The preamble is the scan's alone: MHD is given its first delimiter line from the "--"
		 * (MHD skips a preamble a byte at a time, moving its buffer for each dash). */
		const char *give = m->phase == PE_MP_PREAMBLE ? m->delim + 2 : data;
		size_t ngive = m->phase == PE_MP_PREAMBLE ? (delim ? m->dlen - 2 : 0) : k;
		if (ngive && MHD_post_process(m->pp, give, ngive) != MHD_YES)
			return -1;
		if (delim) {
			m->delims++;
			m->phase = PE_MP_AFTER_DELIM;
			m->dashes = 0;
			m->nested = 0;
		}
		data += k, n -= k;
	}
	return 0;
}

int pe_mp_feed(struct pe_mp *m, const char *data, size_t n)
{
	if (m->err.code)
		return m->err.code;
	if (n > m->max_body - m->fed || !m->pp) {
		char d[128];
		snprintf(d, sizeof d, "the body is over %llu bytes (max_body_bytes)", (unsigned long long)m->max_body);
		return fail(m, m->pp ? PE_ETOOBIG : PE_EINTERNAL, "body", m->pp ? d : "no multipart reader");
	}
	if (m->declared) /* no part outgrows the rest of the body: its buffer doubles up to that, no further */
		for (size_t i = 0; i < m->nparts; i++) {
			struct pe_buf *b = &m->part[i].buf;
			if (m->declared - m->fed < b->max - b->len)
				b->max = b->len + (size_t)(m->declared - m->fed);
		}
	m->fed += n;
	if (feed_pp(m, data, n) == 0)
		return 0;
	return fail(m, PE_EBODY, "body", "malformed multipart/form-data: a part header line over 8 KiB, "
		    "bytes outside the parts, or a broken boundary line");
}

int pe_mp_end(struct pe_mp *m, struct pe_err *err)
{
	int complete = m->pp && MHD_destroy_post_processor(m->pp) == MHD_YES;
	m->pp = NULL;
	if (!m->err.code && !complete)
		fail(m, PE_EBODY, "body", "the multipart/form-data body ends before its closing boundary");
	if (!m->err.code && !m->fed)
		fail(m, PE_EBODY, "body", "the multipart/form-data body is empty");
	if (!m->err.code && !m->delims)
		fail(m, PE_EBODY, "body", "the multipart/form-data body has no boundary line (--boundary)");
	pe_budget_give(m->budget, m->held);
	m->held = 0;
	if (m->err.code && err)
		*err = m->err;
	return m->err.code;
}

struct pe_mp_part *pe_mp_get(struct pe_mp *m, const char *name)
{
	struct pe_mp_part *p = find(m, name);
	return p && p->seen ? p : NULL;
}

void pe_mp_destroy(struct pe_mp *m)
{
	if (m->pp)
		MHD_destroy_post_processor(m->pp);
	m->pp = NULL;
	release_parts(m);
	pe_budget_give(m->budget, m->held);
	m->held = 0;
}
