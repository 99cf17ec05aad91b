/* libFuzzer target: the configuration loader (pe_config_load, src/daemon/config.c).
 *
 * Input: the bytes up to the first NUL are a --config file (written to a memfd and passed as
 * /proc/self/fd/N, so nothing touches the disk); each further NUL-separated piece is either an
 * environment variable (when it starts with "POSENC_") or a command-line argument. argv is
 * {"posencd", "--config", <file>, <pieces>...}. The process environment is never consulted.
 *
 * Checks: a failure is PE_EINVAL (PE_ENOMEM tolerated) with err.param naming a key, option,
 * argument or "config" and a one-line detail that starts "config: "; --help / --version return 1 (their text
 * goes to stdout, sent to /dev/null here). A success leaves every setting inside the range the
 * loader's own table gives (checked here against config/posenc.json's documented ranges): a port
 * that fits 16 bits, a bind address that is an IP literal, NUL-terminated strings, positive limits. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "daemon/config.h"

#define MAX_PIECES 64

#define FAIL(...)                                               \
	do {                                                    \
		fprintf(stderr, "fuzz_config: " __VA_ARGS__);   \
		fputc('\n', stderr);                            \
		abort();                                        \
	} while (0)

static int memfd = -1;
static char memfd_path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	memfd = memfd_create("posenc-config", 0);
	if (memfd < 0) {
		perror("memfd_create");
		exit(1);
	}
	snprintf(memfd_path, sizeof memfd_path, "/proc/self/fd/%d", memfd);
	/* --help and --version print to stdout: keep the fuzzer's output readable. */
	if (!freopen("/dev/null", "w", stdout))
		exit(1);
	return 0;
}

static int terminated(const char *s, size_t cap) { return memchr(s, 0, cap) != NULL; }

#define RANGE(f, lo, hi)                                                                   \
	do {                                                                               \
		if (cfg.f < (lo) || cfg.f > (hi))                                          \
			FAIL(#f " = %lld accepted, outside %lld..%lld", (long long)cfg.f,   \
			     (long long)(lo), (long long)(hi));                            \
	} while (0)

static void check_config(const struct pe_config *c)
{
	struct pe_config cfg = *c;
	unsigned char addr[16];
	RANGE(port, 0, 65535);
	RANGE(store_max_bytes, 1, INT64_C(1) << 50);
	RANGE(max_table_bytes, 1, INT64_C(1) << 36);
	RANGE(workers, 1, 256);
	RANGE(cache_bytes, 0, INT64_C(1) << 40);
	RANGE(max_elements, 1, INT64_C(1) << 34);
	RANGE(max_body_bytes, 1, INT64_C(1) << 36);
	RANGE(max_queue, 1, 1000000);
	RANGE(max_connections, 1, 1000000);
	RANGE(max_connections_per_ip, 1, 1000000);
	RANGE(connection_timeout, 1, 86400);
	RANGE(job_timeout, 1, 86400);
	RANGE(linger_bytes, 0, INT64_C(1) << 40);
	RANGE(linger_timeout, 1, 3600);
	RANGE(shutdown_timeout, 0, 3600);
	if ((int)cfg.log_level < PE_LOG_ERROR || (int)cfg.log_level > PE_LOG_DEBUG)
		FAIL("log_level %d", (int)cfg.log_level);
	if (!terminated(cfg.bind, sizeof cfg.bind) || !terminated(cfg.data_dir, sizeof cfg.data_dir) ||
	    !terminated(cfg.auth_token, sizeof cfg.auth_token) ||
	    !terminated(cfg.cors_origins, sizeof cfg.cors_origins) ||
	    !terminated(cfg.tls_cert, sizeof cfg.tls_cert) || !terminated(cfg.tls_key, sizeof cfg.tls_key))
		FAIL("a string setting is not NUL-terminated");
	if (inet_pton(AF_INET, cfg.bind, addr) != 1 && inet_pton(AF_INET6, cfg.bind, addr) != 1)
		FAIL("bind '%s' accepted", cfg.bind);
	if (!cfg.data_dir[0])
		FAIL("empty data_dir accepted");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, 0, size);
	size_t file_len = nul ? (size_t)(nul - data) : size;
	if (ftruncate(memfd, 0) != 0 || pwrite(memfd, data, file_len, 0) != (ssize_t)file_len)
		abort();

	/* The rest: NUL-separated pieces, copied so each is a C string. */
	char *rest = NULL;
	char *argv[MAX_PIECES + 4], *envp[MAX_PIECES + 1];
	int argc = 0, envc = 0;
	argv[argc++] = (char *)"posencd";
	argv[argc++] = (char *)"--config";
	argv[argc++] = memfd_path;
	if (nul) {
		size_t n = size - file_len - 1;
		rest = malloc(n + 1);
		if (!rest)
			abort();
		memcpy(rest, nul + 1, n);
		rest[n] = 0;
		for (char *p = rest; p <= rest + n && argc < MAX_PIECES + 3 && envc < MAX_PIECES;) {
			size_t len = strlen(p);
			if (!strncmp(p, "POSENC_", 7))
				envp[envc++] = p;
			else
				argv[argc++] = p;
			p += len + 1;
		}
	}
	argv[argc] = NULL;
	envp[envc] = NULL;

	struct pe_config *cfg = malloc(sizeof *cfg);
	struct pe_err err = {0};
	if (!cfg)
		abort();
	int rc = pe_config_load(cfg, argc, argv, envp, &err);
	if (rc == 0)
		check_config(cfg);
	else if (rc != 1) {
		/* err.param names the key, option or argument at fault ("" only when that is "") */
		if ((rc != PE_EINVAL && rc != PE_ENOMEM) || err.code != rc ||
		    (!err.param[0] && strncmp(err.detail, "config: : ", 10) != 0))
			FAIL("failure %d with err {%d, '%s', '%s'}", rc, err.code, err.param, err.detail);
		if (strncmp(err.detail, "config: ", 8) != 0 || strchr(err.detail, '\n'))
			FAIL("error detail is not one 'config: ' line: '%s'", err.detail);
	}
	free(cfg);
	free(rest);
	return 0;
}
