#!/usr/bin/env python3
"""How long after a mount the kernel's background bitmap prefetch has read every group.

ext4 queues an `EXT4_LI_MODE_PREFETCH_BBITMAP` lazyinit request at mount (unless
`no_prefetch_block_bitmaps`): the lazyinit thread reads the block bitmaps `s_mb_prefetch`
groups at a time (`ext4_mb_prefetch`), starting after a random delay. Seed 003's figures were
measured on "existing" filesystems; whether their bitmaps were all in memory when the
counting began decides whether a model of them should start cold or with every bitmap read.
This script mounts an existing image and records, with the `ext4_prefetch_bitmaps` and
`ext4_read_block_bitmap_load` tracepoints, when each prefetch batch ran and how many groups'
bitmaps were read (`prefetch` 1: by the prefetch), against the mount's own time.

For each image and repetition: optionally drop the page cache (`--drop-caches`, so that the
loop device reads the backing disk), attach the image, trace, mount with the default
options, wait `--wait` seconds, unmount. Prints and writes (`--out`) per run: the delay to the
first batch, the time of the last, batches, I/Os, bitmaps read by the prefetch, the groups.
Needs root, tracefs and the kernel lab's klab.py (`../shared/kernel-lab`, or KLAB_DIR). Not
used by the tests: CI never mounts anything.

usage: sudo python3 scripts/kernel_prefetch_time.py --image IMG [--image IMG2] [--reps 3]
           [--wait 15] [--drop-caches] [--out FILE]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("KLAB_DIR", os.path.join(HERE, "../../shared/kernel-lab")))
import klab  # noqa: E402

MNT = "/mnt/klab-prefetch"
EVENTS = ["ext4:ext4_prefetch_bitmaps", "ext4:ext4_read_block_bitmap_load"]
LINE = re.compile(r"\s(\d+\.\d+): (ext4_prefetch_bitmaps|ext4_read_block_bitmap_load): (.*)$")


def groups_of(img):
    """The image's group count, from its superblock (`dumpe2fs -h`)."""
    out = klab.sh(["dumpe2fs", "-h", img])
    field = lambda name: int(re.search(r"^%s:\s+(\d+)" % name, out, re.M).group(1))
    blocks, per = field("Block count"), field("Blocks per group")
    return (blocks + per - 1) // per


def one_run(img, wait, drop):
    if drop:
        klab.drop_caches()
    with klab.loopdev(img) as dev:
        with klab.TraceInstance(EVENTS, filt="dev == %d" % klab.dev_t(dev)) as tr:
            tr.on()
            t0 = time.monotonic()
            with klab.mounted(dev, MNT):
                t_mounted = time.monotonic()
                time.sleep(wait)
                tr.off()
                data = tr.save("/tmp/klab-prefetch.trace")
                lost = tr.overruns()
    batches, loads = [], 0
    for line in data.splitlines():
        m = LINE.search(line)
        if not m:
            continue
        t, ev, rest = float(m.group(1)) - t0, m.group(2), m.group(3)
        kv = dict(re.findall(r"(\w+) (\d+)", rest))
        if ev == "ext4_prefetch_bitmaps":
            batches.append((t, int(kv["group"]), int(kv["next"]), int(kv["ios"])))
        elif kv.get("prefetch") == "1":
            loads += 1
    return {
        "mount_s": round(t_mounted - t0, 4),
        "first_batch_s": round(batches[0][0], 4) if batches else None,
        "last_batch_s": round(batches[-1][0], 4) if batches else None,
        "batches": len(batches),
        "ios": sum(b[3] for b in batches),
        "groups_walked": sum((b[2] - b[1]) for b in batches if b[2] > b[1]),
        "bitmaps_read_by_prefetch": loads,
        "lost_events": lost,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--image", action="append", required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--wait", type=float, default=15.0)
    ap.add_argument("--drop-caches", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args()
    result = {
        "what": "ext4's mount-time block bitmap prefetch: when its batches ran after a mount "
                "of an existing image, and how many bitmaps it read",
        "kernel": os.uname().release,
        "cpus": os.cpu_count(),
        "when": time.strftime("%Y-%m-%d"),
        "command": " ".join(["scripts/kernel_prefetch_time.py"] + sys.argv[1:]),
        "images": [],
    }
    for img in a.image:
        entry = {"image": os.path.basename(img), "groups": groups_of(img), "runs": []}
        for rep in range(a.reps):
            r = one_run(img, a.wait, a.drop_caches)
            r["rep"] = rep
            entry["runs"].append(r)
            print(img, json.dumps(r), flush=True)
        done = [r["last_batch_s"] for r in entry["runs"] if r["last_batch_s"] is not None]
        entry["median_last_batch_s"] = statistics.median(done) if done else None
        result["images"].append(entry)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
