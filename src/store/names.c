/* What every store shares, whichever implementation: the rules for table names and what makes two
 * metadata the same version (include/posenc/store.h). */
#include "posenc/store.h"

#include <string.h>

int pe_store_name_check(const char *name, size_t len, struct pe_err *err)
{
	if (len == 0 || len > PE_STORE_NAME_MAX)
		return pe_err_set(err, PE_EINVAL, "name", "name must be 1 to %d characters, got %zu", PE_STORE_NAME_MAX,
				  len);
	if (name[0] == '.')
		return pe_err_set(err, PE_EINVAL, "name", "name must not start with a dot");
	for (size_t i = 0; i < len; i++) {
		char c = name[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
		      c == '_' || c == '-'))
			return pe_err_set(err, PE_EINVAL, "name",
					  "name may hold only A-Z a-z 0-9 . _ - (byte %zu is 0x%02x)", i + 1,
					  (unsigned)(unsigned char)c);
	}
	return 0;
}


int pe_store_same_version(const struct pe_store_meta *a, const struct pe_store_meta *b)
{
	return !memcmp(a->sha256, b->sha256, 32) && a->dtype == b->dtype && a->rows == b->rows && a->cols == b->cols &&
	       a->prefix_tokens == b->prefix_tokens && a->grid_h == b->grid_h && a->grid_w == b->grid_w &&
	       !strcmp(a->name, b->name);
}
