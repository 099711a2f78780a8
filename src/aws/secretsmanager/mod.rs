//! AWS Secrets Manager (feature `secrets`): the client of the secret store
//! and the secret cache ([`crate::secrets`]), and the seven calls they
//! make, as plain data. What a name, a version or a failure means is
//! decided above; every failure leaves here as [`AwsFailure`] facts.

#[cfg(test)]
pub(crate) mod mock;

use std::collections::HashMap;
use std::time::SystemTime;

use aws_sdk_secretsmanager as sm;
use sm::config::retry::RetryConfig;
use sm::types::{Filter, FilterNameStringType};

use crate::aws::failure::extract;
use crate::error::SandboxError;
use crate::error::map::aws::AwsFailure;
use crate::quiet::Quiet as _;
use crate::secret::Secret;

/// Attempts of each Secrets Manager call: the AWS SDK's standard retry mode
/// (throttling and transient faults, with backoff). Nothing else retries
/// these calls, so attempts never multiply.
const CALL_ATTEMPTS: u32 = 3;

/// The Secrets Manager client (cheap to clone).
#[derive(Clone, Debug)]
pub(crate) struct SecretsManager {
    client: sm::Client,
}

/// A client, the region it signs for and the identity of its credentials.
#[derive(Clone, Debug)]
pub(crate) struct Connected {
    pub client: SecretsManager,
    /// The client's region (empty when none).
    pub region: String,
    /// SHA-256 of the access key id (never the id itself); zeros when none
    /// resolve (the calls then fail on their own).
    pub identity: [u8; 32],
}

impl Connected {
    /// `client` with no known identity (the crate's mock tests).
    #[cfg(test)]
    pub(crate) fn anonymous(manager: SecretsManager) -> Self {
        Self {
            region: manager.region(),
            client: manager,
            identity: [0; 32],
        }
    }
}

/// Makes the client: from `sdk_config` (the `region` and `endpoint_url`
/// overrides applied), else from the environment's chain (which checks
/// that a region and credentials exist).
///
/// # Errors
/// `Authentication` when the chain finds no region or no credentials;
/// `InvalidArgument` for a bad region or endpoint.
pub(crate) async fn connect(
    region: Option<&str>,
    sdk_config: Option<&aws_types::SdkConfig>,
    endpoint_url: Option<&str>,
) -> Result<Connected, SandboxError> {
    let sdk_config = match sdk_config {
        Some(config) => config.clone(),
        None => {
            let settings = crate::aws::config::AwsSettings {
                region: region.map(str::to_owned),
                endpoint_url: endpoint_url.map(str::to_owned),
                ..Default::default()
            };
            crate::aws::config::load(&settings).await?.0
        }
    };
    let mut builder = sm::config::Builder::from(&sdk_config)
        .retry_config(RetryConfig::standard().with_max_attempts(CALL_ATTEMPTS));
    if let Some(region) = region {
        builder = builder.region(sm::config::Region::new(region.to_owned()));
    }
    if let Some(url) = endpoint_url {
        builder = builder.endpoint_url(url.to_owned());
    }
    let manager = SecretsManager {
        client: sm::Client::from_conf(builder.build()),
    };
    Ok(Connected {
        region: manager.region(),
        client: manager,
        identity: identity(sdk_config.credentials_provider()).await,
    })
}

/// Resolved once, when the client is made: a provider chain may call STS
/// or SSO to answer, and a cache hit must make no call at all.
async fn identity(provider: Option<aws_types::sdk_config::SharedCredentialsProvider>) -> [u8; 32] {
    use sha2::Digest as _;
    use sm::config::ProvideCredentials as _;
    let Some(provider) = provider else {
        return [0; 32];
    };
    match provider.provide_credentials().quiet().await {
        Ok(credentials) => sha2::Sha256::digest(credentials.access_key_id().as_bytes()).into(),
        Err(_) => [0; 32],
    }
}

/// Which version GetSecretValue reads.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Version<'a> {
    /// `VersionId`.
    Id(&'a str),
    /// `VersionStage`.
    Stage(&'a str),
}

/// A secret as DescribeSecret or a ListSecrets entry shows it.
#[derive(Clone, Default)]
pub(crate) struct Described {
    pub arn: Option<String>,
    pub name: Option<String>,
    pub description: Option<String>,
    pub created: Option<SystemTime>,
    pub last_changed: Option<SystemTime>,
    /// Whether it is scheduled for deletion.
    pub deleted: bool,
    /// Version id to staging labels.
    pub versions: Option<HashMap<String, Vec<String>>>,
}

// Names and descriptions are confidential: lengths only.
crate::secret::redacted_debug! {
    non_exhaustive Described |o| name_len = o.name.as_ref().map(String::len), deleted
}

/// One ListSecrets page.
#[derive(Clone, Debug, Default)]
pub(crate) struct Listed {
    pub secrets: Vec<Described>,
    pub next_token: Option<String>,
}

fn time(date: Option<&sm::primitives::DateTime>) -> Option<SystemTime> {
    date.and_then(|date| SystemTime::try_from(*date).ok())
}

impl SecretsManager {
    /// A client built elsewhere (the crate's mock tests).
    #[cfg(test)]
    pub(crate) fn from_sdk(client: sm::Client) -> Self {
        Self { client }
    }

    fn region(&self) -> String {
        self.client
            .config()
            .region()
            .map(ToString::to_string)
            .unwrap_or_default()
    }

    /// GetSecretValue: the string value, `None` when the secret holds
    /// binary data.
    ///
    /// # Errors
    /// Any failure.
    pub(crate) async fn get_secret_value(
        &self,
        secret_id: &str,
        version: Version<'_>,
    ) -> Result<Option<Secret>, AwsFailure> {
        let request = self.client.get_secret_value().secret_id(secret_id);
        let request = match version {
            Version::Id(id) => request.version_id(id),
            Version::Stage(stage) => request.version_stage(stage),
        };
        match request.send().quiet().await {
            Ok(out) => Ok(out.secret_string.map(Secret::new)),
            Err(err) => Err(extract("GetSecretValue", &err)),
        }
    }

    /// GetSecretValue as bytes: the string value's UTF-8 bytes, else the
    /// binary value's; `None` when the secret holds neither (the events
    /// stack's key, which a stack may write either way).
    ///
    /// # Errors
    /// Any failure.
    #[cfg_attr(not(feature = "events"), allow(dead_code))] // the stack key
    pub(crate) async fn get_secret_bytes(
        &self,
        secret_id: &str,
        version: Version<'_>,
    ) -> Result<Option<Vec<u8>>, AwsFailure> {
        let request = self.client.get_secret_value().secret_id(secret_id);
        let request = match version {
            Version::Id(id) => request.version_id(id),
            Version::Stage(stage) => request.version_stage(stage),
        };
        match request.send().quiet().await {
            Ok(out) => Ok(match (out.secret_string, out.secret_binary) {
                (Some(text), _) => Some(text.into_bytes()),
                (None, Some(blob)) => Some(blob.into_inner()),
                (None, None) => None,
            }),
            Err(err) => Err(extract("GetSecretValue", &err)),
        }
    }

    /// CreateSecret `name` with `value`, idempotent by `token`; its ARN.
    ///
    /// # Errors
    /// Any failure.
    pub(crate) async fn create_secret(
        &self,
        name: &str,
        value: &Secret,
        token: &str,
        description: &str,
        kms_key_id: Option<&str>,
    ) -> Result<Option<String>, AwsFailure> {
        let mut request = self
            .client
            .create_secret()
            .name(name)
            .secret_string(value.expose())
            .client_request_token(token)
            .description(description);
        if let Some(key) = kms_key_id {
            request = request.kms_key_id(key);
        }
        match request.send().quiet().await {
            Ok(out) => Ok(out.arn),
            Err(err) => Err(extract("CreateSecret", &err)),
        }
    }

    /// PutSecretValue: a new version `token` of `secret_id`'s value.
    ///
    /// # Errors
    /// Any failure.
    pub(crate) async fn put_secret_value(
        &self,
        secret_id: &str,
        value: &Secret,
        token: String,
    ) -> Result<(), AwsFailure> {
        self.client
            .put_secret_value()
            .secret_id(secret_id)
            .secret_string(value.expose())
            .client_request_token(token)
            .send()
            .quiet()
            .await
            .map(|_| ())
            .map_err(|err| extract("PutSecretValue", &err))
    }

    /// UpdateSecret: `secret_id`'s description.
    ///
    /// # Errors
    /// Any failure.
    pub(crate) async fn update_description(
        &self,
        secret_id: &str,
        description: String,
    ) -> Result<(), AwsFailure> {
        self.client
            .update_secret()
            .secret_id(secret_id)
            .description(description)
            .send()
            .quiet()
            .await
            .map(|_| ())
            .map_err(|err| extract("UpdateSecret", &err))
    }

    /// DescribeSecret.
    ///
    /// # Errors
    /// Any failure.
    pub(crate) async fn describe_secret(&self, secret_id: &str) -> Result<Described, AwsFailure> {
        let out = self
            .client
            .describe_secret()
            .secret_id(secret_id)
            .send()
            .quiet()
            .await
            .map_err(|err| extract("DescribeSecret", &err))?;
        Ok(Described {
            arn: out.arn().map(str::to_owned),
            name: out.name().map(str::to_owned),
            description: out.description().map(str::to_owned),
            created: time(out.created_date()),
            last_changed: time(out.last_changed_date()),
            deleted: out.deleted_date().is_some(),
            versions: out.version_ids_to_stages,
        })
    }

    /// One ListSecrets page of at most `max_results`, secrets scheduled
    /// for deletion left out, with the name filter `name_filter`.
    ///
    /// # Errors
    /// Any failure.
    pub(crate) async fn list_secrets(
        &self,
        max_results: i32,
        next_token: Option<&str>,
        name_filter: Option<&str>,
    ) -> Result<Listed, AwsFailure> {
        let mut request = self
            .client
            .list_secrets()
            .include_planned_deletion(false)
            .max_results(max_results)
            .set_next_token(next_token.map(str::to_owned));
        if let Some(filter) = name_filter {
            request = request.filters(
                Filter::builder()
                    .key(FilterNameStringType::Name)
                    .values(filter)
                    .build(),
            );
        }
        let out = request
            .send()
            .quiet()
            .await
            .map_err(|err| extract("ListSecrets", &err))?;
        let secrets = out
            .secret_list
            .unwrap_or_default()
            .into_iter()
            .map(|entry| Described {
                created: time(entry.created_date()),
                last_changed: time(entry.last_changed_date()),
                deleted: entry.deleted_date().is_some(),
                arn: entry.arn,
                name: entry.name,
                description: entry.description,
                versions: entry.secret_versions_to_stages,
            })
            .collect();
        Ok(Listed {
            secrets,
            next_token: out.next_token,
        })
    }

    /// DeleteSecret `secret_id` at once, without a recovery window.
    ///
    /// # Errors
    /// Any failure.
    pub(crate) async fn delete_now(&self, secret_id: &str) -> Result<(), AwsFailure> {
        self.client
            .delete_secret()
            .secret_id(secret_id)
            .force_delete_without_recovery(true)
            .send()
            .quiet()
            .await
            .map(|_| ())
            .map_err(|err| extract("DeleteSecret", &err))
    }
}
