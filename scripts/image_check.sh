#!/usr/bin/env bash
# Checks the image reader against the real kernel and e2fsprogs on freshly made, kernel-aged
# images: for each configuration, mkfs.ext4, a read-write loop mount aged with fallocated and
# deleted files, then `mballoc groups --image` against the kernel's mb_groups (read-only
# remount) and `mballoc freefrag --image` against e2freefrag, byte for byte. Needs root,
# e2fsprogs, python3 and a kernel with ext4; CI never runs it (the tests read the stored
# images in crates/mballoc-lab/tests/data/images/).
#
#   sudo scripts/image_check.sh [SIZE]        # default 2G per image
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/target/release/mballoc"
[ -x "$bin" ] || (cd "$root" && cargo build --release -p mballoc-lab)
size=${1:-2G}
work=$(mktemp -d)
mnt="$work/mnt"
mkdir -p "$mnt"
trap 'umount "$mnt" 2>/dev/null || true; rm -rf "$work"' EXIT

age() { # $1 = mount point: 600 fallocated files of mixed sizes, half deleted, 100 more
    python3 - "$1" <<'PY'
import os, random, sys
random.seed(1)
d = sys.argv[1]
files = []
for i in range(600):
    p = f"{d}/f{i}"
    with open(p, "wb") as f:
        os.posix_fallocate(f.fileno(), 0, random.choice([64 << 10, 1 << 20, 4 << 20]))
    files.append(p)
for p in random.sample(files, 300):
    os.unlink(p)
for i in range(100):
    with open(f"{d}/g{i}", "wb") as f:
        os.posix_fallocate(f.fileno(), 0, random.choice([128 << 10, 2 << 20]))
PY
}

fail=0
# name: mkfs.ext4 options
while IFS=: read -r name opts; do
    img="$work/$name.img"
    truncate -s "$size" "$img"
    # shellcheck disable=SC2086
    mkfs.ext4 -q -F $opts "$img"
    mount -o loop "$img" "$mnt"
    age "$mnt"
    umount "$mnt"
    mount -o loop,ro "$img" "$mnt"
    dev=$(basename "$(findmnt -n -o SOURCE "$mnt")")
    cat "/proc/fs/ext4/$dev/mb_groups" > "$work/$name.kernel"
    umount "$mnt"
    "$bin" groups --image "$img" > "$work/$name.ours"
    e2freefrag "$img" > "$work/$name.e2freefrag"
    "$bin" freefrag --image "$img" > "$work/$name.freefrag"
    for pair in "kernel ours mb_groups" "e2freefrag freefrag e2freefrag"; do
        set -- $pair
        if cmp -s "$work/$name.$1" "$work/$name.$2"; then
            echo "$name: $3 identical"
        else
            echo "$name: $3 DIFFERS"; diff "$work/$name.$1" "$work/$name.$2" | head -5; fail=1
        fi
    done
    rm -f "$img"
done <<'CONF'
4k-flex-csum:-b 4096
4k-noflex-nocsum:-b 4096 -O ^flex_bg,^metadata_csum
1k-flex-csum:-b 1024
1k-noflex-nocsum:-b 1024 -O ^flex_bg,^metadata_csum
CONF
exit $fail
