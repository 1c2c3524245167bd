/* Cost of moving a cache line between two cores, and of handing a spinlock from one core to
 * the other, on this machine: the `--vcpus` simulator's transfer and hand-off costs
 * (docs/vcpus/design.md, "Costs"). Two threads pinned to CPUs 0 and 1.
 *
 *   ping-pong: each thread waits for the shared word to hold its turn, then writes the other's
 *              turn: one round trip is two line transfers.
 *   hand-off:  each thread takes a test-and-set spinlock, bumps a shared count, lets go, and
 *              spins until the other has had its turn: each acquisition follows the other core's
 *              release.
 *   local:     one thread alone does the hand-off loop's lock, bump and unlock (no transfer).
 *
 * Each figure is the fastest of 50 batches' means: on a VM shared with other work a spinning
 * thread is sometimes descheduled, and a batch with such a stall measures the host's
 * scheduler, not the line.
 *
 *   gcc -O2 -pthread -o line_transfer scripts/line_transfer.c && ./line_transfer [CPU_A CPU_B]
 *
 * CPU_A and CPU_B (default 0 and 1) choose the two cores, so that on a larger machine the
 * nearest and the farthest pairs can both be measured.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "pinned.h"

#define N 20000L
#define BATCHES 50
static _Alignas(64) volatile long turn;
static _Alignas(64) int lock;
static _Alignas(64) volatile long count;
static int cpus[2] = {0, 1};

static void *pong(void *arg)
{
	long me = (long)arg;
	pin(cpus[me]);
	for (long i = 0; i < N; i++) {
		while (__atomic_load_n(&turn, __ATOMIC_ACQUIRE) != me)
			;
		__atomic_store_n(&turn, 1 - me, __ATOMIC_RELEASE);
	}
	return 0;
}

static void *handoff(void *arg)
{
	long me = (long)arg;
	pin(cpus[me]);
	for (long i = 0; i < N; i++) {
		while (__atomic_load_n(&count, __ATOMIC_ACQUIRE) % 2 != me)
			;
		while (__atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE))
			;
		count++;
		__atomic_store_n(&lock, 0, __ATOMIC_RELEASE);
	}
	return 0;
}

static double run(void *(*f)(void *))
{
	pthread_t a, b;
	double t0 = now();
	pthread_create(&a, 0, f, (void *)0L);
	pthread_create(&b, 0, f, (void *)1L);
	pthread_join(a, 0);
	pthread_join(b, 0);
	return now() - t0;
}

static double local(void *(*f)(void *))
{
	(void)f;
	double t0 = now();
	for (long i = 0; i < 2 * N; i++) {
		while (__atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE))
			;
		count++;
		__atomic_store_n(&lock, 0, __ATOMIC_RELEASE);
	}
	return now() - t0;
}

static double fastest(double (*m)(void *(*)(void *)), void *(*f)(void *))
{
	double best = 1e9;
	for (int b = 0; b < BATCHES; b++) {
		turn = 0;
		count = 0;
		double t = m(f);
		if (t < best)
			best = t;
	}
	return best;
}

int main(int argc, char **argv)
{
	if (argc == 3) {
		cpus[0] = atoi(argv[1]);
		cpus[1] = atoi(argv[2]);
	}
	double pp = fastest(run, pong);
	double ho = fastest(run, handoff);
	double lo = fastest(local, 0);
	printf("cpus %d %d transfer_ns %.1f handoff_ns %.1f local_lock_ns %.1f\n", cpus[0], cpus[1], pp / (2.0 * N) * 1e9,
	       ho / (2.0 * N) * 1e9, lo / (2.0 * N) * 1e9);
	return 0;
}
