//! What `reproduce` prints around the tables: the legends of the fidelity and seed tables, and
//! the closing summary, one line per seed.

use super::experiment::SeedReport;

/// Printed under the fidelity table.
pub const FIDELITY_LEGEND: &str = "\
columns: allocs = allocation requests in the capture; matched = requests placed on the same
  blocks as the kernel (agreement = matched / allocs); path = requests whose whole path matched
  too (normalised goal, group-or-file flags, criterion, extent found, groups scanned, extents
  measured, new preallocation); final_diff = blocks whose final used/free state differs from
  the kernel's; pa_release = blocks handed back from preallocations after each close, truncate
  or out-of-space retry (ok, or how many operations differ); buddies = groups whose buddy was
  built during the same request as in the kernel (ok, how many differ, - = none traced).
";

/// Printed before the first seed table.
pub const SEED_LEGEND: &str = "\
Seed tables: metric = `workload T=threads: metric`; then our medians with the seed's switch off
  (base) and on (improved), all else equal on the linux-6.18 preset; diff = (improved - base) /
  base; published = the seed's own figure for that row, where it gives one.
Criteria under each table: every row the seed makes a claim about, under the seed's words, as
  [pass], [FAIL] or [ -- ] (not counted: not measurable here, or nothing to judge), with the
  rule and its tolerance (the seed's noise; for rows run three times per side, plus our runs'
  spread, half their range around the median: a band claim narrower than that spread is not
  measurable here). Verdict: reproduced = every judged row met; not reproduced = a main
  claim failed or no judged row met; partly reproduced = otherwise; not measurable here = no
  row of the seed can be shown on this machine (80 containers on 2 cores): such rows count
  neither for nor against.
";

/// Printed at the end when `--out` was not given.
pub const OUT_HINT: &str =
    "(--out DIR saves reproduce.json and every run's JSON, CSV and SVG plots per seed)";

/// `seed | published | ours | verdict`, one row per seed.
pub fn render(seeds: &[SeedReport]) -> String {
    let header = ["seed", "published", "ours", "verdict"].map(String::from);
    let rows: Vec<[String; 4]> = seeds
        .iter()
        .map(|s| [s.seed.clone(), s.claim.clone(), s.ours(), s.verdict_line()])
        .collect();
    let mut w = header.clone().map(|h| h.chars().count());
    for r in &rows {
        for (wi, c) in w.iter_mut().zip(r) {
            *wi = (*wi).max(c.chars().count());
        }
    }
    let line = |cells: &[String; 4]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(w)
            .map(|(c, wi)| format!("{c}{}", " ".repeat(wi - c.chars().count())))
            .collect();
        format!("| {} |\n", padded.join(" | "))
    };
    let mut s = String::from("Summary\n");
    s.push_str(&line(&header));
    let rule: Vec<String> = w.iter().map(|&wi| "-".repeat(wi)).collect();
    s.push_str(&format!("|-{}-|\n", rule.join("-|-")));
    for r in &rows {
        s.push_str(&line(r));
    }
    s
}
