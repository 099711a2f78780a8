//! The AWS edge: the only module of the crate that knows the AWS SDK crates
//! (`aws_sdk_*`, `aws_smithy_*`). One file or folder per service, each
//! behind the cargo feature that needs it, each a port of plain data: the
//! features above call these functions and types, never an AWS client, and
//! every AWS failure is turned here into plain facts ([`AwsFailure`],
//! mapped by `crate::error::map`) or an already mapped [`SandboxError`].
//!
//! | service | file | feature |
//! |---|---|---|
//! | Lambda MicroVMs | [`microvms`] (images: [`microvms::images`]) | always (images: `templates`) |
//! | S3 | [`s3`] | `templates` (artifacts), `s3` (checkpoints, transfers) |
//! | DynamoDB | [`dynamodb`] | `dynamodb` |
//! | Secrets Manager | [`secretsmanager`] | `secrets` |
//! | CloudWatch Logs | [`cloudwatch_logs`] | `templates` (build logs), `logs` |
//! | STS | [`sts`] | `templates` |
//! | CloudFormation | [`cloudformation`] | `setup`, `efs` |
//! | EFS | [`efs`] | `efs` |
//! | EC2 (four reads, Query protocol of our own) | [`ec2`] | `efs` |
//! | IAM (GetRole and SimulatePrincipalPolicy, the same Query protocol) | [`iam_simulator`] | `permissions` |
//! | the local emulator's own APIs (SigV4-signed JSON) | [`signed_http`] | `events` |
//!
//! `iam` (compiled for the tests and feature `permissions`, whose
//! simulation reads it) lists the IAM action of every call made here, per feature; a
//! test checks that list against the calls in these files and against the
//! policies of docs/aws.md and `rayito setup`.
//!
//! [`AwsFailure`]: crate::error::map::aws::AwsFailure
//! [`SandboxError`]: crate::error::SandboxError

#[cfg(any(feature = "setup", feature = "efs"))]
pub(crate) mod cloudformation;
#[cfg(any(feature = "templates", feature = "logs"))]
pub(crate) mod cloudwatch_logs;
pub(crate) mod config;
#[cfg(feature = "cost")]
pub(crate) mod costexplorer;
#[cfg(feature = "dynamodb")]
pub(crate) mod dynamodb;
#[cfg(feature = "efs")]
pub(crate) mod ec2;
#[cfg(feature = "efs")]
pub(crate) mod efs;
pub(crate) mod failure;
#[cfg(any(test, feature = "permissions"))]
pub(crate) mod iam;
#[cfg(feature = "permissions")]
pub(crate) mod iam_simulator;
#[cfg(any(feature = "quotas", feature = "cost"))]
pub(crate) mod json_rpc;
pub(crate) mod microvms;
#[cfg(any(feature = "templates", feature = "s3"))]
pub(crate) mod s3;
#[cfg(feature = "secrets")]
pub(crate) mod secretsmanager;
#[cfg(feature = "quotas")]
pub(crate) mod servicequotas;
#[cfg(feature = "events")]
pub(crate) mod signed_http;
#[cfg(any(feature = "efs", feature = "quotas", feature = "permissions"))]
pub(crate) mod signed_post;
#[cfg(feature = "templates")]
pub(crate) mod sts;
pub(crate) mod time;
#[cfg(any(feature = "efs", feature = "permissions"))]
pub(crate) mod xml;
