/* The listening socket and the one thread that accepts from it (acceptor.c), handing each
 * connection to libmicrohttpd (MHD_add_connection). Used by server.c only. */
#ifndef PE_HTTP_ACCEPTOR_H
#define PE_HTTP_ACCEPTOR_H

#include <microhttpd.h>
#include <stdint.h>
#include <sys/socket.h>

struct pe_acceptor;

/* A socket bound to addr (IPv6 only when addr is, as libmicrohttpd's own) and listening with
 * backlog; NULL with *error the errno (EADDRINUSE: the port is taken). */
struct pe_acceptor *pe_acceptor_open(const struct sockaddr_storage *addr, int backlog, int *error);
uint16_t pe_acceptor_port(const struct pe_acceptor *a); /* the port bound (port 0: the kernel's) */
struct pe_conn_guard;
/* Accept on a thread of its own into mhd (started with MHD_USE_NO_LISTEN_SOCKET and MHD_USE_ITC),
 * each connection admitted by guard first (max_connections). 0, or PE_ENOMEM when the thread
 * cannot start. */
int pe_acceptor_start(struct pe_acceptor *a, struct MHD_Daemon *mhd, struct pe_conn_guard *guard);
/* Stop accepting: the thread is joined, then the socket shut down, so connections queued in the
 * kernel and every new one are refused at once. Idempotent; from one thread at a time. */
void pe_acceptor_stop(struct pe_acceptor *a);
/* Stops it and closes the socket. NULL is fine. */
void pe_acceptor_free(struct pe_acceptor *a);

#endif
