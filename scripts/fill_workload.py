#!/usr/bin/env python3
"""A kernel-capture workload that fills a filesystem's remaining free space with buffered
writes (run by `../shared/kernel-lab/case_workloads.py run`; root, not CI).

usage: fill_workload.py ROOT [STOP_PERCENT] [SEED]

Files of 16 KiB..48 MiB (log-uniform) written in 1 MiB writes and fsynced by the writer, with
small fsynced appends to a few files between them, until the free space falls under
STOP_PERCENT (default 3) of the filesystem; every 25 files three of the workload's earlier files
are unlinked and the journal committed (`sync`, with nothing dirty), so their space comes back.
As the large free extents are used up, the normalised requests (up to 8 MiB) no longer fit the
groups' average fragment sizes: the optimised scan falls through CR_GOAL_LEN_FAST to
CR_BEST_AVAIL_LEN (the goal trimmed) and CR_GOAL_LEN_SLOW.
"""
import math
import os
import random
import sys

KIB = 1024
MIB = 1024 * KIB


def write_fsync(path, size, mode="wb"):
    buf = b"f" * MIB
    with open(path, mode) as f:
        left = size
        while left > 0:
            n = min(left, MIB)
            f.write(buf[:n])
            left -= n
        f.flush()
        os.fsync(f.fileno())


def free_bytes(root):
    st = os.statvfs(root)
    return st.f_bfree * st.f_frsize, st.f_blocks * st.f_frsize


def main():
    root = sys.argv[1]
    stop = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 13)
    os.mkdir(os.path.join(root, "fill"))
    written = []
    i = 0
    while True:
        free, total = free_bytes(root)
        if free < total * stop / 100:
            break
        size = int(math.exp(rng.uniform(math.log(16 * KIB), math.log(48 * MIB))))
        size = min(size, max(free - int(total * stop / 100), 4 * KIB))
        path = os.path.join(root, "fill", "w%04d" % i)
        write_fsync(path, size)
        written.append(path)
        if i % 4 == 3:
            for k in range(3):
                write_fsync(os.path.join(root, "fill", "app%d" % k),
                            rng.choice([4, 12, 60, 200]) * KIB, mode="ab")
        if i % 25 == 24:
            for path in rng.sample(written, 3):
                os.unlink(path)
                written.remove(path)
            os.sync()
        i += 1


if __name__ == "__main__":
    main()
