#!/usr/bin/env python3
"""Measure every fio job's latency inside the fsperf tests themselves.

usage (root): measure_in_test.py [--size-gib 8] [--reps 3] [--tests all|a,b]
                                 [--kernel-lab /path/to/kernel-lab]

The reference job files (../jobs/*.fio) switch statistics off for the fallocate
jobs (stats=0) and fsperf merges jobs into reporting groups, so the reference
runs do not say how fast the fallocate jobs went while the appenders ran.  This
runs each scaled job file once more per repetition on a fresh ext4 image (the
same fixed-identity mkfs) with stats=1 on every job and no group reporting, and
stores per job name: the number of I/Os and fio's mean latency, each the median
over the repetitions (in-test.json).  Nothing else changes, so the jobs
interleave as in the reference runs.

With --shape-out FILE it stores instead each job's completion-latency
distribution per repetition: fio's clat percentile table (1st ... 99.99th) as a
multiple of that repetition's mean clat (the points of a job with several
copies averaged over its copies), so that the lab can spread a latency whose
mean it takes from in-test.json (carried to the reference pace) without
changing that mean.
"""
import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
JOBS = os.path.join(HERE, "..", "jobs")
TESTS = {
    "bufferedappendvsfallocate": "buffered-append-vs-fallocate.fio",
    "correlatedlifetimes": "correlated-lifetimes.fio",
    "mixedlifetimes": "mixed-lifetimes.fio",
    "foursizes": "four-sizes.fio",
    "funnysizeshigh": "funny-sizes-high.fio",
    "funnysizeslow": "funny-sizes-low.fio",
}


def with_stats(text):
    return re.sub(r"(?m)^stats=0\s*$", "stats=1", text)


def per_job(fio):
    """jobname -> (ios, lat mean ns, job runtime ms) summed/averaged over its copies."""
    out = {}
    for j in fio["jobs"]:
        w = j["write"]
        o = out.setdefault(j["jobname"], {"ios": 0, "lat_ns_sum": 0.0, "copies": 0,
                                          "runtime_ms": 0})
        o["ios"] += w["total_ios"]
        o["lat_ns_sum"] += w["lat_ns"]["mean"] * w["total_ios"]
        o["copies"] += 1
        o["runtime_ms"] = max(o["runtime_ms"], j["job_runtime"])
    return {k: {"ios": v["ios"], "copies": v["copies"], "runtime_ms": v["runtime_ms"],
                "lat_ns_mean": v["lat_ns_sum"] / v["ios"] if v["ios"] else 0.0}
            for k, v in out.items()}


def shapes(fio):
    """jobname -> {percentile: clat / mean clat}, averaged over the job's copies."""
    acc = {}
    for j in fio["jobs"]:
        clat = j["write"]["clat_ns"]
        pct, mean = clat.get("percentile"), clat.get("mean", 0.0)
        if not pct or mean <= 0:
            continue
        acc.setdefault(j["jobname"], []).append({p: ns / mean for p, ns in pct.items()})
    return {name: {p: statistics.mean(c[p] for c in copies) for p in copies[0]}
            for name, copies in acc.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-gib", type=int, default=8)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tests", default="all")
    ap.add_argument("--out", default=os.path.join(HERE, "in-test.json"))
    ap.add_argument("--kernel-lab", default="/work/shared/kernel-lab")
    ap.add_argument("--shape-out", default=None,
                    help="store the latency shapes (percentile / mean) here instead")
    a = ap.parse_args()
    sys.path.insert(0, a.kernel_lab)
    import klab  # noqa: E402

    tests = list(TESTS) if a.tests == "all" else a.tests.split(",")
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    result = {}
    img, mnt = "/tmp/kfrag-svc.img", "/mnt/kfrag-svc"
    for test in tests:
        text = with_stats(open(os.path.join(JOBS, TESTS[test])).read())
        reps = []
        for _ in range(a.reps):
            with tempfile.NamedTemporaryFile("w", suffix=".fio", delete=False) as jf:
                jf.write(text)
            try:
                with klab.ext4_image(img, a.size_gib << 30, mnt) as (dev, m):
                    cmd = ["fio", "--output-format=json", "--alloc-size", "98304",
                           "--allrandrepeat=1", "--randseed=12345", "--directory", m, jf.name]
                    r = subprocess.run(cmd, capture_output=True, text=True, check=True)
            finally:
                os.unlink(jf.name)
            fio = json.loads(r.stdout)
            reps.append(shapes(fio) if a.shape_out else per_job(fio))
        if a.shape_out:
            result[test] = {name: {"clat_over_mean_per_rep": [rp.get(name) for rp in reps]}
                            for name in reps[0]}
            print(test, sorted(result[test]), flush=True)
            continue
        result[test] = {
            name: {
                "ios": reps[0][name]["ios"],
                "copies": reps[0][name]["copies"],
                "lat_ns_mean": statistics.median(rp[name]["lat_ns_mean"] for rp in reps),
                "lat_ns_mean_per_rep": [rp[name]["lat_ns_mean"] for rp in reps],
                "runtime_ms_per_rep": [rp[name]["runtime_ms"] for rp in reps],
            }
            for name in reps[0]
        }
        print(test, {k: round(v["lat_ns_mean"] / 1e3, 1) for k, v in result[test].items()},
              flush=True)
    root = os.path.join(HERE, "..", "..")
    command = ("python3 kernel-frag/service-times/measure_in_test.py --size-gib %d --reps %d"
               % (a.size_gib, a.reps))
    if a.shape_out:
        what = ("fio's completion-latency percentiles per job inside each scaled fsperf test "
                "(stats=1 on every job, no group reporting), each as a multiple of that "
                "repetition's mean clat; fresh ext4 image per repetition")
        command += " --shape-out %s" % os.path.relpath(a.shape_out, root)
    else:
        what = ("fio's mean latency per job inside each scaled fsperf test (stats=1 on every "
                "job, no group reporting), fresh ext4 image; median over the repetitions")
    out = {
        "what": what,
        "command": command,
        "kernel": platform.release(),
        "cpus": os.cpu_count(),
        "started": started,
        "reps": a.reps,
        "tests": result,
    }
    with open(a.shape_out or a.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")

if __name__ == "__main__":
    main()
