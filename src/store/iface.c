/* The store's public functions (include/posenc/store.h): each dispatches to the implementation
 * the store was opened with (iface.h), and what does not depend on it lives here: the rules for
 * names and what makes two metadata the same version. */
#include "store/iface.h"

#include <stdio.h>
#include <string.h>

struct pe_store *pe_store_open(const struct pe_store_options *o, struct pe_err *err)
{
	const char *url = o->url ? o->url : "";
	if (!*url || !strcmp(url, "file:"))
		return store_file_open(o, err);
	if (!strncmp(url, "postgresql://", 13) || !strncmp(url, "postgres://", 11))
		return store_pg_open(o, err);
	pe_err_set(err, PE_EINVAL, "store_url", "store_url must be file: or a postgresql:// URI");
	return NULL;
}

void pe_store_close(struct pe_store *s)
{
	if (s)
		s->ops->close(s);
}

int pe_store_put(struct pe_store *s, struct pe_store_meta *m, const void *data, int *replaced, pe_store_commit_cb cb,
		 void *cb_arg, struct pe_err *err)
{
	return s->ops->put(s, m, data, replaced, cb, cb_arg, err);
}

int pe_store_delete(struct pe_store *s, const char *name, pe_store_commit_cb cb, void *cb_arg, struct pe_err *err)
{
	return s->ops->del(s, name, cb, cb_arg, err);
}

int pe_store_stat(struct pe_store *s, const char *name, struct pe_store_meta *out)
{
	return s->ops->stat(s, name, out);
}

int pe_store_list(struct pe_store *s, struct pe_store_meta **out, size_t *n) { return s->ops->list(s, out, n); }

int pe_store_read(struct pe_store *s, const char *name, const struct pe_store_meta *want, struct pe_store_meta *m,
		  void **data, struct pe_err *err)
{
	return s->ops->read(s, name, want, m, data, err);
}

void pe_store_stats(struct pe_store *s, struct pe_store_stats *out) { s->ops->stats(s, out); }

void pe_store_usage(struct pe_store *s, uint64_t *bytes, size_t *tables)
{
	struct pe_store_stats st;
	s->ops->stats(s, &st);
	*bytes = st.bytes;
	*tables = st.tables;
}

void pe_store_limits(const struct pe_store *s, uint64_t *max_bytes, uint64_t *max_table_bytes)
{
	*max_bytes = s->max_bytes;
	*max_table_bytes = s->max_table_bytes;
}

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
