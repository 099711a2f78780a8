//! The admitted events and each sandbox's lifecycle state (the table's
//! `EVENT#` and `STATE#` rows), bounded: at most [`EVENTS_PER_SANDBOX`]
//! events per sandbox (its oldest dropped first) and
//! [`SANDBOXES_KEPT`] sandboxes (the one seen first dropped first, its
//! state with it). The 7-day expiry of AWS's table is moot in a process.

use std::collections::{HashMap, VecDeque};

use rayito_events::admission::SandboxState;
use rayito_events::{Event, EventKind};

/// How many events of one sandbox are kept.
pub(crate) const EVENTS_PER_SANDBOX: usize = 100;

/// How many sandboxes' events and states are kept.
pub(crate) const SANDBOXES_KEPT: usize = 1_000;

/// One sandbox: its state, the image of its last event (what a synthetic
/// `killed` carries), its events in admission order.
#[derive(Debug)]
pub(crate) struct Sandbox {
    pub(crate) state: SandboxState,
    pub(crate) image_arn: String,
    pub(crate) image_version: String,
    events: VecDeque<(u64, Event)>,
}

/// Every sandbox the stack admitted an event of.
#[derive(Debug, Default)]
pub(crate) struct Store {
    sandboxes: HashMap<String, Sandbox>,
    /// Sandbox ids, first seen first.
    order: VecDeque<String>,
    /// Admission sequence: the tie-break of equal `occurred_at_ms`.
    next_seq: u64,
}

/// A query (`get_events`).
#[derive(Debug)]
pub(crate) struct Query {
    pub(crate) sandbox_id: Option<String>,
    /// Empty: every type.
    pub(crate) kinds: Vec<EventKind>,
    pub(crate) limit: usize,
    pub(crate) ascending: bool,
}

impl Store {
    /// The state of `sandbox_id`, if any event of it was admitted.
    pub(crate) fn state(&self, sandbox_id: &str) -> Option<&SandboxState> {
        self.sandboxes.get(sandbox_id).map(|s| &s.state)
    }

    /// Keeps an admitted `event` and the state it led to.
    pub(crate) fn admit(&mut self, event: Event, state: SandboxState) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let id = event.sandbox_id.clone();
        if !self.sandboxes.contains_key(&id) {
            if self.order.len() >= SANDBOXES_KEPT
                && let Some(oldest) = self.order.pop_front()
            {
                self.sandboxes.remove(&oldest);
            }
            self.order.push_back(id.clone());
        }
        let sandbox = self.sandboxes.entry(id).or_insert_with(|| Sandbox {
            state: state.clone(),
            image_arn: String::new(),
            image_version: String::new(),
            events: VecDeque::new(),
        });
        sandbox.state = state;
        sandbox.image_arn.clone_from(&event.image_arn);
        sandbox.image_version.clone_from(&event.image_version);
        if sandbox.events.len() >= EVENTS_PER_SANDBOX {
            sandbox.events.pop_front();
        }
        sandbox.events.push_back((seq, event));
    }

    /// The sandboxes still open (no `killed` admitted).
    pub(crate) fn open(&self) -> Vec<(&String, &Sandbox)> {
        self.sandboxes
            .iter()
            .filter(|(_, s)| s.state.is_open())
            .collect()
    }

    /// The events matching `q`, by `occurred_at_ms` (then admission order).
    pub(crate) fn query(&self, q: &Query) -> Vec<Event> {
        let sandboxes: Vec<&Sandbox> = match &q.sandbox_id {
            Some(id) => self.sandboxes.get(id).into_iter().collect(),
            None => self.sandboxes.values().collect(),
        };
        let mut found: Vec<&(u64, Event)> = sandboxes
            .iter()
            .flat_map(|s| s.events.iter())
            .filter(|(_, e)| q.kinds.is_empty() || q.kinds.contains(&e.kind))
            .collect();
        found.sort_by_key(|(seq, e)| (e.occurred_at_ms, *seq));
        if !q.ascending {
            found.reverse();
        }
        found
            .into_iter()
            .take(q.limit)
            .map(|(_, e)| e.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rayito_events::admission::admit;

    fn event(sandbox: &str, kind: EventKind, at: u64) -> Event {
        Event {
            event_id: format!("{at:032x}"),
            sandbox_id: sandbox.into(),
            kill_reason: None,
            kind,
            generation: 0,
            occurred_at_ms: at,
            image_arn: "arn".into(),
            image_version: "1".into(),
        }
    }

    fn put(store: &mut Store, e: Event) {
        let state = admit(store.state(&e.sandbox_id), &e, e.occurred_at_ms).unwrap_or(
            store.state(&e.sandbox_id).cloned().unwrap_or(SandboxState {
                last: e.kind,
                generation: 0,
                tat_ms: 0,
            }),
        );
        store.admit(e, state);
    }

    #[test]
    fn the_store_is_bounded_per_sandbox_and_in_sandboxes() {
        let mut store = Store::default();
        for i in 0..(EVENTS_PER_SANDBOX as u64 + 5) {
            put(&mut store, event("a", EventKind::Created, i));
        }
        let all = Query {
            sandbox_id: Some("a".into()),
            kinds: vec![],
            limit: usize::MAX,
            ascending: true,
        };
        let kept = store.query(&all);
        assert_eq!(kept.len(), EVENTS_PER_SANDBOX);
        assert_eq!(kept[0].occurred_at_ms, 5, "the oldest went first");
        for i in 0..SANDBOXES_KEPT {
            put(&mut store, event(&format!("s{i}"), EventKind::Created, 1));
        }
        assert!(store.state("a").is_none(), "the sandbox seen first went");
        assert!(store.state("s0").is_some());
        assert_eq!(store.sandboxes.len(), SANDBOXES_KEPT);
    }

    #[test]
    fn queries_filter_order_and_limit() {
        let mut store = Store::default();
        put(&mut store, event("a", EventKind::Created, 10));
        put(&mut store, event("b", EventKind::Created, 10));
        put(&mut store, event("a", EventKind::Paused, 20));
        let q = |sandbox_id: Option<&str>, kinds: Vec<EventKind>, limit, ascending| Query {
            sandbox_id: sandbox_id.map(str::to_owned),
            kinds,
            limit,
            ascending,
        };
        let ids = |es: Vec<Event>| -> Vec<(String, u64)> {
            es.into_iter()
                .map(|e| (e.sandbox_id, e.occurred_at_ms))
                .collect()
        };
        assert_eq!(
            ids(store.query(&q(None, vec![], 100, true))),
            [("a".into(), 10), ("b".into(), 10), ("a".into(), 20)],
            "ties in admission order"
        );
        assert_eq!(
            ids(store.query(&q(None, vec![], 2, false))),
            [("a".into(), 20), ("b".into(), 10)]
        );
        assert_eq!(
            ids(store.query(&q(Some("a"), vec![EventKind::Created], 100, false))),
            [("a".into(), 10)]
        );
        assert!(store.query(&q(Some("zz"), vec![], 100, true)).is_empty());
    }
}
