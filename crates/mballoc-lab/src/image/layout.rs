//! A file system's allocation state without its files or metadata contents: the geometry, the
//! groups still `BLOCK_UNINIT` and the in-use block ranges. What an allocator needs to start
//! where an image stands, in a file small enough to keep beside the measurements made on that
//! image (an aged 802 GiB image is 23,394 ranges, 58 KB compressed), so that tests can run the
//! lab on the kernel's own layout without the image or a mount.
//!
//! The format, version 2 (text; gzip-compressed when the file starts with gzip's magic):
//!
//! ```text
//! mballoc-layout 2
//! block_size 4096
//! blocks_per_group 32768
//! blocks_count 210239488
//! first_data_block 0
//! flex_bg 16
//! inodes_per_group 8192
//! block_uninit 31 32          (group numbers; the line may list none)
//! used                        (then one line per in-use range, ascending, not touching:)
//! 0 1058                      (the gap since the last range's end, then its length)
//! end 23394 144107823         (the count of ranges and of their blocks; nothing after it)
//! ```
//!
//! The end line is what tells a whole file from one cut short: without it (version 1) a file
//! cut after any line was read as a valid layout with fewer blocks in use. A version-1 file is
//! refused with the command that writes it again.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;

use mballoc::{Geometry, MemSource};

use super::{ImageError, ImageStart};

/// The first line of every layout file.
const MAGIC: &str = "mballoc-layout 2";
/// The first line of a version-1 file: no end line, so a cut could not be told.
const MAGIC_V1: &str = "mballoc-layout 1";

/// The header's fields, in order.
const FIELDS: [&str; 6] = [
    "block_size",
    "blocks_per_group",
    "blocks_count",
    "first_data_block",
    "flex_bg",
    "inodes_per_group",
];

/// An image's allocation state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub geo: Geometry,
    pub inodes_per_group: u32,
    pub block_uninit: Vec<u32>,
    /// In-use ranges `(start, len)`, absolute, ascending, none touching the next.
    pub used: Vec<(u64, u64)>,
}

impl Layout {
    /// The state `start` loaded from an image. Ranges that touch across a group boundary
    /// are joined (the file records runs, not groups).
    pub fn of_image(start: &ImageStart) -> Layout {
        let mut used: Vec<(u64, u64)> = Vec::with_capacity(start.used.len());
        for &(s, n) in &start.used {
            match used.last_mut() {
                Some(last) if last.0 + last.1 == s => last.1 += n,
                _ => used.push((s, n)),
            }
        }
        Layout {
            geo: start.geo,
            inodes_per_group: start.inodes_per_group,
            block_uninit: start.block_uninit.clone(),
            used,
        }
    }

    /// The allocator's device for this state: the bitmaps in memory.
    pub fn source(&self) -> Result<MemSource, mballoc::Error> {
        MemSource::new(self.geo, &self.used)?.with_block_uninit(self.block_uninit.iter().copied())
    }

    /// Writes the format above, plain text.
    pub fn write_to(&self, mut w: impl Write) -> std::io::Result<()> {
        let g = &self.geo;
        writeln!(w, "{MAGIC}")?;
        let values = [
            u64::from(g.block_size()),
            g.blocks_per_group(),
            g.blocks_count(),
            g.first_data_block(),
            u64::from(g.flex_bg_size()),
            u64::from(self.inodes_per_group),
        ];
        for (k, v) in FIELDS.iter().zip(values) {
            writeln!(w, "{k} {v}")?;
        }
        let uninit: Vec<String> = self.block_uninit.iter().map(u32::to_string).collect();
        writeln!(w, "block_uninit {}", uninit.join(" "))?;
        writeln!(w, "used")?;
        let mut end = 0;
        for &(s, n) in &self.used {
            writeln!(w, "{} {n}", s - end)?;
            end = s + n;
        }
        let blocks: u64 = self.used.iter().map(|&(_, n)| n).sum();
        writeln!(w, "end {} {blocks}", self.used.len())
    }

    /// Writes the format above to `path`, gzip-compressed.
    pub fn save(&self, path: &Path) -> Result<(), ImageError> {
        let io = |e: std::io::Error| ImageError::Io {
            path: path.to_path_buf(),
            source: std::sync::Arc::new(e),
        };
        let f = std::fs::File::create(path).map_err(io)?;
        let mut gz = flate2::write::GzEncoder::new(f, flate2::Compression::best());
        self.write_to(&mut gz).map_err(io)?;
        gz.finish().map_err(io)?;
        Ok(())
    }

    /// Reads a layout file, compressed or not.
    pub fn load(path: &Path) -> Result<Layout, ImageError> {
        let io = |e: std::io::Error| ImageError::Io {
            path: path.to_path_buf(),
            source: std::sync::Arc::new(e),
        };
        let mut f = BufReader::new(std::fs::File::open(path).map_err(io)?);
        let gz = f.fill_buf().map_err(io)?.starts_with(&[0x1f, 0x8b]);
        let r: Box<dyn Read> = if gz {
            Box::new(flate2::read::GzDecoder::new(f))
        } else {
            Box::new(f)
        };
        Layout::read_from(r).map_err(|e| match e {
            ImageError::Layout { line, reason, .. } => ImageError::Layout {
                path: path.to_path_buf(),
                line,
                reason,
            },
            other => other,
        })
    }

    /// Whether `path` is a layout file rather than an ext4 image (its first bytes).
    pub fn is_layout_file(path: &Path) -> bool {
        let mut head = [0u8; MAGIC.len()];
        std::fs::File::open(path)
            .and_then(|mut f| f.read_exact(&mut head))
            .is_ok_and(|()| head.starts_with(&[0x1f, 0x8b]) || head == MAGIC.as_bytes())
    }

    /// Parses the format above; every malformed line is an error naming it.
    pub fn read_from(r: impl Read) -> Result<Layout, ImageError> {
        let mut lines = BufReader::new(r).lines().enumerate();
        let mut next = |want: &str| -> Result<(usize, String), ImageError> {
            match lines.next() {
                Some((i, Ok(l))) => Ok((i + 1, l)),
                Some((i, Err(e))) => Err(bad(i + 1, format!("{want}: {e}"))),
                None => Err(bad(0, format!("ends before {want}"))),
            }
        };
        let (n, magic) = next("the first line")?;
        if magic == MAGIC_V1 {
            return Err(bad(
                n,
                format!(
                    "{MAGIC_V1:?} has no end line, so a cut file cannot be told from a whole one; \
                     write it again from its image (`mballoc frag --image IMG --layout FILE`)"
                ),
            ));
        }
        if magic != MAGIC {
            return Err(bad(n, format!("{magic:?} is not {MAGIC:?}")));
        }
        let mut values = [0u64; FIELDS.len()];
        for (k, v) in FIELDS.iter().zip(values.iter_mut()) {
            let (n, l) = next(k)?;
            *v = field(n, &l, k)?;
        }
        let [bs, bpg, count, first, flex, ipg] = values;
        let small = |n: u64, what: &str| {
            u32::try_from(n).map_err(|_| bad(0, format!("{what} {n} does not fit 32 bits")))
        };
        let geo = Geometry::new(
            small(bs, "block_size")?,
            small(bpg, "blocks_per_group")?,
            count,
            first,
            small(flex, "flex_bg")?,
        )
        .map_err(|e| bad(0, format!("geometry: {e}")))?;
        let (n, l) = next("block_uninit")?;
        let rest = l
            .strip_prefix("block_uninit")
            .ok_or_else(|| bad(n, format!("{l:?}: expected block_uninit")))?;
        let block_uninit = rest
            .split_whitespace()
            .map(|w| {
                w.parse::<u32>()
                    .ok()
                    .filter(|&g| g < geo.group_count())
                    .ok_or_else(|| bad(n, format!("{w:?} is not a group of the file system")))
            })
            .collect::<Result<Vec<u32>, _>>()?;
        let (n, l) = next("used")?;
        if l != "used" {
            return Err(bad(n, format!("{l:?}: expected used")));
        }
        let mut used = Vec::new();
        let mut end = 0u64;
        let mut ended = None;
        for (i, l) in lines {
            let n = i + 1;
            let l = l.map_err(|e| bad(n, e.to_string()))?;
            if let Some(at) = ended {
                return Err(bad(n, format!("{l:?} after the end line (line {at})")));
            }
            if let Some(rest) = l.strip_prefix("end") {
                check_end(n, rest, &used)?;
                ended = Some(n);
                continue;
            }
            let mut w = l.split_whitespace().map(str::parse::<u64>);
            let (Some(Ok(gap)), Some(Ok(len)), None) = (w.next(), w.next(), w.next()) else {
                return Err(bad(n, format!("{l:?}: expected a gap and a length")));
            };
            let start = end.checked_add(gap).filter(|_| gap > 0 || end == 0);
            let stop = start.and_then(|s| s.checked_add(len));
            match (start, stop) {
                (Some(s), Some(e)) if len > 0 && e <= geo.blocks_count() => {
                    used.push((s, len));
                    end = e;
                }
                _ => {
                    return Err(bad(
                        n,
                        format!(
                            "range after block {end} with gap {gap} and length {len}: empty, \
                             touching the last or past the file system's {} blocks",
                            geo.blocks_count()
                        ),
                    ))
                }
            }
        }
        if ended.is_none() {
            return Err(bad(
                0,
                format!(
                    "ends after {} ranges without its end line: the file was cut short",
                    used.len()
                ),
            ));
        }
        Ok(Layout {
            geo,
            inodes_per_group: small(ipg, "inodes_per_group")?,
            block_uninit,
            used,
        })
    }
}

/// The end line's `RANGES BLOCKS` (after `end`) against the ranges read.
fn check_end(n: usize, rest: &str, used: &[(u64, u64)]) -> Result<(), ImageError> {
    let blocks: u64 = used.iter().map(|&(_, len)| len).sum();
    let mut w = rest.split_whitespace().map(str::parse::<u64>);
    match (w.next(), w.next(), w.next()) {
        (Some(Ok(r)), Some(Ok(b)), None) if r == used.len() as u64 && b == blocks => Ok(()),
        (Some(Ok(r)), Some(Ok(b)), None) => Err(bad(
            n,
            format!(
                "the end line counts {r} ranges of {b} blocks, the file has {} of {blocks}",
                used.len()
            ),
        )),
        _ => Err(bad(
            n,
            format!("\"end{rest}\": expected end, a count of ranges and of blocks"),
        )),
    }
}

/// A header line `key value`.
fn field(n: usize, line: &str, key: &str) -> Result<u64, ImageError> {
    let mut w = line.split_whitespace();
    match (w.next(), w.next().map(str::parse::<u64>), w.next()) {
        (Some(k), Some(Ok(v)), None) if k == key => Ok(v),
        _ => Err(bad(n, format!("{line:?}: expected {key} and a number"))),
    }
}

fn bad(line: usize, reason: String) -> ImageError {
    ImageError::Layout {
        path: std::path::PathBuf::new(),
        line,
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Layout {
        Layout {
            geo: Geometry::new(4096, 32768, 4 * 32768, 0, 16).unwrap(),
            inodes_per_group: 8192,
            block_uninit: vec![3],
            used: vec![(0, 1058), (2000, 10), (40_000, 5)],
        }
    }

    #[test]
    fn a_layout_reads_back_as_written() {
        let l = small();
        let mut text = Vec::new();
        l.write_to(&mut text).unwrap();
        assert_eq!(Layout::read_from(&text[..]).unwrap(), l);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("l.gz");
        l.save(&p).unwrap();
        assert!(Layout::is_layout_file(&p));
        assert_eq!(Layout::load(&p).unwrap(), l);
    }

    #[test]
    fn a_malformed_layout_names_its_line() {
        let mut text = Vec::new();
        small().write_to(&mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        for (from, to, line) in [
            ("mballoc-layout 2", "mballoc-layout 3", 1),
            ("mballoc-layout 2", "mballoc-layout 1", 1),
            ("flex_bg 16", "flex_bg x", 6),
            ("block_uninit 3", "block_uninit 9", 8),
            ("\n0 1058", "\n0 0", 10),
            ("942 10", "0 10", 11),
            ("37990 5", "99999999 5", 12),
            ("37990 5", "37990", 12),
            ("end 3 1073", "end 3 1072", 13),
            ("end 3 1073", "end 2 1073", 13),
            ("end 3 1073", "end 3", 13),
            ("end 3 1073", "end 3 1073\n5 5", 14),
        ] {
            let broken = text.replacen(from, to, 1);
            match Layout::read_from(broken.as_bytes()) {
                Err(ImageError::Layout { line: l, .. }) => assert_eq!(l, line, "{to}"),
                other => panic!("{to}: {other:?}"),
            }
        }
        assert!(Layout::read_from(&b"mballoc-layout 2\nblock_size 4096\n"[..]).is_err());
    }

    /// A file cut after any whole line is refused, not read as a layout with fewer blocks in
    /// use; so is one cut inside its gzip stream.
    #[test]
    fn a_layout_cut_short_is_refused() {
        let mut text = Vec::new();
        small().write_to(&mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        // Every byte position but the last (the final newline, whose loss changes nothing).
        for cut in 0..text.len() - 1 {
            let e = Layout::read_from(&text.as_bytes()[..cut]).unwrap_err();
            assert!(
                matches!(e, ImageError::Layout { .. }),
                "cut at {cut}: {e:?}"
            );
        }
        let e = Layout::read_from(text.trim_end_matches("end 3 1073\n").as_bytes()).unwrap_err();
        assert!(e.to_string().contains("cut short"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("l.gz");
        small().save(&p).unwrap();
        let gz = std::fs::read(&p).unwrap();
        std::fs::write(&p, &gz[..gz.len() - 12]).unwrap();
        assert!(Layout::load(&p).is_err(), "a gzip stream cut short");
    }
}
