//! Commands that need AWS, asked for with `--local` (or
//! `RAYITO_BACKEND=local`): refused with one sentence that says so, before
//! any call (the SDK's own answer would be "no AWS credentials ... choose
//! the local backend", or an unknown operation of the emulator).

use crate::commands::Backend;
use crate::{Global, output};

/// A command that needs an AWS service the local backend lacks.
pub(crate) struct AwsOnly {
    /// The command, as typed after `rayito` (`secret`, `setup`).
    pub command: &'static str,
    /// Why it needs AWS.
    pub why: &'static str,
    /// The AWS SDK's endpoint variable of the service, when pointing it at
    /// an endpoint (moto, LocalStack) makes the command work beside the
    /// local backend; `None` when nothing does.
    pub endpoint_env: Option<&'static str>,
}

/// `secret ...`.
pub(crate) const SECRET: AwsOnly = AwsOnly {
    command: "secret",
    why: "secrets live in AWS Secrets Manager, which the local backend does not have",
    endpoint_env: Some("AWS_ENDPOINT_URL_SECRETS_MANAGER"),
};

/// `volume ...`.
pub(crate) const VOLUME: AwsOnly = AwsOnly {
    command: "volume",
    why: "volumes are access points of an Amazon EFS file system",
    endpoint_env: Some("AWS_ENDPOINT_URL_EFS"),
};

/// `volumes ...`.
pub(crate) const VOLUMES: AwsOnly = AwsOnly {
    command: "volumes",
    why: "the efs-volumes stack lives in CloudFormation, EFS and EC2",
    endpoint_env: None,
};

/// `stack ...`.
pub(crate) const STACK: AwsOnly = AwsOnly {
    command: "stack",
    why: "the optional stacks live in CloudFormation, which the local backend does not have",
    endpoint_env: Some("AWS_ENDPOINT_URL_CLOUDFORMATION"),
};

/// `setup`.
pub(crate) const SETUP: AwsOnly = AwsOnly {
    command: "setup",
    why: "it deploys CloudFormation stacks in an AWS account, and the local backend needs no setup",
    endpoint_env: Some("AWS_ENDPOINT_URL_CLOUDFORMATION"),
};

/// `mounts policy ...`.
pub(crate) const MOUNTS_POLICY: AwsOnly = AwsOnly {
    command: "mounts policy",
    why: "it deploys a CloudFormation stack with an IAM policy, and the local backend has neither (its S3 mounts need no policy)",
    endpoint_env: Some("AWS_ENDPOINT_URL_CLOUDFORMATION"),
};

/// `doctor`.
pub(crate) const DOCTOR: AwsOnly = AwsOnly {
    command: "doctor",
    why: "it checks what an AWS account lacks (`rayito local status` says whether the local daemon runs)",
    endpoint_env: None,
};

impl AwsOnly {
    /// The refusal, printed, and its exit code; `None` when the command
    /// may run: not on the local backend, or its service has an endpoint.
    pub(crate) fn refuse(&self, global: &Global) -> Option<i32> {
        if !Backend::is_local(global) {
            return None;
        }
        let pointed = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty());
        if let Some(name) = self.endpoint_env
            && (pointed(name) || pointed("AWS_ENDPOINT_URL"))
        {
            return None;
        }
        Some(output::cli_error(global.output, &self.message()))
    }

    fn message(&self) -> String {
        let mut message = format!(
            "`rayito {}` needs AWS: {}; run it without --local (and without RAYITO_BACKEND=local)",
            self.command, self.why
        );
        if let Some(name) = self.endpoint_env {
            message.push_str(&format!(", or set {name} to an endpoint of that service"));
        }
        message
    }
}
