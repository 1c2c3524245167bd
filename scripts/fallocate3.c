/*
 * fallocate3.c - will-it-scale's fallocate3 (open-s4c fork, tests/fallocate3.c) for N
 * processes: each loops open(O_WRONLY|O_CREAT|O_TRUNC) of its own file,
 * fallocate(FALLOC_FL_KEEP_SIZE, 0, 73819750), close. Counters in a shared mapping, one
 * line per process; after WARMUP seconds the operations of SECONDS more are counted.
 * Prints {"n":N,"ops_s":TOTAL}.
 *
 * usage: fallocate3 N WARMUP SECONDS DIR        build: gcc -O2 -o fallocate3 fallocate3.c
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/falloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FILESIZE 73819750L

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: %s N WARMUP SECONDS DIR\n", argv[0]);
		return 2;
	}
	int n = atoi(argv[1]);
	double warm = atof(argv[2]), secs = atof(argv[3]);
	const char *dir = argv[4];
	/* Its own process group: the children are stopped with one signal. */
	setpgid(0, 0);
	volatile unsigned long *c = mmap(0, 64 * 8 * (n + 1), PROT_READ | PROT_WRITE,
					 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (c == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	for (int i = 0; i < n; i++) {
		if (fork() == 0) {
			char p[4096];
			snprintf(p, sizeof p, "%s/willitscale.%d", dir, i);
			for (;;) {
				int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
				if (fd < 0 || fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, FILESIZE)) {
					perror(p);
					_exit(1);
				}
				close(fd);
				c[i * 8]++;
			}
		}
	}
	usleep(warm * 1e6);
	unsigned long a = 0, b = 0;
	for (int i = 0; i < n; i++)
		a += c[i * 8];
	double t0 = now();
	usleep(secs * 1e6);
	for (int i = 0; i < n; i++)
		b += c[i * 8];
	double t1 = now();
	printf("{\"n\":%d,\"ops_s\":%.1f}\n", n, (b - a) / (t1 - t0));
	fflush(stdout);
	signal(SIGTERM, SIG_IGN);
	kill(0, SIGTERM);
	while (wait(0) > 0)
		;
	return 0;
}
