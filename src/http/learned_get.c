/* GET /v1/learned/{name} and /v1/analysis/similarity?encoding=learned:{name}: a stored table in
 * any output format, optionally resampled (len=, or height= & width= [& antialias=1]), or the
 * position similarity of that table, through the cache (produce.c). learned.c routes here.
 *
 * Caching: a GET is keyed by "learned/<name>@<version>?<resampling>|<dtype>|<format>...", where the
 * version is everything that shapes the answer (the elements' sha256, dtype, shape, prefix_tokens
 * and grid), so a replaced table is never served from the cache, not even one re-uploaded with the
 * same bytes and another grid; the ETag is a hash of that key (produce.c, as every cached answer's).
 * Learned tables change, so responses say Cache-Control: no-cache (revalidate with If-None-Match)
 * instead of immutable. A miss reads the file with the version it expects; if the table was
 * replaced in between, the request fails with 503 and Retry-After rather than fill the key with
 * another version's bytes.
 *
 * Bounded work and values: a similarity's dot products are held to max_analysis_cost (the core's
 * count, pe_gram_cost) before any job, and a job stops at job_timeout (pe_gram checks between
 * blocks; produce.c sets the deadline, and a job that starts late does nothing). A dtype too
 * narrow for the answer is a 400 naming dtype: decided here from the version's largest |value|
 * (the store keeps it) where that decides it, else by the job on the values it made, whose
 * failure (PE_EINVAL) names dtype in failure_cb.
 *
 * Memory: everything a job allocates is reserved on the response budget first: the file's
 * elements as read, their float64 copy, the resampled copy, a grid resampling's intermediate, the
 * values in the output dtype and the output buffer. The most it holds at once is added up on a
 * miss before the job exists
 * (job_need): more than the whole budget is a 413 naming what sizes it, without any work; the job
 * takes that much at once before it runs (need_cb: produce.c's share). A remote store's read
 * holds the elements three times until it returns (read_copies): libpq's input buffer with the
 * row's message, the PGresult it copies that into, and ours.
 *
 * A failed read is answered with the store's own problem, detail unchanged (the store writes them
 * for clients): PE_EUNAVAIL 503, PE_ESTORE 500 with the database's reason, PE_EIO only for a table
 * whose checksum does not match. failure_cb words the rest (a job that never ran). */
#include "http/learned_get.h"
#include "http/contract.h"
#include "http/produce.h"
#include "posenc/resample.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_MAX 512
#define OFFERED                                                                                   \
	(PE_FMT_BIT(PE_FMT_JSON) | PE_FMT_BIT(PE_FMT_NPY) | PE_FMT_BIT(PE_FMT_BIN) | PE_FMT_BIT(PE_FMT_CSV) | \
	 PE_FMT_BIT(PE_FMT_PNG))

/* ---- parameters: strict parsing through the core's parameter machinery ---- */

static int get_check(struct pe_params *p, struct pe_err *err);

static const struct pe_param_spec get_specs[] = {
	{"len", PE_PT_INT, "", 1, 16777216, NULL, "rows to resample a table without a grid to (linear)"},
	{"height", PE_PT_INT, "", 1, 65536, NULL, "grid rows to resample to (bicubic), with width"},
	{"width", PE_PT_INT, "", 1, 65536, NULL, "grid columns to resample to (bicubic), with height"},
	{"antialias", PE_PT_BOOL, "0", 0, 1, NULL, "antialiased bicubic (timm's resample_abs_pos_embed default)"},
};
static const struct pe_table_def get_def = {.name = "learned", .params = get_specs, .nparams = 4,
					    .fixed_dtype = PE_DTYPE_COUNT_, .check = get_check};

static int given(const struct pe_params *p, const char *name) { return p->v[pe_param_index(p->def, name)].given; }

static int get_check(struct pe_params *p, struct pe_err *err)
{
	int len = given(p, "len"), h = given(p, "height"), w = given(p, "width");
	if (h != w)
		return pe_err_set(err, PE_EINVAL, h ? "width" : "height", "height and width resample a grid together: "
				  "give %s too", h ? "width" : "height");
	if (len && h)
		return pe_err_set(err, PE_EINVAL, "len", "len resamples a table without a grid; height and width a grid");
	if (given(p, "antialias") && !h)
		return pe_err_set(err, PE_EINVAL, "antialias", "antialias applies to height and width (bicubic)");
	return 0;
}

/* similarity's encoding=learned:{name}, read by the analysis handler to route here */
static const struct pe_param_spec encoding_spec[] = {
	{"encoding", PE_PT_TEXT, "", 0, 4096, NULL, "learned:{name}"},
};
static const struct pe_table_def encoding_def = {.name = "analysis/similarity", .params = encoding_spec,
						 .nparams = 1, .fixed_dtype = PE_DTYPE_COUNT_};

const struct pe_contract pe_learned_get_contract = {
	.methods = "GET, HEAD", .params = &get_def, .output = 1, .finish = 1};
const struct pe_contract pe_learned_similarity_contract = {
	.methods = "GET, HEAD", .params = &get_def, .output = 1, .extras = &encoding_def, .finish = 1};

void pe_learned_hex(const uint8_t *p, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		snprintf(out + 2 * i, 3, "%02x", p[i]);
}

/* ---- GET of a table: the cache, and the job that reads, resamples and encodes ---- */

struct gjob {
	struct pe_http *h;
	struct pe_store_meta meta; /* the version the key names */
	struct pe_params params;
	struct pe_out out;
	struct pe_shape shape;     /* of the result */
	int similarity;            /* answer the [rows, rows] dot products instead of the table */
	unsigned copies;           /* of the elements the store's read holds at once (read_copies) */
	uint64_t need;             /* the most it holds on the budget at once (job_need): its share */
};

/* How many copies of a table's elements a read from store s holds before it returns: the file
 * store reads into our buffer; PostgreSQL's row arrives whole in libpq's input buffer, is copied
 * into the PGresult, and from that into ours (the PGresult is cleared after the copy). */
static unsigned read_copies(struct pe_store *s)
{
	struct pe_store_stats st;
	pe_store_stats(s, &st);
	return st.remote ? 3 : 1;
}

static double elem(enum pe_dtype dt, const void *data, size_t i)
{
	if (dt == PE_F64)
		return ((const double *)data)[i];
	if (dt == PE_F16)
		return pe_f16_to_f32(((const uint16_t *)data)[i]);
	return ((const float *)data)[i];
}

/* The answer's grid (height x width) of a grid resampling. */
static void answer_grid(const struct pe_params *p, size_t *oh, size_t *ow)
{
	*oh = (size_t)pe_param_int(p, "height");
	*ow = (size_t)pe_param_int(p, "width");
}

/* The bytes of the grid resampling's intermediate for the answer's grid (pe_resample_grid_scratch). */
static size_t grid_scratch(const struct pe_store_meta *m, const struct pe_params *p)
{
	size_t oh, ow;
	answer_grid(p, &oh, &ow);
	return pe_resample_grid_scratch((size_t)m->grid_h, (size_t)m->grid_w, (size_t)m->cols, oh, ow);
}

/* The table as float64, resampled as the parameters say: [shape] values (caller frees). */
static double *table_values(const struct gjob *j, struct pe_budget *bg, const void *data, struct pe_err *err)
{
	const struct pe_store_meta *m = &j->meta;
	size_t n = (size_t)(m->rows * m->cols), nout = j->shape.dim[0] * (size_t)m->cols; /* rows x cols */
	int rc = 0;
	double *x = pe_budget_malloc(bg, n * sizeof *x, &rc), *y = NULL;
	enum pe_dtype coord = m->dtype == PE_F64 ? PE_F64 : PE_F32;
	if (!x) {
		pe_err_set(err, rc, "", rc == PE_EBUSY ? "the response memory budget is full; retry" : "out of memory");
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		x[i] = elem(m->dtype, data, i);
	if (!given(&j->params, "len") && !given(&j->params, "height"))
		return x;
	y = pe_budget_malloc(bg, nout * sizeof *y, &rc);
	if (y && given(&j->params, "len")) {
		rc = pe_resample_linear(x, (size_t)m->rows, (size_t)m->cols, y, nout / (size_t)m->cols, coord);
	} else if (y) {
		size_t oh, ow;
		answer_grid(&j->params, &oh, &ow);
		double *tmp = pe_budget_malloc(bg, grid_scratch(m, &j->params), &rc);
		if (tmp)
			rc = pe_resample_grid(x, (size_t)m->prefix_tokens, (size_t)m->grid_h, (size_t)m->grid_w,
					      (size_t)m->cols, y, oh, ow, (int)pe_param_int(&j->params, "antialias"), coord,
					      tmp);
		pe_budget_free_block(bg, tmp);
	}
	pe_budget_free_block(bg, x);
	if (rc != 0) {
		pe_budget_free_block(bg, y);
		pe_err_set(err, rc, "", "cannot resample the table");
		return NULL;
	}
	return y;
}

/* The answer's values in the output dtype: the (resampled) table rounded, or its dot products
 * [rows, rows] computed straight into it (cancellable between blocks). A value that rounds to
 * infinity is PE_EINVAL naming dtype: every stored element is finite, so an infinity here is an
 * overflow of the dtype (or of float64, for dot products of values past 1e154), never data. */
static int typed_values(const struct gjob *j, const double *v, void *typed, size_t n, struct pe_err *err)
{
	if (j->similarity) {
		int rc = pe_gram(v, j->shape.dim[0], (size_t)j->meta.cols, j->out.dt, typed, err);
		if (rc != 0)
			return rc;
	} else
		pe_store_f64(j->out.dt, typed, v, n);
	struct pe_tensor_view t = {.shape = j->shape, .dtype = j->out.dt, .data = typed};
	if (pe_first_nonfinite(&t, n) < n)
		return pe_err_set(err, PE_EINVAL, "dtype", "the %s reach beyond what %s can hold",
				  j->similarity ? "dot products" : "resampled values", pe_dtype_name(j->out.dt));
	return 0;
}

/* The producer: read, resample, round to the output dtype (or take the dot products) and encode
 * into out, everything reserved on out's budget (the job's share: need_cb). A PE_EINVAL it returns
 * always names dtype (failure_cb says so). */
static int produce_cb(void *arg, struct pe_buf *out, struct pe_body_info *info, struct pe_err *err)
{
	struct gjob *j = arg;
	struct pe_budget *bg = out->budget;
	struct pe_store_meta m;
	void *data = NULL, *typed = NULL;
	double *v = NULL;
	size_t n = j->shape.dim[0] * j->shape.dim[1], file = (size_t)j->meta.bytes;
	int rc = pe_budget_take(bg, j->copies * file); /* the elements as read, below */
	if (rc != 0)
		return pe_err_set(err, rc, "", "the response memory budget is full; retry");
	rc = pe_store_read(j->h->opt.store, j->meta.name, &j->meta, &m, &data, err);
	pe_budget_give(bg, (j->copies - 1) * file); /* the store's own copies are gone */
	if (rc == 0 && !(v = table_values(j, bg, data, err)))
		rc = err->code ? err->code : PE_ENOMEM;
	free(data);
	pe_budget_give(bg, file);
	if (rc == 0 && !(typed = pe_budget_malloc(bg, n * pe_dtype_size(j->out.dt), &rc)))
		pe_err_set(err, rc, "", "out of memory");
	if (rc == 0)
		rc = typed_values(j, v, typed, n, err);
	pe_budget_free_block(bg, v);
	if (rc == 0) {
		struct pe_tensor_view t = {.shape = j->shape, .dtype = j->out.dt, .data = typed};
		rc = pe_out_encode(&j->out, &j->h->opt.parallel, &j->params, &t, out, err);
	}
	pe_budget_free_block(bg, typed);
	if (rc == PE_EINVAL && strcmp(err->param, "dtype") != 0)
		rc = PE_EINTERNAL; /* everything else was checked before the job: failure_cb reads EINVAL as dtype */
	if (rc == 0)
		pe_shape_format(&j->shape, info->shape, sizeof info->shape);
	return rc;
}

static uint64_t need_cb(void *arg) { return ((struct gjob *)arg)->need; }

static void gjob_free_cb(void *arg)
{
	struct gjob *j = arg;
	pe_params_destroy(&j->params);
	free(j);
}

static const char *failure_detail(int code)
{
	switch (code) {
	case PE_EINVAL:
		return "the values (resampled, or their dot products) reach beyond what this dtype can hold (they "
		       "round to infinity): choose a wider dtype";
	case PE_ETIMEOUT:
		return "the computation was stopped at job_timeout";
	case PE_EDRAINING:
		return "the service is shutting down";
	case PE_ENOTFOUND:
		return "the table no longer exists (deleted, or its file removed from data_dir)";
	case PE_EBUSY:
		return "the table was replaced while this request ran, or the job queue or the response memory budget is full; retry";
	case PE_EIO:
		return "the stored table is damaged (its checksum does not match; a file is quarantined)";
	case PE_EUNAVAIL:
		return "the learned-table database cannot serve this now; retry";
	case PE_ESTORE:
		return "the learned-table database refused the read";
	case PE_ETOOBIG:
		return "the response would exceed the size limit";
	default:
		return "the table could not be produced";
	}
}

static void failure_cb(int code, struct pe_err *err)
{
	pe_err_set(err, code, code == PE_ENOTFOUND ? "name" : code == PE_EINVAL ? "dtype" : "", "%s",
		   failure_detail(code));
}

/* The shape of the answer for this table and these parameters; errors name the parameter. */
static int result_shape(const struct pe_http *h, const struct pe_store_meta *m, const struct pe_params *p,
			struct pe_shape *s, struct pe_err *err)
{
	uint64_t rows = m->rows, cells, n;
	if (given(p, "len") && m->grid_h)
		return pe_err_set(err, PE_EINVAL, "len", "%s has a %" PRIu64 "x%" PRIu64 " grid: resample it with height "
				  "and width", m->name, m->grid_h, m->grid_w);
	if (given(p, "height") && !m->grid_h)
		return pe_err_set(err, PE_EINVAL, "height", "%s has no grid (upload it with grid=h,w): resample it with "
				  "len", m->name);
	if (given(p, "len"))
		rows = (uint64_t)pe_param_int(p, "len");
	if (given(p, "height") && (__builtin_mul_overflow((uint64_t)pe_param_int(p, "height"),
							  (uint64_t)pe_param_int(p, "width"), &cells) ||
				   __builtin_add_overflow(cells, m->prefix_tokens, &rows)))
		rows = UINT64_MAX;
	if (__builtin_mul_overflow(rows, m->cols, &n) || n > h->opt.max_elements)
		return pe_err_set(err, PE_ETOOBIG, given(p, "len") ? "len" : given(p, "height") ? "height" : "",
				  "the table would have more than %" PRIu64 " elements", h->opt.max_elements);
	*s = (struct pe_shape){.rank = 2, .dim = {(size_t)rows, (size_t)m->cols}};
	return 0;
}

/* The parameter that sets the rows of the answer (for a 413 about its size): of a grid's two, the
 * larger. */
static const char *rows_param(const struct pe_params *p, const char *fallback)
{
	if (given(p, "len"))
		return "len";
	if (given(p, "height"))
		return pe_param_int(p, "width") > pe_param_int(p, "height") ? "width" : "height";
	return fallback;
}

/* The similarity of the (resampled) table: [rows, rows] against max_elements, and the work of its
 * dot products (the core's count, as for the other encodings) against max_analysis_cost. */
static int similarity_shape(const struct pe_http *h, const struct pe_store_meta *m, const struct pe_params *p,
			    struct pe_shape *s, struct pe_err *err)
{
	uint64_t n, work = pe_gram_cost(s->dim[0], m->cols);
	if (__builtin_mul_overflow((uint64_t)s->dim[0], (uint64_t)s->dim[0], &n) || n > h->opt.max_elements)
		return pe_err_set(err, PE_ETOOBIG, rows_param(p, "encoding"), "the similarity matrix would have more "
				  "than %" PRIu64 " elements", h->opt.max_elements);
	if (work > h->opt.max_analysis_cost)
		return pe_err_set(err, PE_ETOOBIG, rows_param(p, "encoding"), "this would cost %" PRIu64 " multiply-adds; "
				  "max_analysis_cost is %" PRIu64, work, h->opt.max_analysis_cost);
	s->dim[1] = s->dim[0];
	return 0;
}

/* Can the output dtype hold the answer? Decided here, before any work, wherever the stored table's
 * largest |element| decides it: the table as stored (exactly), or its dot products (the row holding
 * that element has a dot product with itself of at least its square: if the square overflows, so
 * does the answer). Resampled answers (bicubic overshoots, linear may miss the peak) and dot
 * products below that bound are checked by the job on the values it makes (typed_values). */
static int check_dtype(const struct pe_store_meta *m, const struct pe_params *p, enum pe_dtype dt, int similarity,
		       struct pe_err *err)
{
	if (given(p, "len") || given(p, "height"))
		return 0;
	double top = similarity ? m->max_abs * m->max_abs : m->max_abs;
	if (!isfinite(top))
		return pe_err_set(err, PE_EINVAL, "dtype", "the dot products reach beyond what even f64 can hold "
				  "(the table holds %.6g)", m->max_abs);
	return pe_check_dtype_range(&top, 1, dt, err);
}

/* "learned/<name>@<sha256>:<dtype>:<rows>x<cols>:<prefix_tokens>:<grid_h>x<grid_w>?<canonical
 * parameters>|<dtype>|<format>...": the version part holds every field of the table that
 * shapes an answer (pe_store_same_version), so none can change under a cached key. */
static int make_key(const struct pe_store_meta *m, const struct pe_params *p, const struct pe_out *o, int similarity,
		    char *key)
{
	char sha[65];
	pe_learned_hex(m->sha256, 32, sha);
	int n = snprintf(key, KEY_MAX, "%s/%s@%s:%s:%" PRIu64 "x%" PRIu64 ":%" PRIu64 ":%" PRIu64 "x%" PRIu64 "?",
			 similarity ? "similarity/learned" : "learned", m->name, sha, pe_dtype_name(m->dtype), m->rows,
			 m->cols, m->prefix_tokens, m->grid_h, m->grid_w);
	int c = n > 0 && n < KEY_MAX ? pe_params_canonical(p, key + n, KEY_MAX - (size_t)n) : -1;
	int t = c >= 0 ? pe_out_key(o, key + n + c, KEY_MAX - (size_t)(n + c)) : -1;
	return t < 0 ? -1 : n + c + t;
}

struct miss {
	struct pe_http *h;
	const struct pe_store_meta *meta;
	struct pe_params *params;
	const struct pe_out *out;
	const struct pe_shape *shape;
	int similarity;
	size_t keylen;
};

/* What reading the table holds whatever the answer: the file's elements with their float64 copy,
 * or, when more, the copies the store's read holds (read_copies). */
static uint64_t table_need(const struct miss *m)
{
	const struct pe_store_meta *t = m->meta;
	uint64_t x = pe_produce_block(pe_produce_mul(t->rows, t->cols), sizeof(double));
	uint64_t read = pe_produce_add(t->bytes, x);
	uint64_t store = pe_produce_mul(t->bytes, read_copies(m->h->opt.store)); /* during the store's read */
	return read > store ? read : store;
}

/* The most produce_cb holds on the budget at once for output o (its steps in order): the file's
 * elements with their float64 copy, the resampled copy and a grid's intermediate (or, when more,
 * the copies the store's read holds: read_copies); the values (float64) with the answer in the
 * output dtype; that with the output buffer. */
static uint64_t job_need(const struct miss *m, const struct pe_out *o, size_t keylen, const struct pe_png_layout *png)
{
	const struct pe_store_meta *t = m->meta;
	int overflow, resampled = given(m->params, "len") || given(m->params, "height");
	uint64_t f64 = sizeof(double);
	/* each budgeted block (pe_budget_malloc) with its usable size's rounding: without it the typed
	 * block spilled whole past the share, a 503 on a budget of exactly the need */
	uint64_t values = pe_produce_block(pe_produce_mul(m->shape->dim[0], t->cols), f64);
	uint64_t count = pe_shape_count(m->shape, &overflow);
	uint64_t typed = overflow ? UINT64_MAX : pe_produce_block(count, pe_dtype_size(o->dt));
	uint64_t read = pe_produce_add(table_need(m), resampled ? values : 0);
	if (given(m->params, "height")) { /* the grid's intermediate, its two passes between */
		size_t scratch = grid_scratch(t, m->params);
		read = pe_produce_add(read, scratch == SIZE_MAX ? UINT64_MAX : pe_produce_block(scratch, 1));
	}
	uint64_t out = pe_produce_out_bound(o, m->shape, 2 * keylen + 1024, png);
	uint64_t need = pe_produce_add(values, typed);
	need = need > read ? need : read;
	return pe_produce_add(typed, out) > need ? pe_produce_add(typed, out) : need;
}

/* Could the job ever fit in the response budget? The 413 names the table (or the encoding naming
 * it) when reading it alone cannot fit, format when the answer would fit as bin, else what sets its
 * rows. A picture's size comes from its layout, which the shape alone
 * decides (a shape that cannot be drawn is the job's error to report). */
static int check_budget(const struct miss *m, uint64_t *need_out, struct pe_err *err)
{
	struct pe_budget_stats st;
	struct pe_png_layout lay;
	struct pe_tensor_view v = {.shape = *m->shape, .dtype = m->out->dt, .data = NULL};
	struct pe_png_options po;
	pe_png_options_init(&po);
	po.cmap = (enum pe_cmap)m->out->cmap;
	po.scale = m->out->scale;
	int png = m->out->fmt == PE_FMT_PNG && pe_png_plan(&v, &po, &lay, &(struct pe_err){0}) == 0;
	struct pe_out bin = {.fmt = PE_FMT_BIN, .dt = m->out->dt};
	uint64_t need = *need_out = job_need(m, m->out->fmt == PE_FMT_PNG && !png ? &bin : m->out, m->keylen, png ? &lay : NULL);
	pe_budget_stats(m->h->opt.budget, &st);
	if (!m->h->opt.budget || need <= st.limit)
		return 0;
	const char *table = m->similarity ? "encoding" : "name";
	const char *param = rows_param(m->params, table);
	if (table_need(m) > st.limit)
		param = table;
	else if (job_need(m, &bin, 0, NULL) <= st.limit)
		param = "format";
	return pe_produce_budget_check(m->h, need, param, err);
}

/* A miss (MHD thread): whether the job could fit in the response budget at all; then the job
 * takes over the parameters. */
static void *gjob_new_cb(void *ctx, struct pe_err *err)
{
	struct miss *m = ctx;
	uint64_t need;
	if (check_budget(m, &need, err) != 0)
		return NULL;
	struct gjob *j = malloc(sizeof *j);
	if (!j)
		return NULL;
	*j = (struct gjob){.h = m->h, .meta = *m->meta, .params = *m->params, .out = *m->out, .shape = *m->shape,
			   .similarity = m->similarity, .copies = read_copies(m->h->opt.store), .need = need};
	memset(m->params, 0, sizeof *m->params);
	return j;
}

static const struct pe_producer producer = {
	.cache_control = "no-cache",
	.job_new_cb = gjob_new_cb,
	.produce_cb = produce_cb,
	.job_free_cb = gjob_free_cb,
	.need_cb = need_cb,
	.failure_cb = failure_cb,
	.client_details = 1, /* the store's details: a database's refusal is answered with its reason */
};

/* A failed stat (code) as the request's problem (a missing table named by param): the store down
 * says why, as the store words it (PE_EUNAVAIL: a retry may help; PE_ESTORE: the database's
 * configuration). */
static int stat_failed(struct pe_store *store, const char *name, const char *param, int code, struct pe_err *err)
{
	if (code != PE_EUNAVAIL && code != PE_ESTORE)
		return pe_err_set(err, PE_ENOTFOUND, param, "no learned table named %s", name);
	return pe_store_unready(store, code, err);
}

/* GET a table (similarity 0) or its position similarity (1: /v1/analysis/similarity with
 * encoding=learned:{name}, whose "encoding" parameter was read by the caller). */
static enum MHD_Result get_common(struct req *r, struct MHD_Connection *conn, const char *name, int similarity)
{
	struct pe_err err = {0};
	struct pe_query *pq = pe_contract_query(r);
	struct pe_params *p = &pq->params;
	struct pe_out o;
	struct pe_store_meta m;
	struct pe_shape s = {0};
	char key[KEY_MAX];
	enum MHD_Result ret;
	int rc = p->def == &get_def ? 0 : pe_err_set(&err, PE_EINTERNAL, "", "the route declared other parameters"), keylen = -1;
	if (rc == 0)
		rc = pe_http_out_resolve(&o, &pq->out, conn, PE_DTYPE_COUNT_, OFFERED, &err);
	if (rc == 0 && (rc = pe_store_stat(r->h->opt.store, name, &m)) != 0)
		rc = stat_failed(r->h->opt.store, name, similarity ? "encoding" : "name", rc, &err);
	if (rc == 0)
		rc = result_shape(r->h, &m, p, &s, &err);
	if (rc == 0 && similarity)
		rc = similarity_shape(r->h, &m, p, &s, &err);
	if (rc == 0)
		rc = check_dtype(&m, p, o.dt, similarity, &err);
	if (rc == 0 && atomic_load(&r->h->draining))
		rc = pe_err_set(&err, PE_EDRAINING, "", "the service is shutting down");
	if (rc == 0 && (keylen = make_key(&m, p, &o, similarity, key)) < 0)
		rc = pe_err_set(&err, PE_EINTERNAL, "", "cannot form the cache key");
	struct miss ms = {.h = r->h, .meta = &m, .params = p, .out = &o, .shape = &s, .similarity = similarity,
			  .keylen = keylen > 0 ? (size_t)keylen : 0};
	if (rc != 0)
		ret = pe_http_problem(r, conn, &err);
	else
		ret = pe_produce_answer(r, conn, &producer, &o, key, (size_t)keylen, &ms);
	return ret;
}

enum MHD_Result pe_learned_get(struct req *r, struct MHD_Connection *conn, const char *name)
{
	return get_common(r, conn, name, 0);
}

enum MHD_Result pe_learned_similarity(struct req *r, struct MHD_Connection *conn, const char *name)
{
	struct pe_err err = {0}, why = {0};
	if (pe_store_name_check(name, strlen(name), &why) != 0) { /* why, not err: the detail is formatted into err */
		pe_err_set(&err, PE_EINVAL, "encoding", "encoding=learned:{name} needs a valid table name: %s", why.detail);
		return pe_http_problem(r, conn, &err);
	}
	return get_common(r, conn, name, 1);
}
