/* posenc CLI internals: the offline command-line tool over the core and tensor layers.
 *
 * A run goes through the same steps as GET /v1/<table> in src/http/table.c, one file each:
 *   args.c     argv -> struct cli_args (syntax only: which option, which value)
 *   request.c  args -> struct cli_request (table, pe_params_set/finish, format, dtype, size bound)
 *   render.c   request -> bytes, block by block (compute rows, encode them, write them)
 *   output.c   where the bytes go: stdout, -o FILE through a temporary file and rename, or a
 *              device / FIFO / socket / descriptor in place
 *   help.c     --help, PATH --help and --version, generated from the registry
 *   main.c     the glue and the exit status
 * Nothing here names a table: everything comes from pe_table_all() and each table's spec.
 * Errors travel as struct pe_err (param + detail) and are printed once, by main.c. */
#ifndef PE_CLI_H
#define PE_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "posenc/core.h"
#include "posenc/tensor.h"
#include "posenc/version.h"

#define CLI_DEFAULT_MAX_ELEMENTS ((size_t)1 << 28)
/* posencd's max_analysis_cost default: the work of one analysis, in multiply-adds (pe_table_cost). */
#define CLI_DEFAULT_MAX_ANALYSIS_COST ((uint64_t)1 << 32)

/* One "--key value" of a table parameter; key is the HTTP query name (dashes made underscores). */
struct cli_kv {
	char *key;         /* heap */
	const char *value; /* borrowed from argv */
};

struct cli_args {
	const char *path; /* the table, as typed; NULL if none */
	int help, version;
	/* Special options, borrowed from argv; NULL when not given. */
	const char *format, *dtype, *output, *max_elements, *max_analysis_cost;
	struct cli_kv *kv; /* table parameters in argv order (heap) */
	size_t nkv;
};

/* Split argv into options and table parameters. Fails (PE_EINVAL, err->param = the option) on an
 * option without its value, a repeated special option or a second PATH; never looks at a table. */
int cli_args_parse(int argc, char **argv, struct cli_args *a, struct pe_err *err);
void cli_args_destroy(struct cli_args *a);

#define CLI_OPTION_NAME_MAX (PE_ERR_PARAM_MAX + 2)
/* A parameter name (query name or special option, as in err->param) the way the command line
 * spells it: "-o" for "o", "--max-distance" for "max_distance". Writes and returns out. */
const char *cli_option_name(const char *param, char out[CLI_OPTION_NAME_MAX]);

struct cli_request {
	struct pe_params params; /* finished: defaults filled, cross-checked */
	enum pe_format fmt;
	enum pe_dtype dt;
	struct pe_shape shape;
	size_t count; /* elements, at most --max-elements */
	struct pe_cost cost; /* intermediate at most --max-elements, work at most --max-analysis-cost */
};

/* The table for PATH ("rope/inv_freq"; a leading "/v1/" is accepted too), or NULL. */
const struct pe_table_def *cli_table_lookup(const char *path);
/* Validate everything the way the HTTP layer does, before any large allocation: the table and
 * any intermediate table it needs against --max-elements, an analysis' work against
 * --max-analysis-cost (pe_table_cost). PE_ENOTFOUND for an unknown table, PE_EINVAL /
 * PE_ETOOBIG naming the parameter. */
int cli_request_init(struct cli_request *r, const struct cli_args *a, struct pe_err *err);
void cli_request_destroy(struct cli_request *r);

/* The output (output.c): standard output, a file replaced atomically, or a device, FIFO, socket
 * or descriptor written in place. One at a time per process (the temporary file's name is kept
 * for the signal handler). */
enum cli_out_kind { CLI_OUT_STDOUT, CLI_OUT_FD, CLI_OUT_REPLACE, CLI_OUT_IN_PLACE };
struct cli_out {
	enum cli_out_kind kind;
	const char *path;          /* -o as given, for messages (NULL: stdout) */
	int fd;
	unsigned mode;             /* REPLACE: the mode the file gets */
	char target[4096];         /* REPLACE: the file renamed over (a symlink's target) */
};

/* Open PATH (NULL or "-": stdout) by what it is. Errors: PE_EIO, err->param "o", one line naming
 * PATH and the cause. */
int cli_out_open(struct cli_out *o, const char *path, struct pe_err *err);
int cli_out_write(struct cli_out *o, const void *data, size_t len, struct pe_err *err);
/* Finish: fsync and rename a replaced file, close a device. On failure nothing is left behind. */
int cli_out_commit(struct cli_out *o, struct pe_err *err);
/* Give up: the temporary file is removed; whatever was written in place stays. */
void cli_out_abort(struct cli_out *o);

/* Compute the table and write it to o as it is produced: rows in blocks through a small buffer
 * for tables with a row computation (pe_table_compute_rows: every table but slopes and
 * frequencies, which are computed whole first and are small); the encoded text goes out a slice
 * at a time, so memory stays under 64 MiB for any size of table (a few MiB but for rank-3 tables'
 * held planes, at most 32 MiB, and similarity's encoding rows, at most about 11 MiB). */
int cli_render(const struct cli_request *r, struct cli_out *o, struct pe_err *err);

/* Model plans (plan.c): `posenc plan config.json`, and --config on a table's command line, which
 * replaces PATH and the table parameters by the encoding the plan names (nothing when no --config;
 * cli_plan_destroy after cli_args_destroy: the parameters' values live in it). */
#include "posenc/plan.h"
struct cli_plan {
	struct pe_plan plan;
	int has_plan;
	char *query;
};
int cli_plan_main(int argc, char **argv);
int cli_plan_config(struct cli_args *a, struct cli_plan *cp, struct pe_err *err);
void cli_plan_destroy(struct cli_plan *cp);

void cli_help_main(FILE *f);
void cli_help_table(FILE *f, const struct pe_table_def *def);
void cli_help_version(FILE *f);

#endif
