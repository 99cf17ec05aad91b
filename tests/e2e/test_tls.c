/* End-to-end test of HTTPS: a certificate made by the test, tls_cert / tls_key given on the
 * command line, a verified TLS request for a table, and the configuration errors. */
#include "support/pe_check.h"
#include "support/pe_daemon.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64], cert[128], key[128];

static void make_cert(void)
{
	snprintf(dir, sizeof dir, "/tmp/posenc-tls-%d", (int)getpid());
	snprintf(cert, sizeof cert, "%s/cert.pem", dir);
	snprintf(key, sizeof key, "%s/key.pem", dir);
	char cmd[512];
	snprintf(cmd, sizeof cmd,
		 "mkdir -p %s && openssl req -x509 -newkey rsa:2048 -nodes -keyout %s -out %s -days 1 "
		 "-subj /CN=localhost -addext subjectAltName=DNS:localhost >/dev/null 2>&1",
		 dir, key, cert);
	ck_assert_int_eq(system(cmd), 0);
}

static void remove_cert(void)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

START_TEST(https_table)
{
	make_cert();
	struct pe_daemon d;
	const char *args[] = {"--tls-cert", cert, "--tls-key", key, NULL};
	pe_daemon_start(&d, args);
	d.cainfo = cert;
	struct pe_resp r;
	char h[64];
	pe_get(&d, "/v1/sinusoidal?len=2&dim=4&format=bin", &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_uint_eq(r.len, 32);
	ck_assert_str_eq(pe_resp_header(&r, "X-PE-Shape", h, sizeof h), "2,4");
	pe_resp_free(&r);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
	remove_cert();
}
END_TEST

/* posencd's exit status with args, on a data_dir in the test's directory (never ./data). */
static int run_status(const char *args)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, "%s --port 0 --data-dir %s/data %s >/dev/null 2>&1", pe_daemon_bin(), dir, args);
	int st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

START_TEST(tls_config_errors)
{
	make_cert();
	char args[300];
	snprintf(args, sizeof args, "--tls-cert %s", cert);
	ck_assert_int_eq(run_status(args), 2); /* key missing */
	ck_assert_int_eq(run_status("--tls-cert /nonexistent.pem --tls-key /nonexistent.pem"), 2);
	snprintf(args, sizeof args, "--tls-cert %s --tls-key %s", key, key); /* not a certificate */
	ck_assert_int_ne(run_status(args), 0);
	remove_cert();
}
END_TEST

static Suite *tls_suite(void)
{
	Suite *s = suite_create("e2e_tls");
	TCase *tc = tcase_create("tls");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, https_table);
	tcase_add_test(tc, tls_config_errors);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(tls_suite)
