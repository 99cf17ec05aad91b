/* Prometheus metrics: request counts by route and status, a latency histogram by route, and the
 * cache and pool gauges read at scrape time. Counters are atomics; observe is lock-free. */
#ifndef PE_DAEMON_METRICS_H
#define PE_DAEMON_METRICS_H

#include "daemon/pool.h"
#include "http/http.h"
#include "posenc/cache.h"
#include "posenc/budget.h"
#include "posenc/warm.h"

struct pe_metrics;

struct pe_metrics *pe_metrics_new(void);
void pe_metrics_free(struct pe_metrics *m);
void pe_metrics_observe(struct pe_metrics *m, const struct pe_http_request_info *info);
/* Prometheus text exposition format 0.0.4 into out. cache and pool may be NULL. */
/* Render the store's gauges too (call before serving; NULL is fine). */
void pe_metrics_set_store(struct pe_metrics *m, struct pe_store *store);
int pe_metrics_render(struct pe_metrics *m, struct pe_cache *cache, struct pe_pool *pool, struct pe_buf *out);
/* The response budget's gauges and refusals (b may be NULL: zeros). */
int pe_metrics_render_budget(const struct pe_budget *b, struct pe_buf *out);
/* The warm reserve's gauges and counters (all 0 without one: w NULL). */
int pe_metrics_render_warm(struct pe_warm *w, struct pe_buf *out);

#endif
