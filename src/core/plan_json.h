/* Internal to the model plans (plan*.c): a small JSON tree for a model's config.json.
 *
 * The plan lives in core (pure: bytes in, a struct out) and the CLI links libposenc without
 * jansson, so the config is read by this reader and not by jansson. It keeps what a plan needs:
 * objects, arrays, strings (unescaped; well-formed UTF-8 or refused), numbers as doubles, booleans and null. Depth and
 * node count are bounded (PE_JSON_MAX_DEPTH, PE_JSON_MAX_NODES) before memory grows past them;
 * a duplicate key in an object is an error (which of two values a model means is not ours to
 * guess). One allocation per node; pe_json_free frees the tree. Thread-safe (no shared state). */
#ifndef PE_CORE_PLAN_JSON_H
#define PE_CORE_PLAN_JSON_H

#include <stddef.h>
#include "posenc/err.h"

#define PE_JSON_MAX_DEPTH 64
#define PE_JSON_MAX_NODES 100000

enum pe_json_type { PE_JSON_NULL, PE_JSON_BOOL, PE_JSON_NUM, PE_JSON_STR, PE_JSON_ARR, PE_JSON_OBJ };

struct pe_json {
	enum pe_json_type type;
	double num;          /* NUM; BOOL as 0/1 */
	char *str;           /* STR, NUL-terminated (a NUL inside is refused) */
	char *key;           /* the member's key inside an object, else NULL */
	struct pe_json *child, *next; /* first element / member; the next sibling */
	size_t n;            /* elements or members */
};

/* Parse exactly one JSON value (surrounding white space allowed). NULL on failure with err
 * (PE_EBODY naming "body" and the byte offset; PE_ETOOBIG past the node or depth bounds;
 * PE_ENOMEM). */
struct pe_json *pe_json_parse(const char *text, size_t len, struct pe_err *err);
void pe_json_free(struct pe_json *v);

/* The member named key of an object (NULL if v is not an object or has no such member). */
const struct pe_json *pe_json_get(const struct pe_json *v, const char *key);

#endif
