/* Requests suspended while a job computes their answer.
 *
 * A request that waits is suspended (MHD_suspend_connection, always inside the handler, before the
 * waiter can complete) and resumed exactly once by whichever comes first: its completion (the
 * cache's waiter callback or a job, on a worker thread) or the deadline (pe_waiter_expire, from
 * the tick). A request answered from a stream is completed by the stream's first block and again
 * by the cache's fill: the first completion wins, a later one only gives back what it brings. Both transitions happen under wait_lock, so a resume never precedes its suspend and
 * never happens twice. Suspended connections must all be resumed before MHD_stop_daemon. */
#include "http/internal.h"

#include <math.h>
#include <stdlib.h>

struct waiter *pe_waiter_new(struct pe_http *h, struct MHD_Connection *conn)
{
	struct waiter *w = malloc(sizeof *w); /* not calloc: glibc's calloc bypasses its thread cache */
	if (!w)
		return NULL;
	*w = (struct waiter){.state = W_NEW, .h = h, .conn = conn,
			     .deadline = pe_monotonic() + (double)h->opt.job_timeout_s};
	atomic_init(&w->refs, 2); /* the request's and the completer's */
	return w;
}

void pe_waiter_unref(struct waiter *w)
{
	if (w && atomic_fetch_sub(&w->refs, 1) == 1) {
		pe_cache_release(w->entry);
		if (w->result && w->result_free)
			w->result_free(w->result);
		free(w);
	}
}

void pe_waiter_end(struct waiter *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->h->wait_lock);
	struct pe_cache_entry *entry = w->entry;
	void *result = w->result;
	w->entry = NULL;
	w->result = NULL;
	pthread_mutex_unlock(&w->h->wait_lock);
	pe_cache_release(entry);
	if (result && w->result_free)
		w->result_free(result);
	pe_waiter_unref(w);
}

static void link_waiting(struct pe_http *h, struct waiter *w)
{
	w->next = h->waiting.next;
	w->prev = &h->waiting;
	h->waiting.next->prev = w;
	h->waiting.next = w;
	h->nwaiting++;
}

static void unlink_waiting(struct pe_http *h, struct waiter *w)
{
	w->prev->next = w->next;
	w->next->prev = w->prev;
	w->prev = w->next = NULL;
	h->nwaiting--;
}

void pe_waiter_ready_cb(void *arg, struct pe_cache_entry *entry, int code) { pe_waiter_complete(arg, entry, NULL, code); }

void pe_waiter_complete(struct waiter *w, struct pe_cache_entry *entry, void *result, int code)
{
	struct pe_http *h = w->h;
	pthread_mutex_lock(&h->wait_lock);
	if (w->state == W_EXPIRED || w->state == W_DONE) { /* answered already, or by a stream (stream.c) */
		pe_cache_release(entry);
		if (result && w->result_free)
			w->result_free(result);
	} else {
		w->entry = entry;
		w->result = result;
		w->code = code;
		if (w->state == W_SUSPENDED) {
			unlink_waiting(h, w);
			MHD_resume_connection(w->conn);
		}
		w->state = W_DONE;
	}
	pthread_mutex_unlock(&h->wait_lock);
	pe_waiter_unref(w);
}

void pe_waiter_suspend(struct waiter *w)
{
	struct pe_http *h = w->h;
	MHD_suspend_connection(w->conn);
	pthread_mutex_lock(&h->wait_lock);
	if (w->state == W_NEW) {
		w->state = W_SUSPENDED;
		link_waiting(h, w);
	} else {
		MHD_resume_connection(w->conn); /* completed before we got here */
	}
	pthread_mutex_unlock(&h->wait_lock);
}

int pe_waiter_done(struct waiter *w)
{
	pthread_mutex_lock(&w->h->wait_lock);
	int done = w->state == W_DONE;
	pthread_mutex_unlock(&w->h->wait_lock);
	return done;
}

int pe_waiter_expired(struct waiter *w)
{
	pthread_mutex_lock(&w->h->wait_lock);
	int expired = w->state == W_EXPIRED;
	pthread_mutex_unlock(&w->h->wait_lock);
	return expired;
}

int pe_waiter_pin(struct waiter *w)
{
	int rc = 0;
	pthread_mutex_lock(&w->h->wait_lock);
	if (w->state == W_EXPIRED)
		rc = PE_ETIMEOUT;
	else
		w->deadline = INFINITY;
	pthread_mutex_unlock(&w->h->wait_lock);
	return rc;
}

void pe_waiter_expire(struct pe_http *h, int expire_all)
{
	double now = pe_monotonic();
	pthread_mutex_lock(&h->wait_lock);
	for (struct waiter *w = h->waiting.next, *next; w != &h->waiting; w = next) {
		next = w->next;
		if (!expire_all && w->deadline > now)
			continue;
		unlink_waiting(h, w);
		w->state = W_EXPIRED;
		w->shut_down = expire_all;
		MHD_resume_connection(w->conn);
	}
	pthread_mutex_unlock(&h->wait_lock);
}

size_t pe_http_waiting(struct pe_http *h)
{
	pthread_mutex_lock(&h->wait_lock);
	size_t n = h->nwaiting;
	pthread_mutex_unlock(&h->wait_lock);
	return n;
}
