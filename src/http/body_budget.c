/* A request body's memory on the response budget (contract in internal.h: pe_http_body_hold and
 * the functions beside it). Split from server.c, which calls these for every handler alike.
 *
 * A body a handler keeps (r->body, or the parts a multipart reader holds) is memory a client
 * controls, so it is reserved on the response budget (opt.budget) before it is held: the declared
 * Content-Length at once, a chunked body as it grows (each block the buffer will allocate, before
 * it does). When the budget cannot take it the body is released and the request refused through
 * the server's refusal path: 503 with Retry-After, or 413 when the body alone is larger than the
 * whole budget (named by its whole size in either framing), the rest of the body dropped. The
 * reservation is a non-blocking compare-and-swap, and it is given back when the request ends (the
 * handler may have handed the bytes to its job, which runs while the request waits). */
#include "http/internal.h"
#include "http/router.h"

#include <stdint.h>

size_t pe_http_body_figure(const struct pe_held_body *b)
{
	size_t bound = pe_mem_bound(b->len + 1), real = pe_mem_size(b->data); /* a body's block holds a NUL past it */
	return real > bound ? real : bound;
}

void pe_http_take_body(struct req *r, struct pe_held_body *b)
{
	b->budget = r->h->opt.budget;
	b->data = pe_buf_steal(&r->body, &b->len);
	size_t real = pe_mem_size(b->data);
	if (real > r->body_held)
		pe_budget_charge(b->budget, real - r->body_held);
	else
		pe_budget_give(b->budget, r->body_held - real);
	r->body_held = 0;
}

void pe_http_release_body(struct pe_held_body *b)
{
	pe_budget_free_block(b->budget, b->data);
	b->data = NULL;
	b->len = 0;
}

/* The 413 of a body of `bytes` bytes that the whole budget can never hold. */
static void body_past_budget(struct pe_err *err, uint64_t bytes)
{
	pe_err_set(err, PE_ETOOBIG, "body", "a body of %llu bytes needs more memory than the server's whole "
		   "budget (response_budget_bytes)", (unsigned long long)bytes);
}

/* Refuse a body the budget cannot hold: its memory released, the rest of it dropped. A chunked
 * body past the whole budget is named by its whole size once it has ended (answer_refusal), as a
 * declared one is by its Content-Length. */
static void refuse_body(struct req *r, int rc, uint64_t bytes)
{
	struct pe_err err = {0};
	r->body_past_budget = rc == PE_ETOOBIG;
	pe_buf_destroy(&r->body);
	pe_budget_give(r->h->opt.budget, r->body_held);
	r->body_held = 0;
	r->body_wanted = 0;
	if (rc == PE_ETOOBIG)
		body_past_budget(&err, bytes);
	else
		pe_err_set(&err, rc == PE_EBUSY ? PE_EBUSY : PE_ENOMEM, "body",
			   "the memory budget for request bodies and responses is full; retry");
	pe_http_refuse(r, &err, NULL);
}

void pe_http_body_past_budget(struct req *r) { r->body_past_budget = 1; }

/* What a body buffer of `block` bytes holding `len` occupies when a handler sized it from
 * Content-Length at once: small blocks whole; blocks from 128 KiB up are mappings of their own
 * (mallopt in main), whose pages count once written, so the bytes written rounded up to 64 KiB.
 * A buffer that grows (chunked) counts its whole block: realloc may hold old and new a moment. */
#define BODY_MAPPED ((size_t)128 << 10)
#define BODY_STEP ((size_t)64 << 10)

static size_t body_resident(size_t block, size_t len)
{
	size_t touched = len > SIZE_MAX - BODY_STEP ? SIZE_MAX : (len + BODY_STEP - 1) / BODY_STEP * BODY_STEP;
	return block < BODY_MAPPED || touched > block ? block : touched;
}

/* Reserve on the budget what r->body will occupy once it holds `more` bytes more (its block after
 * the buffer's own growth; body_resident for a buffer sized at once), then grow it: a body holds
 * only as much as it has sent (a client trickling a large declared body holds what arrived, not
 * what it promised). What is weighed against the whole budget is the body so far, as a declared
 * one's length is (reserve_declared), never the increment: each increment of a chunked body past
 * the budget is below it, and would be refused as busy (503) on every try. A body within the budget is
 * held up to its limit and no further (its block grows no larger; the allocator's rounding is
 * charged after, as always): whether its job fits is the job's question, the same for every
 * framing (pe_http_body_figure). The whole-budget check counts every body byte the handler took
 * (body_seen), also where the handler holds them itself: a chunked multipart body past the budget
 * is 413, not 503 on every try. 0 or the budget's code (PE_EBUSY;
 * PE_ETOOBIG) or PE_ENOMEM. */
static int hold_body(struct req *r, uint64_t more)
{
	struct pe_budget_stats st;
	int past_max = more > r->body.max || (size_t)more > r->body.max - r->body.len;
	if (past_max && r->body.max)
		return 0; /* past max: the handler's body_cb refuses it (413) */
	pe_budget_stats(r->h->opt.budget, &st);
	size_t most = st.limit ? st.limit : SIZE_MAX;
	if (more > most || r->body_seen > most - more)
		return PE_ETOOBIG;
	if (past_max)
		return 0; /* a handler that holds the body's parts itself (multipart: max 0) reserves them */
	size_t want = r->body.len + (size_t)more;
	size_t block = pe_buf_block_within(&r->body, (size_t)more, most);
	size_t target = r->body_sized ? body_resident(block, want) : block;
	if (target > most)
		target = most;
	if (target > r->body_held) {
		int rc = pe_budget_take(r->h->opt.budget, target - r->body_held);
		if (rc != 0)
			return rc;
		r->body_held = target;
	}
	return pe_buf_reserve_within(&r->body, (size_t)more, most) == PE_ENOMEM ? PE_ENOMEM : 0;
}

/* After the handler's begin_cb wanted the body: a declared length the whole budget can never
 * hold is a 413 now; anything else is reserved as it arrives (hold_body). */
void pe_http_reserve_declared(struct req *r)
{
	struct pe_budget_stats st;
	if (!r->body_wanted || r->refusal.code || r->chunked)
		return;
	pe_budget_stats(r->h->opt.budget, &st);
	if (st.limit && r->declared > st.limit)
		refuse_body(r, PE_ETOOBIG, r->declared);
	else
		r->body_sized = r->body.cap >= r->declared && r->body.cap >= BODY_MAPPED;
}

/* n body bytes, held: to the handler, the allocator's rounding past the reservation charged.
 * 0, or the handler's refusal (past its limit). */
static int take_body_bytes(struct req *r, const char *data, size_t n)
{
	r->body_seen += n;
	if (pe_router_body(r, data, n) != 0)
		return -1;
	size_t have = pe_mem_size(r->body.data);
	if (r->body_sized)
		have = body_resident(have, r->body.len);
	if (have > r->body_held) {
		pe_budget_charge(r->h->opt.budget, have - r->body_held);
		r->body_held = have;
	}
	return 0;
}

int pe_http_body_hold(struct req *r, const char *data, size_t n)
{
	int rc = hold_body(r, n);
	if (rc != 0) {
		refuse_body(r, rc, r->body_seen + n);
		return rc;
	}
	if (take_body_bytes(r, data, n) != 0) {
		r->body_too_big = 1; /* keep reading (and dropping) to answer 413 at the end */
		return PE_ETOOBIG;
	}
	return 0;
}

void pe_http_body_refusal_final(struct req *r)
{
	if (r->body_past_budget) /* chunked: the bytes taken, and those dropped after (the refusing chunk too) */
		body_past_budget(&r->refusal, r->chunked ? r->body_seen + r->dropped : r->declared);
}
