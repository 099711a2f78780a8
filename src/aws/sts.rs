//! The caller's account (feature `templates`), from STS once per client:
//! an image name resolves to `arn:<partition>:lambda:<region>:<account>:
//! microvm-image:<name>`, and S3 calls name the expected bucket owner.

use crate::quiet::Quiet as _;
use aws_sdk_sts as sts;
use tokio::sync::OnceCell;

use crate::aws::failure::map_sdk_error;
use crate::error::SandboxError;

/// The caller's identity, asked once.
#[derive(Debug)]
pub(crate) struct Identity {
    client: sts::Client,
    found: OnceCell<(String, String)>,
}

impl Identity {
    /// The identity over `config`.
    pub(crate) fn new(config: &aws_types::SdkConfig) -> Self {
        Self {
            client: sts::Client::new(config),
            found: OnceCell::new(),
        }
    }

    /// The caller's account id and partition (`aws`, `aws-cn`, ...).
    ///
    /// # Errors
    /// STS failed (mapped).
    pub(crate) async fn account(&self) -> Result<&(String, String), SandboxError> {
        self.found
            .get_or_try_init(|| async {
                let out = self
                    .client
                    .get_caller_identity()
                    .send()
                    .quiet()
                    .await
                    .map_err(|e| map_sdk_error("GetCallerIdentity", &e))?;
                let account = out.account.unwrap_or_default();
                let partition = out
                    .arn
                    .as_deref()
                    .and_then(|arn| arn.split(':').nth(1))
                    .filter(|p| !p.is_empty())
                    .unwrap_or("aws")
                    .to_owned();
                if account.len() != 12 || !account.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(SandboxError::internal(
                        "template",
                        "STS answered no account id",
                    ));
                }
                Ok((account, partition))
            })
            .await
    }
}

/// The caller as STS sees it (feature `permissions`).
#[cfg(feature = "permissions")]
#[derive(Clone, Debug)]
pub(crate) struct Caller {
    pub account: String,
    pub arn: String,
}

#[cfg(feature = "permissions")]
impl Caller {
    /// The partition of the caller's ARN (`aws` when it names none).
    pub(crate) fn partition(&self) -> String {
        self.arn
            .split(':')
            .nth(1)
            .filter(|p| !p.is_empty())
            .unwrap_or("aws")
            .to_owned()
    }
}

/// The caller's account and ARN: one GetCallerIdentity.
///
/// # Errors
/// STS failed (mapped), or answered no ARN or account.
#[cfg(feature = "permissions")]
pub(crate) async fn caller(config: &aws_types::SdkConfig) -> Result<Caller, SandboxError> {
    let client = sts::Client::new(config);
    let out = client
        .get_caller_identity()
        .send()
        .quiet()
        .await
        .map_err(|e| map_sdk_error("GetCallerIdentity", &e))?;
    match (out.account, out.arn) {
        (Some(account), Some(arn)) if !account.is_empty() && arn.starts_with("arn:") => {
            Ok(Caller { account, arn })
        }
        _ => Err(SandboxError::internal(
            "permissions",
            "STS answered no account or ARN",
        )),
    }
}
