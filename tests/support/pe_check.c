/* Implementation of the shared test helpers (see pe_check.h). */
#include "support/pe_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t ordered_f32(float f)
{
	int32_t i;
	memcpy(&i, &f, sizeof i);
	return i < 0 ? (int64_t)INT32_MIN - i : i;
}

static int64_t ordered_f64(double d)
{
	int64_t i;
	memcpy(&i, &d, sizeof i);
	return i < 0 ? INT64_MIN - i : i;
}

uint64_t pe_ulp_f32(float a, float b)
{
	if (isnan(a) && isnan(b))
		return 0;
	int64_t d = ordered_f32(a) - ordered_f32(b);
	return (uint64_t)(d < 0 ? -d : d);
}

uint64_t pe_ulp_f64(double a, double b)
{
	if (isnan(a) && isnan(b))
		return 0;
	int64_t x = ordered_f64(a), y = ordered_f64(b);
	return x > y ? (uint64_t)x - (uint64_t)y : (uint64_t)y - (uint64_t)x;
}

double pe_ulp_err_f32(float a, double x)
{
	double ax = fabs(x);
	int e;
	frexp(ax < 0x1p-126 ? 0x1p-126 : ax, &e); /* ax = m * 2^e, m in [0.5, 1) */
	double ulp = ldexp(1.0, e - 24);
	return fabs((double)a - x) / ulp;
}

void *pe_test_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	ck_assert_msg(f != NULL, "cannot open %s", path);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *p = malloc((size_t)n + 1);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(fread(p, 1, (size_t)n, f), (size_t)n);
	p[n] = 0;
	fclose(f);
	*len = (size_t)n;
	return p;
}

int pe_test_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

int pe_is_json_number(const char *s)
{
	if (*s == '-')
		s++;
	if (*s == '0')
		s++;
	else if (*s >= '1' && *s <= '9')
		while (*s >= '0' && *s <= '9')
			s++;
	else
		return 0;
	if (*s == '.') {
		if (!(*++s >= '0' && *s <= '9'))
			return 0;
		while (*s >= '0' && *s <= '9')
			s++;
	}
	if (*s == 'e' || *s == 'E') {
		s++;
		if (*s == '+' || *s == '-')
			s++;
		if (!(*s >= '0' && *s <= '9'))
			return 0;
		while (*s >= '0' && *s <= '9')
			s++;
	}
	return *s == 0;
}
