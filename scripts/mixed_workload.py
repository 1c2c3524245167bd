#!/usr/bin/env python3
"""A kernel-capture workload mixing buffered writes and fallocates (run by
`../shared/kernel-lab/case_workloads.py run`; root, not CI).

usage: mixed_workload.py ROOT [NOPS] [SEED]

NOPS operations (default 1000) over six top-level directories (Orlov spreads them over the flex
groups), each one of:
  * a small file (1..15 blocks) written and fsynced: the CPU's locality-group PA;
  * a medium file (16 KiB..4 MiB, log-uniform) written in 64 KiB or 1 MiB writes and fsynced:
    normalised requests, inode PAs;
  * a fallocated file: half of them a power-of-two length of 2..2048 blocks (CR_POWER2_ALIGNED
    first), the others 1..6000 blocks, log-uniform (mostly CR_GOAL_LEN_FAST first);
  * an fsynced append of 4..256 KiB to one of four long-lived files;
  * a fallocate of 1..2000 blocks (log-uniform) extending an earlier fallocated file;
and after every 50 operations five earlier files are unlinked and the journal committed
(`syncfs` with nothing dirty), so their blocks come back. Every write is written back by this
process (fsync on the writer's fd). Written for `fresh-aged-4g-run`: on an aged filesystem whose
groups are all written (not BLOCK_UNINIT) and still unbuilt when the trace starts, the cheap
criteria pass over groups until their flex group has been prefetched and built.
"""
import ctypes
import math
import os
import random
import sys

KIB = 1024
MIB = 1024 * KIB
BS = 4096

_libc = ctypes.CDLL(None, use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong]
BUF = bytes(range(256)) * (4 * KIB)  # 1 MiB, not zeroes


def falloc(path, off, length, create=True):
    fd = os.open(path, (os.O_CREAT if create else 0) | os.O_RDWR, 0o644)
    try:
        if _libc.fallocate(fd, 0, off, length) != 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
    finally:
        os.close(fd)


def write_fsync(path, size, wsize, append=False):
    flags = os.O_CREAT | os.O_WRONLY | (os.O_APPEND if append else os.O_TRUNC)
    fd = os.open(path, flags, 0o644)
    try:
        left = size
        while left:
            left -= os.write(fd, BUF[:min(left, wsize)])
        os.fsync(fd)
    finally:
        os.close(fd)


def syncfs(root):
    fd = os.open(root, os.O_RDONLY)
    try:
        if _libc.syncfs(fd) != 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
    finally:
        os.close(fd)


def logsize(rng, lo, hi):
    return int(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def main():
    root = sys.argv[1]
    nops = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 321)
    dirs = ["m%d" % d for d in range(6)]
    for d in dirs:
        os.mkdir(os.path.join(root, d))
    files, fallocated = [], []
    appenders = [os.path.join(root, dirs[k % len(dirs)], "app%d" % k) for k in range(4)]
    for i in range(nops):
        path = os.path.join(root, rng.choice(dirs), "f%05d" % i)
        r = rng.random()
        if r < 0.30:
            write_fsync(path, rng.randint(1, 15 * BS), 64 * KIB)
            files.append(path)
        elif r < 0.55:
            write_fsync(path, logsize(rng, 16 * KIB, 4 * MIB), rng.choice([64 * KIB, MIB]))
            files.append(path)
        elif r < 0.82:
            blocks = 1 << rng.randint(1, 11) if rng.random() < 0.5 else logsize(rng, 1, 6000)
            falloc(path, 0, blocks * BS)
            files.append(path)
            fallocated.append(path)
        elif r < 0.94:
            write_fsync(rng.choice(appenders), rng.randint(1, 64) * BS, 64 * KIB, append=True)
        elif fallocated:
            victim = rng.choice(fallocated)
            end = os.stat(victim).st_size
            falloc(victim, end, logsize(rng, 1, 2000) * BS, create=False)
        if i % 50 == 49:
            for victim in rng.sample(files, min(5, len(files))):
                os.unlink(victim)
                files.remove(victim)
                if victim in fallocated:
                    fallocated.remove(victim)
            syncfs(root)


if __name__ == "__main__":
    main()
