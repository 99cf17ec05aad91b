/* End-to-end tests of the listening socket (src/http/acceptor.c): a port another posencd holds is
 * refused at start with the reason; an IPv6 bind serves on that address only (IPV6_V6ONLY, as
 * libmicrohttpd's own socket was); SIGTERM right after the start line, while the HTTP threads run
 * their first loops, exits 0 every time (libmicrohttpd's quiesce, which this socket replaces,
 * could abort there); a connection handed over and then drained is answered whole. */
#include "support/pe_check.h"
#include "support/pe_spawn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* A GET /healthz over a new connection to addr: the status, or -1 when the connection fails
 * (errno kept). */
static int healthz(const struct sockaddr *addr, socklen_t len)
{
	int fd = socket(addr->sa_family, SOCK_STREAM, 0), status = -1;
	ck_assert_int_ge(fd, 0);
	if (connect(fd, addr, len) != 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	const char req[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	ck_assert_int_eq(send(fd, req, sizeof req - 1, 0), (ssize_t)(sizeof req - 1));
	char buf[256] = {0};
	size_t got = 0;
	ssize_t k;
	while (got < sizeof buf - 1 && (k = recv(fd, buf + got, sizeof buf - 1 - got, 0)) > 0)
		got += (size_t)k;
	if (strncmp(buf, "HTTP/1.1 ", 9) == 0)
		status = atoi(buf + 9);
	close(fd);
	return status;
}

static int healthz4(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	return healthz((struct sockaddr *)&a, sizeof a);
}

static void start(struct pe_spawn *d, const struct pe_spawn_opts *opts)
{
	char why[4096];
	ck_assert_msg(pe_spawn_start(d, NULL, opts, why, sizeof why) == 0, "%s", why);
}

START_TEST(port_in_use_is_refused_with_the_reason)
{
	struct pe_spawn d;
	char dir[] = "/tmp/posenc-listen-XXXXXX", cmd[1024], path[1100], want[128];
	start(&d, NULL);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(cmd, sizeof cmd, "%s --port %d --bind 127.0.0.1 --data-dir %s/data >%s/out.txt 2>%s/err.txt",
		 pe_spawn_bin(), d.port, dir, dir, dir);
	int st = system(cmd);
	ck_assert(WIFEXITED(st));
	ck_assert_int_eq(WEXITSTATUS(st), 1);
	snprintf(path, sizeof path, "%s/err.txt", dir);
	size_t len;
	char *msg = pe_test_read_file(path, &len);
	snprintf(want, sizeof want, "cannot listen on 127.0.0.1 port %d: %s", d.port, strerror(EADDRINUSE));
	ck_assert_msg(msg && strstr(msg, want), "want '%s' in: %s", want, msg ? msg : "");
	free(msg);
	ck_assert_int_eq(healthz4(d.port), 200); /* the first one serves on */
	ck_assert_int_eq(pe_spawn_stop(&d, SIGTERM, 20), 0);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(ipv6_bind_serves_that_address_only)
{
	struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
	int probe = socket(AF_INET6, SOCK_STREAM, 0);
	int have_v6 = probe >= 0 && bind(probe, (struct sockaddr *)&a, sizeof a) == 0;
	if (probe >= 0)
		close(probe);
	if (!have_v6) {
		fprintf(stderr, "listen: note: no ::1 on this machine; the IPv6 bind is not tested\n");
		return;
	}
	struct pe_spawn d;
	struct pe_spawn_opts o = {.bind = "::1"};
	start(&d, &o);
	a.sin6_port = htons((uint16_t)d.port);
	ck_assert_int_eq(healthz((struct sockaddr *)&a, sizeof a), 200);
	int v4 = healthz4(d.port); /* IPV6_V6ONLY: not on 127.0.0.1 */
	ck_assert_msg(v4 == -1 && errno == ECONNREFUSED, "127.0.0.1 answered %d on a ::1 bind", v4);
	ck_assert_int_eq(pe_spawn_stop(&d, SIGTERM, 20), 0);
}
END_TEST

/* The start line is written once the server listens; a SIGTERM then finds its HTTP threads in
 * their first loops. Every stop must be the drain's exit 0, and the port is refused after it. */
START_TEST(sigterm_right_after_start_exits_0)
{
	for (int i = 0; i < 20; i++) {
		struct pe_spawn d;
		start(&d, NULL);
		int port = d.port;
		ck_assert_int_eq(pe_spawn_stop(&d, SIGTERM, 20), 0);
		ck_assert_int_eq(healthz4(port), -1);
	}
}
END_TEST

static Suite *listen_suite(void)
{
	Suite *s = suite_create("e2e_listen");
	TCase *tc = tcase_create("listen");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, port_in_use_is_refused_with_the_reason);
	tcase_add_test(tc, ipv6_bind_serves_that_address_only);
	tcase_add_test(tc, sigterm_right_after_start_exits_0);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(listen_suite)
