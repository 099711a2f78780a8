//! The one Configure a `create` (or a pool's take) sends: every feature
//! with a section gives its [`SectionPlan`] (the reference's
//! `_configure_sections`), and [`apply_plans`] sends them together, each
//! refusal and status read by the section's own [`Outcomes`], then reads
//! one ConfigureStatus for the features that need post-apply data (the
//! gateways' ports).

use std::fmt;
use std::time::Duration;

use super::{ApplyOptions, Outcomes, Section};
use crate::error::SandboxError;
use crate::pb;
use crate::sandbox::Sandbox;

/// What a feature does with the one ConfigureStatus read after the apply
/// (the gateways record their ports there).
pub(crate) type AfterApply =
    Box<dyn FnOnce(&Sandbox, &pb::ConfigureStatusResponse) -> Result<(), SandboxError> + Send>;

/// One feature's part of the one Configure.
pub(crate) struct SectionPlan {
    /// The section this plan sets.
    pub(crate) section: Section,
    /// A request with only this section set (merged into the one sent).
    pub(crate) request: pb::ConfigureRequest,
    /// This section's needs: the call's deadline and the PENDING wait are
    /// the largest of the sections sent.
    pub(crate) options: ApplyOptions,
    /// How this section's refusals and statuses read (the generic
    /// contract's errors when the feature has none of its own).
    pub(crate) outcomes: Box<dyn Outcomes + Send>,
    /// Post-apply data the feature reads from one ConfigureStatus.
    pub(crate) after: Option<AfterApply>,
}

impl fmt::Debug for SectionPlan {
    // The request carries secrets (gateway headers, event keys): only the
    // section is shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SectionPlan")
            .field("section", &self.section)
            .finish_non_exhaustive()
    }
}

impl SectionPlan {
    /// A plan with the generic contract's errors and default options.
    #[cfg_attr(not(feature = "secrets"), allow(dead_code))] // the gateways'
    pub(crate) fn generic(section: Section, request: pb::ConfigureRequest) -> Self {
        Self {
            section,
            request,
            options: ApplyOptions::default(),
            outcomes: Box::new(super::Generic),
            after: None,
        }
    }
}

/// Every plan's refusals read by the plan of the section refused.
struct PerSection<'a>(&'a [(Section, Box<dyn Outcomes + Send>)]);

impl PerSection<'_> {
    fn of(&self, section: Section) -> &dyn Outcomes {
        self.0
            .iter()
            .find(|(s, _)| *s == section)
            .map_or(&super::Generic as &dyn Outcomes, |(_, o)| o.as_ref())
    }
}

impl Outcomes for PerSection<'_> {
    fn not_available(
        &self,
        section: Section,
        why: crate::error::map::configure::NotAvailable,
    ) -> SandboxError {
        self.of(section).not_available(section, why)
    }

    fn invalid(&self, section: Section, class: &str) -> SandboxError {
        self.of(section).invalid(section, class)
    }

    fn failed(&self, section: Section, class: &str) -> SandboxError {
        self.of(section).failed(section, class)
    }

    fn settled(
        &self,
        section: Section,
        status: &pb::ConfigureStatusResponse,
    ) -> Result<bool, SandboxError> {
        self.of(section).settled(section, status)
    }

    fn unsettled(&self, section: Section, limit: Duration) -> SandboxError {
        self.of(section).unsettled(section, limit)
    }
}

/// Moves `section` of `from` into `into`.
fn merge(into: &mut pb::ConfigureRequest, from: pb::ConfigureRequest, section: Section) {
    match section {
        Section::S3Mounts => into.s3_mounts = from.s3_mounts,
        Section::EfsVolumes => into.efs_volumes = from.efs_volumes,
        Section::LifecycleEvents => into.lifecycle_events = from.lifecycle_events,
        Section::TelemetryExport => into.telemetry_export = from.telemetry_export,
        Section::SecretGateway => into.secret_gateway = from.secret_gateway,
    }
}

/// Sends every plan's section in one Configure on `sandbox`: gated, mapped
/// and waited for as [`super::apply_with`] does, each section by its own
/// outcomes; then, when a plan asks, one ConfigureStatus handed to each
/// plan's [`AfterApply`] in order. No plans: no call.
///
/// # Errors
/// The first refusal, failure or timeout of any section (its feature's
/// error), a post-apply hook's error, RPC failures as the transport maps
/// them.
pub(crate) async fn apply_plans(
    sandbox: &Sandbox,
    plans: Vec<SectionPlan>,
) -> Result<(), SandboxError> {
    if plans.is_empty() {
        return Ok(());
    }
    let mut request = pb::ConfigureRequest::default();
    let mut options = ApplyOptions {
        pending_timeout: Duration::ZERO,
        call_timeout: Duration::ZERO,
    };
    let mut outcomes = Vec::with_capacity(plans.len());
    let mut afters = Vec::new();
    for plan in plans {
        merge(&mut request, plan.request, plan.section);
        options.pending_timeout = options.pending_timeout.max(plan.options.pending_timeout);
        options.call_timeout = options.call_timeout.max(plan.options.call_timeout);
        outcomes.push((plan.section, plan.outcomes));
        afters.extend(plan.after);
    }
    super::apply_with(sandbox.conn(), request, options, &PerSection(&outcomes)).await?;
    if afters.is_empty() {
        return Ok(());
    }
    let status = super::read_status(sandbox.conn()).await?;
    for after in afters {
        after(sandbox, &status)?;
    }
    Ok(())
}
