//! The device a virtual CPU waits on when it needs a block bitmap that is not in memory.
//!
//! A read is queued on a device of `depth` slots, each serving one read at a time in
//! `service_ns`: a read submitted at `t` starts when a slot is free and ends `service_ns`
//! later. A read of a block already submitted is never issued again: a second CPU that
//! needs the same bitmap waits for the first one's read (`ext4_wait_block_bitmap` sleeps on
//! the buffer's lock, it does not submit its own bio); a read that has finished costs nothing
//! more (the buffer is up to date in memory). The service time of a read is what the
//! library reports for it (the source's per-read cost, set from the device class below).
//!
//! | class | service time | depth | source |
//! |---|---|---|---|
//! | HDD (Seagate Exos 10E2400, 10,000 rpm SAS) | 3,000,000 ns | 1 | half a revolution at 10,000 rpm (60 s / 10,000 / 2), the rotational latency alone: a lower bound (seek time left out); one head |
//! | SATA SSD (Huawei ES3000 V6 in the seed; Samsung 860 EVO datasheet as the class's stand-in) | 100,000 ns | 10 | 4 KiB random read: 10,000 IOPS at QD1 (= 100 µs), 98,000 IOPS at QD32 (= about 10 in service at once) |
//! | NVMe (Samsung 970 EVO Plus 1 TB) | 52,632 ns | 32 | Samsung datasheet, 4 KiB random read: 19,000 IOPS at QD1 (= 52.6 µs), 600,000 IOPS at QD32 (= about 32 in service at once) |
//! | this machine (loop device over a file) | 10,176 ns | 1 | `docs/measurements/bitmap-read.md`: median 4 KiB O_DIRECT read, fio |

use std::collections::HashMap;

use serde::Serialize;

/// A device class of seed 003's machines (and this one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeviceClass {
    Hdd,
    SataSsd,
    Nvme,
    Local,
}

impl DeviceClass {
    /// One 4 KiB random read, ns (the table above).
    pub fn service_ns(self) -> u64 {
        match self {
            DeviceClass::Hdd => 3_000_000,
            DeviceClass::SataSsd => 100_000,
            DeviceClass::Nvme => 52_632,
            DeviceClass::Local => 10_176,
        }
    }

    /// Reads in service at once (the table above).
    pub fn depth(self) -> usize {
        match self {
            DeviceClass::Hdd | DeviceClass::Local => 1,
            DeviceClass::SataSsd => 10,
            DeviceClass::Nvme => 32,
        }
    }

    /// Whether the block layer calls it rotational. This machine's loop devices sit over
    /// files on a disk whose queue says rotational (`/sys/block/vda/queue/rotational` is 1, and
    /// so is the loop device's over it: `loop_update_rotational` copies the backing file's
    /// device), as the stored captures' mounts show (`mb_max_linear_groups` 4).
    pub fn rotational(self) -> bool {
        matches!(self, DeviceClass::Hdd | DeviceClass::Local)
    }

    /// The tunables the mount itself sets from the device, before any `--set`.
    pub fn mount_settings(self) -> Vec<String> {
        mount_settings(self.rotational())
    }
}

/// `ext4_mb_init`: `s_mb_max_linear_groups` is 0 on a non-rotational device (`bdev_nonrot`),
/// `MB_DEFAULT_LINEAR_LIMIT` (4) on a rotational one; with `mb_optimize_scan` those groups
/// after the goal are tried in order before the order indexes are walked.
pub fn mount_settings(rotational: bool) -> Vec<String> {
    let linear = if rotational { 4 } else { 0 };
    vec![format!("mb_max_linear_groups={linear}")]
}

/// What the device did over a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct IoStats {
    /// Reads issued to the device.
    pub reads: u64,
    /// Waits for a read another CPU (or a prefetch) had issued already.
    pub shared_waits: u64,
    /// Virtual ns CPUs spent waiting for reads.
    pub wait_ns: u64,
}

/// The device's queue and the reads it knows.
#[derive(Debug, Clone)]
pub struct Device {
    /// When each slot is free again.
    slots: Vec<u64>,
    /// (device, block) -> when its read ends.
    reads: HashMap<(usize, u64), u64>,
    pub stats: IoStats,
}

impl Device {
    /// A device with `depth` slots (at least one).
    pub fn new(depth: usize) -> Device {
        Device {
            slots: vec![0; depth.max(1)],
            reads: HashMap::new(),
            stats: IoStats::default(),
        }
    }

    /// The same device seen from a clock restarted at `t`: a read that ended by `t` ends at
    /// 0 (its buffer is in memory), one in flight ends `end - t` from the new start.
    pub fn rebased(mut self, t: u64) -> Device {
        for end in self.slots.iter_mut().chain(self.reads.values_mut()) {
            *end = end.saturating_sub(t);
        }
        self.stats = IoStats::default();
        self
    }

    /// Submits a read of `key` at `now` unless one was submitted before; returns when the
    /// block's read ends. A read of 0 ns is no read (a computed `BLOCK_UNINIT` bitmap).
    pub fn submit(&mut self, now: u64, key: (usize, u64), ns: u64) -> u64 {
        if let Some(&end) = self.reads.get(&key) {
            return end;
        }
        if ns == 0 {
            return now;
        }
        let (slot, &free) = self
            .slots
            .iter()
            .enumerate()
            .min_by_key(|&(i, &f)| (f, i))
            .expect("a device has a slot");
        let end = now.max(free) + ns;
        self.slots[slot] = end;
        self.reads.insert(key, end);
        self.stats.reads += 1;
        end
    }

    /// A CPU at `now` needs `key`: when it can go on (after the read in flight, or a new one).
    pub fn wait(&mut self, now: u64, key: (usize, u64), ns: u64) -> u64 {
        let shared = self.reads.get(&key).is_some_and(|&end| end > now);
        let end = self.submit(now, key, ns).max(now);
        if shared {
            self.stats.shared_waits += 1;
        }
        self.stats.wait_ns += end - now;
        end
    }
}
