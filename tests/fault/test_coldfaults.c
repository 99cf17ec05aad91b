/* A cold table costs at most one page fault per 64 KiB of its answer (issue 33): the block a bin
 * table is computed into, and the scratch table a text format is encoded from, lie on transparent
 * huge pages (src/tensor/buf.c, first_block), not on 4 KiB pages faulted in one at a time (6155
 * minor faults for a 24 MiB table, one per 4 KiB). Counts posencd's minor faults
 * (/proc/PID/stat) around cold requests after a warm-up of each shape; asserts no time. Skipped
 * (a note) where transparent huge pages are off, and under an instrumented daemon. */
#include "support/pe_fault.h"

#define ROUNDS 3

/* Minor faults of pid so far (field 10 of /proc/PID/stat), or -1. */
static long minflt(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	char *s = read_file(path, NULL), *p = s ? strrchr(s, ')') : NULL;
	long v = -1;
	if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %ld", &v) != 1)
		v = -1;
	free(s);
	return v;
}

/* Is transparent huge pages' mode "never" (or unknown)? */
static int thp_off(void)
{
	char *s = read_file("/sys/kernel/mm/transparent_hugepage/enabled", NULL);
	int off = !s || strstr(s, "[never]") != NULL;
	free(s);
	return off;
}

/* ROUNDS cold requests of query at new offsets (after one warm-up): their minor faults per table
 * against one per 64 KiB of the answer. */
static void cold_faults(const struct pe_spawn *d, const char *query)
{
	char path[256];
	struct resp r;
	snprintf(path, sizeof path, "/v1/%s&offset=1", query);
	check(http_get(d->port, path, 120000, &r) == 0 && r.status == 200, "%s: the warm-up answered", query);
	resp_free(&r);
	long faults = 0;
	size_t bytes = 0;
	int misses = 0;
	for (int i = 0; i < ROUNDS; i++) {
		char cache[16];
		snprintf(path, sizeof path, "/v1/%s&offset=%d", query, 100 + i);
		long f0 = minflt(d->pid);
		int ok = http_get(d->port, path, 120000, &r) == 0 && r.status == 200;
		long f1 = minflt(d->pid);
		misses += ok && resp_header(&r, "X-PE-Cache", cache, sizeof cache) && !strcmp(cache, "miss");
		faults += f1 - f0;
		bytes += r.body_len;
		resp_free(&r);
	}
	check(misses == ROUNDS, "%s: %d of %d cold requests were misses", query, misses, ROUNDS);
	long per = faults / ROUNDS, allowed = (long)(bytes / ROUNDS / 65536);
	check(per <= allowed, "%s: %ld minor faults per cold table, at most %ld (one per 64 KiB of %zu bytes)", query,
	      per, allowed, bytes / ROUNDS);
}

static int scenario(void)
{
	fault_init("coldfaults", 300);
	if (thp_off()) {
		note("transparent huge pages are off here: nothing to check");
		return fault_finish();
	}
	struct pe_spawn d;
	const char *args[] = {"--workers", "2", NULL};
	daemon_start(&d, args);
	if (daemon_instrumented(&d)) {
		note("instrumented daemon: its allocator is not glibc's, faults not checked");
	} else {
		cold_faults(&d, "sinusoidal?len=8192&dim=768&format=bin");
		cold_faults(&d, "rope?len=32768&dim=192&format=bin");
		cold_faults(&d, "sinusoidal?len=2048&dim=1024&format=json");
	}
	check(daemon_stop(&d, SIGTERM, 10) == 0, "exit status 0 after SIGTERM");
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
