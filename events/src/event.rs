//! The event record: what the agent emits, the pipeline keeps and a
//! webhook receives.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What happened to the sandbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventKind {
    /// Configured for events (once per enable).
    Created,
    /// Suspended.
    Paused,
    /// Resumed (the generation is one higher).
    Resumed,
    /// Terminated.
    Killed,
}

impl EventKind {
    /// Every kind, in lifecycle order.
    pub const ALL: [EventKind; 4] = [Self::Created, Self::Paused, Self::Resumed, Self::Killed];

    /// `created`, `paused`, `resumed`, `killed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Paused => "paused",
            Self::Resumed => "resumed",
            Self::Killed => "killed",
        }
    }

    /// The event type: `sandbox.lifecycle.<kind>`.
    pub fn type_name(self) -> &'static str {
        match self {
            Self::Created => "sandbox.lifecycle.created",
            Self::Paused => "sandbox.lifecycle.paused",
            Self::Resumed => "sandbox.lifecycle.resumed",
            Self::Killed => "sandbox.lifecycle.killed",
        }
    }

    /// The kind of an event type (`sandbox.lifecycle.<kind>`, exactly).
    pub fn from_type_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.type_name() == name)
    }

    /// The kind named `name` (`created`, ...).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a sandbox was killed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KillReason {
    /// Terminated through the API (the agent's `/terminate`).
    Request,
    /// Ended by its timeout.
    Timeout,
    /// No longer listed (the reconciler's synthetic event).
    Unknown,
}

impl KillReason {
    /// `request`, `timeout`, `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Request => "request",
            Self::Timeout => "timeout",
            Self::Unknown => "unknown",
        }
    }
}

/// One lifecycle event. Serialized (compact, `serde_json`) in the field
/// order the MAC covers: `event_id, sandbox_id, kill_reason` (killed
/// only)`, kind, generation, occurred_at_ms, image_arn, image_version`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Event {
    /// 32 lower-case hex characters (16 random bytes).
    pub event_id: String,
    /// The sandbox (MicroVM) id.
    pub sandbox_id: String,
    /// Why it was killed (killed only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kill_reason: Option<KillReason>,
    /// What happened.
    pub kind: EventKind,
    /// 0 at create, one more per resume.
    pub generation: u64,
    /// When, in milliseconds since the Unix epoch.
    pub occurred_at_ms: u64,
    /// The sandbox's image ARN.
    pub image_arn: String,
    /// The sandbox's image version.
    pub image_version: String,
}

impl Event {
    /// The compact JSON the line carries and the MAC covers.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_else(|_| unreachable!("plain strings and integers"))
    }

    /// `<sandbox_id>#<generation>`.
    pub fn sandbox_execution_id(&self) -> String {
        format!("{}#{}", self.sandbox_id, self.generation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn killed() -> Event {
        Event {
            event_id: "0123456789abcdef0123456789abcdef".into(),
            sandbox_id: "sbx".into(),
            kill_reason: Some(KillReason::Request),
            kind: EventKind::Killed,
            generation: 2,
            occurred_at_ms: 1_700_000_000_000,
            image_arn: "arn".into(),
            image_version: "1".into(),
        }
    }

    #[test]
    fn the_json_has_the_fields_in_the_macs_order() {
        assert_eq!(
            String::from_utf8(killed().to_json()).unwrap(),
            r#"{"event_id":"0123456789abcdef0123456789abcdef","sandbox_id":"sbx","kill_reason":"request","kind":"killed","generation":2,"occurred_at_ms":1700000000000,"image_arn":"arn","image_version":"1"}"#
        );
        let created = Event {
            kind: EventKind::Created,
            kill_reason: None,
            ..killed()
        };
        assert!(
            !String::from_utf8(created.to_json())
                .unwrap()
                .contains("kill_reason")
        );
    }

    #[test]
    fn kinds_and_types_round_trip() {
        for k in EventKind::ALL {
            assert_eq!(EventKind::from_type_name(k.type_name()), Some(k));
            assert_eq!(EventKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(EventKind::from_type_name("sandbox.lifecycle.Created"), None);
        assert_eq!(killed().sandbox_execution_id(), "sbx#2");
    }
}
