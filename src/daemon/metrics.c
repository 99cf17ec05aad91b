/* Prometheus metrics (see metrics.h). Statuses are counted in a fixed table of the codes this
 * service answers with (anything else lands in "other"), so observe never allocates: those of
 * the error table (include/posenc/err.h, every problem+json answer) and the few that are not
 * errors. */
#include "daemon/metrics.h"

#include <stdatomic.h>
#include <stdlib.h>

/* Success and 499 (the client went away first), then every error's; repeats are counted in the
 * first slot of their status. */
static const int statuses[] = {
	200, 201, 204, 304, 499,
#define PE_METRICS_STATUS_(name, status, slug, title) status,
	PE_ERRNO_MAP(PE_METRICS_STATUS_)
#undef PE_METRICS_STATUS_
};
#define NSTATUS (sizeof statuses / sizeof statuses[0] + 1) /* + other */
static const double bounds[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
				0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
#define NBUCKET (sizeof bounds / sizeof bounds[0])

struct route_hist {
	atomic_uint_fast64_t bucket[NBUCKET + 1]; /* per bound, then +Inf (not cumulative) */
	atomic_uint_fast64_t count;
	_Atomic double sum;
};

struct pe_metrics {
	atomic_uint_fast64_t requests[PE_ROUTE_MAX][NSTATUS];
	struct route_hist hist[PE_ROUTE_MAX];
	struct pe_store *store; /* set once before serving; NULL: no store rows */
};

void pe_metrics_set_store(struct pe_metrics *m, struct pe_store *store) { m->store = store; }


struct pe_metrics *pe_metrics_new(void) { return calloc(1, sizeof(struct pe_metrics)); }

void pe_metrics_free(struct pe_metrics *m) { free(m); }

static size_t status_slot(int status)
{
	for (size_t i = 0; i < NSTATUS - 1; i++)
		if (statuses[i] == status)
			return i;
	return NSTATUS - 1;
}

/* The slots in the order of their status (other last), each status once: rendered in that order. */
static size_t sorted_slots(size_t order[NSTATUS])
{
	size_t n = 0;
	for (int status = 100; status < 600; status++) {
		size_t s = status_slot(status);
		if (s < NSTATUS - 1)
			order[n++] = s;
	}
	order[n++] = NSTATUS - 1;
	return n;
}

static void add_double(_Atomic double *a, double v)
{
	double old = atomic_load(a);
	while (!atomic_compare_exchange_weak(a, &old, old + v))
		;
}

void pe_metrics_observe(struct pe_metrics *m, const struct pe_http_request_info *info)
{
	int route = info->route >= 0 && info->route < PE_ROUTE_MAX ? info->route : PE_ROUTE_OTHER;
	atomic_fetch_add(&m->requests[route][status_slot(info->status)], 1);
	struct route_hist *h = &m->hist[route];
	size_t b = 0;
	while (b < NBUCKET && info->seconds > bounds[b])
		b++;
	atomic_fetch_add(&h->bucket[b], 1);
	atomic_fetch_add(&h->count, 1);
	add_double(&h->sum, info->seconds);
}

static int render_requests(struct pe_metrics *m, struct pe_buf *out)
{
	int rc = pe_buf_puts(out, "# HELP posenc_requests_total HTTP requests answered, by route and status.\n"
				  "# TYPE posenc_requests_total counter\n");
	size_t order[NSTATUS], nslots = sorted_slots(order);
	for (int r = 0; r < PE_ROUTE_MAX && rc == 0; r++)
		for (size_t k = 0; k < nslots && rc == 0; k++) {
			size_t s = order[k];
			uint64_t n = atomic_load(&m->requests[r][s]);
			if (!n)
				continue;
			if (s < NSTATUS - 1)
				rc = pe_buf_printf(out, "posenc_requests_total{route=\"%s\",status=\"%d\"} %llu\n",
						   pe_http_route_name(r), statuses[s], (unsigned long long)n);
			else
				rc = pe_buf_printf(out, "posenc_requests_total{route=\"%s\",status=\"other\"} %llu\n",
						   pe_http_route_name(r), (unsigned long long)n);
		}
	return rc;
}

static int render_histogram(struct pe_metrics *m, struct pe_buf *out)
{
	int rc = pe_buf_puts(out, "# HELP posenc_request_duration_seconds Time from request to response queued.\n"
				  "# TYPE posenc_request_duration_seconds histogram\n");
	for (int r = 0; r < PE_ROUTE_MAX && rc == 0; r++) {
		struct route_hist *h = &m->hist[r];
		uint64_t count = atomic_load(&h->count), cum = 0;
		if (!count)
			continue;
		const char *name = pe_http_route_name(r);
		for (size_t b = 0; b < NBUCKET && rc == 0; b++) {
			cum += atomic_load(&h->bucket[b]);
			rc = pe_buf_printf(out, "posenc_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} %llu\n",
					   name, bounds[b], (unsigned long long)cum);
		}
		cum += atomic_load(&h->bucket[NBUCKET]);
		if (rc == 0)
			rc = pe_buf_printf(out,
					   "posenc_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n"
					   "posenc_request_duration_seconds_sum{route=\"%s\"} %.9g\n"
					   "posenc_request_duration_seconds_count{route=\"%s\"} %llu\n",
					   name, (unsigned long long)cum, name, atomic_load(&h->sum), name,
					   (unsigned long long)count);
	}
	return rc;
}

/* A metric of one value: its name, type, help text and value. */
struct row {
	const char *name, *type, *help;
	double v;
};

static int render_rows(struct pe_buf *out, const struct row *rows, size_t n)
{
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = pe_buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", rows[i].name, rows[i].help, rows[i].name,
				   rows[i].type, rows[i].name, rows[i].v);
	return rc;
}

/* The learned-table store: its tables and its quarantine (bounded, see store.h). */
static int render_store(struct pe_metrics *m, struct pe_buf *out)
{
	struct pe_store_stats s;
	if (!m->store)
		return 0;
	pe_store_stats(m->store, &s);
	const struct row rows[] = {
		{"posenc_store_tables", "gauge", "Learned tables stored.", (double)s.tables},
		{"posenc_store_bytes", "gauge", "Bytes of the learned tables' elements (store_max_bytes bounds them).", (double)s.bytes},
		{"posenc_store_quarantine_files", "gauge", "Files in data_dir/quarantine/.", (double)s.quarantine_files},
		{"posenc_store_quarantine_bytes", "gauge", "Bytes in data_dir/quarantine/ (quarantine_max_bytes bounds them).", (double)s.quarantine_bytes},
		{"posenc_store_quarantined_total", "counter", "Damaged or leftover files quarantined (or deleted) since start.", (double)s.quarantined_total},
		{"posenc_store_quarantine_dropped_total", "counter", "Old quarantined files deleted to make room since start.", (double)s.quarantine_dropped_total},
		{"posenc_store_remote", "gauge", "1: learned tables live in PostgreSQL (store_url postgresql://); 0: in data_dir.", (double)s.remote},
		{"posenc_store_up", "gauge", "1 when the store can be reached (always, for file:); 0 while the database is down.", (double)s.up},
		{"posenc_store_reconnects_total", "counter", "Connections to the database re-established after a loss since start.", (double)s.reconnects_total},
		{"posenc_store_notifications_total", "counter", "Changes learned from the database's notifications (every replica's writes) since start.", (double)s.notifications_total},
		{"posenc_store_unavailable_total", "counter", "Store operations answered 503 because the database could not be reached.", (double)s.unavailable_total},
	};
	return render_rows(out, rows, sizeof rows / sizeof rows[0]);
}

int pe_metrics_render(struct pe_metrics *m, struct pe_cache *cache, struct pe_pool *pool, struct pe_buf *out)
{
	int rc = render_requests(m, out);
	if (rc == 0)
		rc = render_histogram(m, out);
	struct pe_cache_stats cs = {0};
	struct pe_pool_stats ps = {0};
	if (cache)
		pe_cache_stats(cache, &cs);
	if (pool)
		pe_pool_stats(pool, &ps);
	const struct row rows[] = {
		{"posenc_cache_hits_total", "counter", "Cache lookups answered from the cache.", (double)cs.hits},
		{"posenc_cache_misses_total", "counter", "Cache lookups that started a computation.", (double)cs.misses},
		{"posenc_cache_joins_total", "counter", "Requests that joined a computation already under way.", (double)cs.joins},
		{"posenc_cache_evictions_total", "counter", "Entries evicted to stay within cache_bytes.", (double)cs.evictions},
		{"posenc_cache_bytes", "gauge", "Bytes held by the cache.", (double)cs.bytes},
		{"posenc_cache_entries", "gauge", "Entries held by the cache.", (double)cs.entries},
		{"posenc_jobs_total", "counter", "Computations accepted by the worker pool or run inline on the HTTP thread.", (double)ps.submitted},
		{"posenc_jobs_inline_total", "counter", "Computations small enough to run on the HTTP thread (counted in posenc_jobs_total too).", (double)ps.inlined},
		{"posenc_jobs_rejected_total", "counter", "Computations refused because the queue was full.", (double)ps.rejected},
		{"posenc_queue_depth", "gauge", "Computations waiting for a worker.", (double)ps.queued},
		{"posenc_jobs_in_flight", "gauge", "Computations running on a worker.", (double)ps.running},
	};
	if (rc == 0)
		rc = render_rows(out, rows, sizeof rows / sizeof rows[0]);
	return rc ? rc : render_store(m, out);
}

int pe_metrics_render_warm(struct pe_warm *w, struct pe_buf *out)
{
	struct pe_warm_stats s = {0};
	if (w)
		pe_warm_stats(w, &s);
	const struct row rows[] = {
		{"posenc_warm_bytes", "gauge",
		 "Bytes the warm reserve holds for the next large answers, written or being written (warm_bytes bounds them).",
		 (double)s.bytes},
		{"posenc_warm_blocks", "gauge", "Warm blocks written and ready for the next large answers.", (double)s.blocks},
		{"posenc_warm_hits_total", "counter", "Answers of 2 MiB or more written into memory from the warm reserve.", (double)s.hits},
		{"posenc_warm_misses_total", "counter", "Answers of 2 MiB or more (within warm_bytes) that found no warm block to fit.",
		 (double)s.misses},
		{"posenc_warm_recycled_total", "counter",
		 "Blocks of 2 MiB or more that answers were done with (sent, or evicted from the cache), kept written for the next.",
		 (double)s.recycled},
		{"posenc_warm_dropped_total", "counter",
		 "Warm blocks given back to the system unused: idle for warm_idle, or making room for other answers' blocks.",
		 (double)s.dropped},
		{"posenc_warm_stale_after", "gauge",
		 "Takes in a row that pass over a warm block too large for them before it may make room for them, as learnt.",
		 (double)s.stale_after},
	};
	return render_rows(out, rows, sizeof rows / sizeof rows[0]);
}

int pe_metrics_render_budget(const struct pe_budget *b, struct pe_buf *out)
{
	struct pe_budget_stats s;
	pe_budget_stats(b, &s);
	const struct row rows[] = {
		{"posenc_response_budget_bytes", "gauge", "Bytes of responses being built or sent, outside the cache's count.",
		 (double)s.used},
		{"posenc_response_budget_limit_bytes", "gauge", "response_budget_bytes.", (double)s.limit},
		{"posenc_response_budget_refused_total", "counter",
		 "Reservations refused because the response budget was full (answered 503).", (double)s.refused},
	};
	return render_rows(out, rows, sizeof rows / sizeof rows[0]);
}
