/* Slowloris: hundreds of connections that trickle a request one byte a second, idle connections,
 * and a client over its per-IP limit, while a well-behaved client (another source address)
 * keeps being served within a second per request.
 *
 * posencd runs with --connection-timeout 3. Expected: idle connections closed within the timeout
 * (+2 s); connections trickling their headers or their body closed within 3 timeouts (+1 s) of
 * opening, although each byte arrives within the timeout (libmicrohttpd 0.9.75's
 * CONNECTION_TIMEOUT is an inactivity timer, so it alone never closes them: the server needs a
 * deadline of its own for a whole request); the connection one over --max-connections-per-ip
 * closed at once; the daemon healthy and exiting 0 on SIGTERM afterwards. Attackers come from
 * 127.0.0.2-127.0.0.9, the good client from 127.0.0.1 (all loopback on Linux). */
#include "support/pe_fault.h"

#include <pthread.h>
#include <stdatomic.h>

#define TIMEOUT 3
#define PER_IP 100
#define HEADER_TRICKLERS 300 /* 100 from each of 127.0.0.2, .3, .4 */
#define BODY_TRICKLERS 8
#define IDLE 50
#define RUN_S (4 * TIMEOUT + 2)

struct slow {
	int fd;
	double opened, closed; /* closed: when we saw the server close it (0: still open) */
	int body;              /* trickles a body (headers sent whole) */
};

static struct slow tricklers[HEADER_TRICKLERS + BODY_TRICKLERS], idle[IDLE];
static int ntricklers, nidle;
static atomic_int stop_trickling; /* the main thread sets it, the trickler reads it */

static void *trickle_main(void *arg)
{
	(void)arg;
	while (!stop_trickling) {
		double t = now_s();
		for (int i = 0; i < nidle; i++)
			if (!idle[i].closed && peer_closed(idle[i].fd, 0))
				idle[i].closed = now_s();
		for (int i = 0; i < ntricklers; i++) {
			struct slow *s = &tricklers[i];
			if (s->closed)
				continue;
			if (peer_closed(s->fd, 0) || send(s->fd, "a", 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
				s->closed = now_s();
		}
		while (!stop_trickling && now_s() < t + 1.0)
			sleep_s(0.05);
	}
	return NULL;
}

static int open_slow(struct slow *s, int port, const char *src, const char *first, int body)
{
	s->fd = tcp_connect(port, src);
	if (s->fd < 0)
		return -1;
	s->opened = now_s();
	s->body = body;
	if (first && send_all(s->fd, first, strlen(first)) != 0)
		s->closed = now_s();
	return 0;
}

static int scenario(void)
{
	fault_init("slowloris", 60);
	struct pe_spawn d;
	char timeout[16], per_ip[16];
	snprintf(timeout, sizeof timeout, "%d", TIMEOUT);
	snprintf(per_ip, sizeof per_ip, "%d", PER_IP);
	const char *args[] = {"--connection-timeout", timeout, "--max-connections-per-ip", per_ip,
			      "--max-connections", "2000", NULL};
	daemon_start(&d, args);
	int slack = daemon_instrumented(&d) ? 3 : 1;

	/* The per-IP limit: PER_IP idle connections from one address, then one more. */
	int held[PER_IP], nheld = 0;
	for (int i = 0; i < PER_IP; i++)
		if ((held[nheld] = tcp_connect(d.port, "127.0.0.9")) >= 0)
			nheld++;
	sleep_s(0.2);
	int extra = tcp_connect(d.port, "127.0.0.9");
	check(nheld == PER_IP, "%d connections from one address accepted (--max-connections-per-ip %d)", nheld, PER_IP);
	check(extra < 0 || peer_closed(extra, 1000), "connection %d from that address closed at once", PER_IP + 1);
	if (extra >= 0)
		close(extra);
	for (int i = 0; i < nheld; i++)
		close(held[i]);

	/* The attackers. */
	static const char *const srcs[] = {"127.0.0.2", "127.0.0.3", "127.0.0.4"};
	int failed_open = 0;
	for (int i = 0; i < HEADER_TRICKLERS; i++)
		failed_open += open_slow(&tricklers[ntricklers++], d.port, srcs[i % 3],
					 "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ", 0) != 0;
	for (int i = 0; i < BODY_TRICKLERS; i++)
		failed_open += open_slow(&tricklers[ntricklers++], d.port, "127.0.0.6",
					 "POST /v1/sinusoidal/apply HTTP/1.1\r\nHost: 127.0.0.1\r\n"
					 "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n[",
					 1) != 0;
	for (int i = 0; i < IDLE; i++)
		failed_open += open_slow(&idle[nidle++], d.port, "127.0.0.5", NULL, 0) != 0;
	check(failed_open == 0, "%d trickling and %d idle connections opened (%d failed)", HEADER_TRICKLERS + BODY_TRICKLERS,
	      IDLE, failed_open);
	pthread_t th;
	pthread_create(&th, NULL, trickle_main, NULL);

	/* The good client, meanwhile. */
	int requests = 0, good = 0;
	double worst = 0, t_end = now_s() + RUN_S;
	char path[128];
	while (now_s() < t_end) {
		struct resp r;
		if (requests % 2)
			snprintf(path, sizeof path, "/v1/sinusoidal?len=64&dim=64&offset=%d", requests);
		else
			snprintf(path, sizeof path, "/healthz");
		int rc = http_request(d.port, "127.0.0.1", "GET", path, "", NULL, 0, 5000, &r);
		requests++;
		if (rc == 0 && r.status == 200 && r.seconds < slack)
			good++;
		else
			note("%s: status %d after %.3f s", path, r.status, r.seconds);
		if (r.seconds > worst)
			worst = r.seconds;
		resp_free(&r);
		sleep_s(0.1);
	}
	check(good == requests, "well-behaved client: %d of %d requests answered 200 within %d s (slowest %.3f s)", good,
	      requests, slack, worst);

	stop_trickling = 1;
	pthread_join(th, NULL);

	/* Idle connections: closed by the inactivity timeout. */
	int idle_ok = 0, idle_open = 0;
	double idle_worst = 0;
	for (int i = 0; i < nidle; i++) {
		if (!idle[i].closed) {
			idle_open++;
			continue;
		}
		double after = idle[i].closed - idle[i].opened;
		idle_worst = after > idle_worst ? after : idle_worst;
		idle_ok += after <= TIMEOUT + 2;
	}
	check(idle_ok == nidle, "idle connections closed within %d s: %d of %d (%d never closed; slowest %.1f s)",
	      TIMEOUT + 2, idle_ok, nidle, idle_open, idle_worst);

	/* Trickling connections: each byte comes within the timeout, yet they must not live forever. */
	for (int body = 0; body <= 1; body++) {
		int n = 0, ok = 0, open = 0;
		double worst_close = 0;
		for (int i = 0; i < ntricklers; i++) {
			struct slow *s = &tricklers[i];
			if (s->body != body)
				continue;
			n++;
			if (!s->closed) {
				open++;
				continue;
			}
			double after = s->closed - s->opened;
			worst_close = after > worst_close ? after : worst_close;
			ok += after <= 3 * TIMEOUT + 1;
		}
		check(ok == n,
		      "connections trickling their %s one byte a second closed within %d s: %d of %d (%d still open after %d s)",
		      body ? "body" : "headers", 3 * TIMEOUT + 1, ok, n, open, RUN_S);
	}
	for (int i = 0; i < ntricklers; i++)
		close(tricklers[i].fd);
	for (int i = 0; i < nidle; i++)
		close(idle[i].fd);

	struct resp r;
	sleep_s(0.2);
	check(daemon_alive(&d) && http_get(d.port, "/healthz", 2000, &r) == 0 && r.status == 200,
	      "daemon alive and healthy afterwards");
	resp_free(&r);
	int st = daemon_stop(&d, SIGTERM, 30);
	check(st == 0, "exit status %d after SIGTERM (0 expected)", st);
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
