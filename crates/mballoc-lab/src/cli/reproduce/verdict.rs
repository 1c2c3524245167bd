//! Judging a seed's experiment: pure functions from our two medians and a stated expectation to
//! an outcome, and from the outcomes to one verdict. No I/O and no printing, so that every rule
//! is unit-tested on its own (the criteria themselves, with the seed's words, are data in
//! `seeds.rs`).
//!
//! A row's change is `(improved − base) / |base| · 100`. Where the base is 0 the change is 0 % if
//! the improved value is 0 too, else `+∞` (something appeared where there was nothing).

use serde::Serialize;

/// What the seed says a row's change should be. Every bound is in percent of the base value
/// (percentage points of the change), so that a rule reads the same on any machine's scale.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Expect {
    /// Gone: the improved value is 0, or the change is at most `−100 + tol` %.
    Eliminated { tol: f64 },
    /// A decrease larger than the noise: change `< −noise` %.
    Lower { noise: f64 },
    /// No increase beyond the noise (a lower-is-better metric that must not regress):
    /// change `≤ +noise` %.
    NotHigher { noise: f64 },
    /// A cost the seed reports on a lower-is-better metric, "neutral": `|change| ≤ noise` %
    /// passes, a decrease beyond the noise is better than published (the cost was not paid),
    /// an increase beyond it fails.
    NeutralCost { noise: f64 },
    /// A cost the seed reports on a lower-is-better metric, "a regression" of no stated size:
    /// an increase beyond the noise passes (as published); anything else is better than
    /// published. A cost claim bounds the harm; a result cannot be worse than "worse".
    RegressionCost { noise: f64 },
    /// The change lies in the published range `[lo, hi]` %, widened by `noise` on each side.
    Within { lo: f64, hi: f64, noise: f64 },
    /// The published change `published` %, matched in sign and within a factor `factor` of
    /// its size, the band widened by `noise` points on each side (0 for a deterministic
    /// run; our runs' spread where they spread).
    Near {
        published: f64,
        factor: f64,
        noise: f64,
    },
    /// The published figure cannot be shown on this machine (why): counted neither for nor
    /// against.
    NotMeasurable(&'static str),
}

/// The outcome of one judged row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Status {
    Pass,
    /// Met, and better than published: a cost the seed reports (a regression, a neutral
    /// result) that our change does not pay.
    Better,
    Fail,
    /// Not counted: not measurable here, no value, or nothing to judge.
    NotCounted,
}

/// One judged row: the status, our change, and why, in words for the output.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Judged {
    pub status: Status,
    /// Our change in %; `None` where a side has no value.
    pub change: Option<f64>,
    /// The rule, stated (and, for an uncounted row, the reason).
    pub rule: String,
}

/// A seed's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Verdict {
    Reproduced,
    PartlyReproduced,
    NotReproduced,
    /// No row of the seed could be judged on this machine.
    NotMeasurable,
}

impl Verdict {
    /// The words printed after `verdict:`.
    pub fn words(self) -> &'static str {
        match self {
            Verdict::Reproduced => "reproduced",
            Verdict::PartlyReproduced => "partly reproduced",
            Verdict::NotReproduced => "not reproduced",
            Verdict::NotMeasurable => "not measurable here",
        }
    }
}

/// `(b − a) / |a| · 100`, with the base-0 convention of the module doc; `None` if either
/// value is not finite.
pub fn change_pct(a: f64, b: f64) -> Option<f64> {
    if !a.is_finite() || !b.is_finite() {
        None
    } else if a == 0.0 {
        Some(if b == 0.0 { 0.0 } else { f64::INFINITY })
    } else {
        Some((b - a) / a.abs() * 100.0)
    }
}

impl Expect {
    /// The rule in words, e.g. `change ≤ -86.0 % (eliminated)`.
    pub fn rule(&self) -> String {
        match *self {
            Expect::Eliminated { tol } => {
                format!("eliminated: improved 0 or change <= {:.1}%", tol - 100.0)
            }
            Expect::Lower { noise } => format!("lower: change < -{noise:.1}%"),
            Expect::NotHigher { noise } => format!("not worse: change <= +{noise:.1}%"),
            Expect::NeutralCost { noise } => {
                format!("neutral (a cost): |change| <= {noise:.1}%; lower is better than published")
            }
            Expect::RegressionCost { noise } => format!(
                "regression (a cost): change > +{noise:.1}%; otherwise better than published"
            ),
            Expect::Within { lo, hi, noise } => {
                let (a, b) = self.changes_allowed().unwrap_or_default();
                format!(
                    "published range {lo:+.2}% .. {hi:+.2}%, +-{noise:.2} points: change in {a:+.2}% .. {b:+.2}%"
                )
            }
            Expect::Near {
                published, factor, ..
            } => {
                let (a, b) = self.changes_allowed().unwrap_or_default();
                format!(
                    "published {published:+.1}%: same sign, within a factor {factor} ({a:+.1}% .. {b:+.1}%)"
                )
            }
            Expect::NotMeasurable(why) => format!("not measurable here: {why}"),
        }
    }

    /// `self` with our own measurement noise `ours` (in points of the change) added to its
    /// noise: a true change inside the claim can show up to `ours` outside it.
    fn widened(self, ours: f64) -> Expect {
        match self {
            Expect::Lower { noise } => Expect::Lower {
                noise: noise + ours,
            },
            Expect::NotHigher { noise } => Expect::NotHigher {
                noise: noise + ours,
            },
            Expect::NeutralCost { noise } => Expect::NeutralCost {
                noise: noise + ours,
            },
            Expect::RegressionCost { noise } => Expect::RegressionCost {
                noise: noise + ours,
            },
            Expect::Within { lo, hi, noise } => Expect::Within {
                lo,
                hi,
                noise: noise + ours,
            },
            Expect::Near {
                published,
                factor,
                noise,
            } => Expect::Near {
                published,
                factor,
                noise: noise + ours,
            },
            other => other,
        }
    }

    /// The changes a range or factor claim allows, noise included, low to high; `None` for
    /// the other claims.
    fn changes_allowed(&self) -> Option<(f64, f64)> {
        match *self {
            Expect::Within { lo, hi, noise } => Some((lo - noise, hi + noise)),
            Expect::Near {
                published,
                factor,
                noise,
            } => Some(near_band(published, factor, noise)),
            _ => None,
        }
    }

    /// The width of the band a band claim allows, before our noise; `None` for other claims.
    fn band(&self) -> Option<f64> {
        match *self {
            Expect::NeutralCost { noise } => Some(2.0 * noise),
            Expect::Within { lo, hi, noise } => Some(hi - lo + 2.0 * noise),
            _ => None,
        }
    }

    /// Judges base `a` against improved `b`, our runs of each side spreading `ours` % around
    /// their median (0 for a single, deterministic run). A band claim (neutral, a published
    /// range) narrower than our own spread cannot be told apart from noise here: not counted.
    /// Otherwise every noise bound is widened by `ours`.
    pub fn judge(&self, a: f64, b: f64, ours: f64) -> Judged {
        if let Some(band) = self.band().filter(|&w| 2.0 * ours > w) {
            return Judged {
                status: Status::NotCounted,
                change: change_pct(a, b),
                rule: format!(
                    "not measurable here: our runs spread +-{ours:.1}%, wider than the claim's \
                     band of {band:.1} points ({})",
                    self.rule()
                ),
            };
        }
        let mut j = self.widened(ours).judge_exact(a, b);
        if ours > 0.0 && j.status != Status::NotCounted {
            j.rule
                .push_str(&format!(" (seed's noise + our runs' spread +-{ours:.1}%)"));
        }
        j
    }

    /// Judges base `a` against improved `b` by the rule as it stands.
    fn judge_exact(&self, a: f64, b: f64) -> Judged {
        let change = change_pct(a, b);
        let counted = |pass: bool| Judged {
            status: if pass { Status::Pass } else { Status::Fail },
            change,
            rule: self.rule(),
        };
        let better = || Judged {
            status: Status::Better,
            change,
            rule: self.rule(),
        };
        let uncounted = |why: String| Judged {
            status: Status::NotCounted,
            change,
            rule: why,
        };
        if let Expect::NotMeasurable(_) = self {
            return uncounted(self.rule());
        }
        let Some(d) = change else {
            return uncounted(format!("no value on one side ({a} -> {b})"));
        };
        match *self {
            Expect::Eliminated { .. } if a == 0.0 && b == 0.0 => {
                uncounted("nothing to eliminate: the base shows none".into())
            }
            Expect::Eliminated { tol } => counted(b == 0.0 || d <= tol - 100.0),
            Expect::Lower { noise } => counted(d < -noise),
            Expect::NotHigher { noise } => counted(d <= noise),
            Expect::NeutralCost { noise } if d < -noise => better(),
            Expect::NeutralCost { noise } => counted(d <= noise),
            Expect::RegressionCost { noise } if d > noise => counted(true),
            Expect::RegressionCost { .. } => better(),
            Expect::Within { .. } | Expect::Near { .. } => {
                let (lo, hi) = self.changes_allowed().unwrap_or_default();
                counted(lo <= d && d <= hi)
            }
            Expect::NotMeasurable(_) => unreachable!("handled above"),
        }
    }
}

/// The changes a [`Expect::Near`] claim allows: `published / factor` to `published ·
/// factor` on the published side of zero, each end moved `noise` points outward. With no
/// noise the band cannot reach zero, so the sign must match.
fn near_band(published: f64, factor: f64, noise: f64) -> (f64, f64) {
    assert!(
        factor >= 1.0 && noise >= 0.0,
        "factor {factor}, noise {noise}"
    );
    let (a, b) = (published / factor, published * factor);
    (a.min(b) - noise, a.max(b) + noise)
}

/// One seed's verdict from its judged rows, `(headline, status)`: a headline row is the seed's
/// main claim (its title, its "drastic" result).
///
/// * nothing counted: not measurable here;
/// * every counted row passes: reproduced;
/// * a headline row fails, or no counted row passes: not reproduced;
/// * otherwise: partly reproduced.
pub fn verdict(rows: &[(bool, Status)]) -> Verdict {
    let counted: Vec<(bool, Status)> = rows
        .iter()
        .copied()
        .filter(|(_, s)| *s != Status::NotCounted)
        .collect();
    if counted.is_empty() {
        return Verdict::NotMeasurable;
    }
    let passed = counted
        .iter()
        .filter(|(_, s)| matches!(s, Status::Pass | Status::Better))
        .count();
    let headline_failed = counted.iter().any(|&(h, s)| h && s == Status::Fail);
    if passed == counted.len() {
        Verdict::Reproduced
    } else if headline_failed || passed == 0 {
        Verdict::NotReproduced
    } else {
        Verdict::PartlyReproduced
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Status::{Better, Fail, NotCounted, Pass};

    #[test]
    fn cost_claims_are_met_or_beaten() {
        let n = Expect::NeutralCost { noise: 28.0 };
        assert_eq!(st(n, 30.0, 33.0), Pass);
        assert_eq!(st(n, 30.0, 0.0), Better);
        assert_eq!(st(n, 30.0, 45.0), Fail, "a regression is not neutral");
        let r = Expect::RegressionCost { noise: 28.0 };
        assert_eq!(st(r, 20.0, 30.0), Pass);
        assert_eq!(st(r, 20.0, 0.0), Better);
        assert_eq!(st(r, 20.0, 21.0), Better);
        assert_eq!(
            verdict(&[(true, Pass), (false, Better)]),
            Verdict::Reproduced
        );
    }

    fn st(e: Expect, a: f64, b: f64) -> Status {
        e.judge(a, b, 0.0).status
    }

    #[test]
    fn change_treats_a_zero_base_as_nothing_or_everything() {
        assert_eq!(change_pct(10.0, 5.0), Some(-50.0));
        assert_eq!(change_pct(0.0, 0.0), Some(0.0));
        assert_eq!(change_pct(0.0, 3.0), Some(f64::INFINITY));
        assert_eq!(change_pct(f64::NAN, 3.0), None);
    }

    #[test]
    fn eliminated_needs_zero_or_a_near_total_drop() {
        let e = Expect::Eliminated { tol: 14.0 };
        assert_eq!(st(e, 43.59, 0.0), Pass);
        assert_eq!(st(e, 40.0, 4.0), Pass); // -90 %
        assert_eq!(st(e, 40.0, 8.0), Fail); // -80 %
        assert_eq!(st(e, 23.84, 50.0), Fail);
        assert_eq!(st(e, 0.0, 0.0), NotCounted);
        assert_eq!(st(e, 0.0, 5.0), Fail);
    }

    #[test]
    fn lower_must_leave_the_noise_band() {
        let lo = Expect::Lower { noise: 28.0 };
        assert_eq!(st(lo, 100.0, 70.0), Pass);
        assert_eq!(st(lo, 100.0, 80.0), Fail);
        assert_eq!(st(lo, 100.0, 130.0), Fail);
    }

    #[test]
    fn neutral_and_not_higher_bound_the_change() {
        let n = Expect::NeutralCost { noise: 5.0 };
        assert_eq!(st(n, 100.0, 104.0), Pass);
        assert_eq!(st(n, 100.0, 96.0), Pass);
        assert_eq!(st(n, 100.0, 106.0), Fail);
        assert_eq!(st(n, 100.0, 94.0), Better);
        let nh = Expect::NotHigher { noise: 5.0 };
        assert_eq!(st(nh, 100.0, 0.0), Pass);
        assert_eq!(st(nh, 100.0, 104.0), Pass);
        assert_eq!(st(nh, 100.0, 106.0), Fail);
    }

    #[test]
    fn within_widens_the_published_range_by_the_noise() {
        let w = Expect::Within {
            lo: 0.74,
            hi: 80.3,
            noise: 3.18,
        };
        assert_eq!(st(w, 100.0, 101.0), Pass);
        assert_eq!(st(w, 100.0, 98.0), Pass); // -2.0 >= 0.74 - 3.18
        assert_eq!(st(w, 100.0, 97.0), Fail);
        assert_eq!(st(w, 100.0, 183.0), Pass);
        assert_eq!(st(w, 100.0, 186.0), Fail); // the +86 % a single thread must not show
    }

    #[test]
    fn near_wants_the_sign_and_a_factor() {
        let n = Expect::Near {
            published: 300.0,
            factor: 2.0,
            noise: 0.0,
        };
        assert_eq!(st(n, 8192.0, 32768.0), Pass);
        assert_eq!(st(n, 8192.0, 24576.0), Pass); // +200 %
        assert_eq!(st(n, 8192.0, 16384.0), Fail); // +100 % < 150 %
        assert_eq!(st(n, 8192.0, 4096.0), Fail);
        assert_eq!(st(n, 100.0, 800.0), Fail); // +700 % > 600 %
    }

    /// Our runs' spread widens a factor claim's band at both ends, as every other claim's,
    /// and on the negative side the band mirrors.
    #[test]
    fn near_widens_its_band_by_our_spread() {
        let n = |published, noise| Expect::Near {
            published,
            factor: 2.0,
            noise,
        };
        // +53.4 % published: +26.7 % .. +106.8 %.
        assert_eq!(st(n(53.4, 0.0), 100.0, 124.0), Fail);
        let j = n(53.4, 0.0).judge(100.0, 124.0, 3.0);
        assert_eq!(j.status, Pass, "{}", j.rule);
        assert!(
            j.rule.contains("+23.7%") && j.rule.contains("our runs' spread"),
            "{}",
            j.rule
        );
        assert_eq!(n(53.4, 0.0).judge(100.0, 210.0, 3.0).status, Fail); // +110 > 109.8
                                                                        // -40 % published: -80 % .. -20 %.
        assert_eq!(st(n(-40.0, 0.0), 100.0, 70.0), Pass);
        assert_eq!(st(n(-40.0, 0.0), 100.0, 85.0), Fail);
        assert_eq!(st(n(-40.0, 6.0), 100.0, 85.0), Pass);
        assert_eq!(st(n(-40.0, 0.0), 100.0, 110.0), Fail);
    }

    #[test]
    fn unmeasurable_and_missing_rows_do_not_count() {
        let j = Expect::NotMeasurable("80 containers").judge(1.0, 2.0, 0.0);
        assert_eq!(j.status, NotCounted);
        assert!(j.rule.contains("80 containers"), "{}", j.rule);
        assert_eq!(
            st(Expect::NeutralCost { noise: 5.0 }, f64::NAN, 1.0),
            NotCounted
        );
    }

    /// Our own spread widens every bound, and a band narrower than it is not judged.
    #[test]
    fn our_noise_widens_or_withholds() {
        let w = Expect::Within {
            lo: -5.9,
            hi: 0.2,
            noise: 3.18,
        };
        assert_eq!(w.judge(100.0, 88.0, 0.0).status, Fail);
        assert_eq!(w.judge(100.0, 88.0, 3.0).status, Pass);
        let j = w.judge(100.0, 88.0, 6.3); // 2 * 6.3 > 6.1 + 6.36
        assert_eq!(j.status, NotCounted);
        assert!(j.rule.contains("our runs spread"), "{}", j.rule);
        let n = Expect::NeutralCost { noise: 5.0 };
        assert_eq!(n.judge(100.0, 106.5, 2.0).status, Pass);
        assert_eq!(n.judge(100.0, 107.0, 6.0).status, NotCounted);
        let lo = Expect::Lower { noise: 28.0 };
        assert_eq!(lo.judge(100.0, 70.0, 0.0).status, Pass);
        assert_eq!(lo.judge(100.0, 70.0, 5.0).status, Fail);
        let e = Expect::Eliminated { tol: 14.0 };
        assert_eq!(e.judge(40.0, 0.0, 50.0).status, Pass);
    }

    #[test]
    fn verdict_rules() {
        assert_eq!(verdict(&[]), Verdict::NotMeasurable);
        assert_eq!(verdict(&[(true, NotCounted)]), Verdict::NotMeasurable);
        assert_eq!(
            verdict(&[(true, Pass), (false, Pass), (false, NotCounted)]),
            Verdict::Reproduced
        );
        assert_eq!(
            verdict(&[(true, Pass), (false, Fail)]),
            Verdict::PartlyReproduced
        );
        assert_eq!(
            verdict(&[(true, Fail), (false, Pass), (false, Pass)]),
            Verdict::NotReproduced
        );
        assert_eq!(
            verdict(&[(false, Fail), (false, Fail)]),
            Verdict::NotReproduced
        );
        assert_eq!(
            verdict(&[(false, Pass), (false, Fail)]),
            Verdict::PartlyReproduced
        );
    }
}
