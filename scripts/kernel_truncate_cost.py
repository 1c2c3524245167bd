#!/usr/bin/env python3
"""What the real kernel's truncate to 0 costs per extent it frees.

fallocate2 truncates each 1 MiB file when full. A file whose 8 KiB calls did not merge holds
up to 128 extents, and the truncate walks and frees each: on the 16-core machine a truncate
took 8.9 us with 1 extent freed and 560-590 us with 95-122 (docs/measurements/
kernel-fallocate2-xeon16-sizes.json, traced). This times `ftruncate(fd, 0)` alone, untraced,
on files of k extents (8 KiB fallocated every 16 KiB, so no two calls merge whatever blocks
they get), one process, a fresh 4 GiB ext4 loop image per k, `--files` files each; per k the
median time; then the least-squares line over k: ns per extent and the intercept.

`--interleave W` writes the files W at a time, round robin, one extent each in turn: W files
then share one run of free space, as W fallocate2 processes do once their goals collide, so
each file's extents lie W × 8 KiB apart and none of its frees merges with the next
(`ext4_mb_free_metadata` merges a free with its neighbour of the same transaction). 1: each
file written alone, its extents close together.

Needs root, loop devices and the kernel lab's klab.py (`../shared/kernel-lab`, or KLAB_DIR).
Not used by the tests: CI never mounts anything.

usage: sudo python3 scripts/kernel_truncate_cost.py [--extents 1,2,4,8,16,32,64,128]
           [--files 300] [--reps 3] [--interleave 1] [--out FILE]
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("KLAB_DIR", os.path.join(HERE, "../../shared/kernel-lab")))
import klab  # noqa: E402

IMAGE, MOUNT = "/tmp/klab-truncate.img", "/mnt/klab-truncate"
CHUNK = 8192


def times(k, files, interleave=1):
    """ns of each of `files` truncates of a file with `k` extents, the files written
    `interleave` at a time, round robin."""
    out = []
    with klab.ext4_image(IMAGE, 4 << 30, MOUNT) as (_dev, mnt):
        time.sleep(1)  # let mount-time bitmap prefetch settle
        fds = [os.open(os.path.join(mnt, "f%d" % i), os.O_RDWR | os.O_CREAT, 0o644)
               for i in range(files)]
        for first in range(0, files, interleave):
            batch = fds[first:first + interleave]
            for e in range(k):
                for fd in batch:
                    os.posix_fallocate(fd, e * 2 * CHUNK, CHUNK)
        for fd in fds:
            t0 = time.perf_counter_ns()
            os.ftruncate(fd, 0)
            out.append(time.perf_counter_ns() - t0)
        for fd in fds:
            os.close(fd)
    return out


def line(points):
    xs, ys = zip(*points)
    mx, my = statistics.mean(xs), statistics.mean(ys)
    slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs)
    return slope, my - slope * mx


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--extents", default="1,2,4,8,16,32,64,128")
    ap.add_argument("--files", type=int, default=300)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--interleave", type=int, default=1,
                    help="files written round robin, this many at a time")
    ap.add_argument("--out", default="/tmp/kernel_truncate_cost.json")
    a = ap.parse_args()
    ks = [int(k) for k in a.extents.split(",")]
    runs = []
    for rep in range(a.reps):  # rep-major: host drift falls on every k alike
        for k in ks:
            t = times(k, a.files, a.interleave)
            runs.append({"rep": rep, "extents": k, "median_ns": statistics.median(t),
                         "mean_ns": statistics.mean(t)})
            print(json.dumps(runs[-1]), flush=True)
    med = {k: statistics.median(r["median_ns"] for r in runs if r["extents"] == k) for k in ks}
    slope, icept = line(sorted(med.items()))
    result = {"kernel": os.uname().release, "args": vars(a), "runs": runs,
              "median_ns": {str(k): v for k, v in med.items()},
              "ns_per_extent": slope, "intercept_ns": icept}
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
    for k, v in med.items():
        print("%4d extents: %9.0f ns" % (k, v))
    print("ns per extent %.0f, intercept %.0f ns" % (slope, icept))


if __name__ == "__main__":
    main()
