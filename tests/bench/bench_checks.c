/* Request validation on the HTTP thread: pe_params_finish (and, on a miss, pe_table_check_dtype)
 * for rope-family requests at the parameter limits, with the exhaustive frequency scan
 * (pe_rope_freq_force_scan(1), the code before the cheap bound) and with the cheap bound.
 * Prints the median of 15 runs in microseconds per request. Not a test: `make bench` or
 *   make build/tests/bench/bench_checks && ./build/tests/bench/bench_checks */
#include "core/rope.h"
#include "posenc/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const struct {
	const char *table, *query;
} cases[] = {
	{"rope", "len=1&dim=65536"},
	{"rope", "len=1&dim=65536&compat=hf"},
	{"rope", "len=1&dim=65536&base=0.5"},
	{"rope", "len=1&dim=65536&scaling=yarn&factor=4&original_max_position_embeddings=4096&compat=hf"},
	{"rope", "len=1&dim=65536&scaling=llama3&factor=8&original_max_position_embeddings=8192"},
	{"rope/inv_freq", "dim=65536"},
	{"rope/inv_freq", "dim=65536&compat=hf"},
	{"rope/inv_freq", "dim=65536&compat=ggml"},
	{"rope", "len=1&dim=65536&compat=ggml&scaling=yarn&factor=4&original_max_position_embeddings=4096"},
	{"rope", "len=1&dim=65536&scaling=llama3&factor=8&original_max_position_embeddings=8192&low_freq_factor=1&high_freq_factor=1"},
	{"rope", "len=1&dim=65536&scaling=llama3&factor=8&original_max_position_embeddings=8192&compat=hf"},
	{"rope", "len=1&dim=65536&scaling=llama3&factor=8&original_max_position_embeddings=8192&compat=ggml"},
	{"rope", "len=1&dim=65536&scaling=dynamic&factor=4&original_max_position_embeddings=4096&seq_len=8192&compat=hf"},
	{"rope2d", "height=4&width=4&dim=65536&compat=hf"},
	{"analysis/order", "len=4&dim=65536&encoding=rope"},
	{"analysis/similarity", "len=1&dim=65536&encoding=rope"},
	{"analysis/similarity", "len=1&dim=65536&encoding=rope&compat=hf"},
	{"rope/mrope", "dim=65536&mrope_section=10924,10922,10922"},
};

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* One request's validation: finish, then the dtype check a miss adds. */
static int validate(const char *table, const char *query)
{
	struct pe_params p;
	struct pe_err err = {0};
	char *q = strdup(query), *save = NULL;
	int rc = 0;
	pe_params_init(&p, pe_table_find(table));
	for (char *kv = strtok_r(q, "&", &save); kv && rc == 0; kv = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(kv, '=');
		*eq = 0;
		rc = pe_params_set(&p, kv, eq + 1, &err);
	}
	if (rc == 0)
		rc = pe_params_finish(&p, &err);
	if (rc == 0)
		rc = pe_table_check_dtype(&p, PE_F32, &err);
	pe_params_destroy(&p);
	free(q);
	if (rc)
		fprintf(stderr, "%s?%s: %s (%s)\n", table, query, err.detail, err.param);
	return rc;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median_us(const char *table, const char *query, int scan)
{
	enum { RUNS = 15 };
	double t[RUNS];
	pe_rope_freq_force_scan(scan);
	for (int r = 0; r < RUNS; r++) {
		double t0 = now_us();
		validate(table, query);
		t[r] = now_us() - t0;
	}
	pe_rope_freq_force_scan(0);
	qsort(t, RUNS, sizeof t[0], cmp);
	return t[RUNS / 2];
}

int main(void)
{
	printf("%-22s %-90s %12s %12s\n", "table", "query", "scan us", "bound us");
	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
		double a = median_us(cases[k].table, cases[k].query, 1), b = median_us(cases[k].table, cases[k].query, 0);
		printf("%-22s %-90s %12.1f %12.1f\n", cases[k].table, cases[k].query, a, b);
	}
	return 0;
}
