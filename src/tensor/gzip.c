/* gzip for response bodies (JSON and CSV), through Debian's libdeflate: one-shot compression of a
 * whole buffer, several times faster than zlib at the same ratio. Level 6 by default: tables are
 * cached once compressed, so ratio matters more than the one-time cost.
 *   A compressor is large (656 KiB at level 6, more at 10-12), past glibc's mmap threshold: one
 * allocated per response was mapped afresh and faulted in on first touch, 40-240 us for a table of
 * a few bytes. So each thread keeps its compressors (libdeflate's output depends on the level
 * only, not on what the compressor did before), at most PE_GZIP_LEVELS_KEPT levels, the least
 * recently used one dropped for a new level; a thread's are freed when it exits (a pthread key's
 * destructor), the main thread's stay reachable from it until the process ends. Without the key
 * or the memory to keep one, a compressor is made and freed per call. */
#include "posenc/tensor.h"

#include <libdeflate.h>
#include <pthread.h>
#include <stdlib.h>

struct kept {
	int n; /* slots in use, most recently used first */
	int level[PE_GZIP_LEVELS_KEPT];
	struct libdeflate_compressor *c[PE_GZIP_LEVELS_KEPT];
};

static pthread_key_t kept_key;
static pthread_once_t kept_once = PTHREAD_ONCE_INIT;
static int kept_ok;

static void kept_free(void *p)
{
	struct kept *k = p;
	for (int i = 0; i < k->n; i++)
		libdeflate_free_compressor(k->c[i]);
	free(k);
}

static void kept_key_init(void) { kept_ok = pthread_key_create(&kept_key, kept_free) == 0; }

/* This thread's kept compressors, created on first use; NULL if they cannot be. */
static struct kept *kept_get(void)
{
	if (pthread_once(&kept_once, kept_key_init) || !kept_ok)
		return NULL;
	struct kept *k = pthread_getspecific(kept_key);
	if (k)
		return k;
	k = calloc(1, sizeof *k);
	if (k && pthread_setspecific(kept_key, k) != 0) {
		free(k);
		k = NULL;
	}
	return k;
}

/* Move slot i to the front (most recently used). */
static void kept_touch(struct kept *k, int i)
{
	int level = k->level[i];
	struct libdeflate_compressor *c = k->c[i];
	for (; i > 0; i--) {
		k->level[i] = k->level[i - 1];
		k->c[i] = k->c[i - 1];
	}
	k->level[0] = level;
	k->c[0] = c;
}

/* A compressor at level from k (made and kept there if new, the least recently used one freed when
 * k is full); NULL if libdeflate refuses the level or memory is short. */
static struct libdeflate_compressor *kept_compressor(struct kept *k, int level)
{
	for (int i = 0; i < k->n; i++)
		if (k->level[i] == level) {
			kept_touch(k, i);
			return k->c[0];
		}
	struct libdeflate_compressor *c = libdeflate_alloc_compressor(level);
	if (!c)
		return NULL;
	if (k->n == PE_GZIP_LEVELS_KEPT)
		libdeflate_free_compressor(k->c[--k->n]);
	k->level[k->n] = level;
	k->c[k->n] = c;
	kept_touch(k, k->n++);
	return c;
}

static int compress(struct libdeflate_compressor *c, struct pe_buf *out, const void *data, size_t len)
{
	size_t bound = libdeflate_gzip_compress_bound(c, len);
	int rc = pe_buf_reserve(out, bound);
	if (rc != 0)
		return rc;
	size_t n = libdeflate_gzip_compress(c, data, len, out->data + out->len, bound);
	if (n == 0)
		return PE_EINTERNAL;
	out->len += n;
	return 0;
}

int pe_gzip(struct pe_buf *out, const void *data, size_t len, int level)
{
	struct kept *k = kept_get();
	if (k) {
		struct libdeflate_compressor *c = kept_compressor(k, level);
		return c ? compress(c, out, data, len) : PE_ENOMEM;
	}
	struct libdeflate_compressor *c = libdeflate_alloc_compressor(level);
	if (!c)
		return PE_ENOMEM;
	int rc = compress(c, out, data, len);
	libdeflate_free_compressor(c);
	return rc;
}

size_t pe_gzip_bound(size_t len)
{
	return libdeflate_gzip_compress_bound(NULL, len); /* NULL: valid at every level */
}
