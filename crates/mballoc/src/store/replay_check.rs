//! Replay must not launder damage. Replay rebuilds a group from the bitmap on disk plus the
//! record's runs, and then writes it with a fresh checksum; if the bitmap on disk was damaged
//! outside the bits the commit changed, that damage would be blessed as committed state.
//!
//! What a crash can legitimately leave on disk is the bitmap before the commit, after it, or a
//! sector-wise mix of the two; the descriptor is the old one or the new one (or torn). The runs
//! cover every changed bit, so the rebuilt bitmap is the "after" state, and undoing the runs
//! from it gives the "before" state. One of the two must carry the checksum the descriptor on
//! disk records. If neither does, the group is corrupt: recovery leaves it untouched for fsck
//! and reports it, as a failed bitmap checksum does elsewhere.

use super::bitmap::{clear_range, set_range, BitmapBytes};
use super::checkpoint::DevIo;
use super::delta::Op;
use super::format::{bitmap_crc, decode_desc, Superblock, DESC_LEN};
use super::log::RecordGroup;
use super::StoreError;

/// `Some(why)` if `rebuilt`, group `g`'s bitmap after replaying record `seq`, cannot have come
/// from a crash of that commit. Groups the record starts from `BLOCK_UNINIT` need no check:
/// their base was not read from disk.
pub(crate) fn implausible_replay(
    io: &DevIo,
    sb: &Superblock,
    seq: u64,
    g: &RecordGroup,
    rebuilt: &[u8],
) -> Result<Option<String>, StoreError> {
    if g.base_uninit {
        return Ok(None);
    }
    let len = sb.geometry.group_len(g.group);
    if let Some(bit) = BitmapBytes::from_raw(rebuilt.into(), len).first_clear_padding() {
        return Ok(Some(format!(
            "replaying commit {seq} gives a bitmap with padding bit {bit} clear"
        )));
    }
    let bytes = io.read(
        "read a descriptor to check a replay",
        sb.layout.desc_at(g.group),
        DESC_LEN,
    )?;
    let Ok(desc) = decode_desc(sb, g.group, &bytes) else {
        return Ok(None); // a torn descriptor: nothing to check against
    };
    let before = undo(rebuilt, g);
    let after_crc = bitmap_crc(sb.nonce, g.group, rebuilt);
    let before_crc = bitmap_crc(sb.nonce, g.group, &before);
    if !desc.is_uninit() && (desc.bitmap_crc == after_crc || desc.bitmap_crc == before_crc) {
        return Ok(None);
    }
    Ok(Some(format!(
        "bitmap on disk is neither the state before nor after commit {seq} \
         (descriptor checksum {:#010x}, before {before_crc:#010x}, after {after_crc:#010x})",
        desc.bitmap_crc
    )))
}

/// The bitmap before the record's runs: each run inverted, last first. Exact because a commit
/// only allocates free blocks and frees used ones.
fn undo(after: &[u8], g: &RecordGroup) -> Vec<u8> {
    let mut b = after.to_vec();
    for r in g.runs.iter().rev() {
        match r.op {
            Op::Set => clear_range(&mut b, r.start, r.len),
            Op::Clear => set_range(&mut b, r.start, r.len),
        }
    }
    b
}
