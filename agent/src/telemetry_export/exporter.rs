//! The export task of one applied section: at once and then every
//! interval, the metrics history's newest sample joins a bounded queue and
//! the queue is posted; a failed post keeps its points queued and is
//! retried after a jittered backoff (the next tick adds to the queue
//! meanwhile; beyond [`MAX_QUEUED`] samples the oldest are dropped and
//! counted). `/suspend` asks for a flush ([`Handle::flush`]).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prost::Message as _;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::otlp;
use super::plan::Plan;
use super::sink::Sink;
use crate::metrics::{Metrics, Sample};
use crate::run::RunState;

/// Samples kept while the collector does not take them.
pub(crate) const MAX_QUEUED: usize = 60;
/// Samples sent in one request.
const MAX_BATCH: usize = 20;
/// The first retry's delay (before jitter); doubles per failure.
const BACKOFF_BASE: Duration = Duration::from_secs(1);
/// The longest retry delay (also never beyond the interval).
const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// What ConfigureStatus reports of one export task.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Points the collector took.
    pub exported: AtomicU64,
    /// Points dropped (the queue was full).
    pub dropped: AtomicU64,
    /// The class of the last failed attempt (`""`: none yet).
    pub last_error: Mutex<&'static str>,
}

/// A running export task; dropping it stops the task.
#[derive(Debug)]
pub(crate) struct Handle {
    task: tokio::task::JoinHandle<()>,
    flush: mpsc::Sender<oneshot::Sender<()>>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Handle {
    /// What asks this task for a flush (held without the handle's lock).
    pub(crate) fn flusher(&self) -> Flusher {
        Flusher(self.flush.clone())
    }
}

/// Asks a task for a flush.
#[derive(Debug)]
pub(crate) struct Flusher(mpsc::Sender<oneshot::Sender<()>>);

impl Flusher {
    /// Queues the newest sample and posts the queue once; resolves when
    /// that attempt ended or `within` passed.
    pub(crate) async fn flush(&self, within: Duration) {
        let (done, wait) = oneshot::channel();
        if self.0.try_send(done).is_ok() {
            let _ = tokio::time::timeout(within, wait).await;
        }
    }
}

/// What the task works with.
pub(crate) struct Task {
    pub plan: Plan,
    pub sink: Sink,
    pub metrics: Arc<Metrics>,
    pub run: Arc<RunState>,
    pub sandbox_id: String,
    pub counters: Arc<Counters>,
}

/// Starts the task.
pub(crate) fn spawn(task: Task) -> Handle {
    let (flush, requests) = mpsc::channel(4);
    Handle {
        task: tokio::spawn(task.run(requests)),
        flush,
    }
}

/// A delay of `base * 2^(failures-1)`, capped, jittered to 50..100 %.
fn backoff(failures: u32, interval: Duration) -> Duration {
    let exp = BACKOFF_BASE.saturating_mul(1u32 << failures.saturating_sub(1).min(16));
    let capped = exp.min(BACKOFF_MAX).min(interval);
    capped.mul_f64(rand::random_range(0.5..=1.0))
}

impl Task {
    async fn run(self, mut flushes: mpsc::Receiver<oneshot::Sender<()>>) {
        let mut queue: VecDeque<Sample> = VecDeque::new();
        let mut newest_ms = i64::MIN;
        let mut failures = 0u32;
        let mut retry_at: Option<Instant> = None;
        let mut tick = Instant::now();
        loop {
            let retry = retry_at.unwrap_or_else(|| tick + self.plan.interval);
            tokio::select! {
                () = tokio::time::sleep_until(tick) => {
                    tick += self.plan.interval;
                    if self.run.suspended.load(Ordering::SeqCst) {
                        continue;
                    }
                    self.collect(&mut queue, &mut newest_ms).await;
                }
                () = tokio::time::sleep_until(retry), if retry_at.is_some() => {}
                request = flushes.recv() => {
                    let Some(done) = request else { return };
                    self.collect(&mut queue, &mut newest_ms).await;
                    self.post(&mut queue, &mut failures, &mut retry_at).await;
                    let _ = done.send(());
                    continue;
                }
            }
            self.post(&mut queue, &mut failures, &mut retry_at).await;
        }
    }

    /// Queues the newest sample unless it was queued already.
    async fn collect(&self, queue: &mut VecDeque<Sample>, newest_ms: &mut i64) {
        let sample = self.metrics.latest().await;
        if sample.timestamp_unix_ms <= *newest_ms {
            return;
        }
        *newest_ms = sample.timestamp_unix_ms;
        queue.push_back(sample);
        while queue.len() > MAX_QUEUED {
            queue.pop_front();
            self.counters
                .dropped
                .fetch_add(otlp::POINTS_PER_SAMPLE, Ordering::Relaxed);
        }
    }

    /// Posts the queue, a batch at a time, until it is empty or a post
    /// fails (the retry is then scheduled).
    async fn post(
        &self,
        queue: &mut VecDeque<Sample>,
        failures: &mut u32,
        retry_at: &mut Option<Instant>,
    ) {
        while !queue.is_empty() {
            let n = queue.len().min(MAX_BATCH);
            let batch: Vec<Sample> = queue.iter().take(n).cloned().collect();
            let body = otlp::request(&self.plan, &self.sandbox_id, &batch).encode_to_vec();
            match self.sink.send(&body).await {
                Ok(()) => {
                    queue.drain(..n);
                    *failures = 0;
                    *retry_at = None;
                    let points = otlp::POINTS_PER_SAMPLE * n as u64;
                    self.counters.exported.fetch_add(points, Ordering::Relaxed);
                }
                Err(class) => {
                    *self
                        .counters
                        .last_error
                        .lock()
                        .unwrap_or_else(|p| p.into_inner()) = class;
                    *failures = failures.saturating_add(1);
                    *retry_at = Some(Instant::now() + backoff(*failures, self.plan.interval));
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_is_capped_and_jittered() {
        let minute = Duration::from_secs(60);
        for _ in 0..50 {
            let first = backoff(1, minute);
            assert!(first >= Duration::from_millis(500) && first <= Duration::from_secs(1));
            let third = backoff(3, minute);
            assert!(third >= Duration::from_secs(2) && third <= Duration::from_secs(4));
            assert!(backoff(30, minute) <= minute);
            assert!(backoff(30, Duration::from_secs(15)) <= Duration::from_secs(15));
        }
    }
}
