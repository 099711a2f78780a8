//! Sandboxes that are gone: saying so (without starting a daemon only to
//! hear it), and forgetting their access tokens once the CLI learns it.
//!
//! A token is forgotten only on the word of the backend its sandbox was
//! created on ([`cache::Origin`]): the local daemon knows nothing of a
//! sandbox on AWS, and the cache is shared by both.

use rayito::{ErrorKind, SandboxError};

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
pub(crate) fn answers_for(backend: &Backend, origin: Origin) -> bool {
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
