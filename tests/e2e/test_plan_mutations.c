/* POST /v1/plan never answers 200 with a url its own server refuses. Each published config under
 * tests/data/configs/ is posted with every number in it (at the top, in rope_scaling /
 * rope_parameters / text_config and any other object) set in turn to 0, -0, -1, 1e-310, 1e308,
 * true, a string and a list, and rope_scaling / rope_parameters / text_config themselves to the
 * same values. Each plan is a 422 problem naming a key, or a 200 whose every url, fetched from the
 * same daemon, answers 200; a scaling object or text model of another type is a 422 naming it.
 * ?len=8 keeps the tables small; the plans and fetches share one keep-alive connection.
 * `posenc plan` refuses a mutated config with the daemon's detail, on one stderr line, status 2.
 * The single cases, with the key each names, are tests/core/test_plan_refusals.c. */
#include "support/pe_check.h"
#include "support/pe_daemon.h"
#include "support/pe_http.h"
#include "cli/run.h"

#include <dirent.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONFIGS "tests/data/configs"
#define MAX_CONFIGS 64
#define MAX_SITES 4096
#define MAX_REPORTED 8

static char *configs[MAX_CONFIGS];
static int nconfigs;

static const char *const json_ct[] = {"Content-Type: application/json", NULL};

/* ---- the mutations ---- */

struct site {
	json_t *parent; /* the object holding the member */
	const char *key;
	char path[256]; /* for messages: "rope_scaling.factor" */
	int object;     /* rope_scaling / rope_parameters / text_config: every mutation must be a 422 */
};

static int is_scaling_or_text(const char *key)
{
	return !strcmp(key, "rope_scaling") || !strcmp(key, "rope_parameters") || !strcmp(key, "text_config");
}

/* Every number member of obj and its objects, and the scaling / text objects themselves. */
static void find_sites(json_t *obj, const char *prefix, struct site *s, size_t *n)
{
	const char *key;
	json_t *v;
	json_object_foreach(obj, key, v) {
		int number = json_is_number(v), object = json_is_object(v);
		char path[256];
		if (!(number || object) || *n >= MAX_SITES)
			continue;
		snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", key);
		if (number || is_scaling_or_text(key)) {
			struct site *at = &s[(*n)++];
			snprintf(at->path, sizeof at->path, "%s", path);
			at->parent = obj;
			at->key = key;
			at->object = object;
		}
		if (object)
			find_sites(v, path, s, n);
	}
}

#define NMUT 8
static const char *const mut_names[NMUT] = {"0", "-0", "-1", "1e-310", "1e308", "true", "a string", "a list"};

static json_t *mutation(int k)
{
	switch (k) {
	case 0: return json_integer(0);
	case 1: return json_real(-0.0);
	case 2: return json_integer(-1);
	case 3: return json_real(1e-310);
	case 4: return json_real(1e308);
	case 5: return json_true();
	case 6: return json_string("llama3");
	default: return json_pack("[i, i]", 1, 2);
	}
}

struct tally {
	size_t plans, refused, served, urls, bad;
	char first[MAX_REPORTED][512];
};

static void report(struct tally *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report(struct tally *t, const char *fmt, ...)
{
	if (t->bad < MAX_REPORTED) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(t->first[t->bad], sizeof t->first[0], fmt, ap);
		va_end(ap);
	}
	t->bad++;
}

/* The plan of body: a 422 problem naming a key (required when must_refuse), or a 200 whose urls
 * all answer 200. */
static void check_plan(struct pe_conn *c, const char *body, const char *what, int must_refuse, struct tally *t)
{
	struct pe_resp r;
	char why[256], ctype[128];
	t->plans++;
	pe_conn_request(c, "POST", "/v1/plan?len=8", json_ct, body, strlen(body), &r);
	if (r.status == 422) {
		t->refused++;
		json_t *p = json_loads(r.body, 0, NULL);
		const char *param = json_string_value(json_object_get(p, "param"));
		if (!pe_http_is_problem(r.status, pe_resp_header(&r, "Content-Type", ctype, sizeof ctype), r.body, r.len, 422,
					NULL, why, sizeof why))
			report(t, "%s: 422 but %s", what, why);
		else if (!param || !*param)
			report(t, "%s: 422 naming no key: %s", what, r.body);
		json_decref(p);
		pe_resp_free(&r);
		return;
	}
	if (r.status != 200 || must_refuse) {
		report(t, "%s: %ld %.300s", what, r.status, r.body);
		pe_resp_free(&r);
		return;
	}
	t->served++;
	json_t *plan = json_loads(r.body, 0, NULL), *e;
	size_t i;
	pe_resp_free(&r);
	ck_assert_msg(plan != NULL, "%s: the plan is not JSON", what);
	json_array_foreach(json_object_get(plan, "encodings"), i, e) {
		const char *url = json_string_value(json_object_get(e, "url"));
		if (!url || strncmp(url, "/v1/", 4) || !strcmp(url, "/v1/learned")) /* learned: a PUT's target */
			continue;
		t->urls++;
		pe_conn_request(c, "GET", url, NULL, NULL, 0, &r);
		if (r.status != 200)
			report(t, "%s: %s answers %ld %.300s", what, url, r.status, r.body);
		pe_resp_free(&r);
	}
	json_decref(plan);
}

START_TEST(every_url_of_every_mutated_plan_is_served)
{
	struct pe_daemon d;
	struct pe_conn c;
	struct tally t = {0};
	struct site *sites = calloc(MAX_SITES, sizeof *sites);
	size_t nsites = 0;
	char path[512];
	json_error_t je;
	snprintf(path, sizeof path, CONFIGS "/%s", configs[_i]);
	json_t *root = json_load_file(path, JSON_DECODE_INT_AS_REAL, &je);
	ck_assert_msg(root != NULL, "%s: %s", path, je.text);
	find_sites(root, "", sites, &nsites);
	ck_assert_msg(nsites > 0 && nsites < MAX_SITES, "%s: %zu numbers", path, nsites);
	pe_daemon_start(&d, NULL);
	pe_conn_open(&c, &d);
	char *plain = json_dumps(root, JSON_COMPACT);
	check_plan(&c, plain, configs[_i], 0, &t); /* as published */
	free(plain);
	for (size_t s = 0; s < nsites; s++) {
		json_t *orig = json_incref(json_object_get(sites[s].parent, sites[s].key));
		for (int k = 0; k < NMUT; k++) {
			char what[512];
			json_object_set_new(sites[s].parent, sites[s].key, mutation(k));
			char *body = json_dumps(root, JSON_COMPACT);
			snprintf(what, sizeof what, "%s %s = %s", configs[_i], sites[s].path, mut_names[k]);
			check_plan(&c, body, what, sites[s].object, &t);
			free(body);
		}
		json_object_set_new(sites[s].parent, sites[s].key, orig);
	}
	pe_conn_close(&c);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
	ck_assert_msg(t.bad == 0, "%s: %zu of %zu plans (%zu urls) failed; first: %s | %s | %s | %s", configs[_i], t.bad,
		      t.plans, t.urls, t.first[0], t.bad > 1 ? t.first[1] : "", t.bad > 2 ? t.first[2] : "",
		      t.bad > 3 ? t.first[3] : "");
	ck_assert_uint_eq(t.plans, 1 + NMUT * nsites);
	ck_assert_uint_ge(t.served, 1); /* the published config plans */
	json_decref(root);
	free(sites);
}
END_TEST

/* posenc plan gives the daemon's answer: the same 422 detail on one stderr line, status 2. */
START_TEST(the_cli_refuses_with_the_daemons_detail)
{
	static const struct {
		const char *config, *object, *key, *value, *param;
	} cases[] = {
		{"llama3.1-8b.json", "rope_scaling", "factor", "0", "rope_scaling.factor"},
		{"llama3.1-8b.json", NULL, "rope_scaling", "\"llama3\"", "rope_scaling"},
		{"llama3.1-8b.json", NULL, "rope_theta", "true", "rope_theta"},
		{"qwen2.5-7b-instruct-yarn.json", NULL, "rope_theta", "1", "rope_theta"},
		{"deepseek-v3.json", "rope_scaling", "mscale_all_dim", "1e308", "rope_scaling.mscale_all_dim"},
	};
	struct pe_daemon d;
	struct pe_conn c;
	struct pe_resp resp;
	char dir[] = "/tmp/pe-plan-mut-XXXXXX", file[64], path[256];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(file, sizeof file, "%s/config.json", dir);
	pe_daemon_start(&d, NULL);
	pe_conn_open(&c, &d);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		snprintf(path, sizeof path, CONFIGS "/%s", cases[i].config);
		json_t *root = json_load_file(path, JSON_DECODE_INT_AS_REAL, NULL), *v = json_loads(cases[i].value, JSON_DECODE_ANY, NULL);
		ck_assert_ptr_nonnull(root);
		ck_assert_ptr_nonnull(v);
		json_object_set_new(cases[i].object ? json_object_get(root, cases[i].object) : root, cases[i].key, v);
		char *body = json_dumps(root, JSON_COMPACT);
		ck_assert_int_eq(json_dump_file(root, file, JSON_COMPACT), 0);
		pe_conn_request(&c, "POST", "/v1/plan", json_ct, body, strlen(body), &resp);
		ck_assert_msg(resp.status == 422, "%s: %ld %s", path, resp.status, resp.body);
		json_t *p = pe_resp_json(&resp);
		pe_resp_free(&resp);
		ck_assert_str_eq(json_string_value(json_object_get(p, "param")), cases[i].param);
		const char *detail = json_string_value(json_object_get(p, "detail"));
		struct crun r;
		struct crun_opts o = {0};
		crun(&r, &o, "plan", file, NULL);
		ck_assert_msg(r.status == 2, "%s %s: status %d, stderr %s", cases[i].config, cases[i].param, r.status,
			      r.err ? r.err : "");
		ck_assert_msg(r.nerr > 8 && !strncmp(r.err, "posenc: ", 8) && strchr(r.err, '\n') == r.err + r.nerr - 1,
			      "not one line: %s", r.err ? r.err : "");
		ck_assert_msg(strstr(r.err, detail) != NULL, "stderr '%s' lacks the daemon's '%s'", r.err, detail);
		ck_assert_uint_eq(r.nout, 0);
		crun_free(&r);
		json_decref(p);
		free(body);
		json_decref(root);
	}
	pe_conn_close(&c);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
	unlink(file);
	rmdir(dir);
}
END_TEST

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The published configs, by name (the loop test's index picks one). */
static void list_configs(void)
{
	DIR *dir = opendir(CONFIGS);
	struct dirent *de;
	if (!dir)
		return;
	while ((de = readdir(dir)) != NULL && nconfigs < MAX_CONFIGS) {
		size_t n = strlen(de->d_name);
		if (n > 5 && !strcmp(de->d_name + n - 5, ".json"))
			configs[nconfigs++] = strdup(de->d_name);
	}
	closedir(dir);
	qsort(configs, (size_t)nconfigs, sizeof configs[0], by_name);
}

START_TEST(the_fixtures_are_there)
{
	ck_assert_int_ge(nconfigs, 25); /* a test over no configs passes vacuously */
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("plan_mutations");
	TCase *tc = tcase_create("e2e");
	list_configs();
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, the_fixtures_are_there);
	tcase_add_loop_test(tc, every_url_of_every_mutated_plan_is_served, 0, nconfigs);
	tcase_add_test(tc, the_cli_refuses_with_the_daemons_detail);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
