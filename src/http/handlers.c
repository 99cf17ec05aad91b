/* The handlers the server registers, in the order the router tries them: the first whose
 * match_cb claims a URL serves it. A new endpoint family is one more line here (handler.h). */
#include "http/handler.h"

extern const struct pe_handler pe_static_handler, pe_ops_handler, pe_learned_handler, pe_transform_handler,
	pe_order_handler, pe_analysis_handler, pe_mrope_handler, pe_table_handler, pe_plan_handler,
	pe_axial_handler;

const struct pe_handler *const pe_http_handlers[] = {
	&pe_static_handler,    /* static_files.c: /openapi.yaml, the dashboard */
	&pe_ops_handler,       /* ops.c: /healthz /readyz /metrics /v1 */
	&pe_learned_handler,   /* learned.c: /v1/learned[/{name}] */
	&pe_plan_handler,      /* plan.c: POST /v1/plan */
	&pe_transform_handler, /* transform.c: POST /v1/<transform> */
	&pe_order_handler,     /* order.c: /v1/analysis/order (GET, POST) */
	&pe_analysis_handler,  /* analysis.c: /v1/analysis/... */
	&pe_mrope_handler,     /* mrope.c: /v1/rope/mrope (GET as a table, POST positions) */
	&pe_axial_handler,     /* axial.c: /v1/rope/axial (GET as a table, POST ids) */
	&pe_table_handler,     /* table.c: /v1/<table> */
};
const size_t pe_http_nhandlers = sizeof pe_http_handlers / sizeof pe_http_handlers[0];
