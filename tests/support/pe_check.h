/* Shared test helpers: a main() for check suites and ulp distance for numerical comparisons.
 * Each tests/<layer>/test_<module>.c is its own program: it defines its suite and ends with
 * PE_TEST_MAIN(suite_fn). */
#ifndef PE_TEST_CHECK_H
#define PE_TEST_CHECK_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

/* PE_SANITIZED: built under AddressSanitizer or ThreadSanitizer, whose allocators have no glibc
 * arenas, hand out exactly the bytes asked, reserve terabytes of address space, and make RSS and
 * start-up figures their own: checks of those are left out there. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PE_SANITIZED 1
#endif

/* Distance in units in the last place between two floats / doubles of the same type (0 if
 * bit-identical, both NaN counts as 0; +0 and -0 are 0 apart). */
uint64_t pe_ulp_f32(float a, float b);
uint64_t pe_ulp_f64(double a, double b);
/* Distance of float a from the exact value x (double), in ulps of float at x: |a - x| / ulp(x). */
double pe_ulp_err_f32(float a, double x);

/* Read a whole file (for known-answer files under tests/data); aborts the test on failure. */
void *pe_test_read_file(const char *path, size_t *len);

/* Is s exactly a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
int pe_is_json_number(const char *s);

int pe_test_run(Suite *s);

/* ck_assert_msg for loops over millions of values: check records a checkpoint for every assertion
 * that passes (a write to its pipe, about 2 CPU-us), this fails the same way and records nothing
 * while expr holds. */
#define PE_CHECK(expr, ...)                                                                    \
	do {                                                                                   \
		if (!(expr))                                                                   \
			ck_abort_msg(__VA_ARGS__);                                             \
	} while (0)

#define PE_TEST_MAIN(suite_fn)                                                                 \
	int main(void) { return pe_test_run(suite_fn()); }

#endif
