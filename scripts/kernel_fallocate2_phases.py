#!/usr/bin/env python3
"""Where the real kernel's fallocate2 call spends its time at 1 to N processes.

The 16-core kernel's per-process rate falls to 0.17 of one process's at 16 processes, while
its allocator's own time and its lock waits explain only part of the fall (docs/vcpus/kernel-16-core.md,
"Checked against a 16-core kernel"). This script cuts each `fallocate` and `ftruncate`
system call into the stretches between the tracepoints it passes (system call entry,
`ext4_fallocate_enter`, `ext4_journal_start_inode`, `jbd2_handle_start`,
`ext4_ext_map_blocks_enter`, `ext4_request_blocks`, `ext4_allocate_blocks`,
`ext4_ext_map_blocks_exit`, `ext4_mark_inode_dirty`, `ext4_fallocate_exit`, system call exit;
in truncates also `ext4_truncate_enter/exit` and `ext4_free_blocks`) and reports the mean time
of each stretch per call at each process count, so the stretch that grows is named.

It also counts the extents a truncate frees (`ext4_free_blocks` events per `ftruncate`), and,
with `--linear`, runs the throughput at the given process counts with `mb_optimize_scan=1`
and `mb_max_linear_groups` set to each listed value through sysfs after mounting (the
device's default is recorded beside it, with the loop device's and its backing disk's
`rotational`).

Each run gets a fresh 4 GiB ext4 loop image (`mb_optimize_scan` as given). Tracepoints cost
time of their own (about 0.1 µs each, on the CPU that hits them, no shared lines): the
stretches are for comparing process counts, not for absolute call times. Needs root, tracefs,
a built fallocate2 (`--bench`), and the kernel lab's klab.py (`../shared/kernel-lab`, or the
folder named by KLAB_DIR). Not used by the tests: CI never mounts anything.

usage: sudo python3 scripts/kernel_fallocate2_phases.py --bench BIN [--workers 1,2,4,8,16]
           [--scan 1] [--window 0.05] [--linear 0,4 --linear-workers 8,16 --reps 3]
           [--out FILE]
"""
import argparse
import collections
import json
import os
import re
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("KLAB_DIR", os.path.join(HERE, "../../shared/kernel-lab")))
import klab  # noqa: E402
sys.path.insert(0, HERE)
import kernel_alloc_time as kat  # noqa: E402

T = "/sys/kernel/tracing/instances/mballoc-phases"
IMAGE, MOUNT = "/tmp/klab-phases.img", "/mnt/klab-phases"
# x86-64 system call numbers
SYS_FALLOCATE, SYS_FTRUNCATE = 285, 77
EXT4 = ("ext4_fallocate_enter", "ext4_journal_start_inode", "ext4_ext_map_blocks_enter",
        "ext4_request_blocks", "ext4_allocate_blocks", "ext4_ext_map_blocks_exit",
        "ext4_mark_inode_dirty", "ext4_fallocate_exit", "ext4_truncate_enter",
        "ext4_truncate_exit", "ext4_free_blocks")
JBD2 = ("jbd2_handle_start",)


def events():
    """The events this kernel has, as paths under the instance's events folder."""
    os.makedirs(T, exist_ok=True)
    have = []
    for sys_, names in (("ext4", EXT4), ("jbd2", JBD2)):
        for n in names:
            if os.path.exists("%s/events/%s/%s" % (T, sys_, n)):
                have.append("%s/%s" % (sys_, n))
    return have + ["raw_syscalls/sys_enter", "raw_syscalls/sys_exit"]


def arm(evs):
    os.makedirs(T, exist_ok=True)
    klab.write(T + "/tracing_on", 0)
    klab.write(T + "/buffer_size_kb", 32768)
    klab.write(T + "/trace_clock", "x86-tsc")
    klab.write(T + "/trace", "")
    flt = "id == %d || id == %d" % (SYS_FALLOCATE, SYS_FTRUNCATE)
    klab.write(T + "/events/raw_syscalls/sys_enter/filter", flt)
    klab.write(T + "/events/raw_syscalls/sys_exit/filter", flt)
    for e in evs:
        klab.write("%s/events/%s/enable" % (T, e), 1)


def disarm(evs):
    for e in evs:
        klab.write("%s/events/%s/enable" % (T, e), 0)
    for e in ("sys_enter", "sys_exit"):
        klab.write("%s/events/raw_syscalls/%s/filter" % (T, e), "0")


def stretches(text, hz):
    """Per system call kind: calls, mean whole time, mean time of each stretch between two
    consecutive events (repeated events numbered), and free_blocks events per call."""
    open_ = {}  # pid -> [kind, [(name, ts), ...]]
    acc = {k: {"calls": 0, "ns": 0.0, "stretch": collections.Counter(),
               "free_blocks": 0, "freed_blocks": 0} for k in ("fallocate", "ftruncate")}
    for pid, secs, name, rest in kat.trace_events(text, hz):
        ts = secs * 1e9
        if name == "sys_enter":
            kind = "fallocate" if "NR %d " % SYS_FALLOCATE in rest else "ftruncate"
            open_[pid] = [kind, [("enter", ts)]]
            continue
        if pid not in open_:
            continue
        kind, seq = open_[pid]
        if name == "sys_exit":
            seq.append(("exit", ts))
            a = acc[kind]
            a["calls"] += 1
            a["ns"] += ts - seq[0][1]
            seen = collections.Counter()
            for (n0, t0), (n1, t1) in zip(seq, seq[1:]):
                seen[n1] += 1
                tag = n1 if seen[n1] == 1 else "%s#%d" % (n1, seen[n1])
                a["stretch"]["%s > %s" % (n0, tag)] += t1 - t0
            a["free_blocks"] += sum(1 for n, _ in seq if n == "ext4_free_blocks")
            del open_[pid]
            continue
        if name == "ext4_free_blocks":
            m = re.search(r"count (\d+)", rest)
            acc[kind]["freed_blocks"] += int(m.group(1)) if m else 0
        seq.append((name, ts))
    out = {}
    for kind, a in acc.items():
        c = max(a["calls"], 1)
        out[kind] = {"calls": a["calls"], "mean_ns": a["ns"] / c,
                     "stretch_ns": {k: v / c for k, v in sorted(a["stretch"].items(),
                                                              key=lambda kv: -kv[1])},
                     "free_blocks_events_per_call": a["free_blocks"] / c,
                     "freed_blocks_per_call": a["freed_blocks"] / c}
    return out


def phases(bench, n, scan, length, hz):
    with klab.ext4_image(IMAGE, 4 << 30, MOUNT, opts="mb_optimize_scan=%d" % scan) as (_d, mnt):
        time.sleep(1)  # let mount-time bitmap prefetch settle
        evs = events()
        arm(evs)
        th = threading.Thread(target=kat.window, args=(2.0, length, T))
        th.start()
        out = json.loads(klab.sh([bench, "-n", str(n), "-t", "3", "-w", "1", "-d", mnt,
                                  "-c", "8192", "-s", "1048576"]))
        th.join()
        disarm(evs)
        text = klab.read(T + "/trace")
        klab.write(T + "/trace", "")
    res = {"workers": n, "scan": scan, "window_s": length, "traced_ops_s": out["total_ops_s"],
           "events": evs}
    res.update(stretches(text, hz))
    f = res["fallocate"]
    print("n %2d scan %d: %.0f ops/s traced, fallocate %.0f ns (%d calls), ftruncate %.0f ns, "
          "%.1f extents freed a truncate" % (n, scan, out["total_ops_s"], f["mean_ns"], f["calls"],
                                             res["ftruncate"]["mean_ns"],
                                             res["ftruncate"]["free_blocks_events_per_call"]),
          flush=True)
    for k, v in list(f["stretch_ns"].items())[:8]:
        print("      %8.0f ns  %s" % (v, k))
    return res


def rotational(dev):
    def rd(p):
        try:
            return klab.read(p).strip()
        except OSError:
            return None
    return {b: rd("/sys/block/%s/queue/rotational" % b) for b in os.listdir("/sys/block")
            if b.startswith(("vd", "sd", "nvme", "xvd", os.path.basename(dev)))}


def linear_run(bench, n, linear, seconds):
    with klab.ext4_image(IMAGE, 4 << 30, MOUNT, opts="mb_optimize_scan=1") as (dev, mnt):
        knob = "/sys/fs/ext4/%s/mb_max_linear_groups" % klab.devname(dev)
        default = int(klab.read(knob))
        rot = rotational(dev)
        if linear is not None:
            klab.write(knob, linear)
        time.sleep(1)
        out = json.loads(klab.sh([bench, "-n", str(n), "-t", str(seconds), "-w", "1", "-d", mnt,
                                  "-c", "8192", "-s", "1048576"]))
    return {"workers": n, "linear": linear, "default_linear": default, "rotational": rot,
            "total_ops_s": out["total_ops_s"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True)
    ap.add_argument("--workers", default="1,2,4,8,16")
    ap.add_argument("--scan", type=int, default=1)
    ap.add_argument("--window", type=float, default=0.05)
    ap.add_argument("--linear", default="")
    ap.add_argument("--linear-workers", default="8,16")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=2)
    ap.add_argument("--out", default="/tmp/kernel_fallocate2_phases.json")
    a = ap.parse_args()
    hz = kat.tsc_hz()
    result = {"kernel": os.uname().release, "args": vars(a), "tsc_hz": hz, "phases": [],
              "linear": []}

    def save():
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)

    for n in [int(w) for w in a.workers.split(",") if w]:
        result["phases"].append(phases(a.bench, n, a.scan, a.window, hz))
        save()
    linears = [int(x) for x in a.linear.split(",") if x != ""]
    for rep in range(a.reps if linears else 0):  # rep-major: host drift falls on all alike
        for n in [int(w) for w in a.linear_workers.split(",")]:
            for lin in linears:
                r = linear_run(a.bench, n, lin, a.seconds)
                r["rep"] = rep
                result["linear"].append(r)
                print(json.dumps(r), flush=True)
                save()
    if result["linear"]:
        table = collections.defaultdict(list)
        for r in result["linear"]:
            table[(r["workers"], r["linear"])].append(r["total_ops_s"])
        result["linear_median_ops_s"] = {"%d/%d" % k: statistics.median(v)
                                         for k, v in sorted(table.items())}
        print(json.dumps(result["linear_median_ops_s"]))
    save()


if __name__ == "__main__":
    main()
