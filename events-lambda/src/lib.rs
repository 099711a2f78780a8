//! The Lambda functions of the optional stacks, as library functions
//! tested here against moto and the emulator; the Lambda runtime glue
//! (feature `runtime`) only decodes each invocation and calls them.
//!
//! The events-webhooks stack's three functions (extras §4.3), as library
//! functions over `rayito-events` (the signed line, admission, the webhook
//! body and headers) and the AWS SDK, so that they are tested here against
//! moto and a real HTTP receiver; the Lambda runtime glue (feature
//! `runtime`) only decodes each invocation and calls them.
//!
//! - [`forwarder`]: a CloudWatch Logs subscription's lines, checked,
//!   admitted (the `STATE#` row, conditionally) and stored (`EVENT#`).
//! - [`deliverer`]: each new `EVENT#` row, delivered once per subscribed
//!   webhook (the `DELIVERY#` claim), signed, with retries.
//! - [`reconciler`]: open sandboxes that `ListMicrovms` no longer lists get
//!   a synthetic `killed{unknown}`.
//!
//! The quota-alerts stack's one function (extras §6, §7):
//!
//! - [`quota_alerts`]: the memory allocated to MicroVMs against the
//!   region's quota, as a metric, and an SNS alert when its level rises
//!   (over [`signed`] calls: Service Quotas, SNS, CloudWatch).

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod deliverer;
pub mod forwarder;
pub mod post;
pub mod quota_alerts;
pub mod reconciler;
#[cfg(feature = "runtime")]
pub mod runtime;
pub mod secrets;
pub mod signed;
pub mod table;

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use aws_sdk_dynamodb::error::ProvideErrorMetadata;

/// A failure of one of the functions' AWS calls: the operation and the
/// service's error code, never a secret or a row's contents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The AWS operation (`PutItem`, `GetSecretValue`, ...) or step.
    pub operation: &'static str,
    /// The service's error code, or what failed.
    pub code: String,
}

impl Failure {
    /// A failed AWS call, by its error code.
    pub fn aws<E: ProvideErrorMetadata>(operation: &'static str, e: &E) -> Self {
        Self {
            operation,
            code: e.code().unwrap_or("transport").to_owned(),
        }
    }

    /// A failure that is not an AWS error code.
    pub fn other(operation: &'static str, code: impl Into<String>) -> Self {
        Self {
            operation,
            code: code.into(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} failed: {}", self.operation, self.code)
    }
}

impl std::error::Error for Failure {}

/// Now, in milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Now, in seconds since the Unix epoch.
pub fn now_s() -> u64 {
    now_ms() / 1000
}
