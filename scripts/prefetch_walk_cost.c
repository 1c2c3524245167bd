/* What one group's step of ext4_mb_prefetch costs, linux-6.18's way against seed 003's, on
 * data laid out as the kernel lays it out: the lab prices the walk's steps with it
 * (docs/vcpus/seed-003.md, "The prefetch walk's steps at their own price").
 *
 * The kernel's walk, per group of a window (fs/ext4/mballoc.c, ext4_mb_prefetch):
 *   6.18:     gdp = ext4_get_group_desc(sb, g, NULL);   -- s_group_desc[g / 64]->b_data
 *             grp = ext4_get_group_info(sb, g);          -- s_group_info[g / 64][g % 64]
 *             if (gdp && grp && !test_and_set_bit(READ, &grp->bb_state) && ...)
 *   seed 003: grp = ext4_get_group_info(sb, g);
 *             if (test_bit(READ, &grp->bb_state)) continue;  ... then as above
 * Both lookups are out-of-line functions under rcu_read_lock (here: a per-thread nesting
 * count, as PREEMPT_RCU keeps in the task). The ext4_group_info objects come from one slab
 * cache, allocated at mount in group order: one object per `--stride` bytes (192: the
 * kmalloc size of a 4 KiB-block group info with its buddy order counters), contiguous.
 * Descriptors are 64 bytes, 64 to a 4 KiB block buffer.
 *
 * Every mark is set (bitmaps all read long ago), so neither walk reads a bitmap. A pass walks
 * every group in windows of `--window`, as the scans do; `--evict` MB are streamed between
 * passes (0: the objects stay in the caches from the last pass). Prints ns per group for
 * each walk, the median of `--reps` passes, interleaved.
 *
 * Most of a step's time in the kernel is not the memory access but the returns: this
 * machine's kernel sends every `ret` through the "Safe RET" thunk (spec_rstack_overflow), and
 * a 6.18 step returns six times (two lookups, each with rcu_read_lock and _unlock), a seed
 * 003 step three. Built with that thunk (scripts/srso_return_thunk.S) the program returns as
 * the kernel does; built without it, as plain user code.
 *
 *   gcc -O2 -mfunction-return=thunk-extern -o /tmp/prefetch_walk_cost \
 *       scripts/prefetch_walk_cost.c scripts/srso_return_thunk.S
 *   gcc -O2 -o /tmp/prefetch_walk_cost_plain scripts/prefetch_walk_cost.c
 *   /tmp/prefetch_walk_cost [groups 6417] [window 16] [evict_mb 0] [reps 201] [stride 192]
 *       [walkers 0]
 *
 * With `walkers` W > 0: the walks run on 1, 2, 4, 8, 12, 16 ... up to W threads at once
 * (thread t pinned to CPU t), all on the same groups, thread t starting t / n of the way
 * round, as the tasks of a many-task fallocate3 scan from different groups: each side for
 * `reps` ms, then ns per group, the median and the largest over the threads. That is seed
 * 003's case on this machine's cores: 6.18's walk takes every group's line exclusive, so
 * with two or more walkers each line comes from the walker before; seed 003's leaves them
 * shared. Nothing else is shared (no bitmap, no lock), so the figures are the walk's alone.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pinned.h"

#define READ_BIT 4
#define PER_BLOCK 64

struct group_info {
	unsigned long bb_state;
	char rest[];
};

struct buffer_head {
	char *b_data;
	char pad[96];
};

static struct group_info ***s_group_info;
static struct buffer_head **s_group_desc;
static unsigned groups;
static __thread volatile int rcu_nesting;

__attribute__((noinline)) static void rcu_lock(void) { rcu_nesting++; }
__attribute__((noinline)) static void rcu_unlock(void) { rcu_nesting--; }

__attribute__((noinline)) static void *get_group_desc(unsigned g)
{
	if (g >= groups)
		return NULL;
	rcu_lock();
	struct buffer_head *bh = s_group_desc[g / PER_BLOCK];
	rcu_unlock();
	return bh->b_data + (g % PER_BLOCK) * 64;
}

__attribute__((noinline)) static struct group_info *get_group_info(unsigned g)
{
	if (g >= groups)
		return NULL;
	rcu_lock();
	struct group_info **row = s_group_info[g / PER_BLOCK];
	rcu_unlock();
	return row[g % PER_BLOCK];
}

static unsigned long hits;

__attribute__((noinline)) static unsigned walk_618(unsigned g, unsigned nr)
{
	while (nr-- > 0) {
		void *gdp = get_group_desc(g);
		struct group_info *grp = get_group_info(g);
		if (gdp && grp && !__atomic_fetch_or(&grp->bb_state, 1ul << READ_BIT, __ATOMIC_SEQ_CST) &&
		    *(volatile uint16_t *)gdp)
			hits++;
		if (++g >= groups)
			g = 0;
	}
	return g;
}

__attribute__((noinline)) static unsigned walk_seed003(unsigned g, unsigned nr)
{
	while (nr-- > 0) {
		struct group_info *grp = get_group_info(g);
		if (grp && !(__atomic_load_n(&grp->bb_state, __ATOMIC_ACQUIRE) & (1ul << READ_BIT)) &&
		    !__atomic_fetch_or(&grp->bb_state, 1ul << READ_BIT, __ATOMIC_SEQ_CST)) {
			void *gdp = get_group_desc(g);
			if (gdp && *(volatile uint16_t *)gdp)
				hits++;
		}
		if (++g >= groups)
			g = 0;
	}
	return g;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

#define MAX_WALKERS 128

struct walker {
	pthread_t thread;
	int cpu, n, side;
	unsigned window;
	long groups_walked;
	double seconds;
};

static volatile int go, stop;

static void *walker(void *p)
{
	struct walker *w = p;
	pin(w->cpu);
	unsigned g = (unsigned)((unsigned long)w->cpu * groups / w->n);
	long walked = 0;
	while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE))
		;
	double t0 = now();
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		g = w->side ? walk_seed003(g, w->window) : walk_618(g, w->window);
		walked += w->window;
	}
	w->seconds = now() - t0;
	w->groups_walked = walked;
	return 0;
}

/* `n` walkers on one side for `ms` milliseconds; prints their median and largest ns a group. */
static void walk_together(int n, int side, unsigned window, int ms, double *median, double *max)
{
	static struct walker w[MAX_WALKERS];
	double ns[MAX_WALKERS];
	go = 0;
	stop = 0;
	for (int t = 0; t < n; t++) {
		w[t] = (struct walker){.cpu = t, .n = n, .side = side, .window = window};
		pthread_create(&w[t].thread, 0, walker, &w[t]);
	}
	usleep(20000);
	__atomic_store_n(&go, 1, __ATOMIC_RELEASE);
	usleep(ms * 1000);
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int t = 0; t < n; t++) {
		pthread_join(w[t].thread, 0);
		ns[t] = w[t].seconds * 1e9 / (double)w[t].groups_walked;
	}
	qsort(ns, n, sizeof(double), cmp);
	*median = ns[n / 2];
	*max = ns[n - 1];
}

static void walkers(int max, unsigned window, int ms)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	if (max > cpus)
		max = (int)cpus;
	if (max > MAX_WALKERS)
		max = MAX_WALKERS;
	int counts[MAX_WALKERS], k = 0;
	for (int n = 1; n < max; n = n < 8 ? n * 2 : n + 4)
		counts[k++] = n;
	counts[k++] = max;
	for (int c = 0; c < k; c++) {
		double m618, x618, m003, x003;
		walk_together(counts[c], 0, window, ms, &m618, &x618);
		walk_together(counts[c], 1, window, ms, &m003, &x003);
		printf("walkers %d groups %u window %u: 6.18 %.2f ns (max %.2f), seed 003 %.2f ns "
		       "(max %.2f) per group\n",
		       counts[c], groups, window, m618, x618, m003, x003);
		fflush(stdout);
	}
}

int main(int argc, char **argv)
{
	groups = argc > 1 ? atoi(argv[1]) : 6417;
	unsigned window = argc > 2 ? atoi(argv[2]) : 16;
	size_t evict = (size_t)(argc > 3 ? atoi(argv[3]) : 0) << 20;
	int reps = argc > 4 ? atoi(argv[4]) : 201;
	size_t stride = argc > 5 ? atoi(argv[5]) : 192;
	unsigned blocks = (groups + PER_BLOCK - 1) / PER_BLOCK;

	char *slab = aligned_alloc(4096, (groups * stride + 4095) / 4096 * 4096);
	memset(slab, 0, groups * stride);
	s_group_info = calloc(blocks, sizeof(*s_group_info));
	s_group_desc = calloc(blocks, sizeof(*s_group_desc));
	for (unsigned b = 0; b < blocks; b++) {
		s_group_info[b] = calloc(PER_BLOCK, sizeof(**s_group_info));
		s_group_desc[b] = calloc(1, sizeof(struct buffer_head));
		s_group_desc[b]->b_data = aligned_alloc(4096, 4096);
		memset(s_group_desc[b]->b_data, 1, 4096);
	}
	for (unsigned g = 0; g < groups; g++) {
		struct group_info *grp = (struct group_info *)(slab + g * stride);
		grp->bb_state = 1ul << READ_BIT; /* read long ago */
		s_group_info[g / PER_BLOCK][g % PER_BLOCK] = grp;
	}
	if (argc > 6 && atoi(argv[6]) > 0) {
		walkers(atoi(argv[6]), window, reps);
		return 0;
	}
	char *junk = evict ? malloc(evict) : NULL;
	if (junk)
		memset(junk, 1, evict);

	double *t618 = calloc(reps, sizeof(double)), *t003 = calloc(reps, sizeof(double));
	volatile unsigned long sink = 0;
	for (int r = 0; r < reps; r++) {
		for (int side = 0; side < 2; side++) {
			if (junk)
				for (size_t i = 0; i < evict; i += 64)
					sink += junk[i]++;
			double t0 = now();
			unsigned g = 0;
			for (unsigned done = 0; done < groups; done += window)
				g = side ? walk_seed003(g, window) : walk_618(g, window);
			double ns = (now() - t0) * 1e9 / groups;
			(side ? t003 : t618)[r] = ns;
		}
	}
	qsort(t618, reps, sizeof(double), cmp);
	qsort(t003, reps, sizeof(double), cmp);
	printf("groups %u window %u evict %zu MB stride %zu: 6.18 %.2f ns, seed 003 %.2f ns per "
	       "group (medians of %d passes; hits %lu, sink %lu)\n",
	       groups, window, evict >> 20, stride, t618[reps / 2], t003[reps / 2], reps, hits,
	       (unsigned long)sink);
	return 0;
}
