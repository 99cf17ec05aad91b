/* The store under attack (issue 21, family D), against the real daemon and its data_dir:
 *   - a second posencd started on the same data_dir (and port) while six big uploads run: it
 *     exits 1 at once, saying why, and touches nothing: every upload succeeds, quarantine/ stays
 *     empty, an upload's temporary file stays where it is;
 *   - a FIFO named *.table in data_dir: start-up does not block, the FIFO is left alone;
 *   - a .table file removed behind posencd's back: 404 (not 503 "retry", forever), off the list;
 *   - hundreds of leftover files: quarantine/ stays within quarantine_max_bytes and its file cap,
 *     and /metrics counts it;
 *   - a PUT and a DELETE answered 503 at job_timeout never land afterwards (POSENC_TEST_WRITE_GATE
 *     holds writes before they reach the store while its file exists, so the 503 comes first).
 * The daemon runs with --data-dir in a directory of this test's own under /tmp. */
#include "support/pe_fault.h"

#include <pthread.h>

static char dir[64];

static void path_of(char *out, size_t cap, const char *file) { snprintf(out, cap, "%s/%s", dir, file); }

static void touch(const char *file, size_t bytes)
{
	char path[160];
	path_of(path, sizeof path, file);
	FILE *f = fopen(path, "wb");
	for (size_t i = 0; f && i < bytes; i++)
		fputc('x', f);
	if (f)
		fclose(f);
}

/* An npy file (version 1.0, '<f4') of rows x cols values seeded by seed; *len its size. */
static char *npy(size_t rows, size_t cols, float seed, size_t *len)
{
	char head[128];
	int n = snprintf(head, sizeof head, "{'descr': '<f4', 'fortran_order': False, 'shape': (%zu, %zu), }", rows, cols);
	size_t hl = ((size_t)n + 10 + 1 + 63) / 64 * 64 - 10; /* header + '\n', the whole prefix a multiple of 64 */
	*len = 10 + hl + rows * cols * 4;
	char *b = malloc(*len);
	memcpy(b, "\x93NUMPY\x01\x00", 8);
	b[8] = (char)(hl & 0xff);
	b[9] = (char)(hl >> 8);
	memset(b + 10, ' ', hl);
	memcpy(b + 10, head, (size_t)n);
	b[10 + hl - 1] = '\n';
	float *v = (float *)(b + 10 + hl);
	for (size_t i = 0; i < rows * cols; i++)
		v[i] = seed + (float)(i % 1000) * 0.001f;
	return b;
}

static int put(int port, const char *name, const char *body, size_t len, struct resp *r)
{
	char path[128];
	snprintf(path, sizeof path, "/v1/learned/%s", name);
	return http_request(port, "127.0.0.1", "PUT", path, "Content-Type: application/x-npy\r\n", body, len, 60000, r);
}

static int status_of(int port, const char *method, const char *path)
{
	struct resp r;
	int st = http_request(port, "127.0.0.1", method, path, "", NULL, 0, 30000, &r) == 0 ? r.status : 0;
	resp_free(&r);
	return st;
}

/* status_of, asked again while the answer is 503: with one worker and a 1 s job_timeout, a read
 * on a loaded machine can time out without saying anything about what is stored. */
static int settled_status_of(int port, const char *method, const char *path)
{
	int st = status_of(port, method, path);
	for (int i = 0; i < 20 && st == 503; i++) {
		printf("%s: %s %s answered 503 (job_timeout under load), asking again\n", fault_name, method, path);
		usleep(250000);
		st = status_of(port, method, path);
	}
	return st;
}

static int count_dir(const char *sub)
{
	char path[160];
	int n = 0;
	path_of(path, sizeof path, sub);
	DIR *d = opendir(path);
	for (struct dirent *e; d && (e = readdir(d)) != NULL;)
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	if (d)
		closedir(d);
	return d ? n : -1;
}

/* ---- a second daemon on the same data_dir ---- */

struct upload {
	int port, i, status;
};

static void *upload_run(void *arg)
{
	struct upload *u = arg;
	size_t len;
	char name[16], *body = npy(4096, 1024, (float)u->i, &len); /* 16 MiB: its temporary file lives a while */
	struct resp r;
	snprintf(name, sizeof name, "big%d", u->i);
	u->status = put(u->port, name, body, len, &r) == 0 ? r.status : 0;
	resp_free(&r);
	free(body);
	return NULL;
}

static void second_daemon(struct pe_spawn *d)
{
	char tmp[64], path[160], cmd[600];
	snprintf(tmp, sizeof tmp, ".tmp-held.%d.1", d->pid); /* as an upload in progress leaves it */
	touch(tmp, 8);
	struct upload u[6];
	pthread_t t[6];
	for (int i = 0; i < 6; i++) {
		u[i] = (struct upload){d->port, i, 0};
		pthread_create(&t[i], NULL, upload_run, &u[i]);
	}
	sleep_s(0.05);
	path_of(path, sizeof path, "second.err");
	snprintf(cmd, sizeof cmd, "%s --port %d --bind 127.0.0.1 --data-dir %s >%s.out 2>%s", daemon_bin(), d->port, dir,
		 path, path);
	double t0 = now_s();
	int st = system(cmd);
	double took = now_s() - t0;
	int ok = 0;
	for (int i = 0; i < 6; i++) {
		pthread_join(t[i], NULL);
		ok += u[i].status == 201;
	}
	char *msg = read_file(path, NULL);
	check(WIFEXITED(st) && WEXITSTATUS(st) == 1 && msg && strstr(msg, "in use by another posencd"),
	      "a second posencd on the same data_dir exits 1 saying it is in use (%.2f s): %s", took, msg ? msg : "");
	free(msg);
	check(ok == 6, "every concurrent upload succeeded: %d of 6", ok);
	path_of(path, sizeof path, tmp);
	struct stat sb;
	check(stat(path, &sb) == 0 && count_dir("quarantine") == 0,
	      "the second daemon moved nothing: the upload's temporary file is in place, quarantine/ is empty (%d)",
	      count_dir("quarantine"));
	unlink(path);
	path_of(path, sizeof path, "second.err");
	unlink(path);
	strcat(path, ".out");
	unlink(path);
}

/* ---- files changed behind posencd's back ---- */

static void removed_file(struct pe_spawn *d)
{
	size_t len;
	char *body = npy(8, 4, 1, &len), path[160];
	struct resp r;
	put(d->port, "gone", body, len, &r);
	resp_free(&r);
	free(body);
	path_of(path, sizeof path, "gone.table");
	unlink(path);
	int s1 = status_of(d->port, "GET", "/v1/learned/gone?format=npy");
	int s2 = status_of(d->port, "GET", "/v1/learned/gone?format=json");
	int s3 = status_of(d->port, "GET", "/v1/learned/gone?format=csv");
	check(s1 == 404 && s2 == 404 && s3 == 404, "a .table file removed behind its back: 404, 404, 404 (got %d, %d, %d)",
	      s1, s2, s3);
	check(http_get(d->port, "/v1/learned", 5000, &r) == 0 && !strstr(r.body, "\"gone\""), "and it left the list");
	resp_free(&r);
}

/* ---- the write gate: a write answered 503 never lands ---- */

static void held_writes(struct pe_spawn *d, const char *gate)
{
	size_t len;
	char *body = npy(8, 4, 7, &len);
	struct resp r, r2;
	touch("gate", 0);
	int put_st = put(d->port, "late", body, len, &r) == 0 ? r.status : 0;
	int del_st = http_request(d->port, "127.0.0.1", "DELETE", "/v1/learned/big0", "", NULL, 0, 30000, &r2) == 0
			     ? r2.status : 0;
	check(put_st == 503 && strstr(r.body, "nothing changed") && del_st == 503 && strstr(r2.body, "nothing changed"),
	      "a PUT and a DELETE held past job_timeout: 503 saying nothing changed (%d, %d)", put_st, del_st);
	resp_free(&r);
	resp_free(&r2);
	unlink(gate);
	put(d->port, "after", body, len, &r); /* one worker: answered after both held writes ended */
	check(r.status == 201, "a write after the gate opens: %d", r.status);
	resp_free(&r);
	int late = settled_status_of(d->port, "GET", "/v1/learned/late");
	int kept = settled_status_of(d->port, "GET", "/v1/learned/big0?len=2&format=csv");
	check(late == 404 && kept == 200, "neither held write landed: the PUT's table is absent (%d), the DELETE's present (%d)",
	      late, kept);
	free(body);
}

static int scenario(void)
{
	fault_init("store_attack", 240);
	snprintf(dir, sizeof dir, "/tmp/posenc-fault-store-XXXXXX");
	if (!mkdtemp(dir))
		return 2;
	char gate[128], path[160];
	path_of(gate, sizeof gate, "gate");
	pe_spawn_hooks(1); /* only the test build honours the gate */
	setenv("POSENC_TEST_WRITE_GATE", gate, 1);

	struct pe_spawn d;
	const char *args[] = {"--data-dir", dir, "--workers", "2", "--max-table-bytes", "33554432", NULL};
	daemon_start(&d, args);
	second_daemon(&d);
	removed_file(&d);
	check(daemon_stop(&d, SIGTERM, 30) == 0, "exit status 0 after SIGTERM");

	/* A FIFO named like a table, and 300 leftover temporary files of 1000 bytes each. */
	path_of(path, sizeof path, "fifo.table");
	mkfifo(path, 0644);
	for (int i = 0; i < 300; i++) {
		char tmp[64];
		snprintf(tmp, sizeof tmp, ".tmp-left%d.1.1", i);
		touch(tmp, 1000);
	}
	const char *small_q[] = {"--data-dir", dir, "--workers", "1", "--job-timeout", "1", "--quarantine-max-bytes",
				 "100000", NULL};
	double t0 = now_s();
	daemon_start(&d, small_q); /* exits the test if start-up blocks */
	check(1, "start-up with a FIFO named fifo.table did not block (%.2f s)", now_s() - t0);
	struct stat sb;
	check(lstat(path, &sb) == 0 && S_ISFIFO(sb.st_mode), "the FIFO was left alone");
	double files = metric(d.port, "posenc_store_quarantine_files"),
	       bytes = metric(d.port, "posenc_store_quarantine_bytes"),
	       dropped = metric(d.port, "posenc_store_quarantine_dropped_total");
	int on_disk = count_dir("quarantine");
	check(files == 100 && bytes == 100000 && on_disk == 100 && dropped == 200,
	      "300 leftovers, quarantine_max_bytes 100000: 100 files kept, 200 dropped (metrics %.0f files, %.0f bytes, "
	      "%.0f dropped; %d on disk)", files, bytes, dropped, on_disk);
	held_writes(&d, gate);
	check(daemon_stop(&d, SIGTERM, 30) == 0, "exit status 0 after SIGTERM");
	unlink(path);
	snprintf(path, sizeof path, "rm -rf '%s'", dir);
	if (system(path) != 0)
		note("could not remove %s", dir);
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
