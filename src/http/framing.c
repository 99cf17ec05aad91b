/* Request framing (RFC 9112 §6): one reading of where a request's body ends, or a refusal.
 *
 * Refused, because a proxy in front could frame the request differently and the bytes after it
 * would then be read as a second request (smuggling): a field name that is not a token (a space
 * before the colon makes libmicrohttpd store "Content-Length " and ignore it), a control byte in a
 * value, Content-Length together with Transfer-Encoding, Transfer-Encoding on HTTP/1.0, two
 * Content-Length fields, one that is not exactly 1*DIGIT, and an HTTP/1.1 request without exactly
 * one Host. Two Content-Type fields are refused too: which one a reader takes is as open. A transfer coding other than exactly "chunked" (gzip, identity, "chunked, gzip") is not
 * implemented: 501.
 *
 * Framing values are compared exactly, never trimmed: libmicrohttpd 0.9.75 compares them as they
 * came (after the blanks following the colon, which it skips), so "chunked " is not chunked to it
 * (it reads the body until the connection closes) and "11 " is not a length (it answers its own
 * HTML 400). Both are refused here (400), so that the two readings cannot differ. An obs-fold
 * (RFC 9112 §5.2) reaches this file as libmicrohttpd stores it: the continuation appended to the
 * field NAME ("Content-Length: 5\r\n 0" arrives as "Content-Length0: 5"), so a name that starts
 * with Content-Length or Transfer-Encoding and goes on is refused as malformed; server.c finds
 * folds of any other field, and NUL bytes in values, from where libmicrohttpd left the strings. */
#include "http/framing.h"

#include <string.h>
#include <strings.h>

void pe_framing_init(struct pe_framing *f) { memset(f, 0, sizeof *f); }

static int tchar(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static int name_is(const char *name, size_t len, const char *want)
{
	return len == strlen(want) && strncasecmp(name, want, len) == 0;
}

/* Value without leading and trailing blanks. */
static const char *trim(const char *v, size_t *len)
{
	while (*len && (*v == ' ' || *v == '\t'))
		v++, (*len)--;
	while (*len && (v[*len - 1] == ' ' || v[*len - 1] == '\t'))
		(*len)--;
	return v;
}

static void note_bad(struct pe_framing *f, const char *name, size_t len)
{
	if (f->bad_field)
		return;
	f->bad_field = 1;
	size_t i = 0;
	for (; i < len && i + 1 < sizeof f->bad_name; i++)
		f->bad_name[i] = (name[i] > 0x20 && name[i] < 0x7f) ? name[i] : '?';
	f->bad_name[i] = 0;
}

static int starts_with(const char *name, size_t len, const char *prefix)
{
	return len > strlen(prefix) && strncasecmp(name, prefix, strlen(prefix)) == 0;
}

/* Exactly 1*DIGIT: no blanks, no sign, no list. */
static void content_length(struct pe_framing *f, const char *v, size_t len)
{
	uint64_t n = 0;
	f->n_length++;
	if (len == 0)
		f->length_bad = 1;
	for (size_t i = 0; i < len; i++) {
		unsigned d = (unsigned char)v[i] - '0';
		if (d > 9) {
			f->length_bad = 1;
			return;
		}
		if (n > (UINT64_MAX - d) / 10)
			f->length_overflow = 1;
		else
			n = n * 10 + d;
	}
	f->length = n;
}

void pe_framing_header(struct pe_framing *f, const char *name, size_t name_len, const char *value, size_t value_len)
{
	int ok = name_len > 0;
	for (size_t i = 0; ok && i < name_len; i++)
		ok = tchar((unsigned char)name[i]);
	for (size_t i = 0; ok && i < value_len; i++) {
		unsigned char c = (unsigned char)value[i];
		ok = !((c < 0x20 && c != '\t') || c == 0x7f);
	}
	/* a framing field with an obs-fold, as libmicrohttpd stores it (see the top) */
	ok = ok && !starts_with(name, name_len, "Content-Length") && !starts_with(name, name_len, "Transfer-Encoding");
	if (!ok) {
		note_bad(f, name, name_len);
		return;
	}
	if (name_is(name, name_len, "Content-Length"))
		content_length(f, value, value_len);
	else if (name_is(name, name_len, "Transfer-Encoding")) {
		size_t tlen = value_len;
		const char *t = trim(value, &tlen);
		f->te_chunked = ++f->n_te == 1 && value_len == 7 && strncasecmp(value, "chunked", 7) == 0;
		f->te_blank |= tlen != value_len && tlen == 7 && strncasecmp(t, "chunked", 7) == 0;
	} else if (name_is(name, name_len, "Host"))
		f->n_host++;
	else if (name_is(name, name_len, "Content-Type"))
		f->n_type++;
	else if (name_is(name, name_len, "Expect")) {
		const char *v = trim(value, &value_len);
		f->expect_continue = value_len == 12 && strncasecmp(v, "100-continue", 12) == 0;
	}
}

void pe_framing_bad(struct pe_framing *f, const char *name, size_t name_len) { note_bad(f, name, name_len); }

int pe_framing_finish(struct pe_framing *f, const char *version, struct pe_err *err)
{
	int http10 = version && strcmp(version, "HTTP/1.0") == 0;
	if (f->bad_field)
		return pe_err_set(err, PE_EINVAL, "header", "the header field \"%s\" is malformed (a name must be a "
				  "token with no space before the colon; values hold no control bytes)", f->bad_name);
	if (f->n_te && f->n_length)
		return pe_err_set(err, PE_EBODY, "Transfer-Encoding",
				  "Content-Length and Transfer-Encoding together are ambiguous framing");
	if (f->n_te && http10)
		return pe_err_set(err, PE_EBODY, "Transfer-Encoding", "Transfer-Encoding is not defined for HTTP/1.0");
	if (f->te_blank)
		return pe_err_set(err, PE_EBODY, "Transfer-Encoding",
				  "Transfer-Encoding must be exactly \"chunked\", with no blanks around it");
	if (f->n_te && !f->te_chunked)
		return pe_err_set(err, PE_ENOTIMPL, "Transfer-Encoding",
				  "the only transfer coding accepted is \"chunked\", given once");
	if (f->n_length > 1)
		return pe_err_set(err, PE_EBODY, "Content-Length", "Content-Length is given more than once");
	if (f->length_bad)
		return pe_err_set(err, PE_EBODY, "Content-Length",
				  "Content-Length must be a decimal number of bytes, digits only (no blanks)");
	if (f->length_overflow)
		return pe_err_set(err, PE_ETOOBIG, "Content-Length", "Content-Length is past 2^64 - 1 bytes");
	if (!http10 && f->n_host != 1)
		return pe_err_set(err, PE_EINVAL, "Host", f->n_host ? "Host is given more than once"
							    : "an HTTP/1.1 request must carry a Host header");
	if (http10 && f->n_host > 1)
		return pe_err_set(err, PE_EINVAL, "Host", "Host is given more than once");
	if (f->n_type > 1)
		return pe_err_set(err, PE_EINVAL, "Content-Type", "Content-Type is given more than once");
	f->expect_continue = f->expect_continue && !http10;
	f->body = f->n_te ? PE_BODY_CHUNKED : f->length ? PE_BODY_LENGTH : PE_BODY_NONE;
	return 0;
}
