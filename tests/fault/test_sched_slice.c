/* The scheduler slices posencd's threads ask for (daemon/slice.h): http_slice_us on every HTTP
 * thread once it has served a request, worker_slice_us on every worker, the kernel's default on
 * the rest; 0 leaves a thread at the kernel's default. Asserted on what sched_getattr reports for
 * each of the daemon's threads, never on time. On a kernel that keeps no slice for ordinary
 * threads (before Linux 6.12) the hints are ignored: the test then says so and checks only that
 * the daemon serves with them configured. */
#include "support/pe_fault.h"

#include <pthread.h>
#include <sys/syscall.h>

/* The kernel's struct sched_attr, first version (linux/sched/types.h clashes with <sched.h>). */
struct sched_attr {
	uint32_t size, sched_policy;
	uint64_t sched_flags;
	int32_t sched_nice;
	uint32_t sched_priority;
	uint64_t sched_runtime, sched_deadline, sched_period;
};

static unsigned slice_us(pid_t tid)
{
	struct sched_attr a;
	memset(&a, 0, sizeof a);
	if (syscall(SYS_sched_getattr, tid, &a, (unsigned)sizeof a, 0u) != 0)
		return 0;
	return (unsigned)(a.sched_runtime / 1000u);
}

/* Whether this kernel keeps a slice asked for by an ordinary thread: tried on a thread of ours. */
static void *probe_main(void *arg)
{
	struct sched_attr a;
	memset(&a, 0, sizeof a);
	int ok = syscall(SYS_sched_getattr, 0, &a, (unsigned)sizeof a, 0u) == 0;
	a.size = sizeof a;
	a.sched_runtime = 700000; /* 0.7 ms */
	ok = ok && syscall(SYS_sched_setattr, 0, &a, 0u) == 0 && slice_us(0) == 700;
	*(int *)arg = ok;
	return NULL;
}

static int kernel_keeps_slices(void)
{
	int ok = 0;
	pthread_t t;
	if (pthread_create(&t, NULL, probe_main, &ok) == 0)
		pthread_join(t, NULL);
	return ok;
}

/* How many of pid's threads ask for a slice of us microseconds; *total: how many threads. */
static int threads_at(pid_t pid, unsigned us, int *total)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	DIR *dir = opendir(path);
	int n = 0;
	*total = 0;
	struct dirent *e;
	while (dir && (e = readdir(dir)))
		if (e->d_name[0] != '.') {
			(*total)++;
			n += slice_us((pid_t)atoi(e->d_name)) == us;
		}
	if (dir)
		closedir(dir);
	return n;
}

/* A request on new connections until each of the daemon's epoll sets (one per HTTP thread) has
 * taken one, each answered: every HTTP thread has then served a request. The connections stay
 * open until then (keep-alive): a connection goes to a thread by its descriptor's number, and one
 * closed before the next is made would leave that number to it. */
static void serve_on_every_thread(const struct pe_spawn *d)
{
	struct epolls ep;
	epolls_read(d->pid, &ep);
	enum { TRIES = 200 };
	int on[FAULT_NEP] = {0}, threads = 0, tries = 0, fds[TRIES];
	while (threads < ep.n && tries < TRIES) {
		int fd, j = connect_to_thread(d->pid, d->port, &ep, &fd);
		if (j >= 0)
			threads += on[j]++ == 0;
		const char *req = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
		struct resp r = {0};
		check(fd >= 0 && send_all(fd, req, strlen(req)) == 0 && read_response(fd, &r, 5000, 4096) == 0 &&
			      r.status == 200,
		      "GET /healthz on connection %d: 200", tries + 1);
		resp_free(&r);
		fds[tries++] = fd;
	}
	for (int i = 0; i < tries; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	check(ep.n == 2 && threads == ep.n, "requests served on each of the %d HTTP threads (%d)", ep.n, threads);
}

/* Both HTTP threads at http_us and (once started) both workers at worker_us, the rest at dflt. */
static void check_slices(pid_t pid, unsigned http_us, unsigned worker_us, unsigned dflt, const char *how)
{
	int total = 0, http = threads_at(pid, http_us, &total), workers = 0;
	check(http == 2, "%s: both HTTP threads at %u µs (%d of %d threads)", how, http_us, http, total);
	for (int i = 0; i < 500 && (workers = threads_at(pid, worker_us, &total)) != 2; i++)
		sleep_s(0.01); /* workers set theirs as they start */
	check(workers == 2, "%s: both workers at %u µs (%d of %d threads)", how, worker_us, workers, total);
	int rest = threads_at(pid, dflt, &total);
	check(rest == total - 4, "%s: the other threads keep the kernel's %u µs (%d of %d)", how, dflt, rest, total);
}

static int scenario(void)
{
	fault_init("sched_slice", 60);
	int keeps = kernel_keeps_slices();
	if (!keeps)
		printf("%s: this kernel keeps no slice for ordinary threads (Linux < 6.12): only serving is checked\n",
		       fault_name);
	unsigned dflt = slice_us(0);
	struct pe_spawn d;
	const char *two[] = {"--http-threads", "2", "--workers", "2", NULL};
	daemon_start(&d, two);
	serve_on_every_thread(&d);
	if (keeps)
		check_slices(d.pid, 100, 100000, dflt, "defaults");
	check(daemon_stop(&d, SIGTERM, 30) == 0, "exits 0");

	const char *off[] = {"--http-threads", "2", "--workers", "2", "--http-slice-us", "0", "--worker-slice-us", "0",
			     NULL};
	daemon_start(&d, off);
	serve_on_every_thread(&d);
	if (keeps) {
		int total = 0, rest = threads_at(d.pid, dflt, &total);
		check(rest == total, "slices 0: every thread keeps the kernel's %u µs (%d of %d)", dflt, rest, total);
	}
	check(daemon_stop(&d, SIGTERM, 30) == 0, "exits 0");

	const char *odd[] = {"--http-threads", "2", "--workers", "2", "--http-slice-us", "2500", "--worker-slice-us", "7000", NULL};
	daemon_start(&d, odd);
	serve_on_every_thread(&d);
	if (keeps)
		check_slices(d.pid, 2500, 7000, dflt, "--http-slice-us 2500 --worker-slice-us 7000");
	check(daemon_stop(&d, SIGTERM, 30) == 0, "exits 0");
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
