/* Worker pool over libuv (see pool.h). Other threads push jobs onto a locked list and wake the
 * loop with uv_async_send (the only thread-safe libuv call; it coalesces, so the callback drains
 * the whole list). The loop thread hands each job to uv_queue_work. Shutdown is asked of the loop
 * the same way and happens there: the loop closes its handles once no job is in flight. */
#include "daemon/pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <uv.h>

struct job {
	uv_work_t req;
	struct pe_pool *pool;
	void (*work)(void *);
	void *arg;
	struct job *next;
};

struct pe_pool {
	uv_loop_t loop;
	uv_async_t wake;
	uv_timer_t timer;
	pthread_t thread;
	pthread_mutex_t lock;
	struct job *head, *tail; /* submitted, not yet handed to libuv */
	size_t max_queue, inflight; /* inflight: handed to libuv, after_work not yet run (loop thread) */
	int closed, stopping, handles_closed;
	void (*tick)(void *);
	void *tick_arg;
	atomic_size_t queued, running;
	atomic_uint_fast64_t submitted, completed, rejected;
};

static void close_handles(struct pe_pool *p)
{
	if (p->handles_closed)
		return;
	p->handles_closed = 1;
	uv_close((uv_handle_t *)&p->wake, NULL);
	uv_close((uv_handle_t *)&p->timer, NULL);
}

static void work_cb(uv_work_t *req)
{
	struct job *j = req->data;
	atomic_fetch_sub(&j->pool->queued, 1);
	atomic_fetch_add(&j->pool->running, 1);
	j->work(j->arg);
	atomic_fetch_sub(&j->pool->running, 1);
}

static void after_work_cb(uv_work_t *req, int status)
{
	struct job *j = req->data;
	struct pe_pool *p = j->pool;
	free(j);
	atomic_fetch_add(&p->completed, 1);
	p->inflight--;
	pthread_mutex_lock(&p->lock);
	int done = p->stopping && !p->head && p->inflight == 0;
	pthread_mutex_unlock(&p->lock);
	if (done)
		close_handles(p);
}

static void wake_cb(uv_async_t *h)
{
	struct pe_pool *p = h->data;
	pthread_mutex_lock(&p->lock);
	struct job *list = p->head;
	p->head = p->tail = NULL;
	int stopping = p->stopping;
	pthread_mutex_unlock(&p->lock);
	for (struct job *j = list, *next; j; j = next) {
		next = j->next;
		j->req.data = j;
		p->inflight++;
		uv_queue_work(&p->loop, &j->req, work_cb, after_work_cb);
	}
	if (stopping && p->inflight == 0)
		close_handles(p);
}

static void timer_cb(uv_timer_t *t)
{
	struct pe_pool *p = t->data;
	if (p->tick)
		p->tick(p->tick_arg);
}

static void *loop_main(void *arg)
{
	struct pe_pool *p = arg;
	uv_run(&p->loop, UV_RUN_DEFAULT);
	return NULL;
}

struct pe_pool *pe_pool_new(unsigned workers, size_t max_queue, void (*tick)(void *), void *tick_arg,
			    unsigned tick_ms, struct pe_err *err)
{
	char n[16];
	snprintf(n, sizeof n, "%u", workers);
	setenv("UV_THREADPOOL_SIZE", n, 1); /* read by libuv once, at its first queued work */
	struct pe_pool *p = calloc(1, sizeof *p);
	if (!p) {
		pe_err_set(err, PE_ENOMEM, "workers", "out of memory");
		return NULL;
	}
	p->max_queue = max_queue;
	p->tick = tick;
	p->tick_arg = tick_arg;
	pthread_mutex_init(&p->lock, NULL);
	if (uv_loop_init(&p->loop) != 0 || uv_async_init(&p->loop, &p->wake, wake_cb) != 0 ||
	    uv_timer_init(&p->loop, &p->timer) != 0) {
		pe_err_set(err, PE_EINTERNAL, "workers", "cannot start the event loop");
		free(p);
		return NULL;
	}
	p->wake.data = p;
	p->timer.data = p;
	uv_timer_start(&p->timer, timer_cb, tick_ms, tick_ms);
	if (pthread_create(&p->thread, NULL, loop_main, p) != 0) {
		pe_err_set(err, PE_EINTERNAL, "workers", "cannot start the loop thread");
		free(p);
		return NULL;
	}
	return p;
}

int pe_pool_submit(struct pe_pool *p, void (*work)(void *), void *arg)
{
	struct job *j = malloc(sizeof *j);
	if (!j)
		return PE_ENOMEM;
	*j = (struct job){.pool = p, .work = work, .arg = arg};
	pthread_mutex_lock(&p->lock);
	int rc = p->closed ? PE_EDRAINING : atomic_load(&p->queued) >= p->max_queue ? PE_EBUSY : 0;
	if (rc == 0) {
		if (p->tail)
			p->tail->next = j;
		else
			p->head = j;
		p->tail = j;
		atomic_fetch_add(&p->queued, 1);
		atomic_fetch_add(&p->submitted, 1);
	}
	pthread_mutex_unlock(&p->lock);
	if (rc != 0) {
		atomic_fetch_add(&p->rejected, 1);
		free(j);
		return rc;
	}
	uv_async_send(&p->wake);
	return 0;
}

void pe_pool_close(struct pe_pool *p)
{
	pthread_mutex_lock(&p->lock);
	p->closed = 1;
	pthread_mutex_unlock(&p->lock);
}

void pe_pool_stats(struct pe_pool *p, struct pe_pool_stats *out)
{
	out->submitted = atomic_load(&p->submitted);
	out->completed = atomic_load(&p->completed);
	out->rejected = atomic_load(&p->rejected);
	out->queued = atomic_load(&p->queued);
	out->running = atomic_load(&p->running);
}

void pe_pool_free(struct pe_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->closed = 1;
	p->stopping = 1;
	pthread_mutex_unlock(&p->lock);
	uv_async_send(&p->wake);
	pthread_join(p->thread, NULL);
	uv_loop_close(&p->loop);
	pthread_mutex_destroy(&p->lock);
	free(p);
}
