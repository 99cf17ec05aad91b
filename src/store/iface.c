/* The store's public functions (include/posenc/store.h): each dispatches to the implementation
 * the store was opened with (iface.h). What does not depend on it (names, versions) is names.c. */
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

int pe_store_init(const struct pe_store_options *o, struct pe_err *err)
{
	const char *url = o->url ? o->url : "";
	if (!strncmp(url, "postgresql://", 13) || !strncmp(url, "postgres://", 11))
		return store_pg_init(o, err);
	struct pe_store *s = pe_store_open(o, err);
	if (!s)
		return err ? err->code : PE_EIO;
	pe_store_close(s);
	return pe_err_set(err, 0, "", "data_dir %.200s is ready", o->dir);
}

int pe_store_ready(struct pe_store *s, struct pe_err *why)
{
	pe_err_clear(why);
	return s->ops->ready ? s->ops->ready(s, why) : 0;
}

int pe_store_unready(struct pe_store *s, int code, struct pe_err *err)
{
	struct pe_err why;
	pe_store_ready(s, &why);
	return pe_err_set(err, code, "", "%s%s", why.detail[0] ? why.detail : "the learned-table database cannot serve now",
			  code == PE_EUNAVAIL ? "; retry" : "");
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
