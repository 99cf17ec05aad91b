/* posencd configuration loading: the embedded defaults, then --config FILE, then POSENC_<KEY>
 * environment variables, then --<key> options (see config.h for the contract).
 *
 * Design: the `keys` table below is the only place a setting is described. Every source reduces to
 * one of two setters, set_json (a JSON value from the defaults or the file) and set_text (a string
 * from the environment or argv), and both walk the same row, so a key parses, range-checks and
 * reports errors identically wherever it comes from. argv is scanned twice: once for syntax,
 * --help, --version and --config (the file must be applied before the environment), and once,
 * last, to apply values. Unknown POSENC_* variables are ignored on purpose: other parts of posenc
 * read their own (the ISA override for tests), so only the keys in the table are looked up.
 *
 * Integers are strict decimal: an optional '-' and digits, nothing else, no overflow. Byte-sized
 * keys also take a suffix k M G T (powers of 1000) or Ki Mi Gi Ti (powers of 1024), on the command
 * line, in the environment, and as a JSON string in the file ("cache_bytes": "256Mi"). */
#include "daemon/config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/assets.h"
#include "posenc/posenc.h"

#define CONFIG_FILE_MAX ((size_t)1 << 20)
#define ENV_PREFIX "POSENC_"
#define NAME_MAX_LEN 48 /* longest key name (22 bytes today) with room to spare */

enum key_type {
	KEY_INT,   /* int64_t in [min, max] */
	KEY_BYTES, /* KEY_INT that also takes a size suffix */
	KEY_STR,   /* char[size], length in [min, max] bytes */
	KEY_ADDR,  /* KEY_STR holding an IPv4 or IPv6 literal */
	KEY_ENUM,  /* enum pe_log_level (the only enum setting), one of names[min..max] */
};

struct key {
	const char *name;
	enum key_type type;
	size_t offset, size;
	int64_t min, max;
	const char *const *names;
	const char *help;
};

static const char *const level_names[] = {"error", "warn", "info", "debug"};

#define MEMBER_SIZE(f) sizeof(((struct pe_config *)0)->f)
#define FIELD(f) offsetof(struct pe_config, f), MEMBER_SIZE(f)
#define INT(f, lo, hi, help) {#f, KEY_INT, FIELD(f), lo, hi, NULL, help}
#define BYTES(f, lo, hi, help) {#f, KEY_BYTES, FIELD(f), lo, hi, NULL, help}
#define STR(f, minlen, help) {#f, KEY_STR, FIELD(f), minlen, MEMBER_SIZE(f) - 1, NULL, help}
#define ADDR(f, help) {#f, KEY_ADDR, FIELD(f), 1, MEMBER_SIZE(f) - 1, NULL, help}
#define ENUM(f, names, help) \
	{#f, KEY_ENUM, FIELD(f), 0, sizeof names / sizeof names[0] - 1, names, help}

static const struct key keys[] = {
	INT(port, 0, 65535, "TCP port to listen on; 0 picks a free port and logs it"),
	ADDR(bind, "address to listen on (IPv4 or IPv6 literal)"),
	STR(data_dir, 1, "directory holding learned tables"),
	STR(store_url, 1, "learned-table store: file: (data_dir) or postgresql://... (shared by replicas)"),
	BYTES(store_max_bytes, 1, INT64_C(1) << 50, "bytes of all learned tables together (507 beyond)"),
	BYTES(max_table_bytes, 1, INT64_C(1) << 36, "bytes of one learned table's elements (413 beyond, before the body is read)"),
	BYTES(quarantine_max_bytes, 0, INT64_C(1) << 50, "bytes data_dir/quarantine/ may hold (oldest dropped)"),
	BYTES(max_header_bytes, 8192, INT64_C(1) << 20, "bytes of a request line and its headers (431/414 beyond)"),
	INT(workers, 1, 256, "compute threads: every job runs on one; idle ones help encode a big JSON answer"),
	BYTES(cache_bytes, 0, INT64_C(1) << 40, "LRU cache budget in bytes (encoded responses; least recently used evicted)"),
	BYTES(warm_bytes, 0, INT64_C(1) << 40,
	      "bytes of memory written ahead of need, when a CPU is idle, or kept from answers done with, for the next answers of 2 MiB or more; less than one 2 MiB block (2 MiB + 4 KiB): none"),
	INT(warm_idle, 1, 86400, "seconds without an answer of 2 MiB or more after which warm memory is given back"),
	BYTES(response_budget_bytes, 1 << 20, INT64_C(1) << 40,
	      "bytes of request bodies and of responses being built or sent outside the cache; 503 while full, 413 for a request that alone needs more"),
	INT(max_elements, 1, INT64_C(1) << 34, "largest table one request may produce or build on the way, in elements (413 beyond)"),
	INT(max_analysis_cost, 1, INT64_C(1) << 50,
	    "work one /v1/analysis request may cost, in multiply-adds (similarity: len*(len+1)/2*dim; 413 beyond)"),
	BYTES(max_body_bytes, 1, INT64_C(1) << 36, "largest request body in bytes (413 beyond)"),
	INT(max_queue, 1, 1000000, "jobs waiting for a worker; 503 with Retry-After beyond"),
	INT(max_connections, 1, 1000000, "open connections in total"),
	INT(max_connections_per_ip, 1, 1000000, "open connections from one client address"),
	INT(connection_timeout, 1, 86400, "seconds of inactivity before a connection is closed"),
	BYTES(linger_bytes, 0, INT64_C(1) << 40,
	      "body bytes read and dropped after a refusal (413, 405, 415, 401/403) so the client reads it"),
	INT(linger_timeout, 1, 3600, "seconds a refused request's body may take to be dropped"),
	INT(job_timeout, 1, 86400, "seconds a request may wait for its computation; then 503, and the computation stops"),
	INT(inline_max_us, 0, 1000,
	    "computations estimated at most this many microseconds run on the HTTP thread; 0: all on the pool"),
	INT(http_threads, 0, 64,
	    "libmicrohttpd threads that accept, parse and answer requests (each its own epoll; connections stay on one); 0: one per two CPUs this process may use (affinity, cgroup quota), at least one"),
	INT(worker_nice, 0, 19, "nice value of the pool's workers, so the HTTP thread preempts them; 0: equal"),
	INT(reserve_cpus, 0, 1024,
	    "CPUs left to the HTTP threads while they are busy: large tables then compute on the others (at least one); 0: none"),
	INT(http_slice_us, 0, 100000,
	    "scheduler slice the HTTP threads ask for (Linux 6.12+; the kernel raises it to 100): a short one preempts workers at once; 0: the kernel's"),
	INT(worker_slice_us, 0, 100000,
	    "scheduler slice the workers ask for (Linux 6.12+): a long one gives way to short-sliced threads; 0: the kernel's"),
	STR(auth_token, 0, "bearer token for writes; empty: only loopback clients may write"),
	STR(cors_origins, 0, "allowed CORS origins: comma-separated list or *; empty: no CORS"),
	ENUM(log_level, level_names, "least severe message logged"),
	INT(shutdown_timeout, 0, 3600, "seconds SIGTERM waits for work in flight before cancelling it"),
	STR(tls_cert, 0, "PEM certificate (chain) file for HTTPS; empty: plain HTTP"),
	STR(tls_key, 0, "PEM private key file for HTTPS (with tls_cert)"),
};

#define NKEYS (sizeof keys / sizeof keys[0])

const char *pe_log_level_name(enum pe_log_level l)
{
	if ((int)l < 0 || (size_t)l >= sizeof level_names / sizeof level_names[0])
		return "unknown";
	return level_names[l];
}

/* Every failure goes through here: "config: <key>: <what> (from <source>)", err->param = key. */
__attribute__((format(printf, 5, 6))) static int fail_code(struct pe_err *err, int code,
							      const char *key, const char *source,
							      const char *fmt, ...)
{
	char what[PE_ERR_DETAIL_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	int rc = pe_err_set(err, code, key, "config: %.64s: %.150s (from %.100s)", key, what, source);
	/* One line, whatever a file, argv or the environment held: control bytes are shown as '?'. */
	for (char *p = err ? err->detail : NULL; p && *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	for (char *p = err ? err->param : NULL; p && *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	return rc;
}

#define fail(err, key, source, ...) fail_code(err, PE_EINVAL, key, source, __VA_ARGS__)

static const struct key *find_key(const char *name)
{
	for (size_t i = 0; i < NKEYS; i++)
		if (strcmp(keys[i].name, name) == 0)
			return &keys[i];
	return NULL;
}

/* argv spelling: --max-body-bytes for max_body_bytes. name is not NUL-terminated. */
static const struct key *find_option(const char *name, size_t len)
{
	for (size_t i = 0; i < NKEYS; i++) {
		const char *k = keys[i].name;
		size_t j = 0;
		while (j < len && k[j] && name[j] == (k[j] == '_' ? '-' : k[j]))
			j++;
		if (j == len && !k[j])
			return &keys[i];
	}
	return NULL;
}

static void key_env_name(const struct key *k, char *buf, size_t size)
{
	size_t n = snprintf(buf, size, ENV_PREFIX "%s", k->name);
	for (size_t i = 0; i < n && i < size; i++)
		if (buf[i] >= 'a' && buf[i] <= 'z')
			buf[i] = (char)(buf[i] - 'a' + 'A');
}

static void *field(struct pe_config *cfg, const struct key *k)
{
	return (char *)cfg + k->offset;
}

/* Decimal with optional '-' and, if bytes, a size suffix. 0, -1 not a number, -2 overflow. */
static int parse_int(const char *s, int bytes, int64_t *out)
{
	int neg = *s == '-';
	const char *p = s + neg;
	uint64_t mag = 0, mult = 1;
	if (*p < '0' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');
		if (mag > (UINT64_MAX - d) / 10)
			return -2;
		mag = mag * 10 + d;
	}
	if (*p && bytes) {
		static const char dec[] = "kMGT", bin[] = "KMGT";
		const char *u;
		if (p[1] == 'i' && (u = strchr(bin, *p)) != NULL) {
			for (const char *c = bin; c <= u; c++)
				mult *= 1024;
			p += 2;
		} else if ((u = strchr(dec, *p)) != NULL) {
			for (const char *c = dec; c <= u; c++)
				mult *= 1000;
			p += 1;
		} else {
			return -1;
		}
	}
	if (*p)
		return -1;
	if (mag > UINT64_MAX / mult)
		return -2;
	mag *= mult;
	if (mag > (uint64_t)INT64_MAX + neg)
		return -2;
	*out = neg ? (mag ? -(int64_t)(mag - 1) - 1 : 0) : (int64_t)mag;
	return 0;
}

static int set_int(struct pe_config *cfg, const struct key *k, int64_t v, const char *source,
		   struct pe_err *err)
{
	if (v < k->min || v > k->max)
		return fail(err, k->name, source, "must be between %lld and %lld, got %lld",
			    (long long)k->min, (long long)k->max, (long long)v);
	*(int64_t *)field(cfg, k) = v;
	return 0;
}

static int set_string(struct pe_config *cfg, const struct key *k, const char *s,
		      const char *source, struct pe_err *err)
{
	size_t n = strlen(s);
	if ((int64_t)n < k->min)
		return fail(err, k->name, source, "must not be empty");
	if ((int64_t)n > k->max)
		return fail(err, k->name, source, "is %zu bytes long, at most %lld allowed", n,
			    (long long)k->max);
	if (k->type == KEY_ADDR) {
		unsigned char addr[16];
		if (inet_pton(AF_INET, s, addr) != 1 && inet_pton(AF_INET6, s, addr) != 1)
			return fail(err, k->name, source,
				    "'%.64s' is not an IPv4 or IPv6 address literal", s);
	}
	memcpy(field(cfg, k), s, n + 1);
	return 0;
}

static int set_enum(struct pe_config *cfg, const struct key *k, const char *s, const char *source,
		    struct pe_err *err)
{
	for (int64_t i = k->min; i <= k->max; i++) {
		if (strcmp(k->names[i], s) == 0) {
			*(enum pe_log_level *)field(cfg, k) = (enum pe_log_level)i;
			return 0;
		}
	}
	char choices[128] = "";
	for (int64_t i = k->min; i <= k->max; i++)
		snprintf(choices + strlen(choices), sizeof choices - strlen(choices), "%s%s",
			 i > k->min ? "|" : "", k->names[i]);
	return fail(err, k->name, source, "'%.40s' is not one of %s", s, choices);
}

/* A value given as text: environment, command line, or a JSON string. */
static int set_text(struct pe_config *cfg, const struct key *k, const char *s, const char *source,
		    struct pe_err *err)
{
	int64_t v = 0;
	switch (k->type) {
	case KEY_INT:
	case KEY_BYTES:
		switch (parse_int(s, k->type == KEY_BYTES, &v)) {
		case -1:
			return fail(err, k->name, source, "'%.40s' is not a decimal integer%s", s,
				    k->type == KEY_BYTES ? " (suffixes: k M G T Ki Mi Gi Ti)" : "");
		case -2:
			return fail(err, k->name, source, "'%.40s' is out of range %lld..%lld", s,
				    (long long)k->min, (long long)k->max);
		}
		return set_int(cfg, k, v, source, err);
	case KEY_STR:
	case KEY_ADDR:
		return set_string(cfg, k, s, source, err);
	case KEY_ENUM:
		return set_enum(cfg, k, s, source, err);
	}
	return fail_code(err, PE_EINTERNAL, k->name, source, "unknown key type");
}

static const char *json_type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "an object";
	case JSON_ARRAY: return "an array";
	case JSON_STRING: return "a string";
	case JSON_INTEGER: return "an integer";
	case JSON_REAL: return "a real number";
	case JSON_TRUE:
	case JSON_FALSE: return "a boolean";
	case JSON_NULL: return "null";
	}
	return "unknown";
}

static int set_json(struct pe_config *cfg, const struct key *k, const json_t *v,
		    const char *source, struct pe_err *err)
{
	int is_int = k->type == KEY_INT || k->type == KEY_BYTES;
	if (is_int && json_is_integer(v))
		return set_int(cfg, k, json_integer_value(v), source, err);
	if (json_is_string(v) && (!is_int || k->type == KEY_BYTES))
		return set_text(cfg, k, json_string_value(v), source, err);
	return fail(err, k->name, source, "must be %s, not %s",
		    k->type == KEY_BYTES ? "an integer or a size string"
		    : is_int	       ? "an integer"
				       : "a string",
		    json_type_name(v));
}

static int apply_object(struct pe_config *cfg, const json_t *obj, const char *source,
			struct pe_err *err)
{
	const char *name;
	json_t *v;
	if (!json_is_object(obj))
		return fail(err, "config", source, "must be a JSON object, not %s", json_type_name(obj));
	json_object_foreach((json_t *)obj, name, v) {
		const struct key *k = find_key(name);
		if (!k)
			return fail(err, name, source, "unknown key");
		int rc = set_json(cfg, k, v, source, err);
		if (rc)
			return rc;
	}
	return 0;
}

/* Parse and apply a JSON document. source names it in errors. */
static int apply_document(struct pe_config *cfg, const char *buf, size_t len, const char *source,
			  int need_all, struct pe_err *err)
{
	json_error_t jerr;
	json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	int rc;
	if (!root) {
		rc = fail(err, "config", source, "not valid JSON: %.80s at line %d column %d",
			  jerr.text, jerr.line, jerr.column);
		goto out;
	}
	rc = apply_object(cfg, root, source, err);
	for (size_t i = 0; !rc && need_all && i < NKEYS; i++)
		if (!json_object_get(root, keys[i].name))
			rc = fail(err, keys[i].name, source, "missing");
out:
	json_decref(root);
	return rc;
}

unsigned pe_config_quota_cpus(const char *text)
{
	long long quota, period;
	char *end;
	if (!text)
		return 0;
	errno = 0;
	quota = strtoll(text, &end, 10);
	if (end == text || errno || quota <= 0) /* "max", "-1", junk: no quota */
		return 0;
	text = end;
	period = strtoll(text, &end, 10);
	if (end == text || errno || period <= 0)
		return 0;
	long long cpus = quota / period + (quota % period != 0);
	return cpus > 4096 ? 4096 : (unsigned)cpus;
}

int64_t pe_config_auto_http_threads(unsigned affinity_cpus, unsigned quota_cpus)
{
	unsigned cpus = affinity_cpus ? affinity_cpus : 2;
	if (quota_cpus && quota_cpus < cpus)
		cpus = quota_cpus;
	return cpus / 2 > 1 ? cpus / 2 : 1;
}

int pe_config_defaults(struct pe_config *cfg, struct pe_err *err)
{
	memset(cfg, 0, sizeof *cfg);
	return apply_document(cfg, pe_asset_config_json, PE_ASSET_LEN(pe_asset_config_json),
			      "defaults", 1, err);
}

static int apply_file(struct pe_config *cfg, const char *path, struct pe_err *err)
{
	int rc = 0;
	char *buf = NULL;
	FILE *f = fopen(path, "rb");
	if (!f) {
		rc = fail(err, "config", path, "cannot open: %s", strerror(errno));
		goto out;
	}
	buf = malloc(CONFIG_FILE_MAX + 1);
	if (!buf) {
		rc = fail_code(err, PE_ENOMEM, "config", path, "out of memory");
		goto out;
	}
	size_t n = fread(buf, 1, CONFIG_FILE_MAX + 1, f);
	if (ferror(f))
		rc = fail(err, "config", path, "cannot read: %s", strerror(errno));
	else if (n > CONFIG_FILE_MAX)
		rc = fail(err, "config", path, "larger than %zu bytes (1 MiB)", CONFIG_FILE_MAX);
	else
		rc = apply_document(cfg, buf, n, path, 0, err);
out:
	free(buf);
	if (f)
		fclose(f);
	return rc;
}

static const char *env_lookup(char **envp, const char *name)
{
	if (!envp)
		return getenv(name);
	size_t n = strlen(name);
	for (char **e = envp; *e; e++)
		if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
			return *e + n + 1;
	return NULL;
}

static int apply_env(struct pe_config *cfg, char **envp, struct pe_err *err)
{
	for (size_t i = 0; i < NKEYS; i++) {
		char name[sizeof ENV_PREFIX + NAME_MAX_LEN], source[sizeof name + 16];
		key_env_name(&keys[i], name, sizeof name);
		const char *v = env_lookup(envp, name);
		if (!v)
			continue;
		snprintf(source, sizeof source, "environment %s", name);
		int rc = set_text(cfg, &keys[i], v, source, err);
		if (rc)
			return rc;
	}
	return 0;
}

static void print_range(const struct key *k)
{
	switch (k->type) {
	case KEY_INT:
	case KEY_BYTES:
		printf("range %lld..%lld", (long long)k->min, (long long)k->max);
		break;
	case KEY_STR:
	case KEY_ADDR:
		printf("at most %lld bytes", (long long)k->max);
		break;
	case KEY_ENUM:
		for (int64_t i = k->min; i <= k->max; i++)
			printf("%s%s", i > k->min ? "|" : "one of ", k->names[i]);
		break;
	}
}

static void print_value(const struct pe_config *cfg, const struct key *k)
{
	const void *p = (const char *)cfg + k->offset;
	if (k->type == KEY_INT || k->type == KEY_BYTES)
		printf("%lld", (long long)*(const int64_t *)p);
	else if (k->type == KEY_ENUM)
		printf("%s", pe_log_level_name(*(const enum pe_log_level *)p));
	else
		printf("\"%s\"", (const char *)p);
}

/* cfg holds the embedded defaults when this runs. */
static void print_help(const struct pe_config *cfg)
{
	static const char *const metavar[] = {
		[KEY_INT] = "N", [KEY_BYTES] = "BYTES", [KEY_STR] = "TEXT",
		[KEY_ADDR] = "ADDR", [KEY_ENUM] = "LEVEL",
	};
	printf("Usage: posencd [--config FILE] [--<key> VALUE | --<key>=VALUE]...\n"
	       "Serves positional-encoding tables over HTTP.\n\n"
	       "Settings, lowest precedence first: built-in defaults, --config FILE (a JSON object\n"
	       "of the keys below, at most 1 MiB), environment POSENC_<KEY>, command line.\n"
	       "BYTES values take a suffix k M G T (x1000) or Ki Mi Gi Ti (x1024).\n\n"
	       "  --help                      print this and exit\n"
	       "  --version                   print the version and exit\n"
	       "  --config FILE               load settings from a JSON file\n"
	       "  --init-store                create the store's tables (or data_dir) when missing, and exit\n");
	for (size_t i = 0; i < NKEYS; i++) {
		const struct key *k = &keys[i];
		char opt[64], env[sizeof ENV_PREFIX + NAME_MAX_LEN];
		int n = snprintf(opt, sizeof opt, "--%s %s", k->name, metavar[k->type]);
		for (int j = 2; j < n && opt[j] != ' '; j++)
			if (opt[j] == '_')
				opt[j] = '-';
		key_env_name(k, env, sizeof env);
		if (n > 27) /* too long for the column: the option on a line of its own */
			printf("  %s\n  %-27s %s\n  %-27s default ", opt, "", k->help, "");
		else
			printf("  %-27s %s\n  %-27s default ", opt, k->help, "");
		print_value(cfg, k);
		printf(", ");
		print_range(k);
		printf(", env %s\n", env);
	}
	fflush(stdout);
}

size_t pe_config_key_count(void) { return NKEYS; }

int pe_config_key_get(size_t i, const struct pe_config *cfg, struct pe_config_key *out)
{
	static const char *const type_name[] = {
		[KEY_INT] = "integer", [KEY_BYTES] = "bytes", [KEY_STR] = "string",
		[KEY_ADDR] = "address", [KEY_ENUM] = "level",
	};
	if (i >= NKEYS)
		return PE_EINVAL;
	const struct key *k = &keys[i];
	const void *p = (const char *)cfg + k->offset;
	out->name = k->name;
	out->type = type_name[k->type];
	out->help = k->help;
	switch (k->type) {
	case KEY_INT:
	case KEY_BYTES:
		snprintf(out->value, sizeof out->value, "%lld", (long long)*(const int64_t *)p);
		snprintf(out->range, sizeof out->range, "%lld..%lld", (long long)k->min, (long long)k->max);
		break;
	case KEY_STR:
	case KEY_ADDR:
		snprintf(out->value, sizeof out->value, "\"%.120s\"", (const char *)p);
		snprintf(out->range, sizeof out->range, "at most %lld bytes", (long long)k->max);
		break;
	case KEY_ENUM:
		snprintf(out->value, sizeof out->value, "%s", pe_log_level_name(*(const enum pe_log_level *)p));
		out->range[0] = 0;
		for (int64_t j = k->min; j <= k->max; j++)
			snprintf(out->range + strlen(out->range), sizeof out->range - strlen(out->range), "%s%s",
				 j > k->min ? "|" : "", k->names[j]);
		break;
	}
	return 0;
}

struct opt {
	const char *arg;   /* the argv element as written */
	const char *name;  /* after "--", up to '=' or the end */
	size_t len;
	const char *value; /* NULL when none was given */
	const struct key *key;
};

enum { OPT_KEY, OPT_HELP, OPT_VERSION, OPT_CONFIG };

static int is_option(const struct opt *o, const char *word)
{
	return o->len == strlen(word) && strncmp(o->name, word, o->len) == 0;
}

/* Read the option at argv[*i] and its value, advancing *i. Returns OPT_* or a negative error. */
static int next_option(int argc, char **argv, int *i, struct opt *o, struct pe_err *err)
{
	const char *a = argv[(*i)++];
	memset(o, 0, sizeof *o);
	o->arg = a;
	if (strncmp(a, "--", 2) != 0)
		return fail(err, a, "command line", "unexpected argument (options start with --)");
	o->name = a + 2;
	const char *eq = strchr(o->name, '=');
	o->len = eq ? (size_t)(eq - o->name) : strlen(o->name);
	if (eq)
		o->value = eq + 1;
	char shown[PE_ERR_PARAM_MAX];
	snprintf(shown, sizeof shown, "--%.*s", (int)o->len, o->name);
	if (is_option(o, "help") || is_option(o, "version")) {
		if (eq)
			return fail(err, shown, "command line", "takes no value");
		return is_option(o, "help") ? OPT_HELP : OPT_VERSION;
	}
	int kind = is_option(o, "config") ? OPT_CONFIG : OPT_KEY;
	if (kind == OPT_KEY && !(o->key = find_option(o->name, o->len)))
		return fail(err, shown, "command line", "unknown option (see --help)");
	if (!eq) {
		/* A following option is not taken as a value: "--port --workers 2" is a mistake. */
		if (*i >= argc || strncmp(argv[*i], "--", 2) == 0)
			return fail(err, kind == OPT_KEY ? o->key->name : "config", "command line",
				    "%s needs a value", shown);
		o->value = argv[(*i)++];
	}
	return kind;
}

/* First pass over argv: syntax, --help/--version (return 1) and the --config path (last wins). */
static int scan_args(const struct pe_config *cfg, int argc, char **argv, const char **config,
		     struct pe_err *err)
{
	struct opt o;
	for (int i = 1; i < argc;) {
		int kind = next_option(argc, argv, &i, &o, err);
		if (kind < 0)
			return kind;
		if (kind == OPT_HELP) {
			print_help(cfg);
			return 1;
		}
		if (kind == OPT_VERSION) {
			printf("posencd " PE_VERSION "\n");
			fflush(stdout);
			return 1;
		}
		if (kind == OPT_CONFIG && !*o.value)
			return fail(err, "config", "command line", "--config needs a file name");
		if (kind == OPT_CONFIG)
			*config = o.value;
	}
	return 0;
}

/* Second pass, after the file and environment: apply the values. Syntax was checked already. */
static int apply_args(struct pe_config *cfg, int argc, char **argv, struct pe_err *err)
{
	struct opt o;
	for (int i = 1; i < argc;) {
		int rc = next_option(argc, argv, &i, &o, err);
		if (rc == OPT_KEY)
			rc = set_text(cfg, o.key, o.value, "command line", err);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int pe_config_load(struct pe_config *cfg, int argc, char **argv, char **envp, struct pe_err *err)
{
	const char *config = NULL;
	int rc = pe_config_defaults(cfg, err);
	if (!rc)
		rc = scan_args(cfg, argc, argv, &config, err);
	if (!rc && config)
		rc = apply_file(cfg, config, err);
	if (!rc)
		rc = apply_env(cfg, envp, err);
	if (!rc)
		rc = apply_args(cfg, argc, argv, err);
	return rc;
}
