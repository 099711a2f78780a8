//! The bounded queue between the hooks (and Configure, for `created`) and
//! the one thread that writes event lines, and the section's counters.
//!
//! A thread, not a task: on a MicroVM the line goes to the serial console,
//! whose write can take tens of milliseconds, and no runtime worker should
//! wait on it. It starts with the first line, so an agent that never
//! emits (every warm spare of the emulator) holds none, and ends once the
//! section's owner is dropped and the lines queued before are written.

use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use crate::event_lines::EventLines;

/// Lines waiting for the writer at most: more are dropped (`queue_full`).
/// A sandbox emits a handful per suspend/resume cycle, each flushed
/// before its hook answers; 64 waiting means the console is stuck.
pub(super) const CAPACITY: usize = 64;

/// The queue was full: the line was dropped.
pub(super) const QUEUE_FULL: &str = "queue_full";
/// The writer could not be started or write (a thread refused, a failing
/// console, a sink that panicked): the line was dropped.
pub(super) const WRITE_FAILED: &str = "write_failed";

/// The section's counters (ConfigureStatus `lifecycle_events`).
#[derive(Debug, Default)]
pub(super) struct Counters {
    pub emitted: AtomicU64,
    pub dropped: AtomicU64,
    pub last_error: Mutex<&'static str>,
}

impl Counters {
    /// One line dropped for `class`.
    pub(super) fn dropped(&self, class: &'static str) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = class;
    }
}

/// A line and who waits for it to be written.
struct Item {
    line: String,
    written: oneshot::Sender<()>,
}

/// The queue and, once started, its writer.
pub(super) struct Queue {
    capacity: usize,
    /// `None`: stdout, one line, flushed.
    sink: Option<EventLines>,
    pub counters: Arc<Counters>,
    sender: Mutex<Option<SyncSender<Item>>>,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("capacity", &self.capacity)
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

impl Queue {
    pub(super) fn new(sink: Option<EventLines>, capacity: usize) -> Self {
        Self {
            capacity,
            sink,
            counters: Arc::default(),
            sender: Mutex::new(None),
        }
    }

    /// Queues `line`; the receiver resolves once it is written (or
    /// dropped by a failing writer).
    ///
    /// # Errors
    /// The class of the drop, already counted.
    pub(super) fn push(&self, line: String) -> Result<oneshot::Receiver<()>, &'static str> {
        let mut sender = self.sender.lock().unwrap_or_else(|p| p.into_inner());
        if sender.is_none() {
            *sender = self.start();
        }
        let (written, wait) = oneshot::channel();
        let class = match sender.as_ref().map(|s| s.try_send(Item { line, written })) {
            Some(Ok(())) => return Ok(wait),
            Some(Err(TrySendError::Full(_))) => QUEUE_FULL,
            // The writer is gone (it could not start, or died): the next
            // line starts a new one.
            Some(Err(TrySendError::Disconnected(_))) | None => {
                *sender = None;
                WRITE_FAILED
            }
        };
        self.counters.dropped(class);
        Err(class)
    }

    fn start(&self) -> Option<SyncSender<Item>> {
        let (tx, rx) = sync_channel(self.capacity);
        let sink = self.sink.clone();
        let counters = self.counters.clone();
        std::thread::Builder::new()
            .name("rayito-events".into())
            .spawn(move || write_all(rx, sink, &counters))
            .ok()
            .map(|_| tx)
    }
}

/// The writer: every queued line, in order, until the queue is dropped.
fn write_all(rx: Receiver<Item>, sink: Option<EventLines>, counters: &Counters) {
    while let Ok(item) = rx.recv() {
        // A sink that panics loses its line, not the writer.
        let wrote = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match &sink {
            Some(sink) => {
                sink.write(&item.line);
                true
            }
            None => write_stdout(&item.line).is_ok(),
        }));
        if wrote.unwrap_or(false) {
            counters.emitted.fetch_add(1, Ordering::Relaxed);
        } else {
            counters.dropped(WRITE_FAILED);
        }
        let _ = item.written.send(());
    }
}

/// One whole line on stdout (the MicroVM's console), flushed: the console
/// lock keeps another writer's output from landing inside it.
fn write_stdout(line: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(line.as_bytes())?;
    out.write_all(b"\n")?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer stuck on its sink: the queue holds `capacity` lines, the
    /// next is dropped as `queue_full`; once the sink moves, every queued
    /// line is written, in order.
    #[test]
    fn a_full_queue_drops_and_counts() {
        let (entered, in_sink) = std::sync::mpsc::channel::<()>();
        let (release, wait) = std::sync::mpsc::channel::<()>();
        let wait = Mutex::new(wait);
        let lines = Arc::new(Mutex::new(Vec::new()));
        let seen = lines.clone();
        let queue = Queue::new(
            Some(EventLines::new(move |line| {
                let _ = entered.send(());
                // Until released (or the test ends).
                let _ = wait.lock().unwrap().recv();
                seen.lock().unwrap().push(line.to_owned());
            })),
            2,
        );
        let first = queue.push("line 0".into()).unwrap();
        in_sink.recv().unwrap();
        // The writer holds line 0; two more fill the queue.
        let queued = [
            queue.push("line 1".into()).unwrap(),
            queue.push("line 2".into()).unwrap(),
        ];
        assert_eq!(queue.push("line 3".into()).unwrap_err(), QUEUE_FULL);
        drop(release);
        first.blocking_recv().unwrap();
        for written in queued {
            written.blocking_recv().unwrap();
        }
        assert_eq!(*lines.lock().unwrap(), ["line 0", "line 1", "line 2"]);
        let c = &queue.counters;
        assert_eq!(c.emitted.load(Ordering::Relaxed), 3);
        assert_eq!(c.dropped.load(Ordering::Relaxed), 1);
        assert_eq!(*c.last_error.lock().unwrap(), QUEUE_FULL);
    }

    /// A sink that panics loses its line (`write_failed`), not the writer.
    #[test]
    fn a_panicking_sink_drops_its_line_only() {
        let queue = Queue::new(
            Some(EventLines::new(|line| {
                assert_ne!(line, "bad", "sink refuses")
            })),
            4,
        );
        queue.push("bad".into()).unwrap().blocking_recv().unwrap();
        queue.push("good".into()).unwrap().blocking_recv().unwrap();
        let c = &queue.counters;
        assert_eq!(c.emitted.load(Ordering::Relaxed), 1);
        assert_eq!(c.dropped.load(Ordering::Relaxed), 1);
        assert_eq!(*c.last_error.lock().unwrap(), WRITE_FAILED);
    }
}
