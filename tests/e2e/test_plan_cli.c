/* The plan on the command line (src/cli/plan.c) against the daemon: `posenc plan config.json` prints
 * exactly what POST /v1/plan answers for the same bytes and len, and `posenc rope --config ...`
 * writes byte for byte the npy the plan's url serves (--layers picking one of Gemma 3's two
 * tables). Errors: one stderr line naming the option, status 2 for a config or option that is
 * wrong, 1 for a file that cannot be read. */
#include "support/pe_check.h"
#include "support/pe_daemon.h"
#include "cli/run.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GEMMA3 "tests/data/configs/gemma3-4b.json"

static const char *const json_ct[] = {"Content-Type: application/json", NULL};

static void one_line_naming(const struct crun *r, int status, const char *what)
{
	ck_assert_msg(r->status == status, "status %d, expected %d; stderr: %s", r->status, status, r->err ? r->err : "");
	ck_assert_msg(r->nerr > 8 && !strncmp(r->err, "posenc: ", 8), "stderr: %s", r->err ? r->err : "");
	ck_assert_msg(strchr(r->err, '\n') == r->err + r->nerr - 1, "not one line: %s", r->err);
	ck_assert_msg(strstr(r->err, what) != NULL, "'%s' does not name %s", r->err, what);
}

START_TEST(plan_prints_what_the_daemon_answers)
{
	struct pe_daemon d;
	struct pe_resp r;
	struct crun c;
	struct crun_opts o = {0};
	size_t len;
	pe_daemon_start(&d, NULL);
	char *body = pe_test_read_file(GEMMA3, &len);
	pe_request(&d, "POST", "/v1/plan?len=16", json_ct, body, len, &r);
	ck_assert_int_eq(r.status, 200);
	crun(&c, &o, "plan", "--len", "16", GEMMA3, NULL);
	crun_expect_ok(&c);
	ck_assert_uint_eq(c.nout, r.len);
	ck_assert(memcmp(c.out, r.body, r.len) == 0);
	crun_free(&c);
	pe_resp_free(&r);
	free(body);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

START_TEST(rope_config_writes_the_planned_table)
{
	struct pe_daemon d;
	struct pe_resp r;
	struct crun c;
	struct crun_opts o = {0};
	char dir[] = "/tmp/pe-plan-cli-XXXXXX", out[64], path[16384];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(out, sizeof out, "%s/t.npy", dir);
	pe_daemon_start(&d, NULL);
	/* two rope tables: --layers is needed */
	crun(&c, &o, "rope", "--config", GEMMA3, "--len", "16", "-o", out, NULL);
	one_line_naming(&c, 2, "--layers");
	crun_free(&c);
	crun(&c, &o, "rope", "--config", GEMMA3, "--layers", "full_attention", "--len", "16", "-o", out, NULL);
	crun_expect_ok(&c);
	crun_free(&c);
	/* the url the plan names for those layers, as npy */
	crun(&c, &o, "plan", "--len", "16", GEMMA3, NULL);
	json_error_t jerr;
	json_t *plan = json_loadb(c.out, c.nout, 0, &jerr);
	ck_assert_ptr_nonnull(plan);
	const char *url = json_string_value(json_object_get(json_array_get(json_object_get(plan, "encodings"), 1), "url"));
	snprintf(path, sizeof path, "%s&format=npy", url);
	pe_get(&d, path, &r);
	ck_assert_int_eq(r.status, 200);
	size_t n;
	char *file = pe_test_read_file(out, &n);
	ck_assert_uint_eq(n, r.len);
	ck_assert(memcmp(file, r.body, n) == 0);
	free(file);
	pe_resp_free(&r);
	json_decref(plan);
	crun_free(&c);
	unlink(out);
	rmdir(dir);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* `posenc plan --config f` is `posenc plan f`; a table the model scales is written as served, and
 * stderr says by what (Falcon's ALiBi: bias_scale head_dim^-1/2 = 0.125). */
START_TEST(config_alias_and_the_models_scale)
{
	struct crun c, p;
	struct crun_opts o = {0};
	char dir[] = "/tmp/pe-plan-cli-XXXXXX", out[64];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(out, sizeof out, "%s/a.npy", dir);
	crun(&c, &o, "plan", "--config", GEMMA3, NULL);
	crun_expect_ok(&c);
	crun(&p, &o, "plan", GEMMA3, NULL);
	crun_expect_ok(&p);
	ck_assert_uint_eq(c.nout, p.nout);
	ck_assert(memcmp(c.out, p.out, c.nout) == 0);
	crun_free(&c);
	crun_free(&p);
	crun(&c, &o, "alibi", "--config", "tests/data/configs/falcon-rw-1b.json", "--len", "4", "-o", out, NULL);
	ck_assert_msg(c.status == 0, "status %d: %s", c.status, c.err ? c.err : "");
	ck_assert_msg(c.err && strstr(c.err, "posenc: note: the model multiplies this table by bias_scale 0.125"), "stderr: %s",
		      c.err ? c.err : "");
	crun_free(&c);
	crun(&c, &o, "alibi", "--config", "tests/data/configs/bloom-560m.json", "--len", "4", "-o", out, NULL);
	crun_expect_ok(&c); /* BLOOM adds the table as it is */
	crun_free(&c);
	unlink(out);
	rmdir(dir);
}
END_TEST

START_TEST(errors_are_one_line)
{
	struct crun c;
	struct crun_opts o = {0};
	char dir[] = "/tmp/pe-plan-cli-XXXXXX", cfg[64];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(cfg, sizeof cfg, "%s/config.json", dir);
	FILE *f = fopen(cfg, "w");
	fputs("{\"model_type\": \"resnet\"}", f);
	fclose(f);
	crun(&c, &o, "plan", cfg, NULL);
	one_line_naming(&c, 2, "model_type");
	crun_free(&c);
	crun(&c, &o, "rope", "--config", cfg, NULL);
	one_line_naming(&c, 2, "--config");
	crun_free(&c);
	crun(&c, &o, "rope", "--config", GEMMA3, "--dim", "4", NULL);
	one_line_naming(&c, 2, "--dim");
	crun_free(&c);
	crun(&c, &o, "plan", "--len", "0", GEMMA3, NULL);
	one_line_naming(&c, 2, "--len");
	crun_free(&c);
	crun(&c, &o, "alibi", "--config", GEMMA3, NULL); /* Gemma has no ALiBi */
	one_line_naming(&c, 2, "no alibi table");
	crun_free(&c);
	unlink(cfg);
	crun(&c, &o, "plan", cfg, NULL);
	one_line_naming(&c, 1, cfg);
	crun_free(&c);
	rmdir(dir);
}
END_TEST

static Suite *plan_cli_suite(void)
{
	Suite *s = suite_create("plan_cli");
	TCase *tc = tcase_create("plan_cli");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, plan_prints_what_the_daemon_answers);
	tcase_add_test(tc, rope_config_writes_the_planned_table);
	tcase_add_test(tc, errors_are_one_line);
	tcase_add_test(tc, config_alias_and_the_models_scale);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(plan_cli_suite)
