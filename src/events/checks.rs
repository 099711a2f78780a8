//! The checks lifecycle events make before any call: each refusal is an
//! `InvalidArgument` naming its argument, with an `events.*` message
//! (pinned in `super::tests`) that never repeats a URL or a secret name.

use rayito_events::url;

use super::types::{
    EventKind, EventQuery, EventsDeploy, MAX_EVENTS_LIMIT, MIN_RECONCILER_INTERVAL_MINUTES,
    WEBHOOK_SECRET_PREFIX,
};
use crate::error::SandboxError;
use crate::error::messages as m;

/// The longest secret name Secrets Manager takes (prefix included).
const MAX_SECRET_NAME_CHARS: usize = 512;
/// The longest ARN taken as a secret id.
const MAX_SECRET_ARN_CHARS: usize = 2_048;

/// The webhook URL rule: AWS's deliverable rule (`aws`), else the local
/// backend's (http or https, any host, loopback included).
pub(crate) fn webhook_url(url: &str, aws: bool) -> Result<(), SandboxError> {
    if aws {
        return url::deliverable(url)
            .map(drop)
            .map_err(|_| SandboxError::invalid_argument("url", m::EVENTS_URL.render(&[])));
    }
    match url::parse(url) {
        Ok(parsed) if matches!(parsed.scheme.as_str(), "http" | "https") => Ok(()),
        _ => Err(SandboxError::invalid_argument(
            "url",
            m::EVENTS_URL_LOCAL.render(&[]),
        )),
    }
}

/// The kinds a webhook receives: at least one; each once, in the order given.
pub(crate) fn webhook_types(types: &[EventKind]) -> Result<Vec<EventKind>, SandboxError> {
    if types.is_empty() {
        return Err(SandboxError::invalid_argument(
            "types",
            m::EVENTS_TYPES_EMPTY.render(&[]),
        ));
    }
    let mut kinds = Vec::new();
    for kind in types {
        if !kinds.contains(kind) {
            kinds.push(*kind);
        }
    }
    Ok(kinds)
}

/// An event type (`sandbox.lifecycle.<kind>`) as the CLI and the JSON
/// answers spell it.
///
/// # Errors
/// `InvalidArgument` (`types`) naming the unknown type.
pub fn parse_event_type(name: &str) -> Result<EventKind, SandboxError> {
    EventKind::from_type_name(name).ok_or_else(|| {
        let shown: String = name.chars().take(64).filter(|c| !c.is_control()).collect();
        SandboxError::invalid_argument(
            "types",
            m::EVENTS_TYPE_UNKNOWN.render(&[("type", &format!("{shown:?}"))]),
        )
    })
}

/// The webhook's secret id: an ARN as is, else the name under
/// `rayito/webhooks/` (a name given with that prefix is not prefixed again).
pub(crate) fn webhook_secret_id(secret_name: &str) -> Result<String, SandboxError> {
    let refuse =
        || SandboxError::invalid_argument("secret_name", m::EVENTS_SECRET_NAME.render(&[]));
    let name_char = |b: u8| b.is_ascii_alphanumeric() || b"/_+=.@-".contains(&b);
    if secret_name.starts_with("arn:") {
        let ok = secret_name.len() <= MAX_SECRET_ARN_CHARS
            && secret_name.contains(":secret:")
            && secret_name.bytes().all(|b| name_char(b) || b == b':');
        return if ok {
            Ok(secret_name.to_owned())
        } else {
            Err(refuse())
        };
    }
    let full = if secret_name.starts_with(WEBHOOK_SECRET_PREFIX) {
        secret_name.to_owned()
    } else {
        format!("{WEBHOOK_SECRET_PREFIX}{secret_name}")
    };
    let ok = !secret_name.is_empty()
        && full.len() > WEBHOOK_SECRET_PREFIX.len()
        && full.len() <= MAX_SECRET_NAME_CHARS
        && secret_name.bytes().all(name_char);
    if ok { Ok(full) } else { Err(refuse()) }
}

/// A webhook id as the stack makes them: 16 lower-case hex characters.
pub(crate) fn webhook_id(id: &str) -> Result<(), SandboxError> {
    if id.len() == 16 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        Ok(())
    } else {
        Err(SandboxError::invalid_argument(
            "webhook_id",
            m::EVENTS_WEBHOOK_ID.render(&[]),
        ))
    }
}

/// A query's limit (1 to 100).
pub(crate) fn query(query: &EventQuery) -> Result<(), SandboxError> {
    if (1..=MAX_EVENTS_LIMIT).contains(&query.limit) {
        Ok(())
    } else {
        Err(SandboxError::invalid_argument(
            "limit",
            m::EVENTS_LIMIT.render(&[("limit", &query.limit.to_string())]),
        ))
    }
}

/// A deploy's values (the artifact bucket only where it is read: AWS).
pub(crate) fn deploy(deploy: &EventsDeploy, aws: bool) -> Result<(), SandboxError> {
    if !(MIN_RECONCILER_INTERVAL_MINUTES..=super::stack_template::MAX_RECONCILER_INTERVAL_MINUTES)
        .contains(&deploy.reconciler_interval_minutes)
    {
        return Err(SandboxError::invalid_argument(
            "reconciler_interval_minutes",
            m::EVENTS_RECONCILER
                .render(&[("minutes", &deploy.reconciler_interval_minutes.to_string())]),
        ));
    }
    if deploy.log_group_name.is_empty() {
        return Err(SandboxError::invalid_argument(
            "log_group_name",
            m::EVENTS_DEPLOY_ARGUMENT.render(&[
                ("argument", "log_group_name"),
                ("what", "log group the sandboxes log to"),
            ]),
        ));
    }
    if aws && deploy.artifact_bucket.is_empty() {
        return Err(SandboxError::invalid_argument(
            "artifact_bucket",
            m::EVENTS_DEPLOY_ARGUMENT.render(&[
                ("argument", "artifact_bucket"),
                (
                    "what",
                    "bucket that holds the stack's functions (rayito setup's artifact bucket)",
                ),
            ]),
        ));
    }
    Ok(())
}
