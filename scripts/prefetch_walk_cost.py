#!/usr/bin/env python3
"""Builds and runs scripts/prefetch_walk_cost.c: one prefetch-walk step, linux-6.18's against
seed 003's, on kernel-shaped data, with this machine's kernel's return thunk
(scripts/srso_return_thunk.S) and without it. Each build runs `--runs` times (each run the
median of its passes); the medians of the runs go to `--out`.

usage: python3 scripts/prefetch_walk_cost.py [--runs 3] [--groups 6417]
           [--out docs/measurements/prefetch-walk-cost.json]
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LINE = re.compile(r"6\.18 ([\d.]+) ns, seed 003 ([\d.]+) ns per group")


def build(thunk):
    out = "/tmp/prefetch_walk_cost" + ("" if thunk else "_plain")
    cmd = ["gcc", "-O2", "-o", out, os.path.join(HERE, "prefetch_walk_cost.c")]
    if thunk:
        cmd[2:2] = ["-mfunction-return=thunk-extern"]
        cmd.append(os.path.join(HERE, "srso_return_thunk.S"))
    subprocess.run(cmd, check=True)
    return out, " ".join(os.path.relpath(c, os.path.join(HERE, "..")) if c.startswith(HERE)
                         else c for c in cmd)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--groups", type=int, default=6417)
    ap.add_argument("--window", type=int, default=16)
    ap.add_argument("--passes", type=int, default=201)
    ap.add_argument("--out")
    a = ap.parse_args()
    builds = {}
    for thunk in (True, False):
        exe, cmd = build(thunk)
        runs = []
        for _ in range(a.runs):
            text = subprocess.run([exe, str(a.groups), str(a.window), "0", str(a.passes)],
                                  capture_output=True, text=True, check=True).stdout
            m = LINE.search(text)
            runs.append({"ns_618": float(m.group(1)), "ns_seed003": float(m.group(2))})
            print(("thunk " if thunk else "plain ") + text.strip(), flush=True)
        med = {k: statistics.median(r[k] for r in runs) for k in ("ns_618", "ns_seed003")}
        med["seed003_over_618"] = med["ns_seed003"] / med["ns_618"]
        builds["return_thunk" if thunk else "plain"] = {"build": cmd, "median": med,
                                                         "runs": runs}
        print("  median %.2f / %.2f ns, ratio %.3f" % (med["ns_618"], med["ns_seed003"],
                                                      med["seed003_over_618"]), flush=True)
    if a.out:
        vuln = "/sys/devices/system/cpu/vulnerabilities/spec_rstack_overflow"
        doc = {
            "what": "one ext4_mb_prefetch step per group on kernel-shaped data (two-level "
                    "group-info pointer table, 192-byte group infos in one slab, 64-byte "
                    "descriptors in 4 KiB buffers, out-of-line lookups under an rcu nesting "
                    "count), every mark set: linux-6.18 (descriptor + group info, locked "
                    "test-and-set) against seed 003 (group info, test)",
            "command": "python3 scripts/prefetch_walk_cost.py --runs %d --groups %d "
                       "--window %d --passes %d" % (a.runs, a.groups, a.window, a.passes),
            "kernel": platform.release(),
            "spec_rstack_overflow": open(vuln).read().strip() if os.path.exists(vuln) else None,
            "cpu": next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo")
                         if ln.startswith("model name")), None),
            "date": time.strftime("%Y-%m-%d"),
            "builds": builds,
        }
        with open(a.out, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
