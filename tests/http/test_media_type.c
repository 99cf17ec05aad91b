/* Unit tests of the media-type reader (src/http/media.c): types and parameter names match
 * case-insensitively (RFC 9110 §8.3.1), values come back as written, quoted strings without their
 * quotes; a parameter list that does not parse is told apart from a missing parameter. */
#include "support/pe_check.h"

#include <string.h>
#include <strings.h>

#include "http/media.h"

struct mcase {
	const char *value, *list;
	int want;
};

static const struct mcase matches[] = {
	{"application/x-npy", "application/x-npy, application/json", 0},
	{"APPLICATION/JSON", "application/x-npy, application/json", 1},
	{"application/json; charset=utf-8", "application/x-npy, application/json", 1},
	{"application/json;CHARSET=UTF-8", "application/json", 0},
	{"  application/json", "application/json", 0},
	{"application/json\t; q=1", "application/json", 0},
	{"application/jsonx", "application/json", -1},
	{"application/jso", "application/json", -1},
	{"text/plain", "application/x-npy, application/json", -1},
	{"", "application/json", -1},
	{NULL, "application/json", -1},
	{"Multipart/Form-Data; boundary=x", "multipart/form-data", 0},
};

START_TEST(type_matches)
{
	const struct mcase *c = &matches[_i];
	ck_assert_msg(pe_media_match(c->value, c->list) == c->want, "'%s' in '%s': %d, want %d", c->value ? c->value : "(null)",
		      c->list, pe_media_match(c->value, c->list), c->want);
}
END_TEST

struct pcase {
	const char *value, *name;
	int want;
	const char *got; /* the value found */
};

static const struct pcase params[] = {
	{"multipart/form-data; boundary=abc", "boundary", 1, "abc"},
	{"multipart/form-data; BOUNDARY=abc", "boundary", 1, "abc"},
	{"multipart/form-data; BoUnDaRy=\"a b\"", "boundary", 1, "a b"},
	{"multipart/form-data;boundary=abc", "boundary", 1, "abc"},
	{"multipart/form-data; charset=utf-8; Boundary=---x/y:z", "boundary", 1, "---x/y:z"},
	{"text/plain; Charset=UTF-8", "charset", 1, "UTF-8"},
	{"text/plain; CHARSET=\"utf-8\" ; format=flowed", "charset", 1, "utf-8"},
	{"text/plain; format=flowed", "charset", 0, NULL},
	{"text/plain", "charset", 0, NULL},
	{"text/plain;", "charset", 0, NULL},
	{"text/plain; charset=a; charset=b", "charset", 1, "a"},
	{"text/plain; charset", "charset", -1, NULL},
	{"text/plain; charset=", "charset", -1, NULL},
	{"text/plain; charset=\"utf-8", "charset", -1, NULL},
	{"text/plain; charset=utf-8 x", "charset", -1, NULL},
	{NULL, "charset", 0, NULL},
};

START_TEST(parameters_by_name)
{
	const struct pcase *c = &params[_i];
	const char *v = NULL, *at = NULL;
	size_t len = 0;
	int rc = pe_media_param(c->value, c->name, &v, &len, &at);
	ck_assert_msg(rc == c->want, "'%s' %s: %d, want %d", c->value ? c->value : "(null)", c->name, rc, c->want);
	if (c->got) {
		ck_assert_msg(len == strlen(c->got) && !memcmp(v, c->got, len), "'%s': got '%.*s', want '%s'", c->value,
			      (int)len, v, c->got);
		ck_assert(strncasecmp(at, c->name, strlen(c->name)) == 0);
	}
}
END_TEST

/* One rule for every Content-Type: type/subtype, then parameters that parse (or none). */
static const struct {
	const char *value;
	int want;
} checks[] = {
	{"application/x-npy", 0},
	{" application/json ; charset=utf-8", 0},
	{"multipart/form-data; boundary=xyzzy;", 0},
	{"multipart/form-data; boundary=\"a b\"", 0},
	{"application/x-npy; a=\"x", -1},
	{"application/x-npy; a", -1},
	{"application/x-npy; a=", -1},
	{"application/x-npy garbage", -1},
	{"application/x-npy, text/plain", -1},
	{"application", -1},
	{"application/", -1},
	{"/x-npy", -1},
	{"", -1},
	{NULL, -1},
};

START_TEST(whole_type_checked)
{
	int rc = pe_media_check(checks[_i].value);
	ck_assert_msg(rc == checks[_i].want, "'%s': %d, want %d", checks[_i].value ? checks[_i].value : "(null)", rc,
		      checks[_i].want);
}
END_TEST

static Suite *media_suite(void)
{
	Suite *s = suite_create("media_type");
	TCase *tc = tcase_create("media");
	tcase_add_loop_test(tc, type_matches, 0, (int)(sizeof matches / sizeof matches[0]));
	tcase_add_loop_test(tc, parameters_by_name, 0, (int)(sizeof params / sizeof params[0]));
	tcase_add_loop_test(tc, whole_type_checked, 0, (int)(sizeof checks / sizeof checks[0]));
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(media_suite)
