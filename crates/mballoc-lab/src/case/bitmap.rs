//! Block bitmaps as the captures store them: base64 of the on-disk bytes, bit *i* (LSB first
//! within each byte) set ⇒ block *i* of the group is in use.

use base64::Engine;
use serde::{Deserialize, Deserializer};

/// serde `deserialize_with` helper: a base64 string into its bytes.
pub(crate) fn from_base64<'de, D: Deserializer<'de>>(de: D) -> Result<Vec<u8>, D::Error> {
    let text = String::deserialize(de)?;
    base64::engine::general_purpose::STANDARD
        .decode(text.as_bytes())
        .map_err(|e| serde::de::Error::custom(format!("bitmap_b64 is not valid base64: {e}")))
}

/// Is block `i` of the group in use? Bits past the end of the bitmap count as in use, as
/// the kernel pads the last group's bitmap.
pub fn is_used(bitmap: &[u8], i: u64) -> bool {
    let byte = usize::try_from(i / 8).ok().and_then(|b| bitmap.get(b));
    !matches!(byte, Some(b) if b & (1 << (i % 8)) == 0)
}

/// The maximal runs `(start, len)` of blocks `0..blocks` whose bit equals `used`.
///
/// Whole 0x00/0xFF bytes are skipped at once, so mostly empty or full groups are cheap.
pub fn runs(bitmap: &[u8], blocks: u64, used: bool) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut run_start: Option<u64> = None;
    let mut i = 0u64;
    while i < blocks {
        let uniform = uniform_byte(bitmap, i, blocks);
        let (bit, step) = match uniform {
            Some(all_used) => (all_used, 8),
            None => (is_used(bitmap, i), 1),
        };
        match (bit == used, run_start) {
            (true, None) => run_start = Some(i),
            (false, Some(s)) => {
                out.push((s, i - s));
                run_start = None;
            }
            _ => {}
        }
        i += step;
    }
    if let Some(s) = run_start {
        out.push((s, blocks - s));
    }
    out
}

/// If block `i` starts a whole byte inside `0..blocks` that is all free or all used, which.
fn uniform_byte(bitmap: &[u8], i: u64, blocks: u64) -> Option<bool> {
    if i & 7 != 0 || i + 8 > blocks {
        return None;
    }
    match bitmap.get(usize::try_from(i / 8).ok()?)? {
        0x00 => Some(false),
        0xFF => Some(true),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_follow_lsb_first_bits() {
        // blocks 0..3 used, 3..9 free, 9 used, 10..16 free
        let bitmap = [0b0000_0111, 0b0000_0010];
        assert_eq!(runs(&bitmap, 16, true), vec![(0, 3), (9, 1)]);
        assert_eq!(runs(&bitmap, 16, false), vec![(3, 6), (10, 6)]);
        assert_eq!(runs(&bitmap, 12, false), vec![(3, 6), (10, 2)]);
    }

    #[test]
    fn whole_bytes_and_short_bitmaps() {
        let bitmap = [0xFF, 0x00, 0x00, 0x01];
        assert_eq!(runs(&bitmap, 32, true), vec![(0, 8), (24, 1)]);
        // bits past the bitmap count as used
        assert_eq!(runs(&[0x00], 12, true), vec![(8, 4)]);
    }
}
