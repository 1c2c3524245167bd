//! The group-or-file decision and request normalisation: how big a window to search for, and
//! where (`ext4_mb_group_or_file`, `ext4_mb_normalize_request`, `ext4_mb_pa_adjust_overlap`).

use crate::alloc::context::Ctx;
use crate::alloc::prealloc::space::OwnerPas;
use crate::geometry::Geometry;
use crate::request::Flags;

/// `EXT_MAX_BLOCKS`.
const EXT_MAX_BLOCKS: i64 = 0xffff_ffff;

/// `ext4_mb_group_or_file`: small files share the per-CPU locality group (HINT_GROUP_ALLOC),
/// large or still-written files stream with inode PAs (STREAM_ALLOC), a closed file's last
/// extent gets no PA (HINT_NOPREALLOC). Returns whether the locality group is used.
pub fn group_or_file(ctx: &mut Ctx, geo: &Geometry, fs_busy: bool) -> bool {
    if !ctx.flags.contains(Flags::HINT_DATA) || ctx.flags.contains(Flags::HINT_GOAL_ONLY) {
        return false;
    }
    let bsize = u64::from(geo.block_size());
    let mut group_pa = ctx.tun.mb_group_prealloc > 0;
    let mut inode_pa = true;
    // extent_logical_end(): blocks, the length being clusters.
    let mut size = u64::from(ctx.o_ex.logical) + geo.c2b(ctx.o_ex.len.into());
    let isize = ctx.req.i_size.div_ceil(bsize);
    if size == isize && !fs_busy && !ctx.req.open_for_write {
        inode_pa = false;
    }
    size = size.max(isize);
    if size > u64::from(ctx.tun.mb_stream_req) {
        group_pa = false;
    }
    if !group_pa {
        ctx.flags |= if inode_pa {
            Flags::STREAM_ALLOC
        } else {
            Flags::HINT_NOPREALLOC
        };
        return false;
    }
    ctx.flags |= Flags::HINT_GROUP_ALLOC;
    true
}

/// The preallocation window for a file of `size` bytes (the size table of
/// `ext4_mb_normalize_request`): `(start_off, size)` in bytes.
///
/// `max = 2 << bsbits` is a block count compared against KiB-looking constants; with 4 KiB
/// blocks this makes every file above 8 MiB use the 8 MiB window ("the 8 MiB rule").
/// `max_prealloc` is seed 004's `mb_max_prealloc_kb` in bytes (8 MiB = the kernel).
/// The request's length enters twice, as the kernel has it: in clusters (`req_clusters`,
/// the 8 MiB test compares `fe_len` with a block count) and in blocks (`req_blocks`, the
/// unwidened window); the two differ only with bigalloc.
fn window(
    size: i64,
    logical: i64,
    (req_clusters, req_blocks): (i64, i64),
    bsbits: u32,
    max_prealloc: i64,
) -> (i64, i64) {
    const K: i64 = 1024;
    let max = 2i64 << bsbits;
    let nrl = |req: i64, lim: i64, chunk: i64| req <= lim || max <= chunk;
    let aligned = |shift: u32| (logical >> (shift - bsbits)) << shift;
    for cap in [16 * K, 32 * K, 64 * K, 128 * K, 256 * K, 512 * K, 1024 * K] {
        if size <= cap {
            return (0, cap);
        }
    }
    if nrl(size, 4 * K * K, 2 * K) {
        (aligned(21), 2 * K * K)
    } else if nrl(size, 8 * K * K, 4 * K) {
        (aligned(22), 4 * K * K)
    } else if nrl(req_clusters, (8 << 20) >> bsbits, 8 * K) {
        (aligned(23), max_prealloc)
    } else {
        (logical << bsbits, req_blocks << bsbits)
    }
}

/// `ext4_mb_normalize_request`: widens the goal to the predicted file size, clipped by the
/// mapped neighbours, the group size and the owner's other PAs, and aims it at the physical
/// neighbours when that lets the new extent merge.
pub fn normalize(ctx: &mut Ctx, geo: &Geometry, pas: Option<&OwnerPas>) {
    if !ctx.flags.contains(Flags::HINT_DATA)
        || ctx.flags.contains(Flags::HINT_GOAL_ONLY)
        || ctx.flags.contains(Flags::HINT_NOPREALLOC)
    {
        return;
    }
    if ctx.flags.contains(Flags::HINT_GROUP_ALLOC) {
        // ext4_mb_normalize_group_request: only the length changes.
        ctx.g_ex.len = ctx.tun.mb_group_prealloc;
        return;
    }
    let req = ctx.req;
    let bsbits = geo.bsbits();
    let bpg = geo.blocks_per_group() as i64;
    let logical = i64::from(ctx.o_ex.logical);
    let olen = i64::from(ctx.o_ex.len);
    let olen_blocks = geo.c2b(ctx.o_ex.len.into()) as i64;
    let size = ((logical + olen_blocks) << bsbits).max(req.i_size as i64);
    let max_prealloc = i64::from(ctx.tun.mb_max_prealloc_kb) << 10;
    let (start_off, size) = window(size, logical, (olen, olen_blocks), bsbits, max_prealloc);
    let mut size = size >> bsbits;
    let mut start = (start_off >> bsbits).max(logical - logical % bpg);
    if start + size > EXT_MAX_BLOCKS {
        size = EXT_MAX_BLOCKS - start;
    }
    let (lleft, lright) = (i64::from(req.lleft), i64::from(req.lright));
    if req.pleft != 0 && start <= lleft {
        size -= lleft + 1 - start;
        start = lleft + 1;
    }
    if req.pright != 0 && start + size > lright {
        size -= start + size - lright;
    }
    size = size.min(bpg);
    let mut end = start + size;
    if let Some(pas) = pas {
        let (left_end, right_start) = pas.neighbours(ctx.o_ex.logical, geo.cluster_bits());
        if let Some(le) = left_end {
            start = start.max(le as i64);
        }
        if let Some(rs) = right_start {
            end = end.min(rs as i64);
        }
    }
    size = end - start;
    if start > logical || start + size <= logical || size <= 0 || size > bpg {
        // The kernel BUGs here; requests are validated so this cannot happen, but a wrong
        // window must never escape: fall back to the original request.
        return;
    }
    ctx.g_ex.logical = start as u32;
    // The window is in blocks; the goal length in clusters (EXT4_NUM_B2C).
    ctx.g_ex.len = geo.num_b2c(size as u64) as u32;
    ctx.orig_goal_len = ctx.g_ex.len;

    let first = geo.first_data_block() as i64;
    let (pright, pleft) = (req.pright as i64, req.pleft as i64);
    if req.pright != 0 && lright == start + size && pright >= size && pright - size >= first {
        set_goal(ctx, geo, (pright - size) as u64);
    }
    if req.pleft != 0 && lleft + 1 == start && pleft + 1 < geo.blocks_count() as i64 {
        set_goal(ctx, geo, (pleft + 1) as u64);
    }
}

fn set_goal(ctx: &mut Ctx, geo: &Geometry, block: u64) {
    let (g, off) = geo.locate(block);
    ctx.g_ex.group = g;
    ctx.g_ex.start = i64::from(off);
    ctx.flags |= Flags::HINT_TRY_GOAL;
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: i64 = 1024;

    fn win(size: i64, logical: i64, req: i64) -> (i64, i64) {
        window(size, logical, (req, req), 12, 8 * K * K)
    }

    /// The size ladder of `ext4_mb_normalize_request` with 4 KiB blocks.
    #[test]
    fn normalisation_ladder() {
        assert_eq!(win(303_104, 0, 74), (0, 512 * K));
        assert_eq!(win(16 * K, 0, 4), (0, 16 * K));
        assert_eq!(win(16 * K + 1, 0, 5), (0, 32 * K));
        assert_eq!(win(602_112, 128, 19), (0, 1024 * K));
        assert_eq!(win(1_200_000, 256, 37), (0, 2 * K * K));
        // 2 MiB window aligned on 2 MiB.
        assert_eq!(win(3 * K * K, 600, 10), (2 * K * K, 2 * K * K));
        assert_eq!(win(6 * K * K, 1100, 10), (4 * K * K, 4 * K * K));
        // The 8 MiB rule: any file above 8 MiB, any request length.
        assert_eq!(win(10 * K * K, 0, 2048), (0, 8 * K * K));
        assert_eq!(win(1 << 34, 5000, 32767), (16 * K * K, 8 * K * K));
        // A 32 MiB maximum window (seed 004) keeps the 8 MiB alignment of the patch.
        assert_eq!(
            window(1 << 34, 5000, (32767, 32767), 12, 32 * K * K),
            (16 * K * K, 32 * K * K)
        );
        // 1 KiB blocks: max = 2048 → everything above 1 MiB takes the 2 MiB window.
        assert_eq!(
            window(100 * K * K, 0, (1, 1), 10, 8 * K * K),
            (0, 2 * K * K)
        );
        // 64 KiB blocks: only the size tests apply; large requests are not widened.
        assert_eq!(
            window(100 * K * K, 10, (300, 300), 16, 8 * K * K),
            (10 << 16, 300 << 16)
        );
        // bigalloc with 64 KiB blocks: the 8 MiB test reads the request's clusters (100
        // clusters of 16 blocks pass it, 1600 blocks would not), the unwidened window its
        // blocks.
        assert_eq!(
            window(100 * K * K, 16, (100, 1600), 16, 8 * K * K),
            (0, 8 * K * K)
        );
        assert_eq!(
            window(100 * K * K, 16, (1600, 1600), 16, 8 * K * K),
            (16 << 16, 1600 << 16)
        );
    }
}
