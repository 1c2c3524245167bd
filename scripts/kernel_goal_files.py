#!/usr/bin/env python3
"""Seed 000's claim on files on the real kernel: how often a fallocate2 call starts a new
extent with one stream goal and with two.

6.18's ext4_mb_init sets `s_mb_nr_global_goals` to min(possible CPUs, groups / 4, rounded
up). On a machine with two possible CPUs a 512 MiB file system (4 groups of 4 KiB blocks)
gets one goal, the kernel before seed 000; a 2 GiB one (16 groups) gets two, one a process
(the goal is the inode number modulo the count, and the two processes' files take
consecutive inode numbers). For each size and process count: a fresh ext4 loop image
mounted with `mb_optimize_scan=0` (a 512 MiB file system turns the lists off by itself;
both sizes walk the groups alike), will-it-scale's fallocate2 loop (1 MiB files, 8 KiB
calls; `-t 3 -w 1`), and 0.5 s into the counted part a 0.5 s window of `ext4_mballoc_alloc`
events. A call whose result starts at its original goal (`orig` group/start = `result`
group/start) grew its file's last extent or began an empty file; any other started a new
extent. Each configuration REPS times on a fresh image; prints the share of calls that
started a new extent and writes every count to OUT, with the load average before each run:
run it on an otherwise idle machine, since a process that another job preempts makes its
calls in bursts and so takes the other's next block less often.

Needs root, tracefs, a built fallocate2 (`gcc -O2 -o /tmp/klab-fallocate2
../shared/kernel-lab/fallocate2.c`) and the kernel lab's klab.py (`../shared/kernel-lab`,
or KLAB_DIR).

usage: sudo python3 scripts/kernel_goal_files.py OUT [REPS] [BENCH]
"""
import json, os, re, statistics, sys, threading, time
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("KLAB_DIR", os.path.join(HERE, "../../shared/kernel-lab")))
import klab  # noqa: E402

T = "/sys/kernel/tracing/instances/mballoc-goal-files"
SIZES = {"512M": 512 << 20, "2G": 2 << 30}
EVENTS = ("ext4_mballoc_alloc", "ext4_mballoc_prealloc")
EV = re.compile(r"(ext4_mballoc_(?:alloc|prealloc)): .*?orig (\d+)/(\d+)/\d+@\d+ "
                r"(?:goal \d+/-?\d+/\d+@\d+ )?result (\d+)/(\d+)/\d+@\d+")


def window(length, delay):
    time.sleep(delay)
    for e in EVENTS:
        klab.write(T + "/events/ext4/%s/enable" % e, 1)
    klab.write(T + "/tracing_on", 1)
    time.sleep(length)
    klab.write(T + "/tracing_on", 0)
    for e in EVENTS:
        klab.write(T + "/events/ext4/%s/enable" % e, 0)


def count(text):
    """Per event kind: (calls, calls that started a new extent); and the groups the results
    landed in."""
    kinds = {e: [0, 0] for e in EVENTS}
    groups = set()
    for m in EV.finditer(text):
        kind = m.group(1)
        og, os_, rg, rs = (int(x) for x in m.groups()[1:])
        kinds[kind][0] += 1
        kinds[kind][1] += (og, os_) != (rg, rs)
        groups.add(rg)
    return kinds, len(groups)


def run(size, n, bench):
    load = float(open("/proc/loadavg").read().split()[0])
    with klab.ext4_image("/tmp/goal-files.img", SIZES[size], "/mnt/goal-files",
                         opts="mb_optimize_scan=0", mkfs_extra=["-b", "4096"]) as (_dev, mnt):
        time.sleep(0.5)
        os.makedirs(T, exist_ok=True)
        klab.write(T + "/tracing_on", 0)
        klab.write(T + "/buffer_size_kb", 65536)
        klab.write(T + "/trace", "")
        th = threading.Thread(target=window, args=(0.5, 1.5))
        th.start()
        out = json.loads(klab.sh([bench, "-n", str(n), "-t", "3", "-w", "1", "-d", mnt,
                                  "-c", "8192", "-s", "1048576"]))
        th.join()
        kinds, landed = count(klab.read(T + "/trace"))
        klab.write(T + "/trace", "")
    calls = sum(k[0] for k in kinds.values())
    new = sum(k[1] for k in kinds.values())
    return {"size": size, "processes": n, "load_before": load, "ops_s": out["total_ops_s"],
            "calls": calls,
            "new_extents": new, "new_extents_per_call": new / calls if calls else None,
            "by_event": {e: {"calls": k[0], "new_extents": k[1]} for e, k in kinds.items()},
            "result_groups": landed}


def main():
    out = sys.argv[1]
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    bench = sys.argv[3] if len(sys.argv) > 3 else "/tmp/klab-fallocate2"
    runs = []
    for size in SIZES:
        for n in (1, 2):
            for r in range(reps):
                res = run(size, n, bench)
                res["rep"] = r
                runs.append(res)
                print("%-4s %d processes rep %d: %6d calls traced, new extents a call %.4f, "
                      "%d groups, %.0f ops/s" % (size, n, r, res["calls"],
                                                  res["new_extents_per_call"] or 0,
                                                  res["result_groups"], res["ops_s"]), flush=True)
    medians = {}
    for size in SIZES:
        for n in (1, 2):
            v = [x["new_extents_per_call"] for x in runs if x["size"] == size and x["processes"] == n]
            medians["%s/%d" % (size, n)] = statistics.median(v)
    doc = {
        "what": "share of fallocate2 calls that started a new extent (ext4_mballoc_alloc result "
                "not at its original goal), one stream goal (512 MiB: 4 groups) against two "
                "(2 GiB: 16 groups), 1 and 2 processes, mb_optimize_scan=0",
        "command": "sudo python3 scripts/kernel_goal_files.py OUT %d" % reps,
        "kernel": os.uname().release,
        "possible_cpus": open("/sys/devices/system/cpu/possible").read().strip(),
        "medians": medians,
        "runs": runs,
    }
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(json.dumps(medians))
    try:
        os.rmdir(T)
    except OSError:
        pass


if __name__ == "__main__":
    main()
