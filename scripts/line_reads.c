/* What a core pays for many cache lines another core wrote last, when it does not wait for one
 * before asking for the next: the overlap the `--vcpus` simulator's one cost per line leaves
 * out (docs/vcpus/seed-003.md, "Against the 16-core kernel"). `line_transfer.c` measures one line at a
 * time (ping-pong: each transfer waits for the last); a group walk reads many groups' counters
 * whose addresses do not depend on each other.
 *
 * Two threads pinned to CPU_A (the writer) and CPU_B (the reader). Each round the writer
 * stores to every one of LINES lines (each 128 bytes from the next, visited in a shuffled
 * order so that no prefetcher guesses the next), then the reader visits them all, in one of
 * four ways:
 *
 *   chase:  each line holds the index of the next: a load waits for the one before (the
 *           transfer latency, as `line_transfer.c` measures it);
 *   read:   plain loads of a shuffled index list, summed: independent misses, as many in
 *           flight as the core allows;
 *   rmw:    a locked OR on each (`test_and_set_bit` as ext4's prefetch walk does it before
 *           seed 003's patch);
 *   test:   a load, and the locked OR only when the bit is clear (the patch's
 *           `test_bit` before `test_and_set_bit`; the writer clears the bit each round, so
 *           every line is set: the load's cost and the RMW's).
 *
 * Each figure is ns per line, the fastest of ROUNDS rounds (a stalled round measures the
 * host's scheduler).
 *
 *   gcc -O2 -pthread -o line_reads scripts/line_reads.c && ./line_reads [CPU_A CPU_B]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "pinned.h"

#define LINES 2048
#define ROUNDS 200

struct line {
	_Alignas(128) volatile long word;
	volatile long next;
};

static struct line lines[LINES];
static int order[LINES];
static int cpus[2] = {0, 1};
static _Alignas(64) volatile long phase; /* even: the writer's turn; odd: the reader's */
static int mode;
static double best;
static long sink;

static void *writer(void *arg)
{
	(void)arg;
	pin(cpus[0]);
	for (long r = 0; r < ROUNDS; r++) {
		while (__atomic_load_n(&phase, __ATOMIC_ACQUIRE) != 2 * r)
			;
		for (int i = 0; i < LINES; i++)
			lines[order[i]].word = 0; /* the bit clear, the line dirty here */
		__atomic_store_n(&phase, 2 * r + 1, __ATOMIC_RELEASE);
	}
	return 0;
}

static double pass(void)
{
	long sum = 0;
	double t0 = now();
	switch (mode) {
	case 0: { /* chase */
		long p = order[0];
		for (int i = 0; i < LINES; i++)
			p = lines[p].next;
		sum = p;
		break;
	}
	case 1: /* read */
		for (int i = 0; i < LINES; i++)
			sum += lines[order[i]].word;
		break;
	case 2: /* rmw */
		for (int i = 0; i < LINES; i++)
			sum += __atomic_fetch_or(&lines[order[i]].word, 1, __ATOMIC_ACQ_REL);
		break;
	default: /* test, then rmw when clear */
		for (int i = 0; i < LINES; i++) {
			volatile long *w = &lines[order[i]].word;
			if (!(*w & 1))
				sum += __atomic_fetch_or(w, 1, __ATOMIC_ACQ_REL);
		}
	}
	double t = now() - t0;
	sink += sum;
	return t;
}

static void *reader(void *arg)
{
	(void)arg;
	pin(cpus[1]);
	for (long r = 0; r < ROUNDS; r++) {
		while (__atomic_load_n(&phase, __ATOMIC_ACQUIRE) != 2 * r + 1)
			;
		double t = pass();
		if (t < best)
			best = t;
		__atomic_store_n(&phase, 2 * r + 2, __ATOMIC_RELEASE);
	}
	return 0;
}

static double measure(int m)
{
	pthread_t a, b;
	mode = m;
	best = 1e9;
	phase = 0;
	pthread_create(&a, 0, writer, 0);
	pthread_create(&b, 0, reader, 0);
	pthread_join(a, 0);
	pthread_join(b, 0);
	return best / LINES * 1e9;
}

int main(int argc, char **argv)
{
	if (argc == 3) {
		cpus[0] = atoi(argv[1]);
		cpus[1] = atoi(argv[2]);
	}
	srand(1);
	for (int i = 0; i < LINES; i++)
		order[i] = i;
	for (int i = LINES - 1; i > 0; i--) {
		int j = rand() % (i + 1), t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	for (int i = 0; i < LINES; i++)
		lines[order[i]].next = order[(i + 1) % LINES];
	double chase = measure(0), read = measure(1), rmw = measure(2), test = measure(3);
	printf("cpus %d %d chase_ns %.1f read_ns %.1f rmw_ns %.1f test_then_rmw_ns %.1f lines %d\n", cpus[0], cpus[1],
	       chase, read, rmw, test, LINES);
	return sink == 42 ? 1 : 0;
}
