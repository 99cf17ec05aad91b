/* problem+json bodies (RFC 9457): {"type","title","status","detail","param"}. Small and rare, so
 * they go through jansson, which also escapes whatever the client sent that ends up in detail. */
#include "http/problem.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* Client bytes may reach detail and param: keep printable ASCII only, so the JSON is always valid. */
static void printable_copy(char *dst, const char *src, size_t cap)
{
	size_t i = 0;
	for (; src[i] && i + 1 < cap; i++)
		dst[i] = (src[i] >= 0x20 && src[i] < 0x7f) ? src[i] : '?';
	dst[i] = 0;
}

char *pe_problem_json(const struct pe_err *err, int *status, size_t *len)
{
	char detail[PE_ERR_DETAIL_MAX], param[PE_ERR_PARAM_MAX];
	printable_copy(detail, err->detail, sizeof detail);
	printable_copy(param, err->param, sizeof param);
	int code = err->code ? err->code : PE_EINTERNAL;
	char type[128];
	snprintf(type, sizeof type, PE_PROBLEM_TYPE_BASE "%s", pe_err_slug(code));
	*status = pe_err_status(code);
	json_t *o = json_pack("{s:s, s:s, s:i, s:s}", "type", type, "title", pe_err_title(code), "status",
			      *status, "detail", detail[0] ? detail : pe_err_title(code));
	if (!o)
		return NULL;
	if (param[0])
		json_object_set_new(o, "param", json_string(param));
	char *body = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
	json_decref(o);
	if (body)
		*len = strlen(body);
	return body;
}

struct MHD_Response *pe_problem_response(const struct pe_err *err, const char *allow, int *status, size_t *len)
{
	char *body = pe_problem_json(err, status, len);
	if (!body)
		return NULL;
	struct MHD_Response *r = MHD_create_response_from_buffer_with_free_callback(*len, body, free);
	if (!r) {
		free(body);
		return NULL;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/problem+json");
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	if (*status == 405 && allow)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
	if (*status == 503)
		MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, PE_HTTP_RETRY_AFTER);
	return r;
}
