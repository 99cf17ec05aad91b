/* posencd configuration: every setting, its default (embedded config/posenc.json), and the layers
 * that override it. Precedence, lowest first: built-in defaults (the embedded posenc.json) <
 * --config FILE < environment POSENC_<KEY> (upper case) < command line --<key-with-dashes> VALUE
 * (or --key=VALUE). Invalid values produce one line naming the key; the daemon exits with status 2.
 *
 * One table (config.c) lists every key once with its type, range and field; loading, --help and
 * the tests all walk it. The struct is plain data, filled once at start-up and read-only after. */
#ifndef PE_DAEMON_CONFIG_H
#define PE_DAEMON_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include "posenc/err.h"

enum pe_log_level { PE_LOG_ERROR, PE_LOG_WARN, PE_LOG_INFO, PE_LOG_DEBUG };

struct pe_config {
	int64_t port;                  /* 0..65535; 0 = pick a free port and log it */
	char bind[64];                 /* IPv4/IPv6 address literal, default "0.0.0.0" */
	char data_dir[4096];           /* learned tables live here (store_url file:) */
	char store_url[1024];          /* "file:" (data_dir) or a postgresql:// URI shared by replicas */
	int64_t store_max_bytes;       /* all learned tables together */
	int64_t max_table_bytes;       /* one learned table */
	int64_t quarantine_max_bytes;  /* data_dir/quarantine/, beside the tables (oldest files dropped) */
	int64_t max_header_bytes;      /* request line + headers of one request (per-connection pool) */
	int64_t workers;               /* compute threads, 1..256 */
	int64_t cache_bytes;           /* LRU budget */
	int64_t warm_bytes;            /* the warm reserve's limit (posenc/warm.h) */
	int64_t warm_idle;             /* seconds: its blocks are given back after that long without a take */
	int64_t response_budget_bytes; /* responses being built or sent, outside the cache (503 beyond) */
	int64_t max_elements;          /* largest table one request may produce */
	int64_t max_analysis_cost;     /* multiply-adds one analysis request may cost */
	int64_t max_body_bytes;        /* largest request body */
	int64_t max_queue;             /* jobs waiting for a worker before 503 */
	int64_t max_connections;       /* total */
	int64_t max_connections_per_ip;
	int64_t connection_timeout;    /* seconds of inactivity before a connection is closed */
	int64_t linger_bytes;          /* body bytes read and dropped after a refusal, to answer it */
	int64_t linger_timeout;        /* seconds spent on that at most */
	int64_t job_timeout;           /* seconds a request may wait for its computation */
	int64_t inline_max_us;         /* estimated µs of work computed on the HTTP thread; 0 = none */
	int64_t http_threads;          /* libmicrohttpd threads (thread pool when > 1); 0: main.c picks one per two CPUs */
	int64_t worker_nice;           /* the pool's workers' nice value (0..19) */
	int64_t reserve_cpus;          /* CPUs kept from heavy jobs while the HTTP threads are busy */
	int64_t http_slice_us;         /* the HTTP threads' scheduler slice, µs; 0 = the kernel's */
	int64_t worker_slice_us;       /* the workers' scheduler slice, µs; 0 = the kernel's */
	char auth_token[256];          /* "" = none: only loopback clients may write */
	char cors_origins[1024];       /* comma list or "*" */
	enum pe_log_level log_level;
	int64_t shutdown_timeout;      /* seconds SIGTERM waits for in-flight work */
	char tls_cert[4096];           /* PEM certificate chain file; "" = plain HTTP */
	char tls_key[4096];            /* PEM private key file (required with tls_cert) */
};

/* Load defaults, then --config, environment and argv (argv[0] is skipped). envp may be NULL (then
 * the process environment is used). Returns 0; PE_EINVAL with err naming the key on a bad value;
 * 1 when --help or --version was handled (text written to stdout), so the caller exits 0. */
int pe_config_load(struct pe_config *cfg, int argc, char **argv, char **envp, struct pe_err *err);

/* Only the embedded defaults (used by tests). */
int pe_config_defaults(struct pe_config *cfg, struct pe_err *err);

/* CPUs a cgroup's CPU quota allows, the quota over its period rounded up; 0 when there is none or
 * text cannot be read. text: cgroup v2's cpu.max ("max 100000", "150000 100000"), or for v1
 * cpu.cfs_quota_us and cpu.cfs_period_us joined by a space ("-1 100000": none). */
unsigned pe_config_quota_cpus(const char *text);

/* What http_threads 0 means: one HTTP thread per two CPUs the daemon may use (those its affinity
 * allows, no more than its cgroup's quota when it has one: quota_cpus 0 for none), at least one. */
int64_t pe_config_auto_http_threads(unsigned affinity_cpus, unsigned quota_cpus);

/* One key of the configuration table as --help describes it, for tools that document the
 * settings (docs/configuration.md is generated from these: make docs). */
struct pe_config_key {
	const char *name;  /* "max_body_bytes": env POSENC_MAX_BODY_BYTES, option --max-body-bytes */
	const char *type;  /* "integer", "bytes" (takes a size suffix), "string", "address", "level" */
	const char *help;  /* one line: what the key sets */
	char value[128];   /* its value in cfg: decimal, a level name, or a string in double quotes */
	char range[128];   /* what it accepts: "1..256", "at most 63 bytes", "error|warn|info|debug" */
};

/* Number of keys in the table; key i of them, with its value in cfg, is pe_config_key_get's. */
size_t pe_config_key_count(void);

/* Fill *out with key i (0-based, in table order) and its value in cfg. Returns 0, or PE_EINVAL
 * when i is not below pe_config_key_count(). Thread-safe; out's pointers are static strings. */
int pe_config_key_get(size_t i, const struct pe_config *cfg, struct pe_config_key *out);

const char *pe_log_level_name(enum pe_log_level l);

#endif
