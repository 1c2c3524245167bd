#!/usr/bin/env python3
"""Capture a kernel case on a fresh mount: no group's buddy built when tracing starts (root;
not run by CI).

usage: capture_fresh.py [--prep STEPS] [--tunables NAME=VALUE,...] CAPTURE_CASE_ARGS...
       (--mount-opts must hold no_prefetch_block_bitmaps)
       capture_fresh.py --rederive CASE_DIR...   (add the record keys to an older capture)

`../shared/kernel-lab/capture_case.py` builds every group's buddy before the traced workload
starts, twice over: it mounts with the default `prefetch_block_bitmaps`, so the ext4lazyinit
thread reads and initialises every group in the background right after the mount (on 4 GiB
within 0.2 s of it, but timing-dependent), and it reads `/proc/fs/ext4/<dev>/mb_groups` on the
traced mount for its cross-check, which loads every group's buddy. So no stored case shows the
lazy paths: `ext4_mb_good_group_nolock` passing over a group that is still
`EXT4_GROUP_INFO_NEED_INIT` at CR_POWER2_ALIGNED and CR_GOAL_LEN_FAST (unless it is the first
group of its flex group, or BLOCK_UNINIT with group-descriptor checksums), and
`ext4_mb_prefetch` / `ext4_mb_prefetch_fini` reading and initialising groups a prefetch window
at a time.

This wrapper runs capture_case unchanged except that
  * it refuses to run unless `--mount-opts` contains `no_prefetch_block_bitmaps` (the option
    then applies to the aging mount too, if any, and to the traced mount);
  * the traced mount's `dump_state.py --mb-groups` check runs without `--mb-groups`, so
    `mb_groups` is never read: `initial_state.json` then has `kernel_mb_groups: null` for
    every group and `kernel_cross_check: false` (the free extents still come from the
    unmounted image, as for every case);
  * a second private trace instance (`klab-loads`, same `mono` clock, dev filter) records
    `ext4_read_block_bitmap_load`, `ext4_mb_bitmap_load`, `ext4_mb_buddy_bitmap_load` and
    `ext4_prefetch_bitmaps` from before the traced mount until just before its umount. They
    stay out of `trace.txt` (whose parser counts unknown events as unparsed);
    `meta.json` → `fresh_mount_loads` gets a summary: loads before the workload's first step
    (0 for a fresh mount), and for every buddy built, the group and the allocation record
    (`seq` in `allocs.jsonl`) during which it was built (`buddy_built_during_alloc_seq`), and
    the record, allocation or free, during which it was built (`buddy_built_during_seq`: a
    free into an unbuilt group builds it at once, `ext4_free_blocks` -> `ext4_mb_clear_bb` ->
    `ext4_mb_load_buddy_gfp`; the free's span is taken from `trace.txt`, see
    `BUILT_DURING_FORMAT`; a load in a group sharing a buddy-cache page with one of the
    free's groups counts too: with 1 KiB blocks `ext4_mb_init_cache` builds g and g^1
    together), with `loads_outside_records` (loads in neither), and with 1 KiB blocks
    `buddy_page_builds` (whether each page's groups were built together);
  * `meta.json` → `fresh_mount: true` (the replay builds its allocator lazily for such a case)
    and `fresh_mount_note`;
  * `meta.json` → `capture_cmd` holds the command (`--out-dir DIR`, without `--tag` and `--desc`).

Two options of this wrapper (neither given: the behaviour above, unchanged):
  * `--prep STEPS`: right after mkfs, an untraced mount (the same `--mount-opts`, default
    tunables) runs `scripts/step_workload.py MNT STEPS` (mkdir / falloc / write / unlink /
    syncfs steps), then umounts; everything else (`--age-params` too, if given) follows as
    usual. A file written there and unlinked leaves its groups written (BLOCK_UNINIT cleared)
    but free, so the traced fresh mount starts with chosen groups unbuilt and not
    BLOCK_UNINIT. `meta.json` → `aging` (the image is aged, if only a little; with
    `--age-params` too, `aging` → `prep_before`);
  * `--tunables NAME=VALUE,...`: written to `/sys/fs/ext4/<dev>/` right after the traced mount
    (as `capture_tuned.py` does), before capture_case reads `mballoc_tunables` and before the
    trace starts; the prep and aging mounts keep the defaults. `meta.json` → `tunables_written`.

Capture twice and compare with `determinism.py --compare-cases A B` before storing a case.
"""
import collections
import contextlib
import gzip
import json
import os
import re
import shlex
import subprocess
import sys
import time

LAB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "kernel-lab")
sys.path.insert(0, LAB)
import capture_case  # noqa: E402
import klab  # noqa: E402
from capture_tuned import parse as parse_tunables  # noqa: E402  (scripts/, beside this file)
from capture_tuned import write as write_tunables  # noqa: E402

OPTION = "no_prefetch_block_bitmaps"
LOAD_EVENTS = ["ext4:ext4_read_block_bitmap_load", "ext4:ext4_mb_bitmap_load",
               "ext4:ext4_mb_buddy_bitmap_load", "ext4:ext4_prefetch_bitmaps"]
LOAD_LINE = re.compile(r"^\s*(?P<comm>.+?)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+\S+\s+"
                       r"(?P<ts>[\d.]+):\s+(?P<ev>\w+):\s+dev \d+,\d+ group (?P<group>\d+)"
                       r"(?: prefetch (?P<prefetch>\d))?")
SHORT = {"ext4_read_block_bitmap_load": "bitmap_read", "ext4_mb_bitmap_load": "bitmap_load",
         "ext4_mb_buddy_bitmap_load": "buddy_load", "ext4_prefetch_bitmaps": "lazyinit_prefetch"}


def take(argv, name):
    """Remove `name VALUE` (or `name=VALUE`) from argv and return VALUE (None if absent)."""
    for i, a in enumerate(argv):
        if a == name and i + 1 < len(argv):
            value = argv[i + 1]
            del argv[i:i + 2]
            return value
        if a.startswith(name + "="):
            del argv[i]
            return a.split("=", 1)[1]
    return None


def arg(argv, name):
    for i, a in enumerate(argv):
        if a == name and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def capture_cmd(argv):
    """The command as meta.json records it: `--out-dir DIR`, without `--tag` and `--desc` (the
    description is meta.json's `description`)."""
    cmd, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in ("--out-dir", "--tag", "--desc"):
            skip = True
            if a == "--out-dir":
                cmd += ["--out-dir", "DIR"]
        elif a.startswith("--out-dir="):
            cmd.append("--out-dir=DIR")
        elif not a.startswith(("--tag=", "--desc=")):
            cmd.append(shlex.quote(a))
    return "python3 scripts/capture_fresh.py " + " ".join(cmd)


def parse_loads(path):
    out = []
    for line in open(path):
        m = LOAD_LINE.match(line)
        if m:
            ev = {"ts": float(m["ts"]), "pid": int(m["pid"]), "comm": m["comm"].strip(),
                  "event": SHORT[m["ev"]], "group": int(m["group"])}
            if m["prefetch"] is not None:
                ev["prefetch"] = int(m["prefetch"])
            out.append(ev)
    return out


TRACE_LINE = re.compile(r"^\s*(?P<comm>.*?)-(?P<pid>\d+)\s+(?:\(\s*[-\d]+\)\s+)?"
                        r"\[(?P<cpu>\d+)\]\s+\S+\s+(?P<ts>[\d.]+):\s+(?P<ev>\w+):")


def trace_events_by_pid(out_dir):
    """pid -> [(ts, event name), ...] of the main trace (`trace.txt.gz`, or `trace.txt`), in
    trace order: what brackets a free's kernel work."""
    path = os.path.join(out_dir, "trace.txt.gz")
    if os.path.exists(path):
        f = gzip.open(path, "rt")
    else:
        f = open(os.path.join(out_dir, "trace.txt"))
    by_pid = collections.defaultdict(list)
    with f:
        for line in f:
            m = TRACE_LINE.match(line)
            if m:
                by_pid[int(m["pid"])].append((float(m["ts"]), m["ev"]))
    return by_pid


def free_spans(recs, out_dir):
    """For every `free` record of allocs.jsonl: (record, start, end, groups, last mballoc_free).
    A free record is one `ext4_free_blocks` event (its `ts`) and the `ext4_mballoc_free`
    events that follow it on the same pid (its `extents`, one per group). Its kernel work
    (`ext4_free_blocks` -> `ext4_mb_clear_bb` -> `ext4_mb_load_buddy_gfp`, which builds an
    unbuilt group at once) lasts until the next event of that pid in the main trace that is
    not one of its `ext4_mballoc_free`s (none: the end of the trace)."""
    frees = [r for r in recs if r["type"] == "free"]
    if not frees:
        return []
    by_pid = trace_events_by_pid(out_dir)
    spans = []
    for r in frees:
        evs = by_pid.get(r["pid"], [])
        i = next((k for k, (ts, ev) in enumerate(evs)
                  if ev == "ext4_free_blocks" and abs(ts - r["ts"]) < 5e-7), None)
        if i is None:
            raise RuntimeError("capture_fresh.py: free record seq %d: no ext4_free_blocks at "
                               "%.6f on pid %d in the trace" % (r["seq"], r["ts"], r["pid"]))
        j, last_mf = i + 1, None
        while j < len(evs) and evs[j][1] == "ext4_mballoc_free":
            last_mf = evs[j][0]
            j += 1
        end = evs[j][0] if j < len(evs) else float("inf")
        groups = {e["group"] for e in r.get("extents") or []}
        spans.append((r, r["ts"], end, groups, last_mf))
    return spans


def summarise(loads, out_dir):
    """Where each load falls: before the workload, or during which allocation or free."""
    recs = [json.loads(l) for l in open(os.path.join(out_dir, "allocs.jsonl"))]
    begin = min(r["ts"] for r in recs if r["type"] == "marker")
    allocs = [r for r in recs if r["type"] == "alloc"]
    spans = free_spans(recs, out_dir)
    geometry = json.load(open(os.path.join(out_dir, "meta.json")))["geometry"]
    groups = geometry["group_count"]
    gpp = groups_per_page(geometry["block_size"])

    def during(ev):
        for r in allocs:
            if r["pid"] == ev["pid"] and r["ts"] <= ev["ts"] <= r.get("ts_end", r["ts"]):
                return r["seq"]
        return None

    def during_free(ev):
        """The free whose span holds ev (same pid, a group it frees in or one sharing a
        buddy-cache page with such a group): (seq, side of its last ext4_mballoc_free)."""
        for r, start, end, grps, last_mf in spans:
            pages = {g // gpp for g in grps}
            if (r["pid"] == ev["pid"] and start <= ev["ts"] <= end
                    and ev["group"] // gpp in pages):
                side = ("no_mballoc_free" if last_mf is None else
                        "before" if ev["ts"] < last_mf else
                        "after" if ev["ts"] > last_mf else "same_us")
                return r["seq"], side
        return None, None

    built = collections.OrderedDict()      # group -> alloc seq (None: not in an allocation)
    built_rec = collections.OrderedDict()  # group -> (seq, "alloc" | "free") or None
    rows = []
    outside_records = 0
    free_loads = collections.Counter()
    free_sides = collections.Counter()
    for ev in loads:
        seq = during(ev)
        rec = (seq, "alloc") if seq is not None else None
        if rec is None:
            fseq, side = during_free(ev)
            if fseq is not None:
                rec = (fseq, "free")
                free_loads[ev["event"]] += 1
                free_sides[side] += 1
            else:
                outside_records += 1
        row = [ev["event"], ev["group"], seq]
        rows.append(row + [ev["prefetch"]] if "prefetch" in ev else row)
        if ev["event"] == "buddy_load" and ev["group"] not in built_rec:
            built[ev["group"]] = seq
            built_rec[ev["group"]] = rec
    first_alloc = allocs[0]["seq"] if allocs else None
    out = {
        "loads_before_workload": sum(1 for ev in loads if ev["ts"] < begin),
        "lazyinit_prefetch_events": sum(1 for ev in loads if ev["event"] == "lazyinit_prefetch"),
        "loads_outside_allocations": sum(1 for r in rows if r[2] is None),
        "groups_built": len(built),
        "groups_never_built": [g for g in range(groups) if g not in built],
        "built_by_first_allocation": [g for g, s in built.items() if s == first_alloc],
        "first_allocation_seq": first_alloc,
        # Only groups built during an allocation (a group built elsewhere would be null here,
        # which readers of integer seqs cannot take: see buddy_built_during_seq for those).
        "buddy_built_during_alloc_seq": {str(g): s for g, s in built.items() if s is not None},
        "buddy_built_during_seq": {str(g): r[0] for g, r in built_rec.items() if r is not None},
        "loads_outside_records": outside_records,
        "groups_built_during_frees": [g for g, r in built_rec.items()
                                      if r is not None and r[1] == "free"],
        "groups_built_outside_records": [g for g, r in built_rec.items() if r is None],
        "loads_during_frees": dict(sorted(free_loads.items())),
        "free_loads_vs_last_mballoc_free": dict(sorted(free_sides.items())),
        "buddy_built_during_seq_format": BUILT_DURING_FORMAT,
        "load_events": rows,
        "load_events_format": "[event, group, seq of the allocation record (allocs.jsonl) "
                              "during which it fired (null: outside any request), prefetch "
                              "flag of bitmap_read]; bitmap_read = ext4_read_block_bitmap_load "
                              "(I/O submitted; none for a BLOCK_UNINIT group, initialised in "
                              "memory), bitmap_load / buddy_load = ext4_mb_bitmap_load / "
                              "ext4_mb_buddy_bitmap_load (ext4_mb_init_cache: the group's "
                              "bitmap and buddy pages built; a group's first buddy_load is "
                              "its init, which clears NEED_INIT)",
    }
    if gpp > 1:
        out["buddy_page_builds"] = page_builds(rows, gpp)
    return out


def groups_per_page(block_size, page_size=4096):
    """Groups whose bitmap and buddy share one page of the buddy cache inode
    (`ext4_mb_init_cache`: blocks_per_page / 2, at least 1): 2 with 1 KiB blocks, else 1."""
    return max(1, page_size // block_size // 2)


def page_builds(rows, gpp):
    """How the first builds (buddy_load) of the groups of each buddy-cache page came:
    `ext4_mb_init_group` -> `ext4_mb_init_cache(page, NULL)` initialises every group of the
    page that is still NEED_INIT (or all of them, the page not being up to date), so a page's
    groups are built together, in group order, whichever of them was asked for."""
    firsts, seen = [], set()
    for i, row in enumerate(rows):
        if row[0] == "buddy_load" and row[1] not in seen:
            seen.add(row[1])
            firsts.append((i, row[1], row[2]))
    by_page = collections.OrderedDict()
    for pos, (i, g, seq) in enumerate(firsts):
        by_page.setdefault(g // gpp, []).append((pos, g, seq))
    together, apart, partial = [], [], []
    for page, builds in by_page.items():
        groups = [g for _, g, _ in builds]
        if len(builds) < gpp:
            partial.append(groups)
        elif (len({s for _, _, s in builds}) == 1
              and [p for p, _, _ in builds] == list(range(builds[0][0], builds[0][0] + gpp))):
            together.append(page)
        else:
            apart.append([[g, s] for _, g, s in builds])
    return {
        "groups_per_page": gpp,
        "pages_built": len(by_page),
        "pages_built_together": len(together),
        "pages_built_apart": apart,
        "pages_built_in_part": partial,
        "format": "a buddy-cache page holds the bitmap and buddy of groups_per_page groups "
                  "(page p: groups p*n .. p*n+n-1); pages_built_together: pages whose groups' "
                  "first buddy_loads are consecutive among all first buddy_loads, in group "
                  "order or not, within one record (same seq, null included); "
                  "pages_built_apart: the others, as [group, seq] in build order; "
                  "pages_built_in_part: pages some of whose groups were never built",
    }


BUILT_DURING_FORMAT = (
    "buddy_built_during_seq: group (string) -> seq (allocs.jsonl) of the record, an alloc or a "
    "free, during which the group's buddy was first built (its first buddy_load), in build "
    "order; a load is in an alloc record when it fired on the record's pid between its ts and "
    "ts_end (as for buddy_built_during_alloc_seq), else in a free record when it fired on the "
    "free's pid, in one of the groups of its extents, between its ext4_free_blocks (ts) and "
    "the next event of that pid in trace.txt that is not one of its ext4_mballoc_free "
    "(ext4_free_blocks -> ext4_mb_clear_bb -> ext4_mb_load_buddy_gfp builds an unbuilt group "
    "at once). Groups built in neither are left out and listed in "
    "groups_built_outside_records; loads_outside_records counts the loads (of every event "
    "kind) in neither; a load during a free's span counts for it when its group is one of the "
    "free's groups or shares a buddy-cache page with one (1 KiB blocks: g and g^1, built "
    "together by ext4_mb_init_cache); groups_built_during_frees lists the groups whose build "
    "was in a free; "
    "loads_during_frees counts those loads by event; free_loads_vs_last_mballoc_free says "
    "whether each fired before or after its free's last ext4_mballoc_free event (same_us: "
    "the same microsecond). buddy_built_during_alloc_seq holds the groups built during "
    "allocations only, loads_outside_allocations counts the loads outside allocations "
    "(frees included), both as before.")


def rederive(case_dir):
    """Adds the record keys (buddy_built_during_seq ...) to a case captured before they
    existed, from its stored meta.json alone, where that is exact: when every load fell inside
    an allocation (loads_outside_allocations 0), a load is attributed to a free only outside
    allocations, so each group's record is its allocation. Otherwise the loads' timestamps
    (not stored) are needed: capture the case again."""
    meta_p = os.path.join(case_dir, "meta.json")
    meta = json.load(open(meta_p), object_pairs_hook=collections.OrderedDict)
    old = meta["fresh_mount_loads"]
    if old["loads_outside_allocations"] != 0 or any(r[2] is None for r in old["load_events"]):
        sys.exit("capture_fresh.py --rederive %s: %d loads outside allocations; their records "
                 "need the loads' timestamps, which are not stored: capture it again"
                 % (case_dir, old["loads_outside_allocations"]))
    new = collections.OrderedDict()
    for k, v in old.items():
        if k in ("buddy_built_during_seq", "loads_outside_records", "groups_built_during_frees",
                 "groups_built_outside_records", "loads_during_frees",
                 "free_loads_vs_last_mballoc_free", "buddy_built_during_seq_format"):
            continue
        new[k] = v
        if k == "buddy_built_during_alloc_seq":
            new["buddy_built_during_seq"] = collections.OrderedDict(v)
            new["loads_outside_records"] = 0
            new["groups_built_during_frees"] = []
            new["groups_built_outside_records"] = []
            new["loads_during_frees"] = {}
            new["free_loads_vs_last_mballoc_free"] = {}
            new["buddy_built_during_seq_format"] = BUILT_DURING_FORMAT
    meta["fresh_mount_loads"] = new
    with open(meta_p, "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print("%s: buddy_built_during_seq = buddy_built_during_alloc_seq (%d groups), "
          "loads_outside_records 0" % (case_dir, len(new["buddy_built_during_seq"])))


def main():
    full_argv = sys.argv[1:]
    if not full_argv or full_argv[0] in ("-h", "--help"):
        sys.exit(__doc__)
    if full_argv[0] == "--rederive":
        for d in full_argv[1:]:
            rederive(d)
        return
    argv = list(full_argv)
    prep = take(argv, "--prep")
    tun_spec = take(argv, "--tunables")
    tunables = parse_tunables(tun_spec) if tun_spec else None
    opts = arg(argv, "--mount-opts") or ""
    if OPTION not in opts.split(","):
        sys.exit("capture_fresh.py: --mount-opts must contain %s (got %r): with the default "
                 "prefetch_block_bitmaps the ext4lazyinit thread builds every group's buddy "
                 "right after the mount" % (OPTION, opts or "(defaults)"))
    out_dir = arg(argv, "--out-dir")
    if not out_dir:
        sys.exit("capture_fresh.py: --out-dir is required")
    out_dir = os.path.abspath(out_dir)
    loads_txt = os.path.join(out_dir, ".loads.txt")

    # 1. no mb_groups read on the traced mount
    plain_run_py = capture_case.run_py
    skipped = []

    def run_py(args, **kw):
        if "--mb-groups" in args:
            i = args.index("--mb-groups")
            skipped.append(args[i + 1])
            args = args[:i] + args[i + 2:]
        return plain_run_py(args, **kw)

    capture_case.run_py = run_py

    plain_mounted = klab.mounted
    prep_meta = {}

    # 2. the untraced preparation (--prep), right after mkfs
    if prep is not None:
        plain_mkfs = klab.mkfs_ext4
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "step_workload.py")

        def mkfs_then_prep(img, size, *a, **kw):
            plain_mkfs(img, size, *a, **kw)
            mnt = "/mnt/%s-prep" % os.path.basename(img)[:-4]
            with klab.loopdev(img) as dev:
                with plain_mounted(dev, mnt, "ext4", opts):
                    t1 = time.time()
                    subprocess.run([sys.executable, script, mnt, prep], check=True)
                    prep_meta.update({
                        "workload": "step_workload", "params": {"steps": prep.split(",")},
                        "cmd": "python3 scripts/step_workload.py <MNT> '%s'" % prep,
                        "mount_opts": opts, "seconds": round(time.time() - t1, 2),
                        "note": "capture_fresh.py --prep: untraced, right after mkfs, default "
                                "tunables; then syncfs, umount; the initial state is taken "
                                "after this (and after the churn, if any)"})

        klab.mkfs_ext4 = mkfs_then_prep

    # 3. a second trace instance for buddy/bitmap loads around the traced mount (and the
    # --tunables written right after that mount)
    # Read-write mounts before the traced one: the aging churn's, when there is one.
    before_traced = [1 if "--age-params" in argv else 0]

    @contextlib.contextmanager
    def mounted(dev, mnt, fstype="ext4", opts=None):
        if "ro" in (opts or "").split(","):
            with plain_mounted(dev, mnt, fstype, opts) as m:
                yield m
            return
        if before_traced[0] > 0:
            before_traced[0] -= 1
            with plain_mounted(dev, mnt, fstype, opts) as m:
                yield m
            return
        filt = "dev == %d" % klab.dev_t(dev)
        with klab.TraceInstance(LOAD_EVENTS, filt=filt, buffer_kb=4096, name="klab-loads") as t:
            t.on()
            with plain_mounted(dev, mnt, fstype, opts) as m:
                if tunables:
                    write_tunables(klab.devname(dev), tunables)
                yield m
                t.off()
                if t.overruns():
                    raise RuntimeError("klab-loads trace instance lost events")
                t.save(loads_txt)

    klab.mounted = mounted

    sys.argv = [os.path.join(LAB, "capture_case.py")] + argv
    capture_case.main()

    if len(skipped) != 1 or not os.path.exists(loads_txt):
        sys.exit("capture_fresh.py: the traced mount was not found (mb_groups reads skipped: "
                 "%d, load trace: %s)" % (len(skipped), os.path.exists(loads_txt)))
    loads = parse_loads(loads_txt)
    os.unlink(loads_txt)
    meta_p = os.path.join(out_dir, "meta.json")
    meta = json.load(open(meta_p), object_pairs_hook=collections.OrderedDict)
    summary = summarise(loads, out_dir)
    meta["fresh_mount"] = True
    meta["fresh_mount_note"] = (
        "no mb_groups read and no_prefetch_block_bitmaps: every group NEED_INIT when tracing "
        "starts (so initial_state.json has kernel_mb_groups null and kernel_cross_check false); "
        "fresh_mount_loads: the buddy and bitmap loads traced on that mount")
    meta["fresh_mount_loads"] = summary
    if prep is not None:
        # Recorded as aging: the image is no longer as mkfs left it when the initial state is
        # taken (the mkfs-layout test compares every capture without `aging` with mkfs).
        if "aging" in meta:
            meta["aging"]["prep_before"] = prep_meta
        else:
            meta["aging"] = prep_meta
    if tunables:
        meta["tunables_written"] = {k: int(v) for k, v in tunables.items()}
    meta["capture_cmd"] = capture_cmd(full_argv)
    with open(meta_p, "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    brief = {k: v for k, v in summary.items()
             if k not in ("load_events", "load_events_format", "buddy_built_during_alloc_seq",
                          "buddy_built_during_seq", "buddy_built_during_seq_format")}
    print(json.dumps({"fresh_mount_loads": brief}))


if __name__ == "__main__":
    main()
