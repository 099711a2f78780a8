//! JSON shapes of the control plane (restJson1, camelCase), as the model
//! `lambda-microvms` 2025-09-09 names them. Inputs are parsed leniently
//! (every member optional, unknown members ignored) so that validation can
//! answer with AWS's own messages instead of a serde error.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The states a MicroVM goes through (`MicrovmState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum MicrovmState {
    /// Created; the `/run` hook has not answered yet (also while resuming).
    Pending,
    /// `/run` answered 200.
    Running,
    /// SuspendMicrovm accepted; `/suspend` in flight.
    Suspending,
    /// Suspended; the proxy answers 502 unless auto-resume is on.
    Suspended,
    /// Being stopped.
    Terminating,
    /// Stopped; stays listed.
    Terminated,
}

impl MicrovmState {
    /// The wire spelling, e.g. `RUNNING`.
    pub fn as_str(self) -> &'static str {
        match self {
            MicrovmState::Pending => "PENDING",
            MicrovmState::Running => "RUNNING",
            MicrovmState::Suspending => "SUSPENDING",
            MicrovmState::Suspended => "SUSPENDED",
            MicrovmState::Terminating => "TERMINATING",
            MicrovmState::Terminated => "TERMINATED",
        }
    }

    /// TERMINATING or TERMINATED.
    pub fn is_ending(self) -> bool {
        matches!(self, MicrovmState::Terminating | MicrovmState::Terminated)
    }
}

/// `IdlePolicy`, echoed back as given.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct IdlePolicy {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) max_idle_duration_seconds: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) suspended_duration_seconds: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) auto_resume_enabled: Option<bool>,
}

/// RunMicrovm input body.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunMicrovmInput {
    pub(crate) image_identifier: Option<String>,
    pub(crate) image_version: Option<String>,
    pub(crate) execution_role_arn: Option<String>,
    pub(crate) idle_policy: Option<IdlePolicy>,
    pub(crate) logging: Option<Value>,
    pub(crate) kms_key_identifier: Option<String>,
    pub(crate) run_hook_payload: Option<String>,
    pub(crate) maximum_duration_in_seconds: Option<i64>,
    pub(crate) client_token: Option<String>,
    pub(crate) ingress_network_connectors: Option<Vec<String>>,
    pub(crate) egress_network_connectors: Option<Vec<String>>,
}

/// The `Microvm` output shape (RunMicrovm and GetMicrovm).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MicrovmOut {
    pub(crate) microvm_id: String,
    pub(crate) state: MicrovmState,
    pub(crate) endpoint: String,
    pub(crate) image_arn: String,
    pub(crate) image_version: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) execution_role_arn: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) idle_policy: Option<IdlePolicy>,
    pub(crate) maximum_duration_in_seconds: i64,
    pub(crate) started_at: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) terminated_at: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) state_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) kms_key_identifier: Option<String>,
    pub(crate) ingress_network_connectors: Vec<String>,
    pub(crate) egress_network_connectors: Vec<String>,
}

/// A `MicrovmItem` of ListMicrovms (no endpoint, as on AWS).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MicrovmItem {
    pub(crate) microvm_id: String,
    pub(crate) state: MicrovmState,
    pub(crate) image_arn: String,
    pub(crate) image_version: String,
    pub(crate) started_at: f64,
}

/// ListMicrovms output.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ListMicrovmsOut {
    pub(crate) items: Vec<MicrovmItem>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) next_token: Option<String>,
}

/// ListMicrovms query string.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ListMicrovmsQuery {
    pub(crate) max_results: Option<String>,
    pub(crate) next_token: Option<String>,
    pub(crate) image_identifier: Option<String>,
    pub(crate) image_version: Option<String>,
}

/// CreateMicrovmAuthToken input body. `allowedPorts` stays raw JSON: it is a
/// union, validated by hand.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AuthTokenInput {
    pub(crate) expiration_in_minutes: Option<i64>,
    pub(crate) allowed_ports: Option<Vec<Value>>,
}
