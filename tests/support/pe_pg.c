/* A private PostgreSQL cluster for tests (see pe_pg.h). Commands run through system(): initdb,
 * pg_ctl and psql, with the paths quoted; as root they run as "postgres" through runuser. */
#include "support/pe_pg.h"
#include "support/pe_spawn.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <signal.h>
#include <glob.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *bindir(void)
{
	static char dir[256];
	const char *env = getenv("PE_PG_BINDIR");
	glob_t g;
	if (env && *env)
		return env;
	if (!dir[0] && glob("/usr/lib/postgresql/*/bin/initdb", 0, NULL, &g) == 0) {
		/* the last in glob's (sorted) order: the newest version with one digit more is rare enough */
		snprintf(dir, sizeof dir, "%.*s", (int)(strlen(g.gl_pathv[g.gl_pathc - 1]) - strlen("/initdb")),
			 g.gl_pathv[g.gl_pathc - 1]);
		globfree(&g);
	}
	return dir;
}

/* "<bindir>/<tool>" or just "<tool>" (from $PATH). */
static void tool(const char *name, char *out, size_t cap)
{
	const char *d = bindir();
	snprintf(out, cap, "%s%s%s", d, *d ? "/" : "", name);
}

/* The prefix that runs a command as the cluster's owner. */
static const char *as_owner(void) { return geteuid() == 0 ? "runuser -u postgres -- " : ""; }

int pe_pg_available(void)
{
	char t[300], cmd[400];
	tool("initdb", t, sizeof t);
	snprintf(cmd, sizeof cmd, "'%s' --version >/dev/null 2>&1", t);
	return system(cmd) == 0 && (geteuid() != 0 || getpwnam("postgres") != NULL);
}

static int free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;
	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

static int run_ctl(const struct pe_pg *pg, const char *args)
{
	char t[300], cmd[1200];
	tool("pg_ctl", t, sizeof t);
	snprintf(cmd, sizeof cmd, "%s'%s' -D '%s/data' -l '%s/log' -w -t 60 %s >>'%s/ctl.out' 2>&1", as_owner(), t,
		 pg->dir, pg->dir, args, pg->dir);
	return system(cmd) == 0 ? 0 : -1;
}

static int start_server(struct pe_pg *pg)
{
	char args[400];
	snprintf(args, sizeof args, "-o \"-p %d -k '%s' -c listen_addresses=127.0.0.1 -c fsync=off\" start", pg->port,
		 pg->dir);
	return run_ctl(pg, args);
}

/* The watcher (see pe_pg.h): the end of the pipe it reads is its only copy; the test process's
 * end is close-on-exec, so the daemons and commands it starts do not keep the watcher waiting. */
static int watch(struct pe_pg *pg)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0)
		return -1;
	pid_t w = fork();
	if (w < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (w == 0) {
		char c = 0;
		ssize_t n;
		close(p[1]);
		setsid(); /* out of the test's process group, which check SIGKILLs when the test ends */
		while ((n = read(p[0], &c, 1)) < 0 && errno == EINTR)
			;
		if (n == 1 && c == 'x')
			_exit(0); /* pe_pg_destroy cleaned up */
		pe_pg_freeze(pg, 0);
		pg->running = 1;
		pg->watch_fd = -1;
		pe_pg_destroy(pg);
		_exit(0);
	}
	close(p[0]);
	pg->watch_fd = p[1];
	pg->watcher = (int)w;
	return 0;
}

/* initdb of dir/data as the cluster's owner; 0 or -1. */
static int initdb(const char *dir)
{
	char t[300], cmd[1000];
	tool("initdb", t, sizeof t);
	snprintf(cmd, sizeof cmd, "%s'%s' -D '%s/data' -U posenc --auth=trust -N -E UTF8 --locale=C >'%s/initdb.out' 2>&1",
		 as_owner(), t, dir, dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* A directory the cluster's owner may write; 0 or -1. */
static int owned_dir(const char *dir)
{
	struct passwd *pw = geteuid() == 0 ? getpwnam("postgres") : NULL;
	return geteuid() == 0 && (!pw || chown(dir, pw->pw_uid, pw->pw_gid) != 0) ? -1 : 0;
}

/* The template's data directory under $PE_PG_TEMPLATE (see pe_pg.h), made by the first caller:
 * initdb into a directory of its own, then renamed into place, so a reader sees a whole cluster
 * or none and two makers racing keep one. NULL when unset or when it cannot be made. */
static const char *template_data(void)
{
	static char data[300];
	char tmp[300], cmd[400];
	const char *root = getenv("PE_PG_TEMPLATE");
	if (!root || !*root || strlen(root) > 200)
		return NULL;
	snprintf(data, sizeof data, "%s/data", root);
	snprintf(tmp, sizeof tmp, "%s/data/PG_VERSION", root);
	if (access(tmp, R_OK) == 0)
		return data;
	if (mkdir(root, 0755) != 0 && errno != EEXIST)
		return NULL;
	snprintf(tmp, sizeof tmp, "%s/init-XXXXXX", root);
	if (!mkdtemp(tmp) || chmod(tmp, 0755) != 0 || owned_dir(tmp) != 0)
		return NULL;
	char made[320];
	snprintf(made, sizeof made, "%s/data", tmp);
	int ok = initdb(tmp) == 0 && (rename(made, data) == 0 || errno == EEXIST || errno == ENOTEMPTY);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
	if (system(cmd) != 0)
		fprintf(stderr, "pe_pg: cannot remove %s\n", tmp);
	return ok ? data : NULL;
}

/* dir/data: a copy of the template when there is one (initdb costs seconds, a copy a fraction of
 * one), else initdb. 0 or -1. */
static int make_data(const char *dir)
{
	char cmd[800];
	const char *tmpl = template_data();
	if (!tmpl)
		return initdb(dir);
	snprintf(cmd, sizeof cmd, "cp -a '%s' '%s/data' >'%s/initdb.out' 2>&1", tmpl, dir, dir);
	return system(cmd) == 0 ? 0 : -1;
}

int pe_pg_start(struct pe_pg *pg, char *why, size_t cap)
{
	memset(pg, 0, sizeof *pg);
	pg->watch_fd = -1;
	snprintf(pg->dir, sizeof pg->dir, "%.100s/posenc-pg-XXXXXX", pe_scratch_base());
	if (!mkdtemp(pg->dir))
		return snprintf(why, cap, "mkdtemp failed"), -1;
	if (owned_dir(pg->dir) != 0)
		return snprintf(why, cap, "cannot give %s to the postgres user", pg->dir), -1;
	if (watch(pg) != 0)
		return snprintf(why, cap, "cannot start the cluster's watcher"), -1;
	if (make_data(pg->dir) != 0)
		return snprintf(why, cap, "initdb failed (see %s/initdb.out)", pg->dir), -1;
	for (int tries = 0; tries < 3; tries++) {
		if ((pg->port = free_port()) < 0)
			continue;
		snprintf(pg->url, sizeof pg->url, "postgresql://posenc@127.0.0.1:%d/postgres", pg->port);
		if (start_server(pg) == 0) {
			pg->running = 1;
			return 0;
		}
	}
	return snprintf(why, cap, "pg_ctl start failed (see %s/log)", pg->dir), -1;
}

int pe_pg_stop(struct pe_pg *pg, const char *mode)
{
	char args[64];
	snprintf(args, sizeof args, "-m %s stop", mode);
	int rc = run_ctl(pg, args);
	if (rc == 0)
		pg->running = 0;
	return rc;
}

int pe_pg_restart(struct pe_pg *pg)
{
	int rc = start_server(pg);
	if (rc == 0)
		pg->running = 1;
	return rc;
}

int pe_pg_sql(const struct pe_pg *pg, const char *sql)
{
	char cmd[2048];
	snprintf(cmd, sizeof cmd, "psql -X -q -v ON_ERROR_STOP=1 '%s' -c \"%s\" >>'%s/psql.out' 2>&1", pg->url, sql,
		 pg->dir);
	return system(cmd) == 0 ? 0 : -1;
}

int pe_pg_query(const struct pe_pg *pg, const char *sql, char *out, size_t cap)
{
	char cmd[2048];
	snprintf(cmd, sizeof cmd, "psql -X -q -t -A -v ON_ERROR_STOP=1 '%s' -c \"%s\" 2>>'%s/psql.out'", pg->url, sql,
		 pg->dir);
	FILE *p = popen(cmd, "r");
	if (!p)
		return -1;
	out[0] = 0;
	if (!fgets(out, (int)cap, p))
		out[0] = 0;
	out[strcspn(out, "\n")] = 0;
	char rest[256];
	while (fgets(rest, sizeof rest, p))
		;
	return pclose(p) == 0 ? 0 : -1;
}

int pe_pg_bg(const struct pe_pg *pg, const char *sql)
{
	char dest[160];
	snprintf(dest, sizeof dest, "%s/psql.out", pg->dir);
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open(dest, O_WRONLY | O_APPEND | O_CREAT, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		setenv("PGAPPNAME", "pe_pg_bg", 1); /* pe_pg_bg_end finds its session by it */
		execlp("psql", "psql", "-X", "-q", pg->url, "-c", sql, (char *)NULL);
		_exit(127);
	}
	return pid > 0 ? (int)pid : -1;
}

void pe_pg_bg_end(const struct pe_pg *pg, int pid)
{
	if (pid <= 0)
		return;
	/* the server notices a killed client only when it next talks to it: end the session there */
	pe_pg_sql(pg, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'pe_pg_bg'");
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

int pe_pg_role(const struct pe_pg *pg, const char *role, const char *grants, char *url, size_t cap)
{
	char sql[1024];
	snprintf(sql, sizeof sql, "CREATE ROLE %s LOGIN", role);
	if (pe_pg_sql(pg, sql) != 0 || (grants && pe_pg_sql(pg, grants) != 0))
		return -1;
	snprintf(url, cap, "postgresql://%s@127.0.0.1:%d/postgres", role, pg->port);
	return 0;
}

/* The postmaster's pid (from postmaster.pid), or -1. */
static pid_t postmaster(const struct pe_pg *pg)
{
	char path[200];
	long pid = -1;
	snprintf(path, sizeof path, "%s/data/postmaster.pid", pg->dir);
	FILE *f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%ld", &pid) != 1)
			pid = -1;
		fclose(f);
	}
	return (pid_t)pid;
}

/* The parent of pid (from /proc/<pid>/stat), or -1. */
static pid_t parent_of(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
	if (f)
		fclose(f);
	buf[n] = 0;
	const char *p = strrchr(buf, ')'); /* "pid (comm) state ppid ..." */
	long ppid = -1;
	char state;
	return p && sscanf(p + 1, " %c %ld", &state, &ppid) == 2 ? (pid_t)ppid : -1;
}

int pe_pg_freeze(struct pe_pg *pg, int frozen)
{
	pid_t pm = postmaster(pg);
	int sig = frozen ? SIGSTOP : SIGCONT;
	DIR *d = opendir("/proc");
	if (pm <= 0 || !d) {
		if (d)
			closedir(d);
		return -1;
	}
	kill(pm, sig);
	for (struct dirent *e; (e = readdir(d)) != NULL;) {
		pid_t pid = (pid_t)atol(e->d_name);
		if (pid > 0 && parent_of(pid) == pm)
			kill(pid, sig); /* the cluster's backends and helpers: the postmaster's children */
	}
	closedir(d);
	pg->frozen = frozen;
	return 0;
}

void pe_pg_destroy(struct pe_pg *pg)
{
	char cmd[300];
	if (!pg->dir[0])
		return;
	if (pg->frozen)
		pe_pg_freeze(pg, 0);
	if (pg->running)
		pe_pg_stop(pg, "immediate");
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", pg->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "pe_pg: cannot remove %s\n", pg->dir);
	pg->dir[0] = 0;
	if (pg->watch_fd >= 0) { /* goodbye: the watcher has nothing left to do */
		if (write(pg->watch_fd, "x", 1) != 1)
			fprintf(stderr, "pe_pg: cannot tell the watcher\n");
		close(pg->watch_fd);
		waitpid(pg->watcher, NULL, 0);
		pg->watch_fd = -1;
	}
}
