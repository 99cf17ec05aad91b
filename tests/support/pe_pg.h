/* A private PostgreSQL cluster for tests: initdb in a temporary directory (pe_scratch_base), started with pg_ctl on
 * a free loopback port (listen_addresses 127.0.0.1, its unix socket in the same directory), trust
 * authentication for the user "posenc", removed at the end. As root, initdb and the server run as
 * the "postgres" user (initdb refuses root), and the directory is chown'ed to it.
 *
 * The binaries: $PE_PG_BINDIR, else the newest /usr/lib/postgresql/<version>/bin, else $PATH.
 * With $PE_PG_TEMPLATE set (tests/tools/run-tests.sh sets it to a directory of its run), the first
 * cluster's initdb is made there once and every cluster's data directory is a copy of it.
 * Every cluster has a watcher: a small process that waits on a pipe the test process holds, and
 * stops (immediate) and removes the cluster when that pipe closes without pe_pg_destroy having
 * said goodbye, so a check test that fails (check ends it with _exit: no atexit handler runs)
 * or is killed leaves nothing running. No libcheck here: failures are returned with a reason. */
#ifndef PE_TEST_PG_H
#define PE_TEST_PG_H

#include <stddef.h>

struct pe_pg {
	char dir[128];  /* the cluster's directory: data/, the socket, log */
	int port;
	char url[256];  /* postgresql://posenc@127.0.0.1:<port>/postgres */
	int running;
	int frozen;
	int watch_fd;   /* the pipe the watcher waits on (-1: none) */
	int watcher;    /* its pid */
};

/* Is PostgreSQL installed (initdb found)? Tests that need it say so and pass when it is not. */
int pe_pg_available(void);
/* initdb and start. 0, or -1 with why. */
int pe_pg_start(struct pe_pg *pg, char *why, size_t cap);
/* pg_ctl stop -m mode ("fast", "immediate"). 0 or -1. */
int pe_pg_stop(struct pe_pg *pg, const char *mode);
/* Start it again (after pe_pg_stop), on the same port. 0 or -1. */
int pe_pg_restart(struct pe_pg *pg);
/* Run one SQL command through psql; 0 when it succeeded. */
int pe_pg_sql(const struct pe_pg *pg, const char *sql);
/* The first line psql prints for one query (unaligned, tuples only) into out; 0, or -1 when it failed. */
int pe_pg_query(const struct pe_pg *pg, const char *sql, char *out, size_t cap);
/* Run sql in a psql of its own, in the background (a session that holds a lock: "BEGIN; LOCK ...;
 * SELECT pg_sleep(60)"); its pid, or -1. pe_pg_bg_end ends its session (its locks go) and it. */
int pe_pg_bg(const struct pe_pg *pg, const char *sql);
void pe_pg_bg_end(const struct pe_pg *pg, int pid);
/* Make a login role (no password: trust) and its URL, postgresql://<role>@127.0.0.1:<port>/postgres;
 * grants is SQL run after it (may be NULL). 0 or -1. */
int pe_pg_role(const struct pe_pg *pg, const char *role, const char *grants, char *url, size_t cap);
/* Freeze (SIGSTOP) or thaw (SIGCONT) the server and its backends: connections stay open and nothing
 * answers, as with a database host that stopped answering. 0 or -1. */
int pe_pg_freeze(struct pe_pg *pg, int frozen);
/* Stop (immediate) and remove. */
void pe_pg_destroy(struct pe_pg *pg);

#endif
