#!/usr/bin/env bash
# The real kernel's cost of one block-bitmap read on this machine: 4 KiB O_DIRECT random reads,
# one at a time, from a loop device over a file in /tmp — how the kernel-lab attaches its ext4
# images, so the path a bitmap read takes there (ext4_read_block_bitmap_nowait -> submit_bh ->
# loop -> backing file). Root; not run by CI. Results: docs/measurements/bitmap-read.md.
#
# usage: measure_bitmap_read.sh LOOPDEV [RUNS] [SECONDS]
#   LOOPDEV: a free loop device to attach (never /dev/loop0, which other jobs use)
#   RUNS: repetitions per mode (default 3); SECONDS: length of each fio run (default 10)
# Prints one line per run: mode, reads, mean, p50, p90, p99 latency in microseconds.
# Modes: buffered = losetup --direct-io=off (reads served from the backing file's page cache,
# as for the kernel-lab images); direct = --direct-io=on (every read goes to the virtual disk).
set -euo pipefail

dev=${1:?usage: measure_bitmap_read.sh LOOPDEV [RUNS] [SECONDS]}
runs=${2:-3}
secs=${3:-10}
if [[ $dev == /dev/loop0 ]]; then
    echo "refusing /dev/loop0: other jobs use it" >&2
    exit 2
fi
if losetup "$dev" >/dev/null 2>&1; then
    echo "$dev is attached already; pick a free loop device" >&2
    exit 2
fi

img=$(mktemp /tmp/bitmap-read.XXXXXX.img)
cleanup() {
    losetup -d "$dev" 2>/dev/null || true
    rm -f "$img"
}
trap cleanup EXIT
# Real data: reads of a sparse hole would cost no I/O at all.
dd if=/dev/urandom of="$img" bs=1M count=256 status=none
sync

for mode in buffered direct; do
    if [[ $mode == direct ]]; then dio=on; else dio=off; fi
    losetup --direct-io=$dio "$dev" "$img"
    for _ in $(seq "$runs"); do
        fio --name=bitmap-read --filename="$dev" --rw=randread --bs=4k --direct=1 \
            --ioengine=psync --iodepth=1 --numjobs=1 --time_based --runtime="$secs" \
            --output-format=json |
            python3 -c '
import json, sys
r = json.load(sys.stdin)["jobs"][0]["read"]
c, p = r["clat_ns"], r["clat_ns"]["percentile"]
us = lambda ns: f"{ns / 1000:.3f}"
print(sys.argv[1], r["total_ios"], us(c["mean"]), us(p["50.000000"]), us(p["90.000000"]),
      us(p["99.000000"]))
' "$mode"
    done
    losetup -d "$dev"
done
