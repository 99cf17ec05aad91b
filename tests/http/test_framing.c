/* Unit tests of request framing (src/http/framing.c): the verdict for each kind of head, and the
 * code and parameter each refusal names. */
#include "support/pe_check.h"

#include <stdio.h>
#include <string.h>

#include "http/framing.h"

/* Fields as "Name: value" strings ("Name : value" keeps the space in the name, as MHD does). */
static int verdict(const char *version, const char *const *fields, struct pe_framing *f, struct pe_err *err)
{
	pe_framing_init(f);
	for (int i = 0; fields[i]; i++) {
		const char *colon = strchr(fields[i], ':');
		const char *v = colon + 1;
		while (*v == ' ')
			v++;
		pe_framing_header(f, fields[i], (size_t)(colon - fields[i]), v, strlen(v));
	}
	pe_err_clear(err);
	return pe_framing_finish(f, version, err);
}

START_TEST(accepted_heads)
{
	struct pe_framing f;
	struct pe_err err;
	const char *none[] = {"Host: a", NULL};
	ck_assert_int_eq(verdict("HTTP/1.1", none, &f, &err), 0);
	ck_assert_int_eq(f.body, PE_BODY_NONE);
	const char *length[] = {"Host: a", "content-length: 0012", "Expect: 100-Continue", NULL};
	ck_assert_int_eq(verdict("HTTP/1.1", length, &f, &err), 0);
	ck_assert_int_eq(f.body, PE_BODY_LENGTH);
	ck_assert_uint_eq(f.length, 12);
	ck_assert(f.expect_continue);
	const char *zero[] = {"Host: a", "Content-Length: 0", NULL};
	ck_assert_int_eq(verdict("HTTP/1.1", zero, &f, &err), 0);
	ck_assert_int_eq(f.body, PE_BODY_NONE);
	const char *chunked[] = {"Host: a", "Transfer-Encoding: Chunked", NULL};
	ck_assert_int_eq(verdict("HTTP/1.1", chunked, &f, &err), 0);
	ck_assert_int_eq(f.body, PE_BODY_CHUNKED);
	const char *old[] = {"Content-Length: 3", "Expect: 100-continue", NULL}; /* HTTP/1.0 needs no Host */
	ck_assert_int_eq(verdict("HTTP/1.0", old, &f, &err), 0);
	ck_assert(!f.expect_continue);
	const char *max[] = {"Host: a", "Content-Length: 18446744073709551615", NULL};
	ck_assert_int_eq(verdict("HTTP/1.1", max, &f, &err), 0);
	ck_assert_uint_eq(f.length, UINT64_MAX);
}
END_TEST

START_TEST(smuggling_refused)
{
	struct pe_framing f;
	struct pe_err err;
	const char *both[] = {"Host: a", "Content-Length: 5", "Transfer-Encoding: chunked", NULL};
	ck_assert_int_eq(verdict("HTTP/1.1", both, &f, &err), PE_EBODY);
	ck_assert_str_eq(err.param, "Transfer-Encoding");
	const char *space[] = {"Host: a", "Content-Length : 5", NULL};
	ck_assert_int_eq(verdict("HTTP/1.1", space, &f, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "header");
	const char *tab[] = {"Host: a", "Transfer-Encoding\t: chunked", NULL};
	ck_assert_int_eq(verdict("HTTP/1.1", tab, &f, &err), PE_EINVAL);
	const char *nontoken[] = {"Host: a", "X/Y: 1", NULL};
	ck_assert_int_eq(verdict("HTTP/1.1", nontoken, &f, &err), PE_EINVAL);
	const char *empty_name[] = {"Host: a", ": 1", NULL};
	ck_assert_int_eq(verdict("HTTP/1.1", empty_name, &f, &err), PE_EINVAL);
	const char *ctl[] = {"Host: a", "X-A: 1\r2", NULL};
	ck_assert_int_eq(verdict("HTTP/1.1", ctl, &f, &err), PE_EINVAL);
	const char *http10[] = {"Transfer-Encoding: chunked", NULL};
	ck_assert_int_eq(verdict("HTTP/1.0", http10, &f, &err), PE_EBODY);
	ck_assert_str_eq(err.param, "Transfer-Encoding");
	const char *two[] = {"Host: a", "Content-Length: 5", "Content-Length: 5", NULL};
	ck_assert_int_eq(verdict("HTTP/1.1", two, &f, &err), PE_EBODY);
	ck_assert_str_eq(err.param, "Content-Length");
	static const char *const bad_lengths[] = {"", "-1", "+1", "1e3", "0x10", "5, 5", "5 5", "five"};
	for (size_t i = 0; i < sizeof bad_lengths / sizeof bad_lengths[0]; i++) {
		char cl[64];
		snprintf(cl, sizeof cl, "Content-Length: %s", bad_lengths[i]);
		const char *fs[] = {"Host: a", cl, NULL};
		ck_assert_msg(verdict("HTTP/1.1", fs, &f, &err) == PE_EBODY, "%s accepted", cl);
	}
	const char *types[] = {"Host: a", "Content-Type: application/x-npy", "content-type: text/plain", NULL};
	ck_assert_int_eq(verdict("HTTP/1.1", types, &f, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "Content-Type");
	const char *huge[] = {"Host: a", "Content-Length: 18446744073709551616", NULL};
	ck_assert_int_eq(verdict("HTTP/1.1", huge, &f, &err), PE_ETOOBIG);
}
END_TEST

/* A request with Host and the one framing header name: value, refused as a body error naming name. */
static void framing_refused(struct pe_framing *f, const char *name, const char *value)
{
	struct pe_err err;
	pe_framing_init(f);
	pe_framing_header(f, "Host", 4, "a", 1);
	pe_framing_header(f, name, strlen(name), value, strlen(value));
	pe_err_clear(&err);
	ck_assert_msg(pe_framing_finish(f, "HTTP/1.1", &err) == PE_EBODY, "%s \"%s\" accepted", name, value);
	ck_assert_str_eq(err.param, name);
}

/* A framing value is compared as libmicrohttpd compares it, untrimmed: "11 " is no length to it
 * (its own HTML 400) and "chunked " no coding (it would read the body until close). */
START_TEST(framing_values_exact)
{
	struct pe_framing f;
	static const char *const lengths[] = {"11 ", "11\t", " 11", "\t11", "1 1"};
	for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
		framing_refused(&f, "Content-Length", lengths[i]);
		ck_assert_msg(f.length_bad, "Content-Length \"%s\"", lengths[i]);
	}
	static const char *const codings[] = {"chunked ", "chunked\t", " chunked", "Chunked \t "};
	for (size_t i = 0; i < sizeof codings / sizeof codings[0]; i++)
		framing_refused(&f, "Transfer-Encoding", codings[i]);
}
END_TEST

/* libmicrohttpd joins an obs-fold onto the field NAME: "Content-Length: 47\r\n 47" arrives as
 * "Content-Length47: 47", which it then ignores (the body is empty to it). */
START_TEST(folded_framing_names)
{
	struct pe_framing f;
	struct pe_err err;
	const char *cl[] = {"Host: a", "Content-Length47: 47", NULL};
	ck_assert_int_eq(verdict("HTTP/1.1", cl, &f, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "header");
	ck_assert_ptr_nonnull(strstr(err.detail, "Content-Length47"));
	const char *cl0[] = {"Host: a", "content-length0: 5", NULL};
	ck_assert_int_eq(verdict("HTTP/1.1", cl0, &f, &err), PE_EINVAL);
	const char *te[] = {"Host: a", "Transfer-Encodingchunked: x", NULL};
	ck_assert_int_eq(verdict("HTTP/1.1", te, &f, &err), PE_EINVAL);
	const char *other[] = {"Host: a", "Content-Lengths: 5", "X-Content-Length: 5", NULL}; /* not framing */
	ck_assert_int_eq(verdict("HTTP/1.1", other, &f, &err), PE_EINVAL);
	const char *fine[] = {"Host: a", "X-Content-Length: 5", "Content-Type: x", NULL};
	ck_assert_int_eq(verdict("HTTP/1.1", fine, &f, &err), 0);
	/* what server.c finds from libmicrohttpd's layout (a NUL in a value, a fold elsewhere) */
	pe_framing_init(&f);
	pe_framing_header(&f, "Host", 4, "a", 1);
	pe_framing_bad(&f, "X-Ab", 4);
	pe_err_clear(&err);
	ck_assert_int_eq(pe_framing_finish(&f, "HTTP/1.1", &err), PE_EINVAL);
	ck_assert_ptr_nonnull(strstr(err.detail, "X-Ab"));
}
END_TEST

START_TEST(codings_and_host)
{
	struct pe_framing f;
	struct pe_err err;
	static const char *const codings[] = {"identity", "gzip", "gzip, chunked", "chunked, gzip", "xchunked", "chunked;x=1", ""};
	for (size_t i = 0; i < sizeof codings / sizeof codings[0]; i++) {
		char te[64];
		snprintf(te, sizeof te, "Transfer-Encoding: %s", codings[i]);
		const char *fs[] = {"Host: a", te, NULL};
		ck_assert_msg(verdict("HTTP/1.1", fs, &f, &err) == PE_ENOTIMPL, "%s", te);
		ck_assert_int_eq(pe_err_status(PE_ENOTIMPL), 501);
	}
	const char *twice[] = {"Host: a", "Transfer-Encoding: chunked", "Transfer-Encoding: chunked", NULL};
	ck_assert_int_eq(verdict("HTTP/1.1", twice, &f, &err), PE_ENOTIMPL);
	const char *nohost[] = {"Accept: */*", NULL};
	ck_assert_int_eq(verdict("HTTP/1.1", nohost, &f, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "Host");
	const char *hosts[] = {"Host: a", "host: b", NULL};
	ck_assert_int_eq(verdict("HTTP/1.1", hosts, &f, &err), PE_EINVAL);
	ck_assert_int_eq(verdict("HTTP/1.0", hosts, &f, &err), PE_EINVAL);
}
END_TEST

static Suite *framing_suite(void)
{
	Suite *s = suite_create("framing");
	TCase *tc = tcase_create("framing");
	tcase_add_test(tc, accepted_heads);
	tcase_add_test(tc, smuggling_refused);
	tcase_add_test(tc, codings_and_host);
	tcase_add_test(tc, framing_values_exact);
	tcase_add_test(tc, folded_framing_names);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(framing_suite)
