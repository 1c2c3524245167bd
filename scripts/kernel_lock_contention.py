#!/usr/bin/env python3
"""Which kernel spinlocks wait under will-it-scale fallocate2 at N processes, and where the
allocations land.

For each N: a fresh 4 GiB ext4 loop image (`mb_optimize_scan=1`), a 3 s fallocate2 run, and
in its middle a window of `lock:contention_begin` (with a stack-trace trigger) and
`lock:contention_end`: each wait's time, grouped by the first four frames outside the locking
code. Then a second 2 s run on the same file system with 0.2 s of `ext4_mballoc_alloc`
events (the first 3,000 kept). Prints the sites by wait time per call; writes everything to
OUT. This is how the contention and placement figures of
docs/measurements/kernel-fallocate2-xeon16.json were taken. Needs root, tracefs, a built
fallocate2 (`--bench`) and the kernel lab's klab.py (`../shared/kernel-lab`, or KLAB_DIR).

usage: sudo python3 scripts/kernel_lock_contention.py OUT 4,8,16 0.3 [BENCH]
"""
import collections, json, os, sys, threading, time
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("KLAB_DIR", os.path.join(HERE, "../../shared/kernel-lab")))
import klab  # noqa: E402
T = "/sys/kernel/tracing/instances/mballoc-contention"
BENCH = sys.argv[4] if len(sys.argv) > 4 and __name__ == "__main__" else "/tmp/klab-fallocate2"
SKIP = ("queued_spin_lock_slowpath", "_raw_spin", "queued_read_lock", "queued_write_lock",
        "__mutex_lock", "mutex_lock", "rwsem_down", "down_read", "down_write", "_raw_read", "_raw_write",
        "do_raw_spin", "__pv_queued", "pv_queued", "native_queued", "contention", "trace_")

def window(evs, length, delay):
    time.sleep(delay)
    for e in evs: klab.write("%s/events/%s/enable" % (T, e), 1)
    klab.write(T + "/tracing_on", 1); time.sleep(length); klab.write(T + "/tracing_on", 0)
    for e in evs: klab.write("%s/events/%s/enable" % (T, e), 0)

def parse(text):
    waits, stacks, cur, begin = collections.Counter(), collections.Counter(), None, {}
    allocs, pending, cpu_of = [], {}, None
    for line in text.splitlines():
        if line.startswith("#"): continue
        if line.startswith(" => "):
            if cur is not None: cur.append(line[4:].split("+")[0].strip())
            continue
        if cur is not None:
            # the wait's site: its first four frames outside the locking code
            pending[cpu_of] = " < ".join([f for f in cur if not f.startswith(SKIP)][:4])
            cur = None
        if ": " not in line: continue
        head, rest = line.split(": ", 1)
        f = head.split(); ts = float(f[-1]); cpu = f[-3] if f[-3].startswith("[") else f[-2]
        ev = rest.split(":", 1)[0]
        if ev == "contention_begin":
            begin[cpu] = (ts, rest.split("flags=")[-1].rstrip(")"))
        elif ev == "contention_end" and cpu in begin:
            t0, fl = begin.pop(cpu); chain = pending.pop(cpu, "?")
            waits[(chain, fl)] += (ts - t0) * 1e9; stacks[(chain, fl)] += 1
        elif ev == "<stack trace>":
            cur = []; cpu_of = cpu
        elif ev == "ext4_mballoc_alloc":
            allocs.append(rest)
    return waits, stacks, allocs

def run(n, scan, length):
    with klab.ext4_image("/tmp/cont.img", 4 << 30, "/mnt/cont", opts="mb_optimize_scan=%d" % scan) as (_d, mnt):
        time.sleep(1)
        os.makedirs(T, exist_ok=True)
        klab.write(T + "/tracing_on", 0); klab.write(T + "/buffer_size_kb", 65536); klab.write(T + "/trace", "")
        klab.write(T + "/events/lock/contention_begin/trigger", "stacktrace")
        evs = ["lock/contention_begin", "lock/contention_end"]
        th = threading.Thread(target=window, args=(evs, length, 2.0)); th.start()
        out = json.loads(klab.sh([BENCH, "-n", str(n), "-t", "3", "-w", "1", "-d", mnt, "-c", "8192", "-s", "1048576"]))
        th.join()
        text = klab.read(T + "/trace")
        klab.write(T + "/events/lock/contention_begin/trigger", "!stacktrace")
        # the allocator's own decisions, briefly
        klab.write(T + "/trace", "")
        th = threading.Thread(target=window, args=(["ext4/ext4_mballoc_alloc"], 0.2, 1.5)); th.start()
        klab.sh([BENCH, "-n", str(n), "-t", "2", "-w", "0", "-d", mnt, "-c", "8192", "-s", "1048576"])
        th.join()
        text2 = klab.read(T + "/trace"); klab.write(T + "/trace", "")
    waits, counts, _ = parse(text)
    _, _, allocs = parse(text2)
    calls = out["total_ops_s"] * length
    rows = sorted(waits.items(), key=lambda kv: -kv[1])
    res = {"workers": n, "scan": scan, "ops_s": out["total_ops_s"], "window_s": length,
           "waits": [{"site": k[0], "flags": k[1], "count": counts[k], "wait_ns": round(v),
                      "per_call": counts[k] / calls, "wait_ns_per_call": v / calls} for k, v in rows[:25]],
           "mballoc_alloc_sample": allocs[:3000]}
    print("n %d scan %d ops/s %.0f; waits per call by site:" % (n, scan, out["total_ops_s"]))
    for w in res["waits"][:12]:
        print("  %7.4f waits %8.1f ns  %s [%s]" % (w["per_call"], w["wait_ns_per_call"], w["site"], w["flags"]))
    return res

def contention(length, delay, work):
    """Runs `work()` while a window of `length` s, `delay` s after its start, records every
    lock wait with its stack; returns (work's result, the trace's text)."""
    os.makedirs(T, exist_ok=True)
    klab.write(T + "/tracing_on", 0); klab.write(T + "/buffer_size_kb", 65536); klab.write(T + "/trace", "")
    klab.write(T + "/events/lock/contention_begin/trigger", "stacktrace")
    th = threading.Thread(target=window, args=(["lock/contention_begin", "lock/contention_end"], length, delay)); th.start()
    out = work(); th.join()
    text = klab.read(T + "/trace")
    klab.write(T + "/events/lock/contention_begin/trigger", "!stacktrace"); klab.write(T + "/trace", "")
    return out, text

if __name__ == "__main__":
    out = sys.argv[1]; ns = [int(x) for x in sys.argv[2].split(",")]; length = float(sys.argv[3])
    json.dump([run(n, 1, length) for n in ns], open(out, "w"), indent=1)
