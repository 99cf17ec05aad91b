/* libFuzzer target: the split of a request's query into parameters and their percent-decoding
 * (pe_query_split, pe_query_unescape, pe_query_count; src/http/query.c), as the server runs them
 * on every request before any handler.
 *
 * Input: the query text (the bytes after '?', up to a first NUL, as a NUL-terminated heap copy so
 * ASan sees any overread). What must hold: the split reads as many parameters as pe_query_count
 * says (at most its max, as the server's cap refuses more before splitting); each name and value
 * is a NUL-free string of the length the split reports (a decoded %00 would cut a C string short,
 * so it stays literal), no longer than its raw piece; and the parameters, percent-encoded again
 * and joined, split back to the same names and values (a name without '=' keeps no value). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/query.h"

#define MAX_ARGS 64

#define FAIL(...)                                             \
	do {                                                  \
		fprintf(stderr, "fuzz_query: " __VA_ARGS__);  \
		fputc('\n', stderr);                          \
		abort();                                      \
	} while (0)

/* Bytes that pass through encode() as they are: unreserved, and '/', which the decoder keeps
 * encoded (%2F stays literal), so it cannot be encoded here. */
static int plain(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
	       c == '_' || c == '~' || c == '/';
}

static size_t encode(char *out, const char *s, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t w = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (plain(c)) {
			out[w++] = (char)c;
		} else {
			out[w++] = '%';
			out[w++] = hex[c >> 4];
			out[w++] = hex[c & 15];
		}
	}
	return w;
}

static void check_arg(const struct pe_query_arg *a, size_t i)
{
	if (strlen(a->key) != a->key_len)
		FAIL("parameter %zu: name of %zu bytes reported as %zu", i, strlen(a->key), a->key_len);
	if (a->value && strlen(a->value) != a->value_len)
		FAIL("parameter %zu: value of %zu bytes reported as %zu", i, strlen(a->value), a->value_len);
	if (!a->value && a->value_len)
		FAIL("parameter %zu: no value, length %zu", i, a->value_len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t len = strnlen((const char *)data, size);
	char *text = malloc(len + 1), *again = malloc(3 * len + MAX_ARGS * 2 + 1);
	if (!text || !again)
		abort();
	memcpy(text, data, len);
	text[len] = 0;
	size_t count = pe_query_count(text);
	struct pe_query_arg args[MAX_ARGS], back[MAX_ARGS];
	size_t n = pe_query_split(text, args, MAX_ARGS, pe_query_unescape);
	size_t want = count < MAX_ARGS ? count : MAX_ARGS;
	if (n != want)
		FAIL("split read %zu parameters, pe_query_count says %zu", n, count);
	size_t w = 0;
	for (size_t i = 0; i < n; i++) {
		check_arg(&args[i], i);
		if (args[i].key_len + (args[i].value ? args[i].value_len + 1 : 0) > len)
			FAIL("parameter %zu decoded longer than the query", i);
		if (i)
			again[w++] = '&';
		w += encode(again + w, args[i].key, args[i].key_len);
		if (args[i].value) {
			again[w++] = '=';
			w += encode(again + w, args[i].value, args[i].value_len);
		}
	}
	again[w] = 0;
	/* a last parameter with an empty name and no value encodes to nothing: a trailing '&' */
	size_t m = pe_query_split(again, back, MAX_ARGS, pe_query_unescape);
	size_t expect = n && !args[n - 1].key_len && !args[n - 1].value ? n - 1 : n;
	if (m != expect)
		FAIL("%zu parameters split back to %zu", n, m);
	for (size_t i = 0; i < m; i++) {
		if (back[i].key_len != args[i].key_len || memcmp(back[i].key, args[i].key, args[i].key_len) != 0)
			FAIL("parameter %zu: name changed through encode and split", i);
		if (!back[i].value != !args[i].value ||
		    (args[i].value && (back[i].value_len != args[i].value_len ||
				       memcmp(back[i].value, args[i].value, args[i].value_len) != 0)))
			FAIL("parameter %zu: value changed through encode and split", i);
	}
	free(text);
	free(again);
	return 0;
}
