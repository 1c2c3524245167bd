#!/usr/bin/env python3
"""Capture a kernel case with mballoc sysfs tunables changed (root; not run by CI).

usage: capture_tuned.py NAME=VALUE[,NAME=VALUE...] -- CAPTURE_CASE_ARGS...

`../shared/kernel-lab/capture_case.py` mounts with the kernel's default tunables. This wrapper
runs it unchanged, except that the traced mount writes the given values to `/sys/fs/ext4/<dev>/`
first, so the traced workload and the tunables recorded in `meta.json` (read after the mount)
see them. The untraced aging mount (`--age-params`) keeps the defaults: its write-back under
other tunables did not repeat exactly between captures. Capture twice and compare with
`determinism.py --compare-cases A B` before storing a case.
"""
import contextlib
import os
import sys

LAB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "kernel-lab")
sys.path.insert(0, LAB)
import capture_case  # noqa: E402
import klab  # noqa: E402


def parse(spec):
    tun = {}
    for item in spec.split(","):
        name, _, value = item.partition("=")
        if not name or not value.isdigit():
            sys.exit("bad tunable %r: want NAME=VALUE" % item)
        tun[name] = value
    return tun


def write(devname, tunables):
    for name, value in tunables.items():
        with open("/sys/fs/ext4/%s/%s" % (devname, name), "w") as f:
            f.write(value)


def main():
    if len(sys.argv) < 3 or sys.argv[2] != "--":
        sys.exit(__doc__)
    tunables = parse(sys.argv[1])
    plain = klab.mounted
    # Read-write mounts to leave alone: the aging churn's, when there is one.
    untuned = [1 if "--age-params" in sys.argv else 0]

    @contextlib.contextmanager
    def tuned(dev, mnt, fstype="ext4", opts=None):
        with plain(dev, mnt, fstype, opts) as m:
            if "ro" not in (opts or "").split(","):
                if untuned[0] > 0:
                    untuned[0] -= 1
                else:
                    write(klab.devname(dev), tunables)
            yield m

    klab.mounted = tuned
    sys.argv = [sys.argv[0]] + sys.argv[3:]
    capture_case.main()


if __name__ == "__main__":
    main()
