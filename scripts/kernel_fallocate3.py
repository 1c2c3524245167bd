#!/usr/bin/env python3
"""The real kernel's will-it-scale fallocate3 on a large, aged ext4 file system, one task.

Seed 003's tables are fallocate3 (open-s4c fork, `tests/fallocate3.c`) on big, mostly full
file systems. This script gives the same operation on this machine's kernel: a sparse loop
image of `--size-gib` (default 802, the seed's "802G, 68 % used"), filled with files of
1-16 MiB (`fallocate`, random sizes from `--seed`) until `--fill` of it is in use, then files
removed at random until `--used` is in use, unmounted; then `--reps` times: mount (cold),
one task loops `open(O_WRONLY|O_CREAT|O_TRUNC)`, `fallocate(fd, FALLOC_FL_KEEP_SIZE, 0,
73819750)`, `close` for `--warmup` seconds, then counts its operations for `--seconds`;
umount. The median ops/s is the figure. With `--tasks 1,2,4,...`, each repetition mounts cold
once per task count (the counts' order rotated each repetition) and runs that many processes,
each on its own file (`willitscale.N`), all started together; a count's figure is the sum of
its tasks' rates over the same window, as will-it-scale sums its processes. The image is kept (`--image`) so that the lab can
read the same layout (`mballoc bench threads --calibrate --seed003-image IMAGE`).

Needs root and a loop device. Not used by the tests: CI never mounts anything.

usage: sudo python3 scripts/kernel_fallocate3.py [--size-gib 802] [--used 0.68] [--reps 3]
                                                 [--tasks 1,2,4,8,16] [--trace SECONDS]
                                                 [--out docs/measurements/kernel-fallocate3.json]
"""
import argparse
import ctypes
import json
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("KLAB_DIR", os.path.join(HERE, "../../shared/kernel-lab")))
import klab  # noqa: E402

sys.path.insert(0, HERE)
import kernel_fallocate2_cycles as cycles  # noqa: E402

MOUNT = "/mnt/klab-fallocate3"
FILESIZE = 73819750  # fallocate3.c's FILESIZE
FALLOC_FL_KEEP_SIZE = 1
MIB = 1 << 20

libc = ctypes.CDLL("libc.so.6", use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]


def used_share(mnt):
    st = os.statvfs(mnt)
    return 1.0 - st.f_bfree / st.f_blocks


def fill(mnt, seed, fill_to, used):
    """Files of 1-16 MiB until `fill_to` is in use, then random removals down to `used`."""
    rng = random.Random(seed)
    names = []
    d = None
    t0 = time.time()
    while used_share(mnt) < fill_to:
        if len(names) % 1000 == 0:
            d = os.path.join(mnt, "fill%04d" % (len(names) // 1000))
            os.makedirs(d, exist_ok=True)
        name = os.path.join(d, "f%d" % len(names))
        fd = os.open(name, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.posix_fallocate(fd, 0, rng.randint(1, 16) * MIB)
        except OSError:
            os.close(fd)
            os.unlink(name)
            break
        os.close(fd)
        names.append(name)
    klab.log("filled %d files to %.3f in %.0f s" % (len(names), used_share(mnt), time.time() - t0))
    rng.shuffle(names)
    removed = 0
    while names and used_share(mnt) > used:
        os.unlink(names.pop())
        removed += 1
    klab.log("removed %d files: %.3f in use" % (removed, used_share(mnt)))
    return {"files_made": len(names) + removed, "files_removed": removed,
            "used_share": used_share(mnt)}


def fallocate3(mnt, warmup, seconds):
    """One task's loop; ops/s over `seconds` after `warmup` seconds."""
    path = os.path.join(mnt, "willitscale.0")

    def op():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        if libc.fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, FILESIZE) != 0:
            e = ctypes.get_errno()
            os.close(fd)
            raise OSError(e, os.strerror(e))
        os.close(fd)

    end = time.perf_counter() + warmup
    warm = 0
    while time.perf_counter() < end:
        op()
        warm += 1
    n = 0
    t0 = time.perf_counter()
    end = t0 + seconds
    while time.perf_counter() < end:
        op()
        n += 1
    return warm, n / (time.perf_counter() - t0)


def tasks_rate(mnt, n, warmup, seconds, window=None):
    """`n` processes, each fallocate3's loop on its own file, started together: after
    `warmup` seconds each counts its operations for `seconds`. Returns each task's ops/s and
    when they started (`time.perf_counter`, the monotonic clock). `window(at, seconds)`, if
    given, runs in this process while they do (a trace over the counted seconds)."""
    start = time.perf_counter() + 0.2
    pipes, pids = [], []
    for i in range(n):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            code = 0
            try:
                path = os.path.join(mnt, "willitscale.%d" % i)
                while time.perf_counter() < start:
                    pass
                counting, end = start + warmup, start + warmup + seconds
                ops = 0
                while True:
                    now = time.perf_counter()
                    if now >= end:
                        break
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                    if libc.fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, FILESIZE) != 0:
                        raise OSError(ctypes.get_errno(), "fallocate")
                    os.close(fd)
                    ops += now >= counting
                os.write(w, json.dumps({"ops": ops, "s": time.perf_counter() - counting}).encode())
            except BaseException as e:  # noqa: BLE001 - reported to the parent
                os.write(w, json.dumps({"error": repr(e)}).encode())
                code = 1
            os._exit(code)
        os.close(w)
        pipes.append(r)
        pids.append(pid)
    if window:
        window(start + warmup, seconds)
    rates = []
    for r, pid in zip(pipes, pids):
        with os.fdopen(r) as f:
            got = json.loads(f.read() or '{"error": "no report"}')
        os.waitpid(pid, 0)
        if "error" in got:
            raise RuntimeError("task: %s" % got["error"])
        rates.append(got["ops"] / got["s"])
    for i in range(n):
        os.unlink(os.path.join(mnt, "willitscale.%d" % i))
    return rates, start


def curve(image, counts, reps, scan, warmup, seconds, commits=False):
    """Per task count: each repetition's total ops/s and per-task rates, cold mounts. With
    `commits`, also jbd2's commits of the run (`kernel_fallocate2_cycles.commits`), their
    starts in seconds from the tasks' start."""
    out = {n: [] for n in counts}
    opts = "noinit_itable,mb_optimize_scan=%d" % scan
    for r in range(reps):
        order = counts[r % len(counts):] + counts[:r % len(counts)]
        for n in order:
            with klab.loopdev(image) as dev, klab.mounted(dev, MOUNT, "ext4", opts):
                if commits:
                    cycles.arm()
                rates, start = tasks_rate(MOUNT, n, warmup, seconds)
                c = cycles.commits(cycles.disarm(), dev) if commits else None
            run = {"ops_per_s": sum(rates), "per_task": rates}
            if c:
                c["starts"] = [round(t - start, 4) for t in c["starts"]]
                run["commits"] = c
            klab.log("rep %d, %d tasks: %.1f ops/s%s" % (
                r + 1, n, sum(rates), " commits at %s s" % c["starts"] if c else ""))
            out[n].append(run)
    return [{"tasks": n, "runs": out[n],
             "median_ops_per_s": statistics.median(x["ops_per_s"] for x in out[n])}
            for n in counts]


EV_RE = re.compile(r"-(\d+)\s+\[\d+\].*?\s(\d+\.\d+): "
                   r"(ext4_request_blocks|ext4_allocate_blocks|ext4_mballoc_alloc):(.*)")
EVENTS = ["ext4:ext4_request_blocks", "ext4:ext4_allocate_blocks", "ext4:ext4_mballoc_alloc"]


def allocator_time(text):
    """Per task (pid): allocator calls, seconds inside `ext4_mb_new_blocks` (entry to exit,
    the mono clock) and groups scanned, summed over the tasks."""
    calls, inside, grps, start = 0, 0.0, 0, {}
    for line in text.splitlines():
        m = EV_RE.search(line)
        if not m:
            continue
        pid, ts, ev, rest = m.group(1), float(m.group(2)), m.group(3), m.group(4)
        if ev == "ext4_request_blocks":
            start[pid] = ts
        elif ev == "ext4_allocate_blocks" and pid in start:
            calls += 1
            inside += ts - start.pop(pid)
        elif ev == "ext4_mballoc_alloc":
            g = re.search(r"grps (\d+)", rest)
            grps += int(g.group(1)) if g else 0
    return calls, inside, grps


def traced_tasks(image, n, scan, warmup, seconds):
    """`n` tasks as `curve` runs them, the allocator's tracepoints on over the counted
    seconds: per operation of all tasks, the allocator calls, the time inside
    `ext4_mb_new_blocks` and the groups scanned."""
    opts = "noinit_itable,mb_optimize_scan=%d" % scan
    with klab.loopdev(image) as dev, klab.mounted(dev, MOUNT, "ext4", opts):
        with klab.TraceInstance(EVENTS, filt="dev == %d" % klab.dev_t(dev),
                                name="klab-f3", buffer_kb=65536) as t:
            def window(at, secs):
                while time.perf_counter() < at:
                    time.sleep(0.001)
                t.on()
                time.sleep(secs)
                t.off()
            rates, _ = tasks_rate(MOUNT, n, warmup, seconds, window)
            text = klab.read(t.p("trace"))
            lost = t.overruns()
    ops = sum(rates) * seconds
    calls, inside, grps = allocator_time(text)
    return {"tasks": n, "ops_per_s": sum(rates), "ops": ops, "lost_events": lost,
            "allocator_calls": calls, "calls_per_op": calls / max(ops, 1),
            "allocator_us_per_op": 1e6 * inside / max(ops, 1),
            "groups_scanned_per_op": grps / max(ops, 1)}


def traced_window(mnt, dev, warmup, seconds):
    """After `warmup` seconds of operations, `seconds` more with the allocator's entry and
    exit tracepoints and `ext4_mballoc_alloc` on: per operation, the allocator calls, the time
    inside `ext4_mb_new_blocks` (entry to exit, the mono clock) and the groups scanned."""
    path = os.path.join(mnt, "willitscale.0")
    fallocate3(mnt, warmup, 0.0)
    with klab.TraceInstance(EVENTS, filt="dev == %d" % klab.dev_t(dev), name="klab-f3") as t:
        t.on()
        t0 = time.perf_counter()
        ops = 0
        end = t0 + seconds
        while time.perf_counter() < end:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            libc.fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, FILESIZE)
            os.close(fd)
            ops += 1
        wall = time.perf_counter() - t0
        t.off()
        text = klab.read(t.p("trace"))
        lost = t.overruns()
    calls, inside, grps = allocator_time(text)
    return {"ops": ops, "wall_s": wall, "lost_events": lost, "allocator_calls": calls,
            "calls_per_op": calls / max(ops, 1),
            "allocator_us_per_op": 1e6 * inside / max(ops, 1),
            "op_us": 1e6 * wall / max(ops, 1),
            "groups_scanned_per_op": grps / max(ops, 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size-gib", type=int, default=802)
    ap.add_argument("--used", type=float, default=0.68)
    ap.add_argument("--fill", type=float, default=0.98)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--image", default="/tmp/klab-fallocate3.img")
    ap.add_argument("--scan", type=int, default=1, help="mb_optimize_scan")
    ap.add_argument("--reuse", action="store_true", help="measure on an existing --image")
    ap.add_argument("--trace", type=float, default=0.0,
                    help="seconds of one more run with the allocator's tracepoints on")
    ap.add_argument("--tasks", help="task counts, e.g. 1,2,4,8,16: the curve instead of --reps "
                    "one-task runs")
    ap.add_argument("--trace-tasks",
                    help="task counts, e.g. 2,8: one more run each with the allocator's "
                    "tracepoints on over its counted seconds")
    ap.add_argument("--commits", action="store_true",
                    help="with --tasks: trace jbd2's commits of each run (when each began)")
    ap.add_argument("--out")
    a = ap.parse_args()
    layout = None
    if not a.reuse:
        if os.path.exists(a.image):
            os.unlink(a.image)  # a fresh sparse file: no blocks of an earlier image left
        with open(a.image, "wb") as f:
            f.truncate(a.size_gib << 30)
        klab.sh(["mkfs.ext4", "-q", "-F", "-E",
                 "lazy_itable_init=1,lazy_journal_init=1,nodiscard", a.image])
        with klab.loopdev(a.image) as dev, klab.mounted(dev, MOUNT, "ext4", "noinit_itable"):
            layout = fill(MOUNT, a.seed, a.fill, a.used)
    runs = []
    counts = [int(x) for x in a.tasks.split(",")] if a.tasks else []
    tasks = (curve(a.image, counts, a.reps, a.scan, a.warmup, a.seconds, a.commits)
             if counts else None)
    for r in range(0 if counts else a.reps):
        opts = "noinit_itable,mb_optimize_scan=%d" % a.scan
        with klab.loopdev(a.image) as dev, klab.mounted(dev, MOUNT, "ext4", opts):
            warm, rate = fallocate3(MOUNT, a.warmup, a.seconds)
            os.unlink(os.path.join(MOUNT, "willitscale.0"))
            klab.log("rep %d: %.1f ops/s (%d warm-up ops)" % (r + 1, rate, warm))
            runs.append({"ops_per_s": rate, "warmup_ops": warm, "mb_optimize_scan": a.scan})
    trace = None
    if a.trace:
        opts = "noinit_itable,mb_optimize_scan=%d" % a.scan
        with klab.loopdev(a.image) as dev, klab.mounted(dev, MOUNT, "ext4", opts):
            trace = traced_window(MOUNT, dev, a.warmup, a.trace)
            os.unlink(os.path.join(MOUNT, "willitscale.0"))
        klab.log("traced: %s" % trace)
    traced_tasks_runs = []
    for n in [int(x) for x in a.trace_tasks.split(",")] if a.trace_tasks else []:
        traced_tasks_runs.append(traced_tasks(a.image, n, a.scan, a.warmup, a.seconds))
        klab.log("traced, %d tasks: %s" % (n, traced_tasks_runs[-1]))
    out = {
        "what": "will-it-scale fallocate3 (open-s4c tests/fallocate3.c loop), %s, real ext4, "
                "cold mount per run" % ("tasks " + a.tasks if counts else "one task"),
        "command": "sudo python3 scripts/kernel_fallocate3.py " + " ".join(sys.argv[1:]),
        "kernel": platform.release(),
        "size_gib": a.size_gib,
        "used": a.used,
        "fill": a.fill,
        "seed": a.seed,
        "layout": layout,
        "warmup_s": a.warmup,
        "seconds": a.seconds,
        "runs": runs,
        "tasks": tasks,
        "cpus": os.cpu_count(),
        "traced": trace,
        "traced_tasks": traced_tasks_runs or None,
        "median_ops_per_s": statistics.median(r["ops_per_s"] for r in runs) if runs else None,
    }
    text = json.dumps(out, indent=2)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
