/* From parsed arguments to a validated request, in the order GET /v1/<table> uses
 * (src/http/table.c): every parameter through pe_params_set in the order given, then the format,
 * the dtype, pe_params_finish, and the size bounds (the table, an intermediate table and an
 * analysis' work: pe_table_cost), then whether the dtype holds the values (pe_table_check_dtype), all
 * before anything large is allocated or written. So a
 * command line fails exactly when the same query string would, naming the same parameter.
 *
 * Format, when --format is not given, comes from the -o file's extension (.json .npy .csv .bin,
 * any case) and is otherwise json, the HTTP default: what lands on a terminal and what goes
 * into a pipe are the same bytes. png is an HTTP format the CLI does not write: --format png and
 * -o NAME.png (without --format) are refused rather than writing JSON into a .png file. */
#include "cli/cli.h"
#include "posenc/output.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CLI_FORMATS (1u << PE_FMT_JSON | 1u << PE_FMT_NPY | 1u << PE_FMT_BIN | 1u << PE_FMT_CSV)

const struct pe_table_def *cli_table_lookup(const char *path)
{
	if (!strncmp(path, "/v1/", 4))
		path += 4;
	else if (!strncmp(path, "v1/", 3))
		path += 3;
	return pe_table_find(path);
}

static int format_from_name(const char *file, enum pe_format *fmt)
{
	const char *slash = strrchr(file, '/'), *dot = strrchr(file, '.');
	if (!dot || (slash && dot < slash))
		return -1;
	for (int f = 0; f < PE_FMT_COUNT_; f++)
		if ((CLI_FORMATS >> f & 1) && !strcasecmp(dot + 1, pe_format_name((enum pe_format)f))) {
			*fmt = (enum pe_format)f;
			return 0;
		}
	return -1;
}

/* -o NAME.png without --format: the daemon's picture format, which the CLI does not write; JSON
 * in a .png file would only surprise. */
static int png_name(const char *file)
{
	const char *slash = strrchr(file, '/'), *dot = strrchr(file, '.');
	return dot && (!slash || dot > slash) && !strcasecmp(dot + 1, "png");
}

static int pick_format(const char *s, const char *output, enum pe_format *fmt, struct pe_err *err)
{
	if (!s) {
		if (output && png_name(output))
			return pe_err_set(err, PE_EINVAL, "o", "posenc does not write PNG (posencd's format=png does): "
				"name the file .json, .npy, .bin or .csv, or give --format");
		if (!output || !strcmp(output, "-") || format_from_name(output, fmt) != 0)
			*fmt = PE_FMT_JSON;
		return 0;
	}
	if (pe_format_parse(s, fmt) != 0 || !(CLI_FORMATS >> *fmt & 1))
		return pe_err_set(err, PE_EINVAL, "format", "format must be one of: json, npy, bin, csv%s",
				  !strcasecmp(s, "png") ? " (png is served by posencd only)" : "");
	return 0;
}

/* The HTTP layer's choice (pe_out_pick_dtype), with the CLI's spelling of the bf16 hint. */
static int pick_dtype(const struct pe_table_def *def, const char *s, enum pe_format fmt, enum pe_dtype *dt,
		      struct pe_err *err)
{
	int rc = pe_out_pick_dtype(s, def->fixed_dtype, fmt, dt, err);
	if (rc != 0 && def->fixed_dtype == PE_DTYPE_COUNT_ && fmt == PE_FMT_NPY && *dt == PE_BF16)
		pe_err_set(err, rc, "dtype", "bf16 has no NumPy dtype; use --format bin (raw bf16) or --dtype f32");
	return rc;
}

/* --max-elements N, --max-analysis-cost N: a decimal integer in 1 .. max; *out = dflt if s is NULL. */
static int parse_limit(const char *s, const char *name, uint64_t dflt, uint64_t max, uint64_t *out,
		       struct pe_err *err)
{
	*out = dflt;
	if (!s)
		return 0;
	for (const char *c = s; *c; c++)
		if (!isdigit((unsigned char)*c))
			return pe_err_set(err, PE_EINVAL, name, "%s must be a positive integer", name);
	errno = 0;
	unsigned long long v = strtoull(s, NULL, 10);
	if (errno == ERANGE || v == 0 || v > max)
		return pe_err_set(err, PE_EINVAL, name, "%s must be between 1 and %" PRIu64, name, max);
	*out = (uint64_t)v;
	return 0;
}

/* Like the HTTP 413, the error names the parameter that drives the size: an analysis' work
 * parameter (len, max_distance), else the table's first parameter. Needs r->cost. */
static int check_size(struct cli_request *r, size_t max, struct pe_err *err)
{
	const struct pe_table_def *def = r->params.def;
	const char *param = def->nparams > 0 ? def->params[0].name : "max-elements";
	if (*r->cost.work_param)
		param = r->cost.work_param;
	int overflow, rc = pe_table_shape(&r->params, &r->shape);
	if (rc != 0)
		return pe_err_set(err, rc, "", "cannot size this table");
	r->count = pe_shape_count(&r->shape, &overflow);
	char dims[PE_MAX_RANK * 21 + 1];
	pe_shape_format(&r->shape, dims, sizeof dims);
	if (overflow || r->count > SIZE_MAX / pe_dtype_size(r->dt))
		return pe_err_set(err, PE_ETOOBIG, param, "the table [%s] has more elements than fit in memory", dims);
	if (r->count > max)
		return pe_err_set(err, PE_ETOOBIG, param, "the table [%s] would have %zu elements, more than "
				  "--max-elements %zu", dims, r->count, max);
	return 0;
}

/* What the table needs beyond itself (pe_table_cost), as posencd decides its 413: an intermediate
 * table (analysis/similarity's encoding table) against --max-elements like the output, an
 * analysis' work against --max-analysis-cost, each naming the parameter that drives it. */
static int check_cost(const struct cli_request *r, size_t max, uint64_t max_cost, struct pe_err *err)
{
	const struct pe_cost *c = &r->cost;
	if (c->intermediate > max)
		return pe_err_set(err, PE_ETOOBIG, c->intermediate_param, "the table this needs would have %" PRIu64
				  " elements, more than --max-elements %zu", c->intermediate, max);
	if (c->work > max_cost && c->work == UINT64_MAX)
		return pe_err_set(err, PE_ETOOBIG, c->work_param, "this would cost more than 2^64 multiply-adds, "
				  "more than --max-analysis-cost %" PRIu64, max_cost);
	if (c->work > max_cost)
		return pe_err_set(err, PE_ETOOBIG, c->work_param, "this would cost %" PRIu64 " multiply-adds, more "
				  "than --max-analysis-cost %" PRIu64, c->work, max_cost);
	return 0;
}

int cli_request_init(struct cli_request *r, const struct cli_args *a, struct pe_err *err)
{
	memset(r, 0, sizeof *r);
	const struct pe_table_def *def = cli_table_lookup(a->path);
	if (!def)
		return pe_err_set(err, PE_ENOTFOUND, "", "unknown table '%.60s' (posenc --help lists them)", a->path);
	pe_params_init(&r->params, def);
	int rc = 0;
	for (size_t i = 0; i < a->nkv && rc == 0; i++)
		rc = pe_params_set(&r->params, a->kv[i].key, a->kv[i].value, err);
	uint64_t max = 0, max_cost = 0;
	if (rc == 0)
		rc = parse_limit(a->max_elements, "max-elements", CLI_DEFAULT_MAX_ELEMENTS, SIZE_MAX, &max, err);
	if (rc == 0)
		rc = parse_limit(a->max_analysis_cost, "max-analysis-cost", CLI_DEFAULT_MAX_ANALYSIS_COST, UINT64_MAX,
				 &max_cost, err);
	if (rc == 0)
		rc = pick_format(a->format, a->output, &r->fmt, err);
	if (rc == 0)
		rc = pick_dtype(def, a->dtype, r->fmt, &r->dt, err);
	if (rc == 0)
		rc = pe_params_finish(&r->params, err);
	if (rc == 0 && (rc = pe_table_cost(&r->params, &r->cost)) != 0)
		pe_err_set(err, rc, "", "cannot size this table");
	if (rc == 0)
		rc = check_size(r, (size_t)max, err);
	if (rc == 0)
		rc = check_cost(r, (size_t)max, max_cost, err);
	if (rc == 0) /* a dtype too narrow for the values: posencd's 400 (check_output), before any byte */
		rc = pe_table_check_dtype(&r->params, r->dt, err);
	return rc;
}

void cli_request_destroy(struct cli_request *r)
{
	if (r->params.def)
		pe_params_destroy(&r->params);
}
