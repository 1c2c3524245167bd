//! A device that fails on purpose, for crash tests.
//!
//! It models a page cache in front of a disk. Writes go to the cache (reads see them) and to a
//! list of pending writes; `sync` moves the pending writes to the durable image. A crash keeps the
//! durable image plus whichever pending writes [`CrashMode`] says landed — none, all, or a random
//! subset with some torn at 512-byte sector granularity, since a real cache writes back in any
//! order and a disk only promises sector atomicity.
//!
//! A [`FaultPlan`] picks the moment of failure, counted from when the plan was set: power lost at
//! write `n` (the write and everything after it fail), write `n` torn (part of it reaches the
//! disk, then power is lost), or sync `n` failing with EIO (nothing pending becomes durable, as
//! with Linux's fsync error semantics).

use std::io;

use parking_lot::Mutex;

use super::device::{read_from, write_into, Device};

/// Sector size for torn writes: the unit a disk writes atomically.
const SECTOR: u64 = 512;

/// When and how the device fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FaultPlan {
    /// Never fails.
    #[default]
    None,
    /// Power is lost as write number `at` (0-based) is issued: it fails and nothing lands.
    LoseWrite {
        /// The write, 0-based.
        at: u64,
    },
    /// Write `at` is torn: part of it reaches the disk, then power is lost.
    TearWrite {
        /// The write, 0-based.
        at: u64,
        /// What of it lands.
        tear: Tear,
    },
    /// Sync number `at` fails with EIO and makes nothing durable; the device stays up.
    FailSync {
        /// The sync, 0-based.
        at: u64,
    },
}

/// Which part of a torn write reaches the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tear {
    /// The first `n` bytes (clamped to the write's length).
    Prefix(usize),
    /// A pseudo-random subset of the write's sectors, chosen by `seed`.
    Sectors {
        /// Seed of the choice.
        seed: u64,
    },
}

/// Which unsynced writes survive a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashMode {
    /// None of them: the cache was never written back.
    NoneLanded,
    /// All of them, in order.
    AllLanded,
    /// Each independently: not at all, whole, or a random subset of its sectors.
    Random {
        /// Seed of the choices.
        seed: u64,
    },
}

#[derive(Debug)]
struct Pending {
    offset: u64,
    data: Vec<u8>,
}

#[derive(Debug, Default)]
struct State {
    durable: Vec<u8>,
    cache: Vec<u8>,
    pending: Vec<Pending>,
    plan: FaultPlan,
    writes: u64,
    syncs: u64,
    dead: bool,
}

/// A page-cache-plus-disk model that fails when its plan says so.
#[derive(Debug, Default)]
pub struct FaultDevice {
    state: Mutex<State>,
}

fn power_lost() -> io::Error {
    io::Error::other("fault injection: power lost")
}

impl FaultDevice {
    /// A device whose durable contents are `image`, with no plan.
    pub fn new(image: Vec<u8>) -> Self {
        let state = State {
            cache: image.clone(),
            durable: image,
            ..State::default()
        };
        FaultDevice {
            state: Mutex::new(state),
        }
    }

    /// Arms `plan` and restarts the write and sync counters it refers to.
    pub fn set_plan(&self, plan: FaultPlan) {
        let mut s = self.state.lock();
        s.plan = plan;
        s.writes = 0;
        s.syncs = 0;
    }

    /// Writes issued since the plan was set (including one that failed).
    pub fn writes(&self) -> u64 {
        self.state.lock().writes
    }

    /// Syncs issued since the plan was set.
    pub fn syncs(&self) -> u64 {
        self.state.lock().syncs
    }

    /// Whether power has been lost.
    pub fn is_dead(&self) -> bool {
        self.state.lock().dead
    }

    /// The disk image a crash now would leave behind.
    pub fn crash(&self, mode: CrashMode) -> Vec<u8> {
        let s = self.state.lock();
        let mut image = s.durable.clone();
        let mut rng = SplitMix(match mode {
            CrashMode::Random { seed } => seed,
            _ => 0,
        });
        for p in &s.pending {
            match mode {
                CrashMode::NoneLanded => {}
                CrashMode::AllLanded => land(&mut image, p.offset, &p.data),
                CrashMode::Random { .. } => match rng.next() % 3 {
                    0 => {}
                    1 => land(&mut image, p.offset, &p.data),
                    _ => land_sectors(&mut image, p.offset, &p.data, &mut rng),
                },
            }
        }
        image
    }
}

/// Puts bytes on the "disk"; the image grows if needed. Offsets come from our own writes, which
/// already fitted in memory, so growth cannot fail here.
fn land(image: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let _ = write_into(image, data, offset);
}

/// Lands a random subset of the sectors `data` covers (sectors aligned on device offsets).
fn land_sectors(image: &mut Vec<u8>, offset: u64, data: &[u8], rng: &mut SplitMix) {
    let mut at = 0usize;
    while at < data.len() {
        let abs = offset + at as u64;
        let room = (SECTOR - abs % SECTOR) as usize;
        let end = (at + room).min(data.len());
        if rng.next() & 1 == 0 {
            land(image, abs, &data[at..end]);
        }
        at = end;
    }
}

impl State {
    /// Handles the write the plan names, if this is it: returns `true` when the write must fail.
    fn fault_on_write(&mut self, buf: &[u8], offset: u64) -> bool {
        let n = self.writes;
        self.writes += 1;
        match self.plan {
            FaultPlan::LoseWrite { at } if at == n => self.dead = true,
            FaultPlan::TearWrite { at, tear } if at == n => {
                self.dead = true;
                self.tear(buf, offset, tear);
            }
            _ => {}
        }
        self.dead
    }

    fn tear(&mut self, buf: &[u8], offset: u64, tear: Tear) {
        match tear {
            Tear::Prefix(n) => land(&mut self.durable, offset, &buf[..n.min(buf.len())]),
            Tear::Sectors { seed } => {
                land_sectors(&mut self.durable, offset, buf, &mut SplitMix(seed));
            }
        }
    }
}

impl Device for FaultDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let s = self.state.lock();
        if s.dead {
            return Err(power_lost());
        }
        read_from(&s.cache, buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut s = self.state.lock();
        if s.dead || s.fault_on_write(buf, offset) {
            return Err(power_lost());
        }
        write_into(&mut s.cache, buf, offset)?;
        s.pending.push(Pending {
            offset,
            data: buf.to_vec(),
        });
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        let mut s = self.state.lock();
        if s.dead {
            return Err(power_lost());
        }
        let n = s.syncs;
        s.syncs += 1;
        if s.plan == (FaultPlan::FailSync { at: n }) {
            return Err(io::Error::other("fault injection: fsync failed"));
        }
        let pending = std::mem::take(&mut s.pending);
        for p in pending {
            land(&mut s.durable, p.offset, &p.data);
        }
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.state.lock().cache.len() as u64)
    }
}

/// SplitMix64: a tiny deterministic generator, so a crash image is reproducible from its seed.
pub(crate) struct SplitMix(pub u64);

impl SplitMix {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsynced_writes_are_lost_unless_they_landed() {
        let d = FaultDevice::new(vec![0; 1024]);
        d.write_at(&[1; 4], 0).unwrap();
        d.sync().unwrap();
        d.write_at(&[2; 4], 0).unwrap();
        let mut buf = [0u8; 4];
        d.read_at(&mut buf, 0).unwrap();
        assert_eq!(buf, [2; 4], "reads see the cache");
        assert_eq!(&d.crash(CrashMode::NoneLanded)[..4], &[1; 4]);
        assert_eq!(&d.crash(CrashMode::AllLanded)[..4], &[2; 4]);
    }

    #[test]
    fn lost_write_kills_the_device() {
        let d = FaultDevice::new(vec![0; 1024]);
        d.set_plan(FaultPlan::LoseWrite { at: 1 });
        d.write_at(&[1; 4], 0).unwrap();
        assert!(d.write_at(&[2; 4], 4).is_err());
        assert!(d.sync().is_err());
        assert!(d.is_dead());
        assert_eq!(
            &d.crash(CrashMode::AllLanded)[..8],
            &[1, 1, 1, 1, 0, 0, 0, 0]
        );
    }

    #[test]
    fn torn_write_lands_a_prefix() {
        let d = FaultDevice::new(vec![0; 2048]);
        d.set_plan(FaultPlan::TearWrite {
            at: 0,
            tear: Tear::Prefix(600),
        });
        assert!(d.write_at(&[7; 1024], 0).is_err());
        let img = d.crash(CrashMode::NoneLanded);
        assert!(img[..600].iter().all(|&b| b == 7));
        assert!(img[600..].iter().all(|&b| b == 0));
    }

    #[test]
    fn failed_sync_makes_nothing_durable() {
        let d = FaultDevice::new(vec![0; 16]);
        d.set_plan(FaultPlan::FailSync { at: 0 });
        d.write_at(&[3; 4], 0).unwrap();
        assert!(d.sync().is_err());
        assert_eq!(&d.crash(CrashMode::NoneLanded)[..4], &[0; 4]);
    }
}
