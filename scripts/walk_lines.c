/* What a prefetch walk pays a group when several cores walk the same groups' words at once:
 * the case `line_reads.c` leaves out (there one core writes the lines, then another visits
 * them; here the lines move back and forth while the walks run). This is seed 003's case:
 * linux-6.18's `ext4_mb_prefetch` sets each group's "bitmap read" bit with
 * `test_and_set_bit` (a locked read-modify-write, so the line comes over exclusive) even
 * when the bit is long set; seed 003 tests the bit first, so a set bit leaves the line
 * shared (docs/vcpus/seed-003.md).
 *
 * N threads, pinned to CPUs 0..N-1, walk one shuffled cycle of LINES lines (128 bytes apart,
 * one word each, as each group's `ext4_group_info` holds its own `bb_state`). Spread: thread
 * `me` starts `me * LINES / N` steps along it, as tasks whose scans start at different
 * groups, so a line has long settled in the cache of the thread ahead when the next one comes.
 * Together: every thread starts at the first line, so they walk close behind one another and
 * meet lines still in flight.
 * Each step does, by mode:
 *
 *   private: a locked OR on the thread's own copy of the lines (nothing shared: what a step
 *            costs when no line moves, under the same number of busy cores);
 *   read:    a plain load of the shared line;
 *   rmw:     a locked OR on the shared line (linux-6.18's walk on a set bit);
 *   test:    a load, and the locked OR only when the bit is clear (seed 003's walk; after a
 *            thread's first lap every bit is set, so it is the load alone).
 *
 * then PAD steps of a dependent multiply (the rest of a kernel walk step's work, so the
 * misses do not come back to back). Every figure is a thread's time over its steps, as ns a
 * step; a line prints the median and the largest over the threads, and all threads' steps
 * a second together.
 *
 *   gcc -O2 -pthread -o walk_lines scripts/walk_lines.c
 *   ./walk_lines MAX_THREADS [LINES=6417] [SECONDS=0.3] [PAD=0]
 *
 * 6,417 is the group count of seed 003's 802 GiB filesystem.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pinned.h"

#define MAX_THREADS 128
#define BATCH 256

enum mode { PRIVATE, READ, RMW, TEST, MODES };
static const char *mode_name[MODES] = {"private", "read", "rmw", "test"};

struct line {
	_Alignas(128) volatile long word;
};

struct walker {
	pthread_t thread;
	int me, n, pad, together;
	enum mode mode;
	struct line *lines;
	long steps;
	double seconds;
	unsigned long sink;
};

static int nlines;
static int *order;
static struct line *shared;
static volatile int go, stop;
static unsigned long sink;

static void *walk(void *p)
{
	struct walker *w = p;
	pin(w->me);
	int i = w->together ? 0 : (int)((long)w->me * nlines / w->n);
	unsigned long sum = 0, x = (unsigned long)w->me + 1;
	long steps = 0;
	while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE))
		;
	double t0 = now();
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		for (int k = 0; k < BATCH; k++) {
			volatile long *word = &w->lines[order[i]].word;
			switch (w->mode) {
			case READ:
				sum += *word;
				break;
			case TEST:
				if (*word & 1) {
					sum++;
					break;
				}
				__attribute__((fallthrough)); /* the bit is clear */
			case PRIVATE:
			case RMW:
				sum += __atomic_fetch_or(word, 1, __ATOMIC_ACQ_REL);
				break;
			default:
				break;
			}
			for (int j = 0; j < w->pad; j++)
				x = x * 6364136223846793005UL + 1442695040888963407UL;
			if (++i == nlines)
				i = 0;
		}
		steps += BATCH;
	}
	w->seconds = now() - t0;
	w->steps = steps;
	w->sink = sum + x;
	return 0;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static struct line *new_lines(void)
{
	struct line *l = aligned_alloc(128, sizeof(struct line) * nlines);
	if (!l) {
		perror("aligned_alloc");
		exit(1);
	}
	memset((void *)l, 0, sizeof(struct line) * nlines);
	return l;
}

static void run(enum mode mode, int n, int pad, int together, double seconds)
{
	static struct walker w[MAX_THREADS];
	go = 0;
	stop = 0;
	for (int t = 0; t < n; t++) {
		w[t] = (struct walker){.me = t, .n = n, .pad = pad, .together = together,
				    .mode = mode};
		w[t].lines = mode == PRIVATE ? new_lines() : shared;
		pthread_create(&w[t].thread, 0, walk, &w[t]);
	}
	usleep(20000);
	__atomic_store_n(&go, 1, __ATOMIC_RELEASE);
	usleep((useconds_t)(seconds * 1e6));
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	double ns[MAX_THREADS], total = 0;
	for (int t = 0; t < n; t++) {
		pthread_join(w[t].thread, 0);
		ns[t] = w[t].seconds / (double)w[t].steps * 1e9;
		total += (double)w[t].steps / w[t].seconds;
		sink += w[t].sink;
		if (mode == PRIVATE)
			free(w[t].lines);
	}
	qsort(ns, n, sizeof(double), by_value);
	printf("mode %s start %s pad %d threads %d ns_median %.2f ns_max %.2f msteps_per_s %.1f "
	       "lines %d\n",
	       mode_name[mode], together ? "together" : "spread", pad, n, ns[n / 2], ns[n - 1],
	       total / 1e6, nlines);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s MAX_THREADS [LINES] [SECONDS] [PAD]\n", argv[0]);
		return 2;
	}
	int max = atoi(argv[1]);
	nlines = argc > 2 ? atoi(argv[2]) : 6417;
	double seconds = argc > 3 ? atof(argv[3]) : 0.3;
	int pad = argc > 4 ? atoi(argv[4]) : 0;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	if (max < 1 || max > MAX_THREADS || max > cpus || nlines < 2 || seconds <= 0 || pad < 0) {
		fprintf(stderr, "bad arguments (MAX_THREADS 1..min(%d, %ld CPUs), LINES >= 2)\n",
			MAX_THREADS, cpus);
		return 2;
	}
	order = malloc(sizeof(int) * nlines);
	shared = new_lines();
	srand(1);
	for (int i = 0; i < nlines; i++)
		order[i] = i;
	for (int i = nlines - 1; i > 0; i--) {
		int j = rand() % (i + 1), t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	int counts[16], k = 0;
	for (int n = 1; n < max; n *= 2)
		counts[k++] = n;
	if (max > 12 && counts[k - 1] < 12)
		counts[k++] = 12;
	counts[k++] = max;
	for (enum mode m = 0; m < MODES; m++)
		for (int together = 0; together < (m == PRIVATE ? 1 : 2); together++) {
			/* every bit clear first: `test` then finds them as a fresh mount does */
			memset((void *)shared, 0, sizeof(struct line) * nlines);
			for (int c = 0; c < k; c++)
				run(m, counts[c], pad, together, seconds);
		}
	return sink == 42 ? 1 : 0;
}
