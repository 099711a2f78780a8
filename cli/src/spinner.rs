//! A spinner with the elapsed time on stderr, for operations that take more
//! than a moment (create, pause, resume, and the SDK's capacity retries
//! inside them); only when stderr is a terminal, the output is text and
//! `-q` was not given.

use std::io::IsTerminal as _;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::Format;

/// Awaits `future` behind a spinner saying `message`.
pub async fn around<T>(format: Format, message: &str, future: impl Future<Output = T>) -> T {
    if format != Format::Text || crate::output::quiet() || !std::io::stderr().is_terminal() {
        return future.await;
    }
    let bar = ProgressBar::new_spinner();
    if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
        bar.set_style(style);
    }
    bar.set_message(message.to_owned());
    bar.enable_steady_tick(Duration::from_millis(100));
    let out = future.await;
    bar.finish_and_clear();
    out
}
