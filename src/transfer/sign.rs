//! Signing the URLs of a transfer with the caller's credentials: PUT, GET
//! and DELETE presigned by `aws-sdk-s3`, and the POST form's policy signed
//! here with `aws-sigv4`'s key derivation (`aws-sdk-s3` cannot presign a
//! POST). On the local backend the URLs name the emulator's S3 endpoint
//! (path style) and carry the emulator's key.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use aws_sdk_s3 as s3;
use aws_sdk_s3::config::ProvideCredentials as _;
use aws_sdk_s3::presigning::PresigningConfig;
use base64::Engine as _;

use super::staging::S3Staging;
use crate::error::SandboxError;
use crate::pb;
use crate::quiet::Quiet as _;
use crate::sandbox::Sandbox;

/// The S3 side of one sandbox's transfers.
#[derive(Clone)]
pub(crate) struct Signer {
    client: s3::Client,
    config: aws_types::SdkConfig,
    /// The emulator's endpoint (path style), or `None` for AWS.
    endpoint: Option<String>,
    pub(crate) bucket: String,
    pub(crate) region: String,
}

fn not_configured(feature: &str) -> SandboxError {
    SandboxError::unimplemented(
        feature,
        "S3-staged transfers need an AWS configuration (or the local backend)",
        Some("docs/transfers.md"),
    )
}

/// A presign failure: the SDK's text is never kept (it may hold the key).
fn presign_failed(feature: &str) -> SandboxError {
    SandboxError::internal(feature, "a URL could not be presigned")
}

impl Signer {
    /// The signer of `sandbox`'s transfers into `staging`.
    pub(crate) fn new(
        sandbox: &Sandbox,
        staging: &S3Staging,
        feature: &str,
    ) -> Result<Self, SandboxError> {
        let backend = sandbox.client().backend();
        let config = backend
            .sdk_config
            .clone()
            .ok_or_else(|| not_configured(feature))?;
        let region = staging
            .region
            .clone()
            .or_else(|| backend.region.clone())
            .ok_or_else(|| not_configured(feature))?;
        let mut builder =
            s3::config::Builder::from(&config).region(s3::config::Region::new(region.clone()));
        // An endpoint override (the local backend's S3, or the options')
        // is path style; the agent accepts it only where it was told to.
        let endpoint = backend.s3_endpoint_url.clone();
        if let Some(url) = &endpoint {
            builder = builder.endpoint_url(url).force_path_style(true);
        }
        Ok(Self {
            client: s3::Client::from_conf(builder.build()),
            config,
            endpoint,
            bucket: staging.bucket.clone(),
            region,
        })
    }

    /// The S3 client (the SDK's own uploads and downloads).
    pub(crate) fn client(&self) -> &s3::Client {
        &self.client
    }

    /// The object the agent is told about.
    pub(crate) fn object(&self, key: &str) -> pb::S3Object {
        pb::S3Object {
            bucket: self.bucket.clone(),
            key: key.to_owned(),
            region: self.region.clone(),
        }
    }

    pub(crate) async fn get(
        &self,
        key: &str,
        lifetime: Duration,
        attachment: Option<&str>,
        feature: &str,
    ) -> Result<pb::PresignedRequest, SandboxError> {
        let mut op = self.client.get_object().bucket(&self.bucket).key(key);
        if let Some(name) = attachment {
            op = op.response_content_disposition(format!("attachment; filename=\"{name}\""));
        }
        let req = op
            .presigned(presigning(lifetime, feature)?)
            .quiet()
            .await
            .map_err(|_| presign_failed(feature))?;
        Ok(presigned(&req))
    }

    pub(crate) async fn put(
        &self,
        key: &str,
        lifetime: Duration,
        feature: &str,
    ) -> Result<pb::PresignedRequest, SandboxError> {
        let req = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .presigned(presigning(lifetime, feature)?)
            .quiet()
            .await
            .map_err(|_| presign_failed(feature))?;
        Ok(presigned(&req))
    }

    /// One part of a multipart upload, for a multipart export.
    pub(crate) async fn upload_part(
        &self,
        key: &str,
        upload_id: &str,
        number: i32,
        lifetime: Duration,
        feature: &str,
    ) -> Result<pb::PresignedRequest, SandboxError> {
        let req = self
            .client
            .upload_part()
            .bucket(&self.bucket)
            .key(key)
            .upload_id(upload_id)
            .part_number(number)
            .presigned(presigning(lifetime, feature)?)
            .quiet()
            .await
            .map_err(|_| presign_failed(feature))?;
        Ok(presigned(&req))
    }

    pub(crate) async fn delete(
        &self,
        key: &str,
        lifetime: Duration,
        feature: &str,
    ) -> Result<pb::PresignedRequest, SandboxError> {
        let req = self
            .client
            .delete_object()
            .bucket(&self.bucket)
            .key(key)
            .presigned(presigning(lifetime, feature)?)
            .quiet()
            .await
            .map_err(|_| presign_failed(feature))?;
        Ok(presigned(&req))
    }

    /// A browser-style POST form for `key`: the URL and the form fields
    /// (the file goes last, as field `file`), with a policy limiting the
    /// size to `[0, max_bytes]`, valid for `lifetime`.
    pub(crate) async fn post(
        &self,
        key: &str,
        lifetime: Duration,
        max_bytes: u64,
        feature: &str,
    ) -> Result<(String, BTreeMap<String, String>), SandboxError> {
        let provider = self
            .config
            .credentials_provider()
            .ok_or_else(|| not_configured(feature))?;
        let creds = provider.provide_credentials().quiet().await.map_err(|_| {
            SandboxError::internal(feature, "the AWS credentials could not be loaded")
        })?;
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

fn presigning(lifetime: Duration, feature: &str) -> Result<PresigningConfig, SandboxError> {
    PresigningConfig::expires_in(lifetime).map_err(|_| presign_failed(feature))
}

fn presigned(req: &s3::presigning::PresignedRequest) -> pb::PresignedRequest {
    pb::PresignedRequest {
        url: req.uri().to_owned(),
        headers: req
            .headers()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
    }
}

/// Civil date of days since the epoch (Howard Hinnant's algorithm).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn parts(t: SystemTime) -> (i64, u32, u32, u64) {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let (y, m, d) = civil(days);
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
