//! The reconciler (the stack's schedule, every N minutes): a sandbox the
//! table still holds open but `ListMicrovms` no longer lists (or lists as
//! terminated) ended without its own `killed` line reaching the log (a
//! crash, a host loss); it gets a synthetic `killed{unknown}`, admitted
//! and stored like a forwarded one. The synthetic event's id is derived
//! from the sandbox, its generation and the schedule's window, so that two
//! runs in one window (a retried invocation) write one event.

use std::collections::HashSet;

use aws_sdk_lambdamicrovms::types::MicrovmState;
use rayito_events::{Event, EventKind, KillReason};
use sha2::{Digest, Sha256};

use crate::Failure;
use crate::forwarder::{Stored, admit_and_store};
use crate::table::{StateRow, Table};

/// The synthetic event's id: the first 16 bytes, in hex, of
/// `SHA-256("rayito.reconciler|<sandbox>|<generation>|<window>")`.
pub fn synthetic_event_id(sandbox_id: &str, generation: u64, window: u64) -> String {
    let digest = Sha256::digest(format!(
        "rayito.reconciler|{sandbox_id}|{generation}|{window}"
    ));
    hex::encode(&digest[..16])
}

/// The ids `ListMicrovms` lists as not ended (every page).
async fn live_microvms(
    client: &aws_sdk_lambdamicrovms::Client,
) -> Result<HashSet<String>, Failure> {
    let mut live = HashSet::new();
    let mut token = None;
    loop {
        let out = client
            .list_microvms()
            .set_next_token(token)
            .send()
            .await
            .map_err(|e| Failure::aws("ListMicrovms", &e))?;
        for item in out.items() {
            if !matches!(
                item.state(),
                MicrovmState::Terminated | MicrovmState::Terminating
            ) {
                live.insert(item.microvm_id().to_owned());
            }
        }
        token = out.next_token().map(str::to_owned);
        if token.is_none() {
            return Ok(live);
        }
    }
}

fn killed_unknown(open: &StateRow, window: u64, now_ms: u64) -> Event {
    let generation = open.state.generation;
    Event {
        event_id: synthetic_event_id(&open.sandbox_id, generation, window),
        sandbox_id: open.sandbox_id.clone(),
        kill_reason: Some(KillReason::Unknown),
        kind: EventKind::Killed,
        generation,
        occurred_at_ms: now_ms,
        image_arn: open.image_arn.clone(),
        image_version: open.image_version.clone(),
    }
}

/// One run: the sandboxes it closed with a synthetic `killed{unknown}`.
///
/// # Errors
/// When DynamoDB or `ListMicrovms` fails.
pub async fn reconcile(
    table: &Table,
    microvms: &aws_sdk_lambdamicrovms::Client,
    interval_minutes: u64,
    now_ms: u64,
) -> Result<Vec<String>, Failure> {
    let open = table.open_sandboxes().await?;
    if open.is_empty() {
        return Ok(Vec::new());
    }
    let live = live_microvms(microvms).await?;
    let window = now_ms / (interval_minutes.max(1) * 60_000);
    let mut closed = Vec::new();
    for sandbox in open.iter().filter(|s| !live.contains(&s.sandbox_id)) {
        let event = killed_unknown(sandbox, window, now_ms);
        if admit_and_store(table, &event, now_ms).await? == Ok(Stored::Admitted) {
            closed.push(sandbox.sandbox_id.clone());
        }
    }
    Ok(closed)
}
