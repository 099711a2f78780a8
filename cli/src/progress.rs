//! A bytes progress bar on stderr for `files put/get`: only when stderr is
//! a terminal, the output is text and `-q` was not given; otherwise every
//! call does nothing.

use std::io::IsTerminal as _;

use indicatif::{ProgressBar, ProgressStyle};

use crate::Format;

/// The bar, or nothing.
#[derive(Clone)]
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A bar of `total` bytes, shown only where it belongs.
    pub fn new(format: Format, total: u64) -> Progress {
        let shown =
            format == Format::Text && !crate::output::quiet() && std::io::stderr().is_terminal();
        let bar = shown.then(|| {
            let bar = ProgressBar::new(total);
            if let Ok(style) = ProgressStyle::with_template(
                "{msg} {wide_bar} {bytes}/{total_bytes} {bytes_per_sec} {eta}",
            ) {
                bar.set_style(style);
            }
            bar
        });
        Progress { bar }
    }

    /// Says which file moves now.
    pub fn file(&self, name: &str) {
        if let Some(bar) = &self.bar {
            bar.set_message(name.to_owned());
        }
    }

    /// Counts `n` more bytes moved.
    pub fn add(&self, n: usize) {
        if let Some(bar) = &self.bar {
            bar.inc(u64::try_from(n).unwrap_or(u64::MAX));
        }
    }

    /// Prints `line` on stdout, above the bar when there is one.
    pub fn finish_line(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.suspend(|| outln!("{line}")),
            None => outln!("{line}"),
        }
    }

    /// Takes the bar off the terminal.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
