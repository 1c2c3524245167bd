#!/usr/bin/env python3
"""A kernel-capture workload of blocks allocated beyond EOF (run by
`../shared/kernel-lab/case_workloads.py run`; root, not CI).

usage: keepsize_workload.py ROOT [SEED]

`fallocate(FALLOC_FL_KEEP_SIZE)` past the end of a file leaves i_size below the file's allocated
end, so the requests that follow see an i_size that does not cover their neighbours:
`ext4_mb_group_or_file` (request end vs i_size) and `ext4_mb_normalize_request` (the size ladder
from max(request end, i_size), the window trimmed to the mapped neighbours) decide differently
from a file written in order. Per file, one of:
  * KEEP_SIZE range from offset 0 (i_size stays 0), written in part, then written past its end;
  * data, a hole, a KEEP_SIZE range past EOF: the hole written (a right neighbour past EOF);
  * a KEEP_SIZE range past EOF cut off again by a truncate (to i_size or below), then appends;
  * a KEEP_SIZE range far past EOF, a growing truncate into its middle, writes around it;
  * small files (under mb_stream_req) with a small KEEP_SIZE tail: locality-group requests
    whose file has blocks beyond EOF.
Every write is written back by this process (no flusher kworker): fsync on the writer's fd, or
for some small files `sync_file_range` on a read-only fd after close (requests of closed files).
"""
import ctypes
import os
import random
import sys

KIB = 1024
MIB = 1024 * KIB
FALLOC_FL_KEEP_SIZE = 1

_libc = ctypes.CDLL(None, use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong]
_libc.sync_file_range.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong,
                                  ctypes.c_uint]
SFR_ALL = 1 | 2 | 4  # SYNC_FILE_RANGE_WAIT_BEFORE | WRITE | WAIT_AFTER


def falloc(fd, off, length, keep=True):
    if _libc.fallocate(fd, FALLOC_FL_KEEP_SIZE if keep else 0, off, length) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def pwrite(fd, off, length, ch=b"k"):
    left = length
    while left > 0:
        n = min(left, MIB)
        os.pwrite(fd, ch * n, off + length - left)
        left -= n


def main():
    root = sys.argv[1]
    rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 11)
    for i in range(40):
        path = os.path.join(root, "k%03d" % i)
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
        kind = i % 5
        if kind == 0:
            # KEEP_SIZE from 0: i_size stays 0 while blocks are mapped.
            rng_len = rng.choice([64, 256, 1024, 4096]) * KIB
            falloc(fd, 0, rng_len)
            pwrite(fd, 0, rng_len // 2)
            os.fsync(fd)
            # Past the allocated end: left neighbour mapped, i_size below it until the write.
            pwrite(fd, rng_len + rng.choice([0, 4, 64]) * KIB, rng.choice([4, 16, 128, 512]) * KIB)
            os.fsync(fd)
        elif kind == 1:
            # Data, a hole, a KEEP_SIZE range: the hole written later, then the range's tail.
            head = rng.choice([8, 40, 200]) * KIB
            pwrite(fd, 0, head)
            os.fsync(fd)
            gap = rng.choice([64, 256, 1024]) * KIB
            start = (head + 4095) // 4096 * 4096 + gap
            falloc(fd, start, rng.choice([128, 512, 2048]) * KIB)
            pwrite(fd, head, start - head)
            os.fsync(fd)
        elif kind == 2:
            # A KEEP_SIZE range past EOF cut off by a truncate, then appends.
            size = rng.choice([12, 100, 700]) * KIB
            pwrite(fd, 0, size)
            os.fsync(fd)
            falloc(fd, size, rng.choice([256, 1024, 3072]) * KIB)
            os.ftruncate(fd, size if rng.random() < 0.5 else size // 2)
            for _ in range(3):
                end = os.fstat(fd).st_size
                pwrite(fd, end, rng.choice([4, 32, 96, 300]) * KIB)
                os.fsync(fd)
        elif kind == 3:
            # A KEEP_SIZE range far past EOF; a growing truncate into its middle; writes before
            # the range (right neighbour), inside it (no allocation) and past it.
            pwrite(fd, 0, 16 * KIB)
            os.fsync(fd)
            start = rng.choice([1, 4, 9]) * MIB
            length = rng.choice([512, 2048]) * KIB
            falloc(fd, start, length)
            os.ftruncate(fd, start + length // 2)
            pwrite(fd, start - 128 * KIB, 64 * KIB)
            pwrite(fd, start + 64 * KIB, 64 * KIB)
            pwrite(fd, start + length + 32 * KIB, 48 * KIB)
            os.fsync(fd)
        else:
            # Small files with a small KEEP_SIZE tail (under mb_stream_req).
            size = rng.randint(1, 6) * 4 * KIB
            pwrite(fd, 0, size)
            falloc(fd, size, rng.randint(1, 5) * 4 * KIB)
            if rng.random() < 0.5:
                os.fsync(fd)
                pwrite(fd, size + rng.randint(6, 9) * 4 * KIB, 4 * KIB)
                os.fsync(fd)
            else:
                # Written back after close, from a read-only fd (a closed file's request).
                os.close(fd)
                fd = os.open(path, os.O_RDONLY)
                if _libc.sync_file_range(fd, 0, 0, SFR_ALL) != 0:
                    e = ctypes.get_errno()
                    raise OSError(e, os.strerror(e))
        os.close(fd)
        if i % 10 == 9:
            # Free some files, so later requests reuse the space after a commit.
            for j in range(i - 9, i, 4):
                os.unlink(os.path.join(root, "k%03d" % j))
            os.sync()


if __name__ == "__main__":
    main()
