/* POST /v1/plan as a hostile client reads it: every url a plan gives is fetched as given, with
 * and without gzip, for every fixture under tests/data/configs/ at the extreme lens (1, and the
 * largest ?len, 2^30; test_plan_configs.c fetches the default len), under the default limits (max_elements
 * 2^20: the cap is the point at 2^30, not the table's size) and under small ones (a response budget of a few
 * MB, max_elements 500000) where the plan must switch to npy or cap len. A url the plan gives
 * must be a 200, and a len the plan capped must be named in a warning. Configs share tables: each
 * distinct url is fetched once per daemon, over a few connections at once.
 *
 * M-RoPE's segments stop at 999999999 positions, below ?len's 2^30: at len=2^30 the plan used to
 * give up on the table ("refuses the planned parameters") and hand out an unchecked url that
 * 413'd. */
#include "support/pe_check.h"
#include "support/pe_daemon.h"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CONFIGS "tests/data/configs"
#define NWORKERS 3 /* connections fetching at once: each waits on the daemon while another reads */

static const char *const json_ct[] = {"Content-Type: application/json", NULL};
static const char *const gzip_ae[] = {"Accept-Encoding: gzip", NULL};

static int warned(json_t *plan, const char *needle)
{
	size_t i;
	json_t *w;
	json_array_foreach(json_object_get(plan, "warnings"), i, w)
		if (strstr(json_string_value(w), needle))
			return 1;
	return 0;
}

/* GET url; a 503 (the budget is held a moment longer by another answer: a table may fill the
 * whole small budget) is retried, as its Retry-After says a client should, polling so the retry
 * comes as soon as the budget is free. */
static void get_retrying(struct pe_conn *c, const char *url, const char *const *hdr, struct pe_resp *r)
{
	for (int i = 0; i < 500; i++) {
		pe_conn_request(c, "GET", url, hdr, NULL, 0, r);
		if (r->status != 503)
			return;
		pe_resp_free(r);
		usleep(10000);
	}
	pe_conn_request(c, "GET", url, hdr, NULL, 0, r);
}

/* The url is answered 200 as given, with and without gzip. */
static void fetch(struct pe_conn *c, const char *what, const char *url)
{
	struct pe_resp r;
	get_retrying(c, url, NULL, &r);
	ck_assert_msg(r.status == 200, "%s: %s: %ld %.300s", what, url, r.status, r.body ? r.body : "");
	pe_resp_free(&r);
	get_retrying(c, url, gzip_ae, &r);
	ck_assert_msg(r.status == 200, "%s (gzip): %s: %ld %.300s", what, url, r.status, r.body ? r.body : "");
	pe_resp_free(&r);
}

/* The distinct urls the plans gave, each with the first plan that gave it (for messages): a
 * table's answer depends on its url alone, so each is fetched once per daemon. */
struct urls {
	char **url, **what;
	size_t n, cap, next; /* next: the first not yet taken by a fetcher */
	pthread_mutex_t lock;
	const struct pe_daemon *d;
};

static void urls_add(struct urls *u, const char *url, const char *what)
{
	for (size_t i = 0; i < u->n; i++)
		if (!strcmp(u->url[i], url))
			return;
	if (u->n == u->cap) {
		u->cap = u->cap ? 2 * u->cap : 64;
		u->url = realloc(u->url, u->cap * sizeof *u->url);
		u->what = realloc(u->what, u->cap * sizeof *u->what);
		ck_assert(u->url && u->what);
	}
	u->url[u->n] = strdup(url);
	u->what[u->n++] = strdup(what);
}

static void *fetcher(void *arg)
{
	struct urls *u = arg;
	struct pe_conn c;
	pe_conn_open(&c, u->d);
	for (;;) {
		pthread_mutex_lock(&u->lock);
		size_t i = u->next++;
		pthread_mutex_unlock(&u->lock);
		if (i >= u->n)
			break;
		fetch(&c, u->what[i], u->url[i]);
	}
	pe_conn_close(&c);
	return NULL;
}

/* Every url in u fetched, over NWORKERS connections to u->d; u emptied. */
static void fetch_all(struct urls *u)
{
	pthread_t th[NWORKERS];
	u->next = 0;
	pthread_mutex_init(&u->lock, NULL);
	for (size_t k = 0; k < NWORKERS; k++)
		ck_assert_int_eq(pthread_create(&th[k], NULL, fetcher, u), 0);
	for (size_t k = 0; k < NWORKERS; k++)
		ck_assert_int_eq(pthread_join(th[k], NULL), 0);
	pthread_mutex_destroy(&u->lock);
	for (size_t i = 0; i < u->n; i++) {
		free(u->url[i]);
		free(u->what[i]);
	}
	free(u->url);
	free(u->what);
	u->url = u->what = NULL;
	u->n = u->cap = 0;
}

/* A len (or q_len) below the one asked for is named in a warning. */
static void check_cap(json_t *plan, json_t *e, long long len, const char *what)
{
	static const char *const keys[] = {"len", "q_len"};
	for (size_t k = 0; k < 2; k++) {
		json_t *v = json_object_get(json_object_get(e, "params"), keys[k]);
		if (!json_is_integer(v) || json_integer_value(v) >= len)
			continue;
		char needle[64];
		snprintf(needle, sizeof needle, "capped to %lld", (long long)json_integer_value(v));
		ck_assert_msg(warned(plan, needle), "%s: %s %lld with no warning", what, keys[k],
			      (long long)json_integer_value(v));
	}
}

/* Plans name at len; every url of the plan joins u, every cap is warned of. The number of urls. */
static size_t plan_urls(const struct pe_daemon *d, const char *name, long long len, struct urls *u)
{
	char path[300], query[64], what[400];
	size_t n, i, fetched = 0;
	json_t *e;
	struct pe_resp r;
	snprintf(path, sizeof path, CONFIGS "/%s", name);
	char *body = pe_test_read_file(path, &n);
	snprintf(query, sizeof query, "/v1/plan?len=%lld", len);
	pe_request(d, "POST", query, json_ct, body, n, &r);
	free(body);
	ck_assert_msg(r.status == 200, "%s %s: %ld %s", name, query, r.status, r.body ? r.body : "");
	json_t *plan = pe_resp_json(&r);
	pe_resp_free(&r);
	snprintf(what, sizeof what, "%s len=%lld", name, len);
	json_array_foreach(json_object_get(plan, "encodings"), i, e) {
		const char *url = json_string_value(json_object_get(e, "url"));
		if (!url || strncmp(url, "/v1/", 4) || !strncmp(url, "/v1/learned", 11))
			continue;
		urls_add(u, url, what);
		check_cap(plan, e, len, what);
		fetched++;
	}
	json_decref(plan);
	return fetched;
}

static void every_fixture(const char *const *args)
{
	static const long long lens[] = {1, 1LL << 30};
	struct pe_daemon d;
	struct urls u = {.d = &d};
	size_t fetched = 0, configs = 0;
	struct dirent *de;
	pe_daemon_start(&d, args);
	DIR *dir = opendir(CONFIGS);
	ck_assert_ptr_nonnull(dir);
	while ((de = readdir(dir)) != NULL) {
		size_t k = strlen(de->d_name);
		if (k < 6 || strcmp(de->d_name + k - 5, ".json"))
			continue;
		configs++;
		for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
			fetched += plan_urls(&d, de->d_name, lens[l], &u);
	}
	closedir(dir);
	fetch_all(&u);
	ck_assert_uint_ge(configs, 20);
	ck_assert_uint_ge(fetched, configs);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}

/* The default limits but max_elements 2^20: at len=2^30 every table is still capped, by the same
 * rule as at the default 2^26, while each table is 64 times smaller to build and send (the M-RoPE
 * case below keeps the default). */
START_TEST(every_url_is_served_at_every_len)
{
	static const char *const args[] = {"--max-elements", "1048576", NULL};
	every_fixture(args);
}
END_TEST

START_TEST(every_url_is_served_under_small_limits)
{
	static const char *const args[] = {"--response-budget-bytes", "4000000", "--max-elements", "500000", NULL};
	every_fixture(args);
}
END_TEST

/* The M-RoPE case alone: len=2^30 is capped to what the table and the server take, not given up. */
START_TEST(mrope_at_the_largest_len_is_capped_not_unchecked)
{
	struct pe_daemon d;
	struct urls u = {.d = &d};
	pe_daemon_start(&d, NULL);
	ck_assert_uint_ge(plan_urls(&d, "qwen2-vl-7b.json", 1LL << 30, &u), 1);
	fetch_all(&u);
	struct pe_resp r;
	size_t n;
	char *body = pe_test_read_file(CONFIGS "/qwen2-vl-7b.json", &n);
	pe_request(&d, "POST", "/v1/plan?len=1073741824", json_ct, body, n, &r);
	free(body);
	ck_assert_msg(!strstr(r.body, "refuses the planned parameters"), "%s", r.body);
	pe_resp_free(&r);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* A plan is made on a worker, not on the HTTP thread (a big body takes milliseconds to parse):
 * posenc_jobs_total counts it and posenc_jobs_inline_total does not; its answer keeps its headers,
 * and a body that is not JSON is still a 400 naming body, from the job. */
START_TEST(a_plan_is_made_on_a_worker)
{
	struct pe_daemon d;
	struct pe_resp r;
	size_t n;
	char v[256];
	pe_daemon_start(&d, NULL);
	char *body = pe_test_read_file(CONFIGS "/qwen2-vl-7b.json", &n);
	double jobs = pe_metric(&d, "posenc_jobs_total"), inl = pe_metric(&d, "posenc_jobs_inline_total");
	pe_request(&d, "POST", "/v1/plan?len=4096", json_ct, body, n, &r);
	free(body);
	ck_assert_int_eq(r.status, 200);
	ck_assert_ptr_nonnull(strstr(r.body, "\"encodings\""));
	ck_assert_str_eq(pe_resp_header(&r, "Content-Type", v, sizeof v), "application/json");
	ck_assert_str_eq(pe_resp_header(&r, "Cache-Control", v, sizeof v), "no-store");
	ck_assert_str_eq(pe_resp_header(&r, "Access-Control-Allow-Origin", v, sizeof v), "*");
	pe_resp_free(&r);
	ck_assert_double_eq(pe_metric(&d, "posenc_jobs_total"), jobs + 1);
	ck_assert_double_eq(pe_metric(&d, "posenc_jobs_inline_total"), inl);
	pe_request(&d, "POST", "/v1/plan", json_ct, "{\"model_type\": ", 15, &r);
	ck_assert_int_eq(r.status, 400);
	ck_assert_ptr_nonnull(strstr(r.body, "\"param\":\"body\""));
	pe_resp_free(&r);
	ck_assert_double_eq(pe_metric(&d, "posenc_jobs_total"), jobs + 2);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

static Suite *plan_served_suite(void)
{
	Suite *s = suite_create("plan_served");
	TCase *tc = tcase_create("e2e");
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, mrope_at_the_largest_len_is_capped_not_unchecked);
	tcase_add_test(tc, a_plan_is_made_on_a_worker);
	tcase_add_test(tc, every_url_is_served_at_every_len);
	tcase_add_test(tc, every_url_is_served_under_small_limits);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(plan_served_suite)
