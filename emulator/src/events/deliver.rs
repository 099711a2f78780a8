//! The deliverer: one worker per webhook drains its queue, one event at a
//! time in admission order (a receiver sees created, paused, resumed,
//! killed in order). Each event is POSTed with the webhook body and its
//! signature headers, a new delivery id per attempt; at most
//! [`ATTEMPTS`] attempts of at most [`ATTEMPT_TIMEOUT`] each, waiting
//! [`BACKOFF`] between them; 2xx delivered, 5xx or a transport failure
//! retried, any other status permanent (`rejected_<status>`, redirects
//! not followed), retries exhausted `attempts_exhausted`: each failure a
//! dead letter. The response body is read up to [`MAX_RESPONSE`] bytes.
//! The secret value is never logged.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rand::RngCore as _;
use rayito_events::{Event, webhook};
use tokio::sync::mpsc;

use super::Events;
use super::stack::DeadLetter;

/// Attempts per delivery.
pub(crate) const ATTEMPTS: u32 = 3;
/// The waits after the first and the second failed attempt.
pub(crate) const BACKOFF: [Duration; 2] = [Duration::from_millis(500), Duration::from_secs(1)];
/// One attempt's limit, connection to the end of the response read.
pub(crate) const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// How much of a response body is read.
pub(crate) const MAX_RESPONSE: usize = 64 * 1024;
/// The dead letter's reason when the webhook's queue was full.
pub(crate) const QUEUE_FULL: &str = "queue_full";
/// The dead letter's reason when every attempt failed.
pub(crate) const ATTEMPTS_EXHAUSTED: &str = "attempts_exhausted";

/// A webhook's secret value: held by its worker only, never logged.
pub(crate) struct Secret(pub(crate) Vec<u8>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

type HttpsClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// The client, built on first use (`None`: no TLS configuration could be
/// built; every attempt then fails as a transport failure).
#[derive(Default)]
pub(crate) struct ClientCell(OnceLock<Option<HttpsClient>>);

impl ClientCell {
    fn get(&self) -> Option<&HttpsClient> {
        self.0.get_or_init(build_client).as_ref()
    }
}

/// HTTP and HTTPS (the system's roots; none on this host: no root, so
/// HTTPS fails and plain HTTP still works), HTTP/1.1, no redirects.
fn build_client() -> Option<HttpsClient> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(Some(ATTEMPT_TIMEOUT));
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = match hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_native_roots(provider.clone())
    {
        Ok(builder) => builder,
        Err(_) => {
            let config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .ok()?
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth();
            hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(config)
        }
    };
    let connector = builder.https_or_http().enable_http1().wrap_connector(http);
    Some(Client::builder(TokioExecutor::new()).build(connector))
}

/// Where one webhook's events go.
#[derive(Debug)]
pub(crate) struct Target {
    pub(crate) epoch: u64,
    pub(crate) webhook_id: String,
    pub(crate) uri: http::Uri,
    pub(crate) secret: Secret,
}

/// The worker of one webhook: until it is deleted (or its stack
/// destroyed), each queued event delivered or dead-lettered.
pub(crate) async fn worker(events: Arc<Events>, target: Target, mut queue: mpsc::Receiver<Event>) {
    while let Some(event) = queue.recv().await {
        if !events.webhook_live(target.epoch, &target.webhook_id) {
            return;
        }
        let failed = deliver(&events, &target, &event).await;
        events.with_epoch(target.epoch, |stack| match failed {
            None => stack.counters.delivered += 1,
            Some(letter) => stack.dead_letter(letter),
        });
    }
}

/// One attempt's outcome.
enum Attempt {
    Status(u16),
    Transport,
}

/// Delivers `event`: `None` when delivered, else its dead letter.
async fn deliver(events: &Events, target: &Target, event: &Event) -> Option<DeadLetter> {
    let body = Bytes::from(webhook::body(event));
    let mut last_status = None;
    for attempt in 1..=ATTEMPTS {
        let outcome = post(events.client.get(), target, &body).await;
        let status = match outcome {
            Attempt::Status(s) if (200..300).contains(&s) => return None,
            Attempt::Status(s) if s >= 500 => Some(s),
            Attempt::Status(s) => {
                return Some(letter(
                    target,
                    event,
                    attempt,
                    format!("rejected_{s}"),
                    Some(s),
                ));
            }
            Attempt::Transport => None,
        };
        last_status = status;
        tracing::debug!(
            webhook = %target.webhook_id,
            event = %event.event_id,
            attempt,
            status = ?status,
            "emulator: webhook delivery attempt failed"
        );
        if let Some(wait) = BACKOFF.get(attempt as usize - 1) {
            tokio::time::sleep(*wait).await;
        }
    }
    Some(letter(
        target,
        event,
        ATTEMPTS,
        ATTEMPTS_EXHAUSTED.to_owned(),
        last_status,
    ))
}

fn letter(
    target: &Target,
    event: &Event,
    attempts: u32,
    reason: String,
    last_status: Option<u16>,
) -> DeadLetter {
    tracing::debug!(webhook = %target.webhook_id, event = %event.event_id, %reason, "emulator: webhook delivery failed");
    DeadLetter {
        webhook_id: target.webhook_id.clone(),
        event_id: event.event_id.clone(),
        attempts,
        reason,
        last_status,
    }
}

/// One POST, a new delivery id, the signatures made now.
async fn post(client: Option<&HttpsClient>, target: &Target, body: &Bytes) -> Attempt {
    let Some(client) = client else {
        return Attempt::Transport;
    };
    let mut raw = [0u8; 16];
    rand::rng().fill_bytes(&mut raw);
    let delivery_id: String = raw.iter().map(|b| format!("{b:02x}")).collect();
    let now_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut req = http::Request::post(target.uri.clone());
    for (name, value) in webhook::headers(
        &target.secret.0,
        &target.webhook_id,
        &delivery_id,
        body,
        now_s,
    ) {
        req = req.header(name, value);
    }
    let Ok(req) = req.body(Full::new(body.clone())) else {
        return Attempt::Transport;
    };
    let call = async {
        let resp = client.request(req).await.ok()?;
        let status = resp.status().as_u16();
        let mut body = resp.into_body();
        let mut read = 0;
        while read < MAX_RESPONSE {
            match body.frame().await {
                Some(Ok(frame)) => read += frame.data_ref().map_or(0, Bytes::len),
                _ => break,
            }
        }
        Some(status)
    };
    match tokio::time::timeout(ATTEMPT_TIMEOUT, call).await {
        Ok(Some(status)) => Attempt::Status(status),
        _ => Attempt::Transport,
    }
}
