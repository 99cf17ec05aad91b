/* The offline CLI (src/cli) as a user runs it: the real binary, build/posenc or $POSENC_CLI (the
 * ASan build sets it), started with fork/exec from the repository root, stdout and stderr
 * captured. Its output is compared with what the core computes in this process for the same
 * parameters: bytes for bin, pe_npy_parse for npy, every number read back with strtof/strtod for
 * JSON and CSV. Tables are taken from the registry, so each newly registered table is covered
 * (given small values for its required parameters); the sinusoidal table stands in where a test
 * needs particular parameters. Errors must be one stderr line naming the parameter, status 2
 * for usage and parameters, 1 for I/O; -o must be all or nothing. */
#include "posenc/posenc.h"
#include "cli/run.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- running the binary (cli/run.h, with stdout and stderr captured) ---- */

static const struct crun_opts plain = {0};

/* One line "posenc: --param: ..." on stderr (param "" = any), nothing on stdout, the status. */
static void expect_error(const struct crun *r, int status, const char *param)
{
	ck_assert_msg(r->status == status, "status %d, expected %d; stderr: %s", r->status, status,
		      r->err ? r->err : "");
	ck_assert_uint_eq(r->nout, 0);
	ck_assert_msg(r->nerr > 9 && !strncmp(r->err, "posenc: ", 8), "stderr: %s", r->err ? r->err : "");
	ck_assert_msg(strchr(r->err, '\n') == r->err + r->nerr - 1, "not one line: %s", r->err);
	if (param && *param) {
		char want[96];
		snprintf(want, sizeof want, "posenc: %s%s: ", param[1] ? "--" : "-", param);
		ck_assert_msg(!strncmp(r->err, want, strlen(want)), "stderr '%s' does not start with '%s'", r->err,
			      want);
	}
}

/* ---- the same table, from the core ---- */

#define MAX_KV 16

struct kvlist {
	int n;
	char key[MAX_KV][64], val[MAX_KV][64];
};

static void kv_add(struct kvlist *kv, const char *k, const char *v)
{
	ck_assert_int_lt(kv->n, MAX_KV);
	snprintf(kv->key[kv->n], 64, "%s", k);
	snprintf(kv->val[kv->n], 64, "%s", v);
	kv->n++;
}

struct table {
	struct pe_params p;
	struct pe_shape s;
	enum pe_dtype dt;
	size_t count, bytes;
	void *data;
};

static int core_table(const struct pe_table_def *def, const struct kvlist *kv, enum pe_dtype dt, struct table *t)
{
	struct pe_err err = {0};
	memset(t, 0, sizeof *t);
	pe_params_init(&t->p, def);
	t->dt = dt;
	int rc = 0, overflow;
	for (int i = 0; i < kv->n && rc == 0; i++)
		rc = pe_params_set(&t->p, kv->key[i], kv->val[i], &err);
	if (rc == 0)
		rc = pe_params_finish(&t->p, &err);
	if (rc == 0)
		rc = pe_table_shape(&t->p, &t->s);
	if (rc == 0) {
		t->count = pe_shape_count(&t->s, &overflow);
		t->bytes = t->count * pe_dtype_size(dt);
		t->data = malloc(t->bytes + 1);
		ck_assert_ptr_nonnull(t->data);
		rc = pe_table_compute(&t->p, dt, t->data, &err);
	}
	return rc;
}

static void table_free(struct table *t)
{
	pe_params_destroy(&t->p);
	free(t->data);
	t->data = NULL;
}

/* Small values for a table's required parameters that its checks accept (ints and reals from a
 * few candidates, enums their first choice). 0 if found. */
static int pick_args(const struct pe_table_def *def, struct kvlist *kv)
{
	static const int cand[] = {8, 4, 12, 2, 16, 6, 1, 3};
	for (size_t c = 0; c < sizeof cand / sizeof cand[0]; c++) {
		memset(kv, 0, sizeof *kv);
		for (int i = 0; i < def->nparams; i++) {
			const struct pe_param_spec *sp = &def->params[i];
			if (sp->def)
				continue;
			char v[64];
			double x = cand[c] < sp->min ? sp->min : cand[c] > sp->max ? sp->max : cand[c];
			if (sp->type == PE_PT_ENUM)
				snprintf(v, sizeof v, "%s", sp->choices[0]);
			else if (sp->type == PE_PT_BOOL)
				snprintf(v, sizeof v, "0");
			else if (sp->type == PE_PT_INT)
				snprintf(v, sizeof v, "%lld", (long long)x);
			else
				snprintf(v, sizeof v, "%.17g", x);
			kv_add(kv, sp->name, v);
		}
		struct table t;
		enum pe_dtype dt = def->fixed_dtype != PE_DTYPE_COUNT_ ? def->fixed_dtype : PE_F32;
		int rc = core_table(def, kv, dt, &t);
		table_free(&t);
		if (rc == 0)
			return 0;
	}
	return -1;
}

/* Run the CLI on def with kv plus extra (NULL-terminated) arguments. */
static void run_table(struct crun *r, const struct pe_table_def *def, const struct kvlist *kv, ...)
{
	const char *args[128];
	char keys[MAX_KV][70];
	int n = 0;
	args[n++] = def->name;
	for (int i = 0; i < kv->n; i++) {
		snprintf(keys[i], sizeof keys[i], "--%s", kv->key[i]);
		args[n++] = keys[i];
		args[n++] = kv->val[i];
	}
	va_list ap;
	va_start(ap, kv);
	for (const char *a; (a = va_arg(ap, const char *));)
		args[n++] = a;
	va_end(ap);
	args[n] = NULL;
	crun_argv(r, &plain, args);
}

/* The dtypes a table can be asked for. */
static int dtypes_of(const struct pe_table_def *def, enum pe_dtype *out)
{
	if (def->fixed_dtype != PE_DTYPE_COUNT_) {
		out[0] = def->fixed_dtype;
		return 1;
	}
	out[0] = PE_F32, out[1] = PE_F64, out[2] = PE_F16, out[3] = PE_BF16;
	return 4;
}

/* Does the decimal at s read back to element i of t? *end is set past the number. */
static int number_matches(const struct table *t, size_t i, const char *s, char **end)
{
	const unsigned char *d = t->data;
	switch (t->dt) {
	case PE_F32: {
		float v = strtof(s, end), w;
		memcpy(&w, d + 4 * i, 4);
		return !memcmp(&v, &w, 4);
	}
	case PE_F64: {
		double v = strtod(s, end), w;
		memcpy(&w, d + 8 * i, 8);
		return !memcmp(&v, &w, 8);
	}
	case PE_F16:
	case PE_BF16: {
		double v = strtod(s, end);
		uint16_t h = t->dt == PE_F16 ? pe_f64_to_f16(v) : pe_f64_to_bf16(v), w;
		memcpy(&w, d + 2 * i, 2);
		return h == w;
	}
	case PE_I32: {
		long v = strtol(s, end, 10);
		int32_t w;
		memcpy(&w, d + 4 * i, 4);
		return v == w;
	}
	default:
		return 0;
	}
}

/* Every number in s[0..len) in order must be the table's elements, all of them. */
static void expect_numbers(const struct table *t, const char *s, const char *what)
{
	size_t i = 0;
	while (*s) {
		if (*s == '#') { /* CSV comment line */
			s = strchr(s, '\n');
			ck_assert_ptr_nonnull(s);
			continue;
		}
		if (!strchr("-0123456789", *s)) {
			ck_assert_msg(strchr("[],\n", *s) != NULL, "%s: unexpected '%c'", what, *s);
			s++;
			continue;
		}
		char *end;
		ck_assert_msg(i < t->count, "%s: more than %zu numbers", what, t->count);
		ck_assert_msg(number_matches(t, i, s, &end), "%s: element %zu is '%.30s'", what, i, s);
		ck_assert_ptr_ne(end, s);
		s = end;
		i++;
	}
	ck_assert_msg(i == t->count, "%s: %zu numbers, expected %zu", what, i, t->count);
}

static void dtype_arg(enum pe_dtype dt, char *buf)
{
	snprintf(buf, 8, "%s", pe_dtype_name(dt));
}

/* ---- every table, every format ---- */

/* What the CLI wrote (r) for a table against the core's (t), dtype spelled dt. */
typedef void (*output_check_fn)(const struct pe_table_def *def, const struct table *t, const struct crun *r,
				const char *dt);

/* For every registered table with small arguments (others are noted and skipped) and every dtype it
 * takes (bf16 only if with_bf16): run the CLI with `format` (NULL: the default, json) and check
 * its output against the core's table. Returns the number of tables run. */
static size_t every_table(const char *format, int with_bf16, output_check_fn check)
{
	size_t n, tested = 0;
	const struct pe_table_def *const *all = pe_table_all(&n);
	for (size_t k = 0; k < n; k++) {
		struct kvlist kv;
		if (pick_args(all[k], &kv) != 0) {
			fprintf(stderr, "note: no small arguments found for %s; not run\n", all[k]->name);
			continue;
		}
		enum pe_dtype dts[4];
		for (int d = 0, nd = dtypes_of(all[k], dts); d < nd; d++) {
			if (dts[d] == PE_BF16 && !with_bf16)
				continue;
			struct table t;
			struct crun r;
			char dt[8];
			dtype_arg(dts[d], dt);
			ck_assert_int_eq(core_table(all[k], &kv, dts[d], &t), 0);
			if (format)
				run_table(&r, all[k], &kv, "--dtype", dt, "--format", format, NULL);
			else
				run_table(&r, all[k], &kv, "--dtype", dt, NULL); /* json: the default into a pipe */
			crun_expect_ok(&r);
			check(all[k], &t, &r, dt);
			crun_free(&r);
			table_free(&t);
		}
		tested++;
	}
	return tested;
}

static void check_bin(const struct pe_table_def *def, const struct table *t, const struct crun *r, const char *dt)
{
	ck_assert_msg(r->nout == t->bytes && !memcmp(r->out, t->data, t->bytes), "%s %s: %zu bytes, core %zu", def->name,
		      dt, r->nout, t->bytes);
}

START_TEST(bin_equals_core_for_every_table)
{
	ck_assert_uint_ge(every_table("bin", 1, check_bin), 1);
}
END_TEST

static void check_npy(const struct pe_table_def *def, const struct table *t, const struct crun *r, const char *dt)
{
	struct pe_tensor_view v;
	struct pe_err err = {0};
	ck_assert_msg(pe_npy_parse(r->out, r->nout, 1u << 30, &v, &err) == 0, "%s: %s", def->name, err.detail);
	ck_assert_int_eq(v.dtype, t->dt);
	ck_assert_int_eq(v.shape.rank, t->s.rank);
	for (int a = 0; a < t->s.rank; a++)
		ck_assert_uint_eq(v.shape.dim[a], t->s.dim[a]);
	ck_assert(!memcmp(v.data, t->data, t->bytes));
}

START_TEST(npy_equals_core_for_every_table)
{
	every_table("npy", 0, check_npy);
}
END_TEST

/* The JSON document: structure through jansson, every number through strtof/strtod. */
static void check_json(const struct pe_table_def *def, const struct table *t, const struct crun *r, const char *dt)
{
	json_error_t jerr;
	ck_assert_msg(r->nout > 0 && r->out[r->nout - 1] == '\n', "JSON output ends in a newline");
	json_t *doc = json_loadb(r->out, r->nout, 0, &jerr);
	ck_assert_msg(doc != NULL, "%s: %s", def->name, jerr.text);
	ck_assert_str_eq(json_string_value(json_object_get(doc, "encoding")), def->name);
	ck_assert_str_eq(json_string_value(json_object_get(doc, "dtype")), pe_dtype_name(t->dt));
	json_t *shape = json_object_get(doc, "shape");
	ck_assert_uint_eq(json_array_size(shape), (size_t)t->s.rank);
	for (int a = 0; a < t->s.rank; a++)
		ck_assert_int_eq(json_integer_value(json_array_get(shape, (size_t)a)), (json_int_t)t->s.dim[a]);
	json_t *params = json_object_get(doc, "params");
	for (int i = 0; i < def->nparams; i++)
		ck_assert_msg((json_object_get(params, def->params[i].name) != NULL) == (t->p.v[i].set != 0),
			      "%s: params.%s present iff set", def->name, def->params[i].name);
	json_t *data = json_object_get(doc, "data");
	for (int a = 0; a < t->s.rank; a++) { /* nesting follows the shape */
		ck_assert_uint_eq(json_array_size(data), t->s.dim[a]);
		data = json_array_get(data, 0);
	}
	if (def->extra_name) {
		json_t *x = json_object_get(doc, def->extra_name);
		ck_assert_msg(json_is_number(x), "%s: no \"%s\"", def->name, def->extra_name);
		ck_assert(json_number_value(x) == def->extra(&t->p));
	}
	json_decref(doc);
	const char *d = strstr(r->out, "\"data\":");
	ck_assert_ptr_nonnull(d);
	char *tail = strndup(d + 7, r->nout - (size_t)(d + 7 - r->out));
	ck_assert_ptr_nonnull(tail);
	char *close = strrchr(tail, '}');
	ck_assert_ptr_nonnull(close);
	*close = 0;
	expect_numbers(t, tail, def->name);
	free(tail);
}

/* CSV: one line per row of the last axis (a rank-1 table: one per value; '#' comment lines not
 * counted), every number read back. */
static void check_csv(const struct pe_table_def *def, const struct table *t, const struct crun *r, const char *dt)
{
	size_t lines = 0, rows = 1;
	for (size_t i = 0; i < r->nout; i++)
		lines += r->out[i] == '\n' && !(i + 1 < r->nout && r->out[i + 1] == '#');
	for (int a = 0; a + 1 < t->s.rank; a++)
		rows *= t->s.dim[a];
	if (t->s.rank < 2)
		rows = t->count;
	ck_assert_uint_eq(lines - (r->out[0] == '#'), rows);
	expect_numbers(t, r->out, "csv");
}

START_TEST(json_and_csv_values_for_every_table)
{
	every_table(NULL, 1, check_json);
	every_table("csv", 1, check_csv);
}
END_TEST

/* Known values, not just agreement: row 1 of a 4-wide Vaswani table is sin 1, cos 1, sin 0.01,
 * cos 0.01 (w_1 = 10000^(-1/2)). */
START_TEST(sinusoidal_known_values)
{
	struct crun r;
	crun(&r, &plain, "sinusoidal", "--len", "2", "--dim", "4", "--format", "csv", "--dtype", "f64", NULL);
	crun_expect_ok(&r);
	char *line2 = strchr(r.out, '\n') + 1;
	ck_assert_str_eq(r.out, "0,1,0,1\n0.8414709848078965,0.5403023058681398,0.009999833334166664,0.9999500004166653\n");
	ck_assert_double_eq(strtod(line2, NULL), sin(1.0));
	crun_free(&r);
}
END_TEST

START_TEST(parameter_spellings)
{
	/* dashes for underscores, --k=v, a leading /v1/, options before PATH: all the same table */
	struct kvlist kv = {0};
	struct table t;
	kv_add(&kv, "len", "5");
	kv_add(&kv, "dim", "7");
	kv_add(&kv, "variant", "t2t");
	kv_add(&kv, "min_timescale", "2");
	kv_add(&kv, "max_timescale", "500");
	kv_add(&kv, "offset", "1000");
	ck_assert_int_eq(core_table(pe_table_find("sinusoidal"), &kv, PE_F32, &t), 0);
	struct crun r;
	crun(&r, &plain, "--format", "bin", "/v1/sinusoidal", "--len=5", "--dim", "7", "--variant=t2t", "--min-timescale",
		"2", "--max-timescale=500", "--offset", "1000", NULL);
	crun_expect_ok(&r);
	ck_assert_uint_eq(r.nout, t.bytes);
	ck_assert(!memcmp(r.out, t.data, t.bytes));
	crun_free(&r);
	/* and it is not the default t2t table: the options really applied */
	crun(&r, &plain, "sinusoidal", "--len=5", "--dim", "7", "--variant=t2t", "--offset", "1000", "--format", "bin", NULL);
	crun_expect_ok(&r);
	ck_assert_uint_eq(r.nout, t.bytes);
	ck_assert(memcmp(r.out, t.data, t.bytes) != 0);
	crun_free(&r);
	table_free(&t);
}
END_TEST

/* ---- errors ---- */

struct bad {
	const char *args[16];
	const char *param;
	int status;
};

static const struct bad bad_cases[] = {
	{{"sinusoidal", "--len", "4", "--dim", "8", "--bogus", "1"}, "bogus", 2},
	{{"sinusoidal", "--len", "4", "--len", "5", "--dim", "8"}, "len", 2},
	{{"sinusoidal", "--len", "4", "--dim", "8", "--variant", "t2t", "--min-timescale", "2", "--min_timescale", "3"},
	 "min-timescale", 2},
	{{"sinusoidal", "--len", "four", "--dim", "8"}, "len", 2},
	{{"sinusoidal", "--len", "4", "--dim", "8", "--base", "1e999"}, "base", 2},
	{{"sinusoidal", "--len", "4", "--dim", "8", "--offset", "-1"}, "offset", 2},
	{{"sinusoidal", "--len", "4", "--dim", "8", "--variant", "nope"}, "variant", 2},
	{{"sinusoidal", "--len", "4"}, "dim", 2},
	{{"sinusoidal", "--dim", "8"}, "len", 2},
	{{"sinusoidal", "--len", "4", "--dim", "7", "--variant", "concat"}, "dim", 2},
	{{"sinusoidal", "--len=", "--dim", "8"}, "len", 2},
	{{"sinusoidal", "--dim", "8", "--len"}, "len", 2},
	{{"sinusoidal", "--len", "--dim", "8"}, "len", 2},
	{{"sinusoidal", "--len", "4", "--dim", "8", "--dtype", "bf16", "--format", "npy"}, "dtype", 2},
	{{"sinusoidal", "--len", "4", "--dim", "8", "--dtype", "i32"}, "dtype", 2},
	{{"sinusoidal", "--len", "4", "--dim", "8", "--dtype", "f128"}, "dtype", 2},
	{{"sinusoidal", "--len", "4", "--dim", "8", "--format", "png"}, "format", 2},
	{{"sinusoidal", "--len", "4", "--dim", "8", "--format", "xml"}, "format", 2},
	{{"sinusoidal", "--len", "4", "--dim", "8", "--format", "bin", "--format", "bin"}, "format", 2},
	{{"sinusoidal", "--len", "100", "--dim", "8", "--max-elements", "799"}, "len", 2},
	{{"sinusoidal", "--len", "268435457", "--dim", "1"}, "len", 2}, /* default bound 2^28 */
	{{"sinusoidal", "--len", "65536", "--dim", "65536"}, "len", 2},
	/* an analysis' output too big names its size parameter, as posencd's 413 does */
	{{"analysis/similarity", "--len", "100", "--dim", "4", "--max-elements", "9999"}, "len", 2},
	{{"analysis/rope-decay", "--max-distance", "100", "--max-elements", "99"}, "max-distance", 2},
	{{"sinusoidal", "--len", "4", "--dim", "8", "--max-elements", "0"}, "max-elements", 2},
	{{"sinusoidal", "--len", "4", "--dim", "8", "--max-elements", "1e9"}, "max-elements", 2},
	{{"sinusoidal", "--len", "4", "--dim", "8", "--max_elements", "9", "--max-elements", "9"}, "max-elements", 2},
	{{"sinusoidal", "--len", "4", "--dim", "8", "--max-elements"}, "max-elements", 2},
	{{"sinusoidal", "--len", "4", "--dim", "8", "--help=1"}, "help", 2},
	/* a parameter is named as it is typed, dashes for the query name's underscores, however given */
	{{"relative/t5", "--q-len", "4", "--max-distance", "0"}, "max-distance", 2},
	{{"relative/t5", "--q_len", "4", "--max_distance", "0"}, "max-distance", 2},
	{{"relative/t5", "--q-len", "4", "--num-buckets", "1"}, "num-buckets", 2},
	{{"rope", "--len", "4", "--dim", "8", "--scaling", "yarn", "--factor", "4", "--original-max-position-embeddings",
	  "0"},
	 "original-max-position-embeddings", 2},
	{{"rope", "--len", "4", "--dim", "8", "--no-such_option", "1"}, "no-such-option", 2},
	{{"sinusoidal", "--len", "4", "--dim", "8", "-o"}, "o", 2},
	{{"no/such/table", "--len", "4"}, "", 2},
	{{"--len", "4"}, "", 2},
	{{"sinusoidal", "extra", "--len", "4", "--dim", "8"}, "", 2},
	{{"sinusoidal", "-x", "--len", "4", "--dim", "8"}, "", 2},
	{{"sinusoidal", "--len", "4", "--dim", "8", "-o", "/nonexistent-dir/x.json"}, "o", 1},
	/* the CLI writes no PNG: a .png name without --format is refused, not filled with JSON */
	{{"sinusoidal", "--len", "4", "--dim", "8", "-o", "/nonexistent-dir/heat.PNG"}, "o", 2},
};

START_TEST(errors_name_the_parameter)
{
	const struct bad *b = &bad_cases[_i];
	struct crun r;
	crun_argv(&r, &plain, b->args);
	expect_error(&r, b->status, b->param);
	crun_free(&r);
}
END_TEST

START_TEST(max_elements_is_inclusive)
{
	struct crun r;
	crun(&r, &plain, "sinusoidal", "--len", "100", "--dim", "8", "--max-elements", "800", "--format", "bin", NULL);
	crun_expect_ok(&r);
	ck_assert_uint_eq(r.nout, 800 * 4);
	crun_free(&r);
	crun(&r, &plain, "sinusoidal", "--len", "100", "--dim", "8", "--max-elements=799", NULL);
	expect_error(&r, 2, "len");
	ck_assert_ptr_nonnull(strstr(r.err, "800 elements"));
	ck_assert_ptr_nonnull(strstr(r.err, "--max-elements 799"));
	crun_free(&r);
}
END_TEST

/* How many tables the registry holds, and table k of them: loop tests run once per table. */
static int table_count(void)
{
	size_t n;
	pe_table_all(&n);
	return (int)n;
}

static const struct pe_table_def *table_at(int k)
{
	size_t n;
	const struct pe_table_def *const *all = pe_table_all(&n);
	ck_assert_int_lt(k, (int)n);
	return all[k];
}

START_TEST(fixed_dtype_tables)
{
	const struct pe_table_def *def = table_at(_i);
	struct kvlist kv;
	struct crun r;
	if (def->fixed_dtype == PE_DTYPE_COUNT_ || pick_args(def, &kv) != 0)
		return;
	run_table(&r, def, &kv, "--dtype", "f32", NULL);
	expect_error(&r, 2, "dtype");
	crun_free(&r);
	run_table(&r, def, &kv, "--dtype", pe_dtype_name(def->fixed_dtype), "--format", "bin", NULL);
	crun_expect_ok(&r);
	crun_free(&r);
}
END_TEST

/* ---- -o ---- */

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	ck_assert_msg(f != NULL, "cannot open %s", path);
	char *buf = malloc(1 << 20);
	ck_assert_ptr_nonnull(buf);
	*len = fread(buf, 1, 1 << 20, f);
	fclose(f);
	return buf;
}

START_TEST(output_file_format_from_extension)
{
	static const struct {
		const char *name, *format;
	} cases[] = {
		{"t.npy", "npy"}, {"t.json", "json"}, {"t.csv", "csv"}, {"t.bin", "bin"},
		{"T.NPY", "npy"}, {"t.txt", "json"}, {"noext", "json"},
	};
	struct crun_dir d;
	crun_dir_make(&d, "posenc-cli");
	mode_t mask = umask(022);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char path[128];
		snprintf(path, sizeof path, "%s/%s", d.path, cases[i].name);
		struct crun want, r;
		crun(&want, &plain, "sinusoidal", "--len", "6", "--dim", "10", "--dtype", "f16", "--format",
		     cases[i].format, NULL);
		crun_expect_ok(&want);
		crun(&r, &plain, "sinusoidal", "--len", "6", "--dim", "10", "--dtype", "f16", "-o", path, NULL);
		crun_expect_ok(&r);
		ck_assert_uint_eq(r.nout, 0);
		size_t len;
		char *got = read_file(path, &len);
		ck_assert_msg(len == want.nout && !memcmp(got, want.out, len), "%s is not %s", cases[i].name,
			      cases[i].format);
		struct stat st;
		ck_assert_int_eq(stat(path, &st), 0);
		ck_assert_int_eq(st.st_mode & 0777, 0644); /* 0666 & ~umask, as creat(2) would */
		const char *only[] = {cases[i].name, NULL};
		crun_expect_entries(d.path, only);
		ck_assert_int_eq(unlink(path), 0);
		free(got);
		crun_free(&want);
		crun_free(&r);
	}
	umask(mask);
	/* "-o -" is stdout */
	struct crun r;
	crun(&r, &plain, "sinusoidal", "--len", "2", "--dim", "2", "-o", "-", NULL);
	crun_expect_ok(&r);
	ck_assert(r.nout > 0 && r.out[0] == '{');
	crun_free(&r);
	crun_remove_tree(d.path);
}
END_TEST

START_TEST(output_file_all_or_nothing)
{
	struct crun_dir d;
	crun_dir_make(&d, "posenc-cli");
	char path[128], sub[128];
	snprintf(path, sizeof path, "%s/pe.npy", d.path);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs("old", f);
	fclose(f);
	const char *only[] = {"pe.npy", NULL};
	struct crun r;
	size_t len;
	char *got;

	/* a bad parameter, an inferred bf16+npy, a too-big table: the old file stays, nothing else appears */
	crun(&r, &plain, "sinusoidal", "--len", "4", "--dim", "7", "--variant", "concat", "-o", path, NULL);
	expect_error(&r, 2, "dim");
	crun_free(&r);
	crun(&r, &plain, "sinusoidal", "--len", "4", "--dim", "8", "--dtype", "bf16", "-o", path, NULL);
	expect_error(&r, 2, "dtype");
	crun_free(&r);
	crun(&r, &plain, "sinusoidal", "--len", "4", "--dim", "8", "--max-elements", "31", "-o", path, NULL);
	expect_error(&r, 2, "len");
	crun_free(&r);
	got = read_file(path, &len);
	ck_assert(len == 3 && !memcmp(got, "old", 3));
	free(got);
	crun_expect_entries(d.path, only);

	/* success replaces it whole */
	crun(&r, &plain, "sinusoidal", "--len", "4", "--dim", "8", "-o", path, NULL);
	crun_expect_ok(&r);
	crun_free(&r);
	got = read_file(path, &len);
	ck_assert_uint_eq(len, 128 + 4 * 8 * 4);
	ck_assert(!memcmp(got, "\x93NUMPY", 6));
	free(got);
	crun_expect_entries(d.path, only);

	/* an I/O failure (the target is a directory): status 1, the temporary file is gone */
	snprintf(sub, sizeof sub, "%s/sub", d.path);
	ck_assert_int_eq(mkdir(sub, 0755), 0);
	crun(&r, &plain, "sinusoidal", "--len", "4", "--dim", "8", "-o", sub, NULL);
	expect_error(&r, 1, "o");
	crun_free(&r);
	const char *two[] = {"pe.npy", "sub", NULL};
	crun_expect_entries(d.path, two);
	crun_remove_tree(d.path);
}
END_TEST

/* ---- help and version ---- */

START_TEST(help_lists_every_table)
{
	struct crun r;
	size_t n;
	const struct pe_table_def *const *all = pe_table_all(&n);
	crun(&r, &plain, "--help", NULL);
	crun_expect_ok(&r);
	ck_assert_ptr_nonnull(strstr(r.out, "Usage: posenc PATH"));
	for (size_t k = 0; k < n; k++) {
		char line[512];
		snprintf(line, sizeof line, "\n  %-26s  %s\n", all[k]->name, all[k]->summary ? all[k]->summary : "");
		ck_assert_msg(strstr(r.out, line) != NULL, "--help lacks the line for %s", all[k]->name);
	}
	for (const char *o = "--format\0--dtype\0-o FILE\0--max-elements\0--max-analysis-cost\0--version\0"; *o; o += strlen(o) + 1)
		ck_assert_msg(strstr(r.out, o) != NULL, "--help lacks %s", o);
	crun_free(&r);
	crun(&r, &plain, "-h", NULL);
	crun_expect_ok(&r);
	ck_assert_ptr_nonnull(strstr(r.out, "Usage: posenc PATH"));
	crun_free(&r);
}
END_TEST

START_TEST(table_help_lists_every_parameter)
{
	const struct pe_table_def *def = table_at(_i);
	struct crun r;
	/* --help wins over parameters, even wrong ones */
	crun(&r, &plain, def->name, "--bogus", "1", "--help", NULL);
	crun_expect_ok(&r);
	char want[512];
	snprintf(want, sizeof want, "Usage: posenc %s ", def->name);
	ck_assert_ptr_nonnull(strstr(r.out, want));
	for (int i = 0; i < def->nparams; i++) {
		const struct pe_param_spec *sp = &def->params[i];
		snprintf(want, sizeof want, "\n  --%s ", sp->name);
		for (char *c = want; *c; c++) /* listed as typed: dashes for underscores */
			if (*c == '_')
				*c = '-';
		const char *at = strstr(r.out, want);
		ck_assert_msg(at != NULL, "%s --help lacks %s", def->name, sp->name);
		const char *end = strstr(at + 1, "\n  --");
		size_t span = end ? (size_t)(end - at) : strlen(at);
		char *entry = strndup(at, span);
		if (sp->help)
			ck_assert_msg(strstr(entry, sp->help), "%s %s: no help text", def->name, sp->name);
		if (!sp->def)
			ck_assert_ptr_nonnull(strstr(entry, "required"));
		else if (*sp->def) {
			snprintf(want, sizeof want, "default %s", sp->def);
			ck_assert_msg(strstr(entry, want), "%s %s: no '%s'", def->name, sp->name, want);
		}
		if (sp->type == PE_PT_ENUM)
			for (int c = 0; sp->choices[c]; c++)
				ck_assert_msg(strstr(entry, sp->choices[c]), "%s %s: no choice %s", def->name, sp->name,
					      sp->choices[c]);
		if (sp->type == PE_PT_INT || sp->type == PE_PT_REAL || sp->type == PE_PT_LIST) {
			char lo[PE_NUM_MAX + 1], hi[PE_NUM_MAX + 1];
			lo[pe_fmt_f64(sp->min, lo)] = 0;
			hi[pe_fmt_f64(sp->max, hi)] = 0;
			snprintf(want, sizeof want, "%s .. %s", lo, hi);
			ck_assert_msg(strstr(entry, want), "%s %s: no range '%s'", def->name, sp->name, want);
		}
		free(entry);
	}
	crun_free(&r);
}
END_TEST

START_TEST(table_help_examples)
{
	struct crun r;
	crun(&r, &plain, "sinusoidal", "--help", NULL);
	crun_expect_ok(&r);
	ck_assert_ptr_nonnull(strstr(r.out, "\n  --len INT"));
	ck_assert_ptr_nonnull(strstr(r.out, "default vaswani; one of: vaswani, concat, t2t"));
	crun_free(&r);
	crun(&r, &plain, "no/such/table", "--help", NULL);
	expect_error(&r, 2, "");
	crun_free(&r);
}
END_TEST

START_TEST(version)
{
	struct crun r;
	crun(&r, &plain, "--version", NULL);
	crun_expect_ok(&r);
	ck_assert_msg(!strncmp(r.out, "posenc " PE_VERSION " ", strlen("posenc " PE_VERSION " ")), "%s", r.out);
	crun_free(&r);
}
END_TEST

static Suite *cli_suite(void)
{
	Suite *s = suite_create("cli");
	TCase *out = tcase_create("output");
	tcase_set_timeout(out, 120);
	tcase_add_test(out, bin_equals_core_for_every_table);
	tcase_add_test(out, npy_equals_core_for_every_table);
	tcase_add_test(out, json_and_csv_values_for_every_table);
	tcase_add_test(out, sinusoidal_known_values);
	tcase_add_test(out, parameter_spellings);
	suite_add_tcase(s, out);
	TCase *err = tcase_create("errors");
	tcase_set_timeout(err, 60);
	tcase_add_loop_test(err, errors_name_the_parameter, 0, (int)(sizeof bad_cases / sizeof bad_cases[0]));
	tcase_add_test(err, max_elements_is_inclusive);
	tcase_add_loop_test(err, fixed_dtype_tables, 0, table_count());
	suite_add_tcase(s, err);
	TCase *file = tcase_create("file");
	tcase_set_timeout(file, 60);
	tcase_add_test(file, output_file_format_from_extension);
	tcase_add_test(file, output_file_all_or_nothing);
	suite_add_tcase(s, file);
	TCase *help = tcase_create("help");
	tcase_set_timeout(help, 60);
	tcase_add_test(help, help_lists_every_table);
	tcase_add_loop_test(help, table_help_lists_every_parameter, 0, table_count());
	tcase_add_test(help, table_help_examples);
	tcase_add_test(help, version);
	suite_add_tcase(s, help);
	return s;
}

PE_TEST_MAIN(cli_suite)
