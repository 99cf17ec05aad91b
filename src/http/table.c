/* GET /v1/<table>: parameters, negotiation and the cache key here; the cache, single flight,
 * the job, ETag and 304 in produce.c, which calls back into this file's producer to compute and
 * encode the table (on the HTTP thread when its estimate is small, else on a worker). The GET
 * path of a table reads in these two files.
 *
 * Memory: the job builds under the response budget (opt.budget): its scratch table, what the
 * core's compute allocates besides its output (pe_cost's scratch_bytes: an analysis' encoding
 * table) and its output buffer are reserved before they are allocated, and a reservation that
 * does not fit now fails the key with PE_EBUSY (503 + Retry-After). The most the job can hold at
 * once is added up on a miss before the job exists (job_new_cb): more than the whole budget is a
 * 413 naming the parameter that sizes it, without any work. A pooled job takes that much at once
 * before it starts (need_cb; produce.c's share, waited for when the budget is full) and reserves
 * on its share, out->budget. */
#include "http/handler.h"
#include "http/produce.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OFFERED                                                                                  \
	(PE_FMT_BIT(PE_FMT_JSON) | PE_FMT_BIT(PE_FMT_NPY) | PE_FMT_BIT(PE_FMT_BIN) | PE_FMT_BIT(PE_FMT_CSV) | \
	 PE_FMT_BIT(PE_FMT_PNG))

/* A job borrows the request's parameters while it runs on the HTTP thread that made it; a pooled
 * one takes them over (job_keep_cb: own), so an inline miss copies and allocates no parameter list. */
struct job {
	struct pe_http *h;
	const struct pe_params *params; /* the request's, or own */
	struct pe_params *own;
	struct pe_params *from;         /* the request's, until job_keep_cb */
	struct pe_out out;
	size_t scratch_bytes; /* reserved around pe_table_compute: what it allocates besides the table */
	uint64_t estimate_ns; /* pe_produce_estimate_ns: whether it runs on the HTTP thread */
	uint64_t need;        /* the most it holds on the budget at once (pe_out_job_need) */
};

/* Everything a request would cost, from its parameters, before anything is allocated: the table
 * and any intermediate table against max_elements, an analysis' work against max_analysis_cost. */
static int check_size(const struct pe_http *h, const struct pe_params *p, struct pe_err *err)
{
	struct pe_shape s;
	struct pe_cost c;
	int rc = pe_table_shape(p, &s), overflow;
	if (rc == 0)
		rc = pe_table_cost(p, &c);
	if (rc != 0)
		return pe_err_set(err, rc, "", "cannot size this table");
	size_t n = pe_shape_count(&s, &overflow);
	if (overflow || n > h->opt.max_elements)
		return pe_err_set(err, PE_ETOOBIG, *c.work_param ? c.work_param : p->def->params[0].name,
				  "the table would have %s elements; the limit is %" PRIu64,
				  overflow ? "too many" : "more", h->opt.max_elements);
	if (c.intermediate > h->opt.max_elements)
		return pe_err_set(err, PE_ETOOBIG, c.intermediate_param,
				  "the table this needs would have %" PRIu64 " elements; the limit is %" PRIu64,
				  c.intermediate, h->opt.max_elements);
	if (c.work > h->opt.max_analysis_cost)
		return pe_err_set(err, PE_ETOOBIG, c.work_param,
				  "this would cost %" PRIu64 " multiply-adds; max_analysis_cost is %" PRIu64, c.work,
				  h->opt.max_analysis_cost);
	return 0;
}

/* What can only fail once the table exists is decided here from the parameters, so the client
 * gets a problem naming the parameter before any work is queued (a job's own failure reaches its
 * waiters too, but only after the work): a dtype too narrow for the values, a picture that cannot
 * be drawn. Run on a miss only (a cached key passed it already; rope/inv_freq's check makes its
 * dim/2 frequencies, ~1 ms at dim 65536). */
static int check_output(const struct pe_params *p, const struct pe_out *o, struct pe_png_layout *lay,
			struct pe_err *err)
{
	int rc = pe_table_check_dtype(p, o->dt, err);
	if (rc != 0 || o->fmt != PE_FMT_PNG)
		return rc;
	struct pe_tensor_view v = {.dtype = o->dt, .data = NULL}; /* NULL: lay out the shape only */
	struct pe_png_options po;
	pe_table_shape(p, &v.shape);
	pe_png_options_init(&po);
	po.cmap = (enum pe_cmap)o->cmap;
	po.scale = o->scale;
	po.labels = p->def->panel_labels;
	return pe_png_plan(&v, &po, lay, err);
}

/* The job's time (whether it may run on the HTTP thread): encoding o, and computing s's elements
 * and rows with c's intermediate table and work, each at the worst cost measured over the
 * tables (pe_produce_compute_ns). */
static uint64_t estimate_ns(const struct pe_out *o, const struct pe_shape *s, const struct pe_cost *c)
{
	int overflow;
	uint64_t n = pe_shape_count(s, &overflow), last = s->rank ? s->dim[s->rank - 1] : 1;
	if (overflow)
		return UINT64_MAX;
	uint64_t rows = last ? n / last : 0;
	return pe_produce_estimate_ns(o, n, pe_produce_compute_ns(o->dt, n, rows, c->intermediate, c->work));
}

uint64_t pe_table_estimate_ns(const struct pe_params *p, const struct pe_out *o)
{
	struct pe_shape s;
	struct pe_cost c;
	if (pe_table_shape(p, &s) != 0 || pe_table_cost(p, &c) != 0)
		return UINT64_MAX;
	return estimate_ns(o, &s, &c);
}

/* Could the job ever fit in the response budget? The 413 names what sizes the excess: the
 * intermediate's parameter when that alone is too much, format when the table would fit as bin,
 * else the table's size parameter. */
static int check_budget(struct pe_http *h, const struct pe_params *p, const struct pe_out *o,
			const struct pe_png_layout *lay, size_t keylen, uint64_t *scratch, uint64_t *estimate,
			uint64_t *need_out, struct pe_err *err)
{
	struct pe_shape s;
	struct pe_cost c;
	if (pe_table_shape(p, &s) != 0 || pe_table_cost(p, &c) != 0)
		return pe_err_set(err, PE_EINTERNAL, "", "cannot size this table");
	*scratch = c.scratch_bytes;
	*estimate = estimate_ns(o, &s, &c);
	/* JSON's head: the parameters as the key holds them, quoted and keyed */
	uint64_t out = pe_produce_out_bound(o, &s, 2 * keylen + 1024, o->fmt == PE_FMT_PNG ? lay : NULL);
	uint64_t need = *need_out = pe_out_job_need(o, &s, c.scratch_bytes, out);
	struct pe_budget_stats st;
	pe_budget_stats(h->opt.budget, &st);
	if (!h->opt.budget || need <= st.limit)
		return 0;
	struct pe_out bin = {.fmt = PE_FMT_BIN, .dt = o->dt};
	uint64_t need_bin = pe_out_job_need(&bin, &s, c.scratch_bytes, pe_produce_out_bound(&bin, &s, 0, NULL));
	const char *param = *c.work_param ? c.work_param : p->def->params[0].name;
	if (c.scratch_bytes > out && *c.intermediate_param)
		param = c.intermediate_param;
	else if (need_bin <= st.limit)
		param = "format";
	return pe_produce_budget_check(h, need, param, err);
}

/* Negotiate the output and size the table of the parsed (and finished) parameters. */
static int check_request(struct pe_http *h, struct MHD_Connection *conn, const struct pe_table_def *def,
			 const struct pe_query *q, struct pe_out *o, struct pe_err *err)
{
	int rc = pe_http_out_resolve(o, &q->out, conn, def->fixed_dtype, OFFERED, err);
	return rc == 0 ? check_size(h, &q->params, err) : rc;
}

/* "v1/<name>?<canonical parameters><output options>" (the first part copied: snprintf's format
 * parser was a visible share of a small miss). */
static int make_key(const struct pe_params *p, const struct pe_out *o, char *key, size_t cap)
{
	size_t name = strlen(p->def->name);
	if (name + 5 > cap) /* "v1/", '?' and the NUL */
		return -1;
	memcpy(key, "v1/", 3);
	memcpy(key + 3, p->def->name, name);
	key[name + 3] = '?';
	int n = (int)name + 4, c = pe_params_canonical(p, key + n, cap - (size_t)n);
	if (c < 0)
		return -1;
	n += c;
	int t = pe_out_key(o, key + n, cap - (size_t)n);
	return t < 0 ? -1 : n + t;
}

/* ---- the job: compute and encode (worker thread) ---- */

/* pe_table_compute with what it allocates besides the table reserved on bg (the job's share) first. */
static int compute(struct job *j, struct pe_budget *bg, void *out, struct pe_err *err)
{
	int rc = pe_budget_take(bg, j->scratch_bytes);
	if (rc != 0)
		return pe_err_set(err, rc, "", "the response memory budget is full");
	rc = pe_table_compute(j->params, j->out.dt, out, err);
	pe_budget_give(bg, j->scratch_bytes);
	return rc;
}

/* Rows per streamed block: about `bytes` worth, a power of two from 64 up to PE_TABLE_ROW_ALIGN
 * or a multiple of it, so that blocks after the first, which end on multiples of their size
 * (block_end), start on the core's anchors or at fixed places between them. The first block is
 * FIRST_BLOCK (the first bytes wait for it); the others NEXT_BLOCK: each block costs a replay from
 * the core's anchors and a wake-up of the readers, ~40% more CPU per 24 MiB table at 256 KiB than
 * at 1 MiB (perf, AMD EPYC). */
#define FIRST_BLOCK ((size_t)256 << 10)
#define NEXT_BLOCK ((size_t)1 << 20)
/* The most planes a streamed rank-3 table has (rope's 2, sinusoidal3d's frames, alibi's heads):
 * a table of more is computed whole. */
#define STREAM_PLANES_MAX 256
/* JSON and CSV stream when their writer's bound passes this (a 512x768 f32 JSON table: 6.3 MB).
 * Not lower: streamed, a 512x768 table alone is faster end to end (its encode overlaps its send:
 * median 8-9 ms against 12-14 whole, fresh or evicting daemon), but under load slower, as the HTTP
 * thread copies each streamed block (libmicrohttpd's content reader) where a whole answer is sent
 * from its buffer: beside a flood of small misses, 240-307 such tables per 3 s against 408-414
 * (Intel Xeon VM; alone: tests/tools/ab-cold-json.sh, under load: BENCH_ONLY=small's mixed-load
 * row, builds alternating). */
#define TEXT_STREAM_MIN PE_PRODUCE_STREAM_MIN

static size_t stream_rows(size_t bytes, size_t row_bytes, size_t rows)
{
	size_t n = bytes / (row_bytes ? row_bytes : 1), p = 64;
	if (n >= PE_TABLE_ROW_ALIGN) {
		p = n / PE_TABLE_ROW_ALIGN * PE_TABLE_ROW_ALIGN;
	} else {
		while (p * 2 <= n)
			p *= 2;
	}
	return p < rows ? p : rows;
}

/* Where a block of about n rows from r0 ends: the next multiple of n, or the table's end. */
static size_t block_end(size_t r0, size_t n, size_t rows)
{
	size_t end = (r0 / n + 1) * n;
	return end < rows ? end : rows;
}

/* The rows of a table as streamed: rows per plane, the bytes of a row, the planes. */
struct rows {
	size_t planes, rows, row_bytes;
};

static struct rows rows_of(const struct pe_shape *s, enum pe_dtype dt)
{
	struct rows r = {.planes = s->rank == 3 ? s->dim[0] : 1, .rows = s->rank >= 2 ? s->dim[s->rank - 2] : s->dim[0]};
	r.row_bytes = (s->rank >= 2 ? s->dim[s->rank - 1] : 1) * pe_dtype_size(dt);
	return r;
}

/* Rows [r0, r1) of every plane, computed into planes laid out at base (plane k at k * plane_bytes,
 * row r at r * row_bytes in it), unless the job was called off. */
static int compute_block(struct job *j, const struct rows *t, char *base, size_t r0, size_t r1, struct pe_err *err)
{
	void *outs[STREAM_PLANES_MAX];
	int rc = pe_cancelled();
	if (rc != 0)
		return pe_cancel_err(rc, err);
	if (t->planes > STREAM_PLANES_MAX) /* stream_cb streams none */
		return pe_err_set(err, PE_EINTERNAL, "", "too many planes to stream");
	for (size_t k = 0; k < t->planes; k++)
		outs[k] = base + k * t->rows * t->row_bytes + r0 * t->row_bytes;
	return pe_table_compute_planes(j->params, j->out.dt, r0, r1 - r0, outs, err);
}

/* The table computed after the header's hdr bytes of out a block of rows at a time, the block's
 * rows of every plane together (rope's cos and sin planes come from one pass over the angles, as
 * in the whole table's computation; one plane at a time would make the angles twice), each block
 * published to the stream (pe_produce_progress) as it is done. The bytes final in order are plane
 * 0's rows so far; the other planes' follow at the last block. */
static int compute_streamed(struct job *j, const struct pe_shape *s, struct pe_buf *out, size_t hdr,
			    const struct pe_body_info *info, struct pe_err *err)
{
	struct rows t = rows_of(s, j->out.dt);
	size_t total = hdr + t.planes * t.rows * t.row_bytes;
	size_t nb = stream_rows(FIRST_BLOCK, t.planes * t.row_bytes, t.rows);
	int rc = pe_budget_take(out->budget, j->scratch_bytes);
	if (rc != 0)
		return pe_err_set(err, rc, "", "the response memory budget is full");
	for (size_t r0 = 0, r1; r0 < t.rows && rc == 0; r0 = r1, nb = stream_rows(NEXT_BLOCK, t.planes * t.row_bytes, t.rows)) {
		r1 = block_end(r0, nb, t.rows);
		rc = compute_block(j, &t, out->data + hdr, r0, r1, err);
		if (rc == 0) {
			out->len = r1 == t.rows ? total : hdr + r1 * t.row_bytes;
			rc = pe_produce_progress(out, total, info, err);
		}
	}
	pe_budget_give(out->budget, j->scratch_bytes);
	return rc;
}

/* Rows [r0, r1) of the raw table (all planes' rows counted one after the other) encoded into out
 * and published, a block at a time. */
static int encode_rows(struct pe_row_writer *w, const struct rows *t, const char *raw, size_t r0, size_t r1,
		       struct pe_buf *out, const struct pe_body_info *info, struct pe_err *err)
{
	size_t nb = stream_rows(NEXT_BLOCK, t->row_bytes, r1 - r0);
	int rc = 0;
	for (size_t a = r0, b; a < r1 && rc == 0; a = b) {
		b = a + nb < r1 ? a + nb : r1;
		if ((rc = pe_cancelled()) != 0)
			return pe_cancel_err(rc, err);
		rc = pe_row_writer_rows(w, raw + a * t->row_bytes, b - a, out, err);
		if (rc == 0)
			rc = pe_produce_progress(out, PE_PRODUCE_LENGTH_UNKNOWN, info, err);
	}
	return rc;
}

/* JSON and CSV, streamed: the raw table is computed into raw a block of rows at a time (every
 * plane's rows of the block, as compute_streamed), plane 0's rows are encoded into out as they are
 * computed (pe_row_writer: the whole-table writers' bytes) and published, the other planes' after
 * the last block. The length is not known before the end (chunked). out is reserved up to the
 * writer's bound once, and may not grow past it: the readers send from it, so it must not move. */
static int encode_streamed(struct job *j, const struct pe_shape *s, char *raw, struct pe_buf *out,
			   const struct pe_body_info *info, struct pe_err *err)
{
	struct rows t = rows_of(s, j->out.dt);
	struct pe_row_writer w;
	size_t max = out->max, nb = stream_rows(FIRST_BLOCK, t.planes * t.row_bytes, t.rows);
	int rc = pe_row_writer_begin(&w, j->out.fmt, j->params, s, j->out.dt, out, err);
	if (rc != 0)
		return rc;
	/* the bound with the head as written, and room for the row writer's per-row reservation */
	size_t bound = j->out.fmt == PE_FMT_JSON ? pe_json_bound(s, j->out.dt, out->len) : pe_csv_bound(s, j->out.dt);
	size_t slack = 4 * PE_NUM_MAX + 2 * PE_MAX_RANK + 8;
	if ((rc = bound > SIZE_MAX - slack ? PE_ETOOBIG : pe_buf_reserve(out, bound + slack)) != 0)
		return pe_err_set(err, rc, "", "the response would exceed the size limit");
	out->max = out->cap; /* never moved while readers send from it */
	for (size_t r0 = 0, r1; r0 < t.rows && rc == 0; r0 = r1, nb = stream_rows(NEXT_BLOCK, t.planes * t.row_bytes, t.rows)) {
		r1 = block_end(r0, nb, t.rows);
		rc = compute_block(j, &t, raw, r0, r1, err);
		if (rc == 0)
			rc = encode_rows(&w, &t, raw, r0, r1, out, info, err);
	}
	if (rc == 0 && t.planes > 1)
		rc = encode_rows(&w, &t, raw, t.rows, t.planes * t.rows, out, info, err);
	if (rc == 0)
		rc = pe_row_writer_end(&w, out, err);
	if (rc == 0)
		rc = pe_produce_progress(out, PE_PRODUCE_LENGTH_UNKNOWN, info, err);
	out->max = max;
	return rc;
}

/* Compute the table and encode it into out. bin and npy are computed straight into the response
 * buffer (after npy's header), a block at a time when the answer streams; the others go through
 * a scratch table. Everything is reserved on out's budget: the job's share when it is pooled
 * (produce.c). */
static int encode(struct job *j, const struct pe_shape *s, struct pe_buf *out, const struct pe_body_info *info,
		  struct pe_err *err)
{
	struct pe_budget *bg = out->budget;
	int overflow, rc;
	size_t n = pe_shape_count(s, &overflow), raw = n * pe_dtype_size(j->out.dt);
	struct pe_tensor_view t = {.shape = *s, .dtype = j->out.dt};
	if (pe_out_raw_direct(&j->out) || (j->out.fmt == PE_FMT_NPY && j->out.dt != PE_BF16)) {
		size_t hdr = j->out.fmt == PE_FMT_NPY ? pe_npy_header_len(&t) : 0; /* 64-aligned data */
		if ((rc = pe_buf_reserve(out, hdr + raw)) != 0)
			return pe_err_set(err, rc, "", "the response would exceed the size limit");
		if (hdr)
			pe_npy_write_header(out->data, &t);
		if (pe_produce_streaming())
			return compute_streamed(j, s, out, hdr, info, err);
		rc = compute(j, bg, out->data + hdr, err);
		if (rc == 0)
			out->len = hdr + raw;
		return rc;
	}
	if ((rc = pe_budget_take(bg, raw ? raw : 1)) != 0)
		return pe_err_set(err, rc, "", "the response memory budget is full");
	struct pe_scratch tmp = pe_produce_scratch_take(j->h, raw ? raw : 1);
	if (!tmp.p)
		rc = pe_err_set(err, PE_ENOMEM, "", "out of memory");
	else if (pe_produce_streaming())
		rc = encode_streamed(j, s, tmp.p, out, info, err);
	else if ((rc = compute(j, bg, tmp.p, err)) == 0) {
		t.data = tmp.p;
		rc = pe_out_encode(&j->out, &j->h->opt.parallel, j->params, &t, out, err);
	}
	pe_produce_scratch_give(j->h, tmp);
	pe_budget_give(bg, raw ? raw : 1);
	return rc;
}

void pe_table_extra_header(const struct pe_table_def *def, char *out, size_t cap)
{
	if (!cap)
		return;
	if (def->extra_header) {
		size_t n = strnlen(def->extra_header, cap - 1);
		memcpy(out, def->extra_header, n);
		out[n] = 0;
		return;
	}
	size_t n = cap - 1 < 5 ? cap - 1 : 5;
	memcpy(out, "X-PE-", n);
	int word_start = 1;
	for (const char *c = def->extra_name; *c && n + 1 < cap; c++) {
		out[n++] = *c == '_' ? '-' : word_start ? (char)toupper((unsigned char)*c) : *c;
		word_start = *c == '_';
	}
	out[n] = 0;
}

/* The producer: name the table's headers (before any byte streams), compute and encode it. */
static int produce_cb(void *arg, struct pe_buf *out, struct pe_body_info *info, struct pe_err *err)
{
	struct job *j = arg;
	struct pe_shape s;
	int rc = pe_table_shape(j->params, &s);
	if (rc != 0)
		return rc;
	pe_shape_format(&s, info->shape, sizeof info->shape);
	const struct pe_table_def *def = j->params->def;
	if (def->extra && def->extra_name) {
		pe_table_extra_header(def, info->extra_name, sizeof info->extra_name);
		info->extra[pe_fmt_f64(def->extra(j->params), info->extra)] = 0;
	}
	return encode(j, &s, out, info, err);
}

/* Streamed, tables with a row computation of rank 1 or 2, or of rank 3 with at most
 * STREAM_PLANES_MAX planes: bin, and npy but bf16 (the formats computed in place), over
 * PE_PRODUCE_STREAM_MIN bytes; JSON and CSV of rank 2 or 3 whose writer's bound passes
 * TEXT_STREAM_MIN and whose computation needs no scratch of its own (an analysis' encoding table:
 * its room on the budget is the encoder's, which streaming would need at the same time). Smaller
 * JSON is encoded whole by several threads (pe_json_write_table_mt), gzip'd text compressed whole
 * and PNG drawn whole. */
static int stream_cb(void *arg)
{
	struct job *j = arg;
	struct pe_shape s;
	int overflow;
	if (j->out.gzip || pe_table_shape(j->params, &s) != 0 || s.rank < 1 || s.rank > 3 ||
	    (s.rank == 3 && s.dim[0] > STREAM_PLANES_MAX) || !pe_table_rows_supported(j->params))
		return 0;
	size_t n = pe_shape_count(&s, &overflow);
	if (overflow)
		return 0;
	if (pe_out_raw_direct(&j->out) || (j->out.fmt == PE_FMT_NPY && j->out.dt != PE_BF16))
		return pe_produce_mul(n, pe_dtype_size(j->out.dt)) > PE_PRODUCE_STREAM_MIN;
	if ((j->out.fmt != PE_FMT_JSON && j->out.fmt != PE_FMT_CSV) || s.rank < 2 || j->scratch_bytes)
		return 0;
	return pe_out_bound(&j->out, &s, 0, NULL) > TEXT_STREAM_MIN;
}

static uint64_t estimate_cb(void *arg) { return ((struct job *)arg)->estimate_ns; }

static uint64_t need_cb(void *arg) { return ((struct job *)arg)->need; }

static void job_free_cb(void *arg)
{
	struct job *j = arg;
	if (j->own)
		pe_params_destroy(j->own);
	free(j->own);
	free(j);
}

/* The job leaves the HTTP thread: it takes the request's parameters over (their lists with them). */
static int job_keep_cb(void *arg)
{
	struct job *j = arg;
	if (!(j->own = malloc(sizeof *j->own)))
		return PE_ENOMEM;
	*j->own = *j->from;
	memset(j->from, 0, sizeof *j->from);
	j->params = j->own;
	j->from = NULL;
	return 0;
}

/* What a waiter is told when the job it waited for failed without a client-facing detail of its
 * own (a server-side failure, or none given: produce.c's fail_key). */
static void failure_cb(int code, struct pe_err *err)
{
	const char *text;
	switch (code) {
	case PE_EBUSY:
		text = "the job queue or the response memory budget is full; retry shortly";
		break;
	case PE_ETOOBIG:
		text = "building the response needs more memory than response_budget_bytes";
		break;
	case PE_ETIMEOUT:
		text = "the computation was stopped at job_timeout";
		break;
	case PE_EDRAINING:
		text = "the service is shutting down";
		break;
	default:
		text = "the computation failed";
	}
	pe_err_set(err, code, "", "%s", text);
}

/* ---- the request ---- */

struct miss {
	struct pe_http *h;
	struct pe_params *params;
	const struct pe_out *out;
	size_t keylen;
};

/* A miss (MHD thread): what can fail only once the table exists is checked first, and whether the
 * job could fit in the response budget at all; then the job takes over the parameters. */
static void *job_new_cb(void *ctx, struct pe_err *err)
{
	struct miss *m = ctx;
	struct pe_png_layout lay;
	uint64_t scratch = 0, estimate = UINT64_MAX, need = 0;
	if (check_output(m->params, m->out, &lay, err) != 0 ||
	    check_budget(m->h, m->params, m->out, &lay, m->keylen, &scratch, &estimate, &need, err) != 0)
		return NULL;
	struct job *j = malloc(sizeof *j);
	if (!j)
		return NULL;
	*j = (struct job){.h = m->h, .params = m->params, .from = m->params, .out = *m->out,
			  .scratch_bytes = (size_t)scratch, .estimate_ns = estimate, .need = need};
	return j;
}

static const struct pe_producer producer = {
	.cache_control = "public, max-age=31536000, immutable",
	.job_new_cb = job_new_cb,
	.produce_cb = produce_cb,
	.job_free_cb = job_free_cb,
	.job_keep_cb = job_keep_cb,
	.estimate_cb = estimate_cb,
	.need_cb = need_cb,
	.stream_cb = stream_cb,
	.failure_cb = failure_cb,
};

enum MHD_Result pe_table_request(struct req *r, struct MHD_Connection *conn, const struct pe_table_def *def)
{
	struct pe_http *h = r->h;
	struct pe_err err = {0};
	struct pe_query *q = pe_contract_query(r);
	struct pe_params *p = &q->params; /* the job takes its lists over on a miss */
	struct pe_out o;
	enum MHD_Result ret;
	char *key = NULL;
	if (atomic_load(&h->draining)) {
		pe_err_set(&err, PE_EDRAINING, "", "the service is shutting down");
		return pe_http_problem(r, conn, &err);
	}
	if (p->def != def) {
		pe_err_set(&err, PE_EINTERNAL, "", "the route declared other parameters");
		return pe_http_problem(r, conn, &err);
	}
	if (check_request(h, conn, def, q, &o, &err) != 0)
		return pe_http_problem(r, conn, &err);
	char small[4096]; /* most keys fit; long factor lists take the heap */
	int keylen = make_key(p, &o, small, sizeof small);
	size_t cap = keylen < 0 ? pe_out_key_room(p) : 0;
	if (keylen < 0 && (key = malloc(cap)) != NULL)
		keylen = make_key(p, &o, key, cap);
	if (keylen < 0) {
		pe_err_set(&err, PE_EINTERNAL, "", "cannot form the cache key");
		ret = pe_http_problem(r, conn, &err);
	} else {
		struct miss m = {.h = h, .params = p, .out = &o, .keylen = (size_t)keylen};
		ret = pe_produce_answer(r, conn, &producer, &o, key ? key : small, (size_t)keylen, &m);
	}
	free(key);
	return ret;
}

/* ---- the handler ---- */

static int match_cb(void *hctx, const char *url, const void **target)
{
	const struct pe_table_def *def = strncmp(url, "/v1/", 4) == 0 ? pe_table_find(url + 4) : NULL;
	*target = def;
	return def ? pe_http_def_route(def) : -1;
}

static enum MHD_Result finish_cb(struct req *r, struct MHD_Connection *conn)
{
	return pe_table_request(r, conn, r->target);
}

/* A table's query: its own parameters and the output options, finished before it is answered. */
static const struct pe_contract contract[] = {
	{.methods = "GET, HEAD", .target_params = 1, .output = 1, .finish = 1},
	{0},
};

const struct pe_handler pe_table_handler = {
	.name = "tables",
	.match_cb = match_cb,
	.contract = contract,
	.cors_methods = "GET, HEAD, OPTIONS",
	.finish_cb = finish_cb,
};
