//! One subscriber of a process (a Start or a Connect stream): StartEvent
//! first, then output from its seq on, then exactly one EndEvent, with a
//! KeepAlive on a stream silent for 30 s. A suspend or the deadline ends the
//! stream in the contract's form while the process keeps its own fate.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rayito_proto::tokens::{detail, end_status, phase};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;

use super::entry::ProcessEntry;
use super::ring::Channel;
use crate::pb;
use crate::phase::{Phase, PhaseCell};

/// A silent stream gets a KeepAlive after this long.
pub(crate) const KEEPALIVE_AFTER: Duration = Duration::from_secs(30);
/// Events buffered between a subscriber task and its gRPC stream.
const STREAM_BUFFER: usize = 64;

/// The stream a Start or Connect returns.
pub(crate) type EventStream = ReceiverStream<Result<pb::ProcessEvent, Status>>;

/// An EndEvent for a stream closed by the agent while the process lives on.
pub(crate) fn detached_end(status: &str, message: &str) -> pb::EndEvent {
    pb::EndEvent {
        exit_code: 0,
        exited: false,
        status: status.to_owned(),
        error: Some(pb::StreamError {
            code: status.to_owned(),
            message: message.to_owned(),
        }),
        signal: None,
    }
}

fn event(e: pb::process_event::Event) -> pb::ProcessEvent {
    pb::ProcessEvent { event: Some(e) }
}

/// Gives the subscriber slot back however the task ends.
struct SlotGuard(Arc<ProcessEntry>, u64);

impl Drop for SlotGuard {
    fn drop(&mut self) {
        self.0.detach(self.1);
    }
}

/// Starts the task of subscriber `id` (from [`ProcessEntry::attach`]),
/// streaming `entry` from `from_seq` on; the task gives the slot back.
pub(crate) fn spawn_subscriber(
    entry: Arc<ProcessEntry>,
    id: u64,
    from_seq: u64,
    phase: PhaseCell,
    cut: Arc<AtomicBool>,
) -> EventStream {
    let (tx, rx) = mpsc::channel(STREAM_BUFFER);
    tokio::spawn(run(entry, id, from_seq, phase, cut, tx));
    ReceiverStream::new(rx)
}

async fn run(
    entry: Arc<ProcessEntry>,
    id: u64,
    mut next_seq: u64,
    phase: PhaseCell,
    cut: Arc<AtomicBool>,
    tx: mpsc::Sender<Result<pb::ProcessEvent, Status>>,
) {
    let _slot = SlotGuard(entry.clone(), id);
    let mut version = entry.watch();
    let mut phase_rx = phase.subscribe();
    let send = |e| {
        let tx = tx.clone();
        async move { tx.send(Ok(event(e))).await.is_ok() }
    };
    use pb::process_event::Event;
    if !send(Event::Start(pb::StartEvent { pid: entry.pid })).await {
        return;
    }
    let mut last_sent = Instant::now();
    loop {
        version.borrow_and_update();
        phase_rx.borrow_and_update();
        let snap = entry.snapshot(next_seq);
        let chunks = match snap.chunks {
            Ok(c) => c,
            Err(_) => {
                let end = detached_end(
                    end_status::OUTPUT_TRUNCATED,
                    "output dropped before it was read",
                );
                send(Event::End(end)).await;
                return;
            }
        };
        for chunk in chunks {
            next_seq = chunk.seq + 1;
            let output = match chunk.channel {
                Channel::Stdout => pb::data_event::Output::Stdout(chunk.data.to_vec()),
                Channel::Stderr => pb::data_event::Output::Stderr(chunk.data.to_vec()),
            };
            let data = pb::DataEvent {
                output: Some(output),
                seq: chunk.seq,
            };
            if !send(Event::Data(data)).await {
                return;
            }
            entry.advance(id, next_seq);
            last_sent = Instant::now();
        }
        match phase.get() {
            Phase::Suspending => {
                send(Event::End(detached_end(
                    end_status::SUSPENDING,
                    phase::SUSPENDING,
                )))
                .await;
                return;
            }
            Phase::Expired => {
                send(Event::End(detached_end(
                    end_status::SANDBOX_TIMEOUT,
                    detail::SANDBOX_TIMEOUT,
                )))
                .await;
                return;
            }
            Phase::Running | Phase::Terminating => {}
        }
        if cut.load(Ordering::SeqCst) {
            return;
        }
        if let Some(end) = snap.end {
            send(Event::End(end)).await;
            return;
        }
        tokio::select! {
            _ = version.changed() => {}
            _ = phase_rx.changed() => {}
            _ = tokio::time::sleep_until(last_sent + KEEPALIVE_AFTER) => {
                if !send(Event::Keepalive(pb::KeepAlive {})).await {
                    return;
                }
                last_sent = Instant::now();
            }
            _ = tx.closed() => return,
        }
    }
}
