/* libFuzzer target: model plans (src/plan/: the config reader of cfg.c, plan.c, out.c).
 *
 * Input: one byte choosing ?len= (0: the config's own, 1, 4096, 2^40) and max_elements (2^26 or
 * none), then a config.json body.
 *
 * Checks: the config reader (plan_parse: a pre-scan, then jansson) and jansson agree on what is JSON (strict:
 * duplicate keys refused, integers as reals so a 20-digit integer is not its "too big"), except
 * where the reader is narrower by design: past its depth or node bounds (PE_ETOOBIG), or where
 * jansson is wrong (a raw NUL byte it skips). A refusal
 * is PE_EBODY or PE_ETOOBIG naming "body" with a detail. pe_plan_build fails only with a known
 * code and a detail; when it succeeds, every encoding with a table has a url whose query the
 * table's own pe_params_set / pe_params_finish take (what the server runs on a GET of it), whose
 * table has at most max_elements elements and whose length is at most PE_PLAN_MAX_URL (what the
 * server answers 413 or 414 otherwise), and pe_plan_json is JSON that jansson reads back (strings well-formed UTF-8) with the same number
 * of encodings. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/cfg.h"
#include "posenc/core.h"
#include "posenc/plan.h"

#define FAIL(...)                                             \
	do {                                                  \
		fprintf(stderr, "fuzz_plan: " __VA_ARGS__);   \
		fputc('\n', stderr);                          \
		abort();                                      \
	} while (0)

static void check_reader(const char *text, size_t n)
{
	struct pe_err err = {0};
	json_t *v = plan_parse(text, n, &err);
	json_error_t je;
	json_t *j = json_loadb(text, n, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL, &je);
	if (v && !j)
		FAIL("the reader accepts what jansson refuses (%s)", je.text);
	if (!v) {
		if (err.code != PE_EBODY && err.code != PE_ETOOBIG && err.code != PE_ENOMEM)
			FAIL("refused with code %d", err.code);
		if (strcmp(err.param, "body") || !err.detail[0])
			FAIL("refusal names '%s' (%s)", err.param, err.detail);
		/* jansson's stream drops a NUL byte read again after an unget ("16\0," reads as 16): a
		 * NUL is never JSON (RFC 8259, Python's json), so there the reader is right; and a
		 * config is an object, so a bare string or number at the top is refused by design */
		if (j && err.code == PE_EBODY && !memchr(text, 0, n) && (json_is_object(j) || json_is_array(j)))
			FAIL("the reader refuses what jansson reads: %s", err.detail);
	}
	json_decref(j);
	json_decref(v);
}

/* The url "/v1/<table>?k=v&..." through its table's parameter code, as a GET of it would be
 * ("%2B" is '+'; format is the output's, not the table's). A table posenc lacks is not checked. */
static void check_url(const char *url, uint64_t max_elements)
{
	const char *q = strchr(url, '?');
	char table[64], *query, *save = NULL;
	if (strlen(url) > PE_PLAN_MAX_URL)
		FAIL("the plan's url is %zu bytes, past PE_PLAN_MAX_URL", strlen(url));
	struct pe_params p;
	struct pe_err err = {0};
	if (!q || strncmp(url, "/v1/", 4) || (size_t)(q - url - 4) >= sizeof table)
		return;
	snprintf(table, sizeof table, "%.*s", (int)(q - url - 4), url + 4);
	const struct pe_table_def *def = pe_table_find(table);
	if (!def || !(query = strdup(q + 1)))
		return;
	pe_params_init(&p, def);
	int rc = 0;
	for (char *kv = strtok_r(query, "&", &save); kv && rc == 0; kv = strtok_r(NULL, "&", &save)) {
		char *v = strchr(kv, '='), *w;
		if (!v)
			FAIL("url %.200s: '%s' has no value", url, kv);
		*v++ = 0;
		for (char *r = w = v; *r; r++)
			*w++ = !strncmp(r, "%2B", 3) ? (r += 2, '+') : *r;
		*w = 0;
		if (strcmp(kv, "format"))
			rc = pe_params_set(&p, kv, v, &err);
	}
	if (rc == 0)
		rc = pe_params_finish(&p, &err);
	if (rc != 0)
		FAIL("the plan's url %.300s is refused: %s: %s", url, err.param, err.detail);
	struct pe_shape shape;
	int overflow = 0;
	size_t n = pe_table_shape(&p, &shape) == 0 ? pe_shape_count(&shape, &overflow) : 0;
	if (max_elements && (overflow || n > max_elements))
		FAIL("the plan's url %.300s names a table of %zu elements, past max_elements", url, n);
	pe_params_destroy(&p);
	free(query);
}

static void check_plan(const char *text, size_t n, uint8_t sel)
{
	static const int64_t lens[] = {0, 1, 4096, (int64_t)1 << 40};
	struct pe_plan_opts o = {.len = lens[sel & 3], .max_elements = sel & 4 ? 0 : (uint64_t)1 << 26};
	struct pe_plan plan;
	struct pe_err err = {0};
	int rc = pe_plan_build(text, n, &o, &plan, &err);
	if (rc != 0) {
		if (rc != err.code || rc <= PE_ERR_FIRST_ || rc >= PE_ERR_LAST_ || !err.detail[0])
			FAIL("pe_plan_build: %d, err %d '%s'", rc, err.code, err.detail);
		return;
	}
	for (size_t i = 0; i < plan.nenc; i++) {
		if (plan.enc[i].table && !plan.enc[i].url)
			FAIL("encoding %zu has a table and no url", i);
		if (plan.enc[i].table)
			check_url(plan.enc[i].url, o.max_elements);
	}
	size_t len = 0;
	char *out = pe_plan_json(&plan, &len);
	if (out) {
		json_error_t je;
		json_t *j = json_loadb(out, len, 0, &je);
		if (!j)
			FAIL("the answer is not JSON: %s (%.200s)", je.text, out);
		json_t *enc = json_object_get(j, "encodings");
		if (!json_is_array(enc) || json_array_size(enc) != plan.nenc)
			FAIL("the answer's encodings are not the plan's %zu", plan.nenc);
		json_decref(j);
		free(out);
	}
	pe_plan_destroy(&plan);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const char *text = (const char *)data + 1;
	check_reader(text, size - 1);
	check_plan(text, size - 1, data[0]);
	return 0;
}
