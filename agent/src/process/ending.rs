//! How a started process ended (a command's `EndEvent`, a terminal's
//! `PtyExited`), recorded once, with when: kept next to the output in each
//! entry's lock, so that a subscriber sees the last output and the end
//! together.

use std::time::Instant;

/// The end of one process, once it has one.
#[derive(Debug)]
pub(crate) struct Ending<E> {
    end: Option<E>,
    at: Option<Instant>,
}

impl<E> Default for Ending<E> {
    fn default() -> Self {
        Self {
            end: None,
            at: None,
        }
    }
}

impl<E: Clone> Ending<E> {
    /// Records `end` and the time, unless an end is recorded already (the
    /// first one stands).
    pub(crate) fn record(&mut self, end: E) {
        if self.end.is_none() {
            self.end = Some(end);
            self.at = Some(Instant::now());
        }
    }

    /// The end, if there is one.
    pub(crate) fn end(&self) -> Option<E> {
        self.end.clone()
    }

    /// Whether the process has ended.
    pub(crate) fn has_ended(&self) -> bool {
        self.end.is_some()
    }

    /// When the end was recorded.
    pub(crate) fn at(&self) -> Option<Instant> {
        self.at
    }
}
