//! `mballoc groups --image`, `mballoc freefrag` and `mballoc frag`: an ext4 image shown as the
//! kernel's mb_groups, as e2freefrag, and with the lab's fragmentation metrics.

use std::fmt::Write as _;
use std::path::Path;

use mballoc_lab::case::{self, Case};
use mballoc_lab::image::replay::{replay_on_image, ImageReplayReport};
use mballoc_lab::image::{heat_map, FragReport, Image, ImageView, OpenOptions};
use mballoc_lab::replay::ReplayError;

use super::args::{FragArgs, FreefragArgs, ImageArg, ReplayArgs};
use super::emit::{out, outln};
use super::error::CliError;

fn open(path: &Path, allow_mounted: bool) -> Result<(Image, ImageView), CliError> {
    let img = Image::open(path, OpenOptions { allow_mounted })?;
    let view = img.view()?;
    warn_bad_groups(&img, &view);
    Ok((img, view))
}

/// The kernel prints a failed group in mb_groups and goes on; say why on stderr.
fn warn_bad_groups(img: &Image, view: &ImageView) {
    for g in &view.groups {
        if let Err(e) = &g.bitmap {
            eprintln!("mballoc: {e}");
        }
        if let Some(e) = &img.descriptors()[g.group as usize].csum_error {
            if g.bitmap.is_ok() {
                eprintln!("mballoc: {e} (its bitmap is on disk and checked on its own)");
            }
        }
    }
}

/// `mballoc groups --image IMG`.
pub fn cmd_groups_image(path: &Path, allow_mounted: bool) -> Result<(), CliError> {
    let (_, view) = open(path, allow_mounted)?;
    out(&view.mb_groups_text())
}

/// `mballoc freefrag --image IMG`.
pub fn cmd_freefrag(a: &FreefragArgs) -> Result<(), CliError> {
    let ImageArg {
        image,
        allow_mounted,
    } = &a.image;
    // e2freefrag stops at the first unreadable bitmap, and so does this (the error says why).
    let img = Image::open(
        image,
        OpenOptions {
            allow_mounted: *allow_mounted,
        },
    )?;
    let view = img.view()?;
    let (ff, text) = view.freefrag(&image.display().to_string())?;
    if a.json {
        outln(&serde_json::to_string(&ff).map_err(|e| CliError::Other(e.to_string()))?)
    } else {
        out(&text)
    }
}

/// `mballoc frag --image IMG`.
pub fn cmd_frag(a: &FragArgs) -> Result<(), CliError> {
    let ImageArg {
        image,
        allow_mounted,
    } = &a.image;
    let (img, view) = open(image, *allow_mounted)?;
    let rep = view.frag_report(&img)?;
    if let Some(path) = &a.layout {
        image_layout(&img)?.save(path)?;
    }
    if let Some(svg) = &a.svg {
        let title = format!("{}: frag_pct per group", image.display());
        std::fs::write(svg, heat_map(&rep, &title)).map_err(|source| CliError::OutDir {
            path: svg.clone(),
            source,
        })?;
    }
    if a.json {
        outln(&serde_json::to_string(&rep).map_err(|e| CliError::Other(e.to_string()))?)
    } else {
        out(&render(&rep))
    }
}

/// The allocation state an image starts a run from.
fn image_layout(img: &Image) -> Result<mballoc_lab::image::Layout, CliError> {
    let start = mballoc_lab::image::ImageStart::load(img)?;
    Ok(mballoc_lab::image::Layout::of_image(&start))
}

/// The text summary of `mballoc frag`.
fn render(r: &FragReport) -> String {
    let mut s = String::new();
    let f = &r.frag_pct;
    let _ = writeln!(
        s,
        "{} blocks of {} bytes in {} groups; {} free ({:.1}%); BLOCK_UNINIT groups: {}",
        r.blocks_count,
        r.block_size,
        r.groups,
        r.free_extents.free_blocks,
        r.free_extents.free_pct,
        r.block_uninit_groups.len()
    );
    for (g, why) in &r.bad_groups {
        let _ = writeln!(s, "group {g} left out: {why}");
    }
    let _ = writeln!(
        s,
        "frag_pct (fsperf): {} of {} groups fragmented; mean {:.1} p50 {:.1} p95 {:.1} max {:.1}",
        f.fragmented_bg_count,
        f.bg_count,
        f.frag_pct_mean,
        f.frag_pct_p50,
        f.frag_pct_p95,
        f.frag_pct_max
    );
    let _ = writeln!(s, "\ngroup  free   frags  largest_order  frag_pct");
    for m in &r.mb_groups {
        let pct = f.per_group_frag_pct.get(m.group).copied().unwrap_or(0.0);
        let _ = writeln!(
            s,
            "{:<6} {:<6} {:<6} {:<14} {:.1}",
            m.group, m.free, m.frags, m.largest_free_order, pct
        );
    }
    let ff = &r.free_extents;
    let _ = writeln!(
        s,
        "\nfree extents: {} (min {} KB, avg {} KB, max {} KB); {:.1}% of free space in extents >= 8 MiB",
        ff.num_free_extent, ff.min_free_extent_kb, ff.avg_free_extent_kb, ff.max_free_extent_kb,
        ff.free_pct_in_extents_ge_8mib
    );
    for b in &ff.histogram {
        let _ = writeln!(
            s,
            "  {:>16}  {:>8} extents  {:>10} blocks  {:>6.2}%",
            b.range, b.extents, b.blocks, b.percent
        );
    }
    let fe = &r.file_extents;
    let _ = writeln!(
        s,
        "\nfiles: {}; extents per file (filefrag): mean {:.2}, max {}; average extent {:.0} KiB",
        fe.files, fe.extents_per_file, fe.extents_per_file_max, fe.avg_extent_size_kb
    );
    if r.indirect_files > 0 {
        let _ = writeln!(
            s,
            "files mapped by indirect blocks (not counted): {}",
            r.indirect_files
        );
    }
    for e in &r.file_errors {
        let _ = writeln!(s, "skipped: {e}");
    }
    s
}

/// `mballoc replay CASE... --image IMG [--policy P]`.
pub fn cmd_replay_image(a: &ReplayArgs, image: &Path) -> Result<(), CliError> {
    let dirs = case::find_cases(&a.cases).map_err(ReplayError::from)?;
    if dirs.is_empty() {
        let paths = a.cases.iter().map(|p| p.display().to_string()).collect();
        return Err(ReplayError::NoCases { paths }.into());
    }
    let img = Image::open(
        image,
        OpenOptions {
            allow_mounted: a.allow_mounted,
        },
    )?;
    let mut reports = Vec::new();
    for dir in dirs {
        let c = Case::load(&dir).map_err(ReplayError::from)?;
        reports.push(replay_on_image(&c, &img, a.policy)?);
    }
    if a.json {
        outln(&serde_json::to_string(&reports).map_err(|e| CliError::Other(e.to_string()))?)
    } else {
        out(&reports
            .iter()
            .map(render_replay)
            .collect::<Vec<_>>()
            .join("\n"))
    }
}

fn render_replay(r: &ImageReplayReport) -> String {
    let c = &r.counts;
    let f = &r.frag_pct;
    let mut s = format!(
        "{} on {} ({} tunables)\n\
         allocations: {} placed, {} failed of {}; {} blocks; {} at their goal; {} goals followed the stream's own extents\n\
         frees: {} applied, {} of blocks the stream never allocated skipped, {} refused\n\
         free blocks: {} before, {} after; {} free extents, max {} KB\n\
         frag_pct (fsperf): {} of {} groups fragmented, mean {:.1}, max {:.1}\n",
        r.case, r.image, r.tunables, c.placed, c.failed, c.allocs, c.blocks_allocated, c.goal_hits,
        c.goals_followed, c.frees_applied, c.frees_skipped, c.free_errors, r.free_before, r.free_after,
        r.free_extents.num_free_extent, r.free_extents.max_free_extent_kb, f.fragmented_bg_count, f.bg_count,
        f.frag_pct_mean, f.frag_pct_max
    );
    if let Some(e) = &c.first_failure {
        let _ = writeln!(s, "first failure: {e}");
    }
    s.push_str(&r.mb_groups);
    s
}
