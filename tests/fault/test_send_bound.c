/* A body over 512 KiB bounds its connection's send buffer (http/response.c pe_http_large_answer),
 * so the HTTP thread copies it out in pieces and serves its other connections between them; a
 * smaller one leaves the kernel's autotuning alone. Asserted on the daemon's own sockets, taken
 * into this process with pidfd_getfd (we started it, so we may) and read with getsockopt, never
 * on time; and the bounded answers arrive whole, as cached and as computed. */
#include "support/pe_fault.h"

#include <sys/socket.h>
#include <sys/syscall.h>

#define BOUND (512 * 1024) /* PE_HTTP_SEND_BOUND; the kernel reports twice what was set */

/* SO_SNDBUF of the daemon's end of our connection fd (found by its peer: our local address), -1 if
 * none was found. */
static int server_sndbuf(pid_t pid, int fd)
{
	struct sockaddr_storage mine;
	socklen_t mlen = sizeof mine;
	if (getsockname(fd, (struct sockaddr *)&mine, &mlen) != 0)
		return -1;
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0)
		return -1;
	int found = -1;
	for (int target = 3; target < 1024 && found < 0; target++) {
		int dup = (int)syscall(SYS_pidfd_getfd, pidfd, target, 0);
		if (dup < 0)
			continue;
		struct sockaddr_storage peer;
		socklen_t plen = sizeof peer;
		int v = 0;
		socklen_t vlen = sizeof v;
		if (getpeername(dup, (struct sockaddr *)&peer, &plen) == 0 && plen == mlen && !memcmp(&peer, &mine, mlen) &&
		    getsockopt(dup, SOL_SOCKET, SO_SNDBUF, &v, &vlen) == 0)
			found = v;
		close(dup);
	}
	close(pidfd);
	return found;
}

/* GET path on fd (kept alive): its status, body length in *len. */
static int get_on(int fd, const char *path, size_t *len)
{
	char req[256];
	snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path);
	struct resp r = {0};
	int st = send_all(fd, req, strlen(req)) == 0 && read_response(fd, &r, 20000, 64u << 20) == 0 ? r.status : 0;
	*len = st == 200 && resp_whole(&r) ? r.body_len : 0;
	resp_free(&r);
	return st;
}

static int scenario(void)
{
	fault_init("send_bound", 120);
	struct pe_spawn d;
	daemon_start(&d, NULL);
	size_t len = 0;

	int small = tcp_connect(d.port, NULL);
	int st = get_on(small, "/v1/sinusoidal?len=16&dim=16", &len);
	check(st == 200 && len > 0, "a 16x16 table: %d, whole (%zu B)", st, len);
	int v = server_sndbuf(d.pid, small);
	check(v > 0, "the daemon's end of the connection is found (SO_SNDBUF %d)", v);
	check(v != 2 * BOUND, "a small answer leaves the send buffer to the kernel (%d)", v);

	int big = tcp_connect(d.port, NULL);
	const char *json = "/v1/sinusoidal?len=512&dim=768"; /* ~4.3 MB of JSON */
	st = get_on(big, json, &len);
	check(st == 200 && len > 4000000, "a cold 512x768 JSON table: %d, whole (%zu B)", st, len);
	size_t first = len;
	v = server_sndbuf(d.pid, big);
	check(v == 2 * BOUND, "its connection's send buffer is bounded to 512 KiB (SO_SNDBUF %d)", v);
	check(get_on(big, json, &len) == 200 && len == first, "the same table cached, on the same connection: whole");
	check(server_sndbuf(d.pid, small) != 2 * BOUND, "the other connection is left alone");

	int cached = tcp_connect(d.port, NULL);
	check(get_on(cached, json, &len) == 200 && len == first, "the cached table on a fresh connection: whole");
	check(server_sndbuf(d.pid, cached) == 2 * BOUND, "a cached answer bounds its connection too");

	int mid = tcp_connect(d.port, NULL);
	st = get_on(mid, "/v1/sinusoidal?len=128&dim=256&format=bin", &len);
	check(st == 200 && len == 128 * 256 * 4, "a 128 KiB binary table: %d, whole (%zu B)", st, len);
	check(server_sndbuf(d.pid, mid) != 2 * BOUND, "at most 512 KiB: left to the kernel");
	close(small);
	close(big);
	close(cached);
	close(mid);
	check(daemon_stop(&d, SIGTERM, 30) == 0, "exits 0");
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
