#!/usr/bin/env python3
"""Store real-kernel fsperf fragmentation runs as the lab's reference data.

usage: store_reference.py RESULTS_DIR [RESULTS_DIR ...] [--out-dir kernel-frag]
                          [--command CMD ...] [--note TEXT ...] [--load-log FILE ...]

Each RESULTS_DIR holds one JSON per run, <test>__<fs>__r<rep>.json, as written by the
fragmentation runner (run_frag.py: fresh loop image, mkfs, mount, fio with the
scaled job files of jobs/, syncfs, unmount, filefrag, offline analysis). Several
directories are merged (one batch of runs each: repetition numbers must not repeat
for a test and file system); a directory may be kernel-frag/runs itself, whose
trimmed runs carry every figure stored here. --command and --note give, per
directory in the same order, the command that measured its runs and a remark (the
machine's load); --load-log gives per directory a file of lines
"<time> <test> r<rep> start|end load <1-min> <5-min> <15-min> ..." (the load
average when each run began and ended), or "-" for none.

The lab reads the appenders' measured service times (the append_* figures: fio's
write and fdatasync latency tables, the appenders' runtime) from the median as its
inputs. --inputs-from K takes those figures' median from the runs of the K-th
directory only (1-based; default: all runs), so that adding runs measured under
another load adds reference figures without changing the lab's inputs.

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
    if "load_avg" in r:
        m["load_avg_1m"] = r["load_avg"]
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
    r.pop("batch", None)
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
    if "fio_run" in r:
        # the runner's mount point and scratch output file: names on the measuring machine only
        cmd = r["fio_run"].get("cmd", [])
        named = {"--output": "OUTPUT", "--directory": "MNT"}
        r["fio_run"] = dict(r["fio_run"], cmd=[
            named.get(cmd[i - 1], c) if i else c for i, c in enumerate(cmd)])
    fio = r.get("fio_json", {})
    if "directory" in fio.get("global options", {}):
        r["fio_json"] = dict(fio, **{"global options": dict(fio["global options"], directory="MNT")})
    return r


def read_load_log(path):
    """{(test, rep): [1-min load average at start, at end]} from a load log."""
    loads = {}
    if path in (None, "-"):
        return loads
    for line in open(path):
        w = line.split()
        if len(w) >= 6 and w[3] in ("start", "end") and w[4] == "load":
            loads.setdefault((w[1], int(w[2].lstrip("r"))), {})[w[3]] = float(w[5])
    return {k: [v.get("start"), v.get("end")] for k, v in loads.items()}


def median(vals):
    """Median of numbers; of tables (dicts), the median of every entry."""
    vals = [v for v in vals if v is not None]
    if vals and isinstance(vals[0], dict):
        return {k: statistics.median(v[k] for v in vals) for k in vals[0]}
    return statistics.median(vals) if vals else None


def per_dir(values, n, what, default=None):
    """One value per results directory (a single value is used for all)."""
    values = values or [default]
    if len(values) == 1:
        values = values * n
    if len(values) != n:
        raise SystemExit("%d %s for %d results directories" % (len(values), what, n))
    return values


def load_batches(a):
    """Every run of every directory, and per directory its batch description."""
    commands = per_dir(a.command, len(a.results), "--command", DEFAULT_COMMAND)
    notes = per_dir(a.note, len(a.results), "--note", "")
    logs = per_dir(a.load_log, len(a.results), "--load-log", "-")
    runs, batches, seen = {}, [], set()
    for d, command, note, log in zip(a.results, commands, notes, logs):
        loads = read_load_log(log)
        rs = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(d, "*__*__r*.json")))]
        if not rs:
            raise SystemExit("%s: no runs" % d)
        for r in rs:
            key = (r["test"], r["fs"], r["rep"])
            if key in seen:
                raise SystemExit("%s: %s %s r%d stored twice" % (d, *key))
            seen.add(key)
            r["batch"] = len(batches)
            if (r["test"], r["rep"]) in loads:
                r["load_avg"] = loads[(r["test"], r["rep"])]
            runs.setdefault(r["test"], {}).setdefault(r["fs"], []).append(r)
        batch = {
            "command": command,
            "kernel": sorted({r["kernel"] for r in rs}),
            "first_run": min(r["started"] for r in rs),
            "last_run": max(r["started"] for r in rs),
            "runs": sorted("%s__%s__r%d" % (r["test"], r["fs"], r["rep"]) for r in rs),
        }
        if note:
            batch["note"] = note
        batches.append(batch)
    return runs, batches


def is_input(key):
    """A figure the lab reads as a measured input (see --inputs-from)."""
    return key.startswith("append_")


DEFAULT_COMMAND = ("python3 run_frag.py --tests all --fs ext4,btrfs "
                   "--reps 3 --size-gib 8 --out-dir RESULTS")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results", nargs="+")
    ap.add_argument("--out-dir", default=HERE)
    ap.add_argument("--command", action="append")
    ap.add_argument("--note", action="append")
    ap.add_argument("--load-log", action="append")
    ap.add_argument("--inputs-from", type=int, default=0)
    a = ap.parse_args()
    if not 0 <= a.inputs_from <= len(a.results):
        raise SystemExit("--inputs-from %d: %d results directories" % (a.inputs_from, len(a.results)))
    a.inputs_batches = ({a.inputs_from - 1} if a.inputs_from else set(range(len(a.results))))
    runs, batches = load_batches(a)
    os.makedirs(os.path.join(a.out_dir, "runs"), exist_ok=True)
    tests = {}
    for test, by_fs in sorted(runs.items()):
        tests[test] = {}
        for fs, rs in sorted(by_fs.items()):
            rs.sort(key=lambda r: r["rep"])
            per_run = [figures(r) for r in rs]
            inputs = [f for f, r in zip(per_run, rs) if r["batch"] in a.inputs_batches]
            med = {k: median([f.get(k) for f in (inputs if is_input(k) else per_run)])
                   for k in per_run[0] if k != "load_avg_1m"}
            tests[test][fs] = {"median": med, "runs": per_run,
                               "reps": [r["rep"] for r in rs],
                               "input_reps": [r["rep"] for r in rs
                                              if r["batch"] in a.inputs_batches],
                               "jobfile": rs[0]["jobfile"]}
            for r in rs:
                out = os.path.join(a.out_dir, "runs", "%s__%s__r%d.json" % (test, fs, r["rep"]))
                with open(out, "w") as f:
                    json.dump(trim(r), f, separators=(",", ":"))
    ref = {
        "what": "real-kernel fsperf fragmentation runs (scaled job files of jobs/, scale 0.5): "
                "median over the runs per test and file system; data groups are groups holding "
                "data of files left (ext4: filefrag) or a data extent (btrfs)",
        "batches": batches,
        "kernel": sorted({k for b in batches for k in b["kernel"]}),
        "first_run": min(b["first_run"] for b in batches),
        "last_run": max(b["last_run"] for b in batches),
        "image_gib": 8,
        "scale": 0.5,
        "runs_per_test": {fs: min(len(t[fs]["runs"]) for t in tests.values() if fs in t)
                          for fs in sorted({fs for t in tests.values() for fs in t})},
        "tests": tests,
    }
    with open(os.path.join(a.out_dir, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
