#!/usr/bin/env python3
"""The kernel's fallocate3 at 1 and 2 processes, with and without the orphan file, and the
locks its second process waits on.

fallocate3's `open(O_TRUNC)` truncates each time, and `ext4_truncate` puts the inode on the
orphan list and takes it off again (`ext4_orphan_add`, `ext4_orphan_del`): without the
`orphan_file` feature both take the file system's `s_orphan_lock` mutex and write the
superblock's (or the previous orphan inode's) buffer, a kernel-wide lock around every
operation; with it, a per-CPU slot of the orphan file. For each of the two mkfs variants: a
fresh 64 GiB ext4 loop image, `--reps` interleaved runs of 1 and 2 processes (1 s warm-up,
`--seconds` counted; the medians and their ratio), then one 2-process run with a 1 s window
of `lock:contention_begin`/`contention_end` (each wait's time by its first four frames
outside the locking code). Needs root, tracefs and a built `scripts/fallocate3.c`.

usage: sudo python3 scripts/kernel_fallocate3_orphan.py --bench /tmp/fallocate3 \
           --out docs/measurements/kernel-fallocate3-orphan.json
"""
import argparse, json, os, platform, statistics, sys, time
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kernel_lock_contention as lc  # noqa: E402
klab = lc.klab


def measure(feature, bench, reps, seconds):
    with klab.ext4_image("/tmp/f3-orphan.img", 64 << 30, "/mnt/f3-orphan", fixed=False,
                         mkfs_extra=["-O", feature]) as (_dev, mnt):
        time.sleep(1)
        runs = {"1": [], "2": []}
        for _ in range(reps):
            for n in (1, 2):
                o = json.loads(klab.sh([bench, str(n), "1", str(seconds), mnt]))
                runs[str(n)].append(o["ops_s"])
                klab.log(feature, n, o["ops_s"])
        o, text = lc.contention(1.0, 2.0, lambda: json.loads(klab.sh([bench, "2", "1", "3", mnt])))
    waits, counts, _ = lc.parse(text)
    ops = o["ops_s"] * 1.0
    rows = sorted(waits.items(), key=lambda kv: -kv[1])[:15]
    m1, m2 = statistics.median(runs["1"]), statistics.median(runs["2"])
    return {"mkfs_features": feature, "runs_ops_s": runs, "median_1": m1, "median_2": m2,
            "ratio_2_to_1": m2 / m1,
            "waits_at_2": [{"site": k[0], "flags": k[1], "per_op": counts[k] / ops,
                            "wait_ns_per_op": v / ops} for k, v in rows]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench", default="/tmp/fallocate3")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--out")
    a = ap.parse_args()
    res = {"what": __doc__.split("\n")[0], "kernel": platform.release(),
           "cpus": os.cpu_count(), "when": time.strftime("%Y-%m-%d"),
           "command": "sudo python3 scripts/kernel_fallocate3_orphan.py --reps %d --seconds %g"
                      % (a.reps, a.seconds),
           "runs": [measure(f, a.bench, a.reps, a.seconds) for f in ("^orphan_file", "orphan_file")]}
    for r in res["runs"]:
        print("%-13s 1: %.0f  2: %.0f  ratio %.3f" % (r["mkfs_features"], r["median_1"], r["median_2"], r["ratio_2_to_1"]))
        for w in r["waits_at_2"][:6]:
            print("   %.4f waits %7.1f ns/op  %s [%s]" % (w["per_op"], w["wait_ns_per_op"], w["site"], w["flags"]))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
