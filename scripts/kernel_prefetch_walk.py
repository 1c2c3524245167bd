#!/usr/bin/env python3
"""What the kernel's prefetch walk (`ext4_mb_prefetch`) costs inside fallocate3, one task.

linux-6.18's allocator calls `ext4_mb_prefetch` at each prefetch point of its group scans: for
every group of the window it looks up the group descriptor, the group's `ext4_group_info`,
and sets the group's "bitmap read" mark with an atomic test-and-set, even when every bitmap
is long in memory (seed 003 tests the mark first). This script measures how much of an
operation that walk takes on an aged image, with the kernel's own code: no tracer of
function durations is available on these guests (no kprobes, no function_graph), so it
samples the CPU the task runs on (`perf record -e cpu-clock -g`) and counts the samples
whose kernel stack holds `ext4_mb_prefetch`, `ext4_mb_new_blocks`, and the task at all.

The figure the lab takes is the walk's share of the allocator's samples (`walk_over_alloc`),
both counted in the same run: an operation's time drifts within a commit cycle (the free space
between two commits shrinks), the share much less.

Per repetition: attach the image, mount it (default options: the kernel's mount-time
bitmap prefetch then reads every bitmap; `--settle` seconds are left for it, measured at
0.9-3.4 s by `kernel_prefetch_time.py`), run one fallocate3 task pinned to `--cpu`
(`open(O_TRUNC)`, `fallocate(KEEP_SIZE, 73819750)`, `close`) for `--warmup` seconds, then
`--seconds` more under `perf record -F FREQ -C CPU -g`, unmount. Per run: operations and
their mean time, the samples' shares, and so the walk's and the allocator's µs an operation.
The medians over `--reps` go to `--out`. The groups the walk passes per operation are not
countable here (nothing traces the walk); `mballoc bench threads --calibrate
--seed003-image IMAGE` counts them on the same layout, which is how the lab turns this
figure into a cost per group.

Needs root, perf, and the kernel lab's klab.py (`../shared/kernel-lab`, or KLAB_DIR). Not used
by the tests: CI never mounts anything.

With `--fallocate2 GIB` instead (and `--scan`), the same share in will-it-scale fallocate2
(the kernel lab's `fallocate2.c`, one process) on a fresh image of that size.

usage: python3 scripts/kernel_prefetch_walk.py --image IMG [--reps 3] [--seconds 10]
           [--out docs/measurements/kernel-prefetch-walk.json]
       python3 scripts/kernel_prefetch_walk.py --fallocate2 4 --fallocate2 64 --scan 0 --scan 1
           [--out docs/measurements/kernel-prefetch-walk-fallocate2.json]
"""
import argparse
import ctypes
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("KLAB_DIR", os.path.join(HERE, "../../shared/kernel-lab")))
import klab  # noqa: E402

MNT = "/mnt/klab-prefetch-walk"
FILESIZE = 73819750  # fallocate3.c's FILESIZE
FALLOC_FL_KEEP_SIZE = 1
libc = ctypes.CDLL("libc.so.6", use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]


def worker(mnt, cpu, until, out_fd):
    """The fallocate3 loop on `cpu` until the monotonic clock passes `until`; writes each
    operation's end time to `out_fd` as one JSON list."""
    os.sched_setaffinity(0, {cpu})
    path = os.path.join(mnt, "willitscale.0")
    ends = []
    while time.monotonic() < until:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        if libc.fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, FILESIZE) != 0:
            os.close(fd)
            os._exit(3)
        os.close(fd)
        ends.append(time.monotonic())
    with os.fdopen(out_fd, "w") as f:
        json.dump(ends, f)
    os._exit(0)


def samples(data, pid):
    """(task samples, with ext4_mb_prefetch on the stack, with ext4_mb_new_blocks, leaf
    symbols under ext4_mb_prefetch) from `perf script` of `data`: the samples of process
    `pid`, or with `pid` None of every process whose samples hold `ext4_mb_new_blocks` at
    all (a benchmark's workers, the only allocating tasks on the CPU)."""
    text = subprocess.run(["perf", "script", "-i", data, "-F", "pid,ip,sym"],
                          capture_output=True, text=True, check=True).stdout
    if pid is None:
        pids = {b.split()[0] for b in text.split("\n\n")
                if b.strip() and "ext4_mb_new_blocks" in b}
        return tally(text, lambda p: p in pids)
    return tally(text, lambda p: p == str(pid))


def tally(text, keep):
    """[`samples`]'s counts over the samples whose process `keep` accepts."""
    total = walk = alloc = 0
    leaves = {}
    for block in text.split("\n\n"):
        lines = [ln.strip() for ln in block.strip().splitlines()]
        if not lines:
            continue
        head = lines[0].split()
        if not head or not keep(head[0]):
            continue
        frames = [ln.split(None, 1)[1] if " " in ln else "" for ln in lines[1:]]
        syms = [f.split("+")[0] for f in frames]
        total += 1
        if "ext4_mb_new_blocks" in syms:
            alloc += 1
        if "ext4_mb_prefetch" in syms:
            walk += 1
            leaves[syms[0]] = leaves.get(syms[0], 0) + 1
    return total, walk, alloc, leaves


def one_run(img, cpu, warmup, seconds, freq, settle):
    with klab.loopdev(img) as dev, klab.mounted(dev, MNT):
        time.sleep(settle)
        r, w = os.pipe()
        start = time.monotonic()
        until = start + warmup + seconds + 1.0
        pid = os.fork()
        if pid == 0:
            os.close(r)
            worker(MNT, cpu, until, w)
        os.close(w)
        time.sleep(warmup)
        data = "/tmp/klab-prefetch-walk.perf"
        t0 = time.monotonic()
        subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(freq), "-C",
                        str(cpu), "-g", "-o", data, "--", "sleep", str(seconds)],
                       check=True, capture_output=True)
        t1 = time.monotonic()
        with os.fdopen(r) as f:
            ends = json.load(f)
        _, status = os.waitpid(pid, 0)
        if status != 0:
            raise RuntimeError("the fallocate3 task failed (status %d)" % status)
    inside = [e for e in ends if t0 <= e <= t1]
    ops = max(len(inside) - 1, 1)
    op_us = 1e6 * (inside[-1] - inside[0]) / ops if len(inside) > 1 else float("nan")
    total, walk, alloc, leaves = samples(data, pid)
    os.unlink(data)
    res = {
        "ops": len(inside), "op_us": op_us, "samples": total,
        "walk_share": walk / max(total, 1), "alloc_share": alloc / max(total, 1),
        "walk_over_alloc": walk / max(alloc, 1),
        "walk_us_per_op": op_us * walk / max(total, 1),
        "alloc_us_per_op": op_us * alloc / max(total, 1),
        "walk_leaves": dict(sorted(leaves.items(), key=lambda kv: -kv[1])[:8]),
    }
    print("  %d ops, %.0f µs an op, %d samples: walk %.1f %% (%.0f µs), allocator %.1f %% "
          "(%.0f µs); walk leaves %s" % (res["ops"], op_us, total, 100 * res["walk_share"],
                                         res["walk_us_per_op"], 100 * res["alloc_share"],
                                         res["alloc_us_per_op"], res["walk_leaves"]),
          flush=True)
    return res


def fallocate2_run(size_gib, scan, cpu, warmup, seconds, freq):
    """One will-it-scale fallocate2 process (the kernel lab's `fallocate2.c`: 8 KiB
    fallocates to 1 MiB files, then a truncate) on a fresh ext4 image of `size_gib`, pinned to
    `cpu`; `seconds` of it sampled after `warmup`. Returns the walk's share of the
    allocator's samples."""
    klab.sh(["gcc", "-O2", "-Wall", "-o", F2_BIN, os.path.join(klab.__file__.rsplit("/", 1)[0],
                                                              "fallocate2.c")])
    img, mnt = "/tmp/klab-prefetch-walk-f2.img", MNT + "-f2"
    with klab.ext4_image(img, size_gib << 30, mnt, opts="mb_optimize_scan=%d" % scan) as (_, m):
        time.sleep(3.0)
        run = warmup + seconds + 2.0
        p = subprocess.Popen(["taskset", "-c", str(cpu), F2_BIN, "-n", "1", "-t", "%g" % run,
                              "-w", "0", "-d", m, "-c", "8192", "-s", "1048576"],
                             stdout=subprocess.PIPE, text=True)
        time.sleep(warmup)
        data = "/tmp/klab-prefetch-walk-f2.perf"
        subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(freq), "-C",
                        str(cpu), "-g", "-o", data, "--", "sleep", str(seconds)],
                       check=True, capture_output=True)
        ops = json.loads(p.communicate()[0])["total_ops_s"]
    total, walk, alloc, leaves = samples(data, None)
    os.unlink(data)
    res = {"size_gib": size_gib, "mb_optimize_scan": scan, "ops_per_s": ops,
           "samples": total, "alloc_share": alloc / max(total, 1),
           "walk_over_alloc": walk / max(alloc, 1),
           "walk_leaves": dict(sorted(leaves.items(), key=lambda kv: -kv[1])[:8])}
    print("  fallocate2 %d GiB scan=%d: %.0f ops/s, %d samples, allocator %.1f %%, walk / "
          "allocator %.3f" % (size_gib, scan, ops, total, 100 * res["alloc_share"],
                              res["walk_over_alloc"]), flush=True)
    return res


F2_BIN = "/tmp/klab-prefetch-walk-fallocate2"


def fallocate2_main(a):
    """`--fallocate2`: the walk's share in fallocate2 calls, each size and scan, medians."""
    configs = []
    for size in a.fallocate2:
        for scan in a.scan:
            runs = [fallocate2_run(size, scan, a.cpu, a.warmup, a.seconds, a.freq)
                    for _ in range(a.reps)]
            med = statistics.median(r["walk_over_alloc"] for r in runs)
            print("  median walk / allocator %.4f" % med, flush=True)
            configs.append({"size_gib": size, "mb_optimize_scan": scan,
                            "median_walk_over_alloc": med, "runs": runs})
    if a.out:
        write(a.out, "of one will-it-scale fallocate2 process's CPU samples with "
              "ext4_mb_new_blocks on the kernel stack, the share with ext4_mb_prefetch too "
              "(linux-6.18's prefetch walk), perf cpu-clock, fresh images",
              " ".join("--fallocate2 %d" % s for s in a.fallocate2) + " " + " ".join(
                  "--scan %d" % s for s in a.scan) + " --reps %d --warmup %g --seconds %g "
              "--freq %d" % (a.reps, a.warmup, a.seconds, a.freq), configs=configs)


def write(path, what, args, **results):
    """The stored file: what was measured, the command that measured it, the kernel, the
    date, then the results."""
    doc = {"what": what, "command": "python3 scripts/kernel_prefetch_walk.py " + args,
           "kernel": platform.release(), "date": time.strftime("%Y-%m-%d")}
    doc.update(results)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--image", action="append")
    ap.add_argument("--fallocate2", type=int, action="append",
                    help="instead of fallocate3 on images: fallocate2 on a fresh image of "
                         "this many GiB (repeatable)")
    ap.add_argument("--scan", type=int, action="append",
                    help="with --fallocate2: mb_optimize_scan values (repeatable; default 0)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--freq", type=int, default=10000)
    ap.add_argument("--cpu", type=int, default=1)
    ap.add_argument("--settle", type=float, default=8.0,
                    help="seconds after the mount before the task starts")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.fallocate2:
        a.scan = a.scan or [0]
        return fallocate2_main(a)
    if not a.image:
        ap.error("--image or --fallocate2 is needed")
    images = []
    for img in a.image:
        print(img, flush=True)
        runs = [one_run(img, a.cpu, a.warmup, a.seconds, a.freq, a.settle)
                for _ in range(a.reps)]
        med = {k: statistics.median(r[k] for r in runs)
               for k in ("op_us", "walk_share", "alloc_share", "walk_us_per_op",
                         "alloc_us_per_op", "walk_over_alloc")}
        print("  median: %.0f µs an op, walk %.1f µs, allocator %.0f µs, walk / allocator %.3f"
              % (med["op_us"], med["walk_us_per_op"], med["alloc_us_per_op"],
                 med["walk_over_alloc"]), flush=True)
        images.append({"image": img, "size_bytes": os.path.getsize(img), "median": med,
                       "runs": runs})
    if a.out:
        write(a.out, "the share of one fallocate3 task's CPU time with ext4_mb_prefetch on "
              "the kernel stack (linux-6.18's prefetch walk, every bitmap in memory after the "
              "mount's prefetch), sampled with perf cpu-clock",
              " ".join(["--image %s" % i for i in a.image]) + " --reps %d --warmup %g "
              "--seconds %g --freq %d --settle %g" % (a.reps, a.warmup, a.seconds, a.freq,
                                                      a.settle), images=images)


if __name__ == "__main__":
    main()
