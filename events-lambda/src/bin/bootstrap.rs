//! The optional stacks' one binary (`bootstrap` in the zip, provided.al2023):
//! the function it runs is `RAYITO_EVENTS_FUNCTION`, set by the template on
//! each function: `forwarder`, `deliverer` or `reconciler` (events-webhooks)
//! or `quota-alerts` (quota-alerts).

use std::sync::Arc;

use rayito_events_lambda::deliverer::Deliverer;
use rayito_events_lambda::quota_alerts::{self, QuotaAlerts, Settings};
use rayito_events_lambda::table::Table;
use rayito_events_lambda::{Failure, forwarder, now_ms, reconciler, runtime, secrets};
use tokio::sync::OnceCell;

fn env(name: &'static str) -> Result<String, Failure> {
    std::env::var(name).map_err(|_| Failure::other("config", format!("{name} unset")))
}

#[tokio::main]
async fn main() -> Result<(), Failure> {
    let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let function = env("RAYITO_EVENTS_FUNCTION")?;
    if function == quota_alerts::FUNCTION {
        let check = QuotaAlerts::new(Settings::from_env()?, &config, &config)?;
        return runtime::serve(|_| {
            let check = check.clone();
            async move {
                let outcome = check.run().await?;
                println!("{}", outcome.to_log_line());
                Ok(outcome.answer())
            }
        })
        .await;
    }
    let table = Table::new(
        aws_sdk_dynamodb::Client::new(&config),
        env("EVENTS_TABLE_NAME")?,
    );
    let secrets_client = aws_sdk_secretsmanager::Client::new(&config);
    match function.as_str() {
        "forwarder" => {
            let key_id = env("STACK_KEY_SECRET_ID")?;
            // Read once per environment, on the first invocation.
            let key: Arc<OnceCell<Vec<u8>>> = Arc::new(OnceCell::new());
            runtime::serve(|body| {
                let (table, secrets_client, key, key_id) = (
                    table.clone(),
                    secrets_client.clone(),
                    key.clone(),
                    key_id.clone(),
                );
                async move {
                    let batch = forwarder::decode(&body)?;
                    let key = key
                        .get_or_try_init(|| secrets::read(&secrets_client, &key_id))
                        .await?;
                    let report = forwarder::forward(&table, key, &batch, now_ms()).await?;
                    println!("{}", report.to_log_line());
                    Ok(serde_json::json!({ "admitted": report.admitted }))
                }
            })
            .await
        }
        "deliverer" => {
            let deliverer = Deliverer::new(table, secrets_client);
            runtime::serve(|body| {
                let deliverer = deliverer.clone();
                async move {
                    let invocation: serde_json::Value = serde_json::from_slice(&body)
                        .map_err(|_| Failure::other("decode", "not_json"))?;
                    let response = deliverer.deliver_stream(&invocation).await?;
                    Ok(serde_json::to_value(response).unwrap_or_default())
                }
            })
            .await
        }
        "reconciler" => {
            let interval: u64 = env("RECONCILER_INTERVAL_MINUTES")?
                .parse()
                .map_err(|_| Failure::other("config", "RECONCILER_INTERVAL_MINUTES"))?;
            let microvms = aws_sdk_lambdamicrovms::Client::new(&config);
            runtime::serve(|_| {
                let (table, microvms) = (table.clone(), microvms.clone());
                async move {
                    let closed =
                        reconciler::reconcile(&table, &microvms, interval, now_ms()).await?;
                    println!(
                        "{}",
                        serde_json::json!({ "reconciler": { "closed": closed.len() } })
                    );
                    Ok(serde_json::json!({ "closed": closed.len() }))
                }
            })
            .await
        }
        other => Err(Failure::other(
            "config",
            format!("unknown function {other}"),
        )),
    }
}
