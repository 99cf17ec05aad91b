/* npy writer and parser: byte-for-byte agreement with files NumPy wrote (tests/data/npy, made by
 * tests/ref/make_npy_fixtures.py), round trips, and a parser that refuses every malformed,
 * truncated, lying or unsupported file with PE_EBODY (PE_ETOOBIG past max_elements). */
#include "posenc/tensor.h"
#include "support/pe_check.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DATA "tests/data/npy/"

static const char *const dtype_codes[] = {[PE_F32] = "f4", [PE_F64] = "f8", [PE_F16] = "f2", [PE_I32] = "i4"};
static const enum pe_dtype npy_dtypes[] = {PE_F32, PE_F64, PE_F16, PE_I32};

static const struct {
	const char *name;
	int rank;
	size_t dim[4];
} fixtures[] = {
	{"r0", 0, {0}},          {"r1", 1, {5}},          {"r2", 2, {3, 4}},     {"r3", 3, {2, 3, 4}},
	{"r4", 4, {2, 1, 3, 2}}, {"empty", 2, {0, 3}}, {"wide", 2, {123456, 0}},
};

/* The fixture values: element i is i*0.25 - 2 (floats) or i*1000003 - 7 (int32). */
static void *fixture_values(enum pe_dtype dt, size_t n)
{
	char *out = malloc(n * pe_dtype_size(dt) + 1);
	ck_assert_ptr_nonnull(out);
	for (size_t i = 0; i < n; i++) {
		double v = (double)i * 0.25 - 2;
		if (dt == PE_I32) {
			int32_t x = (int32_t)((int64_t)i * 1000003 - 7);
			memcpy(out + 4 * i, &x, 4);
		} else {
			pe_store_f64(dt, out + i * pe_dtype_size(dt), &v, 1);
		}
	}
	return out;
}

static struct pe_shape make_shape(int rank, const size_t *dim)
{
	struct pe_shape s;
	memset(&s, 0, sizeof s);
	s.rank = rank;
	for (int i = 0; i < rank; i++)
		s.dim[i] = dim[i];
	return s;
}

static size_t count_of(const struct pe_shape *s)
{
	int ovf;
	size_t n = pe_shape_count(s, &ovf);
	ck_assert_int_eq(ovf, 0);
	return n;
}

static void *fixture(const char *name, size_t *len)
{
	char path[256];
	snprintf(path, sizeof path, DATA "%s", name);
	return pe_test_read_file(path, len);
}

#define NFIXTURES (sizeof fixtures / sizeof fixtures[0])
#define NFILES ((int)(4 * NFIXTURES)) /* every dtype of npy_dtypes with every fixture shape */

/* NumPy's file i of NFILES: <dtype code>_<fixture>.npy, read whole. */
struct numpy_file {
	enum pe_dtype dt;
	int rank;
	const size_t *dim;
	char name[64];
	char *file;
	size_t flen;
};

static void numpy_file_open(int i, struct numpy_file *nf)
{
	size_t f = (size_t)i % NFIXTURES;
	nf->dt = npy_dtypes[(size_t)i / NFIXTURES];
	nf->rank = fixtures[f].rank;
	nf->dim = fixtures[f].dim;
	snprintf(nf->name, sizeof nf->name, "%s_%s.npy", dtype_codes[nf->dt], fixtures[f].name);
	nf->file = fixture(nf->name, &nf->flen);
}

/* Our writer reproduces NumPy's file exactly: header, padding and data. */
START_TEST(write_matches_numpy)
{
	struct numpy_file nf;
	numpy_file_open(_i, &nf);
	struct pe_tensor_view t = {make_shape(nf.rank, nf.dim), nf.dt, NULL};
	void *vals = fixture_values(nf.dt, count_of(&t.shape));
	t.data = vals;
	struct pe_buf b;
	pe_buf_init(&b, 1 << 20);
	ck_assert_int_eq(pe_npy_write(&b, &t, NULL), 0);
	ck_assert_msg(b.len == nf.flen && memcmp(b.data, nf.file, nf.flen) == 0, "%s differs", nf.name);
	ck_assert_uint_eq(pe_npy_header_len(&t), 128);
	pe_buf_destroy(&b);
	free(vals);
	free(nf.file);
}
END_TEST

/* A dict that exactly fills its 64-byte block gets a whole extra block of padding, as in NumPy. */
START_TEST(write_matches_numpy_aligned)
{
	size_t flen;
	char *file = fixture("aligned_f4.npy", &flen);
	size_t dim[] = {2, 0, 100000000000000ull, 1000000000000000000ull};
	struct pe_tensor_view t = {make_shape(4, dim), PE_F32, ""};
	struct pe_buf b;
	pe_buf_init(&b, 4096);
	ck_assert_int_eq(pe_npy_write(&b, &t, NULL), 0);
	ck_assert_uint_eq(b.len, 192);
	ck_assert_uint_eq(b.len, flen);
	ck_assert(memcmp(b.data, file, flen) == 0);
	ck_assert_uint_eq(pe_npy_header_len(&t), 192);
	pe_buf_destroy(&b);
	free(file);
}
END_TEST

START_TEST(parse_numpy_files)
{
	struct numpy_file nf;
	numpy_file_open(_i, &nf);
	struct pe_tensor_view v;
	struct pe_err err;
	pe_err_clear(&err);
	ck_assert_msg(pe_npy_parse(nf.file, nf.flen, 1000, &v, &err) == 0, "%s: %s", nf.name, err.detail);
	ck_assert_int_eq(v.dtype, nf.dt);
	ck_assert_int_eq(v.shape.rank, nf.rank);
	for (int i = 0; i < v.shape.rank; i++)
		ck_assert_uint_eq(v.shape.dim[i], nf.dim[i]);
	size_t n = count_of(&v.shape);
	void *want = fixture_values(nf.dt, n);
	ck_assert_msg(memcmp(v.data, want, n * pe_dtype_size(nf.dt)) == 0, "%s: other values", nf.name);
	ck_assert_ptr_eq(v.data, nf.file + 128);
	free(want);
	free(nf.file);
}
END_TEST

START_TEST(parse_versions_2_and_3)
{
	static const struct {
		const char *name;
		enum pe_dtype dt;
		int rank;
		size_t dim[3];
	} cases[] = {{"v2_f4_r2.npy", PE_F32, 2, {3, 4}}, {"v3_f8_r3.npy", PE_F64, 3, {2, 3, 4}}};
	for (size_t c = 0; c < 2; c++) {
		size_t flen;
		char *file = fixture(cases[c].name, &flen);
		struct pe_tensor_view v;
		ck_assert_int_eq(pe_npy_parse(file, flen, 100, &v, NULL), 0);
		ck_assert_int_eq(v.dtype, cases[c].dt);
		ck_assert_int_eq(v.shape.rank, cases[c].rank);
		for (int i = 0; i < cases[c].rank; i++)
			ck_assert_uint_eq(v.shape.dim[i], cases[c].dim[i]);
		size_t n = count_of(&v.shape);
		void *want = fixture_values(cases[c].dt, n);
		ck_assert(memcmp(v.data, want, n * pe_dtype_size(cases[c].dt)) == 0);
		free(want);
		free(file);
	}
}
END_TEST

/* Every dtype at ranks 0-4 with assorted dims (including 0): write, parse, same view back. */
START_TEST(round_trip)
{
	static const size_t dims[][4] = {{1, 1, 1, 1}, {7, 3, 2, 2}, {2, 5, 1, 3}, {0, 4, 2, 1}, {3, 0, 5, 2}};
	for (size_t d = 0; d < 4; d++)
		for (int rank = 0; rank <= 4; rank++)
			for (size_t k = 0; k < sizeof dims / sizeof dims[0]; k++) {
				enum pe_dtype dt = npy_dtypes[d];
				struct pe_tensor_view t = {make_shape(rank, dims[k]), dt, NULL};
				size_t n = count_of(&t.shape), size = pe_dtype_size(dt);
				unsigned char *vals = malloc(n * size + 1);
				for (size_t i = 0; i < n * size; i++)
					vals[i] = (unsigned char)(i * 37 + 11);
				if (dt == PE_F16) /* keep every f16 finite: clear a bit of each exponent */
					for (size_t i = 0; i < n; i++)
						vals[2 * i + 1] &= 0xbf;
				t.data = vals;
				struct pe_buf b;
				pe_buf_init(&b, 1 << 16);
				ck_assert_int_eq(pe_npy_write(&b, &t, NULL), 0);
				ck_assert_uint_eq(b.len, pe_npy_header_len(&t) + n * size);
				ck_assert_uint_eq(pe_npy_header_len(&t) % 64, 0);
				struct pe_tensor_view v;
				struct pe_err err;
				ck_assert_msg(pe_npy_parse(b.data, b.len, n, &v, &err) == 0, "%s", err.detail);
				ck_assert_int_eq(v.dtype, dt);
				ck_assert_int_eq(v.shape.rank, rank);
				for (int i = 0; i < rank; i++)
					ck_assert_uint_eq(v.shape.dim[i], dims[k][i]);
				ck_assert(n == 0 || memcmp(v.data, vals, n * size) == 0);
				pe_buf_destroy(&b);
				free(vals);
			}
}
END_TEST

/* ---- malformed input ---- */

/* A version-1 file with this dict (padded like NumPy) followed by `data`. */
static char *make_npy(int version, const char *dict, const void *data, size_t dlen, size_t *len)
{
	size_t pre = version == 1 ? 10 : 12, dl = strlen(dict);
	size_t hlen = dl + 1 + (64 - (pre + dl + 1) % 64) % 64;
	char *p = malloc(pre + hlen + dlen + 1);
	memcpy(p, "\x93NUMPY", 6);
	p[6] = (char)version;
	p[7] = 0;
	p[8] = (char)(hlen & 0xff);
	p[9] = (char)(hlen >> 8);
	if (version > 1)
		p[10] = p[11] = 0;
	memcpy(p + pre, dict, dl);
	memset(p + pre + dl, ' ', hlen - dl - 1);
	p[pre + hlen - 1] = '\n';
	if (dlen)
		memcpy(p + pre + hlen, data, dlen);
	*len = pre + hlen + dlen;
	return p;
}

static const float twelve[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};

/* Parse dict + data and expect rc with a detail containing `needle`. */
static void expect_fail_v(int version, const char *dict, size_t dlen, int rc, const char *needle)
{
	size_t len;
	char *p = make_npy(version, dict, twelve, dlen, &len);
	struct pe_tensor_view v;
	struct pe_err err;
	pe_err_clear(&err);
	ck_assert_msg(pe_npy_parse(p, len, 1000, &v, &err) == rc, "%s: accepted or wrong code (%s)", dict,
		      err.detail);
	ck_assert_int_eq(err.code, rc);
	ck_assert_msg(strstr(err.detail, needle) != NULL, "%s: detail '%s' lacks '%s'", dict, err.detail, needle);
	free(p);
}

static void expect_fail(const char *dict, const char *needle)
{
	expect_fail_v(1, dict, sizeof twelve, PE_EBODY, needle);
}

static void expect_ok_v(int version, const char *dict, enum pe_dtype dt, int rank, size_t d0, size_t d1)
{
	size_t len;
	char *p = make_npy(version, dict, twelve, sizeof twelve, &len);
	struct pe_tensor_view v;
	struct pe_err err;
	pe_err_clear(&err);
	ck_assert_msg(pe_npy_parse(p, len, 1000, &v, &err) == 0, "%s: %s", dict, err.detail);
	ck_assert_int_eq(v.dtype, dt);
	ck_assert_int_eq(v.shape.rank, rank);
	if (rank > 0)
		ck_assert_uint_eq(v.shape.dim[0], d0);
	if (rank > 1)
		ck_assert_uint_eq(v.shape.dim[1], d1);
	ck_assert(memcmp(v.data, twelve, sizeof twelve) == 0);
	free(p);
}

static void expect_ok(const char *dict, int rank, size_t d0, size_t d1)
{
	expect_ok_v(1, dict, PE_F32, rank, d0, d1);
}

/* The Python literal as NumPy reads it: any key order, either quote, whitespace, trailing commas. */
START_TEST(parse_header_variants)
{
	expect_ok("{'shape': (3, 4), 'fortran_order': False, 'descr': '<f4'}", 2, 3, 4);
	expect_ok("{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (3, 4)}", 2, 3, 4);
	expect_ok("{'descr':'<f4','fortran_order':False,'shape':(3,4)}", 2, 3, 4);
	expect_ok(" {\n\t'descr' : '<f4' ,\n 'fortran_order' : False ,\r\n 'shape' : ( 3 , 4 , ) , } ", 2, 3, 4);
	expect_ok("{'descr': '<f4', 'fortran_order': False, 'shape': (12,), }", 1, 12, 0);
	expect_ok("{'descr': '|f4', 'fortran_order': False, 'shape': (12,), }", 1, 12, 0);
	expect_ok("{'descr': '=f4', 'fortran_order': False, 'shape': (2, 6), }", 2, 2, 6);
	expect_ok("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 1, 6), }", 3, 2, 1);
	expect_ok("{'descr': '<f4', 'fortran_order': False, 'shape': (3L, 4L), }", 2, 3, 4); /* Python 2 */
	expect_ok_v(2, "{'descr': '<f8', 'fortran_order': False, 'shape': (6,), }", PE_F64, 1, 6, 0);
	expect_ok_v(3, "{'descr': '<i4', 'fortran_order': False, 'shape': (3, 4), }", PE_I32, 2, 3, 4);
	expect_ok_v(1, "{'descr': '<f2', 'fortran_order': False, 'shape': (24,), }", PE_F16, 1, 24, 0);
}
END_TEST

START_TEST(parse_bad_headers)
{
	expect_fail("{'descr': '<f4', 'fortran_order': False, 'shape': (12), }", "1-d shape");
	expect_fail("{'descr': '<f4', 'fortran_order': False, 'shape': 12, }", "'('");
	expect_fail("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), 'shape': (3, 4)}", "twice");
	expect_fail("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), 'extra': 1}", "unexpected key 'extra'");
	expect_fail("{'descr': '<f4', 'shape': (3, 4)}", "lacks 'fortran_order'");
	expect_fail("{'fortran_order': False, 'shape': (3, 4)}", "lacks 'descr'");
	expect_fail("{'descr': '<f4', 'fortran_order': False}", "lacks 'shape'");
	expect_fail("{}", "lacks");
	expect_fail("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4)} x", "only padding");
	expect_fail("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4)}}", "only padding");
	expect_fail("{'descr': '<f4', 'fortran_order': False, 'shape': (03, 4)}", "leading zeros");
	expect_fail("{'descr': '<f4', 'fortran_order': False, 'shape': (-3, -4)}", "non-negative integer");
	expect_fail("{'descr': '<f4', 'fortran_order': False, 'shape': (3.0, 4)}", "',' or ')'");
	expect_fail("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4,,)}", "non-negative integer");
	expect_fail("{'descr': '<f4', 'fortran_order': 0, 'shape': (3, 4)}", "True or False");
	expect_fail("{'descr': '<f4', 'fortran_order': Falsey, 'shape': (3, 4)}", "True or False");
	expect_fail("{'descr': <f4, 'fortran_order': False, 'shape': (3, 4)}", "quoted string");
	expect_fail("{'descr': '<f4, 'fortran_order': False, 'shape': (3, 4)}", "unsupported dtype '<f4, '");
	expect_fail("{'descr': '<f4\\x', 'fortran_order': False, 'shape': (3, 4)}", "plain ASCII");
	expect_fail("{'descr' '<f4', 'fortran_order': False, 'shape': (3, 4)}", "':'");
	expect_fail("{'descr': '<f4' 'fortran_order': False, 'shape': (3, 4)}", "',' or '}'");
	expect_fail("['descr', '<f4']", "'{'");
	expect_fail("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4)", "',' or '}'");
	expect_fail("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 12)}",
		    "more than 8 dimensions");
	/* 'L' suffixes only come from Python 2, which never wrote format 3.0 */
	expect_fail_v(3, "{'descr': '<f4', 'fortran_order': False, 'shape': (3L, 4L), }", sizeof twelve, PE_EBODY,
		      "',' or ')'");
	/* the error names the file offset: the '?' is dict byte 10, file byte 20 */
	expect_fail("{'descr': ?", "header byte 20");
}
END_TEST

START_TEST(parse_bad_dtypes)
{
	expect_fail("{'descr': '>f4', 'fortran_order': False, 'shape': (3, 4)}", "big-endian");
	expect_fail("{'descr': '>f8', 'fortran_order': False, 'shape': (6,)}", "big-endian");
	expect_fail("{'descr': '<i8', 'fortran_order': False, 'shape': (6,)}", "unsupported dtype '<i8'");
	expect_fail("{'descr': '<c8', 'fortran_order': False, 'shape': (6,)}", "unsupported dtype '<c8'");
	expect_fail("{'descr': 'float32', 'fortran_order': False, 'shape': (12,)}", "unsupported dtype 'float32'");
	expect_fail("{'descr': '<f4 ', 'fortran_order': False, 'shape': (12,)}", "unsupported dtype");
	expect_fail("{'descr': '', 'fortran_order': False, 'shape': (12,)}", "unsupported dtype ''");
	expect_fail("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (12,)}", "structured");
	expect_fail("{'descr': '<f4', 'fortran_order': True, 'shape': (3, 4)}", "fortran_order True");
}
END_TEST

/* NumPy's own fortran-order, big-endian and int64 files are refused by name. */
START_TEST(parse_numpy_unsupported)
{
	static const struct {
		const char *file, *needle;
	} cases[] = {{"fortran_f4_r2.npy", "fortran_order True"},
		     {"bigendian_f4_r2.npy", "big-endian data ('>f4')"},
		     {"i8_r1.npy", "unsupported dtype '<i8'"}};
	for (size_t c = 0; c < 3; c++) {
		size_t flen;
		char *file = fixture(cases[c].file, &flen);
		struct pe_tensor_view v;
		struct pe_err err;
		ck_assert_int_eq(pe_npy_parse(file, flen, 100, &v, &err), PE_EBODY);
		ck_assert_msg(strstr(err.detail, cases[c].needle), "%s: %s", cases[c].file, err.detail);
		ck_assert_str_eq(err.param, "body");
		free(file);
	}
}
END_TEST

START_TEST(parse_lying_shapes)
{
	/* 12 floats of data in every case */
	expect_fail("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 5)}", "truncated data: shape (3, 5) of f32 needs 60 bytes, 48 present");
	expect_fail("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 3)}", "12 bytes after the data");
	expect_fail("{'descr': '<f8', 'fortran_order': False, 'shape': (12,)}", "truncated data");
	expect_fail("{'descr': '<f2', 'fortran_order': False, 'shape': (12,)}", "24 bytes after the data");
	expect_fail("{'descr': '<f4', 'fortran_order': False, 'shape': ()}", "44 bytes after the data");
	expect_fail("{'descr': '<f4', 'fortran_order': False, 'shape': (0,)}", "48 bytes after the data");
	expect_fail_v(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4)}", 0, PE_EBODY, "truncated data");
	expect_fail_v(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4)}", 47, PE_EBODY,
		      "needs 48 bytes, 47 present");
}
END_TEST

START_TEST(parse_overflowing_shapes)
{
	expect_fail("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296)}",
		    "more elements than can exist");
	expect_fail("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904,)}",
		    "more elements than can exist"); /* fits size_t, but not times 4 bytes */
	expect_fail("{'descr': '<f4', 'fortran_order': False, 'shape': (18446744073709551616,)}", "too large");
	expect_fail("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999999999999, 1)}",
		    "too large");
	/* a zero dimension makes the count 0 whatever the others say: then 48 bytes are extra */
	expect_fail("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 18446744073709551615)}",
		    "48 bytes after the data");
}
END_TEST

START_TEST(parse_max_elements)
{
	size_t len;
	char *p = make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4)}", twelve, 48, &len);
	struct pe_tensor_view v;
	struct pe_err err;
	ck_assert_int_eq(pe_npy_parse(p, len, 12, &v, &err), 0);
	ck_assert_int_eq(pe_npy_parse(p, len, 11, &v, &err), PE_ETOOBIG);
	ck_assert_msg(strstr(err.detail, "12 elements, more than the limit of 11"), "%s", err.detail);
	ck_assert_int_eq(pe_npy_parse(p, len, 0, &v, &err), PE_ETOOBIG);
	free(p);
	/* checked before the bytes: a huge declared shape with little data is still "too big" */
	p = make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (100000, 100000)}", twelve, 48, &len);
	ck_assert_int_eq(pe_npy_parse(p, len, 1 << 20, &v, &err), PE_ETOOBIG);
	free(p);
}
END_TEST

START_TEST(parse_bad_preamble)
{
	size_t len;
	char *p = make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4)}", twelve, 48, &len);
	struct pe_tensor_view v;
	struct pe_err err;

	p[0] = 'x';
	ck_assert_int_eq(pe_npy_parse(p, len, 100, &v, &err), PE_EBODY);
	ck_assert_msg(strstr(err.detail, "not a .npy file"), "%s", err.detail);
	p[0] = (char)0x93;
	p[5] = 'x';
	ck_assert_int_eq(pe_npy_parse(p, len, 100, &v, &err), PE_EBODY);
	ck_assert_msg(strstr(err.detail, "not a .npy file"), "%s", err.detail);
	p[5] = 'Y';
	p[6] = 4;
	ck_assert_int_eq(pe_npy_parse(p, len, 100, &v, &err), PE_EBODY);
	ck_assert_msg(strstr(err.detail, "version 4.0 is not supported"), "%s", err.detail);
	p[6] = 1;
	p[7] = 1;
	ck_assert_int_eq(pe_npy_parse(p, len, 100, &v, &err), PE_EBODY);
	ck_assert_msg(strstr(err.detail, "version 1.1"), "%s", err.detail);
	p[7] = 0;
	p[6] = 0;
	ck_assert_int_eq(pe_npy_parse(p, len, 100, &v, &err), PE_EBODY);
	p[6] = 1;
	p[9] = 0x7f; /* header length far past the end */
	ck_assert_int_eq(pe_npy_parse(p, len, 100, &v, &err), PE_EBODY);
	ck_assert_msg(strstr(err.detail, "truncated header"), "%s", err.detail);
	p[9] = 0;
	ck_assert_int_eq(pe_npy_parse(p, len, 100, &v, &err), 0);
	ck_assert_int_eq(pe_npy_parse(p, 0, 100, &v, &err), PE_EBODY);
	ck_assert_msg(strstr(err.detail, "empty"), "%s", err.detail);
	ck_assert_int_eq(pe_npy_parse(NULL, 0, 100, &v, &err), PE_EBODY);
	ck_assert_int_eq(pe_npy_parse("PK\x03\x04", 4, 100, &v, &err), PE_EBODY); /* an .npz */
	ck_assert_msg(strstr(err.detail, "not a .npy file"), "%s", err.detail);
	free(p);
}
END_TEST

/* A 2.0 file whose header is hlen bytes: the dict, spaces, '\n'; then twelve's 48 bytes. */
static char *long_header_npy(size_t hlen, size_t *len)
{
	const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4)}";
	size_t dl = strlen(dict);
	char *p = malloc(12 + hlen + 48);
	memcpy(p, "\x93NUMPY\x02\x00", 8);
	for (int i = 0; i < 4; i++)
		p[8 + i] = (char)(hlen >> (8 * i) & 0xff);
	memcpy(p + 12, dict, dl);
	memset(p + 12 + dl, ' ', hlen - dl - 1);
	p[12 + hlen - 1] = '\n';
	memcpy(p + 12 + hlen, twelve, 48);
	*len = 12 + hlen + 48;
	return p;
}

/* A 2.0 header may declare 4 GiB; the reader takes at most pe_npy_header_max() bytes before the
 * data, so a body limit of data + pe_npy_header_max() admits every file it accepts. */
START_TEST(parse_header_length_capped)
{
	size_t len, most = pe_npy_header_max();
	struct pe_tensor_view v;
	struct pe_err err;
	char *p = long_header_npy(most - 12, &len);
	ck_assert_int_eq(pe_npy_parse(p, len, 100, &v, &err), 0);
	ck_assert_uint_eq(len, most + 48);
	ck_assert_ptr_eq(v.data, p + most);
	free(p);
	p = long_header_npy(most - 12 + 1, &len);
	ck_assert_int_eq(pe_npy_parse(p, len, 100, &v, &err), PE_EBODY);
	ck_assert_msg(strstr(err.detail, "more than the 65535 this reader accepts"), "%s", err.detail);
	free(p);
	/* refused from the preamble alone, however few bytes follow */
	unsigned char pre[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', 3, 0, 0xff, 0xff, 0xff, 0xff};
	ck_assert_int_eq(pe_npy_parse(pre, sizeof pre, 100, &v, &err), PE_EBODY);
	ck_assert_msg(strstr(err.detail, "header declares 4294967295 bytes"), "%s", err.detail);
}
END_TEST

/* Every proper prefix of a valid file is an error with a detail; the whole file parses. */
static void truncate_everywhere(const char *name)
{
	size_t flen;
	char *file = fixture(name, &flen);
	for (size_t k = 0; k < flen; k++) {
		/* a fresh allocation of exactly k bytes, so ASan catches any read past the end */
		char *p = malloc(k ? k : 1);
		memcpy(p, file, k);
		struct pe_tensor_view v;
		struct pe_err err;
		pe_err_clear(&err);
		ck_assert_msg(pe_npy_parse(p, k, 1000, &v, &err) == PE_EBODY, "%s cut at %zu accepted", name, k);
		ck_assert_msg(err.detail[0] != 0, "%s cut at %zu: no detail", name, k);
		if (k >= 6 && k < 128)
			ck_assert_msg(strstr(err.detail, "truncated"), "%s cut at %zu: %s", name, k, err.detail);
		free(p);
	}
	struct pe_tensor_view v;
	ck_assert_int_eq(pe_npy_parse(file, flen, 1000, &v, NULL), 0);
	free(file);
}

START_TEST(parse_truncated_everywhere)
{
	truncate_everywhere("f4_r2.npy");
	truncate_everywhere("f8_r0.npy");
	truncate_everywhere("f2_r3.npy");
	truncate_everywhere("i4_r1.npy");
	truncate_everywhere("v2_f4_r2.npy");
	truncate_everywhere("v3_f8_r3.npy");
}
END_TEST

START_TEST(parse_extra_bytes)
{
	size_t flen;
	char *file = fixture("f4_r2.npy", &flen);
	char *p = malloc(flen + 1);
	memcpy(p, file, flen);
	p[flen] = 0;
	struct pe_tensor_view v;
	struct pe_err err;
	ck_assert_int_eq(pe_npy_parse(p, flen + 1, 1000, &v, &err), PE_EBODY);
	ck_assert_msg(strstr(err.detail, "1 bytes after the data"), "%s", err.detail);
	free(p);
	free(file);
}
END_TEST

/* A header of odd length puts the data at an odd offset: still parsed, nothing assumes alignment. */
START_TEST(parse_unaligned_data)
{
	const char dict[] = "{'descr':'<f8','fortran_order':False,'shape':(2,)}\n";
	size_t dl = sizeof dict - 1;
	ck_assert_uint_eq((10 + dl) % 2, 1);
	double vals[2] = {1.5, -2.25};
	char *p = malloc(10 + dl + 16);
	memcpy(p, "\x93NUMPY\x01\x00", 8);
	p[8] = (char)dl;
	p[9] = 0;
	memcpy(p + 10, dict, dl);
	memcpy(p + 10 + dl, vals, 16);
	struct pe_tensor_view v;
	struct pe_err err;
	ck_assert_msg(pe_npy_parse(p, 10 + dl + 16, 10, &v, &err) == 0, "%s", err.detail);
	ck_assert_ptr_eq(v.data, p + 10 + dl);
	double got[2];
	memcpy(got, v.data, 16);
	ck_assert(got[0] == 1.5 && got[1] == -2.25);
	free(p);
}
END_TEST

START_TEST(write_bf16_refused)
{
	uint16_t h[2] = {0x3f80, 0x4000};
	size_t dim[] = {2};
	struct pe_tensor_view t = {make_shape(1, dim), PE_BF16, h};
	struct pe_buf b;
	struct pe_err err;
	pe_buf_init(&b, 1024);
	ck_assert_int_eq(pe_npy_write(&b, &t, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "dtype");
	ck_assert_msg(strstr(err.detail, "format=bin"), "%s", err.detail);
	ck_assert_uint_eq(b.len, 0);
	ck_assert_uint_eq(pe_npy_header_len(&t), 0);
	pe_buf_destroy(&b);
}
END_TEST

START_TEST(write_over_limit)
{
	size_t dim[] = {3, 4};
	struct pe_tensor_view t = {make_shape(2, dim), PE_F32, twelve};
	struct pe_buf b;
	struct pe_err err;
	pe_buf_init(&b, 128 + 47);
	ck_assert_int_eq(pe_npy_write(&b, &t, &err), PE_ETOOBIG);
	ck_assert_uint_eq(b.len, 0);
	pe_buf_destroy(&b);
	pe_buf_init(&b, 128 + 48);
	ck_assert_int_eq(pe_npy_write(&b, &t, &err), 0);
	ck_assert_uint_eq(b.len, 176);
	pe_buf_destroy(&b);
}
END_TEST

/* The writer appends: whatever the buffer held stays in front. */
START_TEST(write_appends)
{
	size_t dim[] = {12};
	struct pe_tensor_view t = {make_shape(1, dim), PE_F32, twelve};
	struct pe_buf b;
	pe_buf_init(&b, 4096);
	ck_assert_int_eq(pe_buf_puts(&b, "abc"), 0);
	ck_assert_int_eq(pe_npy_write(&b, &t, NULL), 0);
	ck_assert_uint_eq(b.len, 3 + 128 + 48);
	struct pe_tensor_view v;
	ck_assert_int_eq(pe_npy_parse(b.data + 3, b.len - 3, 12, &v, NULL), 0);
	pe_buf_destroy(&b);
}
END_TEST

static Suite *npy_suite(void)
{
	Suite *s = suite_create("npy");
	TCase *w = tcase_create("write");
	tcase_add_loop_test(w, write_matches_numpy, 0, NFILES);
	tcase_add_test(w, write_matches_numpy_aligned);
	tcase_add_test(w, write_bf16_refused);
	tcase_add_test(w, write_over_limit);
	tcase_add_test(w, write_appends);
	tcase_add_test(w, round_trip);
	suite_add_tcase(s, w);
	TCase *p = tcase_create("parse");
	tcase_set_timeout(p, 60);
	tcase_add_loop_test(p, parse_numpy_files, 0, NFILES);
	tcase_add_test(p, parse_versions_2_and_3);
	tcase_add_test(p, parse_header_variants);
	tcase_add_test(p, parse_bad_headers);
	tcase_add_test(p, parse_bad_dtypes);
	tcase_add_test(p, parse_numpy_unsupported);
	tcase_add_test(p, parse_lying_shapes);
	tcase_add_test(p, parse_overflowing_shapes);
	tcase_add_test(p, parse_max_elements);
	tcase_add_test(p, parse_bad_preamble);
	tcase_add_test(p, parse_header_length_capped);
	tcase_add_test(p, parse_truncated_everywhere);
	tcase_add_test(p, parse_extra_bytes);
	tcase_add_test(p, parse_unaligned_data);
	suite_add_tcase(s, p);
	return s;
}

PE_TEST_MAIN(npy_suite)
