/* POST /v1/<transform> (rope/apply, alibi/apply, sinusoidal/apply): a tensor in the body, the
 * transformed tensor back.
 *
 * The declaration (contract.h) decides whether the body is wanted at all: wrong method (405),
 * query (400), body type (415) and a Content-Length over max_body_bytes (413) are refused before a
 * byte of body is read (server.c answers them, after dropping the body when the client sends it
 * regardless). The body is then collected in a buffer bounded by max_body_bytes (chunked bodies
 * are capped as they arrive). The work (decode, apply, encode) runs on a worker: the connection is suspended
 * like a table miss. Bodies are decoded in place where the format allows (npy and raw f32/f64 are
 * transformed inside the body buffer), so a request costs about twice its body at most. Results
 * depend on the body, so they are not cached (Cache-Control: no-store).
 *
 * rope/apply also takes multipart/form-data (curl -F x=@q.npy -F positions=@pos.npy): a part x,
 * the tensor as a plain body would send it (npy, JSON, or raw with shape=), and a part positions,
 * an npy int32/int64 tensor of per-token positions (pe_rope_apply_positions). The parts are read
 * by multipart.c as they arrive, on the response budget like a plain body; the x part is then
 * the job's body (decoded and answered in place the same way) and holds its own reservation.
 * The job's decoding and dtype conversions are in transform_decode.c (transform.h). */
#include "http/handler.h"
#include "http/media.h"
#include "http/multipart.h"
#include "http/oneshot.h"
#include "http/produce.h"
#include "http/transform.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const unsigned OFFERED =
	PE_FMT_BIT(PE_FMT_JSON) | PE_FMT_BIT(PE_FMT_NPY) | PE_FMT_BIT(PE_FMT_BIN) | PE_FMT_BIT(PE_FMT_CSV);

static enum MHD_Result answer_now(struct req *r, struct MHD_Connection *conn, int code, const char *param,
				  const char *detail)
{
	struct pe_err err = {0};
	pe_err_set(&err, code, param, "%s", detail);
	return pe_http_refuse(r, &err, NULL);
}

#define BODY_TYPES "application/x-npy, application/octet-stream, application/json" /* enum body_kind's order */

static int body_kind_of(const char *ctype, enum body_kind *k)
{
	int i = pe_media_match(ctype, BODY_TYPES);
	if (i < 0)
		return -1;
	*k = (enum body_kind)i;
	return 0;
}

static const char *content_type(struct MHD_Connection *conn)
{
	return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
}

/* ---- multipart (rope/apply) ---- */

/* What the x part may say it is (curl -F sends application/octet-stream for a file, text/plain
 * for a .txt one); x_part_kind reads npy by its magic, JSON by its type or its first byte. */
#define X_PART_TYPES "application/x-npy, application/octet-stream, application/json, text/plain"

static void mp_free_cb(void *ctx)
{
	pe_mp_destroy(ctx);
	free(ctx);
}

/* The parts' limits: x as a plain body; positions at most max_elements int64 and an npy header. */
static enum MHD_Result begin_multipart(struct req *r, struct MHD_Connection *conn)
{
	struct pe_http *h = r->h;
	struct pe_err err = {0};
	struct pe_mp *m = malloc(sizeof *m);
	if (!m)
		return answer_now(r, conn, PE_ENOMEM, "", "out of memory");
	pe_mp_init(m, h->opt.max_body_bytes, h->opt.budget);
	uint64_t hdr = pe_npy_header_max();
	uint64_t pos_max = h->opt.max_elements > (UINT64_MAX - hdr) / 8 ? UINT64_MAX : h->opt.max_elements * 8 + hdr;
	pe_mp_want(m, "x", h->opt.max_body_bytes, X_PART_TYPES);
	pe_mp_want(m, "positions", (size_t)(pos_max < h->opt.max_body_bytes ? pos_max : h->opt.max_body_bytes),
		   "application/x-npy, application/octet-stream");
	r->ctx = m;
	if (pe_mp_begin(m, conn, r->chunked ? 0 : r->declared, &err) != 0)
		return pe_http_refuse(r, &err, NULL);
	/* the server reserves nothing for r->body (max 0): the parts hold their own reservations */
	pe_buf_init(&r->body, 0);
	r->body_wanted = 1;
	return MHD_YES;
}

/* Body bytes: the plain body collected whole, a multipart one through its reader. */
static int body_cb(struct req *r, const char *data, size_t n)
{
	struct pe_mp *m = r->ctx;
	if (!m)
		return pe_http_body_collect(r, data, n);
	if (pe_mp_feed(m, data, n) != 0) {
		pe_mp_destroy(m);
		pe_http_refuse(r, &m->err, NULL); /* the rest is dropped (lingering close), then the answer */
		if (m->past_budget)
			pe_http_body_past_budget(r); /* named by the whole body's size, as a plain one is */
	}
	return 0;
}

/* shape=: the raw body's shape, read by the query parser as a list of sizes (its rank is checked
 * when the job takes it, the element count with the body, transform_decode.c). */
static const struct pe_param_spec shape_spec[] = {
	{"shape", PE_PT_LIST, "", 0, 1099511627776.0, PE_LIST_INTEGERS,
	 "an application/octet-stream body's shape, e.g. 1,32,2048,128 (sizes up to 2^40)"},
};
static const struct pe_table_def shape_param = {.name = "transforms", .params = shape_spec, .nparams = 1,
						.fixed_dtype = PE_DTYPE_COUNT_};

/* The transform's parameters, the output options and shape=; a tensor body within max_body_bytes
 * (rope/apply: also multipart/form-data, a part x and a part positions). */
static const struct pe_contract contract = {
	.methods = "POST", .target_params = 1, .output = 1, .extras = &shape_param, .finish = 1, .media = BODY_TYPES};
static const struct pe_contract contract_form = {
	.methods = "POST", .target_params = 1, .output = 1, .extras = &shape_param, .finish = 1,
	.media = BODY_TYPES ", multipart/form-data"};

static const struct pe_contract *contract_cb(struct req *r, struct MHD_Connection *conn, const char *url)
{
	const struct pe_table_def *def = r->target;
	return pe_contract_only(r, strcmp(def->name, "rope/apply") ? &contract : &contract_form);
}

/* Once the declaration holds: a multipart body is read part by part (the others are collected
 * whole by the router). */
static enum MHD_Result begin_cb(struct req *r, struct MHD_Connection *conn, const char *url)
{
	return pe_mp_is_form(content_type(conn)) ? begin_multipart(r, conn) : MHD_YES;
}

static enum pe_dtype output_dtype(const struct tjob *j, enum pe_dtype in, int *bad, struct pe_err *err)
{
	enum pe_dtype dt = j->kind == BODY_JSON ? PE_F32 : in;
	*bad = 0;
	if (j->kind != BODY_BIN && j->dtype && (pe_dtype_parse(j->dtype, &dt) != 0 || dt == PE_I32))
		*bad = pe_err_set(err, PE_EINVAL, "dtype", "dtype must be one of: f32, f64, f16, bf16");
	else if (j->out.fmt == PE_FMT_NPY && dt == PE_BF16)
		*bad = pe_err_set(err, PE_EINVAL, "dtype", "bf16 has no NumPy dtype; use format=bin");
	return dt;
}

/* When the result was computed in place inside the body and the answer's bytes are the body's
 * layout (raw: the data; npy: a standard header right before the data), the body buffer itself
 * becomes the response: no second buffer of the body's size, no copy. */
static int answer_in_body(struct tjob *j, const struct pe_tensor_view *v, size_t n, struct pe_oneshot_result *res)
{
	const char *d = v->data;
	if (res->out.gzip || d < j->body.data || d >= j->body.data + j->body.len)
		return 0;
	size_t off = (size_t)(d - j->body.data), bytes = n * pe_dtype_size(v->dtype);
	if (res->out.fmt == PE_FMT_BIN && off == 0 && bytes == j->body.len) {
		res->len = bytes;
	} else if (res->out.fmt == PE_FMT_NPY && off > 0 && pe_npy_header_len(v) == off && off + bytes == j->body.len) {
		pe_npy_write_header(j->body.data, v);
		res->len = off + bytes;
	} else
		return 0;
	res->data = j->body.data;
	res->budget = j->body.budget; /* the body carries its reservation to the answer */
	res->held = j->body.budget ? pe_mem_size(j->body.data) : 0;
	j->body.data = NULL;
	return 1;
}

/* What pe_rope_apply_positions allocates for `count` positions (apply_rope.c): the distinct
 * positions (8 bytes each), their cos/sin rows, and one run's rope table (at most 4096 rows, or
 * four per position), rows of at most the last axis in the working dtype. */
static uint64_t positions_scratch(uint64_t count, const struct pe_tensor_mut *in, enum pe_dtype wd)
{
	uint64_t last = in->shape.rank ? in->shape.dim[in->shape.rank - 1] : 0;
	uint64_t row = pe_produce_mul(2 * last, pe_dtype_size(wd)), run = count < 1024 ? 4 * count : 4096;
	return pe_produce_add(pe_produce_mul(count, 8), pe_produce_mul(pe_produce_add(count, run), row));
}

/* The positions part applied to x, its scratch held on the budget meanwhile: a job whose
 * positions need more than the budget has left waits its turn (503) like any other memory. */
static int apply_positions(struct tjob *j, struct pe_budget *bg, const struct pe_positions *pos, size_t count,
			   const struct pe_tensor_mut *in, struct pe_tensor_mut *x, struct pe_err *err)
{
	size_t held = (size_t)positions_scratch(count, in, x->dtype);
	int rc = pe_budget_take(bg, held);
	if (rc != 0)
		return pe_err_set(err, rc, rc == PE_ETOOBIG ? "positions" : "", rc == PE_ETOOBIG ?
				  "the positions need more memory than the server's whole budget (response_budget_bytes)" :
				  "the response memory budget is full; retry shortly");
	rc = pe_rope_apply_positions(&j->params, pos, x, err);
	pe_budget_give(bg, held);
	return rc;
}

/* Will the answer be the body buffer itself (answer_in_body)? The result must be computed in the
 * body (the input's dtype is the working one, same shape) and laid out as the body is: raw data
 * filling it, or npy data right after a standard header that ends where the data starts. */
static int answers_in_body(const struct tjob *j, const struct pe_tensor_mut *in, enum pe_dtype wd, enum pe_dtype dt,
			   const struct pe_out *o, size_t n)
{
	const char *d = in->data;
	if (o->gzip || in->dtype != wd || dt != in->dtype || d < j->body.data || d >= j->body.data + j->body.len)
		return 0;
	size_t off = (size_t)(d - j->body.data), bytes = n * pe_dtype_size(in->dtype);
	struct pe_tensor_view v = {.shape = in->shape, .dtype = dt, .data = d};
	if (o->fmt == PE_FMT_BIN)
		return off == 0 && bytes == j->body.len;
	return o->fmt == PE_FMT_NPY && off > 0 && pe_npy_header_len(&v) == off && off + bytes == j->body.len;
}

/* The most the job holds at once: the body (its usable size, as the budget holds it: pe_http_take_body),
 * the positions part, a JSON body's decoded tensor, the working copy and the reshaped
 * result all along; then first the scratch of the positions (by their exact count, int32 or
 * int64), given back before the wider output copy and the encoded answer (none when the answer is
 * the body itself) are made: the larger of those two phases. When that is past
 * the whole budget, the budget can never hold it: a 413 now, naming what sets the size, rather
 * than a 503 whose retries could never succeed. *more is what the job needs beyond its body and
 * positions part (held already). */
static int check_need(const struct tjob *j, const struct pe_tensor_mut *in, int owned, enum pe_dtype wd,
		      enum pe_dtype dt, size_t n_in, size_t npos, const struct pe_shape *os, size_t n_out,
		      uint64_t *more, struct pe_err *err)
{
	struct pe_budget_stats st;
	pe_budget_stats(j->os.h->opt.budget, &st);
	*more = 0;
	if (!st.limit)
		return 0;
	int reshaped = memcmp(os, &in->shape, sizeof *os) != 0;
	uint64_t need = j->body.budget ? pe_http_body_figure(&j->body) : j->body.len;
	uint64_t body = need, pos = j->pos.data ? pe_http_body_figure(&j->pos) : 0;
	uint64_t scratch = j->pos.data ? positions_scratch(npos, in, wd) : 0;
	need = pe_produce_add(need, pos);
	if (owned)
		need = pe_produce_add(need, pe_produce_mul(n_in, pe_dtype_size(in->dtype)));
	if (in->dtype != wd)
		need = pe_produce_add(need, pe_produce_block(n_in, pe_dtype_size(wd)));
	if (reshaped)
		need = pe_produce_add(need, pe_produce_block(n_out, pe_dtype_size(wd)));
	/* the positions' scratch is given back before the output is made: the larger of the two */
	uint64_t after = 0;
	if (pe_dtype_size(dt) > pe_dtype_size(wd))
		after = pe_produce_block(n_out, pe_dtype_size(dt));
	struct pe_out o = j->out;
	o.dt = dt;
	if (!(!reshaped && answers_in_body(j, in, wd, dt, &o, n_in)) && o.fmt != PE_FMT_PNG)
		after = pe_produce_add(after, pe_produce_out_bound(&o, os, 0, NULL));
	need = pe_produce_add(need, scratch > after ? scratch : after);
	*more = need - body - pos;
	pos = pe_produce_add(pos, scratch);
	if (need <= st.limit)
		return 0;
	int text = o.fmt == PE_FMT_JSON || o.fmt == PE_FMT_CSV;
	const char *param = text ? "format" : pe_dtype_size(dt) > pe_dtype_size(in->dtype) ? "dtype" :
			    !j->multipart ? "body" : pos > body ? "positions" : "x";
	return pe_err_set(err, PE_ETOOBIG, param,
			  "this transform would hold up to %" PRIu64 " bytes at once (the body, its working copies and "
			  "the answer): more than response_budget_bytes (%zu)", need, st.limit);
}

static void run(struct pe_oneshot *job, struct pe_oneshot_result *res)
{
	struct tjob *j = (struct tjob *)job;
	struct pe_err *err = &res->err;
	struct pe_tensor_mut in, x, y;
	void *in_alloc = NULL, *x_alloc = NULL, *y_alloc = NULL, *o_alloc = NULL;
	int owned = 0, rc, overflow, bad;
	struct pe_shape os;
	struct pe_buf out;
	struct pe_budget *bg = NULL; /* the job's share of the budget, once its need is known */
	pe_buf_init(&out, j->os.h->opt.max_response_bytes);
	if ((rc = pe_tjob_decode(j, &in, &owned, err)) != 0) {
		if (j->multipart && !strcmp(err->param, "body")) /* the tensor came in the part x */
			snprintf(err->param, sizeof err->param, "x");
		goto done;
	}
	in_alloc = owned ? in.data : NULL;
	enum pe_dtype dt = output_dtype(j, in.dtype, &bad, err);
	if (bad || (rc = pe_transform_shape(&j->params, &in.shape, &os, err)) != 0)
		goto done;
	size_t n_in = pe_shape_count(&in.shape, &overflow), n_out = pe_shape_count(&os, &overflow);
	if (overflow || n_out > j->os.h->opt.max_elements) {
		const char *grows = j->params.def->grows, *body = j->multipart ? "x" : "body";
		pe_err_set(err, PE_ETOOBIG, grows && n_in <= j->os.h->opt.max_elements ? grows : body,
			   "the result would have more than %" PRIu64 " elements", j->os.h->opt.max_elements);
		goto done;
	}
	enum pe_dtype wd = pe_transform_work_dtype(j->kind == BODY_JSON ? dt : in.dtype);
	struct pe_positions pos;
	size_t npos = 0;
	if (j->pos.data) { /* decoded first: the count, not the part's bytes, sets its scratch */
		if ((rc = pe_tjob_decode_positions(j, &pos, err)) != 0)
			goto done;
		npos = pe_shape_count(&pos.shape, &overflow);
	}
	uint64_t more; /* what the job needs beyond its body, taken at once (pe_produce_share_open): a
			* job whose body holds half the budget waits for the rest rather than refuse
			* another such job and be refused by it, neither ever served */
	if ((rc = check_need(j, &in, owned, wd, dt, n_in, npos, &os, n_out, &more, err)) != 0 ||
	    (rc = pe_produce_share_open(j->os.h, more, &bg, err)) != 0)
		goto done;
	pe_produce_answer_buf(j->os.h, &out, bg);
	if ((rc = pe_tjob_to_work(&in, wd, n_in, &x, &x_alloc, bg, err)) != 0)
		goto done;
	y = (struct pe_tensor_mut){.shape = os, .dtype = wd, .data = x.data};
	if (memcmp(&os, &in.shape, sizeof os) != 0 &&
	    !(y.data = y_alloc = pe_budget_malloc(bg, (n_out ? n_out : 1) * pe_dtype_size(wd), &rc)))
		goto done;
	if (j->pos.data && (rc = apply_positions(j, bg, &pos, npos, &in, &x, err)) != 0)
		goto done;
	if ((!j->pos.data && (rc = pe_transform_apply(&j->params, &x, &y, dt, err)) != 0) ||
	    (rc = pe_tjob_to_output(&y, dt, n_out, &o_alloc, bg, err)) != 0)
		goto done;
	res->out = j->out;
	res->out.dt = dt;
	struct pe_tensor_view v = {.shape = os, .dtype = dt, .data = y.data};
	if (pe_first_nonfinite(&v, n_out) < n_out) {
		int scaled = pe_param_index(j->params.def, "xscale") >= 0 && pe_param_real(&j->params, "xscale") != 1;
		pe_err_set(err, PE_EINVAL, scaled ? "xscale" : "body",
			   "the result overflows %s (or the body holds NaN/Infinity)%s", pe_dtype_name(dt),
			   scaled ? ": make xscale smaller" : "");
		goto done;
	}
	pe_shape_format(&os, res->shape, sizeof res->shape);
	if (answer_in_body(j, &v, n_out, res))
		goto done;
	if ((rc = pe_out_encode(&res->out, &j->os.h->opt.parallel, NULL, &v, &out, err)) != 0)
		goto done;
	res->data = pe_buf_steal(&out, &res->len);
	res->held = bg ? pe_mem_size(res->data) : 0;
	res->budget = j->os.h->opt.budget;
	pe_budget_share_hand_over(bg, res->held); /* the answer outlives the job's share */
done:
	if (rc == PE_EBUSY)
		pe_err_set(err, rc, "", "the response memory budget is full; retry shortly");
	else if (rc != 0 && !err->code)
		pe_err_set(err, rc, "", "the transform failed");
	pe_buf_destroy(&out);
	free(in_alloc);
	pe_budget_free_block(bg, x_alloc);
	pe_budget_free_block(bg, y_alloc);
	pe_budget_free_block(bg, o_alloc);
	pe_budget_share_close(bg);
}

static void tjob_free(struct pe_oneshot *os)
{
	struct tjob *j = (struct tjob *)os;
	pe_params_destroy(&j->params);
	free(j->dtype);
	pe_http_release_body(&j->body);
	pe_http_release_body(&j->pos);
	free(j);
}

/* The job stops at its request's deadline like a table's (oneshot.c): kernels check between
 * blocks, pe_transform_apply on entry; a job that starts past it does not even decode the body. */
static const struct pe_oneshot_answer answer = {.noun = "the transform"};

static const enum pe_format kind_format[] = {[BODY_NPY] = PE_FMT_NPY, [BODY_BIN] = PE_FMT_BIN, [BODY_JSON] = PE_FMT_JSON};

/* Format: format= if given, else the body's own. gzip as for tables. */
static int pick_format(struct tjob *j, const struct pe_out_query *q, struct MHD_Connection *conn, struct pe_err *err)
{
	j->out.fmt = kind_format[j->kind];
	if (q->format) {
		int rc = pe_negotiate_format(q->format, NULL, OFFERED, &j->out.fmt, err);
		if (rc != 0)
			return rc;
	}
	const char *ae = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING);
	j->out.gzip = (j->out.fmt == PE_FMT_JSON || j->out.fmt == PE_FMT_CSV) && pe_accepts_gzip(ae);
	return 0;
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

/* What the x part holds, as a plain body's Content-Type would say: npy by its magic, the part's
 * own Content-Type when it names JSON or npy (curl -F sends application/octet-stream for a
 * file), raw bytes when shape= describes them, JSON when it looks like JSON. */
static int x_part_kind(const struct pe_mp_part *x, int shape, enum body_kind *k, struct pe_err *err)
{
	const char *d = x->buf.data;
	size_t n = x->buf.len, i = 0;
	if (n >= 6 && !memcmp(d, "\x93NUMPY", 6))
		*k = BODY_NPY;
	else if (body_kind_of(x->type, k) == 0 && *k != BODY_BIN)
		return 0;
	else if (shape)
		*k = BODY_BIN;
	else {
		while (i < n && (d[i] == ' ' || d[i] == '\t' || d[i] == '\r' || d[i] == '\n'))
			i++;
		if (i == n || (d[i] != '[' && d[i] != '{'))
			return pe_err_set(err, PE_EBODY, "x", "the x part is neither .npy nor JSON; raw bytes need shape= "
					  "(and dtype=)");
		*k = BODY_JSON;
	}
	return 0;
}

static struct tjob *tjob_new(struct req *r, struct MHD_Connection *conn, struct pe_err *err)
{
	struct tjob *j = calloc(1, sizeof *j);
	if (!j) {
		pe_err_set(err, PE_ENOMEM, "", "out of memory");
		return NULL;
	}
	j->os.h = r->h;
	struct pe_mp *m = r->ctx;
	struct pe_mp_part *x = m ? pe_mp_get(m, "x") : NULL;
	body_kind_of(content_type(conn), &j->kind);
	struct pe_query *q = pe_contract_query(r);
	size_t rank;
	const double *shape = pe_param_list(&q->extras, "shape", &rank);
	pe_contract_take_params(r, &j->params);
	int rc = 0;
	if (m)
		rc = x_part_kind(x, shape != NULL, &j->kind, err);
	if (rc == 0 && shape && j->kind != BODY_BIN)
		rc = pe_err_set(err, PE_EINVAL, "shape", "shape= describes application/octet-stream bodies only");
	if (rc == 0 && shape && rank > PE_MAX_RANK)
		rc = pe_err_set(err, PE_EINVAL, "shape", "shape has %zu sizes, more than %d", rank, PE_MAX_RANK);
	if (rc == 0)
		rc = pick_format(j, &q->out, conn, err);
	for (size_t i = 0; rc == 0 && shape && i < rank; i++)
		j->raw_shape.dim[i] = (size_t)shape[i];
	j->raw_shape.rank = rc == 0 && shape ? (int)rank : 0;
	j->has_shape = shape != NULL;
	j->dtype = dup_or_null(q->out.dtype);
	if (rc != 0) {
		tjob_free(&j->os);
		return NULL;
	}
	if (m) {
		struct pe_mp_part *pp = pe_mp_get(m, "positions");
		j->body.data = pe_buf_steal(&x->buf, &j->body.len);
		j->body.budget = r->h->opt.budget;
		j->multipart = 1;
		if (pp) {
			j->pos.data = pe_buf_steal(&pp->buf, &j->pos.len);
			j->pos.budget = j->body.budget;
		}
	} else /* its reservation becomes the job's, as a part's is (check_need counts what it holds) */
		pe_http_take_body(r, &j->body);
	return j;
}

/* The body is complete: the job. */
static enum MHD_Result finish_cb(struct req *r, struct MHD_Connection *conn)
{
	struct pe_err err = {0};
	if (r->ctx && pe_mp_end(r->ctx, &err) != 0)
		return pe_http_problem(r, conn, &err);
	if (r->ctx && !pe_mp_get(r->ctx, "x")) {
		pe_err_set(&err, PE_EBODY, "x", "a multipart/form-data body needs a part named x (the tensor)");
		return pe_http_problem(r, conn, &err);
	}
	struct tjob *j = tjob_new(r, conn, &err);
	if (!j)
		return pe_http_problem(r, conn, &err);
	j->os.run = run;
	j->os.free = tjob_free;
	return pe_oneshot_start(r, conn, &j->os, &answer);
}

static int match_cb(void *hctx, const char *url, const void **target)
{
	const struct pe_table_def *def = strncmp(url, "/v1/", 4) == 0 ? pe_transform_find(url + 4) : NULL;
	*target = def;
	return def ? pe_http_def_route(def) : -1;
}

const struct pe_handler pe_transform_handler = {
	.name = "transforms",
	.match_cb = match_cb,
	.cors_methods = "POST, OPTIONS",
	.contract_cb = contract_cb,
	.begin_cb = begin_cb,
	.body_cb = body_cb,
	.finish_cb = finish_cb,
	.req_free_cb = mp_free_cb,
};
