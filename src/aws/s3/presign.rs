//! Presigned S3 requests for the agent's side of staged transfers
//! (feature `s3`): PUT, GET, UploadPart and DELETE presigned by
//! `aws-sdk-s3`, and a browser-style POST form whose policy is signed here
//! with `aws-sigv4`'s key derivation (`aws-sdk-s3` cannot presign a POST).
//! Which object and for how long is decided above ([`crate::transfer`]).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use aws_sdk_s3 as s3;
use base64::Engine as _;
use s3::config::ProvideCredentials as _;
use s3::presigning::{PresignedRequest, PresigningConfig};

use super::objects::Objects;
use crate::quiet::Quiet as _;

/// A presigned request: its URL and the headers to send with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Presigned {
    pub url: String,
    pub headers: Vec<(String, String)>,
}

/// Why a request could not be presigned (the AWS SDK's text is never
/// kept: it may hold the key).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PresignError {
    /// The configuration has no credentials provider.
    NoCredentials,
    /// The credentials could not be loaded.
    CredentialsFailed,
    /// The request could not be presigned.
    Failed,
}

/// Which request of an object to presign.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Request<'a> {
    /// A GET, as an attachment named `attachment` when given.
    Get { attachment: Option<&'a str> },
    /// A PUT.
    Put,
    /// UploadPart `number` of the multipart upload `upload_id`.
    UploadPart { upload_id: &'a str, number: i32 },
    /// A DELETE.
    Delete,
}

/// The presigner of one bucket, over the client of [`Objects`].
#[derive(Clone, Debug)]
pub(crate) struct Presigner {
    objects: Objects,
    config: aws_types::SdkConfig,
    /// The emulator's endpoint (path style), or `None` for AWS.
    endpoint: Option<String>,
    bucket: String,
    region: String,
}

impl Presigner {
    /// The presigner of `bucket` in `region` over `config`; `endpoint`
    /// overrides S3's (path style).
    pub(crate) fn new(
        config: aws_types::SdkConfig,
        region: String,
        endpoint: Option<String>,
        bucket: String,
    ) -> Self {
        Self {
            objects: Objects::new(&config, Some(&region), endpoint.as_deref()),
            config,
            endpoint,
            bucket,
            region,
        }
    }

    /// The S3 client of the same configuration (the SDK's own calls).
    pub(crate) fn objects(&self) -> &Objects {
        &self.objects
    }

    /// The request `request` of `key`, valid for `lifetime`.
    ///
    /// # Errors
    /// [`PresignError::Failed`].
    pub(crate) async fn presign(
        &self,
        key: &str,
        request: Request<'_>,
        lifetime: Duration,
    ) -> Result<Presigned, PresignError> {
        let config = presigning(lifetime)?;
        let client = self.objects.sdk();
        let bucket = &self.bucket;
        match request {
            Request::Get { attachment } => {
                let mut op = client.get_object().bucket(bucket).key(key);
                if let Some(name) = attachment {
                    op =
                        op.response_content_disposition(format!("attachment; filename=\"{name}\""));
                }
                signed(op.presigned(config)).await
            }
            Request::Put => {
                signed(
                    client
                        .put_object()
                        .bucket(bucket)
                        .key(key)
                        .presigned(config),
                )
                .await
            }
            Request::UploadPart { upload_id, number } => {
                let op = client.upload_part().bucket(bucket).key(key);
                signed(
                    op.upload_id(upload_id)
                        .part_number(number)
                        .presigned(config),
                )
                .await
            }
            Request::Delete => {
                signed(
                    client
                        .delete_object()
                        .bucket(bucket)
                        .key(key)
                        .presigned(config),
                )
                .await
            }
        }
    }

    /// A browser-style POST form for `key`: the URL and the form fields
    /// (the file goes last, as field `file`), with a policy limiting the
    /// size to `[0, max_bytes]`, valid for `lifetime`.
    ///
    /// # Errors
    /// [`PresignError::NoCredentials`], [`PresignError::CredentialsFailed`].
    pub(crate) async fn post(
        &self,
        key: &str,
        lifetime: Duration,
        max_bytes: u64,
    ) -> Result<(String, BTreeMap<String, String>), PresignError> {
        let provider = self
            .config
            .credentials_provider()
            .ok_or(PresignError::NoCredentials)?;
        let creds = provider
            .provide_credentials()
            .quiet()
            .await
            .map_err(|_| PresignError::CredentialsFailed)?;
        let now = SystemTime::now();
        let (date, stamp) = amz_dates(now);
        let credential = format!(
            "{}/{date}/{}/s3/aws4_request",
            creds.access_key_id(),
            self.region
        );
        let expiration = iso8601(now + lifetime);
        let mut conditions = vec![
            serde_json::json!({ "bucket": self.bucket }),
            serde_json::json!({ "key": key }),
            serde_json::json!(["content-length-range", 0, max_bytes]),
            serde_json::json!({ "x-amz-algorithm": "AWS4-HMAC-SHA256" }),
            serde_json::json!({ "x-amz-credential": credential }),
            serde_json::json!({ "x-amz-date": stamp }),
        ];
        if let Some(token) = creds.session_token() {
            conditions.push(serde_json::json!({ "x-amz-security-token": token }));
        }
        let policy = serde_json::json!({ "expiration": expiration, "conditions": conditions });
        let policy = base64::engine::general_purpose::STANDARD.encode(policy.to_string());
        let signing_key = aws_sigv4::sign::v4::generate_signing_key(
            creds.secret_access_key(),
            now,
            &self.region,
            "s3",
        );
        let signature = aws_sigv4::sign::v4::calculate_signature(signing_key, policy.as_bytes());
        let mut fields = BTreeMap::new();
        fields.insert("key".to_owned(), key.to_owned());
        fields.insert("policy".to_owned(), policy);
        fields.insert("x-amz-algorithm".to_owned(), "AWS4-HMAC-SHA256".to_owned());
        fields.insert("x-amz-credential".to_owned(), credential);
        fields.insert("x-amz-date".to_owned(), stamp);
        fields.insert("x-amz-signature".to_owned(), signature);
        if let Some(token) = creds.session_token() {
            fields.insert("x-amz-security-token".to_owned(), token.to_owned());
        }
        let url = match &self.endpoint {
            Some(endpoint) => format!("{}/{}", endpoint.trim_end_matches('/'), self.bucket),
            None => format!("https://{}.s3.{}.amazonaws.com/", self.bucket, self.region),
        };
        Ok((url, fields))
    }
}

/// The presigned request `request` makes, as plain data.
async fn signed<E>(
    request: impl std::future::Future<Output = Result<PresignedRequest, E>>,
) -> Result<Presigned, PresignError> {
    request
        .quiet()
        .await
        .map(|req| presigned(&req))
        .map_err(|_| PresignError::Failed)
}

fn presigning(lifetime: Duration) -> Result<PresigningConfig, PresignError> {
    PresigningConfig::expires_in(lifetime).map_err(|_| PresignError::Failed)
}

fn presigned(req: &PresignedRequest) -> Presigned {
    Presigned {
        url: req.uri().to_owned(),
        headers: req
            .headers()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
    }
}

fn parts(t: SystemTime) -> (i64, u32, u32, u64) {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let (y, m, d) = crate::aws::time::civil(days);
    (y, m, d, secs % 86_400)
}

/// `YYYYMMDD` and `YYYYMMDDTHHMMSSZ`.
fn amz_dates(t: SystemTime) -> (String, String) {
    let (y, m, d, s) = parts(t);
    let date = format!("{y:04}{m:02}{d:02}");
    let stamp = format!("{date}T{:02}{:02}{:02}Z", s / 3600, s / 60 % 60, s % 60);
    (date, stamp)
}

/// `YYYY-MM-DDTHH:MM:SSZ`.
fn iso8601(t: SystemTime) -> String {
    let (y, m, d, s) = parts(t);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_amz_and_iso() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_764_624_645); // 2025-12-01T21:30:45Z
        assert_eq!(amz_dates(t), ("20251201".into(), "20251201T213045Z".into()));
        assert_eq!(iso8601(t), "2025-12-01T21:30:45Z");
        assert_eq!(iso8601(SystemTime::UNIX_EPOCH), "1970-01-01T00:00:00Z");
    }
}
