/* posenc rope/axial and rope/axial/positions: the offline tool gives the bytes of the known answers
 * (tests/data/axial, tests/ref/gen_axial.py) with the same parameters as the HTTP query, and refuses
 * bad input with status 2 and one line naming the option. */
#include "cli/run.h"

#include <stdio.h>
#include <stdlib.h>

/* A FLUX grid with text: ids (text at 0, then rows and columns) as CSV. */
START_TEST(positions_csv)
{
	struct crun r;
	struct crun_opts o = {0};
	crun(&r, &o, "rope/axial/positions", "--preset", "flux", "--grid", "2x3", "--text-tokens", "1", "--format", "csv",
	     NULL);
	crun_expect_ok(&r);
	ck_assert_str_eq(r.out, "0,0,0\n0,0,0\n0,0,1\n0,0,2\n0,1,0\n0,1,1\n0,1,2\n");
	crun_free(&r);
	/* Qwen-Image: rows and columns centred on zero, the text after them at max(H/2, W/2) */
	crun(&r, &o, "rope/axial/positions", "--preset", "qwenimage", "--grid", "2x3", "--text-tokens", "1", "--format",
	     "csv", NULL);
	crun_expect_ok(&r);
	ck_assert_str_eq(r.out, "1,1,1\n0,-1,-2\n0,-1,-1\n0,-1,0\n0,0,-2\n0,0,-1\n0,0,0\n");
	crun_free(&r);
}
END_TEST

/* The table of a case is the known answer's float32 bytes (compat=hf: PyTorch's). */
START_TEST(table_matches_known_answer)
{
	struct crun r;
	struct crun_opts o = {0};
	size_t len;
	crun(&r, &o, "rope/axial", "--preset", "wan", "--grid", "5x7", "--compat", "hf", "--format", "bin", NULL);
	crun_expect_ok(&r);
	char *ref = pe_test_read_file("tests/data/axial/wan_5x7.torch.f32.bin", &len);
	ck_assert_uint_eq(r.nout, len);
	ck_assert(!memcmp(r.out, ref, len));
	free(ref);
	crun_free(&r);
}
END_TEST

static void expect_refused(const char *param, const char *const *args)
{
	struct crun r;
	struct crun_opts o = {0};
	char head[64];
	crun_argv(&r, &o, args);
	snprintf(head, sizeof head, "posenc: --%s: ", param);
	ck_assert_msg(r.status == 2, "status %d; stderr: %s", r.status, r.err ? r.err : "");
	ck_assert_uint_eq(r.nout, 0);
	ck_assert_msg(r.err && !strncmp(r.err, head, strlen(head)), "'%s' does not start with '%s'", r.err, head);
	crun_free(&r);
}

START_TEST(refusals)
{
	const char *grid[] = {"rope/axial", "--grid", "4x", NULL};
	const char *axes[] = {"rope/axial", "--axes-dim", "16,55,56", NULL};
	const char *text[] = {"rope/axial/positions", "--preset", "wan", "--grid", "4x4", "--text-tokens", "3", NULL};
	expect_refused("grid", grid);
	expect_refused("axes-dim", axes);
	expect_refused("text-tokens", text);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("cli_axial");
	TCase *tc = tcase_create("cli_axial");
	tcase_add_test(tc, positions_csv);
	tcase_add_test(tc, table_matches_known_answer);
	tcase_add_test(tc, refusals);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
