/* --help, PATH --help and --version. Everything a table says about itself comes from the registry
 * (pe_table_all) and its parameter spec: name, type, default, range or choices and the one-line
 * help, so a table registered tomorrow is documented here without a change to this file. */
#include "cli/cli.h"

#include <inttypes.h>
#include <string.h>

#define COL 30 /* where the help text starts */

static const char *const metavar[] = {
	[PE_PT_INT] = "INT", [PE_PT_REAL] = "REAL", [PE_PT_ENUM] = "NAME",
	[PE_PT_BOOL] = "0|1", [PE_PT_LIST] = "LIST", [PE_PT_TEXT] = "TEXT",
};

static void put_number(FILE *f, double x)
{
	char buf[PE_NUM_MAX + 1];
	buf[pe_fmt_f64(x, buf)] = 0;
	fputs(buf, f);
}

/* "default 10000; 1e-300 .. 1e300" and the like, for the second line of a parameter. */
static void put_constraints(FILE *f, const struct pe_param_spec *sp)
{
	if (!sp->def)
		fputs("required", f);
	else if (!*sp->def)
		fputs("optional, no default", f);
	else
		fprintf(f, "default %s", sp->def);
	switch (sp->type) {
	case PE_PT_INT:
	case PE_PT_REAL:
	case PE_PT_LIST:
		fputs(sp->type == PE_PT_LIST ? "; comma-separated numbers, each in " : "; range ", f);
		put_number(f, sp->min);
		fputs(" .. ", f);
		put_number(f, sp->max);
		break;
	case PE_PT_ENUM:
		fputs("; one of: ", f);
		for (int i = 0; sp->choices[i]; i++)
			fprintf(f, "%s%s", i ? ", " : "", sp->choices[i]);
		break;
	case PE_PT_BOOL:
		fputs("; 0/1 or false/true", f);
		break;
	case PE_PT_TEXT:
		break;
	}
	fputc('\n', f);
}

static void put_options(FILE *f)
{
	fprintf(f,
		"Options:\n"
		"  --format json|npy|bin|csv   output format (default: from the -o file's extension\n"
		"                              .json .npy .bin .csv, otherwise json)\n"
		"  --dtype f32|f64|f16|bf16    element type (default f32; integer tables are always i32;\n"
		"                              bf16 cannot be npy)\n"
		"  -o, --output FILE           write FILE instead of standard output (- is stdout). A\n"
		"                              file, or a symlink's target, is replaced atomically (a\n"
		"                              temporary file, then rename) and keeps its mode; a device,\n"
		"                              FIFO, socket or /dev/fd/N is written in place\n"
		"  --max-elements N            refuse tables of more than N elements, and analyses that\n"
		"                              would build one on the way (default %zu)\n"
		"  --max-analysis-cost N       refuse an analysis (analysis/...) costing more than N\n"
		"                              multiply-adds (default %" PRIu64 ", as posencd's\n"
		"                              max_analysis_cost; similarity: len*(len+1)/2*dim)\n"
		"  -h, --help                  this text; after PATH, that table's parameters\n"
		"  --version                   print the version\n",
		CLI_DEFAULT_MAX_ELEMENTS, CLI_DEFAULT_MAX_ANALYSIS_COST);
}

void cli_help_main(FILE *f)
{
	size_t n;
	const struct pe_table_def *const *all = pe_table_all(&n);
	fprintf(f, "Usage: posenc PATH [--PARAM VALUE | --PARAM=VALUE]... [--format F] [--dtype D] [-o FILE]\n"
		   "Computes a positional-encoding table offline: the bytes posencd serves for\n"
		   "GET /v1/PATH?PARAM=VALUE&... with the same parameters and the same validation.\n"
		   "Parameter names are the HTTP query names, with dashes for underscores (either works).\n\n"
		   "Tables (posenc PATH --help lists one table's parameters):\n");
	for (size_t i = 0; i < n; i++)
		fprintf(f, "  %-26s  %s\n", all[i]->name, all[i]->summary ? all[i]->summary : "");
	fputc('\n', f);
	fprintf(f, "Model plans (what POST /v1/plan answers for a Hugging Face config.json):\n"
		   "  posenc plan [--len N] [--max-elements N] [--config] config.json   print the plan (JSON)\n"
		   "  posenc rope --config config.json [--len N] [--layers L] -o t.npy\n"
		   "                              the table the plan names (--layers picks one of several:\n"
		   "                              sliding_attention, full_attention, encoder, decoder, a layer)\n"
		   "  posenc plan --height H --width W [--frames F] config.json\n"
		   "                              a diffusers transformer (_class_name) at H x W pixels (F frames)\n\n");
	put_options(f);
	fprintf(f, "\nExit status: 0 success, 2 bad usage or parameter (one line on stderr naming it),\n"
		   "1 input/output or other failure. A failed run never leaves a partial -o file\n"
		   "(standard output, a pipe or a device may have received part of the table: it is\n"
		   "written as it is computed). bin and npy are not written to a terminal.\n");
}

void cli_help_table(FILE *f, const struct pe_table_def *def)
{
	fprintf(f, "Usage: posenc %s [--PARAM VALUE]... [--format F] [--dtype D] [-o FILE]\n", def->name);
	if (def->summary)
		fprintf(f, "%s\n", def->summary);
	if (def->fixed_dtype != PE_DTYPE_COUNT_)
		fprintf(f, "Elements are always %s.\n", pe_dtype_name(def->fixed_dtype));
	if (def->extra_name)
		fprintf(f, "JSON output also carries \"%s\".\n", def->extra_name);
	fprintf(f, "\nParameters (GET /v1/%s query names, with dashes for underscores):\n", def->name);
	for (int i = 0; i < def->nparams; i++) {
		const struct pe_param_spec *sp = &def->params[i];
		char opt[CLI_OPTION_NAME_MAX];
		int w = fprintf(f, "  %s %s", cli_option_name(sp->name, opt), metavar[sp->type]);
		if (w < 0)
			return;
		if (w >= COL)
			fprintf(f, "\n%*s", COL, "");
		else
			fprintf(f, "%*s", COL - w, "");
		fprintf(f, "%s\n%*s", sp->help ? sp->help : "", COL, "");
		put_constraints(f, sp);
	}
	fputc('\n', f);
	put_options(f);
}

void cli_help_version(FILE *f)
{
	fprintf(f, "posenc %s (output epoch %s, %s kernels)\n", PE_VERSION, PE_OUTPUT_EPOCH, pe_isa_name());
}
