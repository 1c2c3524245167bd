#!/usr/bin/env bash
# Makes the small ext4 images the image-reader tests read, and captures what the real tools say
# about them: the kernel's mb_groups (one read-only loop mount per image), e2freefrag, dumpe2fs
# and each regular file's extents per debugfs. Needs root, e2fsprogs and a kernel with ext4;
# the tests themselves only read what this leaves in crates/mballoc-lab/tests/data/images/.
#
#   sudo scripts/image_fixtures.sh
#
# Each image is populated through a read-write loop mount (files written, some deleted, some
# fallocated, to leave holes), unmounted, then stored as `e2image -r` output (metadata only,
# data blocks zeroed), gzip-compressed.
set -euo pipefail
out="$(cd "$(dirname "$0")/.." && pwd)/crates/mballoc-lab/tests/data/images"
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

populate() { # $1 = mount point, $2 = file count, $3 = max KiB per file
    local mnt=$1 n=$2 max=$3 i
    mkdir -p "$mnt/d1" "$mnt/d2"
    for i in $(seq 1 "$n"); do
        local kib=$(( (i * 37 % max) + 4 ))
        if (( i % 5 == 0 )); then
            fallocate -l "${kib}KiB" "$mnt/d$(( i % 2 + 1 ))/f$i"
        else
            dd if=/dev/zero of="$mnt/d$(( i % 2 + 1 ))/f$i" bs=1K count="$kib" status=none
        fi
        sync
    done
    # Delete every third file: holes between the survivors.
    for i in $(seq 3 3 "$n"); do rm -f "$mnt"/d*/f$i; done
    sync
    # Appends to survivors after the deletes: a second extent in a hole elsewhere.
    for i in $(seq 1 7 "$n"); do
        [ -e "$mnt/d$(( i % 2 + 1 ))/f$i" ] || continue
        dd if=/dev/zero bs=1K count=$(( max / 2 + 3 )) status=none >> "$mnt/d$(( i % 2 + 1 ))/f$i"
        sync
    done
}

extents() { # $1 = image: the leaf extents of the regular files under /d1 and /d2
    local img=$1 d ino
    for d in /d1 /d2; do
        for ino in $(debugfs -R "ls -l -p $d" "$img" 2>/dev/null | awk -F/ '$3 ~ /^100/ {print $2}'); do
            debugfs -R "ex <$ino>" "$img" 2>/dev/null | python3 -c '
import re, sys
ino = sys.argv[1]
for line in sys.stdin.readlines()[1:]:
    m = re.match(r"\s*(\d+)/\s*(\d+)\s+\d+/\s*\d+\s+(\d+)(?:\s*-\s*\d+)?\s+(\d+)(?:\s*-\s*\d+)?\s+(\d+)", line)
    if m and m.group(1) == m.group(2):
        print(ino, m.group(3), m.group(4), m.group(5))
' "$ino"
        done
    done | sort -n -k1,1 -k2,2
}

flip_byte() { # $1 = file, $2 = byte offset: xor 0x0f into it
    python3 -c 'import sys
f = open(sys.argv[1], "r+b"); f.seek(int(sys.argv[2])); b = f.read(1)[0]
f.seek(int(sys.argv[2])); f.write(bytes([b ^ 0x0f]))' "$1" "$2"
}

corrupt_capture() { # $1 = name, $2 = what, $3 = byte offset to flip in the image
    local name=$1 what=$2 off=$3 img="$work/$1-$2.img" mnt="/mnt/img-$1-$2" dev
    zcat "$out/$name.raw.gz" > "$img"
    flip_byte "$img" "$off"
    mkdir -p "$mnt"
    dev=$(losetup -f --show -r "$img")
    mount -o ro "$dev" "$mnt"
    {
        echo "# $name.raw.gz with byte $off xor 0x0f ($what), mount -o ro, then"
        echo "# cat /proc/fs/ext4/$(basename "$dev")/mb_groups (first read after the mount)"
        echo "# kernel $(uname -r)"
    } > "$out/$name-$what.mb_groups.cmd"
    cat "/proc/fs/ext4/$(basename "$dev")/mb_groups" > "$out/$name-$what.mb_groups"
    umount "$mnt"
    losetup -d "$dev"
    rmdir "$mnt"
}

make_image() { # $1 = name, $2 = size, $3... = mkfs.ext4 options, then -- count max
    local name=$1 size=$2; shift 2
    local opts=()
    while [ "$1" != "--" ]; do opts+=("$1"); shift; done
    shift
    local n=$1 max=$2 img="$work/$name.img" mnt="/mnt/img-$name" dev
    truncate -s "$size" "$img"
    mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "${opts[@]}" "$img"
    mkdir -p "$mnt"
    dev=$(losetup -f --show "$img")
    mount "$dev" "$mnt"
    populate "$mnt" "$n" "$max"
    umount "$mnt"
    losetup -d "$dev"
    # The kernel's view: a read-only mount, mb_groups read once.
    dev=$(losetup -f --show -r "$img")
    mount -o ro "$dev" "$mnt"
    {
        echo "# cat /proc/fs/ext4/$(basename "$dev")/mb_groups after mount -o ro of $name.img"
        echo "# kernel $(uname -r)"
    } > "$out/$name.mb_groups.cmd"
    cat "/proc/fs/ext4/$(basename "$dev")/mb_groups" > "$out/$name.mb_groups"
    umount "$mnt"
    losetup -d "$dev"
    rmdir "$mnt"
    (cd "$work" && e2freefrag "$name.img") > "$out/$name.e2freefrag"
    dumpe2fs "$img" 2>/dev/null > "$out/$name.dumpe2fs"
    # Every in-use regular file: "ino lblk pblk len" per leaf extent, as debugfs lists them.
    extents "$img" > "$out/$name.extents"
    e2image -r "$img" "$work/$name.raw"
    gzip -9 -n -c "$work/$name.raw" > "$out/$name.raw.gz"
}

# 4 KiB blocks, metadata_csum, 64bit, flex_bg: 6 groups of 16 MiB, the last ones BLOCK_UNINIT.
make_image frag4k 96M -b 4096 -g 4096 -N 256 -- 60 900
# 1 KiB blocks (first data block 1, buddy orders to 11): 12 groups of 2 MiB.
make_image frag1k 24M -b 1024 -g 2048 -N 512 -- 50 200
# Older layout: 32-byte descriptors and uninit_bg's crc16 checksums, no flex_bg.
make_image old4k 48M -b 4096 -g 4096 -N 128 -O ^metadata_csum,^64bit,^flex_bg,uninit_bg -- 30 1500
# A block bitmap that fails its checksum: byte 100 of group 1's bitmap (block 98).
corrupt_capture frag4k bad-bitmap $(( 98 * 4096 + 100 ))
# A BLOCK_UNINIT group's descriptor that fails its checksum: bg_reserved of group 4's
# 64-byte descriptor in block 1 (only the checksum changes).
corrupt_capture frag4k bad-desc $(( 4096 + 4 * 64 + 0x3c ))
ls -l "$out"
