#!/usr/bin/env python3
"""Prints the table of docs/size-classes.md ("Against the real kernels") from the stored
real-kernel runs and the lab.

usage: size_classes_table.py [MBALLOC_BINARY]   (default target/release/mballoc)

Real columns: the medians of `kernel-frag/reference.json` (ext4: 9 runs, btrfs: 3), with the
lowest and highest run's frag_pct_mean in brackets. Lab columns: the medians over seeds 1-9 of
`mballoc run TEST --policy P --fs-size 8G --set scale=0.5 --seed N --json`, each figure's
median taken on its own. Cells: frag_pct_mean / fragmented data groups of data groups /
extents per file. "goal met" applies the rule of `crates/mballoc-lab/tests/size_classes_goal.rs`
(groups and extents on every seed, frag_pct_mean by the median).
"""
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
TESTS = ["bufferedappendvsfallocate", "correlatedlifetimes", "mixedlifetimes", "foursizes",
         "funnysizeshigh", "funnysizeslow"]
SEEDS = range(1, 10)


def lab(binary, test, policy):
    runs = []
    for seed in SEEDS:
        out = subprocess.run([binary, "run", test, "--policy", policy, "--fs-size", "8G",
                              "--set", "scale=0.5", "--seed", str(seed), "--json", "-q"],
                             capture_output=True, text=True, check=True).stdout
        runs.append(json.loads(out.splitlines()[0]))
    return runs


def med(runs, key):
    return statistics.median(r[key] for r in runs)


def cell(m, spread=None):
    s = "%.2f" % m["frag_pct_mean"]
    if spread:
        s += " [%.2f–%.2f]" % spread
    return "%s / %g of %g / %.2f" % (s, m["fragmented_bg_count"], m["data_bg_count"],
                                     m["extents_per_file"])


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target/release/mballoc")
    ref = json.load(open(os.path.join(ROOT, "kernel-frag/reference.json")))["tests"]
    print("| test | real ext4 6.18 (9 runs) | real btrfs 6.18 (3 runs) | lab `linux-6.18` "
          "| lab `proposed` | goal met |")
    print("|---|---|---|---|---|---|")
    keys = ["frag_pct_mean", "fragmented_bg_count", "data_bg_count", "extents_per_file"]
    for t in TESTS:
        e, b = ref[t]["ext4"], ref[t]["btrfs"]
        ext4_frags = [r["frag_pct_mean"] for r in e["runs"]]
        l = lab(binary, t, "linux-6.18")
        p = lab(binary, t, "proposed")
        lm = {k: med(l, k) for k in keys}
        pm = {k: med(p, k) for k in keys}
        goal = (all(r["fragmented_bg_count"] <= b["median"]["fragmented_bg_count"] for r in p)
                and all(r["extents_per_file"] <= e["median"]["extents_per_file"] for r in p)
                and pm["frag_pct_mean"] <= min(e["median"]["frag_pct_mean"],
                                               b["median"]["frag_pct_mean"]))
        print("| %s | %s | %s | %s | %s | %s |" % (
            t, cell(e["median"], (min(ext4_frags), max(ext4_frags))), cell(b["median"]),
            cell(lm), cell(pm), "yes" if goal else "no"))


if __name__ == "__main__":
    main()
