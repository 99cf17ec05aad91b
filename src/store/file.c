/* The file store behind the store interface (iface.h): the operations table, each entry the file
 * store's own function (store.c, open.c) on the struct it is embedded in. */
#include "store/internal.h"

static struct fstore *fs(struct pe_store *b) { return (struct fstore *)b; }

static int put_op(struct pe_store *b, struct pe_store_meta *m, const void *data, int *replaced, pe_store_commit_cb cb,
		  void *arg, struct pe_err *err)
{
	return fstore_put(fs(b), m, data, replaced, cb, arg, err);
}

static int del_op(struct pe_store *b, const char *name, pe_store_commit_cb cb, void *arg, struct pe_err *err)
{
	return fstore_delete(fs(b), name, cb, arg, err);
}

static int stat_op(struct pe_store *b, const char *name, struct pe_store_meta *out)
{
	return fstore_stat(fs(b), name, out);
}

static int list_op(struct pe_store *b, struct pe_store_meta **out, size_t *n) { return fstore_list(fs(b), out, n); }

static int read_op(struct pe_store *b, const char *name, const struct pe_store_meta *want, struct pe_store_meta *m,
		   void **data, struct pe_err *err)
{
	return fstore_read(fs(b), name, want, m, data, err);
}

static void stats_op(struct pe_store *b, struct pe_store_stats *out) { fstore_stats(fs(b), out); }

static void close_op(struct pe_store *b) { fstore_close(fs(b)); }

static const struct store_ops file_ops = {put_op, del_op, stat_op, list_op, read_op, stats_op, close_op, NULL};

struct pe_store *store_file_open(const struct pe_store_options *o, struct pe_err *err)
{
	struct fstore *s = fstore_open(o, err);
	if (!s)
		return NULL;
	s->base = (struct pe_store){.ops = &file_ops, .max_bytes = o->max_bytes, .max_table_bytes = o->max_table_bytes};
	return &s->base;
}
