#!/usr/bin/env python3
"""When each fio job of an fsperf test runs, and when jbd2 commits, on real ext4.

usage (root): measure_timeline.py --runner DIR --test funnysizeslow [--reps 3]
                                  [--out timelines/funnysizeslow.json]

The reference job files switch statistics off for the fallocate jobs, so the reference runs
do not say when those jobs ran beside the appenders. This runs the project's real-kernel
runner (`run_frag.py` in DIR, with its klab.py beside it in DIR/../kernel-lab) for one test on
ext4, exactly as the reference runs, with a light ftrace of the run: ext4_fallocate_enter,
ext4_sync_file_enter, ext4_unlink_enter, ext4_mb_discard_preallocations (the allocator's
last resort before ENOSPC: it drops every inode's preallocations) and jbd2_end_commit. It
stores, per run and as the median over the runs, the times of each job relative to the
appenders' first fdatasync, the number of commits and of preallocation discards, and the
fragmentation figures the runner computes. Nothing else changes; tracing these few events
costs little beside the I/O.
"""
import argparse
import collections
import datetime
import json
import os
import re
import statistics
import sys

EVENTS = ["ext4:ext4_fallocate_enter", "ext4:ext4_sync_file_enter", "ext4:ext4_unlink_enter",
          "ext4:ext4_mb_discard_preallocations", "jbd2:jbd2_end_commit"]
LINE = re.compile(r"^\s*\S+-(\d+)\s+\[\d+\]\s+\S+\s+([\d.]+): (\w+): (.*)$")


def timeline(trace_text):
    """Per fallocate job (told apart by call length) and for the appenders: first and last
    call (s after the appenders' first fdatasync); commits; discards."""
    falloc = collections.defaultdict(list)
    syncs, commits, discards = [], 0, 0
    for line in trace_text.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        t, name, rest = float(m.group(2)), m.group(3), m.group(4)
        if name == "ext4_fallocate_enter":
            falloc[int(re.search(r"len (\d+)", rest).group(1))].append(t)
        elif name == "ext4_sync_file_enter":
            syncs.append(t)
        elif name == "jbd2_end_commit":
            commits += 1
        elif name == "ext4_mb_discard_preallocations":
            discards += 1
    t0 = min(syncs)
    app_end = max(syncs) - t0
    jobs = {}
    for length, ts in sorted(falloc.items()):
        first, last = min(ts) - t0, max(ts) - t0
        jobs[str(length)] = {"calls": len(ts), "first_s": first, "last_s": last,
                             "last_per_appender_end": last / app_end if app_end else None,
                             "mean_interval_ms": 1e3 * (last - first) / max(len(ts) - 1, 1)}
    return {"appenders_last_sync_s": app_end, "fdatasyncs": len(syncs), "commits": commits,
            "prealloc_discards": discards, "falloc_by_call_bytes": jobs}


def median_of(runs, path):
    vals = []
    for r in runs:
        v = r
        for k in path:
            v = v.get(k) if isinstance(v, dict) else None
        if isinstance(v, (int, float)):
            vals.append(v)
    return statistics.median(vals) if vals else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runner", required=True, help="folder holding run_frag.py")
    ap.add_argument("--test", required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--jobs-dir", default=os.path.join(os.path.dirname(__file__), "..", "jobs"))
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    sys.path.insert(0, a.runner)
    sys.path.insert(0, os.path.join(a.runner, "..", "kernel-lab"))
    import klab  # noqa: E402
    import run_frag  # noqa: E402

    traces = {}
    plain = run_frag.run_fio

    def traced(jobfile, mnt, out_json, timeout):
        dev = klab.sh(["findmnt", "-n", "-o", "SOURCE", mnt]).strip()
        with klab.TraceInstance(EVENTS, filt="dev == %d" % klab.dev_t(dev),
                                buffer_kb=16384) as tr:
            tr.on()
            r = plain(jobfile, mnt, out_json, timeout)
            tr.off()
            traces["text"] = klab.read(tr.p("trace"))
            r["trace_overruns"] = tr.overruns()
        return r

    run_frag.run_fio = traced
    opts = argparse.Namespace(size_gib=8, btrfs_size_gib=8, jobs_dir=os.path.abspath(a.jobs_dir),
                              timeout=600, ext4_mount_opts="", btrfs_mount_opts="")
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    runs = []
    for rep in range(a.reps):
        res = run_frag.run_one(a.test, "ext4", rep, opts)
        s = res["analysis"]["summary"]
        run = timeline(traces.pop("text"))
        run.update({
            "wall_s": res["wall_s"],
            "appender_runtime_ms": [j["write_runtime_ms"] for j in res["fio_summary"]],
            "trace_overruns": res["fio_run"]["trace_overruns"],
            "loadavg_after": open("/proc/loadavg").read().split()[:3],
            "frag_pct_mean": s["frag_pct_mean"],
            "fragmented_bg_count": s["fragmented_bg_count"],
            "data_bg_count": s["data_bg_count"],
            "extents_per_file": res["filefrag_summary"]["avg_extents_per_file"],
        })
        runs.append(run)
        print(a.test, rep, json.dumps({k: v for k, v in run.items()
                                       if k != "falloc_by_call_bytes"}), file=sys.stderr)
    keys = [("wall_s",), ("appenders_last_sync_s",), ("commits",), ("prealloc_discards",),
            ("frag_pct_mean",), ("extents_per_file",), ("data_bg_count",)]
    median = {k[0]: median_of(runs, k) for k in keys}
    for length in runs[0]["falloc_by_call_bytes"]:
        median["falloc_%s_last_per_appender_end" % length] = median_of(
            runs, ("falloc_by_call_bytes", length, "last_per_appender_end"))
    out = {"what": __doc__.split("\n\n")[1].replace("\n", " "),
           "command": "python3 kernel-frag/timelines/measure_timeline.py --runner RUNNER "
                      "--test %s --reps %d" % (a.test, a.reps),
           "kernel": os.uname().release, "cpus": os.cpu_count(), "started": started,
           "test": a.test, "median": median, "runs": runs}
    path = a.out or os.path.join(os.path.dirname(__file__), "%s.json" % a.test)
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
