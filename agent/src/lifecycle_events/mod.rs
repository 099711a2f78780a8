//! Lifecycle events (Configure section `lifecycle_events`, extras §4.2):
//! once enabled, the agent signs one line per step of its sandbox's life
//! (`created` at enable, `paused` at `/suspend`, `resumed` at `/resume`,
//! `killed{request}` at `/terminate`) with the sandbox's key and writes it
//! to [`EventLines`](crate::event_lines::EventLines) (stdout on a MicroVM,
//! which the service forwards to the image's log group, where the stack's
//! forwarder reads it).
//!
//! The key stays in this module's memory (wiped when cleared or replaced)
//! and never reaches a log, a `Debug` or the status, which carries counters
//! only. Emission is forward-only, as the forwarder admits it: one
//! `created` per enable (a re-apply for the same sandbox, a rotated key,
//! emits none), `paused` once per generation, `resumed` only for a higher
//! generation, nothing after `killed`.

mod section;
mod writer;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rayito_events::key::SandboxKey;
use rayito_events::{Event, EventKind, KillReason};
use tokio::sync::oneshot;
use zeroize::Zeroizing;

use crate::event_lines::EventLines;
use crate::pb;
use crate::run::RunState;

/// How long a hook (and Configure, for `created`) waits for its line to be
/// written before it answers: `/suspend` must see `paused` out before the
/// snapshot, `/terminate` `killed` before the VM ends, each within a small
/// share of what AWS grants the hook. A console stuck longer loses no
/// line (it stays queued) but holds no hook.
const FLUSH_BOUND: Duration = Duration::from_millis(500);

/// An RNG failure: no event id, the event is dropped.
const RANDOM_UNAVAILABLE: &str = "random_unavailable";

/// What an apply answers: the section's code and class.
pub(crate) type Outcome = (pb::SectionCode, &'static str);

/// The enabled section and where the sandbox's life last was.
struct Active {
    key: Zeroizing<SandboxKey>,
    sandbox_id: String,
    image_arn: String,
    image_version: String,
    /// The last event emitted (or dropped) and its generation.
    last: (EventKind, u64),
}

#[derive(Default)]
struct State {
    /// `None`: not emitting.
    active: Option<Active>,
    /// A section was applied once: the status is reported from then on.
    applied: bool,
}

/// One agent's lifecycle events.
pub(crate) struct LifecycleEvents {
    enabled: bool,
    run: Arc<RunState>,
    state: Mutex<State>,
    queue: writer::Queue,
}

// Written by hand: the state holds the key.
impl std::fmt::Debug for LifecycleEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LifecycleEvents")
            .field("enabled", &self.enabled)
            .field("queue", &self.queue)
            .finish_non_exhaustive()
    }
}

impl LifecycleEvents {
    /// `enabled`: the agent serves the section (`AgentConfig::
    /// lifecycle_events`); `sink`: where lines go (`None`: stdout).
    pub(crate) fn new(enabled: bool, sink: Option<EventLines>, run: Arc<RunState>) -> Self {
        Self {
            enabled,
            run,
            state: Mutex::default(),
            queue: writer::Queue::new(sink, writer::CAPACITY),
        }
    }

    /// Whether this agent serves the section (Health's
    /// `features.lifecycle_events`).
    pub(crate) fn supported(&self) -> bool {
        self.enabled
    }

    /// Applies a section: clear, enable (emitting `created`, flushed
    /// within [`FLUSH_BOUND`]) or re-key the same sandbox.
    pub(crate) async fn apply(&self, config: pb::LifecycleEventsConfig) -> Outcome {
        if !self.enabled {
            return (pb::SectionCode::Unsupported, "");
        }
        let wanted = match section::read(config) {
            Ok(wanted) => wanted,
            Err(class) => return (pb::SectionCode::Invalid, class),
        };
        let created = {
            let mut state = self.lock();
            state.applied = true;
            match wanted {
                None => {
                    state.active = None;
                    None
                }
                Some(w) => {
                    let rekey = state
                        .active
                        .as_ref()
                        .is_some_and(|a| a.sandbox_id == w.sandbox_id);
                    let last = match &state.active {
                        Some(a) if rekey => a.last,
                        _ => (EventKind::Created, self.generation()),
                    };
                    state.active = Some(Active {
                        key: w.key,
                        sandbox_id: w.sandbox_id,
                        image_arn: w.image_arn,
                        image_version: w.image_version,
                        last,
                    });
                    if rekey {
                        None
                    } else {
                        self.emit(&mut state, EventKind::Created)
                    }
                }
            }
        };
        flushed(created).await;
        (pb::SectionCode::Applied, "")
    }

    /// `/suspend` (after the gate closed): `paused`, flushed within
    /// [`FLUSH_BOUND`].
    pub(crate) async fn paused(&self) {
        let wait = {
            let mut state = self.lock();
            let due = state
                .active
                .as_ref()
                .is_some_and(|a| matches!(a.last.0, EventKind::Created | EventKind::Resumed));
            if due {
                self.emit(&mut state, EventKind::Paused)
            } else {
                None
            }
        };
        flushed(wait).await;
    }

    /// `/resume` (after the generation moved): `resumed`, not waited for
    /// (nothing ends with a resume; the line follows the queue's order).
    pub(crate) fn resumed(&self) {
        let generation = self.generation();
        let mut state = self.lock();
        let due = state
            .active
            .as_ref()
            .is_some_and(|a| a.last.0 != EventKind::Killed && generation > a.last.1);
        if due {
            let _ = self.emit(&mut state, EventKind::Resumed);
        }
    }

    /// `/terminate`: `killed{request}`, queued at once; await the returned
    /// wait before the hook answers.
    pub(crate) fn killed(&self) -> impl std::future::Future<Output = ()> + Send + use<> {
        let wait = {
            let mut state = self.lock();
            let due = state
                .active
                .as_ref()
                .is_some_and(|a| a.last.0 != EventKind::Killed);
            if due {
                self.emit(&mut state, EventKind::Killed)
            } else {
                None
            }
        };
        flushed(wait)
    }

    /// What ConfigureStatus reports: `None` until a section was applied.
    pub(crate) fn status(&self) -> Option<pb::LifecycleEventsStatus> {
        if !self.lock().applied {
            return None;
        }
        let c = &self.queue.counters;
        Some(pb::LifecycleEventsStatus {
            emitted: c.emitted.load(Ordering::Relaxed),
            dropped: c.dropped.load(Ordering::Relaxed),
            last_error_class: (*c.last_error.lock().unwrap_or_else(|p| p.into_inner())).to_owned(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The sandbox's generation: the agent's resume count (0 at create).
    fn generation(&self) -> u64 {
        self.run.resume_generation.load(Ordering::SeqCst)
    }

    /// Signs and queues one event of the active section (under the state's
    /// lock, so lines queue in the order of their steps); the receiver
    /// resolves once it is written. A dropped event still counts as the
    /// step taken: the next one follows it, as the forwarder expects.
    fn emit(&self, state: &mut State, kind: EventKind) -> Option<oneshot::Receiver<()>> {
        let generation = self.generation();
        let active = state.active.as_mut()?;
        active.last = (kind, generation);
        let Some(event_id) = event_id() else {
            self.queue.counters.dropped(RANDOM_UNAVAILABLE);
            return None;
        };
        let event = Event {
            event_id,
            sandbox_id: active.sandbox_id.clone(),
            kill_reason: (kind == EventKind::Killed).then_some(KillReason::Request),
            kind,
            generation,
            occurred_at_ms: now_ms(),
            image_arn: active.image_arn.clone(),
            image_version: active.image_version.clone(),
        };
        let line = rayito_events::line::encode(&active.key, &event);
        self.queue.push(line).ok()
    }
}

/// Waits for a queued line to be written, at most [`FLUSH_BOUND`].
async fn flushed(wait: Option<oneshot::Receiver<()>>) {
    if let Some(wait) = wait {
        let _ = tokio::time::timeout(FLUSH_BOUND, wait).await;
    }
}

/// 16 bytes from the OS's RNG, as 32 lower-case hex characters; `None`
/// when the RNG fails.
fn event_id() -> Option<String> {
    use rand::TryRngCore as _;
    use std::fmt::Write as _;
    let mut bytes = [0u8; 16];
    rand::rngs::OsRng.try_fill_bytes(&mut bytes).ok()?;
    Some(bytes.iter().fold(String::with_capacity(32), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    }))
}

/// Milliseconds since the Unix epoch.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// After `killed` nothing more: the forwarder would refuse it, and a
    /// hook that comes late (the agent is ending) must not add a line.
    #[tokio::test]
    async fn nothing_follows_killed() {
        let lines = Arc::new(Mutex::new(Vec::<String>::new()));
        let seen = lines.clone();
        let run = Arc::new(RunState::new());
        let events = LifecycleEvents::new(
            true,
            Some(EventLines::new(move |l| {
                seen.lock().unwrap().push(l.into())
            })),
            run.clone(),
        );
        let section = pb::LifecycleEventsConfig {
            sandbox_key: vec![3; 32],
            sandbox_id: "sbx".into(),
            image_arn: "arn".into(),
            image_version: "1".into(),
        };
        assert_eq!(events.apply(section).await, (pb::SectionCode::Applied, ""));
        events.killed().await;
        events.paused().await;
        run.resume_generation.fetch_add(1, Ordering::SeqCst);
        events.resumed();
        events.killed().await;
        let kinds: Vec<EventKind> = lines
            .lock()
            .unwrap()
            .iter()
            .map(|l| {
                use base64::Engine as _;
                let json = l.split(' ').nth(1).unwrap();
                let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(json)
                    .unwrap();
                serde_json::from_slice::<Event>(&json).unwrap().kind
            })
            .collect();
        assert_eq!(kinds, [EventKind::Created, EventKind::Killed]);
        // The key is in no Debug.
        let debug = format!("{events:?}");
        assert!(!debug.contains("3, 3, 3"), "{debug}");
    }
}
