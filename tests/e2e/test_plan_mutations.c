/* POST /v1/plan never answers 200 with a url its own server refuses. Each published config under
 * tests/data/configs/ is posted with every member in it (at the top, in rope_scaling /
 * rope_parameters / text_config and any other object) set in turn to values of its own JSON type
 * and of every other: a number to 0, -0, -1, 1e-310, 1e308, true, a string, a list and an object;
 * a boolean, a string, a list or an object to its other values and the other types. Each plan is a
 * 422 problem naming a key, or a 200 whose every url, fetched from the same daemon, answers 200;
 * a key the plan reads as one JSON type (typed_keys: the scaling object, the text model, alibi,
 * mrope_interleaved, sliding_window...) set to another is a 422. ?len=8 keeps the tables small;
 * a config's mutations are shared among a few keep-alive connections to one daemon, and a url
 * already answered 200 on that daemon is not fetched again. `posenc plan` with the daemon's
 * max_elements gets every mutated config too and agrees: exit 0 for a 200, status 2 with the
 * daemon's detail on one stderr line for a 422 or 400. The single cases, with the key each names,
 * are tests/core/test_plan_refusals.c. */
#include "support/pe_check.h"
#include "support/pe_daemon.h"
#include "support/pe_http.h"
#include "cli/run.h"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONFIGS "tests/data/configs"
#define MAX_SITES 4096
#define MAX_REPORTED 8
#define NWORKERS 3 /* connections (and CLI runs) in flight: each waits on the daemon or a child */

static char **configs; /* every published config, sized as listed */
static int nconfigs;

static const char *const json_ct[] = {"Content-Type: application/json", NULL};

/* ---- the mutations ---- */

struct site {
	json_t *parent; /* the object holding the member */
	const char *key;
	char path[256]; /* for messages: "rope_scaling.factor" */
	json_type type; /* the member's JSON type as published */
	int typed;      /* a key the plan reads as that type: another type must be a 422 */
};

/* Keys the plan reads as one JSON type, wherever the family reads them (at the top or in
 * text_config, which plan_get reads first). */
static const char *const typed_keys[] = {
	"rope_scaling", "rope_parameters", "text_config", "attn_config", "attn_config.alibi", "alibi",
	"use_sliding_window", "sliding_window", "rope_scaling.mrope_interleaved", "rope_scaling.mrope_section",
	"rope_scaling.short_factor", "rope_scaling.long_factor", "layer_types", "no_rope_layers", "rope_theta",
	"head_dim", "num_attention_heads", "image_size", "patch_size", "d_kv", NULL,
};

/* Is path one of typed_keys as the plan reads it: in text_config, or at the top of a config
 * whose text_config does not hold it? */
static int is_typed(json_t *root, const char *path)
{
	json_t *text = json_object_get(root, "text_config");
	const char *key = path;
	char top[256];
	if (text && !strncmp(path, "text_config.", 12))
		key = path + 12;
	else if (text) {
		snprintf(top, sizeof top, "%.*s", (int)strcspn(path, "."), path);
		if (strcmp(top, "text_config") && json_object_get(text, top))
			return 0; /* the text model's own is read instead */
	}
	for (int k = 0; typed_keys[k]; k++)
		if (!strcmp(typed_keys[k], key))
			return 1;
	return 0;
}

/* Every member of obj and its objects (null aside: it reads as absent). */
static void find_sites(json_t *root, json_t *obj, const char *prefix, struct site *s, size_t *n)
{
	const char *key;
	json_t *v;
	json_object_foreach(obj, key, v) {
		char path[256];
		if (json_is_null(v) || *n >= MAX_SITES)
			continue;
		snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", key);
		struct site *at = &s[(*n)++];
		snprintf(at->path, sizeof at->path, "%s", path);
		at->parent = obj;
		at->key = key;
		at->type = json_typeof(v) == JSON_INTEGER ? JSON_REAL : json_is_boolean(v) ? JSON_TRUE : json_typeof(v);
		at->typed = is_typed(root, path);
		if (json_is_object(v))
			find_sites(root, v, path, s, n);
	}
}

/* The values a member of JSON type t is set to: its own type's edge cases and every other type. */
#define NMUT 9
static const char *const mut_numbers[NMUT] = {"0", "-0", "-1", "1e-310", "1e308", "true", "\"llama3\"", "[1, 2]", "{}"};
static const char *const mut_bools[NMUT] = {"true", "false", "1", "0", "\"true\"", "[true]", "{}", NULL, NULL};
static const char *const mut_strings[NMUT] = {"\"\"", "\"x\"", "8", "true", "[\"x\"]", "{}", NULL, NULL, NULL};
static const char *const mut_lists[NMUT] = {"[]", "[\"x\"]", "8", "true", "\"x\"", "{}", NULL, NULL, NULL};
static const char *const mut_objects[NMUT] = {"{}", "0", "-1", "1e308", "true", "\"llama3\"", "[1, 2]", NULL, NULL};

static const char *const *mutations_of(json_type t)
{
	return t == JSON_REAL ? mut_numbers : t == JSON_TRUE ? mut_bools : t == JSON_STRING ? mut_strings :
	       t == JSON_ARRAY ? mut_lists : mut_objects;
}

static json_type type_of(const json_t *v)
{
	return json_is_number(v) ? JSON_REAL : json_is_boolean(v) ? JSON_TRUE : json_typeof(v);
}

struct tally {
	size_t plans, refused, served, urls, cli, bad;
	char first[MAX_REPORTED][512];
	char **seen; /* urls already answered 200 on this daemon: one fetch each */
	size_t nseen, capseen;
};

/* Has url been answered 200 already (a table's answer depends on its url alone)? */
static int seen(const struct tally *t, const char *url)
{
	for (size_t i = 0; i < t->nseen; i++)
		if (!strcmp(t->seen[i], url))
			return 1;
	return 0;
}

static void remember(struct tally *t, const char *url)
{
	if (t->nseen == t->capseen) {
		t->capseen = t->capseen ? 2 * t->capseen : 64;
		t->seen = realloc(t->seen, t->capseen * sizeof *t->seen);
		ck_assert_ptr_nonnull(t->seen);
	}
	t->seen[t->nseen++] = strdup(url);
}

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

#define DAEMON_MAX_ELEMENTS "67108864"

/* Under the sanitizers every CLI start costs tens of ms of shadow set-up: there the CLI gets every
 * CLI_STRIDE-th plan of a worker (the daemon still gets every one, through the same src/plan code);
 * the plain build compares them all. */
#if defined(PE_SANITIZED)
#define CLI_STRIDE 8
#else
#define CLI_STRIDE 1
#endif

/* posenc plan on body (written to file) agrees with the daemon's status and detail. */
static void check_cli(const char *file, const char *body, const char *what, long status, const char *detail,
		      struct tally *t)
{
	struct crun r;
	struct crun_opts o = {0};
	if ((t->plans - 1) % CLI_STRIDE != 0)
		return;
	FILE *f = fopen(file, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fputs(body, f) >= 0 && fclose(f) == 0, 1);
	crun(&r, &o, "plan", "--len", "8", "--max-elements", DAEMON_MAX_ELEMENTS, file, NULL);
	t->cli++;
	int want = status == 200 ? 0 : 2;
	if (r.status != want)
		report(t, "%s: the daemon answers %ld, posenc plan exits %d: %.200s", what, status, r.status, r.err ? r.err : "");
	else if (want && detail && (!r.err || !strstr(r.err, detail)))
		report(t, "%s: posenc plan's '%.200s' lacks the daemon's '%.200s'", what, r.err ? r.err : "", detail);
	crun_free(&r);
}

/* The plan of body: a 422 problem naming a key (required when must_refuse), or a 200 whose urls
 * all answer 200; posenc plan (on file) agrees. */
static void check_plan(struct pe_conn *c, const char *body, const char *what, int must_refuse, const char *file,
		       struct tally *t)
{
	struct pe_resp r;
	char why[256], ctype[128];
	t->plans++;
	pe_conn_request(c, "POST", "/v1/plan?len=8", json_ct, body, strlen(body), &r);
	if (r.status != 200) {
		json_t *p = json_loads(r.body ? r.body : "", 0, NULL);
		check_cli(file, body, what, r.status, json_string_value(json_object_get(p, "detail")), t);
		json_decref(p);
	} else {
		check_cli(file, body, what, 200, NULL, t);
	}
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
		if (seen(t, url))
			continue;
		pe_conn_request(c, "GET", url, NULL, NULL, 0, &r);
		if (r.status != 200)
			report(t, "%s: %s answers %ld %.300s", what, url, r.status, r.body);
		else
			remember(t, url);
		pe_resp_free(&r);
	}
	json_decref(plan);
}

/* One worker's share of a config's mutations: every NWORKERS-th site, on its own copy of the
 * config, its own connection to the shared daemon and its own file for posenc plan. */
struct worker {
	const struct pe_daemon *d;
	const char *name;
	json_t *root;
	size_t index, nmut;
	struct tally t;
};

static void *mutate_share(void *arg)
{
	struct worker *w = arg;
	struct site *sites = calloc(MAX_SITES, sizeof *sites);
	struct pe_conn c;
	size_t nsites = 0;
	char dir[] = "/tmp/pe-plan-mut-XXXXXX", file[64];
	ck_assert_ptr_nonnull(sites);
	find_sites(w->root, w->root, "", sites, &nsites);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(file, sizeof file, "%s/config.json", dir);
	pe_conn_open(&c, w->d);
	for (size_t s = w->index; s < nsites; s += NWORKERS) {
		json_t *orig = json_incref(json_object_get(sites[s].parent, sites[s].key));
		const char *const *muts = mutations_of(sites[s].type);
		for (int k = 0; k < NMUT && muts[k]; k++) {
			char what[512];
			json_t *v = json_loads(muts[k], JSON_DECODE_ANY, NULL);
			ck_assert_ptr_nonnull(v);
			int must_refuse = sites[s].typed && type_of(v) != sites[s].type;
			json_object_set_new(sites[s].parent, sites[s].key, v);
			char *body = json_dumps(w->root, JSON_COMPACT);
			snprintf(what, sizeof what, "%s %s = %s", w->name, sites[s].path, muts[k]);
			check_plan(&c, body, what, must_refuse, file, &w->t);
			free(body);
			w->nmut++;
		}
		json_object_set_new(sites[s].parent, sites[s].key, orig);
	}
	pe_conn_close(&c);
	unlink(file);
	rmdir(dir);
	free(sites);
	return NULL;
}

/* Add a worker's counts and first failures to t. */
static void merge(struct tally *t, struct tally *w)
{
	for (size_t i = 0; i < w->bad && i < MAX_REPORTED; i++)
		report(t, "%s", w->first[i]);
	t->bad += w->bad > MAX_REPORTED ? w->bad - MAX_REPORTED : 0;
	t->plans += w->plans;
	t->refused += w->refused;
	t->served += w->served;
	t->urls += w->urls;
	t->cli += w->cli;
	for (size_t i = 0; i < w->nseen; i++)
		free(w->seen[i]);
	free(w->seen);
}

START_TEST(every_url_of_every_mutated_plan_is_served)
{
	struct pe_daemon d;
	struct pe_conn c;
	struct tally t = {0};
	struct site *sites = calloc(MAX_SITES, sizeof *sites);
	struct worker w[NWORKERS];
	pthread_t th[NWORKERS];
	size_t nsites = 0, nmut = 0;
	char path[512], dir[] = "/tmp/pe-plan-mut-XXXXXX", file[64];
	json_error_t je;
	const char *args[] = {"--max-elements", DAEMON_MAX_ELEMENTS, NULL};
	snprintf(path, sizeof path, CONFIGS "/%s", configs[_i]);
	json_t *root = json_load_file(path, JSON_DECODE_INT_AS_REAL, &je);
	ck_assert_msg(root != NULL, "%s: %s", path, je.text);
	find_sites(root, root, "", sites, &nsites);
	ck_assert_msg(nsites > 0 && nsites < MAX_SITES, "%s: %zu members", path, nsites);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(file, sizeof file, "%s/config.json", dir);
	pe_daemon_start(&d, args);
	pe_conn_open(&c, &d);
	char *plain = json_dumps(root, JSON_COMPACT);
	check_plan(&c, plain, configs[_i], 0, file, &t); /* as published */
	free(plain);
	pe_conn_close(&c);
	unlink(file);
	rmdir(dir);
	for (size_t k = 0; k < NWORKERS; k++) {
		w[k] = (struct worker){.d = &d, .name = configs[_i], .root = json_deep_copy(root), .index = k};
		ck_assert_ptr_nonnull(w[k].root);
		ck_assert_int_eq(pthread_create(&th[k], NULL, mutate_share, &w[k]), 0);
	}
	for (size_t k = 0; k < NWORKERS; k++) {
		ck_assert_int_eq(pthread_join(th[k], NULL), 0);
		merge(&t, &w[k].t);
		nmut += w[k].nmut;
		json_decref(w[k].root);
	}
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
	ck_assert_msg(t.bad == 0, "%s: %zu of %zu plans (%zu urls) failed; first: %s | %s | %s | %s", configs[_i], t.bad,
		      t.plans, t.urls, t.first[0], t.bad > 1 ? t.first[1] : "", t.bad > 2 ? t.first[2] : "",
		      t.bad > 3 ? t.first[3] : "");
	ck_assert_uint_eq(t.plans, 1 + nmut);
	ck_assert_uint_ge(t.cli * CLI_STRIDE, t.plans); /* every plan, or every CLI_STRIDE-th of each worker */
	ck_assert_uint_ge(t.served, 1); /* the published config plans */
	for (size_t i = 0; i < t.nseen; i++)
		free(t.seen[i]);
	free(t.seen);
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

/* posenc plan --len takes what ?len= of POST /v1/plan takes: digits only, 1 to 2^30. */
START_TEST(the_cli_len_is_the_daemons)
{
	static const struct {
		const char *len, *query; /* query: the same value in a url, or NULL when it has no url form */
		int ok;
	} cases[] = {
		{"8", "8", 1},           {"1073741824", "1073741824", 1}, {"1073741825", "1073741825", 0},
		{"99999999999", "99999999999", 0}, {"0", "0", 0},       {" 8", "%208", 0},
		{"+8", "%2B8", 0},       {"-8", "-8", 0},                 {"8x", "8x", 0},
		{"", NULL, 0},
	};
	struct pe_daemon d;
	struct pe_conn c;
	struct pe_resp resp;
	char path[256], url[128];
	snprintf(path, sizeof path, CONFIGS "/llama3.2-1b.json");
	pe_daemon_start(&d, NULL);
	pe_conn_open(&c, &d);
	FILE *f = fopen(path, "rb");
	ck_assert_ptr_nonnull(f);
	char body[16384];
	size_t n = fread(body, 1, sizeof body, f);
	fclose(f);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct crun r;
		struct crun_opts o = {0};
		crun(&r, &o, "plan", "--len", cases[i].len, path, NULL);
		if (cases[i].ok)
			ck_assert_msg(r.status == 0, "--len '%s': status %d, %s", cases[i].len, r.status, r.err ? r.err : "");
		else
			ck_assert_msg(r.status == 2 && r.err && strstr(r.err, "--len") != NULL, "--len '%s': status %d, %s",
				      cases[i].len, r.status, r.err ? r.err : "");
		crun_free(&r);
		if (!cases[i].query)
			continue;
		snprintf(url, sizeof url, "/v1/plan?len=%s", cases[i].query);
		pe_conn_request(&c, "POST", url, json_ct, body, n, &resp);
		ck_assert_msg((resp.status == 200) == cases[i].ok, "%s: %ld %s", url, resp.status, resp.body);
		pe_resp_free(&resp);
	}
	pe_conn_close(&c);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
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
	while ((de = readdir(dir)) != NULL) {
		size_t n = strlen(de->d_name);
		if (n <= 5 || strcmp(de->d_name + n - 5, ".json"))
			continue;
		char **more = realloc(configs, ((size_t)nconfigs + 1) * sizeof *configs);
		if (!more)
			break;
		configs = more;
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
	tcase_add_test(tc, the_cli_len_is_the_daemons);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
