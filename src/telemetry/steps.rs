//! Telemetry export's part in `create`: the builder's setter, the checks
//! before any call, and the `telemetry_export` section of the one
//! Configure (the image facts read once the sandbox runs, the bearer token
//! through the secret cache). `connect` and a pool's builder refuse it.

use super::spec::{self, Auth, DOC, TELEMETRY, TelemetryExport, TelemetryNames};
use crate::configure::{Outcomes, Section, SectionPlan};
use crate::error::SandboxError;
use crate::error::map::configure::NotAvailable;
use crate::error::messages as m;
use crate::pb;
use crate::sandbox::parts::Parts;
use crate::sandbox::steps::{Stage, Step, StepFuture};
use crate::sandbox::{Sandbox, SandboxBuilder};

/// The guest sees four times the image's memory (the reference's
/// `GUEST_MEMORY_MULTIPLIER`): `image_memory_mib` divides it back.
const GUEST_MEMORY_MULTIPLIER: u64 = 4;

/// The export given to a builder (its part).
#[derive(Clone, Debug)]
struct BuilderTelemetry(TelemetryExport);

/// The checked export a `create` sends once the sandbox is ready.
#[derive(Clone, Debug)]
struct ToApply(TelemetryExport);

/// The telemetry export setter of the sandbox builder.
impl SandboxBuilder {
    /// Has the sandbox's agent export its gauges over OTLP/HTTP
    /// (docs/observability.md, "Telemetry export"): the newest metrics
    /// sample every interval, to CloudWatch or the export's endpoint.
    ///
    /// `create` checks the export before any call (interval, service
    /// name, endpoint; an official image must be of the `base-caps`
    /// variant for [`super::OtlpAuth::execution_role`]), then sends it in
    /// the one Configure once the sandbox is ready. An agent that cannot
    /// export fails `Unimplemented` (feature `telemetry`), a section the
    /// agent refuses fails `Sandbox` (`telemetry_export: <class>`); either
    /// terminates the sandbox unless [`Self::keep_on_failure`]. `connect`
    /// and a pool's builder refuse it.
    pub fn telemetry(mut self, export: TelemetryExport) -> Self {
        self.parts_mut().set(BuilderTelemetry(export));
        self
    }
}

fn given(builder: &SandboxBuilder) -> Option<&TelemetryExport> {
    builder.parts().get::<BuilderTelemetry>().map(|b| &b.0)
}

/// Telemetry export's refusals: the gate's reasons name `telemetry` (the
/// generic contract's errors otherwise).
struct TelemetryOutcomes;

impl Outcomes for TelemetryOutcomes {
    fn not_available(&self, _section: Section, why: NotAvailable) -> SandboxError {
        let reason = match why {
            NotAvailable::NoFeatures => m::TELEMETRY_NO_FEATURES_REASON,
            NotAvailable::SectionOff | NotAvailable::Unsupported => m::TELEMETRY_OFF_REASON,
        };
        SandboxError::unimplemented(TELEMETRY, reason.text, Some(DOC))
    }
}

/// The section for `export` on `sandbox`: the image facts from
/// GetMicrovm and Health, the bearer token from the secret cache.
async fn section(
    sandbox: &Sandbox,
    export: &TelemetryExport,
) -> Result<pb::TelemetryExportConfig, SandboxError> {
    let info = sandbox.get_info().await?;
    let memory = sandbox.health().await?.memory_total_bytes;
    let auth = match &export.auth.0 {
        Auth::ExecutionRole => pb::telemetry_export_config::Auth::ExecutionRole(
            pb::TelemetryExportExecutionRoleAuth {},
        ),
        #[cfg(feature = "secrets")]
        Auth::Bearer(secret) => {
            let cache = match sandbox
                .parts()
                .get::<crate::secrets::inject::HandleSecrets>()
            {
                Some(secrets) => secrets.cache(sandbox.client()).await?,
                None => crate::secrets::inject::default_cache(sandbox.client())?,
            };
            let token = cache.get(secret).await?;
            pb::telemetry_export_config::Auth::Bearer(pb::TelemetryExportBearerAuth {
                token: token.expose().to_owned(),
            })
        }
    };
    Ok(pb::TelemetryExportConfig {
        interval_s: u32::try_from(export.interval.as_secs()).unwrap_or(u32::MAX),
        service_name: export.service_name.clone(),
        names: match export.names {
            TelemetryNames::Rayito => pb::TelemetryExportNameStyle::Rayito,
            TelemetryNames::E2b => pb::TelemetryExportNameStyle::E2b,
        } as i32,
        auth: Some(auth),
        image_arn: info.image_arn,
        image_version: info.image_version,
        image_memory_mib: u32::try_from(memory / (1024 * 1024 * GUEST_MEMORY_MULTIPLIER))
            .unwrap_or(u32::MAX),
        endpoint: export.endpoint.clone().unwrap_or_default(),
    })
}

/// Telemetry export's steps.
pub(crate) struct Steps;

impl Step for Steps {
    fn check_connect(&self, builder: &SandboxBuilder) -> Result<(), SandboxError> {
        match given(builder) {
            Some(_) => Err(spec::refuse(m::TELEMETRY_CONNECT, &[])),
            None => Ok(()),
        }
    }

    fn check_pooled(&self, builder: &SandboxBuilder) -> Result<(), SandboxError> {
        match given(builder) {
            Some(_) => Err(spec::refuse(m::TELEMETRY_POOLED, &[])),
            None => Ok(()),
        }
    }

    fn prepare(
        &self,
        builder: &SandboxBuilder,
        stage: Stage,
        handle: &mut Parts,
    ) -> Result<(), SandboxError> {
        if stage == Stage::Create
            && let Some(export) = given(builder)
        {
            spec::check(export, builder.image_name()?.as_deref())?;
            handle.set(ToApply(export.clone()));
        }
        Ok(())
    }

    fn configure_section<'a>(
        &'a self,
        sandbox: &'a Sandbox,
    ) -> StepFuture<'a, Option<SectionPlan>> {
        Box::pin(async move {
            let Some(ToApply(export)) = sandbox.parts().get::<ToApply>() else {
                return Ok(None);
            };
            let config = section(sandbox, export).await?;
            let mut plan = SectionPlan::generic(
                Section::TelemetryExport,
                pb::ConfigureRequest {
                    telemetry_export: Some(config),
                    ..Default::default()
                },
            );
            plan.outcomes = Box::new(TelemetryOutcomes);
            Ok(Some(plan))
        })
    }
}
