//! What a sandbox is created with, and the checks made before any I/O.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::error::{RetryPolicy, SandboxError};
use crate::secret::Secret;
use crate::transport::{AGENT_PORT, HOOKS_PORT};

use super::payload::LifecycleBlock;

/// Default sandbox lifetime (docs/architecture.md, "One create, step by step").
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3_600);
/// The platform's cap on a MicroVM's duration, running and suspended.
pub(crate) const MAX_DURATION_SECS: u64 = 28_800;
/// Default readiness wait.
pub(crate) const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(90);
/// Default deadline of unary RPCs.
pub(crate) const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Default idle time before the platform suspends the sandbox.
const DEFAULT_MAX_IDLE_SECS: u64 = 300;
/// The platform's minimum idle time.
const MIN_MAX_IDLE_SECS: u64 = 60;
/// Margin between the logical timeout and the cap of a managed lifecycle.
const CAP_MARGIN_SECS: u64 = 60;
/// Smallest cap of a managed lifecycle.
const MIN_CAP_SECS: u64 = 120;
/// Longest env/metadata key the SDK accepts.
const MAX_KEY_CHARS: usize = 256;

/// What happens when a sandbox with a managed lifecycle reaches its timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OnTimeout {
    /// Terminate the sandbox (the default of a managed lifecycle).
    Kill,
    /// Suspend it; traffic resumes it (needs an idle policy).
    Pause,
}

/// The platform idle policy: after `max_idle` without traffic the sandbox is
/// suspended, and with `auto_resume` the next request wakes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdlePolicy {
    max_idle: Duration,
    auto_resume: bool,
}

impl IdlePolicy {
    /// Suspend after `max_idle` without traffic (at least 60 s), with auto-resume.
    pub fn new(max_idle: Duration) -> Self {
        Self {
            max_idle,
            auto_resume: true,
        }
    }

    crate::setters::setters! {
        /// Whether a request to a suspended sandbox resumes it (default true).
        auto_resume: bool;
    }
}

/// The idle policy choice of one create.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum IdleChoice {
    /// 300 s with auto-resume, silently dropped when the sandbox is shorter.
    #[default]
    Default,
    /// The caller's policy.
    Explicit(IdlePolicy),
    /// No idle policy.
    Disabled,
}

/// Everything `create()` needs, as the builder collected it.
#[derive(Clone)]
pub(crate) struct CreateOptions {
    pub template: Option<String>,
    pub template_version: Option<u32>,
    /// The size: its image is `<template>-<size>` (baseline unsuffixed).
    pub size: Option<crate::size::SizeRequest>,
    pub timeout: Duration,
    pub max_lifetime: Option<Duration>,
    pub on_timeout: Option<OnTimeout>,
    pub envs: BTreeMap<String, String>,
    /// The default working directory of every process (`workdir`).
    pub workdir: Option<String>,
    pub metadata: BTreeMap<String, String>,
    pub ready_timeout: Duration,
    pub request_timeout: Duration,
    pub idle: IdleChoice,
    pub allowed_ports: Vec<u16>,
    pub execution_role_arn: Option<String>,
    pub access_token: Option<Secret>,
    /// RLIMIT_CPU of every command and terminal (`cpu_time_limit`).
    pub cpu_time_limit: Option<Duration>,
    /// RunMicrovm `logging`; `None`: disabled. Boxed: the builder is held
    /// by value in every create future (tests/sdk/future_sizes.rs).
    pub logging: Option<Box<super::SandboxLogging>>,
    /// A failed create leaves its MicroVM running (`keep_on_failure`).
    pub keep_on_failure: bool,
    /// The reconnect budget of this sandbox's handle (`reconnect_timeout`);
    /// `None`: the client's retry policy's.
    pub reconnect_timeout: Option<Duration>,
    /// RunMicrovm's network connectors (`ingress`, `egress`).
    pub connectors: super::connectors::Connectors,
}

impl Default for CreateOptions {
    fn default() -> Self {
        Self {
            template: None,
            template_version: None,
            size: None,
            timeout: DEFAULT_TIMEOUT,
            max_lifetime: None,
            on_timeout: None,
            envs: BTreeMap::new(),
            workdir: None,
            metadata: BTreeMap::new(),
            ready_timeout: DEFAULT_READY_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            idle: IdleChoice::Default,
            allowed_ports: Vec::new(),
            execution_role_arn: None,
            access_token: None,
            cpu_time_limit: None,
            logging: None,
            keep_on_failure: false,
            reconnect_timeout: None,
            connectors: super::connectors::Connectors::default(),
        }
    }
}

// Env values may be secrets: only their names are shown.
crate::secret::redacted_debug! {
    CreateOptions |o| template, template_version, size, timeout, max_lifetime, cpu_time_limit,
    on_timeout, envs = o.envs.keys().collect::<Vec<_>>(), workdir,
    metadata = o.metadata.keys().collect::<Vec<_>>(), ready_timeout, request_timeout, idle,
    allowed_ports, execution_role_arn, logging, access_token, keep_on_failure, reconnect_timeout,
    connectors
}

impl CreateOptions {
    /// Refuses a zero `reconnect_timeout` (no I/O).
    pub(crate) fn check_reconnect_timeout(&self) -> Result<(), SandboxError> {
        match self.reconnect_timeout {
            Some(budget) => crate::checks::positive_duration("reconnect_timeout", budget),
            None => Ok(()),
        }
    }

    /// The retry policy of this sandbox's agent connection: `policy` (the
    /// client's) with the reconnect budget `reconnect_timeout` sets.
    pub(crate) fn agent_policy(&self, policy: &RetryPolicy) -> RetryPolicy {
        let mut policy = *policy;
        if let Some(budget) = self.reconnect_timeout {
            policy.reconnect.total_budget = Some(budget);
        }
        policy
    }

    /// The template a create runs with the size applied: the template
    /// (else `RAYITO_TEMPLATE`, else the default image) suffixed
    /// `-<size>`; without a size, or for the baseline, the template as
    /// given (`None` leaves the choice to the backend).
    ///
    /// # Errors
    /// `InvalidArgument` (`size`) for a size out of the catalog, or an
    /// image ARN with a size other than the baseline.
    pub(crate) fn sized_template(&self) -> Result<Option<String>, SandboxError> {
        let Some(request) = self.size else {
            return Ok(self.template.clone());
        };
        let size = request.resolve()?;
        if size.is_baseline() {
            return Ok(self.template.clone());
        }
        let template = self
            .template
            .clone()
            .or_else(|| {
                std::env::var(super::backend::TEMPLATE_ENV)
                    .ok()
                    .filter(|t| !t.is_empty())
            })
            .unwrap_or_else(|| crate::local::DEFAULT_IMAGE.to_owned());
        size.image_name(&template).map(Some)
    }
}

/// The checked plan of one create: what RunMicrovm and the payload get.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LaunchPlan {
    /// `maximumDurationInSeconds`.
    pub max_duration_secs: u64,
    pub lifecycle: Option<LifecycleBlock>,
    /// (max idle, suspended, auto resume) in seconds.
    pub idle_policy: Option<(u64, u64, bool)>,
    /// Ports of the proxy token: 8080 first, then the caller's.
    pub token_ports: Vec<u16>,
}

/// `28,800`: en-US digit grouping, so messages can be pinned by tests (the
/// error module's formatter: one for the whole SDK).
pub(crate) use crate::error::group as grouped;

/// Whole seconds, rounding a fraction up (a 0.5 s timeout is 1 s, not 0);
/// saturating, so `Duration::MAX` is refused by the caps instead of panicking.
fn whole_secs(d: Duration) -> u64 {
    d.as_secs().saturating_add(u64::from(d.subsec_nanos() > 0))
}

impl CreateOptions {
    /// The caller's auto-resume choice: the explicit idle policy's flag,
    /// else on.
    fn caller_auto_resume(&self) -> bool {
        match self.idle {
            IdleChoice::Explicit(policy) => policy.auto_resume,
            IdleChoice::Default | IdleChoice::Disabled => true,
        }
    }

    /// Checks everything that can be checked without I/O and computes the
    /// launch plan.
    ///
    /// # Errors
    /// `SandboxLifetime` when the timeout or max lifetime is above 28,800 s;
    /// `InvalidArgument` naming the argument for anything else refused.
    /// The payload's `workdir`: `workdir` checked (an absolute path of at
    /// most 4,096 bytes without control characters; whether it exists is
    /// the agent's answer, at the first process).
    pub(crate) fn workdir(&self) -> Result<Option<&str>, SandboxError> {
        let Some(dir) = self.workdir.as_deref() else {
            return Ok(None);
        };
        if !dir.starts_with('/') || dir.len() > 4_096 || dir.chars().any(char::is_control) {
            return Err(SandboxError::invalid_argument(
                "workdir",
                "a working directory is an absolute path (starting with /) of at most 4,096 bytes without control characters",
            ));
        }
        Ok(Some(dir))
    }

    /// The payload's `limits.cpu_seconds`: `cpu_time_limit` checked (1 to
    /// 28,800 whole seconds, the reference's range).
    pub(crate) fn cpu_seconds(&self) -> Result<Option<u64>, SandboxError> {
        let Some(limit) = self.cpu_time_limit else {
            return Ok(None);
        };
        if limit.subsec_nanos() != 0 || !(1..=MAX_DURATION_SECS).contains(&limit.as_secs()) {
            return Err(SandboxError::invalid_argument(
                "cpu_time_limit",
                "a CPU time limit is 1 to 28,800 whole seconds of CPU time per process",
            ));
        }
        Ok(Some(limit.as_secs()))
    }

    pub(crate) fn plan(&self) -> Result<LaunchPlan, SandboxError> {
        let timeout = whole_secs(self.timeout);
        if timeout > MAX_DURATION_SECS {
            return Err(SandboxError::sandbox_lifetime(
                "timeout",
                Duration::from_secs(timeout),
                Duration::from_secs(MAX_DURATION_SECS),
            ));
        }
        if timeout == 0 {
            return Err(SandboxError::invalid_argument(
                "timeout",
                "sandbox timeout must be at least 1 s; pass a positive timeout",
            ));
        }
        check_map("envs", &self.envs, true)?;
        check_map("metadata", &self.metadata, false)?;
        crate::checks::positive_duration("ready_timeout", self.ready_timeout)?;
        crate::checks::positive_duration("request_timeout", self.request_timeout)?;
        self.check_reconnect_timeout()?;
        self.connectors.check()?;

        let mut token_ports = vec![AGENT_PORT];
        for &port in &self.allowed_ports {
            if port == 0 || port == HOOKS_PORT {
                return Err(SandboxError::invalid_argument(
                    "allowed_ports",
                    format!(
                        "port {port} cannot be opened; pass ports from 1 to 65535 other than 9000 (the hooks port)"
                    ),
                ));
            }
            if !token_ports.contains(&port) {
                token_ports.push(port);
            }
        }

        let managed = self.max_lifetime.is_some() || self.on_timeout.is_some();
        let (max_duration_secs, lifecycle) = if managed {
            let cap = match self.max_lifetime {
                Some(cap) => whole_secs(cap),
                None => timeout
                    .saturating_add(CAP_MARGIN_SECS)
                    .clamp(MIN_CAP_SECS, MAX_DURATION_SECS),
            };
            if cap > MAX_DURATION_SECS {
                return Err(SandboxError::sandbox_lifetime(
                    "max_lifetime",
                    Duration::from_secs(cap),
                    Duration::from_secs(MAX_DURATION_SECS),
                ));
            }
            if cap < MIN_CAP_SECS {
                return Err(SandboxError::invalid_argument(
                    "max_lifetime",
                    format!(
                        "max lifetime of {} s is below the minimum of 120 s; pass a longer max lifetime",
                        grouped(cap)
                    ),
                ));
            }
            if timeout > cap {
                return Err(SandboxError::invalid_argument(
                    "timeout",
                    format!(
                        "sandbox timeout of {} s is above the max lifetime of {} s; pass a smaller timeout or a longer max lifetime",
                        grouped(timeout),
                        grouped(cap)
                    ),
                ));
            }
            let pause = self.on_timeout == Some(OnTimeout::Pause);
            (
                cap,
                Some(LifecycleBlock {
                    timeout_s: timeout,
                    cap_s: cap,
                    pause,
                    // The caller's flag: the rule the agent applies when it
                    // resumes (only meaningful with pause).
                    auto_resume: pause && self.caller_auto_resume(),
                }),
            )
        } else {
            (timeout, None)
        };

        let idle_policy = match self.idle {
            IdleChoice::Disabled => None,
            IdleChoice::Default => {
                // Dropped when the sandbox would end before it could idle.
                (DEFAULT_MAX_IDLE_SECS < max_duration_secs).then(|| {
                    (
                        DEFAULT_MAX_IDLE_SECS,
                        max_duration_secs - DEFAULT_MAX_IDLE_SECS,
                        true,
                    )
                })
            }
            IdleChoice::Explicit(policy) => {
                let max_idle = whole_secs(policy.max_idle);
                if max_idle < MIN_MAX_IDLE_SECS || max_idle >= max_duration_secs {
                    return Err(SandboxError::invalid_argument(
                        "idle_policy",
                        format!(
                            "max idle of {} s must be at least 60 s and below the sandbox duration of {} s; pass another max idle",
                            grouped(max_idle),
                            grouped(max_duration_secs)
                        ),
                    ));
                }
                Some((max_idle, max_duration_secs - max_idle, policy.auto_resume))
            }
        };
        let idle_policy = if self.on_timeout == Some(OnTimeout::Pause) {
            let policy = match (idle_policy, self.idle) {
                (Some(policy), _) => policy,
                // The default idle window does not fit a short sandbox: as
                // the reference does, one is derived from the timeout.
                (None, IdleChoice::Default) => {
                    let max_idle =
                        timeout.clamp(MIN_MAX_IDLE_SECS, max_duration_secs.saturating_sub(1));
                    (max_idle, max_duration_secs - max_idle, true)
                }
                (None, _) => {
                    return Err(SandboxError::invalid_argument(
                        "on_timeout",
                        "pausing at the timeout needs an idle policy; pass an idle policy or kill at the timeout",
                    ));
                }
            };
            // AWS auto-resume is always on in pause mode, so that the next
            // request wakes a sandbox paused at its deadline; the caller's
            // flag travels in the lifecycle block.
            let (max_idle, suspended, _) = policy;
            Some((max_idle, suspended, true))
        } else {
            idle_policy
        };

        Ok(LaunchPlan {
            max_duration_secs,
            lifecycle,
            idle_policy,
            token_ports,
        })
    }
}

/// Env names: non-empty, no `=`, no NUL; values: no NUL. Metadata keys and
/// values: non-empty keys, no control characters. Values never appear in
/// the message.
fn check_map(
    argument: &'static str,
    map: &BTreeMap<String, String>,
    env_rules: bool,
) -> Result<(), SandboxError> {
    let what = if env_rules { "env" } else { "metadata" };
    for (key, value) in map {
        let bad_key = key.is_empty()
            || key.chars().count() > MAX_KEY_CHARS
            || key.chars().any(char::is_control)
            || (env_rules && key.contains('='));
        if bad_key {
            return Err(SandboxError::invalid_argument(
                argument,
                format!(
                    "an {what} name is empty, too long or contains a control character{}; pass names of 1 to 256 printable characters",
                    if env_rules { " or '='" } else { "" }
                ),
            ));
        }
        if value.contains('\0') {
            return Err(SandboxError::invalid_argument(
                argument,
                format!("an {what} value contains a NUL character; pass values without NUL"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_plan_has_no_lifecycle_and_the_default_idle_policy() {
        let plan = CreateOptions::default().plan().unwrap();
        assert_eq!(plan.max_duration_secs, 3_600);
        assert_eq!(plan.lifecycle, None);
        assert_eq!(plan.idle_policy, Some((300, 3_300, true)));
        assert_eq!(plan.token_ports, vec![8080]);
    }

    #[test]
    fn short_sandboxes_drop_the_default_idle_policy() {
        let options = CreateOptions {
            timeout: Duration::from_secs(120),
            ..CreateOptions::default()
        };
        assert_eq!(options.plan().unwrap().idle_policy, None);
    }

    #[test]
    fn managed_lifecycle_uses_the_cap() {
        let options = CreateOptions {
            timeout: Duration::from_secs(30),
            on_timeout: Some(OnTimeout::Kill),
            idle: IdleChoice::Disabled,
            ..CreateOptions::default()
        };
        let plan = options.plan().unwrap();
        assert_eq!(plan.max_duration_secs, 120);
        assert_eq!(
            plan.lifecycle,
            Some(LifecycleBlock {
                timeout_s: 30,
                cap_s: 120,
                pause: false,
                auto_resume: false
            })
        );
    }
}

/// Each lifecycle combination, as RunMicrovm and the run payload carry it
/// (the reference SDK's wire form).
#[cfg(test)]
mod wire_tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use serde_json::{Value, json};

    use super::{CreateOptions, IdleChoice, IdlePolicy, OnTimeout};
    use crate::sandbox::payload::run_payload;

    /// (maximumDurationInSeconds, idlePolicy, the payload's lifecycle block).
    fn wire(options: CreateOptions) -> (u64, Option<(u64, u64, bool)>, Option<Value>) {
        let plan = options.plan().unwrap();
        let payload = run_payload(
            &"ab".repeat(32),
            &BTreeMap::new(),
            &BTreeMap::new(),
            plan.lifecycle,
        );
        let decoded: Value = serde_json::from_str(&payload).unwrap();
        (
            plan.max_duration_secs,
            plan.idle_policy,
            decoded.get("lifecycle").cloned(),
        )
    }

    fn options(timeout: u64, on_timeout: Option<OnTimeout>, idle: IdleChoice) -> CreateOptions {
        CreateOptions {
            timeout: Duration::from_secs(timeout),
            on_timeout,
            idle,
            ..CreateOptions::default()
        }
    }

    #[test]
    fn every_lifecycle_combination_on_the_wire() {
        let explicit = |auto_resume| {
            IdleChoice::Explicit(IdlePolicy::new(Duration::from_secs(600)).auto_resume(auto_resume))
        };
        // No managed lifecycle: no block, the default idle policy.
        assert_eq!(
            wire(options(3_600, None, IdleChoice::Default)),
            (3_600, Some((300, 3_300, true)), None)
        );
        // Kill at the timeout: the caller's idle flag goes to AWS as is.
        assert_eq!(
            wire(options(3_600, Some(OnTimeout::Kill), explicit(false))),
            (
                3_660,
                Some((600, 3_060, false)),
                Some(
                    json!({"auto_resume": false, "cap_s": 3_660, "on_timeout": "kill", "timeout_s": 3_600})
                )
            )
        );
        // Pause with auto-resume off: the caller's flag in the block, AWS
        // auto-resume on.
        assert_eq!(
            wire(options(3_600, Some(OnTimeout::Pause), explicit(false))),
            (
                3_660,
                Some((600, 3_060, true)),
                Some(
                    json!({"auto_resume": false, "cap_s": 3_660, "on_timeout": "pause", "timeout_s": 3_600})
                )
            )
        );
        // Pause with auto-resume on.
        assert_eq!(
            wire(options(3_600, Some(OnTimeout::Pause), explicit(true))),
            (
                3_660,
                Some((600, 3_060, true)),
                Some(
                    json!({"auto_resume": true, "cap_s": 3_660, "on_timeout": "pause", "timeout_s": 3_600})
                )
            )
        );
        // Pause with the default idle policy.
        assert_eq!(
            wire(options(3_600, Some(OnTimeout::Pause), IdleChoice::Default)),
            (
                3_660,
                Some((300, 3_360, true)),
                Some(
                    json!({"auto_resume": true, "cap_s": 3_660, "on_timeout": "pause", "timeout_s": 3_600})
                )
            )
        );
        // Pause, a 60 s timeout and no idle policy given: an idle window
        // derived from the timeout instead of a refusal.
        assert_eq!(
            wire(options(60, Some(OnTimeout::Pause), IdleChoice::Default)),
            (
                120,
                Some((60, 60, true)),
                Some(
                    json!({"auto_resume": true, "cap_s": 120, "on_timeout": "pause", "timeout_s": 60})
                )
            )
        );
        // Pause with the idle policy turned off is still refused.
        let err = options(60, Some(OnTimeout::Pause), IdleChoice::Disabled)
            .plan()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid on_timeout: pausing at the timeout needs an idle policy; pass an idle policy or kill at the timeout"
        );
    }

    #[test]
    fn the_payload_escapes_non_ascii_as_the_reference_does() {
        let metadata = BTreeMap::from([("who".to_owned(), "é😀".to_owned())]);
        let payload = run_payload("00", &BTreeMap::new(), &metadata, None);
        assert_eq!(
            payload,
            "{\"metadata\":{\"who\":\"\\u00e9\\ud83d\\ude00\"},\"token_sha256\":\"00\",\"user\":\"user\",\"v\":1,\"workdir\":\"/home/user\"}"
        );
        assert!(payload.is_ascii());
        let decoded: serde_json::Value = serde_json::from_str(&payload).unwrap();
        assert_eq!(decoded["metadata"]["who"], "é😀");
    }

    #[test]
    fn a_size_picks_the_suffixed_image_and_refuses_an_arn() {
        use crate::size::{Size, SizeRequest};
        let with = |template: Option<&str>, size: Option<SizeRequest>| CreateOptions {
            template: template.map(str::to_owned),
            size,
            ..CreateOptions::default()
        };
        let sized = |template, size| with(template, size).sized_template();
        assert_eq!(sized(Some("py"), None).unwrap().as_deref(), Some("py"));
        assert_eq!(
            sized(Some("py"), Some(Size::Gb4.into()))
                .unwrap()
                .as_deref(),
            Some("py-4gb")
        );
        assert_eq!(
            sized(Some("py"), Some(Size::Baseline.into()))
                .unwrap()
                .as_deref(),
            Some("py")
        );
        assert_eq!(
            sized(Some("py"), Some(SizeRequest::MemoryMib(600)))
                .unwrap()
                .as_deref(),
            Some("py-1gb")
        );
        let arn = "arn:aws:lambda:us-east-1:123456789012:microvm-image:py";
        assert_eq!(sized(Some(arn), None).unwrap().as_deref(), Some(arn));
        let refused = sized(Some(arn), Some(Size::Mb512.into())).unwrap_err();
        assert_eq!(refused.kind(), crate::ErrorKind::InvalidArgument);
        assert!(
            refused.to_string().starts_with("invalid size: "),
            "{refused}"
        );
        let too_big = sized(Some("py"), Some(SizeRequest::MemoryMib(9000))).unwrap_err();
        assert!(
            too_big.to_string().contains("at most 8192 MiB"),
            "{too_big}"
        );
    }
}
