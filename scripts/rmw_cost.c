/* Cost per group of the two ways to test a group's "bitmap read" mark: an atomic fetch_or
 * (linux-6.18's EXT4_MB_GRP_TEST_AND_SET_READ, and the lab's linux-6.18 prefetch walk) against
 * a plain load and bit test (seed 003's test first, for a mark set long ago). Marks are packed
 * 64 groups to a word, as in the lab. Results: docs/measurements/bitmap-read.md.
 *
 *   gcc -O2 -o /tmp/rmw_cost scripts/rmw_cost.c && /tmp/rmw_cost
 */
#include <stdint.h>
#include <stdio.h>
#include <time.h>

static uint64_t marks[16];

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(void)
{
	const long n = 200000000;
	volatile uint64_t sink = 0;
	for (int i = 0; i < 16; i++)
		marks[i] = ~0ull;
	double t0 = now();
	for (long i = 0; i < n; i++) {
		uint64_t b = 1ull << (i & 63);
		sink += (__atomic_fetch_or(&marks[(i >> 6) & 15], b, __ATOMIC_RELAXED) & b) != 0;
	}
	double t1 = now();
	for (long i = 0; i < n; i++) {
		uint64_t b = 1ull << (i & 63);
		sink += (__atomic_load_n(&marks[(i >> 6) & 15], __ATOMIC_RELAXED) & b) != 0;
	}
	double t2 = now();
	printf("fetch_or %.2f ns, load+test %.2f ns per group (sink %lu)\n",
	       (t1 - t0) / n * 1e9, (t2 - t1) / n * 1e9, (unsigned long)sink);
	return 0;
}
