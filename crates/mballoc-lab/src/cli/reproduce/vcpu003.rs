//! Seed 003's thread curves on virtual CPUs, as "vCPU model" rows of its report (`vcpus`
//! build only; the default build's report is unchanged): fallocate3 on the seed's
//! filesystems, base (`prefetch_test_before_set=0`) against patched, at a few of the
//! published task counts, each judged by the rule of every published change (same sign,
//! within a factor of two), the mostly free 15 TiB filesystem by staying within ±5 %. Each
//! point counts `ops` operations and runs on three fills of its filesystem (`FILLS`),
//! both sides of a fill on the same holes: the row is the fill whose change is the median,
//! and half the range of the fills' changes widens its band as our runs' spread does for
//! the real-time rows. Every bitmap is in memory from the start, as the kernel's
//! mount-time prefetch leaves an existing filesystem: it read all 6,380-6,728 bitmaps of the
//! aged 802 GiB and 842 GiB images within 0.9-3.4 s of the mount, most of it its random
//! start delay (`scripts/kernel_prefetch_time.py`, docs/measurements/kernel-prefetch-time.json),
//! where a will-it-scale count lasts seconds to minutes.
//! The full curves, 1-128 CPUs with an SVG each, are `bench threads --vcpus ... --seed003
//! all` (docs/vcpus/seed-003.md); here a subset keeps `reproduce` short.

#[cfg(feature = "vcpus")]
use super::experiment::{JudgedRow, SeedReport};
#[cfg(feature = "vcpus")]
use super::vcpu::{counts, draw, drawn_in, MODEL};
#[cfg(feature = "vcpus")]
use super::verdict::Expect;
#[cfg(feature = "vcpus")]
use mballoc_lab::vcpus::fallocate3::{self as f3, Config, Row, NEUTRAL_PCT};

/// (filesystem, task counts) that `reproduce` runs; `--quick` runs the first count of the
/// first two.
#[cfg(feature = "vcpus")]
const POINTS: [(&str, &[u32]); 4] = [
    ("802g-68", &[2, 8]),
    ("15t-6", &[2, 8]),
    ("842g-31", &[1, 16]),
    ("133g-50-kunpeng", &[2, 8]),
];

/// The most operations a point counts over all its tasks (host time: a 15 TiB point with
/// every bitmap in memory counts 4,096 in about 2 s).
#[cfg(feature = "vcpus")]
pub const MAX_OPS: u32 = 4096;

/// Operations a point on `fs` counts over all its tasks: half of what its free space holds
/// between two commits ([`f3::Fs::free_space_ops`]), at most [`MAX_OPS`]. The seed's figures
/// are averages over seconds of thousands of operations, so a point counts as many as it
/// can while staying well inside the first commit cycle: the model's commits take no time,
/// so a point that met one would count something the kernel pays for. 483 operations on 133
/// GiB at 50 %, 1,866 on 802 GiB, 4,096 on 842 GiB and 15 TiB (512 on every filesystem
/// before: 15 TiB's fills then changed its 8-task row by ±6.3 points, more than its ±5 %
/// claim's band; docs/vcpus/cli.md, "In reproduce").
#[cfg(feature = "vcpus")]
pub fn ops(fs: &f3::Fs) -> u32 {
    ((fs.free_space_ops() / 2.0).floor() as u32).min(MAX_OPS)
}

/// The fills each point runs on (`Config::fill_seed`), an odd number: the fill whose change
/// is the median is the row, half the range of their changes our spread, which widens the
/// rule's band as the real-time rows' spread widens theirs.
#[cfg(feature = "vcpus")]
pub const FILLS: [u64; 3] = [1, 2, 3];

/// How the rows and the curves count a point on `fs`'s fill `fill_seed`: every bitmap in
/// memory, [`ops`] operations over the tasks.
#[cfg(feature = "vcpus")]
fn protocol(fs: f3::Fs, fill_seed: u64) -> Config {
    Config {
        ops: ops(&fs),
        fill_seed,
        cached_bitmaps: true,
        ..Config::new(fs, false)
    }
}

/// The task counts of seed 003's curves (its tables' 1-128; 842 GiB's stop at 96).
#[cfg(feature = "vcpus")]
pub const CURVE_VCPUS: [u32; 8] = [1, 2, 4, 8, 16, 32, 64, 128];

/// Adds seed 003's simulated rows to its report (nothing for another seed), and its curves
/// on the same filesystems at `vcpus` (`reproduce --vcpus`; else 1-128, and none with
/// `quick`), each drawn under `svg_dir` when given ([`curves`]).
#[cfg(feature = "vcpus")]
pub fn attach(
    rep: &mut SeedReport,
    quick: bool,
    vcpus: Option<&[u32]>,
    svg_dir: Option<&std::path::Path>,
) {
    if rep.seed != "003" {
        return;
    }
    rows(rep, quick);
    if let Some(counts) = super::vcpu::curve_counts(quick, vcpus, &CURVE_VCPUS) {
        let ids: Vec<&str> = POINTS.iter().map(|(id, _)| *id).collect();
        curves(rep, &ids, counts, None, svg_dir);
    }
}

/// Seed 003's curves, 1-128 tasks, on the filesystems of [`POINTS`], each point as the rows
/// count it but on one fill (the first): printed as notes, with each published count's
/// sign, factor-of-two and ±25 % (the rows, not these, are judged), and drawn as
/// `vcpu-<fs>.svg` (ops/s against tasks, base and patched, the published points beside).
/// `bytes` shrinks each filesystem (tests).
#[cfg(feature = "vcpus")]
fn curves(
    rep: &mut SeedReport,
    ids: &[&str],
    vcpus: &[u32],
    bytes: Option<u64>,
    svg_dir: Option<&std::path::Path>,
) {
    let t0 = std::time::Instant::now();
    let mut drawn = 0;
    for &id in ids {
        let curve = f3::filesystem(id).and_then(|fs| {
            let fs = f3::Fs {
                bytes: bytes.unwrap_or(fs.bytes),
                ..fs
            };
            f3::run_curve(fs, vcpus, &protocol(fs, FILLS[0]))
        });
        let curve = match curve {
            Ok(c) => c,
            Err(e) => {
                rep.failed
                    .push(format!("{MODEL} fallocate3 curve {id}: {e}"));
                continue;
            }
        };
        rep.notes.push(format!(
            "{MODEL} curve, not judged:\n{}",
            f3::render(std::slice::from_ref(&curve))
        ));
        if let Some(dir) = svg_dir {
            let name = format!("vcpu-{id}.svg");
            let plot = |path: &std::path::Path| f3::plot(&curve, path).map_err(|e| e.to_string());
            drawn += usize::from(draw(
                rep,
                dir,
                &name,
                &format!("fallocate3 curve {id}"),
                plot,
            ));
        }
    }
    rep.ran.push(format!(
        "{MODEL}: seed 003's curves at {} tasks on the same filesystems, counted as the rows \
         on their first fill{} ({:.1} s)",
        counts(vcpus),
        drawn_in(svg_dir, drawn),
        t0.elapsed().as_secs_f64()
    ));
}

/// Seed 003's judged rows ([`POINTS`], or with `quick` the first count of the first two).
#[cfg(feature = "vcpus")]
fn rows(rep: &mut SeedReport, quick: bool) {
    let t0 = std::time::Instant::now();
    let chosen: Vec<(&str, Vec<u32>)> = if quick {
        POINTS[..2]
            .iter()
            .map(|(f, n)| (*f, n[..1].to_vec()))
            .collect()
    } else {
        POINTS.iter().map(|(f, n)| (*f, n.to_vec())).collect()
    };
    let mut rows = Vec::new();
    for (id, ns) in chosen {
        match f3::filesystem(id).and_then(|fs| over_fills(fs, &ns)) {
            Ok(r) => rows.extend(r),
            Err(e) => rep.failed.push(format!("{MODEL} fallocate3 {id}: {e}")),
        }
    }
    add_rows(rep, &rows);
    rep.ran.push(format!(
        "{MODEL}: fallocate3 on virtual CPUs, seed 003's filesystems with every bitmap in \
         memory (the kernel's mount-time prefetch done), counting over the tasks half the \
         operations each filesystem's free space holds between two commits (at most \
         {MAX_OPS}), on {} fills (each row the fill whose change is the median; our spread, half \
         the range of their changes, widens each band); simulated, not measured (docs/vcpus/cli.md) ({:.1} s)",
        FILLS.len(),
        t0.elapsed().as_secs_f64()
    ));
}

/// One filesystem's rows at `ns` tasks. Both sides of a fill run on the same holes, so the
/// fills are pairs and what varies with them is the change: a row is the fill whose change
/// is the median of the [`FILLS`] (its base and patched rates), and our spread is half the
/// range of their changes, in points. (Medians of each side taken apart would mix fills,
/// and the sides' own spread is how the fill moves both rates, not the change.)
#[cfg(feature = "vcpus")]
fn over_fills(
    fs: f3::Fs,
    ns: &[u32],
) -> Result<Vec<(f3::Fs, Row, f64)>, mballoc_lab::bench::BenchError> {
    let mut per_fill = Vec::new();
    for &fill_seed in &FILLS {
        per_fill.push(f3::run_curve(fs, ns, &protocol(fs, fill_seed))?.rows());
    }
    let rows = per_fill[0].iter().enumerate().map(|(i, first)| {
        // Every fill ran the same published task counts, in the same order.
        assert!(per_fill
            .iter()
            .all(|r| r[i].published.tasks == first.published.tasks));
        let pairs: Vec<(f64, f64)> = per_fill.iter().map(|r| (r[i].base, r[i].patched)).collect();
        let (base, patched, ours) = median_pair(&pairs);
        (
            fs,
            Row::judge(first.published, fs.neutral, base, patched),
            ours,
        )
    });
    Ok(rows.collect())
}

/// Of `pairs` (base, patched), an odd number of them: the pair whose change is the median of
/// their changes, and half the range of those changes, in points.
#[cfg(feature = "vcpus")]
fn median_pair(pairs: &[(f64, f64)]) -> (f64, f64, f64) {
    assert!(
        pairs.len() % 2 == 1,
        "an odd number of fills has a median fill"
    );
    let change = |&(b, p): &(f64, f64)| 100.0 * (p / b - 1.0);
    let mut order: Vec<usize> = (0..pairs.len()).collect();
    order.sort_by(|&x, &y| change(&pairs[x]).total_cmp(&change(&pairs[y])));
    let (lo, hi) = (
        change(&pairs[order[0]]),
        change(&pairs[order[pairs.len() - 1]]),
    );
    let (b, p) = pairs[order[pairs.len() / 2]];
    (b, p, (hi - lo) / 2.0)
}

/// The rows in the table and judged, each band widened by its spread `ours` (%); then the
/// seed judged again.
#[cfg(feature = "vcpus")]
pub fn add_rows(rep: &mut SeedReport, rows: &[(f3::Fs, Row, f64)]) {
    for (fs, r, ours) in rows {
        let p = r.published;
        let label = format!("fallocate3 {MODEL} {} N={}: ops_per_sec", fs.id, p.tasks);
        let note = format!(
            "{:+.1}% ({} -> {}, {}, {:.0}% used)",
            p.change_pct(),
            p.base,
            p.patched,
            fs.machine,
            fs.used * 100.0
        );
        rep.table.row_note(&label, r.base, r.patched, &note);
        let expect = if fs.neutral {
            Expect::Within {
                lo: -NEUTRAL_PCT,
                hi: NEUTRAL_PCT,
                noise: 0.0,
            }
        } else {
            Expect::Near {
                published: p.change_pct(),
                factor: 2.0,
                noise: 0.0,
            }
        };
        rep.judged.push(JudgedRow {
            label,
            base: r.base,
            improved: r.patched,
            headline: false,
            basis: format!(
                "seed 003's table for {} ({}), {} tasks (simulated: {MODEL})",
                fs.id, fs.machine, p.tasks
            ),
            judged: expect.judge(r.base, r.patched, *ours),
        });
    }
    rep.rejudge();
}

#[cfg(all(test, feature = "vcpus"))]
mod tests {
    use mballoc_lab::vcpus::fallocate3::{filesystem, published, Row};

    use super::super::experiment::SeedReport;
    use super::super::verdict::Status;
    use super::*;

    /// The rows start with every bitmap in memory because the kernel reads an existing
    /// filesystem's bitmaps within seconds of its mount: in every stored run the mount-time
    /// prefetch read at least 99 % of the image's groups (`ext4_mb_prefetch` skips a group
    /// with no free block) within 10 s, no trace event lost. A measurement that said otherwise
    /// would take the protocol's reason away.
    #[test]
    fn the_kernels_prefetch_reads_every_bitmap_within_seconds_of_the_mount() {
        let v: serde_json::Value = serde_json::from_str(include_str!(
            "../../../../../docs/measurements/kernel-prefetch-time.json"
        ))
        .unwrap();
        let images = v["images"].as_array().unwrap();
        assert_eq!(images.len(), 2, "the aged 802 GiB and 842 GiB images");
        for img in images {
            let groups = img["groups"].as_f64().unwrap();
            let runs = img["runs"].as_array().unwrap();
            assert!(runs.len() >= 3, "{img}");
            for r in runs {
                let read = r["bitmaps_read_by_prefetch"].as_f64().unwrap();
                let last = r["last_batch_s"].as_f64().unwrap();
                assert!(read >= 0.99 * groups, "{read} of {groups}: {r}");
                assert!(last > 0.0 && last <= 10.0, "{r}");
                assert_eq!(r["lost_events"], 0, "{r}");
            }
        }
    }

    /// Each filesystem counts half the operations its free space holds between two commits,
    /// at most [`MAX_OPS`]: inside the first commit cycle on every filesystem run here.
    #[test]
    fn a_point_counts_half_its_free_space_at_most() {
        for (id, want) in [
            ("133g-50-kunpeng", 483),
            ("802g-68", 1866),
            ("842g-31", MAX_OPS),
            ("15t-6", MAX_OPS),
        ] {
            let fs = filesystem(id).unwrap();
            assert_eq!(ops(&fs), want, "{id}");
            assert!(f64::from(ops(&fs)) <= fs.free_space_ops() / 2.0, "{id}");
        }
    }

    /// A curve is printed as a note and drawn under the report's folder; a filesystem that
    /// cannot run is a failure of its own, not a panic, and the others still run.
    #[test]
    fn curves_are_printed_drawn_and_fail_alone() {
        let dir = std::env::temp_dir().join(format!("mballoc-vcpu003-{}", std::process::id()));
        let mut rep = SeedReport::empty("003");
        curves(
            &mut rep,
            &["nosuch", "802g-68"],
            &[1, 2],
            Some(4 << 30),
            Some(&dir),
        );
        assert_eq!(rep.failed.len(), 1, "{:?}", rep.failed);
        assert!(rep.failed[0].contains("nosuch"), "{:?}", rep.failed);
        assert_eq!(rep.notes.len(), 1);
        assert!(rep.notes[0].contains("802g-68") && rep.notes[0].contains("not judged"));
        let svg = std::fs::read_to_string(dir.join("vcpu-802g-68.svg")).unwrap();
        assert!(svg.contains("<svg"), "{}", &svg[..80.min(svg.len())]);
        assert!(rep.ran.last().unwrap().contains("1 drawn"), "{:?}", rep.ran);
        assert!(rep.judged.is_empty(), "curves are not judged");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The row is one fill's own pair, the one whose change is the median, and the spread is
    /// the changes' (not the rates'): fills that move both rates alike spread nothing.
    #[test]
    fn a_row_is_the_fill_with_the_median_change() {
        let pairs = [(100.0, 110.0), (200.0, 200.0), (50.0, 60.0)];
        let (b, p, spread) = median_pair(&pairs);
        assert_eq!((b, p), (100.0, 110.0));
        assert!((spread - 10.0).abs() < 1e-9, "{spread}");
        let alike = [(80.0, 84.0), (100.0, 105.0), (120.0, 126.0)];
        let (b, p, spread) = median_pair(&alike);
        assert_eq!((b, p), (100.0, 105.0));
        assert!(spread.abs() < 1e-9, "{spread}");
    }

    /// Rows given (not simulated) at the published change, then at its opposite: pass, fail.
    #[test]
    fn seed003_model_rows_follow_the_published_sign() {
        let fs = filesystem("802g-68").unwrap();
        let judged = |k: f64| {
            let rows: Vec<_> = published()
                .into_iter()
                .filter(|p| p.fs == fs.id)
                .map(|p| {
                    (
                        fs,
                        Row::judge(
                            p,
                            false,
                            1000.0,
                            1000.0 * (1.0 + k * p.change_pct() / 100.0),
                        ),
                        0.0,
                    )
                })
                .collect();
            let mut rep = SeedReport::empty("003");
            add_rows(&mut rep, &rows);
            rep
        };
        let rep = judged(1.0);
        assert_eq!(rep.judged.len(), 8);
        assert!(
            rep.judged.iter().all(|j| j.judged.status == Status::Pass),
            "{}",
            rep.render()
        );
        assert!(rep.render().contains(MODEL));
        let rep = judged(-1.0);
        assert!(rep.judged.iter().all(|j| j.judged.status == Status::Fail));
    }
}
