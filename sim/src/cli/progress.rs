//! What a long command shows while it runs: a progress bar on a terminal, one plain line per
//! finished job otherwise (a log, a pipe); and the checkers kept quiet meanwhile.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Progress over `total` jobs, on standard output (standard error is silenced while the
/// checkers run, see [`Quiet`]).
pub(super) struct Progress {
    /// `None`: not a terminal, plain lines instead.
    bar: Option<ProgressBar>,
    total: usize,
    /// Whether plain lines are printed (off when standard output carries a report, `--json`).
    lines: bool,
}

impl Progress {
    /// Progress over `total` jobs; `lines`: print the plain lines when standard output is not a
    /// terminal (pass `false` when it carries a machine-read report).
    pub(super) fn new(total: usize, lines: bool) -> Self {
        let bar = std::io::stdout().is_terminal().then(|| {
            let style = ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed} {msg}")
                .expect("static template");
            ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stdout()).with_style(style)
        });
        Self { bar, total, lines }
    }

    /// Job number `done` finished: `line` says what it found.
    pub(super) fn finished(&self, done: usize, line: &str) {
        match &self.bar {
            Some(bar) => {
                bar.set_message(line.to_owned());
                bar.set_position(done as u64);
            }
            None if self.lines => println!("[{done}/{}] {line}", self.total),
            None => {}
        }
    }

    pub(super) fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}

/// While held, what the checkers print on standard error is dropped: shuttle reports every
/// failing execution's panic there whatever its configuration (each failure this tool finds is
/// reported at the end, with its trace and replay file). `--verbose` keeps it.
pub(super) struct Quiet(#[allow(dead_code, reason = "held for its drop")] Option<gag::Gag>);

impl Quiet {
    pub(super) fn new(verbose: bool) -> Self {
        Self(if verbose { None } else { gag::Gag::stderr().ok() })
    }
}
