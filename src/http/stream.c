/* Answers sent while their job computes them (stream.h).
 *
 * A job whose answer streams writes it in order into one buffer reserved whole up front, and
 * publishes how many of its first bytes are final after each block of rows. Each connection that
 * reads the stream has a response of its own over a content reader (MHD_create_response_from_callback,
 * with the Content-Length, or chunked when the length is known only at the end): it copies what is
 * final; when it has caught up it suspends its connection
 * from inside the reader and returns 0 (libmicrohttpd's rule for internal polling: returning 0
 * without suspending would spin), and the job resumes every suspended reader at its next publish.
 * Both happen under the stream's lock, so a resume never precedes its suspend (waiter.c's rule).
 *
 * The bytes: until the job ends they are the job's buffer, which it frees only under the lock
 * after marking the stream ended; then the cache's body, held by the stream through the entry
 * the cache hands it at the fill (pe_cache_watch), so readers still sending are counted by the
 * cache or, once the entry has left it (or never fitted cache_bytes), by the response budget.
 *
 * Who waits: the request that made the job (answered at the first block), requests that found
 * the stream begun (they read it from the start), and requests that came before its first block:
 * those are answered with the stream at that block too, each when its reader's room fits the
 * response budget then; one that does not fit (or must have the length first, HTTP/1.0, while
 * the length is still unknown) waits for the cache fill as on any job, and is counted (joiners)
 * so the job goes on for it. When the last reader goes
 * (disconnect, or its answer ended) while the job runs and none waits for the fill, the job is
 * called off at its next block: no one wants its bytes (a HEAD, whose answer ends with its
 * headers, too). A request that joins before that block takes the call back; one that comes once
 * the job has stopped waits for the fill as before the first block, and hears the failure. A
 * failure after the first block can only close the readers' connections: their 200 and
 * Content-Length have gone. */
#include "http/conn_guard.h"
#include "http/stream.h"
#include "http/test_hooks.h"

#include <stdlib.h>
#include <string.h>

/* The most a reader copies per call: libmicrohttpd gives each reader's response a block this large,
 * counted on the response budget with its headers (READER_BYTES) from the moment the request is
 * given the stream until its response is freed. The request that made the job is charged, never
 * refused, as a connection's own memory (a refusal while another job waits for room would answer
 * it 503 and call its work off); one that joins the begun stream takes the room first, and is
 * refused when the budget is full (produce.c); one that came before the first block takes it at
 * that block, or waits for the fill. */
#define READ_BLOCK PE_STREAM_READ_BLOCK
#define READER_BYTES PE_STREAM_READER_BYTES

enum { S_PENDING, S_RUNNING, S_DONE, S_FAILED };

struct reader {
	struct pe_stream *s;
	struct MHD_Connection *conn;
	struct pe_budget *budget; /* READER_BYTES held on it */
	uint64_t *sent;           /* the request's: bytes handed to the connection */
	struct reader *next; /* in s->sleepers while its connection is suspended */
};

struct pe_stream {
	/* Recursive: the job holds it across the cache's fill, whose waiter callbacks may give back a
	 * reader's place (pe_stream_leave, a waiter's result freed) on the same thread. */
	pthread_mutex_t lock;
	atomic_int refs;
	struct pe_streams *ss;
	struct waiter *first;  /* until the first block: the request that made the job */
	struct waiter *early;  /* until the first block: requests that came after it, in order (w->early_next) */
	struct waiter **early_end; /* where the next one is linked */
	struct pe_budget *budget; /* where readers' READER_BYTES are held */
	struct pe_stream_head head;
	const char *data;
	size_t ready;          /* final bytes of data */
	int state;
	int readers, joiners;  /* reading (or about to), waiting for the fill */
	atomic_int cancel;
	struct pe_cache_entry *entry; /* the filled answer (set during the fill, under the job's hold) */
	struct reader *sleepers;
	struct pe_stream *next; /* in ss->list until the job ends */
	size_t keylen;
	char key[];
};

struct pe_streams {
	pthread_mutex_t lock;
	struct pe_stream *list;
	atomic_uint_fast64_t begun, cancelled;
};

struct pe_streams *pe_streams_new(void)
{
	struct pe_streams *ss = calloc(1, sizeof *ss);
	if (ss)
		pthread_mutex_init(&ss->lock, NULL);
	return ss;
}

void pe_streams_free(struct pe_streams *ss)
{
	if (!ss)
		return;
	pthread_mutex_destroy(&ss->lock);
	free(ss);
}

void pe_streams_stats(struct pe_streams *ss, uint64_t *begun, uint64_t *cancelled)
{
	*begun = atomic_load(&ss->begun);
	*cancelled = atomic_load(&ss->cancelled);
}

static void stream_unref(struct pe_stream *s)
{
	if (atomic_fetch_sub(&s->refs, 1) != 1)
		return;
	pe_cache_release(s->entry);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* The cache's answer for the key (on the job's thread, inside its fill or fail). */
static void filled_cb(void *arg, struct pe_cache_entry *entry, int code)
{
	struct pe_stream *s = arg;
	if (code == 0 && entry)
		s->entry = entry;
	else
		pe_cache_release(entry);
	stream_unref(s);
}

/* A waiter's result that was never served: its reader's room and place. */
static void place_free(void *arg)
{
	struct pe_stream *s = arg;
	pe_budget_give(s->budget, READER_BYTES);
	pe_stream_leave(s);
}

struct pe_stream *pe_stream_new(struct pe_streams *ss, struct pe_cache *cache, struct pe_budget *budget,
				struct waiter *first, const struct pe_producer *pr, const struct pe_out *o, const char *etag,
				const char *key, size_t keylen)
{
	struct pe_stream *s = calloc(1, sizeof *s + keylen + 1);
	pthread_mutexattr_t attr;
	if (!s)
		return NULL;
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&s->lock, &attr);
	pthread_mutexattr_destroy(&attr);
	atomic_init(&s->refs, 3); /* the job's, the watch's, first's reader place */
	s->ss = ss;
	s->budget = budget;
	s->early_end = &s->early;
	s->head.pr = pr;
	s->head.out = *o;
	memcpy(s->head.etag, etag, sizeof s->head.etag);
	s->readers = 1;
	s->keylen = keylen;
	memcpy(s->key, key, keylen);
	if (pe_cache_watch(cache, key, keylen, filled_cb, s) != 0) {
		pthread_mutex_destroy(&s->lock);
		free(s);
		return NULL;
	}
	s->first = first;
	atomic_fetch_add(&first->refs, 1);
	first->result_free = place_free;
	pthread_mutex_lock(&ss->lock);
	s->next = ss->list;
	ss->list = s;
	pthread_mutex_unlock(&ss->lock);
	return s;
}

struct pe_stream *pe_stream_join(struct pe_streams *ss, const char *key, size_t keylen, int need_length,
				 struct waiter *w)
{
	struct pe_stream *s;
	pthread_mutex_lock(&ss->lock);
	for (s = ss->list; s && (s->keylen != keylen || memcmp(s->key, key, keylen) != 0); s = s->next)
		;
	if (s) {
		pthread_mutex_lock(&s->lock);
		int unknown = s->state == S_PENDING || s->head.total == PE_PRODUCE_LENGTH_UNKNOWN;
		int joined = (s->state == S_RUNNING || s->state == S_DONE) && !(need_length && unknown);
		if (joined) {
			s->readers++;
			atomic_store(&s->cancel, 0); /* the job has not stopped (it would be S_FAILED): it goes on */
			atomic_fetch_add(&s->refs, 1);
		} else {
			s->joiners++;
			if (s->state == S_PENDING && !need_length) { /* answered at the first block, if room */
				atomic_fetch_add(&w->refs, 1);
				w->result_free = place_free;
				*s->early_end = w;
				s->early_end = &w->early_next;
			}
		}
		pthread_mutex_unlock(&s->lock);
		if (!joined)
			s = NULL;
	}
	pthread_mutex_unlock(&ss->lock);
	return s;
}

const struct pe_stream_head *pe_stream_head(const struct pe_stream *s) { return &s->head; }

void pe_stream_leave(void *arg)
{
	struct pe_stream *s = arg;
	pthread_mutex_lock(&s->lock);
	if (--s->readers == 0 && s->joiners == 0 && s->state < S_DONE)
		atomic_store(&s->cancel, 1);
	pthread_mutex_unlock(&s->lock);
	stream_unref(s);
}

/* Resume every reader that caught up (under s->lock). */
static void wake(struct pe_stream *s)
{
	for (struct reader *rd = s->sleepers, *next; rd; rd = next) {
		next = rd->next;
		rd->next = NULL;
		MHD_resume_connection(rd->conn);
	}
	s->sleepers = NULL;
}

/* libmicrohttpd's content reader: what is final from pos, or the end, or suspend until more. */
static ssize_t read_cb(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct reader *rd = cls;
	struct pe_stream *s = rd->s;
	ssize_t n = 0;
	pthread_mutex_lock(&s->lock);
	size_t known = s->ready;
	int kept = s->state == S_DONE && s->entry && !pe_cache_entry_on_budget(s->entry);
	if (s->state == S_FAILED) {
		n = MHD_CONTENT_READER_END_WITH_ERROR;
	} else if (pos < s->ready) {
		size_t k = s->ready - (size_t)pos < max ? s->ready - (size_t)pos : max;
		memcpy(buf, s->data + pos, k);
		n = (ssize_t)k;
		*rd->sent = pos + k;
	} else if (s->state == S_DONE) {
		n = MHD_CONTENT_READER_END_OF_STREAM;
	} else {
		MHD_suspend_connection(rd->conn);
		rd->next = s->sleepers;
		s->sleepers = rd;
	}
	pthread_mutex_unlock(&s->lock);
	pe_conn_guard_stream_state(rd->conn, known, kept); /* the connection guard judges its reader by it */
	return n;
}

static void reader_free_cb(void *cls)
{
	struct reader *rd = cls;
	struct pe_stream *s = rd->s;
	pthread_mutex_lock(&s->lock);
	for (struct reader **p = &s->sleepers; *p; p = &(*p)->next)
		if (*p == rd) {
			*p = rd->next;
			break;
		}
	pthread_mutex_unlock(&s->lock);
	pe_budget_give(rd->budget, READER_BYTES);
	free(rd);
	pe_stream_leave(s);
}

struct MHD_Response *pe_stream_response(struct pe_stream *s, struct MHD_Connection *conn, uint64_t *sent)
{
	struct reader *rd = calloc(1, sizeof *rd);
	struct MHD_Response *resp = NULL;
	if (rd) {
		*rd = (struct reader){.s = s, .conn = conn, .budget = s->budget, .sent = sent};
		uint64_t size = s->head.total == PE_PRODUCE_LENGTH_UNKNOWN ? MHD_SIZE_UNKNOWN : s->head.total;
		resp = MHD_create_response_from_callback(size, READ_BLOCK, read_cb, rd, reader_free_cb);
	}
	if (!resp) {
		free(rd);
		place_free(s);
	}
	return resp;
}

/* At the first block (not under s->lock): each request that came before it reads the stream when
 * its reader's room fits the budget now, taking a reader's place from its joiner's; otherwise it
 * stays a joiner, waiting for the fill, and the stream's completion of its waiter goes. */
static void answer_early(struct pe_stream *s, struct waiter *early)
{
	for (struct waiter *w = early, *next; w; w = next) {
		next = w->early_next;
		w->early_next = NULL;
		if (pe_budget_try_take(s->budget, READER_BYTES) != 0) {
			pe_waiter_unref(w);
			continue;
		}
		pthread_mutex_lock(&s->lock);
		s->joiners--;
		s->readers++;
		atomic_fetch_add(&s->refs, 1);
		pthread_mutex_unlock(&s->lock);
		pe_waiter_complete(w, NULL, s, 0);
	}
}

int pe_stream_publish(struct pe_stream *s, const char *data, size_t ready, size_t total,
		      const struct pe_body_info *info, struct pe_err *err)
{
	struct waiter *first = NULL, *early = NULL;
	pthread_mutex_lock(&s->lock);
	if (s->state == S_PENDING) {
		s->head.info = *info;
		s->head.total = total;
		s->data = data;
		s->state = S_RUNNING;
		first = s->first;
		early = s->early;
		s->first = s->early = NULL;
		s->early_end = &s->early;
		atomic_fetch_add(&s->ss->begun, 1);
	}
	s->ready = ready;
	int cancel = atomic_load(&s->cancel);
	if (cancel) /* decided under the lock: no request joins a job that stops */
		s->state = S_FAILED;
	wake(s);
	pthread_mutex_unlock(&s->lock);
	if (first) { /* its reference, reader's place and room go with the stream (the waiter's result) */
		pe_budget_charge(s->budget, READER_BYTES);
		pe_waiter_complete(first, NULL, s, 0);
		answer_early(s, early);
		pe_hook_stream_gate(s->key, s->keylen); /* test builds only */
	}
	if (!cancel)
		return 0;
	atomic_fetch_add(&s->ss->cancelled, 1);
	return pe_err_set(err, PE_EBUSY, "", "the computation was called off: every client reading it went away");
}

void pe_stream_hold(struct pe_stream *s) { pthread_mutex_lock(&s->lock); }

void pe_stream_end(struct pe_stream *s, int rc, const char *data, size_t len)
{
	struct waiter *first = s->first, *early = s->early; /* still here: the job never published */
	s->first = s->early = NULL;
	s->early_end = &s->early;
	if (rc == 0 && s->state == S_RUNNING && s->entry && data) {
		s->data = data;
		s->ready = len;
		s->state = S_DONE;
	} else {
		s->state = rc == 0 && s->state == S_PENDING ? S_DONE : S_FAILED;
		s->ready = 0;
		s->data = NULL;
	}
	wake(s);
	pthread_mutex_unlock(&s->lock);
	struct pe_streams *ss = s->ss;
	pthread_mutex_lock(&ss->lock);
	for (struct pe_stream **p = &ss->list; *p; p = &(*p)->next)
		if (*p == s) {
			*p = s->next;
			break;
		}
	pthread_mutex_unlock(&ss->lock);
	if (first) {
		pe_waiter_unref(first);
		pe_stream_leave(s);
	}
	for (struct waiter *w = early, *next; w; w = next) { /* they hear the fill or the failure */
		next = w->early_next;
		pe_waiter_unref(w);
	}
	stream_unref(s);
}

void pe_stream_abort(struct pe_stream *s)
{
	pe_stream_hold(s);
	pe_stream_end(s, PE_EINTERNAL, NULL, 0);
}
