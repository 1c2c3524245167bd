//! Runs the churn once on mballoc and prints the allocator's mb_stats (where the time goes).
use mballoc::{Geometry, Policy};
use mballoc_lab::bench::churn::{churn_once, ChurnConfig};
use mballoc_lab::bench::peers::mballoc::MballocPeer;

fn main() {
    let cfg = if std::env::args().any(|a| a == "--quick") {
        ChurnConfig::quick()
    } else {
        ChurnConfig::full()
    };
    let policy =
        Policy::from_name(&std::env::args().nth(1).unwrap_or("linux-6.18".into())).unwrap();
    let geo = Geometry::new(4096, cfg.per_group, cfg.size, 0, 16).unwrap();
    let mut p = MballocPeer::new(geo, policy, 1, cfg.commit_every).unwrap();
    let r = churn_once(&mut p, &cfg).unwrap();
    println!("ns/pair {:.0}", r.ns_per_pair);
    if std::env::args().any(|a| a == "--stats") {
        println!("{}", p.allocator().stats().to_proc_text());
    }
}
