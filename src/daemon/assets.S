/* Files embedded in posencd at build time (the default configuration and the OpenAPI document),
 * so the daemon runs from its binary alone. Declared in assets.h; each blob is NUL-terminated. */
#define ASSET(sym, file)                 \
	.global sym;                     \
	.global sym##_end;               \
	.balign 16;                      \
sym:                                     \
	.incbin file;                    \
sym##_end:                               \
	.byte 0

	.section .rodata
ASSET(pe_asset_config_json, "config/posenc.json")
ASSET(pe_asset_openapi_yaml, "openapi.yaml")
ASSET(pe_asset_dashboard_html, "src/dashboard/index.html")
ASSET(pe_asset_dashboard_css, "src/dashboard/style.css")
ASSET(pe_asset_dashboard_js, "src/dashboard/app.js")
ASSET(pe_asset_dashboard_api_js, "src/dashboard/api.js")
ASSET(pe_asset_dashboard_controls_js, "src/dashboard/controls.js")
ASSET(pe_asset_dashboard_colormap_js, "src/dashboard/colormap.js")
ASSET(pe_asset_dashboard_heatmap_js, "src/dashboard/heatmap.js")
ASSET(pe_asset_dashboard_charts_js, "src/dashboard/charts.js")
ASSET(pe_asset_dashboard_snippets_js, "src/dashboard/snippets.js")
ASSET(pe_asset_dashboard_mrope_js, "src/dashboard/mrope.js")
ASSET(pe_asset_dashboard_order_js, "src/dashboard/order.js")
ASSET(pe_asset_dashboard_plan_js, "src/dashboard/plan.js")
ASSET(pe_asset_dashboard_axial_js, "src/dashboard/axial.js")
ASSET(pe_asset_dashboard_view_js, "src/dashboard/view.js")
	.section .note.GNU-stack,"",@progbits
