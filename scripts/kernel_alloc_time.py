#!/usr/bin/env python3
"""The real kernel's allocator time alone under will-it-scale fallocate2, 1 vs 2 processes.

Whole-operation throughput (`../shared/kernel-lab/bench_fallocate2.py`) mixes the allocator
with everything else a `fallocate` system call does. This script times `ext4_mb_new_blocks`
alone: its entry (`ext4_request_blocks` tracepoint) to its exit (`ext4_allocate_blocks`),
paired per process, over a one-second window in the middle of each run, with the x86 TSC as
the trace clock (nanosecond resolution). Each run gets a fresh 4 GiB ext4 loop image.

Needs root, tracefs and the kernel lab's helpers (`../shared/kernel-lab/klab.py`, for the
image, loop device and mount). Not used by the tests: CI never mounts anything.

usage: sudo python3 scripts/kernel_alloc_time.py [--reps 3] [--scan 1] [--out FILE]
"""
import argparse
import json
import os
import re
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "../../shared/kernel-lab"))
import klab  # noqa: E402

INSTANCE = "/sys/kernel/tracing/instances/mballoc-alloc-time"
EVENTS = ("ext4_request_blocks", "ext4_allocate_blocks")
BENCH = "/tmp/klab-fallocate2"
IMAGE, MOUNT = "/tmp/klab-alloc-time.img", "/mnt/klab-alloc-time"


def tsc_hz():
    """The TSC rate the kernel detected at boot (dmesg), else the CPU's MHz."""
    out = klab.sh(["dmesg"], check=False)
    m = re.search(r"tsc: Detected ([0-9.]+) MHz", out) or re.search(
        r"cpu MHz\s*:\s*([0-9.]+)", klab.read("/proc/cpuinfo"))
    return float(m.group(1)) * 1e6


def set_events(on):
    for ev in EVENTS:
        klab.write("%s/events/ext4/%s/enable" % (INSTANCE, ev), int(on))


def window(delay, length, instance=INSTANCE):
    """Turns tracing on in `instance` for `length` seconds, `delay` seconds from now."""
    time.sleep(delay)
    klab.write(instance + "/tracing_on", 1)
    time.sleep(length)
    klab.write(instance + "/tracing_on", 0)


def trace_events(text, hz):
    """(pid, seconds, event name, the rest of the line) of each event of an ftrace text taken
    with the TSC clock at `hz`."""
    for line in text.splitlines():
        if line.startswith("#") or ": " not in line:
            continue
        head, rest = line.split(": ", 1)
        fields = head.split()
        yield fields[0].rsplit("-", 1)[-1], int(fields[-1]) / hz, rest.split(":", 1)[0], rest


def durations(text, hz):
    """Entry-to-exit times (ns) of every call whose two events are both in the window."""
    entered, out = {}, []
    for pid, ts, event, _rest in trace_events(text, hz):
        if event == EVENTS[0]:
            entered[pid] = ts
        elif event == EVENTS[1] and pid in entered:
            out.append((ts - entered.pop(pid)) * 1e9)
    return out


def run(workers, scan, hz):
    opts = "mb_optimize_scan=%d" % scan
    with klab.ext4_image(IMAGE, 4 << 30, MOUNT, opts=opts) as (_dev, mnt):
        time.sleep(1)  # let mount-time bitmap prefetch settle
        os.makedirs(INSTANCE, exist_ok=True)
        klab.write(INSTANCE + "/tracing_on", 0)
        klab.write(INSTANCE + "/buffer_size_kb", 131072)
        klab.write(INSTANCE + "/trace_clock", "x86-tsc")
        klab.write(INSTANCE + "/trace", "")
        set_events(True)
        t = threading.Thread(target=window, args=(2.5, 1.0))
        t.start()
        out = klab.sh([BENCH, "-n", str(workers), "-t", "3", "-w", "1", "-d", mnt,
                       "-c", "8192", "-s", "1048576"])
        t.join()
        set_events(False)
        text = klab.read(INSTANCE + "/trace")
        klab.write(INSTANCE + "/trace", "")
    d = durations(text, hz)
    return {"workers": workers, "scan": scan, "total_ops_s": json.loads(out)["total_ops_s"],
            "calls": len(d), "mean_ns": statistics.mean(d), "median_ns": statistics.median(d)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--scan", type=int, default=1)
    ap.add_argument("--out", default="/tmp/kernel_alloc_time.json")
    a = ap.parse_args()
    klab.sh(["gcc", "-O2", "-Wall", "-o", BENCH,
             os.path.join(klab.__file__.rsplit("/", 1)[0], "fallocate2.c")])
    hz = tsc_hz()
    rows = []
    for _ in range(a.reps):  # rep-major: slow drifts of the host fall on both alike
        for workers in (1, 2):
            rows.append(run(workers, a.scan, hz))
            print(json.dumps(rows[-1]), flush=True)
    with open(a.out, "w") as f:
        json.dump({"kernel": os.uname().release, "tsc_hz": hz, "runs": rows}, f, indent=1)
    for workers in (1, 2):
        mine = [r for r in rows if r["workers"] == workers]
        print("%d process(es): mean %.0f ns per ext4_mb_new_blocks call (median of %d runs), "
              "%.0f ops/s in all" % (workers, statistics.median(r["mean_ns"] for r in mine),
                                     len(mine), statistics.median(r["total_ops_s"] for r in mine)))
    one = statistics.median(r["mean_ns"] for r in rows if r["workers"] == 1)
    two = statistics.median(r["mean_ns"] for r in rows if r["workers"] == 2)
    print("allocator per-process rate, 2 vs 1: %.2f" % (one / two))


if __name__ == "__main__":
    main()
