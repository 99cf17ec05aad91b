/* The response cache: an LRU of opaque values bounded in bytes, with refcounted entries and single
 * flight (contract in include/posenc/cache.h).
 *
 * Locking: one mutex guards the hash table, the LRU list, the byte count and the stats. Keys are
 * hashed before it is taken; waiter callbacks and value destructors always run after it is
 * dropped (work is collected on local lists under the lock and done afterwards), so a callback may
 * call back into the cache.
 *
 * Ownership: an entry's reference count is atomic and counts the cache itself (while the entry is
 * in the table) plus every reader. Releasing never takes the cache lock, which is why an entry
 * outlives its eviction, its replacement and pe_cache_free: whoever drops the count to zero runs
 * free_cb(value) and frees the entry. A pending key (a computation under way) is an entry with no
 * value yet and a list of waiters; filling it turns the same allocation into a ready entry, so
 * completing a pending key never allocates and never fails. Failing one with the computation's
 * pe_err (pe_cache_fail_err) turns it, the same way, into a failed entry outside the table whose
 * value is a copy of that pe_err, one reference per waiter: they all answer with the same detail,
 * and the copy (fixed size, allocated before the lock) goes with the last reference.
 *
 * Budget: an entry that leaves the table while a reader still holds it (the cache's reference is
 * not its last) is charged to the attached budget under the lock, and given back by whoever frees
 * it. The check is exact: with only the cache's reference left, nobody can take another one.
 *
 * Table: chained hashing (keys hashed by hash.c) on a power-of-two bucket array that doubles at load 3/4 (if the doubling
 * cannot be allocated the table just stays denser), a keyed 64-bit multiply-mix hash, and a doubly
 * linked LRU list of ready entries, most recent at the head. */
#include "posenc/cache.h"
#include "cache/hash.h"
#include "posenc/err.h"
#include "posenc/budget.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Bytes charged per entry on top of the value's bytes and the key's length: the entry header, its
 * bucket slot and the allocator's own bookkeeping, rounded up. */
#define ENTRY_OVERHEAD 128
#define MIN_BUCKETS 16

struct waiter {
	struct waiter *next;
	pe_cache_wait_cb cb;
	void *arg;
};

struct pe_cache_entry {
	atomic_size_t refs;
	void *value;
	size_t bytes; /* as given to pe_cache_fill */
	pe_cache_free_cb free_cb;
	struct pe_cache_entry *hnext;       /* hash chain; after leaving the table, a local drop list */
	struct pe_cache_entry **hpprev;     /* the link that points at this entry while in the table */
	struct pe_cache_entry *prev, *next; /* LRU list, ready entries only */
	struct waiter *waiters, *wlast;     /* pending entries only, in arrival order */
	uint64_t hash;
	size_t keylen;
	bool pending;
	bool failed; /* value is a struct pe_err (pe_cache_fail_err) */
	bool listed; /* a ready entry in the table and the LRU list (counted in stats.bytes) */
	struct pe_budget *budget; /* charged while outside the table and still referenced */
	size_t charged;
	unsigned char key[];
};

_Static_assert(sizeof(struct pe_cache_entry) + sizeof(void *) <= ENTRY_OVERHEAD,
	       "ENTRY_OVERHEAD must cover the entry header and its bucket slot");

struct pe_cache {
	pthread_mutex_t lock;
	struct pe_cache_entry **buckets;
	size_t nbuckets; /* power of two */
	size_t count;    /* entries in the table, ready and pending */
	struct pe_cache_entry *head, *tail;
	size_t max_bytes;
	uint64_t seed;
	struct pe_cache_stats stats;
	struct pe_budget *budget;
};

/* ---- entries ---- */

/* Bytes charged for an entry, saturating so an absurd value size counts as oversize. */
static size_t cost(size_t bytes, size_t keylen)
{
	size_t fixed = keylen + ENTRY_OVERHEAD;
	return bytes > SIZE_MAX - fixed ? SIZE_MAX : bytes + fixed;
}

static struct pe_cache_entry *entry_new(uint64_t hash, const void *key, size_t keylen)
{
	if (keylen > SIZE_MAX - sizeof(struct pe_cache_entry))
		return NULL;
	struct pe_cache_entry *e = malloc(sizeof *e + keylen);
	if (e == NULL)
		return NULL;
	memset(e, 0, sizeof *e);
	atomic_init(&e->refs, 0);
	e->hash = hash;
	e->keylen = keylen;
	if (keylen > 0)
		memcpy(e->key, key, keylen);
	return e;
}

static void entry_destroy(struct pe_cache_entry *e)
{
	pe_budget_give(e->budget, e->charged);
	if (e->free_cb != NULL)
		e->free_cb(e->value);
	free(e);
}

/* Drop one reference from each entry on a drop list (linked through hnext). Outside the lock. */
static void release_list(struct pe_cache_entry *e)
{
	while (e != NULL) {
		struct pe_cache_entry *next = e->hnext;
		pe_cache_release(e);
		e = next;
	}
}

/* Call every waiter on a detached list once, then free the nodes. Outside the lock. For a value,
 * each waiter's reference was already counted when the list was detached. */
static void notify(struct waiter *w, struct pe_cache_entry *e, int code)
{
	while (w != NULL) {
		struct waiter *next = w->next;
		w->cb(w->arg, e, code);
		free(w);
		w = next;
	}
}

static size_t count_waiters(const struct waiter *w)
{
	size_t n = 0;
	for (; w != NULL; w = w->next)
		n++;
	return n;
}

static bool add_waiter(struct pe_cache_entry *e, struct waiter *w)
{
	if (w == NULL)
		return false;
	if (e->wlast != NULL)
		e->wlast->next = w;
	else
		e->waiters = w;
	e->wlast = w;
	return true;
}

static struct waiter *waiter_new(pe_cache_wait_cb cb, void *arg)
{
	struct waiter *w = malloc(sizeof *w);
	if (w != NULL)
		*w = (struct waiter){.cb = cb, .arg = arg};
	return w;
}

/* ---- LRU list (under the lock) ---- */

static void lru_unlink(struct pe_cache *c, struct pe_cache_entry *e)
{
	if (e->prev != NULL)
		e->prev->next = e->next;
	else
		c->head = e->next;
	if (e->next != NULL)
		e->next->prev = e->prev;
	else
		c->tail = e->prev;
	e->prev = e->next = NULL;
}

static void lru_push(struct pe_cache *c, struct pe_cache_entry *e)
{
	e->prev = NULL;
	e->next = c->head;
	if (c->head != NULL)
		c->head->prev = e;
	else
		c->tail = e;
	c->head = e;
}

static void lru_touch(struct pe_cache *c, struct pe_cache_entry *e)
{
	if (c->head != e) {
		lru_unlink(c, e);
		lru_push(c, e);
	}
}

/* ---- hash table (under the lock) ---- */

/* The link that points at the entry for key, or at the NULL ending its chain. */
static struct pe_cache_entry **find_link(struct pe_cache *c, uint64_t hash, const void *key, size_t keylen)
{
	struct pe_cache_entry **link = &c->buckets[hash & (c->nbuckets - 1)];
	for (; *link != NULL; link = &(*link)->hnext) {
		const struct pe_cache_entry *e = *link;
		if (e->hash == hash && e->keylen == keylen &&
		    (keylen == 0 || memcmp(e->key, key, keylen) == 0))
			break;
	}
	return link;
}

/* Chains are doubly linked (hpprev) so that unlinking touches only the link before the entry,
 * not the chain's other entries: an eviction takes the LRU's oldest entry, whose bucket and
 * chain are cold in memory (evict prefetches the next one's). */
static void table_unlink(struct pe_cache *c, struct pe_cache_entry *e)
{
	*e->hpprev = e->hnext;
	if (e->hnext != NULL)
		e->hnext->hpprev = e->hpprev;
	e->hnext = NULL;
	e->hpprev = NULL;
	c->count--;
}

/* Put e at the head of the chain at *link. */
static void chain_push(struct pe_cache_entry **link, struct pe_cache_entry *e)
{
	e->hnext = *link;
	if (e->hnext != NULL)
		e->hnext->hpprev = &e->hnext;
	*link = e;
	e->hpprev = link;
}

/* Double the bucket array. Failing to is harmless: chains just get longer. */
static void grow(struct pe_cache *c)
{
	if (c->nbuckets > SIZE_MAX / 2 / sizeof *c->buckets)
		return;
	size_t n = c->nbuckets * 2;
	struct pe_cache_entry **b = calloc(n, sizeof *b);
	if (b == NULL)
		return;
	for (size_t i = 0; i < c->nbuckets; i++) {
		struct pe_cache_entry *e = c->buckets[i];
		while (e != NULL) {
			struct pe_cache_entry *next = e->hnext;
			chain_push(&b[e->hash & (n - 1)], e);
			e = next;
		}
	}
	free(c->buckets);
	c->buckets = b;
	c->nbuckets = n;
}

static void table_insert(struct pe_cache *c, struct pe_cache_entry *e)
{
	if ((c->count + 1) > c->nbuckets / 4 * 3)
		grow(c);
	chain_push(&c->buckets[e->hash & (c->nbuckets - 1)], e);
	c->count++;
}

/* ---- ready entries (under the lock) ---- */

/* The cache's reference to a ready entry goes onto *drop; if readers still hold the entry, its
 * bytes move from the cache's count to the budget until it is freed. */
static void drop_ref(struct pe_cache *c, struct pe_cache_entry *e, struct pe_cache_entry **drop)
{
	if (c->budget && atomic_load_explicit(&e->refs, memory_order_relaxed) > 1) {
		e->charged = cost(e->bytes, e->keylen);
		__atomic_store_n(&e->budget, c->budget, __ATOMIC_RELAXED); /* pe_cache_entry_on_budget reads it */
		pe_budget_charge(e->budget, e->charged);
	}
	e->hnext = *drop;
	*drop = e;
}

/* Take a ready entry out of the cache; the cache's reference goes onto *drop. */
static void remove_ready(struct pe_cache *c, struct pe_cache_entry *e, struct pe_cache_entry **drop)
{
	table_unlink(c, e);
	lru_unlink(c, e);
	e->listed = false;
	c->stats.bytes -= cost(e->bytes, e->keylen);
	c->stats.entries--;
	drop_ref(c, e, drop);
}

/* Evict from the cold end until at most limit bytes are charged. Then the next entry to go (its
 * line is in cache: unlinking the last one wrote it) has what its own eviction will touch first
 * fetched now, its chain link and its value, which the next miss's fill would otherwise wait for
 * from memory. */
static void evict(struct pe_cache *c, size_t limit, struct pe_cache_entry **drop)
{
	int evicted = 0;
	while (c->stats.bytes > limit && c->tail != NULL) {
		remove_ready(c, c->tail, drop);
		c->stats.evictions++;
		evicted = 1;
	}
	if (evicted && c->tail != NULL) {
		__builtin_prefetch(c->tail->hpprev, 1);
		__builtin_prefetch(c->tail->value);
	}
}

/* Make e (not in the table, refs not counting the cache yet) a ready entry if it fits, evicting
 * first to make room (so the byte count cannot overflow and e is never the one evicted); if it
 * does not fit at all, the cache's reference goes straight onto *drop. */
static void keep(struct pe_cache *c, struct pe_cache_entry *e, struct pe_cache_entry **drop)
{
	atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
	e->pending = false;
	size_t bytes = cost(e->bytes, e->keylen);
	if (bytes > c->max_bytes) {
		drop_ref(c, e, drop);
		return;
	}
	evict(c, c->max_bytes - bytes, drop);
	table_insert(c, e);
	lru_push(c, e);
	e->listed = true;
	c->stats.bytes += bytes;
	c->stats.entries++;
}

/* ---- public ---- */

struct pe_cache *pe_cache_new(size_t max_bytes)
{
	struct pe_cache *c = calloc(1, sizeof *c);
	if (c == NULL)
		return NULL;
	c->buckets = calloc(MIN_BUCKETS, sizeof *c->buckets);
	if (c->buckets == NULL || pthread_mutex_init(&c->lock, NULL) != 0)
		goto fail;
	c->nbuckets = MIN_BUCKETS;
	c->max_bytes = max_bytes;
	c->seed = pe_cache_seed(c);
	return c;
fail:
	free(c->buckets);
	free(c);
	return NULL;
}

/* Ready entries lose the cache's reference; pending keys can no longer be filled, so their waiters
 * are told PE_EDRAINING (after the cache is gone, so they cannot reach it). */
void pe_cache_free(struct pe_cache *c)
{
	if (c == NULL)
		return;
	struct pe_cache_entry *drop = NULL, *orphans = NULL;
	for (size_t i = 0; i < c->nbuckets; i++) {
		struct pe_cache_entry *e = c->buckets[i];
		while (e != NULL) {
			struct pe_cache_entry *next = e->hnext;
			struct pe_cache_entry **list = e->pending ? &orphans : &drop;
			e->hnext = *list;
			*list = e;
			e = next;
		}
	}
	pthread_mutex_destroy(&c->lock);
	free(c->buckets);
	free(c);
	release_list(drop);
	while (orphans != NULL) {
		struct pe_cache_entry *next = orphans->hnext;
		notify(orphans->waiters, NULL, PE_EDRAINING);
		entry_destroy(orphans);
		orphans = next;
	}
}

int pe_cache_acquire(struct pe_cache *c, const void *key, size_t keylen, pe_cache_wait_cb cb, void *arg,
		     struct pe_cache_entry **entry)
{
	uint64_t hash = pe_cache_hash(c->seed, key, keylen);
	struct pe_cache_entry *fresh = NULL;
	int rc;

	*entry = NULL;
	pthread_mutex_lock(&c->lock);
	struct pe_cache_entry *e = *find_link(c, hash, key, keylen);
	if (e != NULL && !e->pending) {
		atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
		lru_touch(c, e);
		c->stats.hits++;
		*entry = e;
		rc = PE_CACHE_HIT;
	} else if (e != NULL) {
		if (cb != NULL && !add_waiter(e, waiter_new(cb, arg))) {
			rc = PE_ENOMEM;
			goto out;
		}
		c->stats.joins++;
		rc = PE_CACHE_WAIT;
	} else {
		fresh = entry_new(hash, key, keylen);
		if (fresh == NULL || (cb != NULL && !add_waiter(fresh, waiter_new(cb, arg)))) {
			rc = PE_ENOMEM;
			goto out;
		}
		fresh->pending = true;
		table_insert(c, fresh);
		fresh = NULL;
		c->stats.pending++;
		c->stats.misses++;
		rc = PE_CACHE_MISS;
	}
out:
	pthread_mutex_unlock(&c->lock);
	free(fresh); /* only on failure: never published */
	return rc;
}

int pe_cache_watch(struct pe_cache *c, const void *key, size_t keylen, pe_cache_wait_cb cb, void *arg)
{
	uint64_t hash = pe_cache_hash(c->seed, key, keylen);
	int rc = PE_EINVAL;
	pthread_mutex_lock(&c->lock);
	struct pe_cache_entry *e = *find_link(c, hash, key, keylen);
	if (e != NULL && e->pending)
		rc = add_waiter(e, waiter_new(cb, arg)) ? 0 : PE_ENOMEM;
	pthread_mutex_unlock(&c->lock);
	return rc;
}

struct pe_cache_entry *pe_cache_get(struct pe_cache *c, const void *key, size_t keylen)
{
	uint64_t hash = pe_cache_hash(c->seed, key, keylen);
	pthread_mutex_lock(&c->lock);
	struct pe_cache_entry *e = *find_link(c, hash, key, keylen);
	if (e != NULL && !e->pending) {
		atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
		lru_touch(c, e);
		c->stats.hits++;
	} else {
		e = NULL;
		c->stats.misses++;
	}
	pthread_mutex_unlock(&c->lock);
	return e;
}

int pe_cache_fill(struct pe_cache *c, const void *key, size_t keylen, void *value, size_t bytes,
		  pe_cache_free_cb free_cb)
{
	uint64_t hash = pe_cache_hash(c->seed, key, keylen);
	struct pe_cache_entry *drop = NULL, *e;
	struct waiter *waiters = NULL;
	int rc = 0;

	pthread_mutex_lock(&c->lock);
	e = *find_link(c, hash, key, keylen);
	if (e != NULL && e->pending) {
		/* Complete the pending key in place: no allocation, so this cannot fail. */
		table_unlink(c, e);
		c->stats.pending--;
		waiters = e->waiters;
		e->waiters = e->wlast = NULL;
		atomic_store_explicit(&e->refs, count_waiters(waiters), memory_order_relaxed);
	} else {
		struct pe_cache_entry *old = e;
		e = entry_new(hash, key, keylen);
		if (e == NULL) {
			rc = PE_ENOMEM;
			goto out;
		}
		if (old != NULL)
			remove_ready(c, old, &drop);
	}
	e->value = value;
	e->bytes = bytes;
	e->free_cb = free_cb;
	keep(c, e, &drop);
out:
	pthread_mutex_unlock(&c->lock);
	if (rc != 0 && free_cb != NULL)
		free_cb(value);
	notify(waiters, e, 0);
	release_list(drop);
	return rc;
}

/* Take key's pending entry out of the table (NULL if nothing is under way; a ready entry stays). */
static struct pe_cache_entry *take_pending(struct pe_cache *c, const void *key, size_t keylen)
{
	uint64_t hash = pe_cache_hash(c->seed, key, keylen);
	pthread_mutex_lock(&c->lock);
	struct pe_cache_entry *e = *find_link(c, hash, key, keylen);
	if (e != NULL && e->pending) {
		table_unlink(c, e);
		c->stats.pending--;
	} else {
		e = NULL;
	}
	pthread_mutex_unlock(&c->lock);
	return e;
}

void pe_cache_fail(struct pe_cache *c, const void *key, size_t keylen, int code)
{
	if (code >= 0) /* waiters must see an error with their NULL entry */
		code = PE_EINTERNAL;
	struct pe_cache_entry *e = take_pending(c, key, keylen);
	if (e != NULL) {
		notify(e->waiters, NULL, code);
		entry_destroy(e);
	}
}

/* A copy of err with an error code and both strings terminated, or NULL when out of memory. */
static struct pe_err *err_copy(const struct pe_err *err)
{
	struct pe_err *copy = malloc(sizeof *copy);
	if (copy == NULL)
		return NULL;
	*copy = *err;
	if (copy->code >= 0)
		copy->code = PE_EINTERNAL;
	copy->param[sizeof copy->param - 1] = 0;
	copy->detail[sizeof copy->detail - 1] = 0;
	return copy;
}

void pe_cache_fail_err(struct pe_cache *c, const void *key, size_t keylen, const struct pe_err *err)
{
	struct pe_err *copy = err_copy(err);
	struct pe_cache_entry *e = take_pending(c, key, keylen);
	int code = copy ? copy->code : err->code < 0 ? err->code : PE_EINTERNAL;
	struct waiter *waiters = e ? e->waiters : NULL;
	if (e == NULL || copy == NULL || waiters == NULL) {
		free(copy);
		if (e != NULL) {
			notify(waiters, NULL, code);
			entry_destroy(e);
		}
		return;
	}
	/* The pending entry becomes the failed one: no allocation past the copy, as pe_cache_fill. */
	e->waiters = e->wlast = NULL;
	e->pending = false;
	e->failed = true;
	e->value = copy;
	e->free_cb = free;
	atomic_store_explicit(&e->refs, count_waiters(waiters), memory_order_relaxed);
	notify(waiters, e, code);
}

const struct pe_err *pe_cache_entry_err(const struct pe_cache_entry *e)
{
	return e != NULL && e->failed ? e->value : NULL;
}

void *pe_cache_value(const struct pe_cache_entry *e)
{
	return e->value;
}

size_t pe_cache_entry_bytes(const struct pe_cache_entry *e)
{
	return e->bytes;
}

void pe_cache_charge_more(struct pe_cache *c, struct pe_cache_entry *e, size_t bytes)
{
	struct pe_cache_entry *drop = NULL;
	pthread_mutex_lock(&c->lock);
	size_t before = cost(e->bytes, e->keylen);
	e->bytes = e->bytes > SIZE_MAX - bytes ? SIZE_MAX : e->bytes + bytes;
	size_t more = cost(e->bytes, e->keylen) - before;
	if (e->listed) {
		c->stats.bytes += more;
		evict(c, c->max_bytes, &drop); /* e itself too, if it is now the coldest past the limit */
	} else if (e->budget) {
		pe_budget_charge(e->budget, more);
		e->charged += more;
	}
	pthread_mutex_unlock(&c->lock);
	release_list(drop);
}

int pe_cache_entry_on_budget(const struct pe_cache_entry *e)
{
	return __atomic_load_n(&((struct pe_cache_entry *)e)->budget, __ATOMIC_RELAXED) != NULL;
}

void pe_cache_retain(struct pe_cache_entry *e)
{
	atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
}

void pe_cache_release(struct pe_cache_entry *e)
{
	if (e != NULL && atomic_fetch_sub_explicit(&e->refs, 1, memory_order_acq_rel) == 1)
		entry_destroy(e);
}

void pe_cache_stats(struct pe_cache *c, struct pe_cache_stats *out)
{
	pthread_mutex_lock(&c->lock);
	*out = c->stats;
	pthread_mutex_unlock(&c->lock);
}

void pe_cache_set_limit(struct pe_cache *c, size_t max_bytes)
{
	struct pe_cache_entry *drop = NULL;
	pthread_mutex_lock(&c->lock);
	c->max_bytes = max_bytes;
	evict(c, max_bytes, &drop);
	pthread_mutex_unlock(&c->lock);
	release_list(drop);
}

void pe_cache_set_budget(struct pe_cache *c, struct pe_budget *budget)
{
	pthread_mutex_lock(&c->lock);
	c->budget = budget;
	pthread_mutex_unlock(&c->lock);
}
