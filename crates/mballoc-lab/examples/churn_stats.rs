//! Runs the churn benchmark once on mballoc and prints ns per pair and, with `--stats`, the
//! allocator's `mb_stats` (which criteria served the requests, extents measured per request).
//!
//! `cargo run --release -p mballoc-lab --example churn_stats -- [POLICY] [--quick] [--stats]`
use mballoc::{Geometry, Policy};
use mballoc_lab::bench::churn::{churn_once, ChurnConfig};
use mballoc_lab::bench::peers::mballoc::MballocPeer;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |f: &str| args.iter().any(|a| a == f);
    let cfg = if flag("--quick") {
        ChurnConfig::quick()
    } else {
        ChurnConfig::full()
    };
    let name = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .map_or("linux-6.18", String::as_str);
    let policy = Policy::from_name(name)?;
    let geo = Geometry::new(4096, cfg.per_group, cfg.size, 0, 16)?;
    let mut p = MballocPeer::new(geo, policy, 1, cfg.commit_every, &cfg.settings)?;
    let r = churn_once(&mut p, &cfg)?;
    println!("ns/pair {:.0}", r.ns_per_pair);
    if flag("--stats") {
        println!("{}", p.allocator().stats().to_proc_text());
    }
    Ok(())
}
