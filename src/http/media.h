/* Media types as request headers carry them (RFC 9110 §8.3.1): "type/subtype" and parameters
 * "; name=value" where value is a token or a quoted string. Type, subtype and parameter names
 * match case-insensitively; values are returned as written. Pure string functions, so the unit
 * tests (tests/http/test_media_type.c) drive exactly what the server runs. */
#ifndef PE_HTTP_MEDIA_H
#define PE_HTTP_MEDIA_H

#include <stddef.h>

/* The position, in the list "a/b, c/d, ...", of value's media type (parameters aside, blanks
 * before it skipped), or -1: value NULL, or a type not listed. */
int pe_media_match(const char *value, const char *list);
/* 0 when value is a media type as RFC 9110 writes one: "type/subtype" (tokens), blanks, then
 * nothing or parameters that parse (pe_media_param); else -1 (NULL too). */
int pe_media_check(const char *value);
/* Parameter name of value (a Content-Type): 1 with *v (inside value; quotes stripped, escapes
 * kept) and *len set, *at at the parameter's name; 0 when absent; -1 when the parameters do not
 * parse (a name without '=', an unterminated quoted string, a stray byte). The first of a repeated
 * name wins. */
int pe_media_param(const char *value, const char *name, const char **v, size_t *len, const char **at);

#endif
