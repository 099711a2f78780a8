//! Sandboxes that are gone: saying so (without starting a daemon only to
//! hear it), and forgetting their access tokens once the CLI learns it.
//!
//! A token is forgotten only on the word of the backend its sandbox was
//! created on ([`cache::Origin`]): the local daemon knows nothing of a
//! sandbox on AWS, and the cache is shared by both.

use rayito::{ErrorKind, SandboxError, SandboxState};

use crate::cache::{self, Origin};
use crate::commands::Backend;

/// Why the CLI knows, without asking, that a sandbox of the local backend
/// is gone; `None` when it must ask. `daemon_pid` is the running daemon's
/// (none runs: `None`).
pub(crate) fn known_gone_locally(id: &str, daemon_pid: Option<i32>) -> Option<String> {
    match (daemon_pid, cache::token_origin(id)) {
        (None, _) => Some(format!(
            "no such sandbox: {id}: the local backend is not running, and its sandboxes end when it stops"
        )),
        (Some(running), Some(Origin::Local { daemon_pid })) if daemon_pid != running => {
            Some(format!(
                "no such sandbox: {id}: it ran on a local backend that has stopped since, and its sandboxes ended with it"
            ))
        }
        _ => None,
    }
}

/// Whether a token of `origin` is answered for by `backend`.
fn answers_for(backend: &Backend, origin: Origin) -> bool {
    match (origin, &backend.local) {
        (Origin::Aws, None) => true,
        (Origin::Local { daemon_pid }, Some(state)) => daemon_pid == state.pid,
        _ => false,
    }
}

/// After `err` from `backend` about the sandbox `id`: forgets its token
/// when the error says the sandbox does not exist and `backend` is the one
/// it was created on.
pub(crate) fn forget_if_gone(backend: &Backend, id: &str, err: &SandboxError) {
    if err.kind() != ErrorKind::SandboxNotFound {
        return;
    }
    if let Some(origin) = cache::token_origin(id)
        && answers_for(backend, origin)
    {
        cache::remove_token(id);
    }
}

/// Forgets the kept tokens of every sandbox that is gone: those of a local
/// daemon that stopped since, and those `backend` says no longer exist or
/// have terminated (tokens of the other backend are left alone). Returns
/// the ids forgotten.
///
/// # Errors
/// A failure of `backend` other than "no such sandbox" (nothing more is
/// forgotten after it).
// For `rayito prune` (issue 42, section 3), which another change adds.
#[allow(dead_code)]
pub(crate) async fn prune(backend: &Backend) -> Result<Vec<String>, SandboxError> {
    // The daemon that runs now, whichever backend `backend` is.
    let running = crate::local::running().map(|state| state.pid);
    let mut forgotten = Vec::new();
    let mut client = None;
    for id in cache::token_ids() {
        let Some(origin) = cache::token_origin(&id) else {
            continue;
        };
        let gone = match origin {
            // A daemon's sandboxes end with it.
            Origin::Local { daemon_pid } if running != Some(daemon_pid) => true,
            origin if answers_for(backend, origin) => {
                let client = match &client {
                    Some(client) => client,
                    None => client.insert(backend.client().await?),
                };
                match client.get_info_by_id(&id).await {
                    Ok(info) => info.state == SandboxState::Terminated,
                    Err(err) if err.kind() == ErrorKind::SandboxNotFound => true,
                    Err(err) => return Err(err),
                }
            }
            _ => false,
        };
        if gone {
            cache::remove_token(&id);
            forgotten.push(id);
        }
    }
    Ok(forgotten)
}
