//! The forwarder's admission of a checked event against the sandbox's
//! `STATE#` row: the lifecycle only moves forward (`created` first;
//! `paused` after `created` or `resumed` of the same generation;
//! `resumed` at a higher generation after `paused`; `killed` after any
//! but itself; nothing after `killed`), and `paused`/`resumed` are rate
//! limited by GCRA (a burst of 20, then one per 30 s).

use crate::event::{Event, EventKind};
use crate::line::Rejection;

/// GCRA's burst of paused/resumed events.
pub const BURST: u64 = 20;

/// GCRA's emission interval: one paused/resumed per 30 s after the burst.
pub const INTERVAL_MS: u64 = 30_000;

/// What the pipeline keeps of one sandbox (its `STATE#` row).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SandboxState {
    /// The last admitted kind.
    pub last: EventKind,
    /// The last admitted generation.
    pub generation: u64,
    /// GCRA's theoretical arrival time, in ms.
    pub tat_ms: u64,
}

impl SandboxState {
    /// Whether the sandbox is still open (not killed): what the reconciler
    /// checks against the listed MicroVMs.
    pub fn is_open(&self) -> bool {
        self.last != EventKind::Killed
    }
}

/// Admits `event` at `now_ms` after `state` (none: nothing admitted yet):
/// the new state.
///
/// # Errors
/// `InvalidTransition` when it is not a forward step; `RateLimited` when
/// a paused/resumed is over the rate.
pub fn admit(
    state: Option<&SandboxState>,
    event: &Event,
    now_ms: u64,
) -> Result<SandboxState, Rejection> {
    use EventKind::*;
    let forward = match (state.map(|s| (s.last, s.generation)), event.kind) {
        (None, Created) => true,
        (None, _) => false,
        (Some((Killed, _)), _) => false,
        (Some(_), Created) => false,
        (Some((Created | Resumed, g)), Paused) => event.generation == g,
        (Some((Paused, g)), Resumed) => event.generation > g,
        (Some((_, g)), Killed) => event.generation >= g,
        (Some(_), _) => false,
    };
    if !forward {
        return Err(Rejection::InvalidTransition);
    }
    let mut tat_ms = state.map_or(0, |s| s.tat_ms);
    if matches!(event.kind, Paused | Resumed) {
        let tolerance = (BURST - 1) * INTERVAL_MS;
        let tat = tat_ms.max(now_ms);
        if tat - now_ms > tolerance {
            return Err(Rejection::RateLimited);
        }
        tat_ms = tat + INTERVAL_MS;
    }
    Ok(SandboxState {
        last: event.kind,
        generation: event.generation,
        tat_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::KillReason;

    fn ev(kind: EventKind, generation: u64) -> Event {
        Event {
            event_id: "0".repeat(32),
            sandbox_id: "s".into(),
            kill_reason: (kind == EventKind::Killed).then_some(KillReason::Request),
            kind,
            generation,
            occurred_at_ms: 0,
            image_arn: String::new(),
            image_version: String::new(),
        }
    }

    #[test]
    fn the_lifecycle_only_moves_forward() {
        use EventKind::*;
        let bad = Err(Rejection::InvalidTransition);
        assert_eq!(admit(None, &ev(Paused, 0), 0), bad);
        let created = admit(None, &ev(Created, 0), 0).unwrap();
        assert_eq!(admit(Some(&created), &ev(Created, 0), 0), bad);
        assert_eq!(admit(Some(&created), &ev(Resumed, 1), 0), bad);
        assert_eq!(admit(Some(&created), &ev(Paused, 1), 0), bad);
        let paused = admit(Some(&created), &ev(Paused, 0), 0).unwrap();
        assert_eq!(admit(Some(&paused), &ev(Resumed, 0), 0), bad);
        let resumed = admit(Some(&paused), &ev(Resumed, 1), 0).unwrap();
        assert_eq!(admit(Some(&resumed), &ev(Paused, 0), 0), bad);
        let killed = admit(Some(&resumed), &ev(Killed, 1), 0).unwrap();
        assert!(!killed.is_open());
        for k in EventKind::ALL {
            assert_eq!(admit(Some(&killed), &ev(k, 2), 0), bad, "{k}");
        }
    }

    #[test]
    fn pauses_and_resumes_past_the_burst_are_rate_limited() {
        use EventKind::*;
        let mut state = admit(None, &ev(Created, 0), 0).unwrap();
        let mut generation = 0;
        for i in 0..BURST {
            let kind = if i % 2 == 0 { Paused } else { Resumed };
            generation += u64::from(kind == Resumed);
            state = admit(Some(&state), &ev(kind, generation), 1_000).unwrap();
        }
        let next = if BURST.is_multiple_of(2) {
            Paused
        } else {
            Resumed
        };
        let g = generation + u64::from(next == Resumed);
        assert_eq!(
            admit(Some(&state), &ev(next, g), 1_000),
            Err(Rejection::RateLimited)
        );
        // One interval later, one more fits; a kill is never limited.
        assert!(admit(Some(&state), &ev(next, g), 1_000 + INTERVAL_MS).is_ok());
        assert!(admit(Some(&state), &ev(Killed, generation), 1_000).is_ok());
    }
}
