//! The credentials the agent signs its S3 requests with.
//!
//! On AWS they are the MicroVM's **execution role**'s, found in this order:
//!
//! 1. the standard variables `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`
//!    and `AWS_SESSION_TOKEN` of the agent's own environment (an image may
//!    set them; the agent's children never inherit its environment, see
//!    [`crate::sandbox::SandboxEnv`], which builds theirs from scratch);
//! 2. else the instance metadata service, IMDSv2: a session token from
//!    `PUT /latest/api/token`, the role's name from
//!    `GET /latest/meta-data/iam/security-credentials/`, its temporary
//!    credentials from `GET .../<role>`. Lambda MicroVMs expose the
//!    execution role inside the guest this way. The endpoint is
//!    `AWS_EC2_METADATA_SERVICE_ENDPOINT`, else `http://169.254.169.254`;
//!    credentials are fetched again five minutes before they expire.
//!
//! On the local backend the emulator hands a sandbox launched with an
//! execution role one of its own access keys and its S3 endpoint, in
//! process ([`super::LocalS3`]); nothing reaches an environment.
//!
//! No credentials at all (no variables, no metadata service or no role
//! there, or a local sandbox without a role) is PERMISSION_DENIED.
//! Nothing here logs or prints a key, secret or token.

use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};

/// How long each call to the metadata service may take.
const IMDS_TIMEOUT: Duration = Duration::from_secs(2);
/// Refresh credentials this long before they expire.
const REFRESH_BEFORE: Duration = Duration::from_secs(300);
/// Largest metadata answer read.
const IMDS_MAX_BODY: usize = 16 * 1024;

/// An access key, its secret and session token.
#[derive(Clone)]
pub(crate) struct Creds {
    pub id: String,
    pub secret: String,
    pub token: Option<String>,
    /// When temporary credentials expire.
    pub expires: Option<SystemTime>,
}

impl std::fmt::Debug for Creds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Creds(..)")
    }
}

impl Creds {
    fn fresh(&self) -> bool {
        self.expires
            .is_none_or(|at| at > SystemTime::now() + REFRESH_BEFORE)
    }
}

/// The AWS credentials of the agent's environment, if all are set.
pub(crate) fn from_env() -> Option<Creds> {
    let id = std::env::var("AWS_ACCESS_KEY_ID")
        .ok()
        .filter(|v| !v.is_empty())?;
    let secret = std::env::var("AWS_SECRET_ACCESS_KEY")
        .ok()
        .filter(|v| !v.is_empty())?;
    let token = std::env::var("AWS_SESSION_TOKEN")
        .ok()
        .filter(|v| !v.is_empty());
    Some(Creds {
        id,
        secret,
        token,
        expires: None,
    })
}

/// The execution role's credentials from IMDSv2, cached until shortly
/// before they expire.
#[derive(Debug, Default)]
pub(crate) struct Imds {
    cached: Mutex<Option<Creds>>,
}

impl Imds {
    /// Fresh credentials, from the cache or the metadata service; `None`
    /// when there is no service, no role or no answer in time.
    pub(crate) async fn get(&self) -> Option<Creds> {
        if let Some(c) = self
            .cached
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            && c.fresh()
        {
            return Some(c.clone());
        }
        let endpoint = std::env::var("AWS_EC2_METADATA_SERVICE_ENDPOINT")
            .ok()
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| "http://169.254.169.254".to_owned());
        let creds = fetch(endpoint.trim_end_matches('/')).await?;
        *self.cached.lock().unwrap_or_else(|p| p.into_inner()) = Some(creds.clone());
        Some(creds)
    }
}

type Client = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    Full<Bytes>,
>;

async fn fetch(endpoint: &str) -> Option<Creds> {
    let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
    http.set_connect_timeout(Some(IMDS_TIMEOUT));
    let client: Client =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build(http);
    let token = call(
        &client,
        http::Request::put(format!("{endpoint}/latest/api/token"))
            .header("x-aws-ec2-metadata-token-ttl-seconds", "21600")
            .body(Full::new(Bytes::new()))
            .ok()?,
    )
    .await?;
    let token = String::from_utf8(token.to_vec()).ok()?;
    let get = |path: String| {
        http::Request::get(format!(
            "{endpoint}/latest/meta-data/iam/security-credentials/{path}"
        ))
        .header("x-aws-ec2-metadata-token", token.trim())
        .body(Full::new(Bytes::new()))
        .ok()
    };
    let roles = call(&client, get(String::new())?).await?;
    let role = std::str::from_utf8(&roles)
        .ok()?
        .lines()
        .next()?
        .trim()
        .to_owned();
    if role.is_empty()
        || !role
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+=,.@_-".contains(&b))
    {
        return None;
    }
    let body = call(&client, get(role)?).await?;
    parse_imds_credentials(&body)
}

/// The body of a 200 answer, bounded; `None` otherwise.
async fn call(client: &Client, req: http::Request<Full<Bytes>>) -> Option<Bytes> {
    let work = async {
        let resp = client.request(req).await.ok()?;
        if !resp.status().is_success() {
            return None;
        }
        Limited::new(resp.into_body(), IMDS_MAX_BODY)
            .collect()
            .await
            .ok()
            .map(|b| b.to_bytes())
    };
    tokio::time::timeout(IMDS_TIMEOUT, work)
        .await
        .ok()
        .flatten()
}

/// `{"Code":"Success","AccessKeyId":..,"SecretAccessKey":..,"Token":..,
/// "Expiration":"2026-12-01T20:00:00Z"}`.
fn parse_imds_credentials(body: &[u8]) -> Option<Creds> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct Answer {
        code: Option<String>,
        access_key_id: String,
        secret_access_key: String,
        token: Option<String>,
        expiration: Option<String>,
    }
    let a: Answer = serde_json::from_slice(body).ok()?;
    if a.code.as_deref().is_some_and(|c| c != "Success")
        || a.access_key_id.is_empty()
        || a.secret_access_key.is_empty()
    {
        return None;
    }
    Some(Creds {
        id: a.access_key_id,
        secret: a.secret_access_key,
        token: a.token.filter(|t| !t.is_empty()),
        expires: a
            .expiration
            .as_deref()
            .and_then(super::time::parse_rfc3339_utc),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in for the instance metadata service (there is none on a
    /// development host): IMDSv2's three calls, the token required.
    async fn fake_imds(role_body: &'static str) -> String {
        use axum::routing::{MethodRouter, get, put};
        // A GET answering `body` to a caller with the session token only.
        fn behind_token(body: &'static str) -> MethodRouter {
            get(move |headers: http::HeaderMap| async move {
                let token = headers.get("x-aws-ec2-metadata-token");
                if token.is_some_and(|v| v == "tok-1") {
                    (http::StatusCode::OK, body)
                } else {
                    (http::StatusCode::UNAUTHORIZED, "")
                }
            })
        }
        let app = axum::Router::new()
            .route(
                "/latest/api/token",
                put(|headers: http::HeaderMap| async move {
                    if headers.contains_key("x-aws-ec2-metadata-token-ttl-seconds") {
                        (http::StatusCode::OK, "tok-1")
                    } else {
                        (http::StatusCode::BAD_REQUEST, "")
                    }
                }),
            )
            .route(
                "/latest/meta-data/iam/security-credentials/",
                behind_token("sandbox-role\n"),
            )
            .route(
                "/latest/meta-data/iam/security-credentials/sandbox-role",
                behind_token(role_body),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        format!("http://{addr}")
    }

    #[tokio::test]
    async fn imdsv2_gives_the_roles_credentials_with_a_session_token() {
        let endpoint = fake_imds(
            r#"{"Code":"Success","AccessKeyId":"ASIAEXAMPLE","SecretAccessKey":"sec","Token":"sess","Expiration":"2099-01-01T00:00:00Z"}"#,
        )
        .await;
        let c = fetch(&endpoint).await.expect("credentials");
        assert_eq!(
            (c.id.as_str(), c.secret.as_str(), c.token.as_deref()),
            ("ASIAEXAMPLE", "sec", Some("sess"))
        );
        assert!(c.fresh());
        // A role whose answer is a failure: no credentials.
        let endpoint = fake_imds(r#"{"Code":"Failed"}"#).await;
        assert!(fetch(&endpoint).await.is_none());
        // No service at all: none, quickly.
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let started = std::time::Instant::now();
        assert!(fetch(&format!("http://{closed}")).await.is_none());
        assert!(started.elapsed() < IMDS_TIMEOUT * 2);
    }

    #[test]
    fn imds_answers_are_parsed_and_failures_refused() {
        let c = parse_imds_credentials(
            br#"{"Code":"Success","AccessKeyId":"AKIA","SecretAccessKey":"s","Token":"t","Expiration":"2030-01-02T03:04:05Z"}"#,
        )
        .unwrap();
        assert_eq!(
            (c.id.as_str(), c.secret.as_str(), c.token.as_deref()),
            ("AKIA", "s", Some("t"))
        );
        assert!(c.fresh());
        assert_eq!(format!("{c:?}"), "Creds(..)");
        assert!(
            parse_imds_credentials(br#"{"Code":"Failed","AccessKeyId":"a","SecretAccessKey":"s"}"#)
                .is_none()
        );
        assert!(parse_imds_credentials(b"not json").is_none());
        let old = parse_imds_credentials(
            br#"{"AccessKeyId":"a","SecretAccessKey":"s","Expiration":"2020-01-01T00:00:00Z"}"#,
        )
        .unwrap();
        assert!(!old.fresh(), "expired credentials are fetched again");
    }
}
