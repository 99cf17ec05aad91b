/* Compute a validated request's table and encode it into bytes.
 *
 * bin is the computed buffer itself (no copy); json, npy and csv are encoded from it by the
 * tensor layer, so the bytes are the ones the daemon serves for the same parameters, except that
 * JSON gets a final newline as command-line output should. The encoded buffer is unbounded by
 * design: --max-elements, checked before this runs, is the memory limit of the CLI. */
#include "cli/cli.h"

#include <stdint.h>
#include <stdlib.h>

static int encode(const struct cli_request *r, const struct pe_tensor_view *t, struct pe_buf *b,
		  struct pe_err *err)
{
	switch (r->fmt) {
	case PE_FMT_JSON: {
		int rc = pe_json_write_table(b, &r->params, t, err);
		return rc ? rc : pe_buf_append(b, "\n", 1);
	}
	case PE_FMT_NPY:
		return pe_npy_write(b, t, err);
	case PE_FMT_CSV:
		return pe_csv_write(b, t, err);
	default:
		return pe_err_set(err, PE_EINTERNAL, "format", "format %s is not written here", pe_format_name(r->fmt));
	}
}

int cli_render(const struct cli_request *r, struct cli_bytes *out, struct pe_err *err)
{
	size_t raw = r->count * pe_dtype_size(r->dt); /* cannot overflow: checked by the request */
	struct pe_buf b;
	pe_buf_init(&b, SIZE_MAX);
	out->data = NULL;
	out->len = 0;
	char *table = malloc(raw ? raw : 1);
	if (!table)
		return pe_err_set(err, PE_ENOMEM, "", "out of memory for a table of %zu bytes", raw);
	int rc = pe_table_compute(&r->params, r->dt, table, err);
	if (rc != 0)
		goto out;
	if (r->fmt == PE_FMT_BIN) {
		out->data = table;
		out->len = raw;
		table = NULL;
		goto out;
	}
	struct pe_tensor_view t = {.shape = r->shape, .dtype = r->dt, .data = table};
	rc = encode(r, &t, &b, err);
	if (rc == PE_ENOMEM && !err->detail[0])
		pe_err_set(err, rc, "", "out of memory while writing %s", pe_format_name(r->fmt));
	if (rc == 0)
		out->data = pe_buf_steal(&b, &out->len);
	if (rc == 0 && !out->data)
		rc = pe_err_set(err, PE_ENOMEM, "", "out of memory");
out:
	pe_buf_destroy(&b);
	free(table);
	return rc;
}
