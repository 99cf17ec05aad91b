/* posencd: load the configuration, wire cache, worker pool, metrics and the HTTP server together,
 * then wait for SIGTERM/SIGINT/SIGQUIT and drain: readiness goes 503, the listening socket
 * closes, work already accepted finishes (up to shutdown_timeout; then it is cancelled), and the process exits 0. The store of
 * learned tables is opened (file: data_dir created and scanned; postgresql: the first connection
 * tried) before anything is served; a data_dir that cannot be used stops the start with status 1,
 * a store_url that is not one stops it with status 2. A database that cannot be reached does not:
 * the store connects on its own (tables never need it; /readyz says 503 meanwhile).
 * `posencd --init-store` makes the store ready (its PostgreSQL tables created) and exits.
 *
 * Signals are blocked in every thread (they inherit the mask) and taken by sigwait here; all but
 * the three that drain and the fault signals (SIGHUP, SIGUSR1, SIGALRM, SIGXCPU, SIGRTMIN+n, ...)
 * are logged and ignored, never fatal. */
#include "daemon/assets.h"
#include "daemon/config.h"
#include "daemon/log.h"
#include "daemon/metrics.h"
#include "daemon/pool.h"
#include "daemon/slice.h"
#include "http/http.h"
#include "posenc/posenc.h"

#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct daemon {
	struct pe_config cfg;
	struct pe_cache *cache;
	struct pe_budget *budget; /* response bytes being built or sent */
	struct pe_warm *warm;     /* memory written ahead of the next large answers (NULL: none) */
	pthread_t warm_thread;    /* its filler, at SCHED_IDLE */
	struct pe_metrics *metrics;
	struct pe_pool *pool;
	struct pe_http *_Atomic http;
	struct pe_store *store;
	char *tls_cert, *tls_key;
	struct pe_http_static statics[15]; /* embedded files: openapi.yaml and the dashboard */
	unsigned cpus, quota_cpus;         /* CPUs the affinity allows; the cgroup's quota in CPUs, 0: none */
};

static int submit_hook(void *ctx, void (*work)(void *), void *arg)
{
	struct daemon *d = ctx;
	return pe_pool_submit(d->pool, work, arg);
}

/* An HTTP thread asks for its short scheduler slice (slice.h), best effort. */
static void http_thread_hook(void *ctx)
{
	struct daemon *d = ctx;
	if (d->cfg.http_slice_us)
		pe_slice_set(0, (unsigned)d->cfg.http_slice_us);
}

static int submit_heavy_hook(void *ctx, void (*work)(void *), void *arg)
{
	struct daemon *d = ctx;
	return pe_pool_submit_heavy(d->pool, work, arg);
}

static void ran_inline_hook(void *ctx)
{
	struct daemon *d = ctx;
	pe_pool_count_inline(d->pool);
}

static void observe_hook(void *ctx, const struct pe_http_request_info *info)
{
	struct daemon *d = ctx;
	pe_metrics_observe(d->metrics, info);
	pe_pool_note_request(d->pool);
	pe_log_request(info);
}

static int render_hook(void *ctx, struct pe_buf *out)
{
	struct daemon *d = ctx;
	int rc = pe_metrics_render(d->metrics, d->cache, d->pool, out);
	if (rc == 0)
		rc = pe_metrics_render_warm(d->warm, out);
	return rc ? rc : pe_metrics_render_budget(d->budget, out);
}

static void tick(void *arg)
{
	struct daemon *d = arg;
	struct pe_http *h = atomic_load(&d->http);
	if (h)
		pe_http_tick(h, 0);
	pe_warm_tick(d->warm); /* the ticker gives idle warm blocks back: the filler never unmaps */
	pe_log_flush();
}

/* ---- the warm reserve's filler ----
 * It writes memory for the next large answers (posenc/warm.h) only when a CPU has nothing else to
 * run (SCHED_IDLE), so it never takes time from a request; under a steady load it may not run at
 * all, and answers then fault in their own pages as they would without it. Its blocks are given
 * back after warm_idle seconds without a large answer, by the pool's ticker (tick above). It
 * makes no system call that changes the memory map (warm.c says why): the request that takes a
 * block maps its replacement. */

static void *warm_main(void *arg)
{
	struct sched_param sp = {0};
	(void)pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp); /* best effort */
	pe_warm_run(arg);
	return NULL;
}

/* The reserve and its filler when warm_bytes asks for one; without (or if the thread cannot be
 * started) answers are written into new memory. */
static void start_warm(struct daemon *d)
{
	d->warm = pe_warm_new((size_t)d->cfg.warm_bytes, (double)d->cfg.warm_idle);
	if (d->warm && pthread_create(&d->warm_thread, NULL, warm_main, d->warm) != 0) {
		pe_warm_free(d->warm);
		d->warm = NULL;
	}
}

static void stop_warm(struct daemon *d)
{
	if (!d->warm)
		return;
	pe_warm_stop(d->warm);
	pthread_join(d->warm_thread, NULL);
	pe_warm_free(d->warm);
	d->warm = NULL;
}

/* A whole small file (PEM) as a NUL-terminated string; NULL with err naming key on failure. */
static char *read_pem(const char *path, const char *key, struct pe_err *err)
{
	FILE *f = fopen(path, "rb");
	char *buf = f ? malloc(1 << 20) : NULL;
	size_t n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
	if (f)
		fclose(f);
	if (!buf || n == 0 || n == (1 << 20) - 1) {
		free(buf);
		pe_err_set(err, PE_EINVAL, key, "config: %s: cannot read %.200s", key, path);
		return NULL;
	}
	buf[n] = 0;
	return buf;
}

static int load_tls(struct daemon *d, struct pe_err *err)
{
	const struct pe_config *c = &d->cfg;
	if (!c->tls_cert[0] && !c->tls_key[0])
		return 0;
	if (!c->tls_cert[0] || !c->tls_key[0])
		return pe_err_set(err, PE_EINVAL, c->tls_cert[0] ? "tls_key" : "tls_cert",
				  "config: tls_cert and tls_key must be given together");
	d->tls_cert = read_pem(c->tls_cert, "tls_cert", err);
	d->tls_key = d->tls_cert ? read_pem(c->tls_key, "tls_key", err) : NULL;
	return d->tls_key ? 0 : PE_EINVAL;
}

static struct pe_http *start_http(struct daemon *d, struct pe_err *err)
{
	const struct pe_config *c = &d->cfg;
#define STATIC(p, m, sym, rt) (struct pe_http_static){p, m, sym, PE_ASSET_LEN(sym), rt}
	struct pe_http_static *statics = d->statics; /* lives as long as the daemon */
	statics[0] = STATIC("/openapi.yaml", "application/yaml", pe_asset_openapi_yaml, PE_ROUTE_OPENAPI);
	statics[1] = STATIC("/", "text/html; charset=utf-8", pe_asset_dashboard_html, PE_ROUTE_DASHBOARD);
	statics[2] = STATIC("/dashboard/style.css", "text/css; charset=utf-8", pe_asset_dashboard_css, PE_ROUTE_DASHBOARD);
	statics[3] = STATIC("/dashboard/app.js", "text/javascript; charset=utf-8", pe_asset_dashboard_js,
			    PE_ROUTE_DASHBOARD);
#define DASHBOARD_JS(i, name)                                                                          \
	statics[i] = STATIC("/dashboard/" #name ".js", "text/javascript; charset=utf-8",                   \
			    pe_asset_dashboard_##name##_js, PE_ROUTE_DASHBOARD)
	DASHBOARD_JS(4, api);
	DASHBOARD_JS(5, controls);
	DASHBOARD_JS(6, colormap);
	DASHBOARD_JS(7, heatmap);
	DASHBOARD_JS(8, charts);
	DASHBOARD_JS(9, snippets);
	DASHBOARD_JS(10, mrope);
	DASHBOARD_JS(11, order);
	DASHBOARD_JS(12, plan);
	DASHBOARD_JS(13, axial);
	DASHBOARD_JS(14, view);
#undef DASHBOARD_JS
#undef STATIC
	struct pe_http_options o = {
		.bind = c->bind,
		.port = (uint16_t)c->port,
		.max_elements = (uint64_t)c->max_elements,
		.max_analysis_cost = (uint64_t)c->max_analysis_cost,
		.max_body_bytes = (uint64_t)c->max_body_bytes,
		.max_header_bytes = (size_t)c->max_header_bytes,
		.max_response_bytes = (uint64_t)c->max_elements * 32 + (1u << 20),
		.max_connections = (unsigned)c->max_connections,
		.max_connections_per_ip = (unsigned)c->max_connections_per_ip,
		.connection_timeout_s = (unsigned)c->connection_timeout,
		.linger_bytes = (uint64_t)c->linger_bytes,
		.linger_timeout_s = (unsigned)c->linger_timeout,
		.job_timeout_s = (unsigned)c->job_timeout,
		.inline_max_us = (unsigned)c->inline_max_us,
		.http_threads = (unsigned)c->http_threads,
		.cors_origins = c->cors_origins,
		.tls_cert_pem = d->tls_cert,
		.tls_key_pem = d->tls_key,
		.statics = statics,
		.nstatics = sizeof d->statics / sizeof d->statics[0],
		.cache = d->cache,
		.budget = d->budget,
		.warm = d->warm,
		.store = d->store,
		.parallel = pe_pool_parallel_hook(d->pool),
		.auth_token = c->auth_token,
		.hooks = {.ctx = d, .submit = submit_hook, .submit_heavy = submit_heavy_hook, .ran_inline = ran_inline_hook, .observe = observe_hook, .render_metrics = render_hook,
			  .http_thread_started = http_thread_hook},
	};
	return pe_http_start(&o, err);
}

/* Every signal is taken by sigwait in the main thread (blocked everywhere else), so no signal's
 * default action ends posencd undrained. SIGTERM, SIGINT and SIGQUIT (the graceful stop of some
 * supervisors and images, and Ctrl-\) drain; all the others are logged and otherwise ignored:
 * operators, supervisors and stray scripts send SIGHUP, SIGUSR1/2 to "reload" or "dump", resource
 * limits SIGXCPU/SIGXFSZ (a write past RLIMIT_FSIZE then fails with EFBIG instead), job control
 * SIGTSTP/SIGTTIN/SIGTTOU (which would stop it), real-time signals... Left alone:
 *   - the fault signals SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT, which must keep crashing loudly
 *     (a synchronous SIGTRAP or SIGSYS, from a breakpoint or seccomp, is forced by the kernel and
 *     kills anyway; only one sent from outside is ignored);
 *   - SIGPIPE, ignored outright (a peer gone while we write; it is thread-directed);
 *   - SIGKILL and SIGSTOP, which nothing can catch;
 *   - glibc's internal signals (32 and 33, below SIGRTMIN), which sigaddset refuses: see
 *     ignore_internal_signals. */
static const int fault_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

static int stops(int sig) { return sig == SIGTERM || sig == SIGINT || sig == SIGQUIT; }

static void wanted_signals(sigset_t *set)
{
	sigfillset(set); /* glibc leaves its internal signals out */
	for (size_t i = 0; i < sizeof fault_signals / sizeof fault_signals[0]; i++)
		sigdelset(set, fault_signals[i]);
	sigdelset(set, SIGPIPE);
	sigdelset(set, SIGKILL);
	sigdelset(set, SIGSTOP);
}

/* "HUP", "TERM"; real-time signals as bash's kill -l names them: "RTMIN", "RTMIN+3" in the lower
 * half, "RTMAX-3", "RTMAX" in the upper. */
static const char *signal_name(int sig, char *buf, size_t cap)
{
	const char *abbrev = sig < SIGRTMIN ? sigabbrev_np(sig) : NULL;
	if (abbrev)
		return abbrev;
	if (sig == SIGRTMIN)
		return "RTMIN";
	if (sig == SIGRTMAX)
		return "RTMAX";
	if (sig < SIGRTMIN || sig > SIGRTMAX)
		snprintf(buf, cap, "%d", sig);
	else if (sig - SIGRTMIN <= (SIGRTMAX - SIGRTMIN) / 2)
		snprintf(buf, cap, "RTMIN+%d", sig - SIGRTMIN);
	else
		snprintf(buf, cap, "RTMAX-%d", SIGRTMAX - sig);
	return buf;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Wait for a signal that stops posencd; the others that come meanwhile are logged, each signal
 * at most once a second: a flood of one (a script's `kill` in a loop; real-time signals queue, a
 * million of them is a million sigwaits) would otherwise write a line each. A line after a quiet
 * spell says how many of that signal came unlogged since the last ("unlogged", when any did). */
static int wait_for_signal(void)
{
	sigset_t set;
	wanted_signals(&set);
	static double last[_NSIG];
	static unsigned long long unlogged[_NSIG];
	for (;;) {
		int sig;
		char buf[16];
		if (sigwait(&set, &sig) != 0)
			continue;
		if (stops(sig))
			return sig;
		if (sig < 1 || sig >= _NSIG)
			continue;
		double now = now_s();
		if (last[sig] > 0 && now - last[sig] < 1.0) {
			unlogged[sig]++;
			continue;
		}
		json_t *o = json_pack("{s:s, s:s}", "signal", signal_name(sig, buf, sizeof buf), "action", "ignored");
		if (o && unlogged[sig])
			json_object_set_new(o, "unlogged", json_integer((json_int_t)unlogged[sig]));
		pe_log(PE_LOG_INFO, "signal", o);
		last[sig] = now;
		unlogged[sig] = 0;
	}
}

/* glibc keeps signals 32 and 33 (SIGCANCEL, SIGSETXID) for itself and refuses them to sigaction
 * and sigprocmask, installing its handlers when it first needs them (pthread_cancel, setuid in a
 * threaded process). Until then their default action is to terminate, so `kill -32` would end
 * posencd: any of them still at SIG_DFL is set to SIG_IGN with the system call itself. glibc
 * installs its own handler over that if it ever needs one. The kernel's struct is written out
 * for x86-64 and arm64 (handler first; flags, restorer and mask zero for SIG_IGN). */
static void ignore_internal_signals(void)
{
#if defined(SYS_rt_sigaction) && (defined(__x86_64__) || defined(__aarch64__))
	for (int sig = 1; sig < SIGRTMIN; sig++) {
		sigset_t probe;
		sigemptyset(&probe);
		if (sigaddset(&probe, sig) == 0)
			continue; /* an ordinary signal: wanted_signals has it (or leaves it alone) */
		struct {
			void (*handler)(int);
			unsigned long flags;
			void (*restorer)(void);
			unsigned long mask[2];
		} cur = {0}, ign = {.handler = SIG_IGN};
		if (syscall(SYS_rt_sigaction, sig, NULL, &cur, _NSIG / 8) == 0 && cur.handler == SIG_DFL)
			syscall(SYS_rt_sigaction, sig, &ign, NULL, _NSIG / 8);
	}
#endif
}

static void block_signals(void)
{
	sigset_t set;
	wanted_signals(&set);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	ignore_internal_signals();
}

/* Wait (bounded by shutdown_timeout) until no computation is queued or running and every request
 * begun has been answered in full. Returns 1 if work was still under way at the deadline. */
static int drain(struct daemon *d, struct pe_http *h, double deadline)
{
	for (;;) {
		struct pe_pool_stats ps;
		pe_pool_stats(d->pool, &ps);
		if (ps.queued == 0 && ps.running == 0 && pe_http_active(h) == 0)
			return 0;
		if (now_s() > deadline)
			return 1;
		usleep(10000);
	}
}

/* After shutdown_timeout every computation is told to stop (running kernels at their next check
 * between blocks, queued jobs as they start) and the waiting requests are answered 503; the pool
 * then empties in moments. Work that cannot be stopped (a long encoding) gets ABANDON_GRACE_S more
 * seconds before the process exits without it, so SIGTERM always ends within shutdown_timeout
 * plus that grace. */
#define ABANDON_GRACE_S 3

static struct pe_pool_stats abandoned; /* the pool at shutdown_timeout, for the watchdog's line */

/* The pool may be freed while this sleeps (the main thread goes on when the workers return within
 * the grace), so it logs what stop_work saw, never the pool itself (ThreadSanitizer: a read of the
 * freed pool in test_sigterm). */
static void *abandon_watchdog(void *arg)
{
	(void)arg;
	sleep(ABANDON_GRACE_S);
	pe_log(PE_LOG_WARN, "stop", json_pack("{s:s, s:I, s:I}", "detail", "work abandoned after shutdown_timeout",
					      "running", (json_int_t)abandoned.running, "queued", (json_int_t)abandoned.queued));
	pe_log_flush();
	_exit(0);
	return NULL;
}

static void stop_work(struct daemon *d, struct pe_http *h, int overdue)
{
	if (overdue) {
		struct pe_pool_stats ps;
		pe_pool_stats(d->pool, &ps);
		pe_log(PE_LOG_WARN, "shutdown_timeout",
		       json_pack("{s:I, s:I}", "running", (json_int_t)ps.running, "queued", (json_int_t)ps.queued));
		pe_cancel_all();
		abandoned = ps;
		pthread_t t;
		if (pthread_create(&t, NULL, abandon_watchdog, NULL) == 0)
			pthread_detach(t);
	}
	pe_http_tick(h, 1);
	pe_pool_stop(d->pool); /* freed after the HTTP threads stop: they note every answer on it */
}

/* Everything main made but the HTTP server, in order, each thread joined before what it uses is
 * freed: the pool's ticker first (it ticks with the daemon), the reserve after the cache (the
 * cache's last bodies are given to it), the budget after both (their last bytes give back to it). */
static void release(struct daemon *d)
{
	pe_pool_free(d->pool);
	pe_cache_free(d->cache);
	stop_warm(d);
	pe_budget_free(d->budget);
	pe_store_close(d->store);
	pe_metrics_free(d->metrics);
	free(d->tls_cert);
	free(d->tls_key);
}

/* The store's findings (quarantined or foreign files in data_dir; the database down, up again)
 * as warnings, "store_up" as information. */
static void store_log(void *arg, const char *event, const char *file, const char *detail)
{
	pe_log(strcmp(event, "store_up") ? PE_LOG_WARN : PE_LOG_INFO, event,
	       json_pack("{s:s, s:s}", "file", file, "detail", detail));
}

/* At most this many database connections for reads and writes: half the workers (at least one,
 * at most 8), so a database that stops answering holds at most half of them until the operation
 * timeout while the others keep computing tables. */
static unsigned store_conns(const struct pe_config *c)
{
	int64_t n = c->workers / 2;
	return n < 1 ? 1 : n > 8 ? 8 : (unsigned)n;
}

/* The store's options from the configuration. A database operation's deadline is 10 s, or three
 * quarters of job_timeout when that is shorter: the store answers (503 store-unavailable, with
 * its reason) before the request's job_timeout would answer for it, so one deadline decides a
 * learned read's or write's outcome. */
static struct pe_store_options store_options(const struct pe_config *c)
{
	return (struct pe_store_options){.dir = c->data_dir, .max_bytes = (uint64_t)c->store_max_bytes,
					 .max_table_bytes = (uint64_t)c->max_table_bytes,
					 .quarantine_max_bytes = (uint64_t)c->quarantine_max_bytes,
					 .quarantine_max_files = PE_STORE_QUARANTINE_FILES, .log = store_log,
					 .url = c->store_url, .max_conns = store_conns(c),
					 .op_timeout_ms = c->job_timeout < 13 ? (unsigned)c->job_timeout * 750u : 10000u};
}

/* posencd --init-store: make the store ready (PostgreSQL: create its tables when missing, which
 * needs CREATE on the schema; file: data_dir), say what holds, exit: 0, or 1 when it cannot. */
static int init_store(const struct pe_config *c)
{
	struct pe_store_options o = store_options(c);
	struct pe_err err = {0};
	int rc = pe_store_init(&o, &err);
	fprintf(stderr, "posencd: %s\n", err.detail[0] ? err.detail : rc ? "cannot make the store ready"
									 : "the store is ready");
	return rc == 0 ? 0 : rc == PE_EINVAL ? 2 : 1;
}

/* Take "--init-store" out of argv (the configuration does not know it): 1 when it was there. */
static int take_init_store(int *argc, char **argv)
{
	int found = 0, k = 1;
	for (int i = 1; i < *argc; i++) {
		if (!strcmp(argv[i], "--init-store"))
			found = 1;
		else
			argv[k++] = argv[i];
	}
	argv[k] = NULL;
	*argc = k;
	return found;
}

/* Open the store store_url names (file: creates and scans data_dir); NULL with err filled if it
 * cannot be used. The URI is never logged (it may hold a password). */
static struct pe_store *open_store(const struct pe_config *c, struct pe_err *err)
{
	struct pe_store_options o = store_options(c);
	struct pe_store *s = pe_store_open(&o, err);
	struct pe_store_stats st;
	if (s) {
		pe_store_stats(s, &st);
		pe_log(PE_LOG_INFO, "store", json_pack("{s:s, s:s, s:b, s:I, s:I}", "kind", st.remote ? "postgresql" : "file",
						       "data_dir", st.remote ? "" : c->data_dir, "up", st.up, "tables",
						       (json_int_t)st.tables, "bytes", (json_int_t)st.bytes));
	}
	return s;
}

static void log_start(const struct daemon *d, uint16_t port)
{
	pe_log(PE_LOG_INFO, "start",
	       json_pack("{s:s, s:s, s:i, s:I, s:I, s:I, s:I, s:I, s:s, s:b}", "version", PE_VERSION, "bind",
			 d->cfg.bind, "port", (int)port, "workers", (json_int_t)d->cfg.workers, "http_threads",
			 (json_int_t)d->cfg.http_threads, "cpus", (json_int_t)d->cpus, "cpu_quota",
			 (json_int_t)d->quota_cpus, "cache_bytes", (json_int_t)d->cfg.cache_bytes, "isa",
			 pe_isa_name(), "tls", d->tls_cert != NULL));
}

/* The text of file at dir/path/name, at most n - 1 bytes (out[0] = 0 when it cannot be read). */
static void read_small(const char *dir, const char *path, const char *name, char *out, size_t n)
{
	char file[4096 + 128];
	snprintf(file, sizeof file, "%s%s/%s", dir, path, name);
	FILE *f = fopen(file, "r");
	size_t got = f ? fread(out, 1, n - 1, f) : 0;
	out[got] = 0;
	if (f)
		fclose(f);
}

/* The CPUs this process's cgroup may use by its CPU quota (pe_config_quota_cpus), 0 for none:
 * cgroup v2's cpu.max, else v1's cfs quota and period, found through /proc/self/cgroup. A container
 * limited to 2 CPUs on a 64-CPU host sees all 64 in its affinity. */
static unsigned cgroup_quota_cpus(void)
{
	char line[4200], text[128], quota[64], period[64];
	unsigned cpus = 0;
	FILE *f = fopen("/proc/self/cgroup", "r");
	while (f && !cpus && fgets(line, sizeof line, f)) {
		char *path = strchr(line, ':'), *ctrl = path ? path + 1 : NULL;
		path = ctrl ? strchr(ctrl, ':') : NULL;
		if (!path)
			continue;
		*path++ = 0;
		path[strcspn(path, "\n")] = 0;
		if (!strcmp(line, "0") && !*ctrl) { /* "0::/path": the unified (v2) hierarchy */
			read_small("/sys/fs/cgroup", path, "cpu.max", text, sizeof text);
		} else if (!strcmp(ctrl, "cpu") || !strncmp(ctrl, "cpu,", 4)) {
			char dir[64];
			snprintf(dir, sizeof dir, "/sys/fs/cgroup/%s", ctrl);
			read_small(dir, path, "cpu.cfs_quota_us", quota, sizeof quota);
			read_small(dir, path, "cpu.cfs_period_us", period, sizeof period);
			snprintf(text, sizeof text, "%s %s", quota, period);
		} else {
			continue;
		}
		cpus = pe_config_quota_cpus(text);
	}
	if (f)
		fclose(f);
	return cpus;
}

/* http_threads 0: one HTTP thread for every two CPUs the daemon may use (its affinity, within its
 * cgroup's quota), at least one: on two CPUs, two HTTP threads beside a worker queue behind each
 * other (the mixed load's small-request p99 is lower with one, and one serves small tables as fast
 * as two). With more CPUs, more threads: each is an epoll loop of its own. */
static void resolve_http_threads(struct daemon *d)
{
	cpu_set_t allowed;
	d->cpus = sched_getaffinity(0, sizeof allowed, &allowed) == 0 ? (unsigned)CPU_COUNT(&allowed) : 0;
	d->quota_cpus = cgroup_quota_cpus();
	if (d->cfg.http_threads == 0)
		d->cfg.http_threads = pe_config_auto_http_threads(d->cpus, d->quota_cpus);
}

int main(int argc, char **argv)
{
	struct daemon d = {0};
	struct pe_err err = {0};
	/* First: every signal but the fault ones blocked (sigwait takes them once serving), so a
	 * SIGHUP during start-up is not fatal. */
	block_signals();
	if (pe_isa_check_env(&err) != 0) { /* a forced kernel set the CPU cannot run: refuse, never guess */
		fprintf(stderr, "posencd: %s\n", err.detail);
		return 2;
	}
	int init = take_init_store(&argc, argv);
	int rc = pe_config_load(&d.cfg, argc, argv, NULL, &err);
	if (rc == 1)
		return 0;
	if (rc != 0) {
		fprintf(stderr, "posencd: %s\n", err.detail);
		return 2;
	}
	pe_log_set_level(d.cfg.log_level);
	if (init)
		return init_store(&d.cfg);
	resolve_http_threads(&d);
	/* Response bodies come and go in sizes glibc would start serving from the heap after its
	 * first big free (its mmap threshold adapts upward), leaving holes that are never returned:
	 * keep anything from 128 KiB in its own mapping so evicted tables give their memory back. */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	/* An arena for each thread that allocates per request (the HTTP threads, the workers, the loop
	 * and the ticker): with one arena for all, HTTP threads making ~55 allocations per small miss
	 * queue on its lock (a shared arena costs ~13% of small-miss throughput on two CPUs). What an
	 * arena frees only its thread reuses: docs/architecture.md, Memory. */
	mallopt(M_ARENA_MAX, (int)(d.cfg.http_threads + d.cfg.workers + 2));
	mallopt(M_TOP_PAD, 1 << 20);
	if (load_tls(&d, &err) != 0) {
		fprintf(stderr, "posencd: %s\n", err.detail);
		release(&d);
		return 2;
	}
	if (!(d.store = open_store(&d.cfg, &err))) {
		fprintf(stderr, "posencd: %s\n", err.detail);
		release(&d);
		return err.code == PE_EINVAL ? 2 : 1;
	}
	d.cache = pe_cache_new((size_t)d.cfg.cache_bytes);
	d.budget = pe_budget_new((size_t)d.cfg.response_budget_bytes);
	if (d.cache)
		pe_cache_set_budget(d.cache, d.budget);
	d.metrics = pe_metrics_new();
	if (d.metrics)
		pe_metrics_set_store(d.metrics, d.store);
	start_warm(&d); /* before the pool: its ticker reads d.warm, set before the ticker starts */
	d.pool = d.cache && d.budget && d.metrics
			 ? pe_pool_new((unsigned)d.cfg.workers, (size_t)d.cfg.max_queue, tick, &d, 250, &err)
			 : NULL;
	if (d.pool) {
		pe_pool_set_sched(d.pool, (int)d.cfg.worker_nice, (unsigned)d.cfg.worker_slice_us);
		pe_pool_reserve_cpus(d.pool, (unsigned)d.cfg.reserve_cpus);
	}
	struct pe_http *h = d.pool ? start_http(&d, &err) : NULL;
	if (!h) {
		fprintf(stderr, "posencd: %s\n", err.detail[0] ? err.detail : "cannot start");
		release(&d); /* the pool's ticker ticks with &d, which ends with main */
		return 1;
	}
	atomic_store(&d.http, h);
	log_start(&d, pe_http_port(h));
	int sig = wait_for_signal();
	char name[16];
	snprintf(name, sizeof name, "SIG%s", sigabbrev_np(sig));
	pe_log(PE_LOG_INFO, "draining", json_pack("{s:s}", "signal", name));
	double deadline = now_s() + (double)d.cfg.shutdown_timeout;
	pe_http_drain(h);
	pe_pool_close(d.pool);
	stop_work(&d, h, drain(&d, h, deadline));
	atomic_store(&d.http, NULL);
	pe_http_stop(h);
	release(&d);
	pe_log(PE_LOG_INFO, "stop", NULL);
	return 0;
}
