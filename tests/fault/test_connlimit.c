/* Connection limits close at once (issue 21 item 7). With max_connections idle connections open,
 * the next one is closed by posencd at once rather than left waiting in the listen backlog (where
 * libmicrohttpd's own limit leaves it); the per-IP limit likewise. With 2,000 idle connections
 * from several addresses a normal client gets an answer or an immediate close, never silence;
 * once the idle ones go, it is served again. */
#include "support/pe_fault.h"

#define IDLE 2000

/* A request on a new connection from src: 1 answered 200, 0 closed by the server without an
 * answer, -1 nothing within wait_ms (waiting in the backlog). */
static int probe(int port, const char *src, int wait_ms)
{
	int fd = tcp_connect(port, src);
	if (fd < 0)
		return 0; /* refused outright also counts as an immediate close */
	const char req[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
	struct resp r = {0};
	int rc = send_all(fd, req, sizeof req - 1) == 0 && read_response(fd, &r, wait_ms, 1 << 16) == 0 ? 1 : 0;
	if (rc == 1)
		rc = r.status == 200;
	else if (r.status == 0 && !peer_closed(fd, 0))
		rc = -1;
	resp_free(&r);
	close(fd);
	return rc;
}

static int open_idle(int port, int *fds, int n, int naddr)
{
	int opened = 0;
	for (int i = 0; i < n; i++) {
		char src[32];
		snprintf(src, sizeof src, "127.0.0.%d", 10 + i % naddr);
		fds[i] = tcp_connect(port, src);
		opened += fds[i] >= 0;
	}
	return opened;
}

static void close_all(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

static int scenario(void)
{
	fault_init("connlimit", 120);
	static int fds[IDLE];
	struct pe_spawn d;

	/* 40 idle connections against --max-connections 40 */
	const char *small[] = {"--max-connections", "40", "--max-connections-per-ip", "1000", NULL};
	daemon_start(&d, small);
	int opened = open_idle(d.port, fds, 40, 4);
	sleep_s(0.3); /* let the daemon accept them all */
	int got = probe(d.port, "127.0.0.99", 3000);
	check(got == 0, "--max-connections 40 reached: the 41st connection is closed at once (%s)",
	      got < 0 ? "it waited unanswered" : got ? "it was served" : "closed");
	close_all(fds, 40);
	double t0 = now_s();
	while ((got = probe(d.port, "127.0.0.99", 3000)) != 1 && now_s() - t0 < 5)
		sleep_s(0.05);
	check(opened == 40 && got == 1, "once the %d idle connections close, a new client is served again", opened);
	int st = daemon_stop(&d, SIGTERM, 30);
	check(st == 0, "exit status %d after SIGTERM (0 expected)", st);

	/* the per-IP limit: 10 from one address, the 11th closed at once, another address served */
	const char *per_ip[] = {"--max-connections-per-ip", "10", NULL};
	daemon_start(&d, per_ip);
	opened = open_idle(d.port, fds, 10, 1);
	sleep_s(0.3);
	got = probe(d.port, "127.0.0.10", 3000);
	check(got == 0, "--max-connections-per-ip 10 reached: the 11th from that address is closed at once (%s)",
	      got < 0 ? "it waited unanswered" : got ? "it was served" : "closed");
	check(probe(d.port, "127.0.0.20", 3000) == 1, "... while another address is served");
	close_all(fds, 10);
	st = daemon_stop(&d, SIGTERM, 30);
	check(st == 0, "exit status %d after SIGTERM (0 expected)", st);

	/* 2,000 idle connections from 8 addresses against the defaults (1024 in all, 256 per address) */
	daemon_start(&d, NULL);
	opened = open_idle(d.port, fds, IDLE, 8);
	sleep_s(0.5);
	int silent = 0, answered = 0;
	for (int i = 0; i < 5; i++) {
		got = probe(d.port, "127.0.0.99", 3000);
		silent += got < 0;
		answered += got == 1;
	}
	check(silent == 0, "%d idle connections opened: 5 normal requests each get an answer or an immediate close "
	      "(%d answered, %d unanswered)", opened, answered, silent);
	int fdn = fd_count(d.pid);
	check(fdn > 0 && fdn < 1024 + 200, "the daemon holds %d descriptors (at most max_connections and a few)", fdn);
	close_all(fds, IDLE);
	t0 = now_s();
	while ((got = probe(d.port, "127.0.0.99", 3000)) != 1 && now_s() - t0 < 10)
		sleep_s(0.05);
	check(got == 1, "after they close, a normal request is served");
	st = daemon_stop(&d, SIGTERM, 30);
	check(st == 0, "exit status %d after SIGTERM (0 expected)", st);
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
