//! The forwarder (the stack's subscription filter and its function): an
//! event line of a sandbox logging to the stack's group is parsed with
//! the key derived from the stack key, admitted against the sandbox's
//! state, stored, and queued for every webhook subscribed to its type.
//! Each refusal counts under its name.

use rayito_events::Event;
use rayito_events::admission::{SandboxState, admit};

use super::Events;
use super::stack::Stack;

/// Forwards `line` of MicroVM `microvm_id` logging to `group` at `now_ms`.
pub(crate) fn line(events: &Events, group: &str, microvm_id: &str, line: &str, now_ms: u64) {
    let mut guard = events.stack();
    let Some(stack) = guard.as_mut() else {
        return;
    };
    if stack.log_group_name != group {
        return;
    }
    let event = match rayito_events::line::parse(line, microvm_id, &stack.key.0, now_ms) {
        Ok(event) => event,
        Err(rejection) => {
            tracing::debug!(microvm = %microvm_id, reason = rejection.as_str(), "emulator: event line refused");
            stack.counters.reject(rejection);
            return;
        }
    };
    admit_event(stack, event, now_ms);
}

/// Admits `event` (a checked line's, or the reconciler's): stored and
/// queued when it is a forward step, counted as refused otherwise.
pub(crate) fn admit_event(stack: &mut Stack, event: Event, now_ms: u64) {
    let state: Result<SandboxState, _> =
        admit(stack.store.state(&event.sandbox_id), &event, now_ms);
    match state {
        Ok(state) => {
            stack.counters.admitted += 1;
            let mut full = Vec::new();
            for webhook in stack
                .webhooks
                .iter()
                .filter(|w| w.types.contains(&event.kind))
            {
                if !webhook.enqueue(&event) {
                    full.push(webhook.id.clone());
                }
            }
            for webhook_id in full {
                stack.dead_letter(super::stack::DeadLetter {
                    webhook_id,
                    event_id: event.event_id.clone(),
                    attempts: 0,
                    reason: super::deliver::QUEUE_FULL.to_owned(),
                    last_status: None,
                });
            }
            stack.store.admit(event, state);
        }
        Err(rejection) => {
            tracing::debug!(sandbox = %event.sandbox_id, reason = rejection.as_str(), "emulator: event not admitted");
            stack.counters.reject(rejection);
        }
    }
}
