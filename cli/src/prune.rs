//! `sandbox prune`: forgets the cached tokens of sandboxes that ended
//! (TERMINATING, TERMINATED, or unknown to the backend: a stopped local
//! daemon's, an expired one's), asking the control plane about each.

use rayito::{SandboxError, SandboxState};
use serde_json::json;

use crate::Format;
use crate::cache::{self, Origin};
use crate::commands::{Backend, Failure};
use crate::output;

/// Why a sandbox counts as ended, if it does: its state, or `not found`.
///
/// # Errors
/// The control plane's, other than not finding the sandbox.
pub(crate) async fn ended(
    client: &rayito::Client,
    id: &str,
) -> Result<Option<&'static str>, SandboxError> {
    match client.get_info_by_id(id).await {
        Ok(info) => Ok(match info.state {
            SandboxState::Terminating => Some("TERMINATING"),
            SandboxState::Terminated => Some("TERMINATED"),
            _ => None,
        }),
        Err(SandboxError::SandboxNotFound { .. }) => Ok(Some("not found")),
        Err(err) => Err(err),
    }
}

/// Runs `sandbox prune` (`dry_run`: says what it would forget).
pub(crate) async fn run(backend: &Backend, format: Format, dry_run: bool) -> Result<i32, Failure> {
    let client = backend.client().await?;
    // The daemon that runs now, whichever backend `backend` is.
    let running = crate::local::running().map(|state| state.pid);
    let mut forgot = Vec::new();
    let mut kept = Vec::new();
    for id in cache::token_ids() {
        let Some(origin) = cache::token_origin(&id) else {
            continue;
        };
        let reason = match origin {
            // A daemon's sandboxes end with it.
            Origin::Local { daemon_pid } if running != Some(daemon_pid) => {
                Some("its local backend stopped")
            }
            // One sandbox the backend cannot be asked about fails the
            // command: nothing is forgotten on a guess.
            origin if crate::gone::answers_for(backend, origin) => ended(&client, &id).await?,
            // Another backend's (the cache is shared): not ours to judge.
            _ => None,
        };
        match reason {
            Some(reason) => {
                if !dry_run {
                    cache::remove_token(&id);
                }
                if format == Format::Text {
                    let verb = if dry_run { "would forget" } else { "forgot" };
                    outln!("{verb} {id} ({reason})");
                }
                forgot.push(json!({ "sandbox_id": id, "reason": reason }));
            }
            None => kept.push(id),
        }
    }
    match format {
        Format::Json => output::json(&json!({
            "forgot": forgot, "kept": kept, "dry_run": dry_run,
        })),
        Format::Text => output::note(&format!(
            "{} token(s) {}, {} kept (sandboxes still there)",
            forgot.len(),
            if dry_run { "to forget" } else { "forgotten" },
            kept.len()
        )),
    }
    Ok(0)
}
