/* What the two-core microbenchmarks (line_transfer.c, line_reads.c) share: a monotonic clock
 * in seconds, and pinning the calling thread to one CPU. */
#ifndef PINNED_H
#define PINNED_H

#include <pthread.h>
#include <sched.h>
#include <time.h>

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static void pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	pthread_setaffinity_np(pthread_self(), sizeof(s), &s);
}

#endif
