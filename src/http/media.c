/* Media types and their parameters (media.h): one reading for every header posenc takes apart, so
 * "BOUNDARY=" and "Charset=" are the parameters "boundary" and "charset" wherever they are read. */
#include "http/media.h"

#include <string.h>
#include <strings.h>

static int is_blank(char c) { return c == ' ' || c == '\t'; }

static int tchar(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

int pe_media_match(const char *value, const char *list)
{
	if (!value)
		return -1;
	value += strspn(value, " \t");
	size_t n = strcspn(value, "; \t");
	int i = 0;
	for (const char *t = list; *t; i++) {
		size_t k = strcspn(t, ",");
		if (k == n && strncasecmp(t, value, n) == 0)
			return i;
		t += k;
		t += strspn(t, ", ");
	}
	return -1;
}

/* One parameter at p (after its ';' and blanks): name [nlen], value [vlen] (quotes stripped);
 * returns where the next ';' or the end is, or NULL when it does not parse. */
static const char *one_param(const char *p, const char **name, size_t *nlen, const char **v, size_t *vlen)
{
	*name = p;
	while (tchar((unsigned char)*p))
		p++;
	*nlen = (size_t)(p - *name);
	if (*nlen == 0 || *p != '=')
		return NULL;
	p++;
	if (*p == '"') {
		*v = ++p;
		while (*p && *p != '"')
			p += p[0] == '\\' && p[1] ? 2 : 1;
		if (*p != '"')
			return NULL;
		*vlen = (size_t)(p - *v);
		p++;
	} else {
		*v = p; /* a token, read leniently: RFC 2046 boundaries may hold '/', ':', '=' ... */
		while ((unsigned char)*p > 0x20 && *p != 0x7f && !strchr(";\",", *p))
			p++;
		*vlen = (size_t)(p - *v);
		if (*vlen == 0)
			return NULL;
	}
	while (is_blank(*p))
		p++;
	return *p == 0 || *p == ';' ? p : NULL;
}

int pe_media_param(const char *value, const char *name, const char **v, size_t *len, const char **at)
{
	if (!value)
		return 0;
	const char *p = value + strcspn(value, ";");
	size_t want = strlen(name);
	int found = 0;
	while (*p == ';') {
		p++;
		while (is_blank(*p))
			p++;
		if (*p == 0 || *p == ';')
			continue; /* an empty parameter ("a/b;" or ";;"), which RFC 9110 allows */
		const char *n, *pv;
		size_t nlen, vlen;
		const char *next = one_param(p, &n, &nlen, &pv, &vlen);
		if (!next)
			return -1;
		if (!found && nlen == want && strncasecmp(n, name, want) == 0) {
			*v = pv, *len = vlen, found = 1;
			if (at)
				*at = n;
		}
		p = next;
	}
	return found;
}

static size_t token_len(const char *p)
{
	size_t n = 0;
	while (tchar((unsigned char)p[n]))
		n++;
	return n;
}

int pe_media_check(const char *value)
{
	if (!value)
		return -1;
	const char *p = value + strspn(value, " \t");
	size_t n = token_len(p);
	if (n == 0 || p[n] != '/')
		return -1;
	p += n + 1;
	if ((n = token_len(p)) == 0)
		return -1;
	p += n;
	p += strspn(p, " \t");
	const char *v;
	size_t len;
	return (*p == 0 || *p == ';') && pe_media_param(value, "", &v, &len, NULL) == 0 ? 0 : -1;
}
