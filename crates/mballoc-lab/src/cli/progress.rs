//! Progress bars for long runs: an indicatif bar behind the workloads' [`Progress`] trait.
//!
//! The bar stays hidden for the first second of each phase, so quick phases print nothing, and
//! it is never drawn with `--quiet` or when stdout is not a terminal (pipes, files, tests):
//! progress is for a person watching, and machine-read output must stay clean.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use mballoc_lab::workload::Progress;

/// A phase shorter than this never shows a bar.
pub const SHOW_AFTER: Duration = Duration::from_secs(1);

/// An indicatif bar that reveals itself once a phase has run for [`SHOW_AFTER`].
pub struct Bar {
    bar: ProgressBar,
    /// Whether the bar may ever be drawn (a terminal, not `--quiet`).
    enabled: bool,
    shown: AtomicBool,
    /// Start of the current phase, in ns since `origin` (an atomic, so `inc` needs no lock).
    started_ns: AtomicU64,
    origin: Instant,
}

impl Bar {
    /// A bar drawn to stderr when `enabled`; otherwise every call is a cheap no-op.
    pub fn new(enabled: bool) -> Bar {
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::hidden());
        let style =
            ProgressStyle::with_template("{msg} [{wide_bar}] {pos}/{len} ({elapsed}, eta {eta})")
                .map(|s| s.progress_chars("=> "))
                .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        Bar {
            bar,
            enabled,
            shown: AtomicBool::new(false),
            started_ns: AtomicU64::new(0),
            origin: Instant::now(),
        }
    }

    /// The bar the command line wants: enabled unless quiet or stdout is not a terminal.
    pub fn for_terminal(quiet: bool) -> Bar {
        Bar::new(!quiet && std::io::stdout().is_terminal())
    }

    /// Whether the bar has been drawn in the current phase.
    #[cfg(test)]
    fn is_shown(&self) -> bool {
        self.shown.load(Ordering::Relaxed)
    }

    /// Nanoseconds since `origin`, plus one hour so a phase start can be moved into the past
    /// (by tests) without underflow.
    fn now_ns(&self) -> u64 {
        let hour = 3_600_000_000_000u128;
        (self.origin.elapsed().as_nanos() + hour).min(u128::from(u64::MAX)) as u64
    }

    /// Moves the current phase's start `by` into the past.
    #[cfg(test)]
    fn backdate(&self, by: Duration) {
        self.started_ns
            .fetch_sub(by.as_nanos() as u64, Ordering::Relaxed);
    }

    /// Draws the bar once the phase is older than [`SHOW_AFTER`].
    fn maybe_show(&self) {
        if !self.enabled || self.shown.load(Ordering::Relaxed) {
            return;
        }
        let age = self
            .now_ns()
            .saturating_sub(self.started_ns.load(Ordering::Relaxed));
        if age >= SHOW_AFTER.as_nanos() as u64 && !self.shown.swap(true, Ordering::Relaxed) {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
            self.bar.enable_steady_tick(Duration::from_millis(250));
        }
    }
}

impl Progress for Bar {
    fn start(&self, what: &str, total: u64) {
        self.bar.disable_steady_tick();
        self.bar.set_draw_target(ProgressDrawTarget::hidden());
        self.shown.store(false, Ordering::Relaxed);
        self.started_ns.store(self.now_ns(), Ordering::Relaxed);
        self.bar.reset();
        self.bar.set_length(total);
        self.bar.set_message(what.to_string());
    }

    fn inc(&self, n: u64) {
        self.bar.inc(n);
        self.maybe_show();
    }

    fn finish(&self) {
        self.bar.disable_steady_tick();
        if self.shown.load(Ordering::Relaxed) {
            self.bar.finish_and_clear();
        }
        self.bar.set_draw_target(ProgressDrawTarget::hidden());
        self.shown.store(false, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disabled_bar_never_shows() {
        let b = Bar::new(false);
        b.start("phase", 10);
        b.backdate(Duration::from_secs(5));
        b.inc(1);
        assert!(!b.is_shown());
        b.finish();
    }

    #[test]
    fn enabled_bar_shows_only_after_a_second() {
        let b = Bar::new(true);
        b.start("phase", 10);
        b.inc(1);
        assert!(!b.is_shown(), "a fresh phase stays hidden");
        b.backdate(SHOW_AFTER); // instead of sleeping a second
        b.inc(1);
        assert!(b.is_shown(), "an old phase shows its bar");
        b.finish();
        assert!(!b.is_shown());
        b.start("next", 5);
        assert!(!b.is_shown(), "each phase starts hidden again");
        b.finish();
    }
}
