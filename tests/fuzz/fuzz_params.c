/* libFuzzer target: query parameters (src/core/params.c and every table's check/shape/compute).
 *
 * Input: "<path>?<query>", path a table or transform of the registry without "/v1/"
 * ("sinusoidal?len=4&dim=8", "alibi/apply?mode=causal"). The query is split and decoded as
 * libmicrohttpd does before the HTTP layer sees it ('&' then the first '=', '+' to space, %XX);
 * keys or values holding a NUL after decoding are skipped (the HTTP layer answers those 400
 * itself), as are the keys the HTTP layer owns (format, dtype; shape for transforms). Every pair
 * goes to pe_params_set until one fails, as the server does, then pe_params_finish.
 *
 * Checks: every failure is a known PE_E* code with a detail, and a 400 names its parameter (the
 * key itself when pe_params_set refused it). After success: the canonical form fits the cache
 * key buffer the server uses; pe_params_canonical never writes past a too-small buffer; for
 * tables, the canonical form is a fixpoint (parsed back, it gives the same parameters and the
 * same canonical text: the key and the "params" a JSON response shows are a valid request for
 * the same table); small tables (in output, and in pe_table_cost's work and intermediate table)
 * are computed into exactly-sized buffers and f32/f64 tables and
 * RoPE's attention_scaling must be finite; small transforms are applied to a few input shapes,
 * in place and out of place, which must agree bit for bit.
 *
 * With PE_FUZZ_WRITE_SEEDS=<dir> set, the target writes <dir>/seeds/gen-<table>, a seed per table
 * and transform (every parameter at its default or a small value), and <dir>/params.dict (every
 * path, parameter name and enum choice), then exits: tests/tools/fuzz.sh uses them, so tables
 * added to the registry later are fuzzed without new seeds. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc/posenc.h"

#define KEY_CAP (PE_MAX_LIST * 26 + 4096) /* the cache key buffer of src/http/table.c */
#define MAX_COMPUTE 16384                 /* elements computed per input */
#define MAX_WORK ((uint64_t)1 << 22)      /* pe_table_cost's work and intermediate elements per input */

#define FAIL(...)                                               \
	do {                                                    \
		fprintf(stderr, "fuzz_params: " __VA_ARGS__);   \
		fputc('\n', stderr);                            \
		abort();                                        \
	} while (0)

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* In place: '+' to ' ', then %XX to the byte; a bad %-sequence stays as it is. Returns length. */
static size_t decode(char *s)
{
	size_t r = 0, w = 0;
	for (; s[r]; r++)
		if (s[r] == '+')
			s[r] = ' ';
	for (r = 0; s[r]; w++) {
		int h, l;
		if (s[r] == '%' && (h = hexval((unsigned char)s[r + 1])) >= 0 && (l = hexval((unsigned char)s[r + 2])) >= 0) {
			s[w] = (char)(h * 16 + l);
			r += 3;
		} else
			s[w] = s[r++];
	}
	s[w] = 0;
	return w;
}

static int known_code(int code) { return code < 0 && code > PE_ERR_FIRST_ && code < PE_ERR_LAST_; }

static void check_err(const struct pe_err *err, int rc, const char *path, const char *key)
{
	if (!known_code(rc) || err->code != rc)
		FAIL("%s: return code %d, err.code %d", path, rc, err->code);
	if (!err->detail[0])
		FAIL("%s: error %d without a detail", path, rc);
	if (pe_err_status(rc) == 400 && !err->param[0])
		FAIL("%s: 400 '%s' names no parameter", path, err->detail);
	if (key && strncmp(err->param, key, PE_ERR_PARAM_MAX - 1) != 0)
		FAIL("%s: pe_params_set('%s') failed naming '%s' ('%s')", path, key, err->param, err->detail);
}

/* Canonical text into a fresh heap buffer (caller frees); also probes tight buffers. */
static char *canonical(const struct pe_params *p, const char *path)
{
	char *buf = malloc(KEY_CAP);
	if (!buf)
		abort();
	int n = pe_params_canonical(p, buf, KEY_CAP);
	if (n < 0)
		FAIL("%s: canonical form does not fit %d bytes", path, KEY_CAP);
	if ((size_t)n != strlen(buf))
		FAIL("%s: canonical length %d but strlen %zu", path, n, strlen(buf));
	/* Too small by one (no room for the NUL), and much too small: -1, never a write past cap. */
	for (size_t cap = (size_t)n; cap > 0; cap = cap > 7 ? cap / 7 : 0) {
		char *t = malloc(cap);
		if (!t)
			abort();
		if (pe_params_canonical(p, t, cap) >= 0)
			FAIL("%s: canonical form of %d bytes reported fitting %zu", path, n, cap);
		free(t);
	}
	return buf;
}

/* Set every "k=v" of a canonical text (no decoding: canonical values are plain). */
static int set_all(struct pe_params *p, const char *text, struct pe_err *err)
{
	char *s = strdup(text), *save = NULL;
	int rc = 0;
	if (!s)
		abort();
	for (char *kv = strtok_r(s, "&", &save); kv && rc == 0; kv = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(kv, '=');
		if (!eq)
			FAIL("canonical pair '%s' has no '='", kv);
		*eq = 0;
		rc = pe_params_set(p, kv, eq + 1, err);
	}
	free(s);
	return rc;
}

static void fixpoint(const struct pe_params *p, const char *path, const char *canon)
{
	struct pe_params q;
	struct pe_err err = {0};
	pe_params_init(&q, p->def);
	int rc = set_all(&q, canon, &err);
	if (rc == 0)
		rc = pe_params_finish(&q, &err);
	if (rc != 0)
		FAIL("%s: its canonical form '%.300s' is refused: %s (param %s)", path, canon, err.detail, err.param);
	char *again = canonical(&q, path);
	if (strcmp(again, canon) != 0)
		FAIL("%s: canonical '%.300s' reads back as '%.300s'", path, canon, again);
	free(again);
	pe_params_destroy(&q);
}

static uint32_t hash(const uint8_t *d, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ d[i]) * 16777619u;
	return h;
}

static int all_finite(enum pe_dtype dt, const void *data, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		double v = dt == PE_F64 ? ((const double *)data)[i] : ((const float *)data)[i];
		if (!isfinite(v))
			return 0;
	}
	return 1;
}

static void compute_table(const struct pe_params *p, const char *path, uint32_t h)
{
	struct pe_shape s;
	int overflow;
	if (pe_table_shape(p, &s) != 0)
		FAIL("%s: pe_table_shape failed after pe_params_finish accepted", path);
	if (s.rank < 0 || s.rank > PE_MAX_RANK)
		FAIL("%s: rank %d", path, s.rank);
	size_t n = pe_shape_count(&s, &overflow);
	if (overflow || n > MAX_COMPUTE)
		return;
	/* A small output can still be much work (rope-decay at dim 65536: seconds per input) */
	struct pe_cost c;
	if (pe_table_cost(p, &c) != 0)
		FAIL("%s: pe_table_cost failed after pe_params_finish accepted", path);
	if (c.work > MAX_WORK || c.intermediate > MAX_WORK)
		return;
	static const enum pe_dtype dts[] = {PE_F32, PE_F64, PE_F16, PE_BF16};
	enum pe_dtype dt = p->def->fixed_dtype != PE_DTYPE_COUNT_ ? p->def->fixed_dtype : dts[h % 4];
	void *out = malloc(n ? n * pe_dtype_size(dt) : 1);
	struct pe_err err = {0};
	if (!out)
		abort();
	int rc = pe_table_compute(p, dt, out, &err);
	if (rc != 0)
		check_err(&err, rc, path, NULL);
	else if ((dt == PE_F32 || dt == PE_F64) && !all_finite(dt, out, n))
		FAIL("%s: a %s table of valid parameters holds NaN or infinity", path, pe_dtype_name(dt));
	if (p->def->extra && !isfinite(p->def->extra(p)))
		FAIL("%s: %s is not finite", path, p->def->extra_name);
	free(out);
}

static void apply_once(const struct pe_params *p, const char *path, const struct pe_shape *in, enum pe_dtype wd)
{
	struct pe_shape os;
	struct pe_err err = {0};
	int overflow;
	int rc = pe_transform_shape(p, in, &os, &err);
	if (rc != 0) {
		check_err(&err, rc, path, NULL);
		return;
	}
	size_t n_in = pe_shape_count(in, &overflow), n_out = pe_shape_count(&os, &overflow);
	if (overflow || n_out > MAX_COMPUTE)
		return;
	size_t sz = pe_dtype_size(wd);
	void *x = malloc(n_in * sz + 1), *y = malloc(n_out * sz + 1);
	if (!x || !y)
		abort();
	for (size_t i = 0; i < n_in; i++) {
		double v = (double)((i * 2654435761u) % 2001) / 1000.0 - 1.0;
		if (wd == PE_F64)
			((double *)x)[i] = v;
		else
			((float *)x)[i] = (float)v;
	}
	struct pe_tensor_mut xt = {.shape = *in, .dtype = wd, .data = x}, yt = {.shape = os, .dtype = wd, .data = y};
	rc = pe_transform_apply(p, &xt, &yt, wd, &err);
	if (rc != 0) {
		check_err(&err, rc, path, NULL);
	} else {
		if (!all_finite(wd, y, n_out))
			FAIL("%s: result holds NaN or infinity", path);
		if (memcmp(&os, in, sizeof os) == 0) { /* the server transforms in place when it can */
			struct pe_tensor_mut it = xt;
			it.data = malloc(n_in * sz + 1);
			if (!it.data)
				abort();
			for (size_t i = 0; i < n_in; i++) /* x again: apply may not modify x, but be sure */
				if (wd == PE_F64)
					((double *)it.data)[i] = (double)((i * 2654435761u) % 2001) / 1000.0 - 1.0;
				else
					((float *)it.data)[i] = (float)((double)((i * 2654435761u) % 2001) / 1000.0 - 1.0);
			struct pe_tensor_mut ot = it;
			rc = pe_transform_apply(p, &it, &ot, wd, &err);
			if (rc != 0 || memcmp(ot.data, y, n_out * sz) != 0)
				FAIL("%s: in-place result differs from out-of-place (rc %d)", path, rc);
			free(it.data);
		}
	}
	free(x);
	free(y);
}

static void apply_transform(const struct pe_params *p, const char *path, uint32_t h)
{
	/* [heads, q, k]-like and [batch, seq, dim]-like shapes; sizes from the input's hash. */
	size_t a = 1 + h % 4, b = 1 + (h >> 2) % 9, c = 1 + (h >> 6) % 17;
	struct pe_shape shapes[] = {
		{.rank = 3, .dim = {a, b, c}},
		{.rank = 2, .dim = {b, c}},
		{.rank = 4, .dim = {1, a, b, b}},
		{.rank = 4, .dim = {2, b, a, 2 * c}},
		{.rank = 1, .dim = {c}},
	};
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
		apply_once(p, path, &shapes[i], (h >> (11 + i)) & 1 ? PE_F64 : PE_F32);
}

static void run(const struct pe_table_def *def, int transform, const char *path, char *query, uint32_t h)
{
	struct pe_params p;
	struct pe_err err = {0};
	int rc = 0;
	pe_params_init(&p, def);
	char *save = NULL;
	for (char *kv = strtok_r(query, "&", &save); kv && rc == 0; kv = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(kv, '='), *key = kv, *value = NULL;
		if (eq) {
			*eq = 0;
			value = eq + 1;
		}
		size_t klen = strlen(key), kdec = decode(key);
		(void)klen;
		if (strlen(key) != kdec)
			continue; /* a decoded NUL in the key: 400 in the HTTP layer */
		if (value) {
			size_t vdec = decode(value);
			if (strlen(value) != vdec)
				continue;
		}
		if (!*key || !strcmp(key, "format") || !strcmp(key, "dtype") || (transform && !strcmp(key, "shape")))
			continue; /* the HTTP layer's own */
		memset(&err, 0, sizeof err);
		rc = pe_params_set(&p, key, value ? value : "", &err);
		if (rc != 0)
			check_err(&err, rc, path, key);
	}
	if (rc == 0) {
		memset(&err, 0, sizeof err);
		rc = pe_params_finish(&p, &err);
		if (rc != 0)
			check_err(&err, rc, path, NULL);
	}
	if (rc == 0) {
		char *canon = canonical(&p, path);
		if (!transform) {
			fixpoint(&p, path, canon);
			compute_table(&p, path, h);
		} else {
			apply_transform(&p, path, h);
		}
		free(canon);
	}
	pe_params_destroy(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (!s)
		abort();
	memcpy(s, data, size);
	s[size] = 0;
	if (strlen(s) == size) { /* the path and query of a request line hold no NUL */
		char *q = strchr(s, '?');
		if (q)
			*q++ = 0;
		const struct pe_table_def *def = pe_table_find(s);
		int transform = 0;
		if (!def && (def = pe_transform_find(s)) != NULL)
			transform = 1;
		if (def)
			run(def, transform, s, q ? q : (char *)"", hash(data, size));
	}
	free(s);
	return 0;
}

/* ---- seeds and dictionary for tests/tools/fuzz.sh ---- */

static void dict_word(FILE *f, const char *w)
{
	fputc('"', f);
	for (; *w; w++)
		if (*w == '"' || *w == '\\')
			fprintf(f, "\\%c", *w);
		else
			fputc(*w, f);
	fputs("\"\n", f);
}

static void write_seeds(const char *dir)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/params.dict", dir);
	FILE *dict = fopen(path, "w");
	if (!dict) {
		perror(path);
		exit(1);
	}
	static const char *const extra[] = {"&", "=", "%00", "%2", "%41", "+", "-", "e", "E", "1e308", "nan", "inf",
					    "0x1p3", "9223372036854775808", "-9223372036854775809", ",", "format",
					    "dtype", "shape", NULL};
	for (int i = 0; extra[i]; i++)
		dict_word(dict, extra[i]);
	for (int kind = 0; kind < 2; kind++) {
		size_t n;
		const struct pe_table_def *const *defs = kind ? pe_transform_all(&n) : pe_table_all(&n);
		for (size_t t = 0; t < n; t++) {
			const struct pe_table_def *d = defs[t];
			dict_word(dict, d->name);
			char name[128];
			snprintf(name, sizeof name, "%s", d->name);
			for (char *c = name; *c; c++)
				if (*c == '/')
					*c = '_';
			snprintf(path, sizeof path, "%s/seeds/gen-%s%s", dir, kind ? "x-" : "", name);
			FILE *f = fopen(path, "w");
			if (!f) {
				perror(path);
				exit(1);
			}
			fprintf(f, "%s?", d->name);
			for (int i = 0; i < d->nparams; i++) {
				const struct pe_param_spec *sp = &d->params[i];
				dict_word(dict, sp->name);
				for (int c = 0; sp->choices && sp->choices[c]; c++)
					dict_word(dict, sp->choices[c]);
				if (sp->def && !*sp->def)
					continue;
				const char *v = sp->def ? sp->def : sp->type == PE_PT_LIST ? "1,1" : sp->min >= 4 ? "8" : "4";
				fprintf(f, "%s%s=%s", i ? "&" : "", sp->name, v);
			}
			fclose(f);
		}
	}
	fclose(dict);
	exit(0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *dir = getenv("PE_FUZZ_WRITE_SEEDS");
	if (dir && *dir)
		write_seeds(dir);
	return 0;
}
