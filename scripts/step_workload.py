#!/usr/bin/env python3
"""A workload given as a list of steps (root, not CI): `capture_fresh.py --prep` runs it untraced
before the traced mount, and `case_workloads.py run` can run it as the traced workload.

usage: step_workload.py ROOT STEPS

STEPS is a comma-separated list of steps `OP[:ARG...]`, run in order on the filesystem mounted
at ROOT (sizes in 4 KiB blocks, `B` below):
  mkdir:NAME       a directory (Orlov places a top-level one by its name's hash)
  falloc:NAME:B    fallocate B blocks from the end of NAME (created if missing; i_size grows;
                   the kernel asks for at most 32767 blocks, one unwritten extent, at a time)
  write:NAME:B     append B blocks (1 MiB writes) to NAME and fsync it
  unlink:NAME      remove a file
  truncate:NAME:B  truncate NAME to B blocks (truncate(2): frees the blocks past them)
  syncfs           commit the journal (freed blocks become free on disk)
  mixed:NOPS:SEED  run `mixed_workload.py ROOT NOPS SEED` (small, medium and fallocated files
                   in six new top-level directories, appends, extends, unlinks)
and a final syncfs. Under `--prep`, files written and then unlinked leave their groups written
(the kernel clears a group's BLOCK_UNINIT flag when it first allocates there, and nothing sets it
again) but free: on the traced fresh mount such a group is unbuilt (NEED_INIT) and not
BLOCK_UNINIT, so the cheap criteria pass it over (`ext4_mb_good_group_nolock`) and prefetching
it is an I/O that counts toward `mb_prefetch_limit` (`ext4_mb_prefetch`).
"""
import os
import subprocess
import sys

from mixed_workload import BS, MIB, falloc, syncfs, write_fsync  # scripts/, beside this file

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    root, steps = sys.argv[1], sys.argv[2]
    for step in steps.split(","):
        op, *args = step.split(":")
        path = os.path.join(root, args[0]) if args else None
        if op == "mkdir":
            os.mkdir(path)
        elif op == "falloc":
            end = os.path.getsize(path) if os.path.exists(path) else 0
            falloc(path, end, int(args[1]) * BS)
        elif op == "write":
            write_fsync(path, int(args[1]) * BS, MIB, append=True)
        elif op == "unlink":
            os.unlink(path)
        elif op == "truncate":
            os.truncate(path, int(args[1]) * BS)
        elif op == "syncfs":
            syncfs(root)
        elif op == "mixed":
            subprocess.run([sys.executable, os.path.join(HERE, "mixed_workload.py"), root,
                            args[0], args[1]], check=True)
        else:
            sys.exit("step_workload.py: unknown step %r" % (step,))
    syncfs(root)


if __name__ == "__main__":
    main()
