#!/usr/bin/env python3
"""Measure what one fio falloc I/O costs on a fresh ext4 loop image.

usage (root): measure.py [--size-gib 8] [--out falloc-latency.json]
                         [--kernel-lab /path/to/kernel-lab]

Runs falloc-latency.fio (one job per call size, stonewalled, so every job runs
alone) with fio's JSON output on a fresh ext4 image made by kernel-lab's
fixed-identity mkfs (klab.py, the same image the fragmentation runs use), and
stores per job: the fallocate call size, the number of calls, fio's clat/lat
(mean, p50, p99) and the job's runtime.  The per-loop overhead (close, unlink,
create of the next file: fio times none of them) is
(job_runtime - calls x lat_mean) / loops.

The lab's fsperf workloads take their fallocate service times from the stored
output (crates/mballoc-lab/src/workload/fsperf/costs.rs).
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1]] if s[-1] in mult else int(s)


def summarise(fio_json, jobfile_text):
    opts = {}
    cur = None
    for ln in jobfile_text.splitlines():
        ln = ln.strip()
        if ln.startswith("["):
            cur = opts.setdefault(ln.strip("[]"), {})
        elif "=" in ln and cur is not None and not ln.startswith(";"):
            k, v = ln.split("=", 1)
            cur[k] = v
    rows = []
    for j in fio_json["jobs"]:
        w = j["write"]
        o = opts[j["jobname"]]
        n = w["total_ios"]
        lat_mean_ns = w["lat_ns"]["mean"]
        runtime_ms = j["job_runtime"]
        nloops = int(o.get("loops", 1))
        overhead_ns = (runtime_ms * 1e6 - n * lat_mean_ns) / nloops
        rows.append({
            "job": j["jobname"],
            "bs_bytes": parse_size(o["blocksize"]),
            "filesize_bytes": parse_size(o["filesize"]),
            "loops": nloops,
            "calls": n,
            "clat_ns_mean": w["clat_ns"]["mean"],
            "clat_ns_p50": w["clat_ns"]["percentile"]["50.000000"],
            "clat_ns_p99": w["clat_ns"]["percentile"]["99.000000"],
            "lat_ns_mean": lat_mean_ns,
            "job_runtime_ms": runtime_ms,
            "loop_overhead_ns": max(overhead_ns, 0.0),
        })
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-gib", type=int, default=8)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(HERE, "falloc-latency.json"))
    ap.add_argument("--kernel-lab", default="/work/shared/kernel-lab")
    a = ap.parse_args()
    sys.path.insert(0, a.kernel_lab)
    import klab  # noqa: E402

    job = os.path.join(HERE, "falloc-latency.fio")
    text = open(job).read()
    img, mnt = "/tmp/kfrag-svc.img", "/mnt/kfrag-svc"
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    reps = []
    for rep in range(a.reps):
        with klab.ext4_image(img, a.size_gib << 30, mnt) as (dev, m):
            cmd = ["fio", "--output-format=json", "--directory", m, job]
            r = subprocess.run(cmd, capture_output=True, text=True, check=True)
        fio = json.loads(r.stdout)
        reps.append(summarise(fio, text))
    # per job: the median over the repetitions of each figure
    jobs = []
    for i, row in enumerate(reps[0]):
        med = dict(row)
        for k in ("clat_ns_mean", "clat_ns_p50", "clat_ns_p99", "lat_ns_mean",
                  "job_runtime_ms", "loop_overhead_ns"):
            med[k] = statistics.median(rp[i][k] for rp in reps)
        med["lat_ns_mean_per_rep"] = [rp[i]["lat_ns_mean"] for rp in reps]
        med["loop_overhead_ns_per_rep"] = [rp[i]["loop_overhead_ns"] for rp in reps]
        jobs.append(med)
    out = {
        "what": "fio falloc service time per fallocate call size, one job at a time, "
                "fresh ext4 loop image; per job the median over the repetitions",
        "command": "python3 kernel-frag/service-times/measure.py --size-gib %d --reps %d"
                   % (a.size_gib, a.reps),
        "fio_command": "fio --output-format=json --directory MNT falloc-latency.fio",
        "kernel": platform.release(),
        "fio_version": fio.get("fio version"),
        "image_gib": a.size_gib,
        "cpus": os.cpu_count(),
        "reps": a.reps,
        "started": started,
        "jobs": jobs,
    }
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    for row in out["jobs"]:
        print("%-14s calls %6d lat_mean %10.0f ns  loop overhead %10.0f ns"
              % (row["job"], row["calls"], row["lat_ns_mean"], row["loop_overhead_ns"]))


if __name__ == "__main__":
    main()
