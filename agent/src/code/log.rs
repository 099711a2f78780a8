//! What an execution produced, kept so that a client whose Execute stream
//! was cut (a reset, a proxy hiccup, a suspend) can `Reattach` and read on
//! from the last `seq` it saw (wire contract 1.7: a 4 MiB ring per
//! execution, at most 32 retained, 30 s after the end, at most 8
//! subscribers).
//!
//! The producer (the execution's task) pushes every numbered event; each
//! follower reads from its own position and waits on a watch for more.
//! Keepalives are never kept: every stream makes its own.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, sleep_until};
use tonic::Status;

use super::execution::KEEPALIVE_INTERVAL;
use super::messages;
use crate::pb;
use crate::pb::execute_event::Event;
use crate::phase::Phase;

/// Bytes of encoded events kept per execution.
pub const LOG_BYTES: usize = 4 << 20;
/// How long an ended execution can still be reattached to.
pub const RETAINED_AFTER_END: Duration = Duration::from_secs(30);
/// Most executions kept at once (ended ones are dropped first).
pub const MAX_RETAINED: usize = 32;
/// Most Reattach streams one execution may have at once.
pub const MAX_SUBSCRIBERS: usize = 8;

/// The asked-for events were already dropped from the log.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Discarded;

#[derive(Debug)]
struct LogState {
    events: VecDeque<pb::ExecuteEvent>,
    bytes: usize,
    /// The seq the next event will have (the producer numbers from 1).
    next_seq: u64,
    ended_at: Option<Instant>,
}

/// The numbered events of one execution.
#[derive(Debug)]
pub(crate) struct ExecutionLog {
    pub(crate) context_id: String,
    capacity: usize,
    state: Mutex<LogState>,
    /// Bumped on every push and at the end; followers wait on it.
    changed: watch::Sender<u64>,
    subscribers: AtomicUsize,
}

impl ExecutionLog {
    pub(crate) fn new(context_id: String, capacity: usize) -> Arc<Self> {
        Arc::new(Self {
            context_id,
            capacity,
            state: Mutex::new(LogState {
                events: VecDeque::new(),
                bytes: 0,
                next_seq: 1,
                ended_at: None,
            }),
            changed: watch::Sender::new(0),
            subscribers: AtomicUsize::new(0),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LogState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Keeps a numbered event (the oldest are dropped beyond the capacity;
    /// the newest is always kept). An `end` event ends the log.
    pub(crate) fn push(&self, event: &pb::ExecuteEvent) {
        {
            let mut state = self.lock();
            state.next_seq = event.seq + 1;
            state.bytes += event_bytes(event);
            if matches!(event.event, Some(Event::End(_))) {
                state.ended_at = Some(Instant::now());
            }
            state.events.push_back(event.clone());
            while state.bytes > self.capacity && state.events.len() > 1 {
                if let Some(old) = state.events.pop_front() {
                    state.bytes -= event_bytes(&old);
                }
            }
        }
        self.changed.send_modify(|n| *n += 1);
    }

    /// Ends the log without an `end` event (the producer went away).
    pub(crate) fn close(&self) {
        {
            let mut state = self.lock();
            if state.ended_at.is_some() {
                return;
            }
            state.ended_at = Some(Instant::now());
        }
        self.changed.send_modify(|n| *n += 1);
    }

    /// When the execution ended, if it did.
    pub(crate) fn ended_at(&self) -> Option<Instant> {
        self.lock().ended_at
    }

    /// Reattach streams following it now.
    pub(crate) fn subscribers(&self) -> usize {
        self.subscribers.load(Ordering::SeqCst)
    }

    /// The seq the next event will have (where `from_seq = 0` starts).
    pub(crate) fn next_seq(&self) -> u64 {
        self.lock().next_seq
    }

    /// Every kept event with `seq >= from`, and whether the log has ended;
    /// [`Discarded`] when some of them were already dropped.
    pub(crate) fn since(&self, from: u64) -> Result<(Vec<pb::ExecuteEvent>, bool), Discarded> {
        let state = self.lock();
        let first = state.events.front().map_or(state.next_seq, |e| e.seq);
        if from < first {
            return Err(Discarded);
        }
        let events = state
            .events
            .iter()
            .skip_while(|e| e.seq < from)
            .cloned()
            .collect();
        Ok((events, state.ended_at.is_some()))
    }

    /// Counts a new follower, unless there are already
    /// [`MAX_SUBSCRIBERS`].
    fn subscribe(self: &Arc<Self>) -> Option<Subscription> {
        let taken = self
            .subscribers
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < MAX_SUBSCRIBERS).then_some(n + 1)
            });
        taken.ok().map(|_| Subscription(self.clone()))
    }
}

/// What an event weighs in the log: its texts, plus a little for the rest.
fn event_bytes(event: &pb::ExecuteEvent) -> usize {
    const FIXED: usize = 16;
    let texts = match &event.event {
        Some(Event::Stdout(chunk) | Event::Stderr(chunk)) => chunk.text.len(),
        Some(Event::Error(error)) => {
            error.name.len()
                + error.value.len()
                + error.traceback.iter().map(String::len).sum::<usize>()
        }
        Some(Event::Result(result)) => {
            let fields = [
                &result.text,
                &result.html,
                &result.markdown,
                &result.latex,
                &result.json,
                &result.javascript,
                &result.png,
                &result.jpeg,
                &result.svg,
                &result.pdf,
                &result.chart,
                &result.data,
            ];
            fields
                .iter()
                .filter_map(|f| f.as_ref())
                .map(String::len)
                .sum::<usize>()
                + result
                    .extra
                    .iter()
                    .map(|(k, v)| k.len() + v.len())
                    .sum::<usize>()
        }
        Some(Event::Started(started)) => started.execution_id.len(),
        Some(Event::End(_) | Event::Keepalive(_)) | None => 0,
    };
    texts + FIXED
}

/// One follower, counted while it lives.
struct Subscription(Arc<ExecutionLog>);

impl Drop for Subscription {
    fn drop(&mut self) {
        self.0.subscribers.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The executions that can be reattached to, by execution id.
#[derive(Debug)]
pub(crate) struct Executions {
    logs: Mutex<HashMap<String, Arc<ExecutionLog>>>,
    retain_after_end: Duration,
}

impl Default for Executions {
    fn default() -> Self {
        Self::new(RETAINED_AFTER_END)
    }
}

impl Executions {
    pub(crate) fn new(retain_after_end: Duration) -> Self {
        Self {
            logs: Mutex::new(HashMap::new()),
            retain_after_end,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<ExecutionLog>>> {
        self.logs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Keeps `log` under `execution_id`, dropping expired logs and, beyond
    /// [`MAX_RETAINED`], the ones that ended first.
    pub(crate) fn insert(&self, execution_id: String, log: Arc<ExecutionLog>) {
        let mut logs = self.lock();
        self.expire(&mut logs);
        while logs.len() >= MAX_RETAINED {
            let oldest = logs
                .iter()
                .filter_map(|(id, log)| log.ended_at().map(|at| (at, id.clone())))
                .min();
            match oldest {
                Some((_, id)) => {
                    logs.remove(&id);
                }
                // Every kept execution is running (one per context, so at
                // most a handful): keep them all.
                None => break,
            }
        }
        logs.insert(execution_id, log);
    }

    /// The log of a kept execution of `context_id`.
    pub(crate) fn get(&self, context_id: &str, execution_id: &str) -> Option<Arc<ExecutionLog>> {
        let mut logs = self.lock();
        self.expire(&mut logs);
        logs.get(execution_id)
            .filter(|log| log.context_id == context_id)
            .cloned()
    }

    fn expire(&self, logs: &mut HashMap<String, Arc<ExecutionLog>>) {
        let now = Instant::now();
        logs.retain(|_, log| {
            log.ended_at()
                .is_none_or(|at| now.duration_since(at) < self.retain_after_end)
        });
    }
}

/// The sending half of a Reattach stream.
pub(crate) type FollowSender = mpsc::Sender<Result<pb::ExecuteEvent, Status>>;

/// Starts following `log` from `from_seq` (0: only what comes next).
///
/// # Errors
/// OUT_OF_RANGE when `from_seq` was already dropped, RESOURCE_EXHAUSTED
/// beyond [`MAX_SUBSCRIBERS`].
#[allow(clippy::result_large_err)]
pub(crate) fn follow(
    log: &Arc<ExecutionLog>,
    from_seq: u64,
    tx: FollowSender,
    phase: watch::Receiver<Phase>,
) -> Result<(), Status> {
    let from = if from_seq == 0 {
        log.next_seq()
    } else {
        from_seq
    };
    if log.since(from).is_err() {
        return Err(Status::out_of_range(messages::EXECUTION_OUTPUT_DISCARDED));
    }
    let Some(subscription) = log.subscribe() else {
        return Err(Status::resource_exhausted(messages::TOO_MANY_SUBSCRIBERS));
    };
    tokio::spawn(run_follower(subscription, from, tx, phase));
    Ok(())
}

/// Sends the kept events from `next` on, then the new ones as they come,
/// until the `end` event, the client leaves, or the phase ends the stream
/// (its gate status, no `end`, as for Execute).
async fn run_follower(
    subscription: Subscription,
    mut next: u64,
    tx: FollowSender,
    mut phase: watch::Receiver<Phase>,
) {
    let log = subscription.0.clone();
    let mut changed = log.changed.subscribe();
    let mut phase_open = true;
    // Nothing to replay: a keepalive at once, so the client's stream opens
    // without waiting for the cell's next output.
    let mut last_sent = Instant::now() - KEEPALIVE_INTERVAL;
    loop {
        let gate = phase.borrow_and_update().gate_status();
        if let Some(status) = gate {
            let _ = tx.send(Err(status)).await;
            return;
        }
        changed.borrow_and_update();
        let (events, ended) = match log.since(next) {
            Ok(found) => found,
            Err(Discarded) => {
                // This follower fell more than the log's capacity behind.
                let _ = tx
                    .send(Err(Status::out_of_range(
                        messages::EXECUTION_OUTPUT_DISCARDED,
                    )))
                    .await;
                return;
            }
        };
        for event in events {
            next = event.seq + 1;
            let is_end = matches!(event.event, Some(Event::End(_)));
            if tx.send(Ok(event)).await.is_err() {
                return;
            }
            last_sent = Instant::now();
            if is_end {
                return;
            }
        }
        if ended {
            // Ended without an `end` event (it was dropped): nothing more
            // will come.
            return;
        }
        tokio::select! {
            biased;
            _ = tx.closed() => return,
            changed_phase = phase.changed(), if phase_open => {
                if changed_phase.is_err() {
                    phase_open = false;
                }
            }
            _ = changed.changed() => {}
            _ = sleep_until(last_sent + KEEPALIVE_INTERVAL) => {
                let keepalive = pb::ExecuteEvent {
                    event: Some(Event::Keepalive(pb::KeepAlive {})),
                    seq: 0,
                };
                if tx.send(Ok(keepalive)).await.is_err() {
                    return;
                }
                last_sent = Instant::now();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stdout(seq: u64, text: &str) -> pb::ExecuteEvent {
        pb::ExecuteEvent {
            event: Some(Event::Stdout(pb::OutputChunk {
                text: text.to_owned(),
                timestamp_unix_ns: 0,
            })),
            seq,
        }
    }

    fn end(seq: u64) -> pb::ExecuteEvent {
        pb::ExecuteEvent {
            event: Some(Event::End(pb::ExecutionEnd { execution_count: 1 })),
            seq,
        }
    }

    fn seqs(events: &[pb::ExecuteEvent]) -> Vec<u64> {
        events.iter().map(|e| e.seq).collect()
    }

    #[test]
    fn replays_from_any_kept_seq_and_drops_the_oldest() {
        let one = event_bytes(&stdout(1, "abcdefgh"));
        let log = ExecutionLog::new("default".into(), one * 2);
        log.push(&stdout(1, "abcdefgh"));
        log.push(&stdout(2, "abcdefgh"));
        assert_eq!(seqs(&log.since(1).unwrap().0), vec![1, 2]);
        log.push(&stdout(3, "abcdefgh"));
        assert_eq!(log.since(1).unwrap_err(), Discarded);
        assert_eq!(seqs(&log.since(2).unwrap().0), vec![2, 3]);
        assert_eq!(seqs(&log.since(3).unwrap().0), vec![3]);
        assert!(log.since(4).unwrap().0.is_empty());
        assert_eq!(log.next_seq(), 4);
        assert!(!log.since(2).unwrap().1);
        log.push(&end(4));
        assert!(log.since(5).unwrap().1);
    }

    #[tokio::test]
    async fn ended_executions_expire_and_the_oldest_ended_go_first() {
        let retain = Duration::from_millis(300);
        let kept = Executions::new(retain);
        let running = ExecutionLog::new("default".into(), LOG_BYTES);
        kept.insert("exec-running".into(), running.clone());
        let ended = ExecutionLog::new("default".into(), LOG_BYTES);
        ended.push(&end(1));
        kept.insert("exec-ended".into(), ended);
        assert!(kept.get("default", "exec-ended").is_some());
        // Another context's execution id is not found.
        assert!(kept.get("default-bash", "exec-ended").is_none());
        tokio::time::sleep(retain).await;
        assert!(kept.get("default", "exec-ended").is_none());
        // A running execution never expires.
        assert!(kept.get("default", "exec-running").is_some());

        let kept = Executions::new(RETAINED_AFTER_END);
        kept.insert("exec-running".into(), running);
        for n in 0..MAX_RETAINED + 3 {
            let log = ExecutionLog::new("default".into(), LOG_BYTES);
            log.push(&end(1));
            kept.insert(format!("exec-{n}"), log);
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert!(kept.get("default", "exec-0").is_none());
        assert!(kept.get("default", "exec-3").is_none());
        assert!(kept.get("default", "exec-4").is_some());
        assert!(
            kept.get("default", &format!("exec-{}", MAX_RETAINED + 2))
                .is_some()
        );
        assert!(kept.get("default", "exec-running").is_some());
        assert_eq!(kept.lock().len(), MAX_RETAINED);
    }

    #[tokio::test]
    async fn a_follower_replays_then_follows_until_the_end() {
        let log = ExecutionLog::new("default".into(), LOG_BYTES);
        log.push(&stdout(1, "a"));
        log.push(&stdout(2, "b"));
        let (tx, mut rx) = mpsc::channel(8);
        let phase = crate::phase::PhaseCell::new();
        follow(&log, 2, tx, phase.subscribe()).unwrap();
        assert_eq!(rx.recv().await.unwrap().unwrap().seq, 2);
        assert_eq!(log.subscribers(), 1);
        log.push(&stdout(3, "c"));
        assert_eq!(rx.recv().await.unwrap().unwrap().seq, 3);
        log.push(&end(4));
        assert_eq!(rx.recv().await.unwrap().unwrap().seq, 4);
        assert!(rx.recv().await.is_none());
        assert_eq!(log.subscribers(), 0);
    }

    #[tokio::test]
    async fn out_of_range_and_subscriber_limits_are_statuses() {
        let one = event_bytes(&stdout(1, "x"));
        let log = ExecutionLog::new("default".into(), one);
        log.push(&stdout(1, "x"));
        log.push(&stdout(2, "x"));
        let phase = crate::phase::PhaseCell::new();
        let (tx, _rx) = mpsc::channel(8);
        let err = follow(&log, 1, tx, phase.subscribe()).unwrap_err();
        assert_eq!(err.code(), tonic::Code::OutOfRange);
        assert_eq!(err.message(), "execution output already discarded");
        let mut keep = Vec::new();
        for _ in 0..MAX_SUBSCRIBERS {
            let (tx, rx) = mpsc::channel(8);
            follow(&log, 2, tx, phase.subscribe()).unwrap();
            keep.push(rx);
        }
        let (tx, _rx) = mpsc::channel(8);
        let err = follow(&log, 2, tx, phase.subscribe()).unwrap_err();
        assert_eq!(err.code(), tonic::Code::ResourceExhausted);
        assert_eq!(err.message(), "too many subscribers");
    }
}
