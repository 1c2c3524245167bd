#!/usr/bin/env python3
"""A kernel-capture workload whose requests' goal is the block past the end of the filesystem
(run by `../shared/kernel-lab/case_workloads.py run` on a fresh filesystem; root, not CI).

usage: lastblock_workload.py ROOT BLOCKS_COUNT

`ext4_ext_find_goal` asks for the block after the file's last extent; when that extent ends at
the filesystem's last block, the goal is `blocks_count`, which `ext4_mb_initialize_context`
replaces with `s_first_data_block`. One file is fallocated 4 MiB at a time (on a fresh
filesystem the stream allocation fills the groups in order; the last piece is cut to what is left
before the end) until, as FIEMAP shows, its last extent ends at the last block. Then:
  * a buffered 64 KiB append, fsynced from the open fd (STREAM_ALLOC: the stream goal replaces
    the physical goal), then truncated away again and committed;
  * a buffered 64 KiB append written back after close (`sync_file_range` on a read-only fd):
    a HINT_NOPREALLOC request whose goal is used as it is, so the clamped goal (group 0) counts;
  * a few more 4 MiB fallocates.
"""
import ctypes
import fcntl
import os
import struct
import sys

KIB = 1024
MIB = 1024 * KIB
BS = 4096
FS_IOC_FIEMAP = 0xC020660B
SFR_ALL = 1 | 2 | 4

_libc = ctypes.CDLL(None, use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong]
_libc.sync_file_range.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong,
                                  ctypes.c_uint]


def check(rc):
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def extent_end(fd, off):
    """Physical end (in bytes) of the extent that maps byte `off` of the file."""
    req = struct.pack("QQIIII", off, 1 << 62, 0, 0, 1, 0) + b"\0" * 56
    buf = bytearray(req)
    fcntl.ioctl(fd, FS_IOC_FIEMAP, buf)
    mapped = struct.unpack_from("I", buf, 20)[0]
    if mapped == 0:
        return None
    _logical, physical, length = struct.unpack_from("QQQ", buf, 32)
    return physical + length


def main():
    root = sys.argv[1]
    blocks_count = int(sys.argv[2])
    path = os.path.join(root, "chain")
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    off = 0
    reached = False
    step = 4 * MIB
    while off < blocks_count * BS:
        check(_libc.fallocate(fd, 0, off, step))
        end = extent_end(fd, off)
        off += step
        if end == blocks_count * BS:
            reached = True
            break
        # Short of the end by less than a step: ask for exactly the rest, which the stream
        # allocation finds right after the last extent (the group fills in order).
        step = 4 * MIB if end is None or blocks_count * BS - end >= 4 * MIB \
            else blocks_count * BS - end
    if not reached:
        sys.exit("no extent ended at the last block")
    # An fsynced append from the open fd (STREAM_ALLOC), then cut off again.
    os.pwrite(fd, b"a" * 64 * KIB, off)
    os.fsync(fd)
    os.ftruncate(fd, off)
    os.fsync(fd)
    os.close(fd)
    os.sync()
    # An append written back after close (HINT_NOPREALLOC: the clamped goal is used).
    fd = os.open(path, os.O_WRONLY)
    os.pwrite(fd, b"b" * 64 * KIB, off)
    os.close(fd)
    fd = os.open(path, os.O_RDONLY)
    check(_libc.sync_file_range(fd, 0, 0, SFR_ALL))
    os.close(fd)
    # A few more fallocates past the new end.
    fd = os.open(path, os.O_RDWR)
    end = os.fstat(fd).st_size
    for k in range(4):
        check(_libc.fallocate(fd, 0, end + k * 4 * MIB, 4 * MIB))
    os.close(fd)


if __name__ == "__main__":
    main()
