//! The local lifecycle events pipeline (docs/local.md, "Lifecycle
//! events pipeline"): what the events-webhooks stack does on AWS (extras §4.3),
//! in the emulator's process. Each agent's signed event lines reach
//! [`sink`]; the router ([`run`]) appends them to the sandbox's log stream
//! and, when the stack is deployed and the sandbox logs to its group,
//! forwards them ([`forward`]: parse, admission, the store); each admitted
//! event goes to the queue of every webhook subscribed to its type
//! ([`deliver`]: one worker per webhook, retries, dead letters); the
//! reconciler ([`reconcile`]) closes sandboxes the emulator dropped
//! without a `killed` line. [`routes`] serves the local events API.

mod deliver;
mod forward;
mod reconcile;
pub(crate) mod routes;
mod stack;
mod store;
mod webhooks;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rayito_agent::event_lines::EventLines;
use tokio::sync::{Notify, mpsc};

use super::registry::Shared;
use stack::Stack;

/// How many lines wait for the router at most; past it a line is dropped
/// (counted): the agent never waits on the pipeline.
const LINE_QUEUE: usize = 1_024;

/// One line of one MicroVM's console.
struct Line {
    microvm_id: String,
    text: String,
}

/// The pipeline's state, shared by the sink, the router, the workers and
/// the API.
pub(crate) struct Events {
    /// The deployed stack (`None`: not deployed).
    stack: Mutex<Option<Stack>>,
    /// Each deploy after a destroy is a new stack: a worker of an older
    /// one records nothing into it.
    next_epoch: AtomicU64,
    lines: mpsc::Sender<Line>,
    /// Taken by [`run`] once.
    lines_rx: Mutex<Option<mpsc::Receiver<Line>>>,
    /// Lines the sink dropped because the router was behind.
    dropped: AtomicU64,
    /// Told when the reconciler's interval may have changed (a deploy).
    rescheduled: Notify,
    /// `EmulatorConfig::events_reconcile_interval`.
    reconcile_override: Option<Duration>,
    /// The deliverer's HTTP client (built on first use).
    client: deliver::ClientCell,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events").finish_non_exhaustive()
    }
}

impl Events {
    /// A pipeline with no stack deployed.
    pub(crate) fn new(reconcile_override: Option<Duration>) -> Self {
        let (lines, rx) = mpsc::channel(LINE_QUEUE);
        Self {
            stack: Mutex::new(None),
            next_epoch: AtomicU64::new(1),
            lines,
            lines_rx: Mutex::new(Some(rx)),
            dropped: AtomicU64::new(0),
            rescheduled: Notify::new(),
            reconcile_override,
            client: deliver::ClientCell::default(),
        }
    }

    fn stack(&self) -> MutexGuard<'_, Option<Stack>> {
        self.stack.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hands one line to the router without waiting (full: dropped).
    pub(crate) fn offer(&self, microvm_id: &str, line: &str) {
        let line = Line {
            microvm_id: microvm_id.to_owned(),
            text: line.to_owned(),
        };
        if let Err(mpsc::error::TrySendError::Full(_)) = self.lines.try_send(line) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The `EventLines` of the agent of MicroVM `microvm_id`: what its console
/// would carry to its log group on AWS.
pub(crate) fn sink(events: &Arc<Events>, microvm_id: String) -> EventLines {
    let events = events.clone();
    EventLines::new(move |line| events.offer(&microvm_id, line))
}

/// Now, in milliseconds since the epoch.
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The router: each line to the sandbox's log stream and to the
/// forwarder; the reconciler on its interval (in this task, after the
/// lines already queued, so that a `killed` line on its way is admitted
/// before the reconciler looks).
pub(crate) async fn run(shared: Arc<Shared>) {
    let events = shared.events.clone();
    let Some(mut rx) = events
        .lines_rx
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
    else {
        return;
    };
    let mut next = reconcile::next_run(&events);
    loop {
        let due = async {
            match next {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            line = rx.recv() => match line {
                Some(line) => route(&shared, &events, line),
                None => return,
            },
            () = events.rescheduled.notified() => next = reconcile::next_run(&events),
            () = due => {
                while let Ok(line) = rx.try_recv() {
                    route(&shared, &events, line);
                }
                reconcile::run_once(&shared, &events);
                next = reconcile::next_run(&events);
            }
        }
    }
}

/// One line: appended to the sandbox's stream when it logs to CloudWatch
/// (as its console would be), then forwarded when it is an event line (the
/// stack's subscription filter) of a sandbox logging to the stack's group.
fn route(shared: &Shared, events: &Events, line: Line) {
    let Some(vm) = shared.find(&line.microvm_id) else {
        return;
    };
    let Some(group) = vm.spec.log_group.clone() else {
        return;
    };
    super::sandbox_logs::record(shared, &vm, line.text.clone());
    if line
        .text
        .starts_with(&format!("{} ", rayito_events::line::PREFIX))
    {
        forward::line(events, &group, &line.microvm_id, &line.text, now_ms());
    }
}
