/* libFuzzer target: shortest round-trip printing (src/tensor/shortest.c).
 *
 * The input's bytes are taken as the bits of one f64, one f32, one f16, one bf16 and one i32
 * (missing bytes are zero). Each finite value is printed into an exactly PE_NUM_MAX-byte heap
 * buffer (ASan sees a write past it) and must (a) be a JSON number (RFC 8259 grammar), (b) read
 * back to the identical bits: strtod for f64, strtof and also strtod-then-(float) for f32 (what a
 * JSON reader that parses to double and then narrows gets), strtod then round-to-nearest-even
 * into f16/bf16 (exact: their interval ends are doubles with few bits), (c) be shortest: the
 * correctly rounded decimal with one significant digit fewer must not read back. Non-finite
 * values must print as NaN / Infinity / -Infinity. i32 elements print as printf's %d. Bytes 20-51
 * are eight float32 values for pe_fmt_list (eight at a time on the AVX-512 tier), which must write
 * what pe_fmt_f32 writes one by one, within the buffer size its contract asks for. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc/posenc.h"
#include "tensor/internal.h"

#define FAIL(...)                                                   \
	do {                                                        \
		fprintf(stderr, "fuzz_shortest: " __VA_ARGS__);     \
		fputc('\n', stderr);                                \
		abort();                                            \
	} while (0)

enum kind { K_F64, K_F32, K_F16, K_BF16 };
static const char *const kind_name[] = {"f64", "f32", "f16", "bf16"};

/* JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? and nothing else. */
static int json_number(const char *s)
{
	const char *p = s;
	if (*p == '-')
		p++;
	if (*p == '0')
		p++;
	else if (*p >= '1' && *p <= '9')
		while (*p >= '0' && *p <= '9')
			p++;
	else
		return 0;
	if (*p == '.') {
		p++;
		if (*p < '0' || *p > '9')
			return 0;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (*p < '0' || *p > '9')
			return 0;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	return *p == 0;
}

/* Significant digits of a decimal string (leading zeros and trailing zeros of the digit run
 * do not count: "100" has 1, "0.0012" has 2, "1.50e3" has 2). */
static int significant_digits(const char *s)
{
	char d[64];
	int n = 0;
	for (const char *p = s; *p && *p != 'e' && *p != 'E'; p++)
		if (*p >= '0' && *p <= '9' && n < 63)
			d[n++] = *p;
	int a = 0;
	while (a < n && d[a] == '0')
		a++;
	while (n > a && d[n - 1] == '0')
		n--;
	return n - a;
}

static double small_to_double(enum kind k, uint16_t h)
{
	return k == K_F16 ? (double)pe_f16_to_f32(h) : (double)pe_bf16_to_f32(h);
}

/* Does decimal text s read back to exactly the value with these bits? */
static int reads_back(enum kind k, uint64_t bits, const char *s)
{
	double d = strtod(s, NULL);
	switch (k) {
	case K_F64: {
		uint64_t b;
		memcpy(&b, &d, 8);
		return b == bits;
	}
	case K_F32: {
		float f = strtof(s, NULL);
		uint32_t b;
		memcpy(&b, &f, 4);
		return b == (uint32_t)bits;
	}
	case K_F16:
		return pe_f64_to_f16(d) == (uint16_t)bits;
	case K_BF16:
		return pe_f64_to_bf16(d) == (uint16_t)bits;
	}
	return 0;
}

static void check_one(enum kind k, uint64_t bits)
{
	char *buf = malloc(PE_NUM_MAX), s[PE_NUM_MAX + 1], fewer[64];
	size_t n = 0;
	double x = 0;
	if (!buf)
		abort();
	switch (k) {
	case K_F64:
		memcpy(&x, &bits, 8);
		n = pe_fmt_f64(x, buf);
		break;
	case K_F32: {
		uint32_t b = (uint32_t)bits;
		float f;
		memcpy(&f, &b, 4);
		x = f;
		n = pe_fmt_f32(f, buf);
		break;
	}
	case K_F16:
		x = small_to_double(k, (uint16_t)bits);
		n = pe_fmt_f16((uint16_t)bits, buf);
		break;
	case K_BF16:
		x = small_to_double(k, (uint16_t)bits);
		n = pe_fmt_bf16((uint16_t)bits, buf);
		break;
	}
	if (n == 0 || n >= PE_NUM_MAX)
		FAIL("%s bits %#llx: length %zu", kind_name[k], (unsigned long long)bits, n);
	memcpy(s, buf, n);
	s[n] = 0;
	free(buf);
	if (isnan(x)) {
		if (strcmp(s, "NaN") != 0)
			FAIL("%s bits %#llx: NaN printed as '%s'", kind_name[k], (unsigned long long)bits, s);
		return;
	}
	if (isinf(x)) {
		if (strcmp(s, x > 0 ? "Infinity" : "-Infinity") != 0)
			FAIL("%s bits %#llx: infinity printed as '%s'", kind_name[k], (unsigned long long)bits, s);
		return;
	}
	if (!json_number(s))
		FAIL("%s bits %#llx (%.17g): '%s' is not a JSON number", kind_name[k], (unsigned long long)bits, x, s);
	if (!reads_back(k, bits, s))
		FAIL("%s bits %#llx (%.17g): '%s' does not read back", kind_name[k], (unsigned long long)bits, x, s);
	if (k == K_F32) {
		float via_double = (float)strtod(s, NULL);
		uint32_t b;
		memcpy(&b, &via_double, 4);
		if (b != (uint32_t)bits)
			FAIL("f32 bits %#x: '%s' read as a double then narrowed gives %#x", (unsigned)bits, s, b);
	}
	if ((signbit(x) != 0) != (s[0] == '-'))
		FAIL("%s bits %#llx: sign lost in '%s'", kind_name[k], (unsigned long long)bits, s);
	int digits = significant_digits(s);
	if (x != 0 && digits > 1) {
		snprintf(fewer, sizeof fewer, "%.*e", digits - 2, x);
		if (reads_back(k, bits, fewer))
			FAIL("%s bits %#llx: '%s' is not shortest ('%s' reads back too)", kind_name[k],
			     (unsigned long long)bits, s, fewer);
	}
}

static void check_i32(int32_t v)
{
	struct pe_tensor_view t = {.shape = {.rank = 1, .dim = {1}}, .dtype = PE_I32, .data = &v};
	char *buf = malloc(PE_NUM_MAX), want[32];
	if (!buf)
		abort();
	size_t n = pe_fmt_elem(&t, 0, buf);
	snprintf(want, sizeof want, "%d", (int)v);
	if (n != strlen(want) || memcmp(buf, want, n) != 0)
		FAIL("i32 %d printed as '%.*s'", (int)v, (int)(n < PE_NUM_MAX ? n : PE_NUM_MAX), buf);
	free(buf);
}

static void check_list8(const uint8_t *bytes)
{
	float v[8];
	memcpy(v, bytes, sizeof v);
	struct pe_tensor_view t = {.shape = {.rank = 1, .dim = {8}}, .dtype = PE_F32, .data = v};
	char want[8 * PE_NUM_MAX], *got = malloc(8 * pe_fmt_width(PE_F32) + PE_NUM_MAX);
	if (!got)
		abort();
	size_t w = 0;
	for (int i = 0; i < 8; i++) {
		if (i)
			want[w++] = ',';
		w += pe_fmt_f32(v[i], want + w);
	}
	size_t g = pe_fmt_list(&t, 0, 8, got);
	if (g != w || memcmp(got, want, w) != 0)
		FAIL("pe_fmt_list wrote '%.*s' for '%.*s'", (int)g, got, (int)w, want);
	free(got);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t b[52] = {0};
	memcpy(b, data, size < sizeof b ? size : sizeof b);
	uint64_t u64;
	uint32_t u32;
	uint16_t u16a, u16b;
	memcpy(&u64, b, 8);
	memcpy(&u32, b + 8, 4);
	memcpy(&u16a, b + 12, 2);
	memcpy(&u16b, b + 14, 2);
	check_one(K_F64, u64);
	check_one(K_F32, u32);
	check_one(K_F16, u16a);
	check_one(K_BF16, u16b);
	/* The same bits reinterpreted for the small formats too, so every byte position matters. */
	check_one(K_F32, (uint32_t)(u64 >> 32));
	check_one(K_F16, (uint16_t)(u64 >> 48));
	check_one(K_BF16, (uint16_t)(u32 >> 16));
	int32_t i;
	memcpy(&i, b + 16, 4);
	check_i32(i);
	check_list8(b + 20);
	return 0;
}
