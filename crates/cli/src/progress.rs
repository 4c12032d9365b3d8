//! A progress bar on stderr for the commands that run many calls.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;

/// A progress bar on stderr: redrawn in place on a terminal; on a pipe, a line per tenth or
/// nothing (see `lines_when_piped`).
pub(crate) struct Progress {
    total: usize,
    terminal: bool,
    /// Print a line per tenth when stderr is not a terminal. Commands whose failures follow
    /// the `error:` first-line contract say no: on a pipe they stay silent.
    lines_when_piped: bool,
    last_tenth: Mutex<usize>,
}

impl Progress {
    pub(crate) fn new(total: usize, lines_when_piped: bool) -> Self {
        Progress {
            total,
            terminal: std::io::stderr().is_terminal(),
            lines_when_piped,
            last_tenth: Mutex::new(0),
        }
    }

    fn line(&self, ok: usize, failed: usize) -> String {
        let done = ok + failed;
        let width = 30;
        let filled = done * width / self.total.max(1);
        format!(
            "[{}{}] {done}/{} ok={ok} failed={failed}",
            "#".repeat(filled),
            ".".repeat(width - filled),
            self.total
        )
    }

    pub(crate) fn show(&self, ok: usize, failed: usize) {
        if self.terminal {
            eprint!("\r{}", self.line(ok, failed));
            let _ = std::io::stderr().flush();
            return;
        }
        if !self.lines_when_piped {
            return;
        }
        let tenth = (ok + failed) * 10 / self.total.max(1);
        let mut last = self.last_tenth.lock().unwrap_or_else(|e| e.into_inner());
        if tenth > *last {
            *last = tenth;
            eprintln!("{}", self.line(ok, failed));
        }
    }

    pub(crate) fn finish(&self, ok: usize, failed: usize) {
        if self.terminal {
            eprintln!("\r{}", self.line(ok, failed));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_fills_in_proportion() {
        let progress = Progress::new(200, false);
        assert_eq!(
            progress.line(0, 0),
            format!("[{}] 0/200 ok=0 failed=0", ".".repeat(30))
        );
        assert_eq!(
            progress.line(90, 10),
            format!(
                "[{}{}] 100/200 ok=90 failed=10",
                "#".repeat(15),
                ".".repeat(15)
            )
        );
    }
}
