/* Answers over libmicrohttpd that every handler gives the same way: queueing with the request's
 * id, problem+json, 304, refusals decided before the body is read, and tensor content headers
 * from the output negotiation of include/posenc/output.h. */
#include "http/conn_guard.h"
#include "http/internal.h"
#include "http/problem.h"

#include <stdlib.h>
#include <sys/socket.h>

/* A body over PE_HTTP_SEND_BOUND bytes bounds its connection's send buffer to that (the kernel
 * doubles it for its bookkeeping), so each send copies at most about that much: on loopback a
 * 4.3 MB JSON table goes out in one sendmsg of 0.9-2.1 ms, during which every other connection of
 * the HTTP thread waits. Bounded, a send takes ~0.15 ms and the thread serves its other
 * connections between them (the mixed load's small-request p99 is ~20% lower; large cached tables
 * are served as fast; a 256 KiB bound would cost them ~20%). Once set, the bound stays
 * for the connection (the kernel's autotuning is off for it). Best effort. The connection guard
 * then watches the reader's pace (conn_guard.c: slow readers). */
void pe_http_large_answer(struct pe_http *h, struct MHD_Connection *conn, uint64_t body_len,
			  struct pe_cache_entry *entry, const void *shared)
{
	if (body_len <= PE_HTTP_SEND_BOUND)
		return;
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	int bound = PE_HTTP_SEND_BOUND;
	if (ci)
		setsockopt(ci->connect_fd, SOL_SOCKET, SO_SNDBUF, &bound, sizeof bound);
	pe_conn_guard_sending(h->guard, conn, body_len, entry, shared);
}

enum MHD_Result pe_http_queue(struct req *r, struct MHD_Connection *conn, int status, struct MHD_Response *resp)
{
	if (!resp)
		return MHD_NO;
	pe_http_large_answer(r->h, conn, r->bytes, r->answer_entry, NULL);
	MHD_add_response_header(resp, "X-Request-Id", r->request_id);
	if (r->close)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
	r->status = status;
	enum MHD_Result rc = MHD_queue_response(conn, (unsigned)status, resp);
	MHD_destroy_response(resp);
	return rc;
}

enum MHD_Result pe_http_not_modified(struct req *r, struct MHD_Connection *conn, const char *etag,
				      const char *cache_control)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, etag);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, cache_control);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Accept, Accept-Encoding");
	pe_http_add_cors(r->h, conn, resp);
	return pe_http_queue(r, conn, 304, resp);
}

enum MHD_Result pe_http_problem(struct req *r, struct MHD_Connection *conn, const struct pe_err *err)
{
	int status;
	size_t len = 0;
	struct MHD_Response *resp = pe_problem_response(err, r->allow ? r->allow : "GET, HEAD", &status, &len);
	r->bytes = len;
	if (resp)
		pe_http_add_cors(r->h, conn, resp);
	return pe_http_queue(r, conn, status, resp);
}

struct MHD_Response *pe_http_text(const char *body, size_t len, const char *type, int copy)
{
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(len, (void *)body, copy ? MHD_RESPMEM_MUST_COPY : MHD_RESPMEM_PERSISTENT);
	if (resp)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	return resp;
}

enum MHD_Result pe_http_refuse(struct req *r, const struct pe_err *err,
			       enum MHD_Result (*answer)(struct req *r, struct MHD_Connection *conn, const struct pe_err *err))
{
	r->refusal = *err;
	r->refusal_answer = answer;
	return MHD_YES;
}

int pe_http_body_collect(struct req *r, const char *data, size_t n)
{
	return pe_buf_append(&r->body, data, n) == 0 ? 0 : -1;
}

int pe_http_out_resolve(struct pe_out *o, const struct pe_out_query *q, struct MHD_Connection *conn,
			enum pe_dtype fixed_dtype, unsigned offered, struct pe_err *err)
{
	const char *accept = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
	const char *ae = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING);
	return pe_out_resolve(o, q, accept, ae, fixed_dtype, offered, err);
}

void pe_http_out_headers(const struct pe_out *o, struct MHD_Response *resp)
{
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, pe_format_mime(o->fmt));
	if (o->gzip)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
	/* format may come from Accept and gzip from Accept-Encoding, whatever this one's format is */
	MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Accept, Accept-Encoding");
}
