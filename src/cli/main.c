/* posenc: the offline command-line tool. `posenc PATH [--param value]... [-o FILE]` computes the
 * table GET /v1/PATH would serve and writes it to stdout or FILE.
 *
 * This file only sequences the steps (see cli.h) and owns the exit status: 0 on success, 2 when
 * the command line or a parameter is wrong (the HTTP 4xx cases), 1 for everything else (I/O, out
 * of memory). Every failure is one line on stderr, "posenc: --param: detail". Everything a command
 * line can get wrong is checked before the output is opened; the table is then written as it is
 * computed (render.c), so a later failure (a full disk, a closed pipe) can leave a partial write on
 * standard output or a device, but never a partial -o file (output.c). */
#include "cli/cli.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int exit_status(int code)
{
	return code == PE_EINVAL || code == PE_ETOOBIG || code == PE_ENOTFOUND ? 2 : 1;
}

static int report(const struct pe_err *err, int code)
{
	const char *detail = err->detail[0] ? err->detail : pe_err_title(code);
	char opt[CLI_OPTION_NAME_MAX];
	if (!err->param[0])
		fprintf(stderr, "posenc: %s\n", detail);
	else
		fprintf(stderr, "posenc: %s: %s\n", cli_option_name(err->param, opt), detail);
	return exit_status(code);
}

/* --help / --version win over everything else on the line; table parameters are not checked. */
static int help(const struct cli_args *a, struct pe_err *err)
{
	if (a->version) {
		cli_help_version(stdout);
	} else if (a->path) {
		const struct pe_table_def *def = cli_table_lookup(a->path);
		if (!def)
			return pe_err_set(err, PE_ENOTFOUND, "", "unknown table '%.60s' (posenc --help lists them)",
					  a->path);
		cli_help_table(stdout, def);
	} else {
		cli_help_main(stdout);
	}
	return fflush(stdout) == 0 ? 0 : pe_err_set(err, PE_EIO, "", "cannot write to standard output");
}

/* Raw bytes on a terminal are garbage on the screen (and can leave it in a strange state). */
static int check_terminal(const struct cli_request *r, const struct cli_out *o, struct pe_err *err)
{
	if ((r->fmt != PE_FMT_BIN && r->fmt != PE_FMT_NPY) || !isatty(o->fd))
		return 0;
	return pe_err_set(err, PE_EINVAL, "format", "not writing %s to a terminal: redirect the output, "
			  "or give -o FILE (or --format json / csv)", pe_format_name(r->fmt));
}

static int run(const struct cli_args *a, struct pe_err *err)
{
	struct cli_request r;
	struct cli_out o;
	int rc = cli_request_init(&r, a, err);
	if (rc == 0)
		rc = cli_out_open(&o, a->output, err);
	if (rc == 0) {
		rc = check_terminal(&r, &o, err);
		if (rc == 0)
			rc = cli_render(&r, &o, err);
		if (rc == 0)
			rc = cli_out_commit(&o, err); /* cleans up after itself on failure */
		else
			cli_out_abort(&o);
	}
	cli_request_destroy(&r);
	return rc;
}

int main(int argc, char **argv)
{
	struct cli_args a;
	struct cli_plan cp = {0};
	struct pe_err err = {0};
	signal(SIGPIPE, SIG_IGN); /* a closed pipe or a file size limit: an error line, status 1 */
	signal(SIGXFSZ, SIG_IGN);
	if (pe_isa_check_env(&err) != 0) { /* as posencd: a bad POSENC_ISA is refused, not ignored */
		fprintf(stderr, "posenc: %s\n", err.detail);
		return 2;
	}
	if (argc >= 2 && !strcmp(argv[1], "plan"))
		return cli_plan_main(argc, argv);
	int rc = cli_args_parse(argc, argv, &a, &err);
	if (rc == 0 && a.path && !a.help && !a.version)
		rc = cli_plan_config(&a, &cp, &err);
	if (rc == 0 && (a.help || a.version))
		rc = help(&a, &err);
	else if (rc == 0 && !a.path)
		rc = pe_err_set(&err, PE_EINVAL, "", "no table given: posenc PATH [--param value]... "
						     "(posenc --help lists the tables)");
	else if (rc == 0)
		rc = run(&a, &err);
	cli_args_destroy(&a);
	cli_plan_destroy(&cp);
	return rc == 0 ? 0 : report(&err, rc);
}
