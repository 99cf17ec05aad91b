/* libFuzzer target: request framing and the header parsers of the HTTP layer (src/http/framing.c,
 * src/tensor/negotiate.c), the checks posencd runs on every request head before anything else.
 *
 * Input: raw request bytes. They are split as libmicrohttpd 0.9.75 splits a head: lines end at
 * "\n" (a "\r" before it dropped); the first is the request line, whose last space-separated word
 * is the version; then a field per line up to an empty line, its name everything before the
 * first ':' (spaces included, as MHD keeps them), its value after the colon and any blanks; a line
 * starting with a blank (obs-fold) is appended, its blanks skipped, to the previous field's NAME,
 * as MHD 0.9.75 does. Each field goes to
 * pe_framing_header, then pe_framing_finish decides. Accept, Accept-Encoding and If-None-Match
 * values also go through pe_negotiate_format, pe_accepts_gzip and pe_etag_matches.
 *
 * Checks, against a reference written here independently: a refusal is one of the documented
 * codes with a param and a detail; a head is accepted only if every field name is a token, no
 * value holds a control byte, no name runs on past Content-Length or Transfer-Encoding (a fold),
 * Content-Length and Transfer-Encoding are not both present, Transfer-Encoding is exactly one
 * "chunked" (no blanks) and not on HTTP/1.0, Content-Length is exactly one run of digits (no
 * blanks), and HTTP/1.1 has exactly one Host; the verdict's body kind and length agree with the
 * fields. A format negotiated from Accept is one that was offered. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/framing.h"
#include "posenc/output.h"

#define FAIL(...)                                               \
	do {                                                    \
		fprintf(stderr, "fuzz_framing: " __VA_ARGS__);  \
		fputc('\n', stderr);                            \
		abort();                                        \
	} while (0)

#define MAX_FIELDS 256
#define LINE_MAX_ 4096

struct field {
	char name[LINE_MAX_], value[LINE_MAX_];
	size_t nlen, vlen;
};

/* What the reference expects of the whole head. */
struct expect {
	int bad, n_cl, n_te, n_host, te_ok, cl_digits;
};

static int is_tchar(unsigned char c)
{
	static const char specials[] = "!#$%&'*+-.^_`|~";
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return 1;
	for (const char *s = specials; *s; s++)
		if ((unsigned char)*s == c)
			return 1;
	return 0;
}

static int same(const struct field *f, const char *name)
{
	return f->nlen == strlen(name) && strncasecmp(f->name, name, f->nlen) == 0;
}

/* Untrimmed, as MHD compares: does the value equal want (case-insensitive)? */
static int value_is(const struct field *f, const char *want)
{
	return f->vlen == strlen(want) && strncasecmp(f->value, want, f->vlen) == 0;
}

/* A name that goes on past a framing field's (MHD's join of an obs-fold). */
static int runs_on(const struct field *f, const char *name)
{
	return f->nlen > strlen(name) && strncasecmp(f->name, name, strlen(name)) == 0;
}

/* Exactly 1*DIGIT, untrimmed (past 64 bits is the framing's 413, checked separately). */
static int digits_only(const struct field *f)
{
	for (size_t i = 0; i < f->vlen; i++)
		if (f->value[i] < '0' || f->value[i] > '9')
			return 0;
	return f->vlen > 0;
}

static void reference(const struct field *fs, size_t n, struct expect *e)
{
	memset(e, 0, sizeof *e);
	e->cl_digits = 1;
	for (size_t i = 0; i < n; i++) {
		const struct field *f = &fs[i];
		int bad = f->nlen == 0;
		for (size_t k = 0; k < f->nlen; k++)
			bad |= !is_tchar((unsigned char)f->name[k]);
		for (size_t k = 0; k < f->vlen; k++) {
			unsigned char c = (unsigned char)f->value[k];
			bad |= (c < 0x20 && c != '\t') || c == 0x7f;
		}
		bad |= runs_on(f, "Content-Length") || runs_on(f, "Transfer-Encoding");
		if (bad) {
			e->bad = 1;
			continue;
		}
		if (same(f, "Content-Length")) {
			e->n_cl++;
			e->cl_digits &= digits_only(f);
		} else if (same(f, "Transfer-Encoding")) {
			e->n_te++;
			e->te_ok = e->n_te == 1 && value_is(f, "chunked");
		} else if (same(f, "Host"))
			e->n_host++;
	}
}

static void headers_too(const struct field *f)
{
	struct pe_err err = {0};
	enum pe_format fmt = PE_FMT_COUNT_;
	char v[LINE_MAX_ + 1];
	memcpy(v, f->value, f->vlen);
	v[f->vlen] = 0;
	if (same(f, "Accept")) {
		unsigned offered = PE_FMT_BIT(PE_FMT_JSON) | PE_FMT_BIT(PE_FMT_NPY) | PE_FMT_BIT(PE_FMT_CSV);
		int rc = pe_negotiate_format(NULL, v, offered, &fmt, &err);
		if (rc != 0 && rc != PE_ENOTACCEPT)
			FAIL("pe_negotiate_format(%s) returned %d", v, rc);
		if (rc == 0 && (fmt >= PE_FMT_COUNT_ || !(offered & PE_FMT_BIT(fmt))))
			FAIL("pe_negotiate_format(%s) chose format %d, which was not offered", v, (int)fmt);
	} else if (same(f, "Accept-Encoding"))
		(void)pe_accepts_gzip(v);
	else if (same(f, "If-None-Match"))
		(void)pe_etag_matches(v, "\"0123456789abcdef\"");
}

static size_t split_line(const uint8_t **p, const uint8_t *end, char *line)
{
	size_t n = 0;
	while (*p < end && **p != '\n') {
		if (n < LINE_MAX_ - 1)
			line[n++] = (char)**p;
		(*p)++;
	}
	if (*p < end)
		(*p)++;
	if (n && line[n - 1] == '\r')
		n--;
	line[n] = 0;
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct field fs[MAX_FIELDS];
	static char line[LINE_MAX_];
	const uint8_t *p = data, *end = data + size;
	size_t n = split_line(&p, end, line);
	if (memchr(line, 0, n))
		return 0; /* MHD cuts the line at a NUL; not this target's business */
	const char *sp = strrchr(line, ' ');
	char version[32];
	snprintf(version, sizeof version, "%s", sp ? sp + 1 : "");
	size_t nf = 0;
	while (p < end && nf < MAX_FIELDS) {
		n = split_line(&p, end, line);
		if (n == 0)
			break;
		if (memchr(line, 0, n))
			return 0;
		if ((line[0] == ' ' || line[0] == '\t') && nf > 0) { /* obs-fold, joined to the name as MHD does */
			size_t k = 0;
			while (line[k] == ' ' || line[k] == '\t')
				k++;
			struct field *f = &fs[nf - 1];
			size_t add = n - k < LINE_MAX_ - 1 - f->nlen ? n - k : LINE_MAX_ - 1 - f->nlen;
			memcpy(f->name + f->nlen, line + k, add);
			f->nlen += add;
			continue;
		}
		char *colon = strchr(line, ':');
		if (!colon)
			return 0; /* MHD answers that itself (400) */
		struct field *f = &fs[nf++];
		f->nlen = (size_t)(colon - line);
		memcpy(f->name, line, f->nlen);
		const char *v = colon + 1;
		while (*v == ' ' || *v == '\t')
			v++;
		f->vlen = n - (size_t)(v - line);
		memcpy(f->value, v, f->vlen);
	}
	struct pe_framing fr;
	pe_framing_init(&fr);
	for (size_t i = 0; i < nf; i++) {
		pe_framing_header(&fr, fs[i].name, fs[i].nlen, fs[i].value, fs[i].vlen);
		headers_too(&fs[i]);
	}
	struct pe_err err = {0};
	int rc = pe_framing_finish(&fr, version, &err);
	struct expect e;
	reference(fs, nf, &e);
	int http10 = strcmp(version, "HTTP/1.0") == 0;
	if (rc != 0) {
		if (rc != PE_EBODY && rc != PE_EINVAL && rc != PE_ETOOBIG && rc != PE_ENOTIMPL)
			FAIL("unexpected code %d", rc);
		if (!err.param[0] || !err.detail[0])
			FAIL("refusal %d without param or detail", rc);
		if (rc == PE_ETOOBIG && (e.bad || e.n_cl != 1))
			FAIL("413 without one Content-Length");
		return 0;
	}
	if (e.bad)
		FAIL("a malformed field accepted");
	if (e.n_cl && e.n_te)
		FAIL("Content-Length with Transfer-Encoding accepted");
	if (e.n_te && (!e.te_ok || http10))
		FAIL("Transfer-Encoding other than one chunked (or on HTTP/1.0) accepted");
	if (e.n_cl > 1 || (e.n_cl == 1 && !e.cl_digits))
		FAIL("a bad or repeated Content-Length accepted");
	if (!http10 && e.n_host != 1)
		FAIL("HTTP/1.1 with %d Host fields accepted", e.n_host);
	if ((fr.body == PE_BODY_CHUNKED) != (e.n_te == 1))
		FAIL("body kind %d with %d Transfer-Encoding fields", (int)fr.body, e.n_te);
	if (fr.body == PE_BODY_LENGTH && (e.n_cl != 1 || fr.length == 0))
		FAIL("a length body without one non-zero Content-Length");
	if (fr.body == PE_BODY_NONE && e.n_cl == 1 && fr.length != 0)
		FAIL("Content-Length %llu but no body", (unsigned long long)fr.length);
	return 0;
}
