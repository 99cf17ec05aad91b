/* gzip for response bodies (JSON and CSV), through Debian's libdeflate: one-shot compression of a
 * whole buffer, several times faster than zlib at the same ratio. Level 6 by default: tables are
 * cached once compressed, so ratio matters more than the one-time cost. */
#include "posenc/tensor.h"

#include <libdeflate.h>

int pe_gzip(struct pe_buf *out, const void *data, size_t len, int level)
{
	struct libdeflate_compressor *c = libdeflate_alloc_compressor(level);
	if (!c)
		return PE_ENOMEM;
	size_t bound = libdeflate_gzip_compress_bound(c, len);
	int rc = pe_buf_reserve(out, bound);
	if (rc == 0) {
		size_t n = libdeflate_gzip_compress(c, data, len, out->data + out->len, bound);
		if (n == 0)
			rc = PE_EINTERNAL;
		else
			out->len += n;
	}
	libdeflate_free_compressor(c);
	return rc;
}
