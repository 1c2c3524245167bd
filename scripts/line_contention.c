/* How the cost of one shared cache line grows with the CPUs that write it: N threads, pinned
 * to CPUs 0..N-1, each doing an atomic fetch-and-add on one shared word (and, second test,
 * taking and releasing one test-and-set spinlock around the add), for a fixed time. Prints
 * the line's throughput as ns per operation (all threads together) for each N. The
 * virtual-CPU simulator charges one measured two-CPU transfer per write whoever contends
 * (docs/vcpus/kernel-16-core.md); this shows what many writers cost on a given machine.
 *
 *   gcc -O2 -pthread -o line_contention scripts/line_contention.c && ./line_contention 16
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define SECONDS 0.5
static _Alignas(64) volatile long word;
static _Alignas(64) int lock;
static _Alignas(64) volatile int go, stop;
static _Alignas(64) long counts[256][8];
static int mode;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *worker(void *arg)
{
	long me = (long)arg, n = 0;
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET((int)me, &s);
	pthread_setaffinity_np(pthread_self(), sizeof(s), &s);
	while (!go)
		;
	while (!stop) {
		if (mode == 0) {
			__atomic_fetch_add(&word, 1, __ATOMIC_SEQ_CST);
		} else if (mode == 2) {
			unsigned long x = (unsigned long)n;
			for (int k = 0; k < 200; k++)
				x = x * 3 + 1;
			__asm__ volatile("" : : "r"(x));
			__atomic_fetch_add(&word, 1, __ATOMIC_SEQ_CST);
		} else {
			while (__atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE))
				while (__atomic_load_n(&lock, __ATOMIC_RELAXED))
					;
			word++;
			__atomic_store_n(&lock, 0, __ATOMIC_RELEASE);
		}
		n++;
	}
	counts[me][0] = n;
	return 0;
}

static double run(int n)
{
	pthread_t t[256];
	go = stop = 0;
	for (long i = 0; i < n; i++)
		pthread_create(&t[i], 0, worker, (void *)i);
	double t0 = now();
	go = 1;
	while (now() - t0 < SECONDS)
		;
	stop = 1;
	double dt = now() - t0;
	long total = 0;
	for (int i = 0; i < n; i++) {
		pthread_join(t[i], 0);
		total += counts[i][0];
	}
	return mode == 2 ? dt * n / total * 1e9 : dt / total * 1e9;
}

int main(int argc, char **argv)
{
	int max = argc > 1 ? atoi(argv[1]) : 2;
	static const char *names[] = {"fetch_add", "spinlock", "spaced_fetch_add"};
	for (mode = 0; mode < 3; mode++)
		for (int n = 1; n <= max; n *= 2) {
			double best = 1e9;
			for (int r = 0; r < 3; r++) {
				double x = run(n);
				if (x < best)
					best = x;
			}
			printf("%s threads %d ns_per_op %.1f\n", names[mode], n, best);
		}
	return 0;
}
