/* The error table of err.h turned into lookups, and the pe_err detail helpers. */
#include "posenc/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

struct err_row {
	int code, status;
	const char *slug, *title;
};

static const struct err_row rows[] = {
#define PE_ERR_ROW_(name, status, slug, title) {PE_E##name, status, slug, title},
	PE_ERRNO_MAP(PE_ERR_ROW_)
#undef PE_ERR_ROW_
};

static const struct err_row *find_row(int code)
{
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
		if (rows[i].code == code)
			return &rows[i];
	return NULL;
}

int pe_err_status(int code)
{
	const struct err_row *r = find_row(code);
	return r ? r->status : 500;
}

const char *pe_err_slug(int code)
{
	const struct err_row *r = find_row(code);
	return r ? r->slug : "internal";
}

const char *pe_err_title(int code)
{
	const struct err_row *r = find_row(code);
	return r ? r->title : "Internal error";
}

void pe_err_clear(struct pe_err *err)
{
	if (err)
		memset(err, 0, sizeof *err);
}

int pe_err_set(struct pe_err *err, int code, const char *param, const char *fmt, ...)
{
	if (!err)
		return code;
	err->code = code;
	err->choices = 0;
	snprintf(err->param, sizeof err->param, "%s", param ? param : "");
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err->detail, sizeof err->detail, fmt, ap);
	va_end(ap);
	return code;
}
