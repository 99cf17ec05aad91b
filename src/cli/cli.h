/* posenc CLI internals: the offline command-line tool over the core and tensor layers.
 *
 * A run goes through the same steps as GET /v1/<table> in src/http/table.c, one file each:
 *   args.c     argv -> struct cli_args (syntax only: which option, which value)
 *   request.c  args -> struct cli_request (table, pe_params_set/finish, format, dtype, size bound)
 *   render.c   request -> bytes (compute the table, encode it)
 *   output.c   bytes -> stdout, or -o FILE through a temporary file and rename
 *   help.c     --help, PATH --help and --version, generated from the registry
 *   main.c     the glue and the exit status
 * Nothing here names a table: everything comes from pe_table_all() and each table's spec.
 * Errors travel as struct pe_err (param + detail) and are printed once, by main.c. */
#ifndef PE_CLI_H
#define PE_CLI_H

#include <stddef.h>
#include <stdio.h>
#include "posenc/posenc.h"

#define CLI_DEFAULT_MAX_ELEMENTS ((size_t)1 << 28)

/* One "--key value" of a table parameter; key is the HTTP query name (dashes made underscores). */
struct cli_kv {
	char *key;         /* heap */
	const char *value; /* borrowed from argv */
};

struct cli_args {
	const char *path; /* the table, as typed; NULL if none */
	int help, version;
	/* Special options, borrowed from argv; NULL when not given. */
	const char *format, *dtype, *output, *max_elements;
	struct cli_kv *kv; /* table parameters in argv order (heap) */
	size_t nkv;
};

/* Split argv into options and table parameters. Fails (PE_EINVAL, err->param = the option) on an
 * option without its value, a repeated special option or a second PATH; never looks at a table. */
int cli_args_parse(int argc, char **argv, struct cli_args *a, struct pe_err *err);
void cli_args_destroy(struct cli_args *a);

struct cli_request {
	struct pe_params params; /* finished: defaults filled, cross-checked */
	enum pe_format fmt;
	enum pe_dtype dt;
	struct pe_shape shape;
	size_t count; /* elements, at most --max-elements */
};

/* The table for PATH ("rope/inv_freq"; a leading "/v1/" is accepted too), or NULL. */
const struct pe_table_def *cli_table_lookup(const char *path);
/* Validate everything the way the HTTP layer does, before any large allocation.
 * PE_ENOTFOUND for an unknown table, PE_EINVAL / PE_ETOOBIG naming the parameter. */
int cli_request_init(struct cli_request *r, const struct cli_args *a, struct pe_err *err);
void cli_request_destroy(struct cli_request *r);

/* The encoded output: data is malloc'ed and owned by the caller. */
struct cli_bytes {
	char *data;
	size_t len;
};

int cli_render(const struct cli_request *r, struct cli_bytes *out, struct pe_err *err);

/* Write len bytes to stdout (path NULL or "-") or atomically to path. PE_EIO with a detail. */
int cli_output_write(const char *path, const void *data, size_t len, struct pe_err *err);

void cli_help_main(FILE *f);
void cli_help_table(FILE *f, const struct pe_table_def *def);
void cli_help_version(FILE *f);

#endif
