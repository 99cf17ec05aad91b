/* How posencd's small allocations reach glibc's per-thread cache (tcache): a bigger cache, set
 * through GLIBC_TUNABLES before glibc reads it (pe_alloc_tune_exec), and a calloc that takes from
 * it (defined here for the whole process, libmicrohttpd included).
 *
 * Why: a cold small miss makes ~40 small allocations on the HTTP thread (its answer's
 * MHD_Response and, per header, libmicrohttpd's calloc'd entry and two strdup'd strings), most in
 * glibc's smallest size class, and frees as many when the answer has gone. glibc keeps 7 freed
 * chunks a size in the thread's cache; the rest go to its fastbins, which the next request's
 * first large malloc (the answer's body, past 1 KiB) consolidates back into the heap, so the next
 * answer's headers are split out of it again, under _int_malloc (perf: 9% of the HTTP thread on
 * cold 16x16 misses, full cache). And glibc's calloc (2.36) never takes from the thread cache at
 * all. With a cache of PE_ALLOC_TCACHE_COUNT chunks a size and a calloc through malloc, nearly
 * every one of them is a thread-cache push and pop: A/B on 2 vCPUs (AMD EPYC, cold 16x16 JSON
 * misses on a full 1 GiB cache, wrk -c16, daemons alternating), together with building a table's
 * hit response at its first hit (src/http/produce.c): 13.5-14.3 CPU-us per miss (two of six
 * rounds 16.2-16.9) against 15.1-18.8, 10-20% more requests/s; either alone gains nothing
 * (README, Benchmarks, session 13). What it may keep: PE_ALLOC_TCACHE_COUNT chunks of each of
 * glibc's 64 cached chunk sizes (32-1040 bytes) per thread, at most ~1.1 MiB a thread.
 *
 * glibc reads GLIBC_TUNABLES once, when the process starts, so posencd starts itself again, once
 * (the same pid, arguments and environment, plus the tunable), before anything else. An operator
 * who sets glibc.malloc.tcache_count in GLIBC_TUNABLES keeps that value and no second start
 * happens; nor when /proc/self/exe is not posencd (run through the dynamic linker, or under
 * valgrind), or cannot be executed: posencd then runs with glibc's defaults. Under
 * AddressSanitizer, which has its own allocator, neither is done. No library
 * offers either: jemalloc or tcmalloc would replace glibc's malloc whole, whose behaviour the
 * memory budget, the heap trimming and the RSS tests are built on (README, How it works, Memory). */
#include "daemon/alloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define PE_ALLOC_OWN 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PE_ALLOC_OWN 0
#endif
#endif
#ifndef PE_ALLOC_OWN
#define PE_ALLOC_OWN 1
#endif

#define TCACHE_KEY "glibc.malloc.tcache_count="
/* Set for the second start, so a C library that drops GLIBC_TUNABLES (a secure-mode start) cannot
 * make posencd start itself for ever: "<pid>:<name>", the pid (an exec keeps it) and the first
 * start's process name, which the second takes back (executing /proc/self/exe names a process
 * "exe"). A value with another pid is a copy of a running daemon's environment (a supervisor's
 * restart), not a second start: it is replaced, never taken for a name. */
#define STARTED_AGAIN "POSENC_ALLOC_TUNED"

int pe_alloc_tunables(const char *current, char *out, size_t cap)
{
	int n;
	if (current && strstr(current, TCACHE_KEY))
		return 0;
	if (current && *current)
		n = snprintf(out, cap, "%s:%s%d", current, TCACHE_KEY, PE_ALLOC_TCACHE_COUNT);
	else
		n = snprintf(out, cap, "%s%d", TCACHE_KEY, PE_ALLOC_TCACHE_COUNT);
	return n > 0 && (size_t)n < cap ? 1 : -1;
}

/* Would executing /proc/self/exe start posencd again? Not when the kernel started the dynamic
 * linker itself (`ld.so posencd`: /proc/self/exe is ld.so, and no interpreter was loaded, so
 * AT_BASE is 0), and not under valgrind, whose tool is what runs (it preloads its vgpreload
 * libraries into the program). */
static int exe_starts_posencd(void)
{
	const char *preload = getenv("LD_PRELOAD");
	return getauxval(AT_BASE) != 0 && !(preload && strstr(preload, "vgpreload"));
}

void pe_alloc_tune_exec(char **argv)
{
	const char *again = getenv(STARTED_AGAIN);
	char *rest = NULL;
	long pid = again ? strtol(again, &rest, 10) : 0;
	if (again && pid == (long)getpid() && *rest == ':') { /* the second start */
		if (rest[1])
			prctl(PR_SET_NAME, rest + 1, 0, 0, 0); /* the first start's name, not "exe" (ps, pgrep, top) */
		return;
	}
	if (!PE_ALLOC_OWN || !exe_starts_posencd())
		return;
	const char *current = getenv("GLIBC_TUNABLES");
	char value[4096], name[17] = "", marker[48];
	if (pe_alloc_tunables(current, value, sizeof value) != 1)
		return;
	char *saved = current ? strdup(current) : NULL;
	if (current && !saved)
		return;
	if (prctl(PR_GET_NAME, name, 0, 0, 0) != 0 || !name[0])
		strcpy(name, "posencd");
	snprintf(marker, sizeof marker, "%ld:%s", (long)getpid(), name);
	if (setenv(STARTED_AGAIN, marker, 1) == 0 && setenv("GLIBC_TUNABLES", value, 1) == 0)
		execv("/proc/self/exe", argv);
	/* no second start: go on as started, with glibc's defaults */
	if (saved)
		setenv("GLIBC_TUNABLES", saved, 1);
	else
		unsetenv("GLIBC_TUNABLES");
	unsetenv(STARTED_AGAIN);
	free(saved);
}

#if PE_ALLOC_OWN
/* malloc, out of the compiler's sight: it would turn a malloc and a memset of zero back into a
 * call of calloc, this one. */
static void *(*volatile plain_malloc)(size_t) = malloc;

/* Every size through malloc (and whichever malloc the process runs on: an LD_PRELOAD'ed allocator
 * gets its own blocks back in its free). Blocks glibc maps afresh are written once more here,
 * which its calloc skips; nothing in posencd callocs more than a few MiB. */
void *calloc(size_t n, size_t size)
{
	size_t bytes;
	if (__builtin_mul_overflow(n, size, &bytes)) {
		errno = ENOMEM;
		return NULL;
	}
	void *p = plain_malloc(bytes);
	if (p)
		memset(p, 0, bytes);
	return p;
}
#endif
