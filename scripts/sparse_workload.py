#!/usr/bin/env python3
"""A kernel-capture workload of sparse files (run by `../shared/kernel-lab/case_workloads.py
run`; root, not CI).

usage: sparse_workload.py ROOT [SEED]

Files written at random offsets, so that most requests have a mapped neighbour on the left,
on the right or on both sides (`ext4_mb_normalize_request` trims the window to the hole
between them, `ext4_mb_pa_adjust_overlap` to the file's other preallocations); holes punched
into written ranges (frees inside a file); and a file filled from its end backwards.

No O_DIRECT: its writes raise i_size without an event the capture parser tracks, so the
recorded i_size of their requests would be wrong (the capture's final-size check flags it).
"""
import os
import random
import sys

KIB = 1024
MIB = 1024 * KIB
FALLOC_FL_KEEP_SIZE = 1
FALLOC_FL_PUNCH_HOLE = 2


def punch(fd, off, length):
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong]
    if libc.fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, length) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def main():
    root = sys.argv[1]
    rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 7)
    # Buffered sparse writes, fsynced in batches.
    for i in range(6):
        fd = os.open(os.path.join(root, "sparse%d" % i), os.O_CREAT | os.O_RDWR, 0o644)
        span = rng.choice([8, 32, 64]) * MIB
        for j in range(40):
            off = rng.randrange(0, span // (64 * KIB)) * 64 * KIB
            os.pwrite(fd, b"s" * rng.choice([4 * KIB, 16 * KIB, 64 * KIB, 256 * KIB]), off)
            if j % 4 == 3:
                os.fsync(fd)
        os.fsync(fd)
        # Punch holes into what was written, then write into some of them again.
        for _ in range(6):
            off = rng.randrange(0, span // (64 * KIB)) * 64 * KIB
            punch(fd, off, rng.choice([16, 64, 128]) * KIB)
        os.fsync(fd)
        for _ in range(6):
            off = rng.randrange(0, span // (64 * KIB)) * 64 * KIB
            os.pwrite(fd, b"r" * 32 * KIB, off)
        os.fsync(fd)
        os.close(fd)
    # A file filled from its end backwards: every request has a right neighbour.
    fd = os.open(os.path.join(root, "backwards"), os.O_CREAT | os.O_RDWR, 0o644)
    for k in reversed(range(48)):
        os.pwrite(fd, b"b" * 64 * KIB, k * 64 * KIB)
        os.fsync(fd)
    os.close(fd)


if __name__ == "__main__":
    main()
