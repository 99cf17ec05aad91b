/* Content negotiation (RFC 9110 §12.5.1 Accept with q-values) and If-None-Match matching. */
#include "posenc/output.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *skip_ws(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

/* Quality of one media range's parameters ("; q=0.5; level=1"); 1000 = q 1. */
static int parse_quality(const char *params, const char *end)
{
	const char *q = params;
	while (q < end) {
		q = skip_ws(q);
		if ((q[0] == 'q' || q[0] == 'Q') && q[1] == '=') {
			double v = strtod(q + 2, NULL);
			if (!(v > 0)) /* negative, or "nan" (strtod reads it): not acceptable; (int)NaN is UB */
				v = 0;
			if (v > 1)
				v = 1;
			return (int)(v * 1000 + 0.5);
		}
		const char *semi = memchr(q, ';', (size_t)(end - q));
		if (!semi)
			break;
		q = semi + 1;
	}
	return 1000;
}

/* How specifically a media range names mime: 3 exactly, 2 as type/\*, 1 as \*\/\*, 0 not at all. */
static int range_matches(const char *range, size_t len, const char *mime)
{
	if (len == 3 && memcmp(range, "*/*", 3) == 0)
		return 1;
	const char *slash = strchr(mime, '/');
	size_t tlen = (size_t)(slash - mime);
	if (len == tlen + 2 && strncasecmp(range, mime, tlen) == 0 && range[tlen] == '/' && range[tlen + 1] == '*')
		return 2;
	return len == strlen(mime) && strncasecmp(range, mime, len) == 0 ? 3 : 0;
}

/* A format's quality is that of the most specific range naming it (RFC 9110 §12.5.1: so
 * "application/json;q=0, *\/\*" refuses JSON and accepts the rest); q=0 is "not acceptable".
 * The best format has the highest quality, then the most specific range, then comes first in
 * the offered order (JSON first). */
static int pick_from_accept(const char *accept, unsigned offered, enum pe_format *out)
{
	int q[PE_FMT_COUNT_] = {0}, spec[PE_FMT_COUNT_] = {0};
	for (const char *p = accept; *p;) {
		p = skip_ws(p);
		const char *comma = strchr(p, ','), *end = comma ? comma : p + strlen(p);
		const char *semi = memchr(p, ';', (size_t)(end - p));
		const char *rend = semi ? semi : end;
		while (rend > p && (rend[-1] == ' ' || rend[-1] == '\t'))
			rend--;
		int rq = semi ? parse_quality(semi + 1, end) : 1000;
		for (int f = 0; f < PE_FMT_COUNT_; f++) {
			int s = (offered & PE_FMT_BIT(f)) ? range_matches(p, (size_t)(rend - p), pe_format_mime(f)) : 0;
			if (s > spec[f]) {
				spec[f] = s;
				q[f] = rq;
			}
		}
		p = comma ? comma + 1 : end;
	}
	int best = -1;
	for (int f = 0; f < PE_FMT_COUNT_; f++)
		if (q[f] > 0 && (best < 0 || q[f] > q[best] || (q[f] == q[best] && spec[f] > spec[best])))
			best = f;
	if (best < 0)
		return -1;
	*out = (enum pe_format)best;
	return 0;
}

int pe_negotiate_format(const char *format_param, const char *accept, unsigned offered, enum pe_format *out,
			struct pe_err *err)
{
	if (format_param) {
		if (pe_format_parse(format_param, out) != 0)
			return pe_err_set(err, PE_EINVAL, "format", "format must be one of: json, npy, bin, csv, png");
		if (!(offered & PE_FMT_BIT(*out)))
			return pe_err_set(err, PE_ENOTACCEPT, "format", "format=%s is not offered here", format_param);
		return 0;
	}
	if (!accept || !*skip_ws(accept)) {
		*out = PE_FMT_JSON;
		return 0;
	}
	if (pick_from_accept(accept, offered, out) != 0)
		return pe_err_set(err, PE_ENOTACCEPT, "Accept", "none of the offered media types is acceptable");
	return 0;
}

int pe_etag_matches(const char *inm, const char *etag)
{
	size_t elen = strlen(etag);
	const char *p = inm;
	while (p && *p) {
		p = skip_ws(p);
		if (*p == '*')
			return 1;
		if (p[0] == 'W' && p[1] == '/')
			p += 2;
		const char *comma = strchr(p, ','), *end = comma ? comma : p + strlen(p);
		while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
			end--;
		if ((size_t)(end - p) == elen && memcmp(p, etag, elen) == 0)
			return 1;
		p = comma ? comma + 1 : NULL;
	}
	return 0;
}

int pe_accepts_gzip(const char *ae)
{
	int star = 0, gzip = -1; /* -1: not listed; else its quality > 0 */
	for (const char *p = ae; p && *p;) {
		p = skip_ws(p);
		const char *comma = strchr(p, ','), *end = comma ? comma : p + strlen(p);
		const char *semi = memchr(p, ';', (size_t)(end - p));
		const char *tend = semi ? semi : end;
		while (tend > p && (tend[-1] == ' ' || tend[-1] == '\t'))
			tend--;
		size_t len = (size_t)(tend - p);
		int q = semi ? parse_quality(semi + 1, end) : 1000;
		if ((len == 4 && strncasecmp(p, "gzip", 4) == 0) || (len == 6 && strncasecmp(p, "x-gzip", 6) == 0))
			gzip = q > 0;
		else if (len == 1 && *p == '*')
			star = q > 0;
		p = comma ? comma + 1 : end;
	}
	return gzip >= 0 ? gzip : star;
}
