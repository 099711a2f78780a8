//! How a build shows itself while it runs, for `template build` and
//! `image publish` alike: a spinner on a terminal (each step as its
//! message), the steps as lines on stderr otherwise (text output only),
//! and, when the build failed, its log on stderr before the error.

use std::io::IsTerminal as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use rayito::SandboxError;
use rayito::template::BuildEvent;

use crate::Format;

/// The progress of one build and the log lines it read.
pub struct BuildOutput {
    format: Format,
    bar: Option<ProgressBar>,
    log: Arc<Mutex<Vec<String>>>,
}

impl BuildOutput {
    /// Starts showing a build described by `what` (`building NAME`).
    pub fn start(format: Format, what: &str) -> BuildOutput {
        let bar =
            (format == Format::Text && !crate::output::quiet() && std::io::stderr().is_terminal())
                .then(|| {
                    let bar = ProgressBar::new_spinner();
                    if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
                        bar.set_style(style);
                    }
                    bar.set_message(what.to_owned());
                    bar.enable_steady_tick(Duration::from_millis(100));
                    bar
                });
        BuildOutput {
            format,
            bar,
            log: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// What the build's `on_event` calls: log lines are kept for
    /// [`BuildOutput::failed`], other steps shown.
    pub fn on_event(&self) -> impl Fn(&BuildEvent) + Send + Sync + 'static {
        let bar = self.bar.clone();
        let lines = self.log.clone();
        let echo = self.format == Format::Text && !crate::output::quiet();
        move |event| match event {
            BuildEvent::Log(line) => lines
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(line.clone()),
            other => match &bar {
                Some(bar) => bar.set_message(other.to_string()),
                None if echo => eprintln!("{other}"),
                None => {}
            },
        }
    }

    /// Stops the spinner.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }

    /// A failed build's log on stderr (text output only): the lines read,
    /// else the error's own log tail.
    pub fn failed(&self, err: &SandboxError) {
        self.finish();
        if self.format != Format::Text {
            return;
        }
        let lines = self.log.lock().unwrap_or_else(|p| p.into_inner());
        let tail: Vec<&str> = match err {
            SandboxError::Build { log_tail, .. } if lines.is_empty() => {
                log_tail.as_str().lines().collect()
            }
            _ => lines.iter().map(String::as_str).collect(),
        };
        if tail.is_empty() {
            return;
        }
        eprintln!("build log:");
        for line in tail {
            eprintln!("  {line}");
        }
    }
}
