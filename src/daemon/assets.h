/* Files embedded at build time by assets.S: [sym, sym_end) are the file's bytes, followed by NUL. */
#ifndef PE_DAEMON_ASSETS_H
#define PE_DAEMON_ASSETS_H

extern const char pe_asset_config_json[], pe_asset_config_json_end[];
extern const char pe_asset_openapi_yaml[], pe_asset_openapi_yaml_end[];
extern const char pe_asset_dashboard_html[], pe_asset_dashboard_html_end[];
extern const char pe_asset_dashboard_css[], pe_asset_dashboard_css_end[];
extern const char pe_asset_dashboard_js[], pe_asset_dashboard_js_end[];
extern const char pe_asset_dashboard_api_js[], pe_asset_dashboard_api_js_end[];
extern const char pe_asset_dashboard_controls_js[], pe_asset_dashboard_controls_js_end[];
extern const char pe_asset_dashboard_colormap_js[], pe_asset_dashboard_colormap_js_end[];
extern const char pe_asset_dashboard_heatmap_js[], pe_asset_dashboard_heatmap_js_end[];
extern const char pe_asset_dashboard_charts_js[], pe_asset_dashboard_charts_js_end[];
extern const char pe_asset_dashboard_snippets_js[], pe_asset_dashboard_snippets_js_end[];
extern const char pe_asset_dashboard_mrope_js[], pe_asset_dashboard_mrope_js_end[];
extern const char pe_asset_dashboard_order_js[], pe_asset_dashboard_order_js_end[];
extern const char pe_asset_dashboard_plan_js[], pe_asset_dashboard_plan_js_end[];
extern const char pe_asset_dashboard_axial_js[], pe_asset_dashboard_axial_js_end[];
extern const char pe_asset_dashboard_view_js[], pe_asset_dashboard_view_js_end[];

#define PE_ASSET_LEN(sym) ((size_t)(sym##_end - sym))

#endif
