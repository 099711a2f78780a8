//! Lifecycle events (docs/events.md): a sandbox's create, pause, resume and
//! kill delivered to a webhook as signed requests, each verified before it
//! is read, on the embedded local backend.
//!
//! ```text
//! cargo run --example events --features events
//! ```
//!
//! What it needs: a Secrets Manager for the webhook's secret, as for
//! `examples/gateway.rs` (your account, or a moto server through
//! `AWS_ENDPOINT_URL_SECRETS_MANAGER=http://127.0.0.1:5000`,
//! `AWS_REGION=us-east-1` and dummy keys). The example creates the secret
//! `rayito/webhooks/example-events`, deploys the local events stack, starts
//! its own receiver on 127.0.0.1, and removes all three at the end.
//!
//! On AWS the same calls deploy the CloudFormation stack
//! (`EventsDeploy::new(bucket, group)` with `.artifact(zip)`), and the
//! webhook's URL must be a public `https://` one.

use std::convert::Infallible;
use std::time::Duration;

use http_body_util::{BodyExt as _, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rayito::events::{EventKind, EventOrder, EventQuery, EventsDeploy};
use rayito::{Client, SandboxLogging};
use tokio::sync::mpsc;

/// The webhook's secret, under `rayito/webhooks/` as the deliverer requires.
const SECRET_NAME: &str = "example-events";
/// The log group the stack reads: the sandbox logs there.
const LOG_GROUP: &str = "/rayito/events-example";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The webhook's secret, created as you would create any (the AWS CLI,
    // your IaC): rayito's SecretStore refuses names under
    // rayito/webhooks/, which belong to the events stack.
    let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let secrets = aws_sdk_secretsmanager::Client::new(&config);
    let id = format!("rayito/webhooks/{SECRET_NAME}");
    if remove_secret(&secrets, &id).await.is_ok() {
        println!("removed a {id} left by an earlier run");
    }
    // A value only this run knows (never printed).
    let secret = format!("whsec-{:032x}", rand::random::<u128>());
    secrets
        .create_secret()
        .name(&id)
        .secret_string(&secret)
        .send()
        .await?;
    let outcome = run(secret.into_bytes()).await;
    remove_secret(&secrets, &id).await?;
    outcome
}

async fn remove_secret(
    secrets: &aws_sdk_secretsmanager::Client,
    id: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    secrets
        .delete_secret()
        .secret_id(id)
        .force_delete_without_recovery(true)
        .send()
        .await?;
    Ok(())
}

async fn run(secret: Vec<u8>) -> Result<(), Box<dyn std::error::Error>> {
    let client = Client::local().await?;
    let events = client.events();
    // Locally the bucket is not used: the emulator is the whole pipeline.
    events
        .deploy(EventsDeploy::new("local-artifacts", LOG_GROUP))
        .await?;

    let (url, mut deliveries) = receiver(secret).await?;
    let hook = events
        .register_webhook(&url, SECRET_NAME, &EventKind::ALL)
        .await?;
    println!("webhook {} -> {url}", hook.webhook_id);

    let sbx = client
        .sandbox()
        .logging(SandboxLogging::cloudwatch_group(LOG_GROUP))
        .events(events.clone())
        .create()
        .await?;
    println!("sandbox {} created", sbx.id());
    sbx.pause().await?;
    sbx.resume().await?;
    sbx.kill().await?;

    // The four events, each printed by the receiver once verified.
    let mut delivered = Vec::new();
    while delivered.len() < 4 {
        let body = tokio::time::timeout(Duration::from_secs(60), deliveries.recv())
            .await
            .map_err(|_| "no delivery within 60 s")?
            .ok_or("the receiver stopped")?;
        let event: serde_json::Value = serde_json::from_slice(&body)?;
        if event["sandbox_id"] == sbx.id() {
            delivered.push(event);
        }
    }

    // The same records, read back.
    let query = EventQuery::new()
        .sandbox_id(sbx.id())
        .order(EventOrder::Asc);
    let records = events.get_events(query).await?;
    let same = records.len() == delivered.len()
        && records
            .iter()
            .zip(&delivered)
            .all(|(r, d)| d["event_id"] == r.event_id.as_str());
    println!(
        "get_events: {} records, the same as delivered: {same}",
        records.len()
    );

    events.delete_webhook(&hook.webhook_id).await?;
    events.destroy().await?;
    Ok(())
}

/// Checks one delivery before anything reads its body: the signatures
/// over the exact bytes received, and `t` within the 5-minute window.
fn check_delivery(
    secret: &[u8],
    headers: &http::HeaderMap,
    body: &[u8],
) -> Result<(), rayito::events::WebhookVerifyError> {
    rayito::events::verify_webhook(secret, headers, body, std::time::SystemTime::now())
}

/// A webhook receiver on 127.0.0.1: 401 to a delivery that does not
/// verify; a verified one is printed, answered 200 and passed on.
async fn receiver(
    secret: Vec<u8>,
) -> Result<(String, mpsc::UnboundedReceiver<Bytes>), Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/webhook", listener.local_addr()?);
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (secret, tx) = (secret.clone(), tx.clone());
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let (secret, tx) = (secret.clone(), tx.clone());
                async move { Ok::<_, Infallible>(handle(&secret, &tx, request).await) }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tcp), service),
            );
        }
    });
    Ok((url, rx))
}

async fn handle(
    secret: &[u8],
    tx: &mpsc::UnboundedSender<Bytes>,
    request: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    let Ok(body) = body.collect().await.map(|b| b.to_bytes()) else {
        return answer(StatusCode::BAD_REQUEST);
    };
    if let Err(err) = check_delivery(secret, &parts.headers, &body) {
        println!("refused a delivery: {err}");
        return answer(StatusCode::UNAUTHORIZED);
    }
    let event: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let reason = match event["kill_reason"].as_str() {
        Some(reason) => format!(", kill_reason {reason}"),
        None => String::new(),
    };
    println!(
        "verified delivery: {} (generation {}{reason})",
        event["type"].as_str().unwrap_or("?"),
        event["generation"]
    );
    let _ = tx.send(body);
    answer(StatusCode::OK)
}

fn answer(status: StatusCode) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = status;
    response
}
