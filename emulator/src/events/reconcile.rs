//! The reconciler: a sandbox the pipeline saw open (no `killed`
//! admitted) that the emulator no longer runs (TERMINATED, or forgotten)
//! gets a synthetic `killed{unknown}`, its generation and image those of
//! its last event, its id derived from the sandbox id (the same at every
//! run). AWS's reconciler also counts TERMINATING as gone; here a
//! TERMINATING MicroVM is still inside its `/terminate`, whose own
//! `killed` line is on its way, so the reconciler waits for TERMINATED.

use std::time::Duration;

use rayito_events::{Event, EventKind, KillReason};
use sha2::{Digest as _, Sha256};
use tokio::time::Instant;

use super::{Events, forward, now_ms};
use crate::model::MicrovmState;
use crate::registry::Shared;

/// When the reconciler runs next (`None`: no stack, it does not run).
pub(crate) fn next_run(events: &Events) -> Option<Instant> {
    let minutes = events.stack().as_ref()?.reconciler_interval_minutes;
    let every = events
        .reconcile_override
        .unwrap_or(Duration::from_secs(u64::from(minutes) * 60));
    Some(Instant::now() + every)
}

/// The synthetic `killed`'s id: 32 hex characters of SHA-256 over the
/// sandbox id, so that a second run could never make a second event.
pub(crate) fn synthetic_event_id(sandbox_id: &str) -> String {
    let digest = Sha256::digest(format!("rayito.events.reconciler|{sandbox_id}|unknown"));
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// One run: every open sandbox the emulator no longer runs is closed.
pub(crate) fn run_once(shared: &Shared, events: &Events) {
    let open: Vec<String> = match events.stack().as_ref() {
        Some(stack) => stack
            .store
            .open()
            .into_iter()
            .map(|(id, _)| id.clone())
            .collect(),
        None => return,
    };
    let gone: Vec<String> = open
        .into_iter()
        .filter(|id| {
            shared
                .find(id)
                .is_none_or(|vm| vm.state() == MicrovmState::Terminated)
        })
        .collect();
    if gone.is_empty() {
        return;
    }
    let now = now_ms();
    let mut guard = events.stack();
    let Some(stack) = guard.as_mut() else {
        return;
    };
    for id in gone {
        let Some((_, sandbox)) = stack.store.open().into_iter().find(|(s, _)| **s == id) else {
            continue;
        };
        let event = Event {
            event_id: synthetic_event_id(&id),
            sandbox_id: id.clone(),
            kill_reason: Some(KillReason::Unknown),
            kind: EventKind::Killed,
            generation: sandbox.state.generation,
            occurred_at_ms: now,
            image_arn: sandbox.image_arn.clone(),
            image_version: sandbox.image_version.clone(),
        };
        tracing::debug!(sandbox = %id, "emulator: reconciler closes a sandbox it no longer runs");
        forward::admit_event(stack, event, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_synthetic_id_is_fixed_per_sandbox() {
        let a = synthetic_event_id("microvm-a");
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(a, synthetic_event_id("microvm-a"));
        assert_ne!(a, synthetic_event_id("microvm-b"));
    }
}
