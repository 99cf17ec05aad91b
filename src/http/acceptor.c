/* The listening socket and its accept thread (acceptor.h).
 *
 * Why not libmicrohttpd's own listening socket: draining must stop accepting while the server runs,
 * and libmicrohttpd 0.9.75's MHD_quiesce_daemon races with its epoll threads. Quiescing sets a
 * flag and removes the socket from each thread's epoll set from the caller's thread, while an epoll
 * thread that read the flag mid-loop removes it too; the second removal fails (ENOENT) and where
 * that thread does not expect it (MHD_epoll's check of the connection limit, daemon.c:4976 in
 * 0.9.75, still so upstream) libmicrohttpd aborts the process: "Failed to remove listen FD from
 * epoll set" (seen on SIGTERM under AddressSanitizer, exit 134). Here the server's threads never
 * see the socket: this thread accepts and hands each connection over with MHD_add_connection,
 * which queues it for an epoll thread and wakes that thread through its ITC. The connection limit
 * is applied here first (conn_guard.c counts what it admits), libmicrohttpd's per-address limit
 * inside MHD_add_connection, which closes what it refuses. Stopping is this thread's own
 * business: a wake-up on an eventfd, a join, then the socket shut down so the kernel refuses what
 * waits in the backlog and every new connection.
 *
 * Ownership: the acceptor owns the socket and the thread; libmicrohttpd owns each accepted
 * connection from MHD_add_connection on, even when it refuses it. */
#include "http/acceptor.h"
#include "http/conn_guard.h"
#include "posenc/err.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

/* Out of descriptors (or kernel memory, or an error not foreseen): the connection stays in the
 * backlog; accept again after this long, not in a loop at once (the socket stays readable). */
#define FULL_PAUSE_NS 10000000L

struct pe_acceptor {
	int fd, wake;
	uint16_t port;
	struct MHD_Daemon *mhd;
	struct pe_conn_guard *guard;
	pthread_t thread;
	int running;
};

static void pause_while_full(void)
{
	struct timespec ts = {0, FULL_PAUSE_NS};
	nanosleep(&ts, NULL);
}

/* Everything the backlog holds now, handed over. */
static void accept_all(struct pe_acceptor *a)
{
	for (;;) {
		struct sockaddr_storage addr;
		socklen_t len = sizeof addr;
		int c = accept4(a->fd, (struct sockaddr *)&addr, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (c >= 0) {
			if (pe_conn_guard_admit(a->guard) != 0) /* max_connections open: closed at once */
				close(c);
			else if (MHD_add_connection(a->mhd, c, (struct sockaddr *)&addr, len) != MHD_YES) /* c closed */
				pe_conn_guard_unadmit(a->guard);
			continue;
		}
		if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK) /* EMFILE, ENFILE, ENOBUFS, ENOMEM, or worse */
			pause_while_full();
		return; /* EAGAIN: the backlog is empty */
	}
}

static void *accept_thread(void *arg)
{
	struct pe_acceptor *a = arg;
	struct pollfd p[2] = {{.fd = a->fd, .events = POLLIN}, {.fd = a->wake, .events = POLLIN}};
	for (;;) {
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			pause_while_full();
		if (p[1].revents)
			return NULL;
		if (p[0].revents)
			accept_all(a);
	}
}

struct pe_acceptor *pe_acceptor_open(const struct sockaddr_storage *addr, int backlog, int *error)
{
	struct pe_acceptor *a = calloc(1, sizeof *a);
	if (!a) {
		*error = ENOMEM;
		return NULL;
	}
	a->fd = a->wake = -1;
	int v6 = addr->ss_family == AF_INET6, on = 1;
	socklen_t len = v6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
	a->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	a->fd = socket(addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (a->wake < 0 || a->fd < 0 || setsockopt(a->fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 ||
	    (v6 && setsockopt(a->fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on) != 0) ||
	    bind(a->fd, (const struct sockaddr *)addr, len) != 0 || listen(a->fd, backlog) != 0) {
		*error = errno;
		pe_acceptor_free(a);
		return NULL;
	}
	struct sockaddr_storage bound;
	socklen_t blen = sizeof bound;
	if (getsockname(a->fd, (struct sockaddr *)&bound, &blen) == 0)
		a->port = ntohs(v6 ? ((struct sockaddr_in6 *)&bound)->sin6_port : ((struct sockaddr_in *)&bound)->sin_port);
	return a;
}

uint16_t pe_acceptor_port(const struct pe_acceptor *a) { return a->port; }

int pe_acceptor_start(struct pe_acceptor *a, struct MHD_Daemon *mhd, struct pe_conn_guard *guard)
{
	a->mhd = mhd;
	a->guard = guard;
	if (pthread_create(&a->thread, NULL, accept_thread, a) != 0)
		return PE_ENOMEM;
	a->running = 1;
	return 0;
}

void pe_acceptor_stop(struct pe_acceptor *a)
{
	if (!a || a->fd < 0)
		return;
	if (a->running) {
		uint64_t one = 1;
		while (write(a->wake, &one, sizeof one) < 0 && errno == EINTR)
			;
		pthread_join(a->thread, NULL);
		a->running = 0;
	}
	shutdown(a->fd, SHUT_RDWR);
}

void pe_acceptor_free(struct pe_acceptor *a)
{
	if (!a)
		return;
	pe_acceptor_stop(a);
	if (a->fd >= 0)
		close(a->fd);
	if (a->wake >= 0)
		close(a->wake);
	free(a);
}
