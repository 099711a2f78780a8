//! `sandbox host ID PORT`: the URL (and, asked, the headers) that reach a
//! server listening on a port inside the sandbox through its proxy; and
//! `sandbox set-timeout ID DURATION`: moves the sandbox's timeout.

use std::time::{Duration, SystemTime};

use rayito::SandboxError;
use serde_json::json;

use crate::Format;
use crate::commands::{Backend, Failure};
use crate::output;

/// What `set-timeout` says to a sandbox created without a managed
/// lifecycle (the SDK's own message names builder calls, not flags).
pub(crate) const UNMANAGED: &str = "this sandbox's timeout cannot be moved: it was created without --max-lifetime; create it with `rayito sandbox create --max-lifetime DURATION` to make its timeout movable (up to that cap)";

/// `sandbox host`: prints the proxy's URL for `port`; with
/// `show_headers` also the two headers every request must carry (the
/// second one a token for this port, valid for an hour).
pub(crate) async fn host(
    backend: &Backend,
    format: Format,
    id: &str,
    port: u16,
    show_headers: bool,
) -> Result<i32, Failure> {
    let sandbox = backend.connect(id).await?;
    let host = sandbox.get_host(port).await?;
    let headers = if show_headers {
        host.headers().await?
    } else {
        Vec::new()
    };
    match format {
        Format::Json => {
            let mut value = json!({ "sandbox_id": id, "port": port, "url": host.url() });
            if show_headers {
                let map: serde_json::Map<String, serde_json::Value> = headers
                    .iter()
                    .map(|(name, v)| ((*name).to_owned(), json!(v)))
                    .collect();
                value["headers"] = serde_json::Value::Object(map);
            }
            output::json(&value);
        }
        Format::Text => {
            outln!("{}", host.url());
            for (name, value) in &headers {
                outln!("{name}: {value}");
            }
        }
    }
    Ok(0)
}

/// `sandbox set-timeout`: the sandbox's timeout becomes `timeout` from now.
pub(crate) async fn set_timeout(
    backend: &Backend,
    format: Format,
    id: &str,
    timeout: Duration,
) -> Result<i32, Failure> {
    let sandbox = backend.connect(id).await?;
    match sandbox.set_timeout(timeout).await {
        Err(SandboxError::LifecycleUnsupported { .. }) => {
            return Err(Failure::Cli(UNMANAGED.to_owned()));
        }
        other => other?,
    }
    let ends_at = SystemTime::now().checked_add(timeout);
    match format {
        Format::Json => output::json(&json!({
            "sandbox_id": id,
            "timeout_secs": timeout.as_secs(),
            "ends_at": output::unix(ends_at),
        })),
        Format::Text => outln!(
            "{id} now ends in {} (at {})",
            crate::duration::human(timeout),
            ends_at.map_or_else(|| "-".to_owned(), crate::dates::rfc3339)
        ),
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    /// docs/cli.md transcribes the refusal of `set-timeout`.
    #[test]
    fn docs_cli_md_quotes_the_set_timeout_refusal() {
        let doc = include_str!("../../docs/cli.md");
        assert!(doc.contains(&format!("error: {}\n", super::UNMANAGED)));
    }
}
