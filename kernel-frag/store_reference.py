#!/usr/bin/env python3
"""Store real-kernel fsperf fragmentation runs as the lab's reference data.

usage: store_reference.py RESULTS_DIR [--out-dir kernel-frag] [--command CMD]

RESULTS_DIR holds one JSON per run, <test>__<fs>__r<rep>.json, as written by the
fragmentation runner (run_frag.py: fresh loop image, mkfs, mount, fio with the
scaled job files of jobs/, syncfs, unmount, filefrag, offline analysis).

Writes
  OUT/reference.json   per test and file system: the median over the runs of every
                       figure the lab can compare (and each run's values);
  OUT/runs/*.json      each run, trimmed: btrfs per-extent filefrag records and
                       every group's free-extent list are dropped (up to 700 KiB a run),
                       e2freefrag's raw text too; everything else is kept.
"""
import argparse
import glob
import json
import os
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))


def appender_job(r):
    """fio's group of the kept buffered appenders (new_group=1: groupid 1)."""
    for j in r["fio_json"]["jobs"]:
        if j["groupid"] == 1 or j["sync"]["lat_ns"]["N"] > 0:
            return j
    return None


def figures(r):
    a = r["analysis"]
    s = a["summary"]
    ff = r["filefrag_summary"]
    m = {
        "frag_pct_mean": s["frag_pct_mean"],
        "frag_pct_p50": s["frag_pct_p50"],
        "frag_pct_p95": s["frag_pct_p95"],
        "frag_pct_max": s["frag_pct_max"],
        "fragmented_bg_count": s["fragmented_bg_count"],
        "data_bg_count": s["data_bg_count"],
        "bg_count": s["bg_count"],
        "files": ff["files"],
        "extents_per_file": ff["avg_extents_per_file"],
        "extents_per_file_max": ff["max_extents_per_file"],
        "avg_extent_kb": ff["avg_extent_kb"],
        "wall_s": r["fio_run"]["wall_s"],
    }
    if r["fs"] == "ext4":
        e = a["e2freefrag"]
        m["free_extents"] = e.get("num_free_extents")
        m["avg_free_extent_kb"] = e.get("avg_free_extent_kb")
        m["max_free_extent_kb"] = e.get("max_free_extent_kb")
        m["free_blocks"] = e.get("free_blocks")
    else:
        d = a["data_bg_free_extents_summary"]
        m["free_extents"] = d["num_free_extents"]
        m["avg_free_extent_kb"] = d["avg_free_extent_kb"]
        m["max_free_extent_kb"] = d["max_free_extent_kb"]
        m["free_blocks"] = d["free_blocks"]
    j = appender_job(r)
    if j is not None:
        m["append_writes"] = j["write"]["total_ios"]
        m["append_write_lat_ns_mean"] = j["write"]["lat_ns"]["mean"]
        m["append_sync_lat_ns_mean"] = j["sync"]["lat_ns"]["mean"]
        m["append_runtime_ms"] = j["write"]["runtime"]
        # fio's latency percentiles (percent -> ns): write completion and fdatasync
        m["append_write_clat_ns_pct"] = j["write"]["clat_ns"]["percentile"]
        m["append_sync_lat_ns_pct"] = j["sync"]["lat_ns"]["percentile"]
    return m


def trim(r):
    r = dict(r)
    r.pop("jobfile_text", None)
    a = dict(r["analysis"])
    a["groups"] = [{k: v for k, v in g.items() if k != "free_extents_rel"}
                   for g in a["groups"]]
    if r["fs"] == "btrfs":
        r["filefrag"] = {p: {k: v for k, v in f.items() if k != "records"}
                         for p, f in r["filefrag"].items()}
    if "e2freefrag" in a:
        a["e2freefrag"] = {k: v for k, v in a["e2freefrag"].items() if k != "raw"}
    r["analysis"] = a
    return r


def median(vals):
    """Median of numbers; of tables (dicts), the median of every entry."""
    vals = [v for v in vals if v is not None]
    if vals and isinstance(vals[0], dict):
        return {k: statistics.median(v[k] for v in vals) for k in vals[0]}
    return statistics.median(vals) if vals else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--out-dir", default=HERE)
    ap.add_argument("--command", default="python3 run_frag.py --tests all --fs ext4,btrfs "
                    "--reps 3 --size-gib 8 --out-dir RESULTS")
    a = ap.parse_args()
    runs = {}
    for p in sorted(glob.glob(os.path.join(a.results, "*__*__r*.json"))):
        r = json.load(open(p))
        runs.setdefault(r["test"], {}).setdefault(r["fs"], []).append(r)
    os.makedirs(os.path.join(a.out_dir, "runs"), exist_ok=True)
    tests = {}
    kernels, starts = set(), []
    for test, by_fs in sorted(runs.items()):
        tests[test] = {}
        for fs, rs in sorted(by_fs.items()):
            rs.sort(key=lambda r: r["rep"])
            per_run = [figures(r) for r in rs]
            med = {k: median([f.get(k) for f in per_run]) for k in per_run[0]}
            tests[test][fs] = {"median": med, "runs": per_run,
                               "jobfile": rs[0]["jobfile"]}
            for r in rs:
                kernels.add(r["kernel"])
                starts.append(r["started"])
                out = os.path.join(a.out_dir, "runs", "%s__%s__r%d.json" % (test, fs, r["rep"]))
                with open(out, "w") as f:
                    json.dump(trim(r), f, separators=(",", ":"))
    ref = {
        "what": "real-kernel fsperf fragmentation runs (scaled job files of jobs/, scale 0.5): "
                "median over the runs per test and file system; data groups are groups holding "
                "data of files left (ext4: filefrag) or a data extent (btrfs)",
        "command": a.command,
        "kernel": sorted(kernels),
        "first_run": min(starts),
        "last_run": max(starts),
        "image_gib": 8,
        "scale": 0.5,
        "runs_per_test": min(len(v) for t in tests.values() for v in t.values()),
        "tests": tests,
    }
    with open(os.path.join(a.out_dir, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
