/* Tests for daemon/config.c: the embedded defaults match config/posenc.json, the precedence
 * defaults < --config FILE < POSENC_* environment < command line, and every error names its key
 * and source. Each test passes its own envp so the runner's environment cannot leak in (except
 * the one test of envp == NULL, which sets its own variable in check's forked child). */
#include "daemon/config.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "posenc/posenc.h"
#include "support/pe_check.h"

static char *no_env[] = {NULL};

#define NARGS(...) ((int)(sizeof((char *[]){"posencd", __VA_ARGS__}) / sizeof(char *)))
/* pe_config_load over argv = {"posencd", ...}. */
#define LOAD(cfg, envp, err, ...)                                                              \
	pe_config_load(cfg, NARGS(__VA_ARGS__), (char *[]){"posencd", __VA_ARGS__, NULL}, envp, err)

/* A temporary file holding len bytes of text; the path lives in path[] (unlinked by the caller). */
static void write_temp(char path[static 64], const char *text, size_t len)
{
	snprintf(path, 64, "/tmp/test_config_XXXXXX");
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, len), (ssize_t)len);
	close(fd);
}

/* Expect PE_EINVAL with err->param == key and err->detail == detail. */
static void expect_err(int rc, const struct pe_err *err, const char *key, const char *detail)
{
	ck_assert_int_eq(rc, PE_EINVAL);
	ck_assert_int_eq(err->code, PE_EINVAL);
	ck_assert_str_eq(err->param, key);
	ck_assert_str_eq(err->detail, detail);
}

/* Load with a config file holding `json`, no environment, and the given extra argument. */
static int load_file(const char *json, struct pe_config *cfg, struct pe_err *err, char path[64])
{
	write_temp(path, json, strlen(json));
	int rc = LOAD(cfg, no_env, err, "--config", path);
	unlink(path);
	return rc;
}

static void expect_file_err(const char *json, const char *key, const char *what)
{
	struct pe_config cfg;
	struct pe_err err = {0};
	char path[64], detail[PE_ERR_DETAIL_MAX];
	int rc = load_file(json, &cfg, &err, path);
	snprintf(detail, sizeof detail, "config: %s: %s (from %s)", key, what, path);
	expect_err(rc, &err, key, detail);
}

static void expect_defaults(const struct pe_config *c)
{
	ck_assert_int_eq(c->port, 8080);
	ck_assert_str_eq(c->bind, "0.0.0.0");
	ck_assert_str_eq(c->data_dir, "./data");
	ck_assert_int_eq(c->store_max_bytes, 1073741824);
	ck_assert_int_eq(c->max_table_bytes, 67108864);
	ck_assert_int_eq(c->max_header_bytes, 32768);
	ck_assert_int_eq(c->workers, 2);
	ck_assert_int_eq(c->cache_bytes, 268435456);
	ck_assert_int_eq(c->warm_bytes, 16777216);
	ck_assert_int_eq(c->warm_idle, 60);
	ck_assert_int_eq(c->response_budget_bytes, 536870912);
	ck_assert_int_eq(c->max_elements, 67108864);
	ck_assert_int_eq(c->max_analysis_cost, INT64_C(4294967296));
	ck_assert_int_eq(c->max_body_bytes, 268435456);
	ck_assert_int_eq(c->max_queue, 256);
	ck_assert_int_eq(c->max_connections, 1024);
	ck_assert_int_eq(c->max_connections_per_ip, 256);
	ck_assert_int_eq(c->connection_timeout, 30);
	ck_assert_int_eq(c->job_timeout, 30);
	ck_assert_int_eq(c->inline_max_us, 50);
	ck_assert_int_eq(c->worker_nice, 5);
	ck_assert_int_eq(c->reserve_cpus, 1);
	ck_assert_int_eq(c->http_slice_us, 100);
	ck_assert_int_eq(c->worker_slice_us, 100000);
	ck_assert_int_eq(c->http_threads, 0);
	ck_assert_str_eq(c->auth_token, "");
	ck_assert_str_eq(c->cors_origins, "*");
	ck_assert_int_eq(c->log_level, PE_LOG_INFO);
	ck_assert_int_eq(c->shutdown_timeout, 30);
	ck_assert_str_eq(c->tls_cert, "");
	ck_assert_str_eq(c->tls_key, "");
}

START_TEST(defaults_are_the_literal_values)
{
	struct pe_config cfg;
	struct pe_err err = {0};
	ck_assert_int_eq(pe_config_defaults(&cfg, &err), 0);
	expect_defaults(&cfg);
	/* No arguments and an empty environment change nothing. */
	memset(&cfg, 0xab, sizeof cfg);
	char *argv[] = {"posencd", NULL};
	ck_assert_int_eq(pe_config_load(&cfg, 1, argv, no_env, &err), 0);
	expect_defaults(&cfg);
}
END_TEST

/* Read against the repository file so the embedded copy and config/posenc.json cannot drift. */
START_TEST(defaults_match_config_file)
{
	struct pe_config cfg;
	ck_assert_int_eq(pe_config_defaults(&cfg, NULL), 0);
	json_error_t jerr;
	json_t *root = json_load_file("config/posenc.json", 0, &jerr);
	ck_assert_msg(root != NULL, "config/posenc.json: %s", jerr.text);
	ck_assert_uint_eq(json_object_size(root), 35);
#define INT_EQ(f) ck_assert_int_eq(cfg.f, json_integer_value(json_object_get(root, #f)))
#define STR_EQ(f) ck_assert_str_eq(cfg.f, json_string_value(json_object_get(root, #f)))
	INT_EQ(port);
	STR_EQ(bind);
	STR_EQ(data_dir);
	STR_EQ(store_url);
	INT_EQ(store_max_bytes);
	INT_EQ(max_table_bytes);
	INT_EQ(quarantine_max_bytes);
	INT_EQ(max_header_bytes);
	INT_EQ(workers);
	INT_EQ(cache_bytes);
	INT_EQ(warm_bytes);
	INT_EQ(warm_idle);
	INT_EQ(response_budget_bytes);
	INT_EQ(max_elements);
	INT_EQ(max_analysis_cost);
	INT_EQ(max_body_bytes);
	INT_EQ(max_queue);
	INT_EQ(max_connections);
	INT_EQ(max_connections_per_ip);
	INT_EQ(connection_timeout);
	INT_EQ(job_timeout);
	INT_EQ(inline_max_us);
	INT_EQ(worker_nice);
	INT_EQ(reserve_cpus);
	INT_EQ(http_slice_us);
	INT_EQ(worker_slice_us);
	INT_EQ(http_threads);
	INT_EQ(linger_bytes);
	INT_EQ(linger_timeout);
	STR_EQ(auth_token);
	STR_EQ(cors_origins);
	STR_EQ(tls_cert);
	STR_EQ(tls_key);
	ck_assert_str_eq(pe_log_level_name(cfg.log_level),
			 json_string_value(json_object_get(root, "log_level")));
	INT_EQ(shutdown_timeout);
#undef INT_EQ
#undef STR_EQ
	json_decref(root);
}
END_TEST

START_TEST(precedence_file_env_argv)
{
	const char *json = "{\"port\": 1000, \"workers\": 3, \"cache_bytes\": 111,"
			   " \"log_level\": \"debug\", \"auth_token\": \"from-file\","
			   " \"bind\": \"127.0.0.1\"}";
	char path[64];
	write_temp(path, json, strlen(json));
	char *envp[] = {"HOME=/nowhere", "POSENC_WORKERS=4", "POSENC_CACHE_BYTES=222",
			"POSENC_AUTH_TOKEN=from-env", "POSENC_BOGUS=ignored", "POSENC_JOB_TIMEOUTX=9",
			NULL};
	struct pe_config cfg;
	struct pe_err err = {0};
	int rc = LOAD(&cfg, envp, &err, "--cache-bytes", "333", "--config", path,
		      "--max-connections-per-ip=7", "--auth-token=from-argv");
	unlink(path);
	ck_assert_msg(rc == 0, "%s", err.detail);
	ck_assert_int_eq(cfg.port, 1000);          /* file */
	ck_assert_str_eq(cfg.bind, "127.0.0.1");   /* file */
	ck_assert_int_eq(cfg.log_level, PE_LOG_DEBUG); /* file */
	ck_assert_int_eq(cfg.workers, 4);          /* env beats file */
	ck_assert_int_eq(cfg.cache_bytes, 333);    /* argv beats env and file, whatever the order */
	ck_assert_str_eq(cfg.auth_token, "from-argv");
	ck_assert_int_eq(cfg.max_connections_per_ip, 7);
	ck_assert_int_eq(cfg.job_timeout, 30);     /* untouched: default */
	ck_assert_str_eq(cfg.data_dir, "./data");
}
END_TEST

START_TEST(env_beats_file_for_strings_and_enum)
{
	char path[64];
	const char *json = "{\"log_level\": \"debug\", \"cors_origins\": \"https://a.example\"}";
	write_temp(path, json, strlen(json));
	char *envp[] = {"POSENC_LOG_LEVEL=warn", "POSENC_CORS_ORIGINS=", NULL};
	struct pe_config cfg;
	struct pe_err err = {0};
	int rc = LOAD(&cfg, envp, &err, "--config", path);
	unlink(path);
	ck_assert_msg(rc == 0, "%s", err.detail);
	ck_assert_int_eq(cfg.log_level, PE_LOG_WARN);
	ck_assert_str_eq(cfg.cors_origins, ""); /* set-but-empty counts */
}
END_TEST

START_TEST(argv_forms_and_last_wins)
{
	struct pe_config cfg;
	struct pe_err err = {0};
	int rc = LOAD(&cfg, no_env, &err, "--port=0", "--port", "1", "--port=2", "--bind", "::1",
		      "--data-dir", "/var/lib/posenc", "--log-level=error", "--shutdown-timeout", "0",
		      "--max-elements", "17179869184");
	ck_assert_msg(rc == 0, "%s", err.detail);
	ck_assert_int_eq(cfg.port, 2);
	ck_assert_str_eq(cfg.bind, "::1");
	ck_assert_str_eq(cfg.data_dir, "/var/lib/posenc");
	ck_assert_int_eq(cfg.log_level, PE_LOG_ERROR);
	ck_assert_int_eq(cfg.shutdown_timeout, 0);
	ck_assert_int_eq(cfg.max_elements, INT64_C(1) << 34);
	/* "--key=" is an explicit empty value. */
	ck_assert_int_eq(LOAD(&cfg, no_env, &err, "--auth-token=s3cret", "--auth-token="), 0);
	ck_assert_str_eq(cfg.auth_token, "");
}
END_TEST

START_TEST(process_environment_when_envp_null)
{
	ck_assert_int_eq(setenv("POSENC_WORKERS", "7", 1), 0);
	ck_assert_int_eq(setenv("POSENC_BIND", "127.0.0.1", 1), 0);
	struct pe_config cfg;
	struct pe_err err = {0};
	char *argv[] = {"posencd", NULL};
	ck_assert_int_eq(pe_config_load(&cfg, 1, argv, NULL, &err), 0);
	ck_assert_int_eq(cfg.workers, 7);
	ck_assert_str_eq(cfg.bind, "127.0.0.1");
	/* An explicit envp hides the process environment. */
	ck_assert_int_eq(pe_config_load(&cfg, 1, argv, no_env, &err), 0);
	ck_assert_int_eq(cfg.workers, 2);
}
END_TEST

START_TEST(byte_suffixes)
{
	struct pe_config cfg;
	struct pe_err err = {0};
	ck_assert_int_eq(LOAD(&cfg, no_env, &err, "--cache-bytes", "256Mi", "--max-body-bytes=1k"), 0);
	ck_assert_int_eq(cfg.cache_bytes, 268435456);
	ck_assert_int_eq(cfg.max_body_bytes, 1000);
	ck_assert_int_eq(LOAD(&cfg, no_env, &err, "--cache-bytes=1Ti", "--max-body-bytes=3Gi"), 0);
	ck_assert_int_eq(cfg.cache_bytes, INT64_C(1) << 40);
	ck_assert_int_eq(cfg.max_body_bytes, INT64_C(3) << 30);
	ck_assert_int_eq(LOAD(&cfg, no_env, &err, "--cache-bytes=2M", "--max-body-bytes=5G"), 0);
	ck_assert_int_eq(cfg.cache_bytes, 2000000);
	ck_assert_int_eq(cfg.max_body_bytes, 5000000000);
	ck_assert_int_eq(LOAD(&cfg, no_env, &err, "--cache-bytes=64Ki", "--max-body-bytes=10G"), 0);
	ck_assert_int_eq(cfg.cache_bytes, 65536);
	ck_assert_int_eq(cfg.max_body_bytes, 10000000000);

	expect_err(LOAD(&cfg, no_env, &err, "--cache-bytes=2Ti"), &err, "cache_bytes",
		   "config: cache_bytes: must be between 0 and 1099511627776, got 2199023255552"
		   " (from command line)");
	expect_err(LOAD(&cfg, no_env, &err, "--cache-bytes=99999999Ti"), &err, "cache_bytes",
		   "config: cache_bytes: '99999999Ti' is out of range 0..1099511627776"
		   " (from command line)");
	const char *bad[] = {"1KB", "1K", "1kb", "1ki", "Mi", "1 Mi", "1.5Mi", "1Mii", "1i"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char detail[PE_ERR_DETAIL_MAX];
		snprintf(detail, sizeof detail,
			 "config: cache_bytes: '%s' is not a decimal integer"
			 " (suffixes: k M G T Ki Mi Gi Ti) (from command line)", bad[i]);
		expect_err(LOAD(&cfg, no_env, &err, "--cache-bytes", (char *)bad[i]), &err,
			   "cache_bytes", detail);
	}
	/* Suffixes are for byte-sized keys only. */
	expect_err(LOAD(&cfg, no_env, &err, "--max-elements=1Ki"), &err, "max_elements",
		   "config: max_elements: '1Ki' is not a decimal integer (from command line)");
	/* In the file, byte keys also take a size string; other integers must be JSON integers. */
	char path[64];
	ck_assert_int_eq(load_file("{\"cache_bytes\": \"64Mi\"}", &cfg, &err, path), 0);
	ck_assert_int_eq(cfg.cache_bytes, 67108864);
}
END_TEST

START_TEST(bad_integers_name_key_and_source)
{
	struct pe_config cfg;
	struct pe_err err = {0};
	const char *bad[] = {"", "abc", "+12", " 12", "12 ", "0x10", "1e3", "12.0", "-", "--1", "1-"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char detail[PE_ERR_DETAIL_MAX];
		snprintf(detail, sizeof detail,
			 "config: port: '%s' is not a decimal integer (from command line)", bad[i]);
		char arg[32];
		snprintf(arg, sizeof arg, "--port=%s", bad[i]);
		expect_err(LOAD(&cfg, no_env, &err, arg), &err, "port", detail);
	}
	expect_err(LOAD(&cfg, no_env, &err, "--workers", "0"), &err, "workers",
		   "config: workers: must be between 1 and 256, got 0 (from command line)");
	expect_err(LOAD(&cfg, no_env, &err, "--workers", "257"), &err, "workers",
		   "config: workers: must be between 1 and 256, got 257 (from command line)");
	expect_err(LOAD(&cfg, no_env, &err, "--port=65536"), &err, "port",
		   "config: port: must be between 0 and 65535, got 65536 (from command line)");
	expect_err(LOAD(&cfg, no_env, &err, "--max-queue=99999999999999999999999"), &err,
		   "max_queue",
		   "config: max_queue: '99999999999999999999999' is out of range 1..1000000"
		   " (from command line)");
	expect_err(LOAD(&cfg, no_env, &err, "--max-queue=9223372036854775808"), &err, "max_queue",
		   "config: max_queue: '9223372036854775808' is out of range 1..1000000"
		   " (from command line)");
	expect_err(LOAD(&cfg, no_env, &err, "--max-queue=-9223372036854775808"), &err, "max_queue",
		   "config: max_queue: must be between 1 and 1000000, got -9223372036854775808"
		   " (from command line)");
	expect_err(LOAD(&cfg, no_env, &err, "--connection-timeout=86401"), &err,
		   "connection_timeout",
		   "config: connection_timeout: must be between 1 and 86400, got 86401"
		   " (from command line)");
	expect_err(LOAD(&cfg, no_env, &err, "--shutdown-timeout=3601"), &err, "shutdown_timeout",
		   "config: shutdown_timeout: must be between 0 and 3600, got 3601 (from command line)");
	/* Leading zeros are still decimal, "-0" is zero. */
	ck_assert_int_eq(LOAD(&cfg, no_env, &err, "--port=007", "--shutdown-timeout=-0"), 0);
	ck_assert_int_eq(cfg.port, 7);
	ck_assert_int_eq(cfg.shutdown_timeout, 0);

	char *envp[] = {"POSENC_PORT=-1", NULL};
	expect_err(LOAD(&cfg, envp, &err, "--workers=3"), &err, "port",
		   "config: port: must be between 0 and 65535, got -1 (from environment POSENC_PORT)");
	char *envp2[] = {"POSENC_MAX_CONNECTIONS=lots", NULL};
	expect_err(LOAD(&cfg, envp2, &err, "--workers=3"), &err, "max_connections",
		   "config: max_connections: 'lots' is not a decimal integer"
		   " (from environment POSENC_MAX_CONNECTIONS)");
	/* The environment is checked even when argv would override it. */
	expect_err(LOAD(&cfg, envp, &err, "--port=1"), &err, "port",
		   "config: port: must be between 0 and 65535, got -1 (from environment POSENC_PORT)");
	expect_file_err("{\"max_elements\": 17179869185}", "max_elements",
			"must be between 1 and 17179869184, got 17179869185");
	expect_file_err("{\"cache_bytes\": -1}", "cache_bytes",
			"must be between 0 and 1099511627776, got -1");
}
END_TEST

START_TEST(bad_strings_enum_and_bind)
{
	struct pe_config cfg;
	struct pe_err err = {0};
	expect_err(LOAD(&cfg, no_env, &err, "--log-level", "verbose"), &err, "log_level",
		   "config: log_level: 'verbose' is not one of error|warn|info|debug"
		   " (from command line)");
	expect_err(LOAD(&cfg, no_env, &err, "--log-level", "INFO"), &err, "log_level",
		   "config: log_level: 'INFO' is not one of error|warn|info|debug (from command line)");
	const char *bad_bind[] = {"localhost", "256.1.1.1", "1.2.3", "::g", "0.0.0.0 ", "[::1]"};
	for (size_t i = 0; i < sizeof bad_bind / sizeof bad_bind[0]; i++) {
		char detail[PE_ERR_DETAIL_MAX];
		snprintf(detail, sizeof detail,
			 "config: bind: '%s' is not an IPv4 or IPv6 address literal (from command line)",
			 bad_bind[i]);
		expect_err(LOAD(&cfg, no_env, &err, "--bind", (char *)bad_bind[i]), &err, "bind",
			   detail);
	}
	expect_err(LOAD(&cfg, no_env, &err, "--bind="), &err, "bind",
		   "config: bind: must not be empty (from command line)");
	const char *good_bind[] = {"127.0.0.1", "::", "::1", "fe80::1:2", "::ffff:10.0.0.1"};
	for (size_t i = 0; i < sizeof good_bind / sizeof good_bind[0]; i++) {
		ck_assert_int_eq(LOAD(&cfg, no_env, &err, "--bind", (char *)good_bind[i]), 0);
		ck_assert_str_eq(cfg.bind, good_bind[i]);
	}
	expect_err(LOAD(&cfg, no_env, &err, "--data-dir="), &err, "data_dir",
		   "config: data_dir: must not be empty (from command line)");

	/* auth_token holds at most 255 bytes. */
	char token[300];
	memset(token, 'x', sizeof token);
	token[255] = 0;
	ck_assert_int_eq(LOAD(&cfg, no_env, &err, "--auth-token", token), 0);
	ck_assert_uint_eq(strlen(cfg.auth_token), 255);
	token[255] = 'x';
	token[256] = 0;
	expect_err(LOAD(&cfg, no_env, &err, "--auth-token", token), &err, "auth_token",
		   "config: auth_token: is 256 bytes long, at most 255 allowed (from command line)");
	char *envp[] = {"POSENC_LOG_LEVEL=loud", NULL};
	expect_err(LOAD(&cfg, envp, &err, "--port=1"), &err, "log_level",
		   "config: log_level: 'loud' is not one of error|warn|info|debug"
		   " (from environment POSENC_LOG_LEVEL)");
}
END_TEST

START_TEST(bad_options)
{
	struct pe_config cfg;
	struct pe_err err = {0};
	expect_err(LOAD(&cfg, no_env, &err, "--bogus", "1"), &err, "--bogus",
		   "config: --bogus: unknown option (see --help) (from command line)");
	expect_err(LOAD(&cfg, no_env, &err, "--port=1", "--bogus=1"), &err, "--bogus",
		   "config: --bogus: unknown option (see --help) (from command line)");
	/* Keys are spelt with dashes on the command line. */
	expect_err(LOAD(&cfg, no_env, &err, "--cache_bytes", "1"), &err, "--cache_bytes",
		   "config: --cache_bytes: unknown option (see --help) (from command line)");
	expect_err(LOAD(&cfg, no_env, &err, "--cache-byte", "1"), &err, "--cache-byte",
		   "config: --cache-byte: unknown option (see --help) (from command line)");
	expect_err(LOAD(&cfg, no_env, &err, "-p", "1"), &err, "-p",
		   "config: -p: unexpected argument (options start with --) (from command line)");
	expect_err(LOAD(&cfg, no_env, &err, "--port", "1", "2"), &err, "2",
		   "config: 2: unexpected argument (options start with --) (from command line)");
	expect_err(LOAD(&cfg, no_env, &err, "--"), &err, "--",
		   "config: --: unknown option (see --help) (from command line)");
	expect_err(LOAD(&cfg, no_env, &err, "--port"), &err, "port",
		   "config: port: --port needs a value (from command line)");
	expect_err(LOAD(&cfg, no_env, &err, "--port", "--workers", "2"), &err, "port",
		   "config: port: --port needs a value (from command line)");
	expect_err(LOAD(&cfg, no_env, &err, "--max-connections-per-ip"), &err,
		   "max_connections_per_ip",
		   "config: max_connections_per_ip: --max-connections-per-ip needs a value"
		   " (from command line)");
	expect_err(LOAD(&cfg, no_env, &err, "--config"), &err, "config",
		   "config: config: --config needs a value (from command line)");
	expect_err(LOAD(&cfg, no_env, &err, "--config="), &err, "config",
		   "config: config: --config needs a file name (from command line)");
	expect_err(LOAD(&cfg, no_env, &err, "--help=yes"), &err, "--help",
		   "config: --help: takes no value (from command line)");
	/* A syntax error after a bad value is still reported first: argv syntax is checked first. */
	expect_err(LOAD(&cfg, no_env, &err, "--port=x", "--nope"), &err, "--nope",
		   "config: --nope: unknown option (see --help) (from command line)");
	/* The message stays one line whatever the input holds (found by fuzzing): control bytes from
	 * argv, a file or the environment are shown as '?'. */
	expect_err(LOAD(&cfg, no_env, &err, "--a\nb\tc", "1"), &err, "--a?b?c",
		   "config: --a?b?c: unknown option (see --help) (from command line)");
	expect_file_err("{\"por\\nt\": 1}", "por?t", "unknown key");
	expect_err(pe_config_load(&cfg, 1, (char *[]){"posencd", NULL}, (char *[]){"POSENC_BIND=1.2.3.4\r\nx", NULL},
				  &err),
		   &err, "bind",
		   "config: bind: '1.2.3.4??x' is not an IPv4 or IPv6 address literal (from environment POSENC_BIND)");
	/* err may be NULL. */
	ck_assert_int_eq(LOAD(&cfg, no_env, NULL, "--nope"), PE_EINVAL);
	ck_assert_int_eq(LOAD(&cfg, no_env, NULL, "--port=x"), PE_EINVAL);
}
END_TEST

START_TEST(bad_files)
{
	expect_file_err("{\"port\": 1, \"bogus\": 2}", "bogus", "unknown key");
	expect_file_err("{\"port\": \"8080\"}", "port", "must be an integer, not a string");
	expect_file_err("{\"workers\": 2.0}", "workers", "must be an integer, not a real number");
	expect_file_err("{\"job_timeout\": true}", "job_timeout", "must be an integer, not a boolean");
	expect_file_err("{\"bind\": 5}", "bind", "must be a string, not an integer");
	expect_file_err("{\"log_level\": null}", "log_level", "must be a string, not null");
	expect_file_err("{\"cors_origins\": [\"*\"]}", "cors_origins",
			"must be a string, not an array");
	expect_file_err("{\"cache_bytes\": {}}", "cache_bytes",
			"must be an integer or a size string, not an object");
	expect_file_err("{\"log_level\": \"chatty\"}", "log_level",
			"'chatty' is not one of error|warn|info|debug");
	expect_file_err("{\"bind\": \"example.com\"}", "bind",
			"'example.com' is not an IPv4 or IPv6 address literal");
	expect_file_err("[1, 2]", "config", "must be a JSON object, not an array");
	expect_file_err("port = 8080\n", "config",
			"not valid JSON: '[' or '{' expected near 'port' at line 1 column 4");
	expect_file_err("{\"port\": 1, \"port\": 2}", "config",
			"not valid JSON: duplicate object key near '\"port\"' at line 1 column 18");
	expect_file_err("", "config",
			"not valid JSON: '[' or '{' expected near end of file at line 1 column 0");

	struct pe_config cfg;
	struct pe_err err = {0};
	expect_err(LOAD(&cfg, no_env, &err, "--config", "/nonexistent/posenc.json"), &err,
		   "config",
		   "config: config: cannot open: No such file or directory"
		   " (from /nonexistent/posenc.json)");
	expect_err(LOAD(&cfg, no_env, &err, "--config=/tmp"), &err, "config",
		   "config: config: cannot read: Is a directory (from /tmp)");
}
END_TEST

/* 1 MiB exactly is accepted; one byte more is refused before parsing. */
START_TEST(file_size_cap)
{
	size_t cap = (size_t)1 << 20;
	char *big = malloc(cap + 2);
	ck_assert_ptr_nonnull(big);
	memset(big, ' ', cap + 1);
	memcpy(big, "{\"workers\": 9}", 14);
	char path[64];
	struct pe_config cfg;
	struct pe_err err = {0};
	write_temp(path, big, cap);
	ck_assert_int_eq(LOAD(&cfg, no_env, &err, "--config", path), 0);
	ck_assert_int_eq(cfg.workers, 9);
	unlink(path);

	write_temp(path, big, cap + 1);
	int rc = LOAD(&cfg, no_env, &err, "--config", path);
	unlink(path);
	char detail[PE_ERR_DETAIL_MAX];
	snprintf(detail, sizeof detail,
		 "config: config: larger than 1048576 bytes (1 MiB) (from %s)", path);
	expect_err(rc, &err, "config", detail);
	free(big);
}
END_TEST

/* Run pe_config_load with stdout sent to a file; return what was printed (caller frees). */
static char *captured_load(int *rc, int argc, char **argv)
{
	char path[64];
	write_temp(path, "", 0);
	fflush(stdout);
	int saved = dup(1);
	FILE *f = fopen(path, "w+");
	ck_assert_ptr_nonnull(f);
	dup2(fileno(f), 1);
	struct pe_config cfg;
	struct pe_err err = {0};
	*rc = pe_config_load(&cfg, argc, argv, no_env, &err);
	fflush(stdout);
	dup2(saved, 1);
	close(saved);
	fclose(f);
	size_t len;
	char *out = pe_test_read_file(path, &len);
	unlink(path);
	return out;
}

START_TEST(help_lists_every_option)
{
	int rc;
	char *argv[] = {"posencd", "--port", "abc", "--help", "--bogus", NULL};
	char *out = captured_load(&rc, 5, argv);
	ck_assert_int_eq(rc, 1);
	const char *want[] = {
		"--config FILE",
		"--port N",
		"default 8080, range 0..65535, env POSENC_PORT\n",
		"--bind ADDR",
		"default \"0.0.0.0\", at most 63 bytes, env POSENC_BIND\n",
		"--data-dir TEXT",
		"default \"./data\", at most 4095 bytes, env POSENC_DATA_DIR\n",
		"--store-url TEXT",
		"default \"file:\", at most 1023 bytes, env POSENC_STORE_URL\n",
		"--store-max-bytes BYTES",
		"default 1073741824, range 1..1125899906842624, env POSENC_STORE_MAX_BYTES\n",
		"--max-table-bytes BYTES",
		"default 67108864, range 1..68719476736, env POSENC_MAX_TABLE_BYTES\n",
		"--workers N",
		"default 2, range 1..256, env POSENC_WORKERS\n",
		"--cache-bytes BYTES",
		"default 268435456, range 0..1099511627776, env POSENC_CACHE_BYTES\n",
		"--max-elements N",
		"default 67108864, range 1..17179869184, env POSENC_MAX_ELEMENTS\n",
		"--max-body-bytes BYTES",
		"default 268435456, range 1..68719476736, env POSENC_MAX_BODY_BYTES\n",
		"--max-queue N",
		"default 256, range 1..1000000, env POSENC_MAX_QUEUE\n",
		"--max-connections N",
		"default 1024, range 1..1000000, env POSENC_MAX_CONNECTIONS\n",
		"--max-connections-per-ip N",
		"default 256, range 1..1000000, env POSENC_MAX_CONNECTIONS_PER_IP\n",
		"--connection-timeout N",
		"default 30, range 1..86400, env POSENC_CONNECTION_TIMEOUT\n",
		"--job-timeout N",
		"default 30, range 1..86400, env POSENC_JOB_TIMEOUT\n",
		"--auth-token TEXT",
		"default \"\", at most 255 bytes, env POSENC_AUTH_TOKEN\n",
		"--cors-origins TEXT",
		"default \"*\", at most 1023 bytes, env POSENC_CORS_ORIGINS\n",
		"--log-level LEVEL",
		"default info, one of error|warn|info|debug, env POSENC_LOG_LEVEL\n",
		"--shutdown-timeout N",
		"default 30, range 0..3600, env POSENC_SHUTDOWN_TIMEOUT\n",
	};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
		ck_assert_msg(strstr(out, want[i]) != NULL, "--help lacks \"%s\":\n%s", want[i], out);
	/* Every description starts in the same column, even after an option too long for it. */
	for (const char *line = out; *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : line + strlen(line)) {
		size_t len = strcspn(line, "\n");
		size_t words = 0; /* "--name METAVAR" alone on its line: the description follows below */
		for (size_t i = 2; i < len; i++)
			words += line[i] != ' ' && line[i - 1] == ' ';
		if (strncmp(line, "  --", 4) != 0 || len <= 30 || words <= 2)
			continue;
		ck_assert_msg(line[29] == ' ' && line[30] != ' ',
			      "--help: a description out of its column: %.*s", (int)len, line);
	}
	free(out);
}
END_TEST

START_TEST(help_shows_builtin_defaults_not_overrides)
{
	int rc;
	char *argv[] = {"posencd", "--port=1", "--help", NULL};
	char *out = captured_load(&rc, 3, argv);
	ck_assert_int_eq(rc, 1);
	ck_assert_ptr_nonnull(strstr(out, "default 8080, range 0..65535"));
	free(out);
}
END_TEST

START_TEST(version)
{
	int rc;
	char *argv[] = {"posencd", "--version", NULL};
	char *out = captured_load(&rc, 2, argv);
	ck_assert_int_eq(rc, 1);
	ck_assert_str_eq(out, "posencd " PE_VERSION "\n");
	ck_assert_str_eq(out, "posencd 0.1.0\n");
	free(out);
}
END_TEST

START_TEST(log_level_names)
{
	ck_assert_str_eq(pe_log_level_name(PE_LOG_ERROR), "error");
	ck_assert_str_eq(pe_log_level_name(PE_LOG_WARN), "warn");
	ck_assert_str_eq(pe_log_level_name(PE_LOG_INFO), "info");
	ck_assert_str_eq(pe_log_level_name(PE_LOG_DEBUG), "debug");
	ck_assert_str_eq(pe_log_level_name((enum pe_log_level)4), "unknown");
	ck_assert_str_eq(pe_log_level_name((enum pe_log_level)-1), "unknown");
	/* Every name parses back to its level. */
	for (int l = PE_LOG_ERROR; l <= PE_LOG_DEBUG; l++) {
		struct pe_config cfg;
		char arg[32];
		snprintf(arg, sizeof arg, "--log-level=%s", pe_log_level_name((enum pe_log_level)l));
		ck_assert_int_eq(LOAD(&cfg, no_env, NULL, arg), 0);
		ck_assert_int_eq(cfg.log_level, l);
	}
}
END_TEST

START_TEST(quota_cpus_from_cgroup_text)
{
	ck_assert_uint_eq(pe_config_quota_cpus("max 100000\n"), 0);      /* v2, no quota */
	ck_assert_uint_eq(pe_config_quota_cpus("200000 100000\n"), 2);    /* v2, two CPUs */
	ck_assert_uint_eq(pe_config_quota_cpus("150000 100000"), 2);      /* 1.5 rounds up */
	ck_assert_uint_eq(pe_config_quota_cpus("50000 100000"), 1);       /* half a CPU */
	ck_assert_uint_eq(pe_config_quota_cpus("-1\n 100000\n"), 0);      /* v1, no quota */
	ck_assert_uint_eq(pe_config_quota_cpus("400000\n 100000\n"), 4); /* v1, four CPUs */
	ck_assert_uint_eq(pe_config_quota_cpus(""), 0);                   /* unreadable */
	ck_assert_uint_eq(pe_config_quota_cpus("100000"), 0);             /* no period */
	ck_assert_uint_eq(pe_config_quota_cpus("100000 0"), 0);
	ck_assert_uint_eq(pe_config_quota_cpus("junk 100000"), 0);
	ck_assert_uint_eq(pe_config_quota_cpus(NULL), 0);
	ck_assert_uint_eq(pe_config_quota_cpus("99999999999999 1"), 4096);
}
END_TEST

START_TEST(auto_http_threads_per_two_cpus)
{
	ck_assert_int_eq(pe_config_auto_http_threads(1, 0), 1);
	ck_assert_int_eq(pe_config_auto_http_threads(2, 0), 1);
	ck_assert_int_eq(pe_config_auto_http_threads(3, 0), 1);
	ck_assert_int_eq(pe_config_auto_http_threads(4, 0), 2);
	ck_assert_int_eq(pe_config_auto_http_threads(64, 0), 32);
	ck_assert_int_eq(pe_config_auto_http_threads(64, 2), 1); /* a container's quota of 2 on 64 CPUs */
	ck_assert_int_eq(pe_config_auto_http_threads(64, 8), 4);
	ck_assert_int_eq(pe_config_auto_http_threads(4, 16), 2); /* a quota above the affinity: the affinity */
	ck_assert_int_eq(pe_config_auto_http_threads(0, 0), 1);  /* affinity unknown */
}
END_TEST

static Suite *config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("config");
	tcase_add_test(tc, defaults_are_the_literal_values);
	tcase_add_test(tc, defaults_match_config_file);
	tcase_add_test(tc, precedence_file_env_argv);
	tcase_add_test(tc, env_beats_file_for_strings_and_enum);
	tcase_add_test(tc, argv_forms_and_last_wins);
	tcase_add_test(tc, process_environment_when_envp_null);
	tcase_add_test(tc, byte_suffixes);
	tcase_add_test(tc, bad_integers_name_key_and_source);
	tcase_add_test(tc, bad_strings_enum_and_bind);
	tcase_add_test(tc, bad_options);
	tcase_add_test(tc, bad_files);
	tcase_add_test(tc, file_size_cap);
	tcase_add_test(tc, help_lists_every_option);
	tcase_add_test(tc, help_shows_builtin_defaults_not_overrides);
	tcase_add_test(tc, version);
	tcase_add_test(tc, log_level_names);
	tcase_add_test(tc, quota_cpus_from_cgroup_text);
	tcase_add_test(tc, auto_http_threads_per_two_cpus);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(config_suite)
