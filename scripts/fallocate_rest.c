/* The rest of a fallocate2 call, without the allocation: what N processes share in the part
 * of ext4's fallocate path that is not mballoc (docs/vcpus/not-done.md: the model holds it
 * fixed but for a few lines).
 *
 * Each worker, pinned to CPU i, makes a private file in DIR and unlinks it (as will-it-scale),
 * then loops one of two ways:
 *
 *   full: will-it-scale fallocate2: fallocate(fd, 0, place, 8 KiB), place += 8 KiB, and at
 *         1 MiB ftruncate(fd, 0): every call allocates (the figure the model is held to);
 *   rest: one fallocate of the whole 1 MiB first, then fallocate(fd, 0, place, 8 KiB) with
 *         place cycling inside it: the same system call, inode lock, journal handle and
 *         inode update (ctime, `ext4_mark_inode_dirty`), but the blocks are mapped already,
 *         so mballoc is never called and no extent changes.
 *
 * With `apart`, worker i makes its file in a directory of its own, DIR/w<i>: ext4 spreads
 * top-level directories over the groups (Orlov), so the files' inodes land in different
 * inode table blocks and no two workers share one (without it, as will-it-scale, the files
 * are made one after another in DIR and take consecutive inodes, 16 to a block).
 *
 * After WARM seconds the workers' counters are read, again after SECONDS; one line:
 * mode, workers, total calls a second, per worker (the mean) and the slowest worker.
 *
 *   gcc -O2 -Wall -o fallocate_rest scripts/fallocate_rest.c
 *   ./fallocate_rest DIR full|rest WORKERS [SECONDS=2] [WARM=1] [apart]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_WORKERS 256
#define CHUNK 8192L
#define FILE_SIZE (1L << 20)

struct slot {
	_Alignas(64) volatile unsigned long long ops;
	volatile int err;
};

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static void pause_s(double s)
{
	struct timespec t = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (time_t)s) * 1e9)};
	while (nanosleep(&t, &t) == -1 && errno == EINTR)
		;
}

static void fail(struct slot *sl, int code)
{
	sl->err = errno;
	_exit(code);
}

static void worker(struct slot *sl, const char *dir, int rest, int apart, int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
	char path[4096];
	if (apart) {
		snprintf(path, sizeof(path), "%s/w%d", dir, cpu);
		if (mkdir(path, 0755) != 0 && errno != EEXIST)
			fail(sl, 5);
		snprintf(path, sizeof(path), "%s/w%d/rest.XXXXXX", dir, cpu);
	} else {
		snprintf(path, sizeof(path), "%s/rest.XXXXXX", dir);
	}
	int fd = mkstemp(path);
	if (fd < 0)
		fail(sl, 1);
	unlink(path);
	if (rest && fallocate(fd, 0, 0, FILE_SIZE) != 0)
		fail(sl, 2);
	long place = 0;
	for (;;) {
		if (fallocate(fd, 0, place, CHUNK) != 0 && errno != EINTR)
			fail(sl, 3);
		place += CHUNK;
		if (place >= FILE_SIZE) {
			if (!rest && ftruncate(fd, 0) != 0)
				fail(sl, 4);
			place = 0;
		}
		sl->ops++;
	}
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: %s DIR full|rest WORKERS [SECONDS] [WARM] [apart]\n", argv[0]);
		return 2;
	}
	const char *dir = argv[1];
	int rest = strcmp(argv[2], "rest") == 0;
	int n = atoi(argv[3]);
	double seconds = argc > 4 ? atof(argv[4]) : 2, warm = argc > 5 ? atof(argv[5]) : 1;
	int apart = argc > 6 && strcmp(argv[6], "apart") == 0;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	if ((!rest && strcmp(argv[2], "full") != 0) || n < 1 || n > MAX_WORKERS || seconds <= 0 ||
	    warm < 0) {
		fprintf(stderr, "bad arguments\n");
		return 2;
	}
	struct slot *sl = mmap(NULL, sizeof(struct slot) * n, PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sl == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	pid_t pids[MAX_WORKERS];
	for (int i = 0; i < n; i++) {
		pids[i] = fork();
		if (pids[i] < 0) {
			perror("fork");
			for (int j = 0; j < i; j++)
				kill(pids[j], SIGKILL);
			return 1;
		}
		if (pids[i] == 0)
			worker(&sl[i], dir, rest, apart, (int)(i % cpus));
	}
	pause_s(warm);
	unsigned long long before[MAX_WORKERS];
	for (int i = 0; i < n; i++)
		before[i] = sl[i].ops;
	double t0 = now();
	pause_s(seconds);
	double total = 0, slowest = 1e300, el = now() - t0;
	for (int i = 0; i < n; i++) {
		double r = (double)(sl[i].ops - before[i]) / el;
		total += r;
		if (r < slowest)
			slowest = r;
	}
	int failed = 0;
	for (int i = 0; i < n; i++) {
		kill(pids[i], SIGKILL);
		waitpid(pids[i], NULL, 0);
		failed |= sl[i].err;
	}
	printf("mode %s%s workers %d total_ops_s %.0f per_worker_ops_s %.0f slowest_ops_s %.0f "
	       "err %d\n",
	       rest ? "rest" : "full", apart ? " apart" : "", n, total, total / n, slowest, failed);
	return failed ? 1 : 0;
}
