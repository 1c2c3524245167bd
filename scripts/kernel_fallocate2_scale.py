#!/usr/bin/env python3
"""The real kernel's will-it-scale fallocate2 at 1 to N processes, and its allocator time.

Two passes, each on a fresh 4 GiB ext4 loop image per run (`mb_optimize_scan` 0 and 1):

1. throughput: `fallocate2 -n N` for each N of `--workers`, `--reps` runs, rep-major so that
   a slow drift of the host falls on every configuration alike; median per configuration;
2. with `--trace-reps R`: the same runs traced (`ext4_request_blocks` to
   `ext4_allocate_blocks` per process, one second, TSC clock, as `kernel_alloc_time.py`),
   giving the time inside `ext4_mb_new_blocks` per call at each N.

This is what `docs/measurements/kernel-fallocate2-xeon16.json` holds for the 16-core
machine behind `--machine xeon16` (docs/vcpus/kernel-16-core.md). Needs root, loop devices, tracefs
(mounted at /sys/kernel/tracing) for the second pass, and the kernel lab's helpers
(`../shared/kernel-lab/klab.py`, or the folder named by KLAB_DIR). Not used by the tests.

usage: sudo python3 scripts/kernel_fallocate2_scale.py [--workers 1,2,4,8,16] [--reps 3]
           [--seconds 4] [--trace-reps 2] [--bench BIN] [--out FILE]
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("KLAB_DIR", os.path.join(HERE, "../../shared/kernel-lab")))
sys.path.insert(0, HERE)
import klab  # noqa: E402
import kernel_alloc_time as kat  # noqa: E402

IMAGE, MOUNT = "/tmp/klab-scale.img", "/mnt/klab-scale"


def throughput(bench, workers, scan, seconds):
    with klab.ext4_image(IMAGE, 4 << 30, MOUNT, opts="mb_optimize_scan=%d" % scan) as (_d, mnt):
        time.sleep(1)  # let mount-time bitmap prefetch settle
        out = klab.sh([bench, "-n", str(workers), "-t", str(seconds), "-w", "1", "-d", mnt,
                       "-c", "8192", "-s", "1048576"])
    return json.loads(out)["total_ops_s"]


def medians(rows, key):
    table = {}
    for r in rows:
        table.setdefault(str(r["scan"]), {}).setdefault(str(r["workers"]), []).append(r[key])
    return {s: {w: statistics.median(v) for w, v in ws.items()} for s, ws in table.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", default="1,2,4,8,16")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4)
    ap.add_argument("--trace-reps", type=int, default=0)
    ap.add_argument("--bench", help="a built fallocate2 (default: build the kernel lab's)")
    ap.add_argument("--out", default="/tmp/kernel_fallocate2_scale.json")
    a = ap.parse_args()
    bench = a.bench or kat.BENCH
    if not a.bench:
        klab.sh(["gcc", "-O2", "-Wall", "-o", bench,
                 os.path.join(os.path.dirname(klab.__file__), "fallocate2.c")])
    kat.BENCH = bench
    workers = [int(w) for w in a.workers.split(",")]
    runs, traced = [], []
    for rep in range(a.reps):
        for scan in (0, 1):
            for w in workers:
                runs.append({"rep": rep, "scan": scan, "workers": w,
                             "total_ops_s": throughput(bench, w, scan, a.seconds)})
                print(json.dumps(runs[-1]), flush=True)
    hz = kat.tsc_hz() if a.trace_reps else None
    for rep in range(a.trace_reps):
        for scan in (0, 1):
            for w in workers:
                traced.append(dict(kat.run(w, scan, hz), rep=rep))
                print(json.dumps(traced[-1]), flush=True)
    result = {"kernel": os.uname().release, "args": vars(a), "runs": runs,
              "median_total_ops_s": medians(runs, "total_ops_s")}
    if traced:
        result["tsc_hz"] = hz
        result["traced_runs"] = traced
        result["median_alloc_ns"] = medians(traced, "mean_ns")
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
