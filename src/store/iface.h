/* Internal to src/store: the store interface (a table of operations) that include/posenc/store.h's
 * functions dispatch through, and the two implementations' constructors:
 *   iface.c   the public functions: dispatch to the implementation
 *   names.c   what every store shares: names, versions
 *   file.c    the file store (store.c, format.c, quarantine.c, open.c) behind the table
 *   pg*.c     the PostgreSQL store (its files: pg.h) */
#ifndef PE_STORE_IFACE_H
#define PE_STORE_IFACE_H

#include "posenc/store.h"

struct store_ops {
	int (*put)(struct pe_store *s, struct pe_store_meta *m, const void *data, int *replaced,
		   pe_store_commit_cb commit, void *commit_arg, struct pe_err *err);
	int (*del)(struct pe_store *s, const char *name, pe_store_commit_cb commit, void *commit_arg,
		   struct pe_err *err);
	int (*stat)(struct pe_store *s, const char *name, struct pe_store_meta *out);
	int (*list)(struct pe_store *s, struct pe_store_meta **out, size_t *n);
	int (*read)(struct pe_store *s, const char *name, const struct pe_store_meta *want, struct pe_store_meta *m,
		    void **data, struct pe_err *err);
	void (*stats)(struct pe_store *s, struct pe_store_stats *out);
	void (*close)(struct pe_store *s);
	int (*ready)(struct pe_store *s, struct pe_err *why); /* NULL: always 0 */
};

/* Every implementation's state begins with this. */
struct pe_store {
	const struct store_ops *ops;
	uint64_t max_bytes, max_table_bytes;
};

struct pe_store *store_file_open(const struct pe_store_options *o, struct pe_err *err);
struct pe_store *store_pg_open(const struct pe_store_options *o, struct pe_err *err);
int store_pg_init(const struct pe_store_options *o, struct pe_err *err);

#endif
