//! Turns the end state of a run into a [`RunResult`]: the on-disk free space (M2, M4, M7, M8,
//! M9's freesp, M11), the surviving files (M5, M6, M9's frag factor, M10's static layout score,
//! extent sizes), the allocation calls (M3), throughput (M1),
//! mb_stats counters and size classes (M12). Every figure comes from the functions of
//! [`crate::metrics`]; this module only gathers their inputs and names the outputs.
//!
//! Free space is the committed on-disk view (what fsperf measures after a remount): groups any
//! task changed are read back from the allocator's on-disk bitmap, the others are taken from the
//! start state, so a 16 TiB run never reads the groups it did not use.

use std::collections::{BTreeMap, HashSet};

use serde_json::{json, Map, Value};

use super::error::LabError;
use super::prefill::free_runs;
use super::setup::Env;
use super::RunResult;
use crate::fs::{File, Recorder};
use crate::metrics::bluestore::bluestore_scores;
use crate::metrics::e4defrag::e4defrag_score;
use crate::metrics::extent_sizes::extent_sizes;
use crate::metrics::extfrag::extfrag_indices;
use crate::metrics::filefrag::file_extents;
use crate::metrics::frag_pct::fsperf_frag_masked;
use crate::metrics::freefrag::{e2freefrag, FreeFragOptions};
use crate::metrics::latency::latency_stats;
use crate::metrics::layout::layout_score;
use crate::metrics::mb_groups::{mb_groups, render_mb_groups, total_counters};
use crate::metrics::size_class::{size_class_report, GroupClass, SizeClass, SizeClassEvents};
use crate::metrics::throughput::Throughput;
use crate::metrics::xfs::{xfs_frag, xfs_freesp};
use crate::metrics::{FileExtent, FreeSpace, RunScope};

/// Per-group detail (mb_groups rows, frag_pct per group) is kept up to this many groups.
const DETAIL_GROUPS: usize = 16384;

/// What a workload hands to the measurement.
pub struct Output {
    pub rec: Recorder,
    /// Files of the workload that still exist (M5, M6, extent sizes).
    pub files: Vec<File>,
    /// Operations as the original benchmark counts them.
    pub ops: u64,
    pub tasks: u32,
    pub elapsed_s: f64,
    pub throughput: Option<Throughput>,
    pub scalars: BTreeMap<String, f64>,
    pub series: BTreeMap<String, Vec<(f64, f64)>>,
    pub detail: Map<String, Value>,
}

impl Output {
    pub fn new(rec: Recorder, files: Vec<File>, ops: u64, tasks: u32, elapsed_s: f64) -> Output {
        Output {
            rec,
            files,
            ops,
            tasks,
            elapsed_s,
            throughput: None,
            scalars: BTreeMap::new(),
            series: BTreeMap::new(),
            detail: Map::new(),
        }
    }

    pub fn scalar(&mut self, name: &str, v: f64) {
        self.scalars.insert(name.to_string(), v);
    }
}

/// Per-group free runs of the committed on-disk state.
pub fn free_space(env: &Env, touched: &HashSet<u32>) -> Result<FreeSpace, LabError> {
    let a = env.fs.allocator();
    let mut groups = free_runs(&env.geo, &env.base_used);
    let mut list: Vec<u32> = touched.iter().copied().collect();
    list.sort_unstable();
    for g in list {
        let len = env.geo.group_len(g);
        let disk = a.disk_bitmap(g)?;
        groups[g as usize] = disk.zero_runs(0, len).collect();
    }
    Ok(FreeSpace::from_extents(
        &groups,
        env.geo.clusters_per_group(),
        env.geo.block_size(),
    )?)
}

fn ser<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// Builds the result.
pub fn finish(env: &Env, mut out: Output) -> Result<RunResult, LabError> {
    let mut touched = out.rec.touched.clone();
    touched.extend(env.pre.touched.iter().copied());
    let space = free_space(env, &touched)?;
    let mut s = std::mem::take(&mut out.scalars);
    let mut series = std::mem::take(&mut out.series);
    let mut detail = std::mem::take(&mut out.detail);

    free_space_metrics(env, &space, &out.files, &mut s, &mut series, &mut detail)?;
    file_metrics(env, &out.files, &mut s, &mut series, &mut detail)?;
    call_metrics(&out, &mut s, &mut series, &mut detail);
    allocator_metrics(env, &touched, &space, &mut s, &mut detail)?;
    s.insert("files".into(), out.files.len() as f64);
    s.insert("aged_files".into(), env.aged_files.len() as f64);
    s.insert("commits".into(), env.fs.journal().commits() as f64);

    Ok(RunResult {
        workload: env.cfg.workload.clone(),
        policy: env.cfg.policy.name().to_string(),
        settings: env.cfg.settings.clone(),
        threads: env.cfg.threads,
        fs_size: env.fs_size,
        image: env.cfg.image.as_ref().map(|i| i.path.display().to_string()),
        seed: env.cfg.seed,
        elapsed_s: out.elapsed_s,
        scalars: s,
        series,
        detail: Value::Object(detail),
    })
}

/// fsperf's data groups: block groups holding data of a file that still exists (what the
/// reference runner reads from filefrag), or data a pre-fill or an earlier pass left (part of
/// the start state). Groups holding only metadata, or data since deleted, are not data groups.
pub fn data_groups(env: &Env, space: &FreeSpace, files: &[File]) -> Vec<bool> {
    let geo = &env.geo;
    let mut is_data: Vec<bool> = free_runs(geo, &env.base_used)
        .iter()
        .enumerate()
        .map(|(g, runs)| {
            let free: u32 = runs.iter().map(|r| r.1).sum();
            geo.group_len(g as u32) - free > env.meta_used[g]
        })
        .collect();
    debug_assert_eq!(is_data.len(), space.group_count());
    for m in files.iter().flat_map(|f| f.map.iter()) {
        let (first, _) = geo.locate(m.physical);
        let (last, _) = geo.locate(m.physical + u64::from(m.len) - 1);
        for g in first..=last {
            is_data[g as usize] = true;
        }
    }
    is_data
}

fn free_space_metrics(
    env: &Env,
    space: &FreeSpace,
    files: &[File],
    s: &mut BTreeMap<String, f64>,
    series: &mut BTreeMap<String, Vec<(f64, f64)>>,
    detail: &mut Map<String, Value>,
) -> Result<(), LabError> {
    let is_data = data_groups(env, space, files);
    let mut frag = fsperf_frag_masked(space, &is_data)?;
    s.insert(
        "data_bg_count".into(),
        is_data.iter().filter(|&&d| d).count() as f64,
    );
    s.insert("bg_count".into(), frag.bg_count as f64);
    s.insert(
        "fragmented_bg_count".into(),
        frag.fragmented_bg_count as f64,
    );
    for (k, v) in [
        ("frag_pct_mean", frag.frag_pct_mean),
        ("frag_pct_min", frag.frag_pct_min),
        ("frag_pct_p50", frag.frag_pct_p50),
        ("frag_pct_p95", frag.frag_pct_p95),
        ("frag_pct_p99", frag.frag_pct_p99),
        ("frag_pct_max", frag.frag_pct_max),
    ] {
        s.insert(k.into(), v);
    }
    if space.group_count() <= DETAIL_GROUPS {
        series.insert(
            "frag_pct_per_group".into(),
            frag.per_group_frag_pct
                .iter()
                .enumerate()
                .map(|(g, &p)| (g as f64, p))
                .collect(),
        );
    } else {
        frag.per_group_frag_pct.clear();
    }
    detail.insert("fsperf".into(), ser(&frag));

    let ff = e2freefrag(space, &FreeFragOptions::default())?;
    s.insert("free_blocks".into(), ff.free_blocks as f64);
    s.insert("free_pct".into(), ff.free_pct);
    s.insert("free_extents".into(), ff.num_free_extent as f64);
    s.insert("avg_free_extent_kb".into(), ff.avg_free_extent_kb as f64);
    s.insert("min_free_extent_kb".into(), ff.min_free_extent_kb as f64);
    s.insert("max_free_extent_kb".into(), ff.max_free_extent_kb as f64);
    s.insert(
        "free_pct_in_8m_extents".into(),
        ff.free_pct_in_extents_ge_8mib,
    );
    if let Some(c) = ff.chunks.first() {
        s.insert("free_1m_chunks".into(), c.free_chunks as f64);
    }
    let kb = f64::from(env.geo.block_size() / 1024);
    series.insert(
        "free_extent_histogram".into(),
        ff.histogram
            .iter()
            .map(|b| (b.min_blocks as f64 * kb, b.extents as f64))
            .collect(),
    );
    detail.insert("e2freefrag_text".into(), Value::String(ff.render()));
    detail.insert("e2freefrag".into(), ser(&ff));

    let bs = bluestore_scores(space, RunScope::Device);
    s.insert("bluestore_score".into(), bs.fragmentation_score);
    s.insert("bluestore_fragmentation".into(), bs.fragmentation);
    detail.insert("bluestore".into(), ser(&bs));

    let fs = xfs_freesp(space);
    s.insert("xfs_freesp_avg_blocks".into(), fs.average_free_extent_size);
    detail.insert("xfs_freesp".into(), ser(&fs));

    let groups = mb_groups(space);
    let counters = total_counters(&groups);
    let ef = extfrag_indices(&counters);
    // The order of a 2 MiB request (a huge page with 4 KiB blocks), as mm's extfrag_index reports.
    let order_2m = (2u64 << 20).trailing_zeros() - env.geo.block_size().trailing_zeros();
    if let Some(o) = ef.orders.get(order_2m as usize) {
        s.insert("unusable_index_2m".into(), o.unusable_index);
        s.insert("extfrag_index_2m".into(), o.extfrag_index);
    }
    detail.insert("extfrag".into(), ser(&ef));
    detail.insert("mb_groups_totals".into(), ser(&counters));
    if groups.len() <= DETAIL_GROUPS {
        detail.insert(
            "mb_groups_text".into(),
            Value::String(render_mb_groups(&groups)),
        );
    }
    Ok(())
}

fn file_metrics(
    env: &Env,
    files: &[File],
    s: &mut BTreeMap<String, f64>,
    series: &mut BTreeMap<String, Vec<(f64, f64)>>,
    detail: &mut Map<String, Value>,
) -> Result<(), LabError> {
    let fx: Vec<Vec<FileExtent>> = files.iter().map(|f| f.map.to_file_extents()).collect();
    let bs = env.geo.block_size();
    let fe = file_extents(&fx, bs)?;
    s.insert("extents_per_file".into(), fe.extents_per_file);
    s.insert(
        "extents_per_file_max".into(),
        fe.extents_per_file_max as f64,
    );
    s.insert("avg_extent_kb".into(), fe.avg_extent_size_kb);
    s.insert("file_blocks".into(), fe.total_blocks as f64);
    detail.insert("filefrag".into(), ser(&fe));

    let es = extent_sizes(&fx, bs)?;
    s.insert(
        "pct_file_blocks_in_8m_extents".into(),
        es.pct_blocks_in_extents_ge_8mib,
    );
    let kb = f64::from(bs / 1024);
    series.insert(
        "extent_size_distribution".into(),
        es.histogram
            .iter()
            .map(|b| (b.min_blocks as f64 * kb, b.extents as f64))
            .collect(),
    );
    detail.insert("extent_sizes".into(), ser(&es));

    let d = e4defrag_score(
        &fx,
        env.geo.clusters_per_group(),
        env.geo.flex_bg_size().max(1),
        bs,
    )?;
    s.insert("e4defrag_score".into(), d.score);
    detail.insert("e4defrag".into(), ser(&d));

    let xf = xfs_frag(&fx)?;
    s.insert("xfs_frag_factor_pct".into(), xf.frag_factor_pct);
    detail.insert("xfs_frag".into(), ser(&xf));
    let ls = layout_score(&fx)?;
    s.insert("layout_score".into(), ls.layout_score);
    detail.insert(
        "layout".into(),
        json!({"contiguous_blocks": ls.contiguous_blocks,
               "blocks_with_predecessor": ls.blocks_with_predecessor}),
    );
    Ok(())
}

fn call_metrics(
    out: &Output,
    s: &mut BTreeMap<String, f64>,
    series: &mut BTreeMap<String, Vec<(f64, f64)>>,
    detail: &mut Map<String, Value>,
) {
    let lat = latency_stats(&out.rec.latencies_ns);
    s.insert("alloc_calls".into(), lat.calls as f64);
    s.insert("latency_mean_ns".into(), lat.ns_mean);
    s.insert("latency_min_ns".into(), lat.ns_min as f64);
    s.insert("latency_p50_ns".into(), lat.ns_p50);
    s.insert("latency_p95_ns".into(), lat.ns_p95);
    s.insert("latency_p99_ns".into(), lat.ns_p99);
    s.insert("latency_max_ns".into(), lat.ns_max as f64);
    if let Some(&first) = out.rec.latencies_ns.first() {
        s.insert("first_alloc_latency_ns".into(), first as f64);
    }
    series.insert(
        "latency_percentiles".into(),
        [
            (50.0, lat.ns_p50),
            (90.0, lat.ns_p90),
            (95.0, lat.ns_p95),
            (99.0, lat.ns_p99),
            (99.9, lat.ns_p999),
        ]
        .to_vec(),
    );
    detail.insert("latency".into(), ser(&lat));
    let calls = out.rec.calls.max(1) as f64;
    s.insert(
        "groups_scanned_per_op".into(),
        out.rec.groups_scanned as f64 / calls,
    );
    s.insert("blocks_allocated".into(), out.rec.blocks_allocated as f64);
    s.insert("blocks_freed".into(), out.rec.blocks_freed as f64);
    s.insert("enospc_commits".into(), out.rec.enospc_commits as f64);
    s.insert("tree_blocks".into(), out.rec.tree_blocks as f64);
    s.insert("ops".into(), out.ops as f64);
    let tasks = f64::from(out.tasks.max(1));
    match &out.throughput {
        Some(t) => {
            s.insert("ops_per_sec".into(), t.ops_per_sec);
            s.insert("ops_per_sec_per_task".into(), t.per_task_ops);
            detail.insert("throughput".into(), ser(t));
        }
        None if out.elapsed_s > 0.0 => {
            let rate = out.ops as f64 / out.elapsed_s;
            s.insert("ops_per_sec".into(), rate);
            s.insert("ops_per_sec_per_task".into(), rate / tasks);
        }
        None => {}
    }
}

fn allocator_metrics(
    env: &Env,
    touched: &HashSet<u32>,
    space: &FreeSpace,
    s: &mut BTreeMap<String, f64>,
    detail: &mut Map<String, Value>,
) -> Result<(), LabError> {
    let a = env.fs.allocator();
    let st = a.stats();
    let loads = st.bitmap_loads;
    for (k, v) in [
        ("bitmap_loads", loads),
        ("prefetch_loads", st.prefetch_loads),
        ("sync_bitmap_loads", st.sync_loads),
        ("prefetch_waits", st.prefetch_waits),
        ("class_match_hits", st.class_stage_hits[0]),
        ("class_unset_hits", st.class_stage_hits[1]),
        ("class_empty_hits", st.class_stage_hits[2]),
        ("class_any_hits", st.class_stage_hits[3]),
        ("class_shared_hits", st.class_stage_hits[4]),
        ("class_forced", st.class_forced),
        ("class_resets", st.class_resets),
        ("prefetch_desc_lookups", st.prefetch_desc_lookups),
        ("buddies_generated", st.buddies_generated),
        ("mb_reqs", st.reqs),
        ("mb_success", st.success),
        ("mb_groups_scanned", st.groups_scanned),
        ("mb_goal_hits", st.goal_hits),
        ("mb_stream_goal_hits", st.stream_goal_hits),
        ("mb_preallocated", st.preallocated),
        ("mb_discarded", st.discarded),
        ("mb_prealloc_hits", st.prealloc_hits),
        ("mb_busy_skips", st.busy_skips),
        ("mb_enospc_retries", st.enospc_retries),
    ] {
        s.insert(k.into(), v as f64);
    }
    let names = ["cr0", "cr1", "cr2", "cr3", "cr4"];
    let mut considered = 0;
    let mut useless = 0;
    for (n, c) in names.iter().zip(st.cr.iter()) {
        s.insert(format!("mb_{n}_hits"), c[0] as f64);
        s.insert(format!("mb_{n}_groups_considered"), c[1] as f64);
        considered += c[1];
        useless += c[3];
    }
    s.insert("groups_considered".into(), considered as f64);
    s.insert("useless_loops".into(), useless as f64);
    detail.insert("mb_stats_text".into(), Value::String(st.to_proc_text()));
    detail.insert("size_classes".into(), size_classes(env, touched, space)?);
    Ok(())
}

/// M12: the class of every group (read from the groups the run touched; the others were never
/// claimed), and the allocator's stage, forced and reset counters.
fn size_classes(env: &Env, touched: &HashSet<u32>, space: &FreeSpace) -> Result<Value, LabError> {
    let a = env.fs.allocator();
    let bpg = u64::from(env.geo.clusters_per_group());
    let mut groups = Vec::with_capacity(space.group_count());
    for g in 0..space.group_count() {
        let len = u64::from(env.geo.group_len(g as u32));
        let used = len - space.group_free(g);
        let class = if touched.contains(&(g as u32)) {
            match a.group(g as u32)?.size_class {
                1 => SizeClass::Small,
                2 => SizeClass::Medium,
                3 => SizeClass::Large,
                _ => SizeClass::None,
            }
        } else {
            SizeClass::None
        };
        groups.push(GroupClass {
            class,
            used_blocks: used,
        });
    }
    // Our stages map onto btrfs's loop numbers: match = CACHING_NOWAIT (0), unset =
    // UNSET_SIZE_CLASS (2), empty = ALLOC_CHUNK (3, a fresh group), any = WRONG_SIZE_CLASS (4);
    // shared (another CPU's group of the class, ours) is a match to btrfs, which has no CPUs.
    let st = a.stats();
    let h = st.class_stage_hits;
    let events = SizeClassEvents {
        allocs_per_stage: [h[0] + h[4], 0, h[1], h[2], h[3], 0],
        forced_wrong_class: st.class_forced,
        class_claim_races: 0,
        new_groups: 0,
        resets_to_none: st.class_resets,
    };
    let r = size_class_report(&[groups], bpg, &events)?;
    Ok(json!({ "report": ser(&r), "size_classes_on": a.tunables().size_classes }))
}
