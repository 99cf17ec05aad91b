/* Output format names and media types: the one table that pe_format_parse (the `format=` query
 * value), pe_format_name and pe_format_mime (Content-Type) all read, so the three cannot drift.
 * Names match exactly and case-sensitively, as every other query value does. */
#include "posenc/tensor.h"

#include <string.h>

static const struct {
	const char *name, *mime;
} formats[PE_FMT_COUNT_] = {
	[PE_FMT_JSON] = {"json", "application/json"},
	[PE_FMT_NPY] = {"npy", "application/x-npy"},
	[PE_FMT_BIN] = {"bin", "application/octet-stream"},
	[PE_FMT_CSV] = {"csv", "text/csv"},
	[PE_FMT_PNG] = {"png", "image/png"},
};

int pe_format_parse(const char *s, enum pe_format *out)
{
	if (!s)
		return PE_EINVAL;
	for (int i = 0; i < PE_FMT_COUNT_; i++)
		if (strcmp(s, formats[i].name) == 0) {
			*out = (enum pe_format)i;
			return 0;
		}
	return PE_EINVAL;
}

const char *pe_format_name(enum pe_format f)
{
	return (unsigned)f < PE_FMT_COUNT_ ? formats[f].name : "?";
}

const char *pe_format_mime(enum pe_format f)
{
	return (unsigned)f < PE_FMT_COUNT_ ? formats[f].mime : "application/octet-stream";
}
