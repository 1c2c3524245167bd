//! A per-group heat map of an image: one cell per group, coloured by fsperf's frag_pct (white
//! = one free extent, red = free space scattered), with the group's free blocks and frag_pct in
//! its tooltip. Written as plain SVG text: a grid of rectangles needs no plotting library.

use std::fmt::Write as _;

use super::view::FragReport;

const CELL: u32 = 14;
const MARGIN: u32 = 10;
const TITLE: u32 = 24;

/// The heat map of `rep`, `title` above it.
pub fn heat_map(rep: &FragReport, title: &str) -> String {
    let n = rep.groups.max(1);
    let cols = (f64::from(n).sqrt().ceil() as u32).clamp(1, 64);
    let rows = n.div_ceil(cols);
    // Wide enough for the title and the legend line under the grid.
    let w = (2 * MARGIN + cols * CELL).max(420);
    let h = 2 * MARGIN + TITLE + rows * CELL + 20;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
         viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"11\">\n\
         <text x=\"{MARGIN}\" y=\"{}\">{}</text>\n",
        MARGIN + 12,
        escape(title)
    );
    let bad: std::collections::HashSet<u32> = rep.bad_groups.iter().map(|b| b.0).collect();
    let free_of = |g: u32| {
        rep.mb_groups
            .iter()
            .find(|m| m.group == g as usize)
            .map_or(0, |m| m.free)
    };
    for g in 0..rep.groups {
        let (x, y) = (MARGIN + g % cols * CELL, MARGIN + TITLE + g / cols * CELL);
        let pct = rep
            .frag_pct
            .per_group_frag_pct
            .get(g as usize)
            .copied()
            .unwrap_or(0.0);
        let (fill, tip) = if bad.contains(&g) {
            (
                "#404040".to_string(),
                format!("group {g}: bitmap unreadable"),
            )
        } else {
            (
                colour(pct),
                format!("group {g}: {} free blocks, frag_pct {pct:.1}", free_of(g)),
            )
        };
        let _ = writeln!(
            s,
            "<rect x=\"{x}\" y=\"{y}\" width=\"{c}\" height=\"{c}\" fill=\"{fill}\" \
             stroke=\"#ccc\" stroke-width=\"0.5\"><title>{tip}</title></rect>",
            c = CELL
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{MARGIN}\" y=\"{}\">white: one free extent; red: free space scattered \
         (frag_pct 100); grey: bitmap unreadable</text>",
        h - MARGIN
    );
    s.push_str("</svg>\n");
    s
}

/// White (0 %) to red (100 %).
fn colour(pct: f64) -> String {
    let t = (pct / 100.0).clamp(0.0, 1.0);
    let gb = (255.0 * (1.0 - t)).round() as u8;
    format!("#ff{gb:02x}{gb:02x}")
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
