//! The check AWS makes of a built image before it snapshots it: an agent
//! started on the image answers `POST .../ready` and then `.../validate`
//! with 200, each within the hook's timeout. `/ready` answers 503 while
//! the template's ready command has not passed yet, which is retried; any
//! other 4xx or 5xx fails the build with AWS's `stateReason` shape, which
//! the SDK reads (`HTTP 5xx` → `ready_server_error`, `HTTP 4xx` →
//! `ready_client_error`).

use std::path::Path;
use std::time::Duration;

use tokio::time::Instant;

use rayito_agent::agent::{Agent, AgentConfig};
use rayito_agent::hooks::{HooksToken, post_hook_with};

/// How often `/ready` is asked again while it answers 503.
const RETRY_INTERVAL: Duration = Duration::from_millis(100);
/// The most characters of the agent's answer a reason repeats.
const MAX_DETAIL_CHARS: usize = 300;

/// Starts an agent on `layer` and calls both hooks.
///
/// # Errors
/// The version's `stateReason`.
pub(crate) async fn check(layer: &Path, hook_timeout: Duration) -> Result<(), String> {
    let template_dir = layer.join("etc/rayito");
    let token = HooksToken::generate();
    let config = AgentConfig {
        image_layer: Some(layer.to_path_buf()),
        // A real directory of the layer, never a symlink a step planted.
        template_dir: std::fs::symlink_metadata(&template_dir)
            .is_ok_and(|m| m.is_dir())
            .then_some(template_dir),
        hooks_token: Some(token.clone()),
        // An emulator's agent never reaches AWS.
        persistence: rayito_agent::persist::PersistenceAccess::Local(None),
        ..AgentConfig::default()
    };
    let agent = Agent::start(config).await.map_err(|err| {
        format!(
            "Ready hook check failed: the built image could not start its agent ({})",
            err.kind()
        )
    })?;
    let result = async {
        call(&agent, &token, "ready", "Ready", hook_timeout).await?;
        call(&agent, &token, "validate", "Validate", hook_timeout).await
    }
    .await;
    agent.shutdown().await;
    result
}

/// POSTs `hook` until it answers something other than 503 or
/// `hook_timeout` passes. A deadline that cuts a retry after a 503 reports
/// that 503 (the hook did answer: it was still waiting), not "no response".
async fn call(
    agent: &Agent,
    token: &HooksToken,
    hook: &str,
    title: &str,
    hook_timeout: Duration,
) -> Result<(), String> {
    let deadline = Instant::now() + hook_timeout;
    let answered = |status: u16, body: &str| {
        format!(
            "{title} hook check failed: {} (HTTP {status}) response",
            detail(body)
        )
    };
    let mut waiting: Option<String> = None;
    loop {
        let answer = tokio::time::timeout_at(
            deadline,
            post_hook_with(agent.hooks_addr(), hook, None, Some(token)),
        )
        .await;
        match answer {
            Ok(Ok((200, _))) => return Ok(()),
            Ok(Ok((503, body))) if Instant::now() + RETRY_INTERVAL < deadline => {
                waiting = Some(body);
                tokio::time::sleep(RETRY_INTERVAL).await;
            }
            Ok(Ok((status, body))) => return Err(answered(status, &body)),
            Ok(Err(_)) => {
                return Err(format!(
                    "{title} hook check failed: the hook could not be reached"
                ));
            }
            Err(_) => {
                return Err(match waiting {
                    Some(body) => answered(503, &body),
                    None => format!(
                        "{title} hook check failed: no response within {} seconds",
                        hook_timeout.as_secs()
                    ),
                });
            }
        }
    }
}

/// The agent's answer as one bounded line ("unsuccessful" when empty).
fn detail(body: &str) -> String {
    let line: String = body
        .split(['\n', '\r'])
        .next()
        .unwrap_or_default()
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_DETAIL_CHARS)
        .collect();
    let line = line.trim();
    if line.is_empty() {
        "unsuccessful".to_owned()
    } else {
        line.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_detail_is_one_bounded_line() {
        assert_eq!(detail(""), "unsuccessful");
        assert_eq!(detail("a\nb"), "a");
        assert_eq!(detail(&"x".repeat(1000)).len(), MAX_DETAIL_CHARS);
    }
}
