/* posenc cache: an LRU of opaque values bounded in bytes, with refcounted entries and single flight.
 *
 * Keys are byte strings (the canonical request). Values are opaque to the cache: it stores a
 * pointer, the number of bytes it accounts for, and a destructor called when the last reference is
 * dropped after the entry left the cache (eviction, replacement or pe_cache_free).
 *
 * Single flight: pe_cache_acquire either hands out a referenced entry (hit), or registers the
 * caller as a waiter on a computation already under way, or makes the caller the one who must
 * compute (miss) and later call pe_cache_fill or pe_cache_fail. Waiters' callbacks run on the
 * thread that fills or fails, outside the cache lock, each with its own reference (to release).
 *
 * Every function is thread-safe. A value larger than the whole budget is still delivered to its
 * waiters but not kept.
 *
 * Memory counted once: with a struct pe_budget attached (pe_cache_set_budget), an entry that
 * leaves the cache (eviction, replacement, too large to keep) while readers still hold it is
 * charged to that budget until its last reference is dropped, so bytes still being sent are
 * always counted, by the cache or by the budget. */
#ifndef POSENC_CACHE_H
#define POSENC_CACHE_H

#include <stddef.h>
#include <stdint.h>

struct pe_cache;
struct pe_cache_entry;
struct pe_budget;
struct pe_err;

/* code != 0: the computation failed with that PE_E* code; entry is then NULL, or (a key failed
 * with pe_cache_fail_err) a failed entry carrying the computation's pe_err, a reference the
 * callback owns like any other (release it). */
typedef void (*pe_cache_wait_cb)(void *arg, struct pe_cache_entry *entry, int code);
typedef void (*pe_cache_free_cb)(void *value);

struct pe_cache_stats {
	uint64_t hits, misses, evictions, joins;
	size_t bytes, entries, pending;
};

enum pe_cache_result { PE_CACHE_HIT = 1, PE_CACHE_WAIT = 2, PE_CACHE_MISS = 3 };

struct pe_cache *pe_cache_new(size_t max_bytes);
void pe_cache_free(struct pe_cache *c); /* outstanding references stay valid until released */

/* Hit: *entry is a new reference, returns PE_CACHE_HIT, cb not kept.
 * Under way: cb(arg, ...) will be called once; returns PE_CACHE_WAIT.
 * Absent: a pending slot is made, cb registered as its first waiter; returns PE_CACHE_MISS and the
 * caller must compute and then call pe_cache_fill or pe_cache_fail with the same key.
 * Returns a negative PE_E* code on allocation failure. cb may be NULL (then the caller of a MISS
 * gets no callback; a WAIT with NULL cb is a bug). */
int pe_cache_acquire(struct pe_cache *c, const void *key, size_t keylen, pe_cache_wait_cb cb, void *arg,
		     struct pe_cache_entry **entry);
/* Be told like a waiter (cb, once) when the pending key is filled or failed, without counting a
 * join: the computation's own interest in its value (a streamed answer holds the filled entry for
 * its readers). 0; PE_EINVAL when key is not pending; PE_ENOMEM. */
int pe_cache_watch(struct pe_cache *c, const void *key, size_t keylen, pe_cache_wait_cb cb, void *arg);
/* Plain lookup without single flight: a reference or NULL. Counts a hit or a miss. */
struct pe_cache_entry *pe_cache_get(struct pe_cache *c, const void *key, size_t keylen);

/* Complete a pending key: value becomes an entry (the cache owns it), every waiter is called with
 * its own reference. If no pending slot exists the value is inserted plainly. Returns 0 or PE_ENOMEM
 * (then free_cb has been called on value and waiters got PE_ENOMEM). */
int pe_cache_fill(struct pe_cache *c, const void *key, size_t keylen, void *value, size_t bytes,
		  pe_cache_free_cb free_cb);
/* Fail a pending key: every waiter is called with entry NULL and code; nothing is stored. */
void pe_cache_fail(struct pe_cache *c, const void *key, size_t keylen, int code);
/* Fail a pending key with what the computation found: every waiter is called with err->code (an
 * error: PE_EINTERNAL if err->code is not) and its own reference to one failed entry that holds a
 * copy of *err (one struct pe_err, NUL-terminated; freed with the last reference), so they all
 * tell the same detail and param. The failed entry is not stored: the next acquire is a miss.
 * If the copy cannot be allocated, waiters get entry NULL as with pe_cache_fail. */
void pe_cache_fail_err(struct pe_cache *c, const void *key, size_t keylen, const struct pe_err *err);
/* The failure a failed entry carries (pe_cache_fail_err), or NULL for an entry with a value. */
const struct pe_err *pe_cache_entry_err(const struct pe_cache_entry *e);

void *pe_cache_value(const struct pe_cache_entry *e);
size_t pe_cache_entry_bytes(const struct pe_cache_entry *e);
/* e's value grew by bytes after it was filled (a response built at its first hit), e held by the
 * caller: counted as the rest of e is, by the cache while e is in it (colder entries evicted past
 * the limit, e too if it is the coldest), else by the budget that holds e's bytes until e is freed. */
void pe_cache_charge_more(struct pe_cache *c, struct pe_cache_entry *e, size_t bytes);
/* Has e left the cache while still referenced, its bytes now counted on the cache's budget? Any
 * thread holding a reference; the answer may change to yes at any time after no. */
int pe_cache_entry_on_budget(const struct pe_cache_entry *e);
void pe_cache_retain(struct pe_cache_entry *e); /* one more reference */
void pe_cache_release(struct pe_cache_entry *e); /* NULL is fine */

void pe_cache_stats(struct pe_cache *c, struct pe_cache_stats *out);
void pe_cache_set_limit(struct pe_cache *c, size_t max_bytes); /* evicts down to the new limit */
/* Where entries that leave the cache while still referenced are counted (NULL: nowhere). Set it
 * before the first fill; the budget must outlive every entry. */
void pe_cache_set_budget(struct pe_cache *c, struct pe_budget *budget);

#endif
