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
