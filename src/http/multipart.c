/* multipart/form-data bodies, parsed by libmicrohttpd's MHD_PostProcessor as they arrive; the
 * parts are assembled here (pe_mp_data_cb), each in a pe_buf bounded by the handler's maximum and
 * reserved on the response budget before it grows, so a multipart body costs what its wanted
 * parts hold, never more than a plain body of the same size.
 *
 * What a hostile body meets:
 *  - the body's bytes are counted against max_body_bytes (chunked ones included): 413 past it;
 *  - a part header line longer than PE_MP_PP_BUFFER, a boundary that does not fit it, garbage
 *    between parts, data after the closing boundary: MHD's parser fails, a 400 naming body;
 *  - a part with another name, or without one, or one given twice: a 400 naming that part, at
 *    once, its bytes never kept (MHD passes part headers one line at a time through its fixed
 *    buffer, so many of them cost time, not memory);
 *  - a part larger than its maximum: 413 naming it; a budget that cannot hold it: 503;
 *  - a transfer encoding other than binary / 7bit / 8bit (base64 would be read as raw bytes): 400;
 *  - a body that ends before its closing boundary: 400 at the end (pe_mp_end).
 * The server's lingering close and slow-client rules apply to the rest of the body as to any.
 *
 * MHD calls the iterator for a part with offsets counting from 0, and sometimes first with no
 * data; it does not say where a part ends. A new part is therefore recognised by offset 0 once
 * bytes were stored, or by a change of name: a second part of the same name is refused unless
 * the first one was empty (then the second one simply is the part). */
#include "http/multipart.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

int pe_mp_is_form(const char *ctype)
{
	static const char form[] = "multipart/form-data";
	if (!ctype || strncasecmp(ctype, form, sizeof form - 1) != 0)
		return 0;
	char c = ctype[sizeof form - 1];
	return c == 0 || c == ';' || c == ' ' || c == '\t';
}

void pe_mp_init(struct pe_mp *m, uint64_t max_body, struct pe_budget *budget)
{
	memset(m, 0, sizeof *m);
	m->max_body = max_body;
	m->budget = budget;
}

void pe_mp_want(struct pe_mp *m, const char *name, size_t max)
{
	if (m->nparts >= PE_MP_MAX_PARTS)
		return;
	struct pe_mp_part *p = &m->part[m->nparts++];
	p->name = name;
	p->max = max;
	pe_buf_init(&p->buf, max);
	pe_buf_set_budget(&p->buf, m->budget);
}

int pe_mp_begin(struct pe_mp *m, struct MHD_Connection *conn, struct pe_err *err)
{
	int rc = pe_budget_take(m->budget, PE_MP_PP_BYTES);
	if (rc != 0)
		return pe_err_set(err, rc, "body", "the memory budget for request bodies and responses is full; retry");
	m->held = PE_MP_PP_BYTES;
	m->pp = MHD_create_post_processor(conn, PE_MP_PP_BUFFER, pe_mp_data_cb, m);
	if (!m->pp) {
		pe_mp_destroy(m);
		return pe_err_set(err, PE_EINVAL, "Content-Type",
				  "multipart/form-data needs a boundary=, of at most %d bytes", PE_MP_PP_BUFFER / 2 - 1);
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
	char d[160];
	if (p->seen && p->buf.len > 0) {
		snprintf(d, sizeof d, "the part %s is given twice", p->name);
		return fail(m, PE_EBODY, p->name, d);
	}
	if (!plain_encoding(te)) {
		snprintf(d, sizeof d, "the part %s has Content-Transfer-Encoding %.32s; send its bytes as they are "
			 "(binary)", p->name, te);
		return fail(m, PE_EBODY, p->name, d);
	}
	p->seen = 1;
	snprintf(p->type, sizeof p->type, "%s", ctype ? ctype : "");
	m->cur = p;
	return 0;
}

static int append(struct pe_mp *m, struct pe_mp_part *p, const char *data, size_t size)
{
	char d[160];
	if (size > p->max - p->buf.len) {
		snprintf(d, sizeof d, "the part %s is over its limit of %zu bytes", p->name, p->max);
		return fail(m, PE_ETOOBIG, p->name, d);
	}
	int rc = size ? pe_buf_append(&p->buf, data, size) : 0;
	if (rc == PE_ETOOBIG)
		return fail(m, rc, p->name, "the part needs more memory than the server's whole budget "
			    "(response_budget_bytes)");
	if (rc != 0)
		return fail(m, rc == PE_EBUSY ? PE_EBUSY : PE_ENOMEM, "body",
			    "the memory budget for request bodies and responses is full; retry");
	return 0;
}

enum MHD_Result pe_mp_data_cb(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
			      const char *content_type, const char *transfer_encoding, const char *data,
			      uint64_t off, size_t size)
{
	struct pe_mp *m = cls;
	char d[200];
	if (m->err.code)
		return MHD_NO;
	if (!key || !*key)
		return fail(m, PE_EBODY, "body", "a part has no name (Content-Disposition: form-data; name=\"x\")"), MHD_NO;
	struct pe_mp_part *p = find(m, key);
	if (!p) {
		size_t at = (size_t)snprintf(d, sizeof d, "unexpected part %.40s; the parts are", key);
		for (size_t i = 0; i < m->nparts && at < sizeof d; i++)
			at += (size_t)snprintf(d + at, sizeof d - at, "%s %s", i ? "," : "", m->part[i].name);
		return fail(m, PE_EBODY, key, d), MHD_NO;
	}
	if ((p != m->cur || (off == 0 && p->buf.len > 0)) && part_begins(m, p, content_type, transfer_encoding) != 0)
		return MHD_NO;
	if (off != p->buf.len) {
		snprintf(d, sizeof d, "the part %s arrived out of order", p->name);
		return fail(m, PE_EBODY, p->name, d), MHD_NO;
	}
	return append(m, p, data, size) == 0 ? MHD_YES : MHD_NO;
}

int pe_mp_feed(struct pe_mp *m, const char *data, size_t n)
{
	if (m->err.code)
		return m->err.code;
	if (n > m->max_body - m->fed || !m->pp) {
		char d[128];
		snprintf(d, sizeof d, "the body is over max_body_bytes (%llu)", (unsigned long long)m->max_body);
		return fail(m, m->pp ? PE_ETOOBIG : PE_EINTERNAL, "body", m->pp ? d : "no multipart reader");
	}
	m->fed += n;
	if (MHD_post_process(m->pp, data, n) == MHD_YES)
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
