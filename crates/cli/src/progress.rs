//! A progress bar on stderr for the commands that run many calls.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;

/// A progress bar on stderr: redrawn in place on a terminal, a line per tenth otherwise.
pub(crate) struct Progress {
    total: usize,
    terminal: bool,
    last_tenth: Mutex<usize>,
}

impl Progress {
    pub(crate) fn new(total: usize) -> Self {
        Progress {
            total,
            terminal: std::io::stderr().is_terminal(),
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
