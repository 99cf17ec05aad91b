/* NumPy .npy files: written byte for byte as NumPy 1.24's np.save writes them, and parsed strictly.
 *
 * Writing: format 1.0; the header dict is "{'descr': '<f4', 'fortran_order': False, 'shape': (512,
 * 768), }" followed, like NumPy >= 1.24, by 21 - len(str(shape[0])) spare spaces (room to grow the
 * first axis in place), then spaces and a final '\n' up to the next multiple of 64 bytes. NumPy
 * never pads by zero bytes: an already aligned header gets 64 more. tests/data/npy holds files made
 * by NumPy itself that the tests compare against.
 *
 * Parsing: versions 1.0, 2.0 and 3.0. The header is read as the Python literal NumPy evaluates
 * (keys in any order, whitespace between tokens, optional trailing commas, either quote), but only
 * the three keys and the value forms NumPy produces are accepted; nothing in the header is trusted:
 * every dimension and the element count are computed without overflow, the count is bounded by
 * the caller's max_elements, and the bytes after the header must hold exactly count * size bytes.
 * The data is never touched, so its alignment does not matter here; the view points into the
 * caller's memory at whatever offset the header gives. Errors name the byte where parsing failed. */
#include "posenc/tensor.h"
#include "tensor/internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "posenc assumes a little-endian host"
#endif

#define MAGIC "\x93NUMPY"
#define MAGIC_LEN 6
#define ALIGN 64
#define GROWTH_DIGITS 21 /* NumPy's GROWTH_AXIS_MAX_DIGITS */
#define DICT_MAX 512     /* the longest dict we write: rank 8 of 20-digit dims is < 300 bytes */
/* The longest header the parser reads, in every version: what a 1.0 header's 2-byte length can say.
 * A 2.0/3.0 header may declare 4 GiB, but the three keys it may hold fit in a few hundred bytes. */
#define HEADER_LEN_MAX 65535u
#define PREAMBLE_MAX 12 /* magic, version and a 4-byte header length (2.0, 3.0) */

/* ---- writing ---- */

static const char *descr_of(enum pe_dtype dt)
{
	switch (dt) {
	case PE_F32:
		return "<f4";
	case PE_F64:
		return "<f8";
	case PE_F16:
		return "<f2";
	case PE_I32:
		return "<i4";
	default:
		return NULL;
	}
}

/* Python's repr of the shape tuple: "()", "(5,)", "(2, 3)". */
static size_t shape_repr(const struct pe_shape *s, char *out, size_t cap)
{
	size_t n = (size_t)snprintf(out, cap, "(");
	for (int i = 0; i < s->rank && n < cap; i++)
		n += (size_t)snprintf(out + n, cap - n, "%s%zu", i ? ", " : "", s->dim[i]);
	if (n < cap)
		n += (size_t)snprintf(out + n, cap - n, s->rank == 1 ? ",)" : ")");
	return n < cap ? n : cap - 1;
}

/* The unpadded dict plus NumPy's growth spaces; returns its length (0 for an unwritable view). */
static size_t header_dict(const struct pe_tensor_view *t, char *out)
{
	const char *descr = descr_of(t->dtype);
	char shape[DICT_MAX / 2], first[24];
	if (!descr || t->shape.rank < 0 || t->shape.rank > PE_MAX_RANK)
		return 0;
	shape_repr(&t->shape, shape, sizeof shape);
	size_t n = (size_t)snprintf(out, DICT_MAX, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
				    descr, shape);
	if (t->shape.rank > 0) {
		size_t digits = (size_t)snprintf(first, sizeof first, "%zu", t->shape.dim[0]);
		memset(out + n, ' ', GROWTH_DIGITS - digits);
		n += GROWTH_DIGITS - digits;
	}
	return n;
}

/* Bytes of magic, version and length field before the dict, for format 1.0. */
#define PREAMBLE_V1 (MAGIC_LEN + 2 + 2)

static size_t padded_len(size_t dict_len)
{
	size_t unpadded = PREAMBLE_V1 + dict_len + 1; /* + '\n' */
	return unpadded + (ALIGN - unpadded % ALIGN);
}

/* The whole preamble, magic through the final '\n': the offset of the data, a multiple of 64.
 * 0 when npy cannot hold the view (bf16, bad rank). */
size_t pe_npy_header_len(const struct pe_tensor_view *t)
{
	char dict[DICT_MAX];
	size_t n = header_dict(t, dict);
	return n ? padded_len(n) : 0;
}

size_t pe_npy_bound(const struct pe_shape *s, enum pe_dtype dt)
{
	struct pe_tensor_view t = {.shape = *s, .dtype = dt};
	size_t hdr = dt == PE_BF16 ? 0 : pe_npy_header_len(&t);
	return hdr ? pe_sat_add(hdr, pe_sat_mul(pe_shape_count_sat(s), pe_dtype_size(dt))) : SIZE_MAX;
}

/* Write the whole padded header at out (which has padded_len(dict_len) bytes). */
static void put_header(char *out, const char *dict, size_t dict_len)
{
	size_t total = padded_len(dict_len), hlen = total - PREAMBLE_V1;
	memcpy(out, MAGIC, MAGIC_LEN);
	out[6] = 1;
	out[7] = 0;
	out[8] = (char)(hlen & 0xff);
	out[9] = (char)(hlen >> 8);
	memcpy(out + PREAMBLE_V1, dict, dict_len);
	memset(out + PREAMBLE_V1 + dict_len, ' ', hlen - dict_len - 1);
	out[total - 1] = '\n';
}

size_t pe_npy_write_header(char *out, const struct pe_tensor_view *t)
{
	char dict[DICT_MAX];
	size_t dict_len = t->dtype == PE_BF16 ? 0 : header_dict(t, dict);
	if (dict_len)
		put_header(out, dict, dict_len);
	return dict_len ? padded_len(dict_len) : 0;
}

int pe_npy_write(struct pe_buf *b, const struct pe_tensor_view *t, struct pe_err *err)
{
	char dict[DICT_MAX];
	if (t->dtype == PE_BF16)
		return pe_err_set(err, PE_EINVAL, "dtype",
				  "bf16 has no NumPy dtype, so it cannot be sent as npy; use format=bin for raw "
				  "bf16, or dtype=f32");
	size_t dict_len = header_dict(t, dict);
	if (dict_len == 0)
		return pe_err_set(err, PE_EINVAL, "dtype", "npy cannot hold dtype %s at rank %d",
				  pe_dtype_name(t->dtype), t->shape.rank);
	int overflow;
	size_t count = pe_shape_count(&t->shape, &overflow), size = pe_dtype_size(t->dtype);
	size_t hdr = padded_len(dict_len);
	if (overflow || count > (SIZE_MAX - hdr) / size)
		return pe_err_set(err, PE_ETOOBIG, "", "npy output does not fit in memory");
	size_t total = hdr + count * size;
	int rc = pe_buf_reserve(b, total);
	if (rc != 0)
		return pe_err_set(err, rc, "", rc == PE_ETOOBIG ? "npy output of %zu bytes exceeds the limit of %zu bytes"
								 : "out of memory for %zu bytes of npy (limit %zu)",
				  total, b->max);
	put_header(b->data + b->len, dict, dict_len);
	if (count)
		memcpy(b->data + b->len + hdr, t->data, count * size);
	b->len += total;
	return 0;
}

/* ---- parsing ---- */

/* A cursor over the header text; `base` turns an index into a file offset for messages. */
struct hdr {
	const char *s;
	size_t i, n, base;
	int version;
	int index; /* pe_npy_parse_index: '<i8' is accepted too */
	int wide;  /* the data is '<i8' */
	struct pe_err *err;
};

static int fail(struct pe_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct pe_err *err, const char *fmt, ...)
{
	char msg[PE_ERR_DETAIL_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return pe_err_set(err, PE_EBODY, "body", "npy: %s", msg);
}

/* Failure at the cursor: names the file offset and what was found there. */
static int fail_at(struct hdr *h, const char *expected)
{
	char found[16];
	if (h->i >= h->n)
		snprintf(found, sizeof found, "end of header");
	else if (h->s[h->i] >= 0x20 && h->s[h->i] < 0x7f)
		snprintf(found, sizeof found, "'%c'", h->s[h->i]);
	else
		snprintf(found, sizeof found, "byte 0x%02x", (unsigned char)h->s[h->i]);
	return fail(h->err, "header byte %zu: expected %s, found %s", h->base + h->i, expected, found);
}

/* Whitespace as Python's tokenizer skips it inside brackets (NumPy pads with ' ' and '\n'). */
static void skip_ws(struct hdr *h)
{
	while (h->i < h->n) {
		char c = h->s[h->i];
		if (c != ' ' && c != '\t' && c != '\f' && c != '\r' && c != '\n')
			break;
		h->i++;
	}
}

static int peek(struct hdr *h) { return h->i < h->n ? (unsigned char)h->s[h->i] : -1; }

static int expect(struct hdr *h, char c, const char *what)
{
	skip_ws(h);
	if (peek(h) != (unsigned char)c)
		return fail_at(h, what);
	h->i++;
	return 0;
}

/* A quoted string of printable ASCII without escapes: all any valid key or descr needs. */
static int parse_str(struct hdr *h, const char **str, size_t *len)
{
	skip_ws(h);
	int q = peek(h);
	if (q != '\'' && q != '"')
		return fail_at(h, "a quoted string");
	size_t start = ++h->i;
	while (h->i < h->n && h->s[h->i] != q) {
		unsigned char c = (unsigned char)h->s[h->i];
		if (c == '\\' || c < 0x20 || c >= 0x7f)
			return fail_at(h, "a plain ASCII character in a string");
		h->i++;
	}
	if (h->i >= h->n)
		return fail_at(h, "the closing quote");
	*str = h->s + start;
	*len = h->i - start;
	h->i++;
	return 0;
}

static int is_ident(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; }

static int word_at(struct hdr *h, const char *w)
{
	size_t n = strlen(w);
	if (h->n - h->i < n || memcmp(h->s + h->i, w, n) != 0)
		return 0;
	if (h->i + n < h->n && is_ident((unsigned char)h->s[h->i + n]))
		return 0;
	h->i += n;
	return 1;
}

static int parse_fortran(struct hdr *h, int *fortran)
{
	skip_ws(h);
	if (word_at(h, "False"))
		*fortran = 0;
	else if (word_at(h, "True"))
		*fortran = 1;
	else
		return fail_at(h, "True or False for 'fortran_order'");
	return 0;
}

static int parse_descr(struct hdr *h, enum pe_dtype *dt)
{
	static const struct {
		const char *code;
		enum pe_dtype dt;
	} codes[] = {{"f4", PE_F32}, {"f8", PE_F64}, {"f2", PE_F16}, {"i4", PE_I32}};
	const char *s;
	size_t n;
	skip_ws(h);
	if (peek(h) == '[')
		return fail(h->err, "header byte %zu: structured dtypes are not supported; send a plain "
				    "'<f4', '<f8', '<f2' or '<i4' array", h->base + h->i);
	if (parse_str(h, &s, &n) != 0)
		return PE_EBODY;
	for (size_t k = 0; n == 3 && k < sizeof codes / sizeof codes[0]; k++) {
		if (memcmp(s + 1, codes[k].code, 2) != 0)
			continue;
		if (s[0] == '>')
			return fail(h->err, "big-endian data ('%.3s') is not supported; save little-endian "
					    "data, e.g. a.astype('<%s')", s, codes[k].code);
		/* '=' and '|' mean native order to NumPy's reader; posenc hosts are little-endian. */
		if (s[0] == '<' || s[0] == '=' || s[0] == '|') {
			*dt = codes[k].dt;
			return 0;
		}
	}
	if (h->index && n == 3 && s[0] != '>' && !memcmp(s + 1, "i8", 2)) {
		*dt = PE_I32;
		h->wide = 1;
		return 0;
	}
	return fail(h->err, "unsupported dtype '%.*s'; expected %s", (int)(n > 32 ? 32 : n), s,
		    h->index ? "'<i4' or '<i8'" : "'<f4', '<f8', '<f2' or '<i4'");
}

/* One non-negative Python int literal; Python 2 writers may append 'L' (format 1.0 and 2.0). */
static int parse_dim(struct hdr *h, size_t *dim)
{
	size_t start, v = 0;
	skip_ws(h);
	start = h->i;
	if (peek(h) < '0' || peek(h) > '9')
		return fail_at(h, "a non-negative integer in 'shape'");
	if (peek(h) == '0' && h->i + 1 < h->n && h->s[h->i + 1] >= '0' && h->s[h->i + 1] <= '9')
		return fail_at(h, "an integer without leading zeros");
	while (h->i < h->n && h->s[h->i] >= '0' && h->s[h->i] <= '9') {
		unsigned d = (unsigned)(h->s[h->i] - '0');
		if (v > (SIZE_MAX - d) / 10)
			return fail(h->err, "header byte %zu: shape dimension %.*s... is too large", h->base + start,
				    (int)(h->i - start > 24 ? 24 : h->i - start), h->s + start);
		v = v * 10 + d;
		h->i++;
	}
	if (h->version <= 2 && peek(h) == 'L')
		h->i++;
	if (is_ident(peek(h)))
		return fail_at(h, "',' or ')' after a dimension");
	*dim = v;
	return 0;
}

/* A tuple: "()", "(n,)", "(a, b)", "(a, b,)". "(n)" is an int in Python, not a tuple. */
static int parse_shape(struct hdr *h, struct pe_shape *s)
{
	int rc = expect(h, '(', "'(' opening the 'shape' tuple");
	if (rc != 0)
		return rc;
	s->rank = 0;
	skip_ws(h);
	if (peek(h) == ')') {
		h->i++;
		return 0;
	}
	for (;;) {
		if (s->rank == PE_MAX_RANK)
			return fail(h->err, "header byte %zu: shape has more than %d dimensions",
				    h->base + h->i, PE_MAX_RANK);
		if ((rc = parse_dim(h, &s->dim[s->rank])) != 0)
			return rc;
		s->rank++;
		skip_ws(h);
		if (peek(h) == ')') {
			if (s->rank == 1)
				return fail_at(h, "',' (a 1-d shape is written '(n,)')");
			break;
		}
		if ((rc = expect(h, ',', "',' or ')' in 'shape'")) != 0)
			return rc;
		skip_ws(h);
		if (peek(h) == ')')
			break;
	}
	h->i++;
	return 0;
}

enum { KEY_DESCR = 1, KEY_FORTRAN = 2, KEY_SHAPE = 4 };

struct header {
	enum pe_dtype dt;
	int fortran;
	struct pe_shape shape;
};

static int parse_entry(struct hdr *h, unsigned *seen, struct header *out)
{
	const char *key;
	size_t n, at;
	skip_ws(h);
	at = h->base + h->i;
	int rc = parse_str(h, &key, &n);
	if (rc != 0)
		return rc;
	unsigned k = n == 5 && !memcmp(key, "descr", 5)           ? KEY_DESCR
		     : n == 13 && !memcmp(key, "fortran_order", 13) ? KEY_FORTRAN
		     : n == 5 && !memcmp(key, "shape", 5)           ? KEY_SHAPE
								    : 0;
	if (!k)
		return fail(h->err, "header byte %zu: unexpected key '%.*s' (only 'descr', 'fortran_order' "
				    "and 'shape' are allowed)", at, (int)(n > 32 ? 32 : n), key);
	if (*seen & k)
		return fail(h->err, "header byte %zu: key '%.*s' appears twice", at, (int)n, key);
	*seen |= k;
	if ((rc = expect(h, ':', "':' after a key")) != 0)
		return rc;
	if (k == KEY_DESCR)
		return parse_descr(h, &out->dt);
	if (k == KEY_FORTRAN)
		return parse_fortran(h, &out->fortran);
	return parse_shape(h, &out->shape);
}

static int parse_dict(struct hdr *h, struct header *out)
{
	unsigned seen = 0;
	int rc = expect(h, '{', "'{' opening the header dict");
	if (rc != 0)
		return rc;
	for (;;) {
		skip_ws(h);
		if (peek(h) == '}')
			break;
		if ((rc = parse_entry(h, &seen, out)) != 0)
			return rc;
		skip_ws(h);
		if (peek(h) == '}')
			break;
		if ((rc = expect(h, ',', "',' or '}' in the header dict")) != 0)
			return rc;
	}
	h->i++;
	skip_ws(h);
	if (h->i != h->n)
		return fail_at(h, "only padding after the header dict");
	if (seen != (KEY_DESCR | KEY_FORTRAN | KEY_SHAPE))
		return fail(h->err, "header lacks %s", !(seen & KEY_DESCR)     ? "'descr'"
						       : !(seen & KEY_FORTRAN) ? "'fortran_order'"
									       : "'shape'");
	if (out->fortran)
		return fail(h->err, "fortran_order True is not supported; save a C-ordered array "
				    "(np.ascontiguousarray(a))");
	return 0;
}

/* Magic, version and header length; sets *off to the first byte of the dict. */
static int parse_preamble(const unsigned char *p, size_t len, int *version, size_t *hlen, size_t *off,
			  struct pe_err *err)
{
	if (len == 0)
		return fail(err, "empty body");
	if (memcmp(p, MAGIC, len < MAGIC_LEN ? len : MAGIC_LEN) != 0)
		return fail(err, "not a .npy file (the magic string \\x93NUMPY is missing)");
	if (len < MAGIC_LEN + 2)
		return fail(err, "truncated: %zu bytes, shorter than the magic string and version", len);
	if (p[6] < 1 || p[6] > 3 || p[7] != 0)
		return fail(err, "format version %u.%u is not supported (1.0, 2.0 and 3.0 are)", p[6], p[7]);
	*version = p[6];
	*off = *version == 1 ? 10 : 12;
	if (len < *off)
		return fail(err, "truncated: %zu bytes, shorter than the %zu-byte preamble", len, *off);
	*hlen = (size_t)p[8] | (size_t)p[9] << 8;
	if (*version > 1)
		*hlen |= (size_t)p[10] << 16 | (size_t)p[11] << 24;
	if (*hlen > HEADER_LEN_MAX)
		return fail(err, "header declares %zu bytes, more than the %u this reader accepts", *hlen,
			    HEADER_LEN_MAX);
	if (*hlen > len - *off)
		return fail(err, "truncated header: it declares %zu bytes but only %zu follow the preamble",
			    *hlen, len - *off);
	return 0;
}

/* Element count within max_elements, and exactly count * size data bytes. */
static int check_data(const struct header *hd, size_t size, size_t avail, size_t max_elements, struct pe_err *err)
{
	char sh[PE_MAX_RANK * 22 + 8];
	int overflow;
	size_t count = pe_shape_count(&hd->shape, &overflow);
	shape_repr(&hd->shape, sh, sizeof sh);
	if (overflow || count > SIZE_MAX / size)
		return fail(err, "shape %s has more elements than can exist", sh);
	if (count > max_elements)
		return pe_err_set(err, PE_ETOOBIG, "body",
				  "npy: shape %s has %zu elements, more than the limit of %zu", sh, count,
				  max_elements);
	if (avail < count * size)
		return fail(err, "truncated data: shape %s of %s needs %zu bytes, %zu present", sh,
			    size == 8 && hd->dt == PE_I32 ? "i64" : pe_dtype_name(hd->dt), count * size, avail);
	if (avail > count * size)
		return fail(err, "%zu bytes after the data: shape %s of %s needs %zu bytes, %zu present",
			    avail - count * size, sh, size == 8 && hd->dt == PE_I32 ? "i64" : pe_dtype_name(hd->dt),
			    count * size, avail);
	return 0;
}

static int parse_npy(const void *data, size_t len, size_t max_elements, int index, int *wide,
		     struct pe_tensor_view *out, struct pe_err *err)
{
	const unsigned char *p = data;
	int version = 0;
	size_t hlen = 0, off = 0;
	struct header hd;
	memset(&hd, 0, sizeof hd);
	memset(out, 0, sizeof *out);
	int rc = parse_preamble(p, len, &version, &hlen, &off, err);
	if (rc != 0)
		return rc;
	struct hdr h = {.s = (const char *)p + off, .i = 0, .n = hlen, .base = off, .version = version,
			.index = index, .err = err};
	if ((rc = parse_dict(&h, &hd)) != 0)
		return rc;
	size_t data_off = off + hlen;
	if ((rc = check_data(&hd, h.wide ? 8 : pe_dtype_size(hd.dt), len - data_off, max_elements, err)) != 0)
		return rc;
	out->shape = hd.shape;
	out->dtype = hd.dt;
	out->data = p + data_off;
	if (wide)
		*wide = h.wide;
	return 0;
}

size_t pe_npy_header_max(void) { return PREAMBLE_MAX + HEADER_LEN_MAX; }

int pe_npy_parse(const void *data, size_t len, size_t max_elements, struct pe_tensor_view *out,
		 struct pe_err *err)
{
	return parse_npy(data, len, max_elements, 0, NULL, out, err);
}

int pe_npy_parse_index(const void *data, size_t len, size_t max_elements, struct pe_tensor_view *out, int *wide,
		       struct pe_err *err)
{
	*wide = 0;
	return parse_npy(data, len, max_elements, 1, wide, out, err);
}
