/* CORS: which origins may read answers (cors_origins: "*" or a comma list), and the headers that
 * say so. Preflights are answered by the router from each handler's declared methods. */
#include "http/internal.h"

#include <string.h>

int pe_http_cors_static(const struct pe_http *h) { return strcmp(h->cors_origins, "*") == 0; }

static int origin_listed(const char *list, const char *origin)
{
	size_t olen = strlen(origin);
	for (const char *p = list; *p;) {
		while (*p == ' ' || *p == ',')
			p++;
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		while (len && p[len - 1] == ' ')
			len--;
		if (len && len == olen && memcmp(p, origin, len) == 0)
			return 1;
		p += len;
		if (e)
			p = e + 1;
	}
	return 0;
}

/* With a list of origins the headers depend on the request's Origin, so every response that
 * passes here says Vary: Origin, also when this Origin is absent or not listed: otherwise a
 * shared cache could hand the answer without Access-Control-Allow-Origin to a listed origin. */
void pe_http_add_cors(struct pe_http *h, struct MHD_Connection *conn, struct MHD_Response *resp)
{
	const char *origin = conn ? MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin") : NULL;
	if (pe_http_cors_static(h))
		MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
	else {
		if (*h->cors_origins)
			MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Origin");
		if (!origin || !origin_listed(h->cors_origins, origin))
			return;
		MHD_add_response_header(resp, "Access-Control-Allow-Origin", origin);
	}
	MHD_add_response_header(resp, "Access-Control-Expose-Headers",
				"ETag, X-PE-Shape, X-PE-Dtype, X-PE-Cache, X-PE-Attention-Scaling, X-PE-Mrope-Delta, X-Request-Id");
}

int pe_http_method_listed(const char *list, const char *method)
{
	size_t mlen = strlen(method);
	for (const char *p = list; *p;) {
		while (*p == ' ' || *p == ',')
			p++;
		size_t len = strcspn(p, ", ");
		if (len && len == mlen && memcmp(p, method, len) == 0)
			return 1;
		p += len;
	}
	return 0;
}
