//! The Configure contract: how the SDK applies the agent's optional sections
//! (S3 mounts, EFS volumes, lifecycle events, telemetry export, secret
//! gateway) and what each section's answer means: the one place that
//! gates, sends and maps them. Each feature gives its section as a
//! [`SectionPlan`] and `create` sends every plan in one Configure
//! ([`apply_plans`], through `crate::sandbox::steps::configure_all`).
//!
//! Before sending, Health's `features` gate every section asked: absent
//! features (an agent older than Configure) or a section flag that is false
//! make the call `Unimplemented` naming the section, without calling
//! Configure. One `ConfigureRequest` carries every section of one apply,
//! with a fresh `request_id`. Each section's `SectionResult` then maps:
//! APPLIED succeeds; PENDING succeeds once `ConfigureStatus` (polled every
//! 0.25 s, within a bound) shows the section settled; UNSUPPORTED is
//! `Unimplemented` naming the section; INVALID and FAILED are a `Sandbox`
//! error `<section>: <error_class>`. See docs/configure.md.

mod plan;
#[cfg(test)]
mod tests;

pub(crate) use plan::{SectionPlan, apply_plans};

use std::time::Duration;

use crate::error::map::configure::NotAvailable;
use crate::error::{SandboxError, TimeoutScope};
use crate::pb;
use crate::transport::AgentConn;

/// How often a PENDING section's status is read (the reference's interval).
pub(crate) const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// Default bound of the wait for PENDING sections to settle.
pub(crate) const DEFAULT_PENDING_TIMEOUT: Duration = Duration::from_secs(60);

/// Bound of each Health, Configure and ConfigureStatus call.
const RPC_TIMEOUT: Duration = Duration::from_secs(30);

/// One section of `ConfigureRequest`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Section {
    S3Mounts,
    EfsVolumes,
    LifecycleEvents,
    TelemetryExport,
    SecretGateway,
}

impl Section {
    /// Every section, in the order of their request fields.
    pub(crate) const ALL: [Section; 5] = [
        Section::S3Mounts,
        Section::EfsVolumes,
        Section::LifecycleEvents,
        Section::TelemetryExport,
        Section::SecretGateway,
    ];

    /// The name errors use (the request's field name).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Section::S3Mounts => "s3_mounts",
            Section::EfsVolumes => "efs_volumes",
            Section::LifecycleEvents => "lifecycle_events",
            Section::TelemetryExport => "telemetry_export",
            Section::SecretGateway => "secret_gateway",
        }
    }

    fn wire(self) -> pb::ConfigSection {
        match self {
            Section::S3Mounts => pb::ConfigSection::S3Mounts,
            Section::EfsVolumes => pb::ConfigSection::EfsVolumes,
            Section::LifecycleEvents => pb::ConfigSection::LifecycleEvents,
            Section::TelemetryExport => pb::ConfigSection::TelemetryExport,
            Section::SecretGateway => pb::ConfigSection::SecretGateway,
        }
    }

    /// Health's flag for this section.
    fn offered(self, f: &pb::AgentFeatures) -> bool {
        match self {
            Section::S3Mounts => f.s3_mounts,
            Section::EfsVolumes => f.efs_volumes,
            Section::LifecycleEvents => f.lifecycle_events,
            Section::TelemetryExport => f.telemetry_export,
            Section::SecretGateway => f.secret_gateway,
        }
    }

    fn is_set(self, r: &pb::ConfigureRequest) -> bool {
        match self {
            Section::S3Mounts => r.s3_mounts.is_some(),
            Section::EfsVolumes => r.efs_volumes.is_some(),
            Section::LifecycleEvents => r.lifecycle_events.is_some(),
            Section::TelemetryExport => r.telemetry_export.is_some(),
            Section::SecretGateway => r.secret_gateway.is_some(),
        }
    }

    /// Where this section stands in a `ConfigureStatus` answer.
    fn progress(self, s: &pb::ConfigureStatusResponse) -> Progress {
        match self {
            Section::S3Mounts => s.s3_mounts.as_ref().map_or(Progress::Pending, |st| {
                worst(st.mounts.iter().map(|m| match m.phase() {
                    pb::S3MountPhase::Mounted => Progress::Done,
                    pb::S3MountPhase::Failed => Progress::Failed(m.error_class.clone()),
                    pb::S3MountPhase::Pending | pb::S3MountPhase::Unspecified => Progress::Pending,
                }))
            }),
            Section::EfsVolumes => s.efs_volumes.as_ref().map_or(Progress::Pending, |st| {
                worst(st.volumes.iter().map(|v| match v.state() {
                    pb::EfsVolumeState::Mounted
                    | pb::EfsVolumeState::Degraded
                    | pb::EfsVolumeState::Unmounted => Progress::Done,
                    pb::EfsVolumeState::Failed => Progress::Failed(v.last_error_class.clone()),
                    pb::EfsVolumeState::Unspecified
                    | pb::EfsVolumeState::Requested
                    | pb::EfsVolumeState::Mounting
                    | pb::EfsVolumeState::Remounting => Progress::Pending,
                }))
            }),
            Section::SecretGateway => s.secret_gateway.as_ref().map_or(Progress::Pending, |st| {
                worst(st.routes.iter().map(|r| match r.state() {
                    pb::SecretGatewayRouteState::Listening => Progress::Done,
                    pb::SecretGatewayRouteState::Failed => {
                        Progress::Failed(r.last_error_class.clone())
                    }
                    pb::SecretGatewayRouteState::Unspecified => Progress::Pending,
                }))
            }),
            // Counters only: a status present means the section runs (its
            // last_error_class is about an export or an event, not the apply).
            Section::LifecycleEvents => settled_if(s.lifecycle_events.is_some()),
            Section::TelemetryExport => settled_if(s.telemetry_export.is_some()),
        }
    }
}

/// Where one section stands while the SDK waits for a PENDING answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Progress {
    Done,
    Pending,
    /// Failed, with the agent's error class (raw; mapped when reported).
    Failed(String),
}

fn settled_if(present: bool) -> Progress {
    if present {
        Progress::Done
    } else {
        Progress::Pending
    }
}

/// The least settled of `items`: any failure, else any pending, else done
/// (an empty list is done: nothing left to wait for).
fn worst(items: impl Iterator<Item = Progress>) -> Progress {
    let mut out = Progress::Done;
    for p in items {
        match p {
            Progress::Failed(_) => return p,
            Progress::Pending => out = Progress::Pending,
            Progress::Done => {}
        }
    }
    out
}

/// The first of `paths` (a section's mount paths, in the order asked)
/// still waiting in `reported` (the section's statuses, each at its
/// `path_of`): one not reported is waiting, a reported one is read by
/// `settled` (`Ok(false)`: not settled yet); the first failure fails the
/// whole.
///
/// # Errors
/// The first `settled` error.
pub(crate) fn first_waiting<R>(
    paths: &[String],
    reported: &[R],
    path_of: impl Fn(&R) -> &str,
    settled: impl Fn(&str, &R) -> Result<bool, SandboxError>,
) -> Result<Option<String>, SandboxError> {
    let mut waiting = None;
    for path in paths {
        let done = match reported.iter().find(|r| path_of(r) == path) {
            Some(r) => settled(path, r)?,
            None => false,
        };
        if !done {
            waiting.get_or_insert_with(|| path.clone());
        }
    }
    Ok(waiting)
}

/// The sections `request` sets, in field order.
pub(crate) fn asked(request: &pb::ConfigureRequest) -> Vec<Section> {
    Section::ALL
        .into_iter()
        .filter(|s| s.is_set(request))
        .collect()
}

/// The local gate, before any Configure call: Health's `features` must be
/// present and offer every section asked.
///
/// # Errors
/// `Unimplemented { feature: <section> }` for the first section refused.
#[cfg(test)]
pub(crate) fn gate(
    features: Option<&pb::AgentFeatures>,
    asked: &[Section],
) -> Result<(), SandboxError> {
    gate_with(features, asked, &Generic)
}

/// [`gate`], the refusal built by `outcomes`.
fn gate_with(
    features: Option<&pb::AgentFeatures>,
    asked: &[Section],
    outcomes: &dyn Outcomes,
) -> Result<(), SandboxError> {
    let Some(&first) = asked.first() else {
        return Ok(());
    };
    let Some(features) = features else {
        return Err(outcomes.not_available(first, NotAvailable::NoFeatures));
    };
    match asked.iter().find(|s| !s.offered(features)) {
        Some(&off) => Err(outcomes.not_available(off, NotAvailable::SectionOff)),
        None => Ok(()),
    }
}

/// How a feature reads its section's refusals and statuses: the generic
/// contract's errors by default (`Unimplemented` naming the section,
/// `Sandbox` `<section>: <class>`, `Timeout`); a feature with its own
/// errors (EFS volumes: `Unimplemented` `volumes`, `VolumeMount`)
/// overrides them.
pub(crate) trait Outcomes: Sync {
    /// The gate or an UNSUPPORTED answer refused `section`.
    fn not_available(&self, section: Section, why: NotAvailable) -> SandboxError {
        SandboxError::configure_unimplemented(section.name(), why)
    }

    /// The agent answered `section` INVALID with `class`.
    fn invalid(&self, section: Section, class: &str) -> SandboxError {
        SandboxError::configure_invalid(section.name(), class)
    }

    /// The agent answered `section` FAILED with `class`.
    fn failed(&self, section: Section, class: &str) -> SandboxError {
        SandboxError::configure_failed(section.name(), class)
    }

    /// Whether a PENDING `section` has settled in `status` (`Ok(false)`:
    /// still pending).
    ///
    /// # Errors
    /// The section failed while settling.
    fn settled(
        &self,
        section: Section,
        status: &pb::ConfigureStatusResponse,
    ) -> Result<bool, SandboxError> {
        match section.progress(status) {
            Progress::Done => Ok(true),
            Progress::Pending => Ok(false),
            Progress::Failed(class) => Err(self.failed(section, &class)),
        }
    }

    /// `section` had not settled within `limit`.
    fn unsettled(&self, section: Section, limit: Duration) -> SandboxError {
        SandboxError::timeout(
            TimeoutScope::StateWait,
            &format!("configuring {}", section.name()),
            Some(limit),
        )
    }
}

/// The generic contract's errors.
#[derive(Debug)]
pub(crate) struct Generic;

impl Outcomes for Generic {}

/// Maps Configure's answer for the sections `asked`: the ones still PENDING
/// (to wait for), or the first refusal in field order.
///
/// # Errors
/// UNSUPPORTED: `Unimplemented { feature: <section> }`; INVALID, FAILED:
/// `Sandbox` `<section>: <error_class>`; a section asked without a result,
/// a result for a section not asked, twice, or an unknown code:
/// `Sandbox { protocol_violation }`.
#[cfg(test)]
pub(crate) fn map_results(
    asked: &[Section],
    response: &pb::ConfigureResponse,
) -> Result<Vec<Section>, SandboxError> {
    map_results_with(asked, response, &Generic)
}

/// [`map_results`], the refusals built by `outcomes`.
fn map_results_with(
    asked: &[Section],
    response: &pb::ConfigureResponse,
    outcomes: &dyn Outcomes,
) -> Result<Vec<Section>, SandboxError> {
    const FEATURE: &str = "configure";
    if response.results.len() > Section::ALL.len() {
        return Err(SandboxError::protocol_violation(
            FEATURE,
            "more section results than sections",
        ));
    }
    for r in &response.results {
        let known = asked.iter().any(|s| s.wire() as i32 == r.section);
        if !known {
            return Err(SandboxError::protocol_violation(
                FEATURE,
                "a result for a section that was not asked",
            ));
        }
    }
    let mut pending = Vec::new();
    for &section in asked {
        let mut results = response
            .results
            .iter()
            .filter(|r| r.section == section.wire() as i32);
        let (Some(result), None) = (results.next(), results.next()) else {
            return Err(SandboxError::protocol_violation(
                FEATURE,
                "not exactly one result for a section asked",
            ));
        };
        match pb::SectionCode::try_from(result.code) {
            Ok(pb::SectionCode::Applied) => {}
            Ok(pb::SectionCode::Pending) => pending.push(section),
            Ok(pb::SectionCode::Unsupported) => {
                return Err(outcomes.not_available(section, NotAvailable::Unsupported));
            }
            Ok(pb::SectionCode::Invalid) => {
                return Err(outcomes.invalid(section, &result.error_class));
            }
            Ok(pb::SectionCode::Failed) => {
                return Err(outcomes.failed(section, &result.error_class));
            }
            Ok(pb::SectionCode::Unspecified) | Err(_) => {
                return Err(SandboxError::protocol_violation(
                    FEATURE,
                    "a section result without a known code",
                ));
            }
        }
    }
    Ok(pending)
}

/// How one apply runs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ApplyOptions {
    /// Bound of the wait for PENDING sections.
    pub(crate) pending_timeout: Duration,
    /// Deadline of the Configure call itself (a section the agent applies
    /// inside the call, as EFS volumes are, needs longer than the default).
    pub(crate) call_timeout: Duration,
}

impl Default for ApplyOptions {
    fn default() -> Self {
        Self {
            pending_timeout: DEFAULT_PENDING_TIMEOUT,
            call_timeout: RPC_TIMEOUT,
        }
    }
}

/// Applies the sections set in `request` on the sandbox behind `conn`:
/// reads Health's features, gates, sends one Configure with a fresh
/// `request_id`, maps the results and waits for PENDING ones.
///
/// # Errors
/// As [`gate`] and [`map_results`]; a PENDING section that reports FAILED
/// in ConfigureStatus is the `Sandbox` error of FAILED; one that has not
/// settled within `options.pending_timeout` is `Timeout { StateWait }`;
/// RPC failures as the transport maps them.
#[cfg(test)]
pub(crate) async fn apply(
    conn: &AgentConn,
    request: pb::ConfigureRequest,
    options: ApplyOptions,
) -> Result<(), SandboxError> {
    apply_with(conn, request, options, &Generic).await
}

/// [`apply`], each refusal and status read by `outcomes`.
///
/// # Errors
/// As [`apply`], built by `outcomes`.
pub(crate) async fn apply_with(
    conn: &AgentConn,
    mut request: pb::ConfigureRequest,
    options: ApplyOptions,
    outcomes: &dyn Outcomes,
) -> Result<(), SandboxError> {
    let asked = asked(&request);
    if asked.is_empty() {
        return Ok(());
    }
    let health = conn
        .health(RPC_TIMEOUT, crate::transport::ConnectRetry::Ladder)
        .await?;
    gate_with(health.features.as_ref(), &asked, outcomes)?;
    request.request_id = uuid::Uuid::new_v4().simple().to_string();
    let response = conn.configure(request, options.call_timeout).await?;
    let pending = map_results_with(&asked, &response, outcomes)?;
    wait_settled(conn, pending, options.pending_timeout, outcomes).await
}

/// One ConfigureStatus (what a section's post-apply data, like the
/// gateways' ports, is read from).
///
/// # Errors
/// RPC failures as the transport maps them.
pub(crate) async fn read_status(
    conn: &AgentConn,
) -> Result<pb::ConfigureStatusResponse, SandboxError> {
    conn.configure_status(RPC_TIMEOUT).await
}

/// Polls ConfigureStatus every [`POLL_INTERVAL`] until every section of
/// `pending` is settled, one fails, or `limit` passes.
async fn wait_settled(
    conn: &AgentConn,
    mut pending: Vec<Section>,
    limit: Duration,
    outcomes: &dyn Outcomes,
) -> Result<(), SandboxError> {
    let deadline = tokio::time::Instant::now() + limit;
    while let Some(&first) = pending.first() {
        if tokio::time::Instant::now() >= deadline {
            return Err(outcomes.unsettled(first, limit));
        }
        tokio::time::sleep_until((tokio::time::Instant::now() + POLL_INTERVAL).min(deadline)).await;
        let status = conn.configure_status(RPC_TIMEOUT).await?;
        let mut still = Vec::with_capacity(pending.len());
        for section in pending {
            if !outcomes.settled(section, &status)? {
                still.push(section);
            }
        }
        pending = still;
    }
    Ok(())
}
