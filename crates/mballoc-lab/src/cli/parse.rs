//! Value parsers for the command line: sizes (`16G`), thread lists (`1,2,4`), durations
//! (`50us`) and `name=value` settings. They return plain `String` errors because clap turns
//! them into usage errors (exit code 2) that name the argument.

/// Bytes in a size like `4G`, `512M`, `16T`, `64KiB` or `1048576` (binary units).
pub fn size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let n: u64 = num.parse().map_err(|_| {
        format!("bad size {s:?}: expected a number with an optional K, M, G or T suffix (e.g. 16G)")
    })?;
    let shift = match unit
        .trim()
        .to_ascii_uppercase()
        .trim_end_matches(['B', 'I'])
    {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        other => {
            return Err(format!(
                "bad size unit {other:?} in {s:?}: use K, M, G or T"
            ))
        }
    };
    n.checked_shl(shift)
        .filter(|v| v >> shift == n)
        .ok_or_else(|| format!("size {s:?} is too large"))
}

/// Largest thread count accepted: far above any sensible run, low enough to catch typos.
pub const MAX_THREADS: u32 = 1024;

/// A comma-separated list of thread counts, each `1 ..= MAX_THREADS`, e.g. `1,2,4`.
/// Duplicates are kept out so a sweep never runs the same point twice.
pub fn threads(s: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let n: u32 = part.trim().parse().map_err(|_| {
            format!("bad thread list {s:?}: expected counts 1..={MAX_THREADS} separated by commas (e.g. 1,2,4)")
        })?;
        if n == 0 || n > MAX_THREADS {
            return Err(format!(
                "bad thread count {n} in {s:?}: each count must be in 1..={MAX_THREADS}"
            ));
        }
        if !out.contains(&n) {
            out.push(n);
        }
    }
    Ok(out)
}

/// Nanoseconds in a duration like `50us`, `1.5ms`, `200ns`, `2s` or `0` (a bare number is ns).
pub fn duration_ns(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let bad = || format!("bad duration {s:?}: expected a number with ns, us, ms or s (e.g. 50us)");
    let v: f64 = num.parse().map_err(|_| bad())?;
    let scale = match unit.trim() {
        "" | "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return Err(bad()),
    };
    let ns = (v * scale).round();
    if ns.is_finite() && ns >= 0.0 && ns <= u64::MAX as f64 {
        Ok(ns as u64)
    } else {
        Err(format!("duration {s:?} is out of range"))
    }
}

/// A `name=value` setting, checked for shape only; names and values are validated against the
/// filesystem's geometry before anything runs ([`super::config`]).
pub fn setting(s: &str) -> Result<String, String> {
    match s.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() && !value.trim().is_empty() => {
            Ok(format!("{}={}", name.trim(), value.trim()))
        }
        _ => Err(format!(
            "bad setting {s:?}: expected name=value (see `mballoc list` for the tunables)"
        )),
    }
}

/// Binary-unit text for a byte count: `16G`, `512M`, `1536K`.
pub fn fmt_size(bytes: u64) -> String {
    for (shift, unit) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        if bytes >= 1 << shift && bytes.trailing_zeros() >= shift {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    format!("{bytes}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(size("16G"), Ok(16 << 30));
        assert_eq!(size("512m"), Ok(512 << 20));
        assert_eq!(size("64KiB"), Ok(64 << 10));
        assert_eq!(size("4096"), Ok(4096));
        assert!(size("12X").unwrap_err().contains("K, M, G or T"));
        assert!(size("G").is_err());
        assert!(size("99999999999T").unwrap_err().contains("too large"));
        assert_eq!(fmt_size(16 << 30), "16G");
        assert_eq!(fmt_size(1536 << 10), "1536K");
    }

    #[test]
    fn thread_lists() {
        assert_eq!(threads("1,2,4"), Ok(vec![1, 2, 4]));
        assert_eq!(threads(" 2, 2 ,1"), Ok(vec![2, 1]));
        assert!(threads("0").unwrap_err().contains("1..="));
        assert!(threads("1,,2").is_err());
        assert!(threads("two").unwrap_err().contains("1,2,4"));
        assert!(threads("5000").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(duration_ns("50us"), Ok(50_000));
        assert_eq!(duration_ns("1.5ms"), Ok(1_500_000));
        assert_eq!(duration_ns("0"), Ok(0));
        assert_eq!(duration_ns("2s"), Ok(2_000_000_000));
        assert!(duration_ns("5 parsecs").is_err());
        assert!(duration_ns("-1us").is_err());
    }

    #[test]
    fn settings_shape() {
        assert_eq!(setting(" a = 1 "), Ok("a=1".into()));
        assert!(setting("a").is_err());
        assert!(setting("=1").is_err());
        assert!(setting("a=").is_err());
    }
}
