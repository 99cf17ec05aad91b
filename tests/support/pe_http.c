/* HTTP assertions for e2e and fault tests (see pe_http.h). */
#include "support/pe_http.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *pe_http_header(const char *head, const char *name, char *buf, size_t cap)
{
	size_t nlen = strlen(name);
	for (const char *line = head; line && *line;) {
		const char *eol = strstr(line, "\r\n");
		size_t len = eol ? (size_t)(eol - line) : strlen(line);
		if (len > nlen && line[nlen] == ':' && strncasecmp(line, name, nlen) == 0) {
			const char *v = line + nlen + 1;
			while (*v == ' ')
				v++;
			size_t vlen = (size_t)(line + len - v);
			if (vlen >= cap)
				vlen = cap - 1;
			memcpy(buf, v, vlen);
			buf[vlen] = 0;
			return buf;
		}
		line = eol ? eol + 2 : NULL;
	}
	return NULL;
}

__attribute__((format(printf, 3, 4))) static int no(char *why, size_t cap, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, cap, fmt, ap);
	va_end(ap);
	return 0;
}

static int problem_body(json_t *j, long want_status, const char *param, char *why, size_t cap)
{
	const char *type = json_string_value(json_object_get(j, "type"));
	const char *got_param = json_string_value(json_object_get(j, "param"));
	if (!json_is_integer(json_object_get(j, "status")) || json_integer_value(json_object_get(j, "status")) != want_status)
		return no(why, cap, "\"status\" is not %ld", want_status);
	if (!json_is_string(json_object_get(j, "title")) || !json_is_string(json_object_get(j, "detail")))
		return no(why, cap, "no string \"title\" and \"detail\"");
	if (!type || strncmp(type, "https://posenc.dev/problems/", 28) != 0)
		return no(why, cap, "\"type\" is not under https://posenc.dev/problems/");
	if (param && (!got_param || strcmp(got_param, param) != 0))
		return no(why, cap, "\"param\" is %s%s%s, not \"%s\"", got_param ? "\"" : "", got_param ? got_param : "absent",
			  got_param ? "\"" : "", param);
	return 1;
}

int pe_http_is_problem(long status, const char *content_type, const char *body, size_t len, long want_status,
		       const char *param, char *why, size_t cap)
{
	json_error_t e;
	int ok;
	if (status != want_status)
		return no(why, cap, "status %ld, want %ld: %.300s", status, want_status, body ? body : "");
	if (!content_type || strcmp(content_type, "application/problem+json") != 0)
		return no(why, cap, "Content-Type %s, not application/problem+json", content_type ? content_type : "absent");
	json_t *j = body ? json_loadb(body, len, 0, &e) : NULL;
	if (!json_is_object(j)) {
		json_decref(j);
		return no(why, cap, "body is not a JSON object: %.300s", body ? body : "");
	}
	ok = problem_body(j, want_status, param, why, cap);
	json_decref(j);
	if (!ok) {
		size_t used = strlen(why);
		snprintf(why + used, cap - used, ": %.300s", body);
	}
	return ok;
}

int pe_http_metric(const char *text, const char *name, double *v)
{
	size_t nl = strlen(name);
	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (strncmp(p, name, nl) == 0 && (p[nl] == ' ' || p[nl] == '{')) {
			const char *q = p[nl] == '{' ? strchr(p + nl, '}') : p + nl; /* labels may hold spaces */
			const char *sp = q ? strchr(q, ' ') : NULL;
			if (!sp)
				return 0;
			*v = atof(sp + 1);
			return 1;
		}
	return 0;
}
