//! Where the agent writes its signed lifecycle event lines
//! (`rayito.event.v1 ...`, see the `rayito-events` crate): on a MicroVM
//! the console (stdout), which the service forwards to the image's log
//! group; the emulator gives its own sink, which plays that log group and
//! its subscription filter.

use std::fmt;
use std::sync::Arc;

/// A sink for event lines (one complete line per call, no newline).
#[derive(Clone)]
pub struct EventLines(Arc<dyn Fn(&str) + Send + Sync>);

impl EventLines {
    /// A sink calling `write` with each line.
    pub fn new(write: impl Fn(&str) + Send + Sync + 'static) -> Self {
        Self(Arc::new(write))
    }

    /// Writes one line.
    pub fn write(&self, line: &str) {
        (self.0)(line)
    }
}

impl fmt::Debug for EventLines {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("EventLines(..)")
    }
}
