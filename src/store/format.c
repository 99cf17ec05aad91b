/* The table file of the store (layout at the top of store.c): writing its header, reading and
 * checking one, and verifying a whole file against it. */
#include "store/internal.h"

#include <math.h>
#include <nettle/sha2.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static void put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint64_t get_u64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

void store_sha256(const void *data, size_t len, uint8_t out[32])
{
	struct sha256_ctx c;
	sha256_init(&c);
	sha256_update(&c, len, data);
	sha256_digest(&c, SHA256_DIGEST_SIZE, out);
}

static int is_float_dtype(enum pe_dtype dt) { return dt == PE_F32 || dt == PE_F64 || dt == PE_F16; }

void store_header_write(const struct pe_store_meta *m, uint8_t h[HEADER])
{
	memset(h, 0, HEADER);
	memcpy(h, MAGIC, 8);
	put_u32(h + 8, VERSION);
	put_u32(h + 12, HEADER);
	memcpy(h + 16, pe_dtype_name(m->dtype), strlen(pe_dtype_name(m->dtype)));
	put_u64(h + 24, m->rows);
	put_u64(h + 32, m->cols);
	put_u64(h + 40, m->prefix_tokens);
	put_u64(h + 48, m->grid_h);
	put_u64(h + 56, m->grid_w);
	put_u64(h + 64, m->bytes);
	put_u64(h + 72, (uint64_t)m->created_ms);
	memcpy(h + 80, m->sha256, 32);
	memcpy(h + 112, m->name, strlen(m->name));
	store_sha256(h, 224, h + 224);
}

/* Shape, dtype and grid consistent; bytes computed without overflow. why names the problem. */
int store_meta_check(struct pe_store_meta *m, const char **why, const char **param)
{
	uint64_t cells;
	*param = "body";
	if (!is_float_dtype(m->dtype))
		return *why = "the dtype must be f16, f32 or f64", -1;
	if (m->rows == 0 || m->cols == 0)
		return *why = "the table is empty", -1;
	if (__builtin_mul_overflow(m->rows, m->cols, &cells) ||
	    __builtin_mul_overflow(cells, (uint64_t)pe_dtype_size(m->dtype), &m->bytes))
		return *why = "the table's size overflows", -1;
	*param = "grid";
	if ((m->grid_h == 0) != (m->grid_w == 0))
		return *why = "both grid sizes must be positive", -1;
	if (m->grid_h == 0 && m->prefix_tokens != 0)
		return *param = "prefix_tokens", *why = "prefix_tokens needs a grid", -1;
	uint64_t g;
	if (m->grid_h && (__builtin_mul_overflow(m->grid_h, m->grid_w, &g) || g > m->rows ||
			  m->prefix_tokens != m->rows - g))
		return *why = "prefix_tokens + grid height * width must equal the table's rows", -1;
	return 0;
}

/* Parse and check a header read from file; name is the one the file name says. */
static int header_read(const uint8_t h[HEADER], const char *name, struct pe_store_meta *m, const char **why)
{
	uint8_t sum[32];
	char dt[9] = {0};
	const char *param;
	store_sha256(h, 224, sum);
	if (memcmp(h, MAGIC, 8) != 0)
		return *why = "not a table file (bad magic)", -1;
	if (memcmp(sum, h + 224, 32) != 0)
		return *why = "header checksum mismatch", -1;
	if (get_u32(h + 8) != VERSION || get_u32(h + 12) != HEADER)
		return *why = "unknown format version", -1;
	memset(m, 0, sizeof *m);
	memcpy(dt, h + 16, 8);
	memcpy(m->name, h + 112, PE_STORE_NAME_MAX);
	if (strcmp(m->name, name) != 0)
		return *why = "the name in the header is not the file's", -1;
	if (pe_dtype_parse(dt, &m->dtype) != 0)
		return *why = "unknown dtype", -1;
	m->rows = get_u64(h + 24);
	m->cols = get_u64(h + 32);
	m->prefix_tokens = get_u64(h + 40);
	m->grid_h = get_u64(h + 48);
	m->grid_w = get_u64(h + 56);
	m->created_ms = (int64_t)get_u64(h + 72);
	memcpy(m->sha256, h + 80, 32);
	if (store_meta_check(m, why, &param) != 0)
		return -1;
	if (m->bytes != get_u64(h + 64))
		return *why = "the element count does not match the shape", -1;
	return 0;
}

/* ---- reading a table file ---- */

static int read_full(int fd, void *buf, size_t len, off_t off)
{
	for (size_t got = 0; got < len;) {
		ssize_t r = pread(fd, (char *)buf + got, len - got, off + (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		got += (size_t)r;
	}
	return 0;
}

/* The largest |element| of n elements of dt, or m if that is larger (NaN elements are skipped). */
double store_max_abs(enum pe_dtype dt, const void *data, size_t n, double m)
{
	const uint8_t *p = data;
	for (size_t i = 0; i < n; i++) {
		double v;
		if (dt == PE_F64) {
			memcpy(&v, p + 8 * i, 8);
		} else if (dt == PE_F32) {
			float f;
			memcpy(&f, p + 4 * i, 4);
			v = f;
		} else {
			uint16_t h;
			memcpy(&h, p + 2 * i, 2);
			v = pe_f16_to_f32(h);
		}
		if (fabs(v) > m)
			m = fabs(v);
	}
	return m;
}

/* Verify an open table file against its name; *data (if data is not NULL) gets the elements.
 * Returns 0, or -1 with why set (damage), or a negative PE_E* code (PE_ENOMEM). */
int store_load(int fd, const char *name, struct pe_store_meta *m, void **data, const char **why)
{
	uint8_t h[HEADER], sum[32];
	struct stat st;
	struct sha256_ctx c;
	char *buf = NULL;
	int rc = -1;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		return *why = "not a regular file", -1;
	if ((uint64_t)st.st_size < HEADER || read_full(fd, h, HEADER, 0) != 0)
		return *why = "shorter than a header", -1;
	if (header_read(h, name, m, why) != 0)
		return -1;
	if ((uint64_t)st.st_size != HEADER + m->bytes)
		return *why = "the file's size does not match its header (truncated?)", -1;
	size_t step = data ? (size_t)m->bytes : CHUNK;
	if (!(buf = malloc(step ? step : 1)))
		return PE_ENOMEM;
	sha256_init(&c);
	m->max_abs = 0;
	for (uint64_t off = 0; off < m->bytes; off += step) { /* CHUNK is a multiple of every element size */
		size_t len = m->bytes - off < step ? (size_t)(m->bytes - off) : step;
		if (read_full(fd, buf, len, (off_t)(HEADER + off)) != 0) {
			*why = "read error";
			goto out;
		}
		sha256_update(&c, len, (const uint8_t *)buf);
		m->max_abs = store_max_abs(m->dtype, buf, len / pe_dtype_size(m->dtype), m->max_abs);
	}
	sha256_digest(&c, SHA256_DIGEST_SIZE, sum);
	if (memcmp(sum, m->sha256, 32) != 0) {
		*why = "the elements' SHA-256 does not match the header";
		goto out;
	}
	rc = 0;
	if (data) {
		*data = buf;
		buf = NULL;
	}
out:
	free(buf);
	return rc;
}
