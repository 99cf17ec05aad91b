/* Access control of writes: "Authorization: Bearer <auth_token>" when a token is configured,
 * compared through SHA-256 digests so that the time taken reveals neither the token nor its
 * length; with no token only loopback clients may write. Reads are open. */
#include "http/auth.h"
#include "http/problem.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <nettle/sha2.h>
#include <string.h>
#include <strings.h>

static int is_loopback(const struct sockaddr *sa)
{
	if (sa && sa->sa_family == AF_INET)
		return ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24 == 127;
	if (sa && sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
	}
	return 0;
}

static void sha256_of(const void *data, size_t len, uint8_t out[32])
{
	struct sha256_ctx c;
	sha256_init(&c);
	sha256_update(&c, len, data);
	sha256_digest(&c, SHA256_DIGEST_SIZE, out);
}

/* Equal, in time independent of where (and whether) they differ. */
static int token_equal(const char *a, size_t alen, const char *b, size_t blen)
{
	uint8_t da[32], db[32];
	unsigned diff = 0;
	sha256_of(a, alen, da);
	sha256_of(b, blen, db);
	for (int i = 0; i < 32; i++)
		diff |= (unsigned)(da[i] ^ db[i]);
	return diff == 0;
}

/* The credentials of an "Authorization: Bearer <token>" header; 0 if there are none. */
static int bearer(const char *authz, const char **tok, size_t *len)
{
	if (!authz || strncasecmp(authz, "Bearer ", 7) != 0)
		return 0;
	*tok = authz + 7;
	while (**tok == ' ')
		(*tok)++;
	*len = strlen(*tok);
	while (*len && (*tok)[*len - 1] == ' ')
		(*len)--;
	return *len > 0;
}

int pe_auth_check(struct req *r, struct MHD_Connection *conn, struct pe_err *err)
{
	const char *token = r->h->opt.auth_token, *tok;
	size_t len;
	if (!token || !*token) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		return ci && is_loopback(ci->client_addr)
			       ? 0
			       : pe_err_set(err, PE_EFORBIDDEN, "Authorization",
					    "no auth_token is configured: only loopback clients may write");
	}
	const char *authz = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	if (!bearer(authz, &tok, &len))
		return pe_err_set(err, PE_EUNAUTH, "Authorization", "writes need Authorization: Bearer <token>");
	if (!token_equal(tok, len, token, strlen(token)))
		return pe_err_set(err, PE_EFORBIDDEN, "Authorization", "the bearer token is not the configured one");
	return 0;
}

enum MHD_Result pe_auth_problem(struct req *r, struct MHD_Connection *conn, const struct pe_err *err)
{
	int status;
	size_t len = 0;
	if (err->code != PE_EUNAUTH)
		return pe_http_problem(r, conn, err);
	struct MHD_Response *resp = pe_problem_response(err, NULL, &status, &len);
	if (resp) {
		MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"posenc\"");
		pe_http_add_cors(r->h, conn, resp);
	}
	r->bytes = len;
	return pe_http_queue(r, conn, status, resp);
}
