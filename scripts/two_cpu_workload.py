#!/usr/bin/env python3
"""A kernel-capture workload that writes from both CPUs of a 2-CPU machine in turn (run by
`../shared/kernel-lab/case_workloads.py run` with `"cpu": "none"`; root, not CI).

usage: two_cpu_workload.py ROOT [SEED]

One process moves itself between CPU 0 and CPU 1 (`sched_setaffinity`) before each file, so
small files land in the locality-group preallocation of the CPU that wrote them (one per CPU,
`ext4_mb_group_or_file`), and medium files' inode preallocations are made from either CPU.
Every write is fsynced by the writer, so the allocating CPU is the one the process is on.
"""
import os
import random
import sys

KIB = 1024


def write_fsync(path, size, chunk):
    with open(path, "wb") as f:
        left = size
        while left > 0:
            n = min(chunk, left)
            f.write(b"c" * n)
            left -= n
        f.flush()
        os.fsync(f.fileno())


def main():
    root = sys.argv[1]
    rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 5)
    for i in range(160):
        os.sched_setaffinity(0, {i % 2})
        if rng.random() < 0.8:
            size = rng.randint(1, 15) * 4 * KIB  # under mb_stream_req: the CPU's group PA
        else:
            size = rng.randint(16, 2048) * 4 * KIB  # an inode PA
        write_fsync(os.path.join(root, "f%03d" % i), size, rng.choice([4, 64, 256]) * KIB)
        if i % 20 == 19:
            # Free some of each CPU's files, so later ones reuse the space.
            for j in range(i - 19, i, 3):
                os.unlink(os.path.join(root, "f%03d" % j))
            os.sync()


if __name__ == "__main__":
    main()
