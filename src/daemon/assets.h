/* Files embedded at build time by assets.S: [sym, sym_end) are the file's bytes, followed by NUL. */
#ifndef PE_DAEMON_ASSETS_H
#define PE_DAEMON_ASSETS_H

extern const char pe_asset_config_json[], pe_asset_config_json_end[];
extern const char pe_asset_openapi_yaml[], pe_asset_openapi_yaml_end[];

#define PE_ASSET_LEN(sym) ((size_t)(sym##_end - sym))

#endif
