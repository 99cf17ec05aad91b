/* Model plans on the command line (the same pe_plan_build as POST /v1/plan):
 *
 *   posenc plan [--len N] [--max-elements N] [--config] config.json      prints the plan's JSON
 *   posenc rope --config config.json [--len N] [--layers L] -o t.npy
 *                                   the table the plan names, written as any table is; stderr
 *                                   notes a bias_scale or attention_scaling the model applies
 *
 * The second form rewrites the command line: the plan's encoding (picked by PATH's kind and
 * --layers) becomes PATH and its url's query becomes the table parameters, and the run goes on
 * as `posenc rope/mrope --dim ... -o t.npy` would. Only --len, --layers and the output options may
 * go with --config: every other parameter comes from the config. */
#include "cli/cli.h"
#include "posenc/plan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The whole file (at most PE_PLAN_MAX_BODY bytes) into a new buffer. */
static char *read_config(const char *path, size_t *len, struct pe_err *err)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return pe_err_set(err, PE_EIO, "config", "%.200s: %s", path, strerror(errno)), NULL;
	char *buf = malloc(PE_PLAN_MAX_BODY + 1);
	size_t n = buf ? fread(buf, 1, PE_PLAN_MAX_BODY + 1, f) : 0;
	int bad = !buf || ferror(f);
	fclose(f);
	if (bad) {
		free(buf);
		return pe_err_set(err, buf ? PE_EIO : PE_ENOMEM, "config", "cannot read %.200s", path), NULL;
	}
	if (n > PE_PLAN_MAX_BODY) {
		free(buf);
		return pe_err_set(err, PE_ETOOBIG, "config", "%.200s is over %zu bytes", path, PE_PLAN_MAX_BODY), NULL;
	}
	*len = n;
	return buf;
}

/* A count as the daemon reads ?len=: decimal digits only, from 1 to max. */
static int parse_count(const char *s, const char *param, uint64_t max, int64_t *out, struct pe_err *err)
{
	unsigned long long v = 0;
	int digits = s && *s && strspn(s, "0123456789") == strlen(s);
	errno = 0;
	if (digits)
		v = strtoull(s, NULL, 10);
	if (!digits || errno || v < 1 || v > max)
		return pe_err_set(err, PE_EINVAL, param, "must be an integer from 1 to %llu", (unsigned long long)max);
	*out = (int64_t)v;
	return 0;
}

/* A generator's --height, --width, --frames (NULL: not given) into o. */
static int gen_size(const char *const gen[3], struct pe_plan_opts *o, struct pe_err *err)
{
	static const char *const names[3] = {"height", "width", "frames"};
	int64_t *dst[3] = {&o->height, &o->width, &o->frames};
	for (int k = 0; k < 3; k++)
		if (gen && gen[k] && parse_count(gen[k], names[k], 1 << 20, dst[k], err) != 0)
			return PE_EINVAL;
	return 0;
}

static int make_plan(const char *path, const char *len, const char *max_elements, const char *const gen[3],
		     struct pe_plan *plan, struct pe_err *err)
{
	/* No response limits: the CLI writes a table block by block to its output, with no response budget,
	 * so its only limit is --max-elements; the urls are JSON GETs of that length. */
	struct pe_plan_opts o = {.len = 0, .max_elements = CLI_DEFAULT_MAX_ELEMENTS};
	int64_t v = 0;
	if (len && parse_count(len, "len", (uint64_t)PE_PLAN_MAX_LEN, &o.len, err) != 0)
		return PE_EINVAL;
	if (gen_size(gen, &o, err) != 0)
		return PE_EINVAL;
	if (max_elements) {
		if (parse_count(max_elements, "max-elements", INT64_MAX, &v, err) != 0)
			return PE_EINVAL;
		o.max_elements = (uint64_t)v;
	}
	size_t n = 0;
	char *text = read_config(path, &n, err);
	if (!text)
		return err->code;
	int rc = pe_plan_build(text, n, &o, plan, err);
	free(text);
	if (rc != 0 && err->param[0] && strcmp(err->param, "len") && rc != PE_EINVAL) { /* name the file: the key is inside it */
		char d[PE_ERR_DETAIL_MAX + 64];
		snprintf(d, sizeof d, "%.60s: %s", path, err->detail);
		pe_err_set(err, rc, "config", "%.*s", PE_ERR_DETAIL_MAX - 1, d);
	}
	return rc == PE_EUNPROCESSABLE || rc == PE_EBODY ? PE_EINVAL : rc;
}

int cli_plan_main(int argc, char **argv)
{
	const char *len = NULL, *max = NULL, *path = NULL, *gen[3] = {NULL, NULL, NULL};
	struct pe_err err = {0};
	struct pe_plan plan;
	int rc = 0;
	for (int i = 2; i < argc && rc == 0; i++) {
		if (!strcmp(argv[i], "--len") && i + 1 < argc)
			len = argv[++i];
		else if (!strcmp(argv[i], "--max-elements") && i + 1 < argc)
			max = argv[++i];
		else if (!strcmp(argv[i], "--height") && i + 1 < argc)
			gen[0] = argv[++i];
		else if (!strcmp(argv[i], "--width") && i + 1 < argc)
			gen[1] = argv[++i];
		else if (!strcmp(argv[i], "--frames") && i + 1 < argc)
			gen[2] = argv[++i];
		else if (argv[i][0] != '-' && !path)
			path = argv[i];
		else if (!strcmp(argv[i], "--config") && i + 1 < argc && !path) /* as `posenc rope --config` spells it */
			path = argv[++i];
		else
			rc = pe_err_set(&err, PE_EINVAL, "", "usage: posenc plan [--len N] [--max-elements N] [--height H --width W [--frames F]] [--config] config.json");
	}
	if (rc == 0 && !path)
		rc = pe_err_set(&err, PE_EINVAL, "", "usage: posenc plan [--len N] [--max-elements N] [--height H --width W [--frames F]] [--config] config.json");
	if (rc == 0 && (rc = make_plan(path, len, max, gen, &plan, &err)) == 0) {
		size_t n = 0;
		char *json = pe_plan_json(&plan, &n);
		if (!json || fwrite(json, 1, n, stdout) != n || fflush(stdout) != 0)
			rc = pe_err_set(&err, json ? PE_EIO : PE_ENOMEM, "", "cannot write the plan");
		free(json);
		pe_plan_destroy(&plan);
	}
	if (rc == 0)
		return 0;
	char opt[CLI_OPTION_NAME_MAX];
	fprintf(stderr, "posenc: %s%s%s\n", err.param[0] ? cli_option_name(err.param, opt) : "", err.param[0] ? ": " : "",
		err.detail[0] ? err.detail : pe_err_title(rc));
	return rc == PE_EINVAL || rc == PE_ETOOBIG ? 2 : 1;
}

static const char *take_kv(struct cli_args *a, const char *key)
{
	for (size_t i = 0; i < a->nkv; i++)
		if (!strcmp(a->kv[i].key, key))
			return a->kv[i].value;
	return NULL;
}

/* The url's escaped '+' (%2B, the only escape a plan's url has) back in place. */
static void unescape_plus(char *s)
{
	char *w = s;
	for (; *s; s++)
		*w++ = !strncmp(s, "%2B", 3) ? (s += 2, '+') : *s;
	*w = 0;
}

/* The url's query as the command line's table parameters (keys on the heap, values in cp). */
static int rewrite(struct cli_args *a, struct cli_plan *cp, const struct pe_plan_enc *e, struct pe_err *err)
{
	const char *q = strchr(e->url, '?');
	cp->query = strdup(q ? q + 1 : "");
	if (!cp->query)
		return pe_err_set(err, PE_ENOMEM, "", "out of memory");
	for (size_t i = 0; i < a->nkv; i++)
		free(a->kv[i].key);
	a->nkv = 0;
	size_t pairs = 1;
	for (const char *c = cp->query; *c; c++)
		pairs += *c == '&';
	struct cli_kv *kv = realloc(a->kv, pairs * sizeof *kv);
	if (!kv)
		return pe_err_set(err, PE_ENOMEM, "", "out of memory");
	a->kv = kv;
	for (char *save = NULL, *tok = strtok_r(cp->query, "&", &save); tok; tok = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(tok, '=');
		if (!eq)
			continue;
		*eq = 0;
		unescape_plus(eq + 1);
		if (!(kv[a->nkv].key = strdup(tok)))
			return pe_err_set(err, PE_ENOMEM, "", "out of memory");
		kv[a->nkv++].value = eq + 1;
	}
	a->path = e->table;
	return 0;
}

int cli_plan_config(struct cli_args *a, struct cli_plan *cp, struct pe_err *err)
{
	memset(cp, 0, sizeof *cp);
	const char *config = take_kv(a, "config");
	if (!config)
		return 0;
	for (size_t i = 0; i < a->nkv; i++)
		if (strcmp(a->kv[i].key, "config") && strcmp(a->kv[i].key, "len") && strcmp(a->kv[i].key, "layers") &&
		    strcmp(a->kv[i].key, "height") && strcmp(a->kv[i].key, "width") && strcmp(a->kv[i].key, "frames"))
			return pe_err_set(err, PE_EINVAL, a->kv[i].key, "the parameters come from --config (only --len, --layers "
					  "and a generator's --height, --width, --frames go with it)");
	const char *gen[3] = {take_kv(a, "height"), take_kv(a, "width"), take_kv(a, "frames")};
	int rc = make_plan(config, take_kv(a, "len"), a->max_elements, gen, &cp->plan, err);
	if (rc != 0)
		return rc;
	cp->has_plan = 1;
	const struct pe_plan_enc *e = pe_plan_pick(&cp->plan, a->path, take_kv(a, "layers"), err);
	if (!e)
		return err->code == PE_ENOTFOUND ? PE_EINVAL : err->code;
	for (size_t k = 0; k < cp->plan.nwarnings; k++)
		fprintf(stderr, "posenc: warning: %s\n", cp->plan.warnings[k]);
	/* what the model does with the table beyond it, where the table alone would mislead */
	if (e->bias_scale != 0 && e->bias_scale != 1)
		fprintf(stderr, "posenc: note: the model multiplies this table by bias_scale %.17g before the softmax\n",
			e->bias_scale);
	if (e->url && e->attention_scaling != 1)
		fprintf(stderr, "posenc: note: the cos/sin hold attention_scaling %.17g (the model's factor, applied)\n",
			e->attention_scaling);
	return rewrite(a, cp, e, err);
}

void cli_plan_destroy(struct cli_plan *cp)
{
	if (cp->has_plan)
		pe_plan_destroy(&cp->plan);
	free(cp->query);
	memset(cp, 0, sizeof *cp);
}
