/* Tensor responses over libmicrohttpd: the request's Accept headers into the output negotiation
 * of include/posenc/output.h, and the content headers of the chosen output. */
#include "http/internal.h"

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
