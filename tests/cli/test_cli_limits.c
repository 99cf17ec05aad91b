/* The CLI bounds what a command costs beyond its output, as posencd does (src/http/table.c): an
 * analysis' intermediate table (analysis/similarity's encoding table) against --max-elements, and
 * its work against --max-analysis-cost, both from pe_table_cost and before anything is computed.
 * The limits are taken from the core in this process (each case's pe_table_cost) and tried at the
 * limit (the table is written) and one below (exit 2, one line naming the parameter the core
 * names). Every table with a cost has a case here. The default work bound is posencd's default
 * max_analysis_cost, read from config/posenc.json. Small sizes: the runs take milliseconds. */
#include "posenc/posenc.h"
#include "cli/cli.h" /* CLI_DEFAULT_MAX_ELEMENTS */
#include "cli/run.h"

#include <inttypes.h>
#include <jansson.h>

struct cost_case {
	const char *table;
	const char *args[8]; /* NULL-terminated "--key", "value" pairs */
};

static const struct cost_case cases[] = {
	{"analysis/similarity", {"--len", "16", "--dim", "64", NULL}},
	{"analysis/similarity", {"--encoding", "rope", "--len", "9", "--dim", "32", NULL}},
	{"analysis/rope-decay", {"--max-distance", "10", "--dim", "8", NULL}},
	{"analysis/order", {"--encoding", "rope", "--len", "4", "--dim", "16", NULL}},
	/* no work beyond the output: the cost names the longer side, which a table too large is refused by */
	{"relative/t5", {"--q-len", "3", "--k-len", "9", NULL}},
	{"relative/deberta", {"--q-len", "9", "--k-len", "3", NULL}},
};
#define NCASES (sizeof cases / sizeof cases[0])

/* The case's parameters through the core: its element count and cost. */
static void core_cost(const struct cost_case *k, size_t *count, struct pe_cost *c)
{
	const struct pe_table_def *def = pe_table_find(k->table);
	ck_assert_ptr_nonnull(def);
	struct pe_params p;
	struct pe_err err = {0};
	struct pe_shape s;
	pe_params_init(&p, def);
	for (int i = 0; k->args[i]; i += 2) {
		char key[64];
		snprintf(key, sizeof key, "%s", k->args[i] + 2);
		for (char *ch = key; *ch; ch++)
			*ch = *ch == '-' ? '_' : *ch;
		ck_assert_msg(pe_params_set(&p, key, k->args[i + 1], &err) == 0, "%s: %s", key, err.detail);
	}
	ck_assert_msg(pe_params_finish(&p, &err) == 0, "%s", err.detail);
	ck_assert_int_eq(pe_table_shape(&p, &s), 0);
	int overflow;
	*count = pe_shape_count(&s, &overflow);
	ck_assert(!overflow);
	ck_assert_int_eq(pe_table_cost(&p, c), 0);
	pe_params_destroy(&p);
}

/* The CLI on case k as bin to stdout, with one more option and its value. */
static void run_case(struct crun *r, const struct cost_case *k, const char *opt, uint64_t value)
{
	char v[24];
	const char *args[16];
	int n = 0;
	args[n++] = k->table;
	for (int i = 0; k->args[i]; i++)
		args[n++] = k->args[i];
	args[n++] = "--format";
	args[n++] = "bin";
	if (opt) {
		snprintf(v, sizeof v, "%" PRIu64, value);
		args[n++] = opt;
		args[n++] = v;
	}
	args[n] = NULL;
	struct crun_opts o = {0};
	crun_argv(r, &o, args);
}

/* Exit 2, nothing on stdout, one line "posenc: --param: ..." that contains want; the line spells
 * the query name param as the option is typed (max_distance is --max-distance). */
static void expect_refused(const struct crun *r, const char *param, const char *want)
{
	char head[96];
	snprintf(head, sizeof head, "posenc: --%s: ", param);
	for (char *c = head; *c; c++)
		if (*c == '_')
			*c = '-';
	ck_assert_msg(r->status == 2, "status %d, expected 2; stderr: %s", r->status, r->err ? r->err : "");
	ck_assert_uint_eq(r->nout, 0);
	ck_assert_msg(r->nerr > 0 && strchr(r->err, '\n') == r->err + r->nerr - 1, "not one line: %s",
		      r->err ? r->err : "");
	ck_assert_msg(!strncmp(r->err, head, strlen(head)), "'%s' does not start with '%s'", r->err, head);
	ck_assert_msg(strstr(r->err, want) != NULL, "'%s' does not say '%s'", r->err, want);
}

static void expect_written(const struct crun *r, size_t count)
{
	ck_assert_msg(r->status == 0, "status %d, stderr: %s", r->status, r->err ? r->err : "");
	ck_assert_uint_eq(r->nerr, 0);
	ck_assert_uint_eq(r->nout, count * 4); /* f32 */
}

/* Every table that reports a cost is one of the cases (a new analysis is bounded here too). */
START_TEST(every_costed_table_has_a_case)
{
	size_t n;
	const struct pe_table_def *const *all = pe_table_all(&n);
	for (size_t i = 0; i < n; i++) {
		if (!all[i]->cost)
			continue;
		int found = 0;
		for (size_t k = 0; k < NCASES; k++)
			found |= !strcmp(cases[k].table, all[i]->name);
		ck_assert_msg(found, "%s has a cost but no case in test_cli_limits.c", all[i]->name);
	}
}
END_TEST

/* Case k under opt = need writes its count values; under need - 1 it is refused naming param with
 * "<need> <unit>, more than <opt> <need - 1>". */
static void expect_limit_exact(const struct cost_case *k, size_t count, const char *opt, uint64_t need,
			       const char *unit, const char *param)
{
	struct crun r;
	run_case(&r, k, opt, need);
	expect_written(&r, count);
	crun_free(&r);
	char want[128];
	snprintf(want, sizeof want, "%" PRIu64 " %s, more than %s %" PRIu64, need, unit, opt, need - 1);
	run_case(&r, k, opt, need - 1);
	expect_refused(&r, param, want);
	crun_free(&r);
}

START_TEST(intermediate_table_within_max_elements)
{
	const struct cost_case *k = &cases[_i];
	size_t count;
	struct pe_cost c;
	core_cost(k, &count, &c);
	if (c.intermediate == 0)
		return; /* no intermediate table (rope-decay) */
	/* larger than the output: one below the intermediate still admits the table itself */
	ck_assert_uint_gt(c.intermediate, count);
	expect_limit_exact(k, count, "--max-elements", c.intermediate, "elements", c.intermediate_param);
}
END_TEST

START_TEST(work_within_max_analysis_cost)
{
	const struct cost_case *k = &cases[_i];
	size_t count;
	struct pe_cost c;
	core_cost(k, &count, &c);
	if (c.work == 0) { /* the cost only names the parameter: a table over --max-elements names it */
		ck_assert_uint_eq(c.intermediate, 0);
		struct crun r;
		char want[96];
		snprintf(want, sizeof want, "%zu elements, more than --max-elements %zu", count, count - 1);
		run_case(&r, k, "--max-elements", count);
		expect_written(&r, count);
		crun_free(&r);
		run_case(&r, k, "--max-elements", count - 1);
		expect_refused(&r, c.work_param, want);
		crun_free(&r);
		return;
	}
	ck_assert_uint_gt(c.work, 1);
	expect_limit_exact(k, count, "--max-analysis-cost", c.work, "multiply-adds", c.work_param);
}
END_TEST

/* posencd's default, from the configuration it embeds. */
static uint64_t daemon_default_cost(void)
{
	json_error_t je;
	json_t *cfg = json_load_file("config/posenc.json", 0, &je);
	ck_assert_msg(cfg != NULL, "config/posenc.json: %s", je.text);
	json_t *v = json_object_get(cfg, "max_analysis_cost");
	ck_assert_msg(json_is_integer(v) && json_integer_value(v) > 0, "no max_analysis_cost in config/posenc.json");
	uint64_t max = (uint64_t)json_integer_value(v);
	json_decref(cfg);
	return max;
}

/* Without the option, a similarity whose table and output are well within the default
 * --max-elements but whose work is past posencd's max_analysis_cost is refused. (Before the
 * bound, this ran ~9e9 multiply-adds and wrote the table.) */
START_TEST(default_cost_is_posencds)
{
	uint64_t max = daemon_default_cost();
	const struct cost_case k = {"analysis/similarity", {"--len", "2048", "--dim", "4096", NULL}};
	size_t count;
	struct pe_cost c;
	struct crun r;
	core_cost(&k, &count, &c);
	ck_assert_uint_le(count, CLI_DEFAULT_MAX_ELEMENTS);
	ck_assert_uint_le(c.intermediate, CLI_DEFAULT_MAX_ELEMENTS);
	ck_assert_uint_gt(c.work, max);
	char want[96];
	snprintf(want, sizeof want, "more than --max-analysis-cost %" PRIu64, max);
	run_case(&r, &k, NULL, 0);
	expect_refused(&r, c.work_param, want);
	crun_free(&r);
}
END_TEST

static const char *const bad_values[] = {"0", "-1", "1e9", "4x", "18446744073709551616", ""};

/* `posenc args...` (NULL-terminated) is refused naming --max-analysis-cost, with want in the line. */
static void expect_cost_option_refused(const char *want, const char *const *args)
{
	struct crun r;
	struct crun_opts o = {0};
	crun_argv(&r, &o, args);
	expect_refused(&r, "max-analysis-cost", want);
	crun_free(&r);
}

START_TEST(bad_max_analysis_cost_values)
{
	char opt[64];
	snprintf(opt, sizeof opt, "--max-analysis-cost=%s", bad_values[_i]);
	expect_cost_option_refused("", (const char *const[]){"analysis/rope-decay", opt, "--format", "bin", NULL});
}
END_TEST

START_TEST(max_analysis_cost_given_twice)
{
	expect_cost_option_refused("more than once", (const char *const[]){"analysis/rope-decay", "--max-analysis-cost",
									     "9999999", "--max_analysis_cost", "9999999",
									     NULL});
	expect_cost_option_refused("needs a value",
				   (const char *const[]){"analysis/rope-decay", "--max-analysis-cost", NULL});
}
END_TEST

START_TEST(help_documents_the_limits)
{
	struct crun r;
	struct crun_opts o = {0};
	char want[64];
	snprintf(want, sizeof want, "(default %" PRIu64, daemon_default_cost());
	crun(&r, &o, "--help", NULL);
	crun_expect_ok(&r);
	const char *at = strstr(r.out, "--max-analysis-cost N");
	ck_assert_msg(at != NULL, "--help lacks --max-analysis-cost");
	ck_assert_msg(strstr(at, want) != NULL, "--help does not give the default: %s", at);
	crun_free(&r);
}
END_TEST

/* A dtype too narrow for the values is refused before any byte, naming dtype, as posencd's 400:
 * RoPE's similarity has G_ii = dim (65536 at dim 65536), beyond f16's 65504. Every format, since
 * bin and npy used to write infinities and json half a document before failing. */
static const char *const formats[] = {"bin", "npy", "json", "csv"};

START_TEST(dtype_too_narrow_refused)
{
	struct crun r;
	struct crun_opts o = {0};
	crun(&r, &o, "analysis/similarity", "--encoding", "rope", "--len", "2", "--dim", "65536", "--dtype", "f16",
	     "--format", formats[_i], NULL);
	expect_refused(&r, "dtype", "f16 cannot hold");
	crun_free(&r);
	crun(&r, &o, "analysis/similarity", "--encoding", "rope", "--len", "2", "--dim", "65536", "--dtype", "f32",
	     "--format", formats[_i], NULL);
	crun_expect_ok(&r);
	crun_free(&r);
}
END_TEST

static Suite *limits_suite(void)
{
	Suite *s = suite_create("cli_limits");
	TCase *t = tcase_create("limits");
	tcase_set_timeout(t, 60);
	tcase_add_test(t, every_costed_table_has_a_case);
	tcase_add_loop_test(t, intermediate_table_within_max_elements, 0, (int)NCASES);
	tcase_add_loop_test(t, work_within_max_analysis_cost, 0, (int)NCASES);
	tcase_add_test(t, default_cost_is_posencds);
	tcase_add_loop_test(t, bad_max_analysis_cost_values, 0, (int)(sizeof bad_values / sizeof bad_values[0]));
	tcase_add_test(t, max_analysis_cost_given_twice);
	tcase_add_test(t, help_documents_the_limits);
	tcase_add_loop_test(t, dtype_too_narrow_refused, 0, (int)(sizeof formats / sizeof formats[0]));
	suite_add_tcase(s, t);
	return s;
}

PE_TEST_MAIN(limits_suite)
