/* Request validation on the HTTP thread, for `make bench` (its "checks" rows; BENCH_ONLY=checks
 * runs them alone): pe_params_set per query key, pe_params_finish and the dtype check a miss adds,
 * for rope-family requests at dim 65536, with the cheap O(1) bound and, alternating with it in the
 * same process, with the exhaustive O(dim) frequency scan (pe_rope_freq_force_scan(1): the code
 * before the cheap bound, kept as its fallback for what the bound cannot decide). Each case gets
 * one unreported warm-up of each; every timed sample is one whole validation.
 *
 * Output, one line per measurement, for tests/tools/bench.sh to pool and take medians of:
 *     info check_<k> <table>?<query>
 *     sample check_bound_<k> <seconds>   |   sample check_scan_<k> <seconds>
 *     skip check_<k> <reason>            (the core refused the request)
 * Usage: bench_checks [reps]   (samples per case and mode, default 5). Not a test; build with
 *   make build/tests/bench/bench_checks */
#include "bench/bench_time.h"
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

/* One validation of case k with the scan forced on or off: its time in seconds, or -1 when the
 * core refused the request. */
static double timed(size_t k, int scan)
{
	pe_rope_freq_force_scan(scan);
	double t0 = bench_now();
	int rc = validate(cases[k].table, cases[k].query);
	double t = bench_now() - t0;
	pe_rope_freq_force_scan(0);
	return rc ? -1 : t;
}

int main(int argc, char **argv)
{
	int reps = argc > 1 ? atoi(argv[1]) : 5;
	if (reps < 1)
		reps = 1;
	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
		printf("info check_%zu %s?%s\n", k, cases[k].table, cases[k].query);
		if (timed(k, 1) < 0 || timed(k, 0) < 0) { /* the warm-ups */
			printf("skip check_%zu the core refused %s?%s\n", k, cases[k].table, cases[k].query);
			continue;
		}
		for (int r = 0; r < reps; r++) { /* A B A B, starting with each side in turn */
			int first = r & 1;
			double a = timed(k, first), b = timed(k, !first);
			printf("sample check_%s_%zu %.9f\n", first ? "scan" : "bound", k, a);
			printf("sample check_%s_%zu %.9f\n", first ? "bound" : "scan", k, b);
		}
	}
	return 0;
}
