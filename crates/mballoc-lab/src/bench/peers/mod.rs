//! The systems of the side-by-side benchmarks, each behind [`super::peer::RangeAlloc`].

pub mod ext2fs;
pub mod first_fit;
pub mod mballoc;
pub mod offset;
pub mod xalloc;

use ::mballoc::{Geometry, Policy};

use super::peer::RangeAlloc;
use super::BenchError;

/// One system of the churn comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum System {
    Mballoc(Policy),
    OffsetAllocator,
    Xalloc,
    FirstFit,
    Libext2fs,
}

impl System {
    /// Every system, mballoc first.
    pub const ALL: [System; 6] = [
        System::Mballoc(Policy::Linux618),
        System::Mballoc(Policy::Proposed),
        System::OffsetAllocator,
        System::Xalloc,
        System::FirstFit,
        System::Libext2fs,
    ];

    pub fn name(self) -> String {
        match self {
            System::Mballoc(p) => format!("mballoc/{}", p.name()),
            System::OffsetAllocator => "offset-allocator".into(),
            System::Xalloc => "xalloc".into(),
            System::FirstFit => "first-fit-bitmap".into(),
            System::Libext2fs => "libext2fs".into(),
        }
    }

    /// Whether the system is mballoc (the subject, not a peer).
    pub fn is_mballoc(self) -> bool {
        matches!(self, System::Mballoc(_))
    }

    /// Why the system cannot run in this build, if it cannot.
    pub fn unavailable(self) -> Option<&'static str> {
        (self == System::Libext2fs && !ext2fs::AVAILABLE).then_some(ext2fs::UNAVAILABLE_REASON)
    }

    /// Builds the system over `size` units (`per_group` units per ext4 group) and hands it to
    /// `f`, which is generic over the system's handle type.
    pub fn with<R>(
        self,
        size: u64,
        per_group: u32,
        commit_every: u32,
        settings: &[String],
        f: &mut impl Driver<R>,
    ) -> Result<R, BenchError> {
        let units = u32::try_from(size).map_err(|_| BenchError::BadOption {
            name: "space",
            value: size.to_string(),
            why: "the raw-speed peers take u32 sizes",
        })?;
        match self {
            System::Mballoc(p) => {
                let geo = Geometry::new(4096, per_group, size, 0, 16)?;
                f.drive(&mut mballoc::MballocPeer::new(
                    geo,
                    p,
                    1,
                    commit_every,
                    settings,
                )?)
            }
            System::OffsetAllocator => f.drive(&mut offset::OffsetPeer::new(units, 1 << 20)),
            System::Xalloc => f.drive(&mut xalloc::XallocPeer::new(units, 1 << 17)),
            System::FirstFit => f.drive(&mut first_fit::FirstFit::new(size)),
            System::Libext2fs => f.drive(&mut ext2fs::Ext2fsPeer::open(
                size,
                per_group,
                ext2fs::Backend::BitArray,
            )?),
        }
    }
}

/// Something run on a system, whatever its handle type (a generic closure).
pub trait Driver<R> {
    fn drive<P: RangeAlloc>(&mut self, p: &mut P) -> Result<R, BenchError>;
}
