//! Seed 003's thread curves on virtual CPUs, as "vCPU model" rows of its report (`vcpus`
//! build only; the default build's report is unchanged): fallocate3 on the seed's
//! filesystems, base (`prefetch_test_before_set=0`) against patched, at a few of the
//! published task counts, each judged by the rule of every published change (same sign,
//! within a factor of two), the mostly free 15 TiB filesystem by staying within ±5 %.
//! The full curves, 1-128 CPUs with an SVG each, are `bench threads --vcpus ... --seed003
//! all` (docs/vcpus.md); here a subset keeps `reproduce` short.

#[cfg(feature = "vcpus")]
use super::experiment::{JudgedRow, SeedReport};
#[cfg(feature = "vcpus")]
use super::vcpu::MODEL;
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

/// Adds seed 003's simulated rows to its report (nothing for another seed).
#[cfg(feature = "vcpus")]
pub fn attach(rep: &mut SeedReport, quick: bool) {
    if rep.seed != "003" {
        return;
    }
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
        let run = f3::filesystem(id).and_then(|fs| f3::run_curve(fs, &ns, &Config::new(fs, false)));
        match run {
            Ok(c) => rows.extend(c.rows().into_iter().map(|r| (c.fs, r))),
            Err(e) => rep.failed.push(format!("{MODEL} fallocate3 {id}: {e}")),
        }
    }
    add_rows(rep, &rows);
    rep.ran.push(format!(
        "{MODEL}: fallocate3 on virtual CPUs, seed 003's filesystems cold-mounted then \
         warmed, device reads in virtual time; simulated, not measured (docs/vcpus.md) \
         ({:.1} s)",
        t0.elapsed().as_secs_f64()
    ));
}

/// The rows in the table and judged; then the seed judged again.
#[cfg(feature = "vcpus")]
pub fn add_rows(rep: &mut SeedReport, rows: &[(f3::Fs, Row)]) {
    for (fs, r) in rows {
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
            judged: expect.judge(r.base, r.patched, 0.0),
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
