#!/usr/bin/env python3
"""The real kernel's fallocate2 at 1 to N processes on file systems of different sizes, with
its journal commits counted.

fallocate2 truncates each 1 MiB file when full; in data=ordered mode the freed blocks stay
busy until jbd2 commits (`ext4_mb_free_metadata`). At hundreds of thousands of 8 KiB calls a
second a 4 GiB file system runs out of committed free space within a second, and every
allocation that finds none forces a commit and waits for it (`ext4_should_retry_alloc`):
the run becomes cycles of filling and forced commits. A larger file system commits only on
jbd2's 5 s timer. This script runs the same curve on each size and counts the commits
(`jbd2_start_commit`, `jbd2_end_commit`, `jbd2_run_stats` of the loop device's journal over
the whole run), so the two can be told apart.

Each run gets a fresh ext4 loop image of the given size (`mb_optimize_scan=1`), made as the
kernel lab makes them (inode tables and journal written out at mkfs), synced and left
`--settle` seconds before the run; a size written `64lazy`
leaves the inode tables to lazy initialisation and mounts `noinit_itable` (no background
zeroing; the block layout is the same). Within each repetition the configurations run in an
order rotated by one from the last, so that what a run leaves behind on the host (dirty
pages of the last image, say) falls on each configuration alike. Needs root, tracefs, a built fallocate2
(`--bench`) and the kernel lab's klab.py (`../shared/kernel-lab`, or KLAB_DIR). Not used by
the tests: CI never mounts anything.

usage: sudo python3 scripts/kernel_fallocate2_cycles.py --bench BIN [--sizes 4,64,64lazy]
           [--workers 1,4,8,16] [--reps 3] [--seconds 3] [--settle 1] [--out FILE]
"""
import argparse
import collections
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("KLAB_DIR", os.path.join(HERE, "../../shared/kernel-lab")))
import klab  # noqa: E402

T = "/sys/kernel/tracing/instances/mballoc-cycles"
IMAGE, MOUNT = "/tmp/klab-cycles.img", "/mnt/klab-cycles"
EVENTS = ("jbd2_start_commit", "jbd2_end_commit", "jbd2_run_stats")


def arm():
    os.makedirs(T, exist_ok=True)
    klab.write(T + "/tracing_on", 0)
    klab.write(T + "/buffer_size_kb", 4096)
    klab.write(T + "/trace_clock", "mono")
    klab.write(T + "/trace", "")
    for e in EVENTS:
        klab.write("%s/events/jbd2/%s/enable" % (T, e), 1)
    klab.write(T + "/tracing_on", 1)


def disarm():
    klab.write(T + "/tracing_on", 0)
    for e in EVENTS:
        klab.write("%s/events/jbd2/%s/enable" % (T, e), 0)
    text = klab.read(T + "/trace")
    klab.write(T + "/trace", "")
    return text


def commits(text, dev):
    """The loop device's commits: their count, mean duration, jbd2's run statistics and
    when each began (`starts`, the trace's monotonic clock, s)."""
    st = os.stat(dev)
    tag = "dev %d,%d " % (os.major(st.st_rdev), os.minor(st.st_rdev))
    start, durs, stats, starts = {}, [], collections.defaultdict(list), []
    for line in text.splitlines():
        if line.startswith("#") or tag not in line:
            continue
        head, rest = line.split(": ", 1)
        ts = float(head.split()[-1])
        name = rest.split(":", 1)[0]
        tid = rest.split("transaction ")[-1].split()[0] if "transaction " in rest else None
        if name == "jbd2_start_commit":
            start[tid] = ts
            starts.append(ts)
        elif name == "jbd2_end_commit" and tid in start:
            durs.append((ts - start.pop(tid)) * 1e3)
        elif name == "jbd2_run_stats":
            words = rest.split(":", 1)[1].split()
            for k, v in zip(words, words[1:]):
                if k in ("running", "locked", "flushing", "logging", "handle_count", "blocks"):
                    stats[k].append(float(v))
    return {"commits": len(durs), "mean_commit_ms": statistics.mean(durs) if durs else None,
            "run_stats_mean": {k: statistics.mean(v) for k, v in stats.items()},
            "starts": starts}


def run(bench, size, n, seconds, settle):
    lazy = size.endswith("lazy")
    gib = int(size[:-4] if lazy else size)
    extra = ["-E", "lazy_itable_init=1"] if lazy else None
    opts = "mb_optimize_scan=1" + (",noinit_itable" if lazy else "")
    with klab.ext4_image(IMAGE, gib << 30, MOUNT, opts=opts, mkfs_extra=extra) as (dev, mnt):
        os.sync()  # what mkfs wrote goes to the disk before the run, not during it
        time.sleep(settle)  # let mount-time bitmap prefetch settle
        arm()
        t0 = time.monotonic()
        out = json.loads(klab.sh([bench, "-n", str(n), "-t", str(seconds), "-w", "1", "-d", mnt,
                                  "-c", "8192", "-s", "1048576"]))
        wall = time.monotonic() - t0
        c = commits(disarm(), dev)
    r = {"size": size, "gib": gib, "workers": n, "total_ops_s": out["total_ops_s"], "run_s": wall}
    r.update(c)
    r["commits_per_s"] = c["commits"] / wall
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True)
    ap.add_argument("--sizes", default="4,64")
    ap.add_argument("--workers", default="1,4,8,16")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--settle", type=float, default=1)
    ap.add_argument("--out", default="/tmp/kernel_fallocate2_cycles.json")
    a = ap.parse_args()
    result = {"kernel": os.uname().release, "args": vars(a), "runs": []}
    configs = [(s, int(w)) for s in a.sizes.split(",") for w in a.workers.split(",")]
    for rep in range(a.reps):  # rep-major: host drift falls on every configuration alike
        k = rep % len(configs)
        for size, n in configs[k:] + configs[:k]:
            r = run(a.bench, size, n, a.seconds, a.settle)
            r["rep"] = rep
            result["runs"].append(r)
            print(json.dumps(r), flush=True)
            with open(a.out, "w") as f:
                json.dump(result, f, indent=1)
    table = collections.defaultdict(list)
    for r in result["runs"]:
        table[(r.get("size", str(r["gib"])), r["workers"])].append(r)
    result["median"] = {}
    for (size, n), rs in table.items():
        m = {"total_ops_s": statistics.median(r["total_ops_s"] for r in rs),
             "commits_per_s": statistics.median(r["commits_per_s"] for r in rs)}
        result["median"]["%s/%d" % (size, n)] = m
        print("%7s GiB %2d processes: %9.0f ops/s (%8.0f a process), %.2f commits/s" % (
            size, n, m["total_ops_s"], m["total_ops_s"] / n, m["commits_per_s"]))
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
