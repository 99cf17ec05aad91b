/* Command-line syntax: argv into a struct cli_args, without knowing any table.
 *
 * Every "--name" takes a value ("--name value" or "--name=value") except --help and --version, so
 * table parameters need no list here: they are checked later by pe_params_set, exactly as query
 * parameters are. Dashes in a name become underscores ("--beta-fast" is beta_fast), and messages
 * spell a name back with dashes (cli_option_name), as the help lists it. As in
 * posencd, a following "--option" is never taken as a value ("--len --dim 8" is a missing value),
 * while a negative number is ("--offset -3" reaches the range check). The first bare word is
 * PATH; options may come before or after it. */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* The special options, by normalised name; NULL if name is a table parameter. */
static const char **special_slot(struct cli_args *a, const char *name)
{
	if (!strcmp(name, "format"))
		return &a->format;
	if (!strcmp(name, "dtype"))
		return &a->dtype;
	if (!strcmp(name, "max_elements"))
		return &a->max_elements;
	if (!strcmp(name, "max_analysis_cost"))
		return &a->max_analysis_cost;
	if (!strcmp(name, "output")) /* -o's long spelling, what a new user tries first */
		return &a->output;
	return NULL;
}

/* The parameter an error names: -o for --output, otherwise the normalised name (cli_option_name
 * spells it as typed). */
static const char *shown_name(const struct cli_args *a, const char **slot, const char *key)
{
	return slot == &a->output ? "o" : key;
}

const char *cli_option_name(const char *param, char out[CLI_OPTION_NAME_MAX])
{
	snprintf(out, CLI_OPTION_NAME_MAX, "%s%s", strcmp(param, "o") ? "--" : "-", param);
	for (char *c = out; *c; c++)
		if (*c == '_')
			*c = '-';
	return out;
}

/* A special option's value; param names it for the error ("format", "o"). */
static int take(const char **slot, const char *param, const char *value, struct pe_err *err)
{
	if (*slot)
		return pe_err_set(err, PE_EINVAL, param, "given more than once");
	if (!*value)
		return pe_err_set(err, PE_EINVAL, param, "empty value");
	*slot = value;
	return 0;
}

/* "--name[=value]" at argv[*i]; advances *i past the value. */
static int long_option(int argc, char **argv, int *i, struct cli_args *a, struct pe_err *err)
{
	const char *name = argv[*i] + 2, *eq = strchr(name, '=');
	size_t len = eq ? (size_t)(eq - name) : strlen(name);
	(*i)++;
	if (len == 0)
		return pe_err_set(err, PE_EINVAL, "", "'%.40s': an option needs a name", argv[*i - 1]);
	char *key = strndup(name, len);
	if (!key)
		return pe_err_set(err, PE_ENOMEM, "", "out of memory");
	for (char *c = key; *c; c++)
		if (*c == '-')
			*c = '_';
	int rc = 0;
	if (!strcmp(key, "help") || !strcmp(key, "version")) {
		if (eq)
			rc = pe_err_set(err, PE_EINVAL, key, "takes no value");
		else if (!strcmp(key, "help"))
			a->help = 1;
		else
			a->version = 1;
		goto out;
	}
	const char **slot = special_slot(a, key);
	const char *shown = shown_name(a, slot, key);
	const char *value = eq ? eq + 1 : NULL;
	if (!value) {
		if (*i >= argc || strncmp(argv[*i], "--", 2) == 0) {
			rc = pe_err_set(err, PE_EINVAL, shown, "needs a value");
			goto out;
		}
		value = argv[(*i)++];
	}
	if (slot) {
		rc = take(slot, shown, value, err);
		goto out;
	}
	a->kv[a->nkv].key = key; /* a->kv has room for every argv element */
	a->kv[a->nkv++].value = value;
	key = NULL;
out:
	free(key);
	return rc;
}

int cli_args_parse(int argc, char **argv, struct cli_args *a, struct pe_err *err)
{
	memset(a, 0, sizeof *a);
	a->kv = calloc((size_t)(argc > 0 ? argc : 1), sizeof *a->kv);
	if (!a->kv)
		return pe_err_set(err, PE_ENOMEM, "", "out of memory");
	for (int i = 1; i < argc;) {
		const char *arg = argv[i];
		int rc = 0;
		if (!strncmp(arg, "--", 2)) {
			rc = long_option(argc, argv, &i, a, err);
		} else if (!strcmp(arg, "-h")) {
			a->help = 1;
			i++;
		} else if (!strcmp(arg, "-o")) {
			if (i + 1 >= argc)
				return pe_err_set(err, PE_EINVAL, "o", "needs a file name");
			rc = take(&a->output, "o", argv[i + 1], err);
			i += 2;
		} else if (arg[0] == '-' && arg[1]) {
			return pe_err_set(err, PE_EINVAL, "", "unknown option '%.40s' (parameters start with --)", arg);
		} else if (a->path) {
			return pe_err_set(err, PE_EINVAL, "", "unexpected argument '%.40s' after PATH '%.40s'", arg,
					  a->path);
		} else {
			a->path = arg;
			i++;
		}
		if (rc != 0)
			return rc;
	}
	return 0;
}

void cli_args_destroy(struct cli_args *a)
{
	for (size_t i = 0; i < a->nkv; i++)
		free(a->kv[i].key);
	free(a->kv);
	a->kv = NULL;
	a->nkv = 0;
}
