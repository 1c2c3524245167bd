#!/usr/bin/env python3
"""A kernel-capture workload that runs an ext4 filesystem out of space while preallocations
still hold free blocks (run by `../shared/kernel-lab/case_workloads.py run`; root, not CI).

usage: enospc_workload.py ROOT

Small files written and fsynced leave the rest of this CPU's locality-group preallocation
unused; appenders kept open leave their inode preallocations unused; then files are
fallocated until only the free blocks the reserve keeps from data are left. When the last free
blocks data may claim sit in those preallocations, mballoc finds nothing, discards every
preallocation (`ext4_mb_discard_preallocations_should_retry`) and retries, which the capture
records as `discard_all_pas_enospc`.
"""
import os
import sys

BS = 4096


def write_fsync(f, data):
    f.write(data)
    f.flush()
    os.fsync(f.fileno())


def main():
    root = sys.argv[1]
    for i in range(64):
        with open(os.path.join(root, "s%03d" % i), "wb") as f:
            write_fsync(f, b"x" * (BS * (1 + i % 8)))
    # Thirty-two appenders grown just past 4 MiB in 64 KiB fsynced writes and kept open: the
    # write that crosses 4 MiB is normalised to the file's 8 MiB window, so each holds an
    # inode preallocation with nearly 4 MiB unused.
    appenders = [open(os.path.join(root, "a%02d" % i), "ab") for i in range(32)]
    for _ in range(65):
        for f in appenders:
            write_fsync(f, b"y" * 65536)
    # Fill with 1 MiB fallocates until the free-block count nears the 4096-cluster reserve that
    # data may not claim. Stop short of it: a request the free-cluster counter refuses never
    # reaches mballoc, and its trace has no answer to replay.
    n = 0
    while os.statvfs(root).f_bfree > 8192:
        fd = os.open(os.path.join(root, "fill%04d" % n), os.O_CREAT | os.O_RDWR, 0o644)
        try:
            os.posix_fallocate(fd, 0, 1 << 20)
        finally:
            os.close(fd)
        n += 1
    for f in appenders:
        f.close()


if __name__ == "__main__":
    main()
