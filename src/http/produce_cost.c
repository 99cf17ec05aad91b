/* What a produce-and-cache job may cost before it runs (see produce.h; produce.c runs the jobs):
 * the most memory its answer can take at once in each format (pe_produce_out_bound, from the
 * writers' own bounds, for the budget's share and its 413 check) and the time an inline
 * computation is estimated at (the per-element and fixed costs measured with
 * tests/bench/bench_inline.c), with saturating arithmetic so a client's absurd shape counts as too
 * big, never as small. */
#include "http/produce.h"

#include <inttypes.h>
#include <string.h>

/* ---- the response budget, before a job ---- */

uint64_t pe_produce_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

uint64_t pe_produce_mul(uint64_t a, uint64_t b) { return b && a > UINT64_MAX / b ? UINT64_MAX : a * b; }

/* Each writer answers for its own output and reservations (pe_out_bound): nothing of a format's
 * internals is known here. */
uint64_t pe_produce_out_bound(const struct pe_out *o, const struct pe_shape *s, size_t head,
			      const struct pe_png_layout *png)
{
	size_t n = pe_out_bound(o, s, head, png);
	return n == SIZE_MAX ? UINT64_MAX : n;
}

uint64_t pe_produce_block(uint64_t n, uint64_t size) { return pe_produce_add(pe_produce_mul(n, size), 4096); }

int pe_produce_share_open(struct pe_http *h, uint64_t n, struct pe_budget **share, struct pe_err *err)
{
	double until = pe_monotonic() + PE_PRODUCE_SHARE_WAIT_S, deadline = pe_cancel_deadline();
	if (deadline > 0 && deadline < until)
		until = deadline;
	int rc;
	*share = pe_budget_share_open(h->opt.budget, n > SIZE_MAX ? SIZE_MAX : (size_t)n, until, &rc);
	if (rc == PE_ETIMEOUT || rc == PE_EDRAINING)
		return pe_cancel_err(rc, err);
	if (rc)
		pe_err_set(err, rc, "", rc == PE_ENOMEM ? "out of memory" : "the response memory budget is full; retry shortly");
	return rc;
}

int pe_produce_budget_check(struct pe_http *h, uint64_t need, const char *param, struct pe_err *err)
{
	struct pe_budget_stats st;
	if (!h->opt.budget)
		return 0;
	pe_budget_stats(h->opt.budget, &st);
	if (need <= st.limit)
		return 0;
	pe_budget_take(h->opt.budget, need > SIZE_MAX ? SIZE_MAX : (size_t)need); /* refused: counted */
	int fmt = !strcmp(param, "format");
	return pe_err_set(err, PE_ETOOBIG, param,
			  "building this response could take up to %" PRIu64 " bytes at once, more than "
			  "response_budget_bytes (%zu): %s%s needs less",
			  need, st.limit, fmt ? "a binary format (bin, npy)" : "a smaller ", fmt ? "" : param);
}

/* ---- inline work ---- */

/* Per-element costs in nanoseconds and the fixed cost of a job (parameters, buffers, headers),
 * measured with tests/bench/bench_inline.c (-O3, AMD EPYC, one thread; medians of 201 distinct
 * sinusoidal tables, 16x16 to 128x128): bin and npy 0.9-1.8 ns per element past ~3 us; JSON and
 * CSV 23-36 (f32: shortest round-trip digits; f64 prints twice the digits); gzip'd text 230-480
 * in all; PNG 3.2-4.7 ms whatever the size (libpng and zlib set up per image), so never inline.
 *   gzip also has a fixed cost: libdeflate resets its level-6 hash tables on every call (inputs
 * over 55 bytes). Its compressor (656 KiB) is kept per thread (src/tensor/gzip.c): allocated per
 * response it would often be mapped afresh and faulted in (175-257 us more on the HTTP thread,
 * 51 page faults a request). Kept, bench_inline's gzip section gives 9-13 us for a 1x2
 * table and 12-17 for a 4x4 over the same plain JSON, and posencd (1000 distinct gzip'd 1x2 or 4x4
 * requests against the same without, the HTTP thread's CPU from schedstat, 30 rounds) 8-48 us
 * more, ~25 median, no extra faults. Priced at 30 us: at the default inline_max_us gzip'd tables
 * up to ~4x4 run inline (34-41 us estimated), 8x8 and larger take the pool. */
#define EST_FIXED_NS 3000
#define EST_RAW_NS 2
#define EST_TEXT_NS 40
#define EST_TEXT_F64_NS 70
#define EST_GZIP_NS 500
#define EST_GZIP_FIXED_NS 30000

/* The computation's own costs, the worst measured over every table (one thread, the machine
 * loaded; a hostile client picks the worst): wide sinusoidal tables take ~1 ns per element, but
 * elements that each need their own pow/log/sin/cos take up to ~28 (rope/inv_freq, relative/t5
 * with k_len=1, rope's compat=hf/ggml at large offsets), f16 and bf16 up to ~12 more all told
 * (rope at dim 128: 221 us against 36 in f32), and a row (innermost vector) 40-110 all told at
 * widths 1-4 (rope at dim 2, sinusoidal at dim 1, M-RoPE at dim 2: 10-23x what elements alone
 * predicted), which a row's fixed 80 plus its elements' 30 each covers. An intermediate
 * element (an analysis' encoding table, analysis/order's Gaussian X) costs up to ~150; a
 * multiply-add of an analysis about 1. */
#define EST_COMPUTE_NS 30
#define EST_NARROW_NS 10
#define EST_ROW_NS 80
#define EST_INTERMEDIATE_NS 150

uint64_t pe_produce_compute_ns(enum pe_dtype dt, uint64_t elements, uint64_t rows, uint64_t intermediate,
			       uint64_t madds)
{
	uint64_t per = EST_COMPUTE_NS + (dt == PE_F16 || dt == PE_BF16 ? EST_NARROW_NS : 0);
	uint64_t ns = pe_produce_add(pe_produce_mul(elements, per), pe_produce_mul(rows, EST_ROW_NS));
	return pe_produce_add(pe_produce_add(ns, pe_produce_mul(intermediate, EST_INTERMEDIATE_NS)), madds);
}

uint64_t pe_produce_estimate_ns(const struct pe_out *o, uint64_t elements, uint64_t work)
{
	uint64_t per;
	switch (o->fmt) {
	case PE_FMT_BIN:
	case PE_FMT_NPY:
		per = EST_RAW_NS;
		break;
	case PE_FMT_JSON:
	case PE_FMT_CSV:
		if (o->gzip)
			work = pe_produce_add(work, EST_GZIP_FIXED_NS);
		per = o->gzip ? EST_GZIP_NS : o->dt == PE_F64 ? EST_TEXT_F64_NS : EST_TEXT_NS;
		break;
	default:
		return UINT64_MAX;
	}
	return pe_produce_add(pe_produce_add(pe_produce_mul(elements, per), work), EST_FIXED_NS);
}
