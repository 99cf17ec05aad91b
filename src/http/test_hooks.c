/* The test gates (test_hooks.h). Compiled twice: with -DPE_TEST_HOOKS into build/posencd-hooks,
 * which the tests that need a job or a write held start (tests/support/pe_spawn.h,
 * pe_spawn_hooks), and without it into posencd, where both functions are empty, so no variable
 * in the shipped daemon's environment can stall its jobs or writes. */
#include "http/test_hooks.h"

#ifdef PE_TEST_HOOKS
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* While the file the variable env names exists (at most a minute) and the key contains its text,
 * wait: a test holds one big table in flight for as long as it needs, deterministically. */
static void key_gate(const char *env, const char *key, size_t keylen)
{
	const char *path = getenv(env);
	char text[128];
	FILE *f;
	for (int i = 0; path && *path && i < 6000 && (f = fopen(path, "r")) != NULL; i++) {
		size_t n = fread(text, 1, sizeof text - 1, f);
		fclose(f);
		text[n] = 0;
		if (!n || !memmem(key, keylen, text, n))
			break;
		usleep(10000);
	}
}

/* POSENC_TEST_JOB_GATE: before the job computes. */
void pe_hook_job_gate(const char *key, size_t keylen) { key_gate("POSENC_TEST_JOB_GATE", key, keylen); }

/* POSENC_TEST_STREAM_GATE: after a streamed answer's first block went to its first request. */
void pe_hook_stream_gate(const char *key, size_t keylen) { key_gate("POSENC_TEST_STREAM_GATE", key, keylen); }

/* While the file POSENC_TEST_WRITE_GATE names exists (at most a minute), wait: a test lets
 * job_timeout pass before the write lands. */
void pe_hook_write_gate(void)
{
	const char *path = getenv("POSENC_TEST_WRITE_GATE");
	struct stat st;
	for (int i = 0; path && *path && i < 6000 && stat(path, &st) == 0; i++)
		usleep(10000);
}

#else

void pe_hook_job_gate(const char *key, size_t keylen) {}

void pe_hook_stream_gate(const char *key, size_t keylen) {}

void pe_hook_write_gate(void) {}

#endif
