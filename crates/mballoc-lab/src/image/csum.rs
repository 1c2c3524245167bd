//! The two checksums of ext4 metadata: crc32c for `metadata_csum` (the kernel's `ext4_chksum`,
//! a raw crc32c with no final inversion) and crc16 for the older `uninit_bg` (`gdt_csum`)
//! descriptors (`crc16` of lib/crc16.c, polynomial 0x8005 reflected).

/// `ext4_chksum(seed, data)`: crc32c continued from `seed`, without pre- or post-inversion.
/// The `crc32c` crate's `append` works on finished (inverted) values, hence the inversions.
pub fn ext4_chksum(seed: u32, data: &[u8]) -> u32 {
    !crc32c::crc32c_append(!seed, data)
}

/// A bitmap's checksum (`ext4_block_bitmap_csum_set`, `ext4_inode_bitmap_csum_set`): crc32c of
/// its first `bytes` bytes, cut to the low 16 bits when the descriptor (`desc_size` bytes) ends
/// before the checksum's high half, which lies at `hi_end`.
pub fn bitmap_csum(seed: u32, bits: &[u8], bytes: usize, desc_size: u32, hi_end: u32) -> u32 {
    let c = ext4_chksum(seed, &bits[..bytes]);
    if desc_size < hi_end {
        c & 0xFFFF
    } else {
        c
    }
}

/// `crc16(crc, data)` of lib/crc16.c (CRC-16/ARC, reflected 0xA001), continued from `crc`.
pub fn crc16(mut crc: u16, data: &[u8]) -> u16 {
    for &b in data {
        crc ^= u16::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xA001
            } else {
                crc >> 1
            };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Check values of the catalogued CRCs over "123456789": CRC-32C is 0xE3069283 (initial
    /// and final inversion), CRC-16/ARC 0xBB3D (initial 0, no inversion).
    #[test]
    fn check_values_of_the_catalogue() {
        assert_eq!(!ext4_chksum(!0, b"123456789"), 0xE306_9283);
        assert_eq!(crc16(0, b"123456789"), 0xBB3D);
        // Continuing is the same as one pass.
        let split = ext4_chksum(ext4_chksum(7, b"1234"), b"56789");
        assert_eq!(split, ext4_chksum(7, b"123456789"));
    }
}
