//! The `dashboard` stack's function (`bootstrap` in the zip,
//! provided.al2023): Function URL events to the hosted dashboard's router
//! over rayito-events-lambda's runtime loop. Set up on the first
//! invocation of each environment and reused after. With an actions role
//! (`RAYITO_DASHBOARD_ACTIONS_ROLE_ARN`), actions run with that role's
//! credentials (session `rayito-dashboard`); reads with the function's own
//! read-only role.

use aws_config::BehaviorVersion;
use rayito::{AwsOptions, Client};
use rayito_dashboard::hosted::{HostedDashboard, HostedOptions, env};
use rayito_events_lambda::{Failure, runtime};
use tokio::sync::OnceCell;

async fn client(config: aws_types::SdkConfig) -> Result<Client, Failure> {
    Client::builder()
        .aws(AwsOptions::new().sdk_config(config))
        .build()
        .await
        .map_err(|e| Failure::other("config", e.kind().as_str()))
}

async fn dashboard() -> Result<HostedDashboard, Failure> {
    let options = HostedOptions::from_env().map_err(|e| Failure::other("config", e.0))?;
    let config = aws_config::load_defaults(BehaviorVersion::latest()).await;
    let read = client(config.clone()).await?;
    let role = std::env::var(env::ACTIONS_ROLE_ARN).unwrap_or_default();
    let actions = if role.is_empty() {
        None
    } else {
        let provider = aws_config::sts::AssumeRoleProvider::builder(role)
            .session_name("rayito-dashboard")
            .configure(&config)
            .build()
            .await;
        let assumed = config
            .to_builder()
            .credentials_provider(
                aws_credential_types::provider::SharedCredentialsProvider::new(provider),
            )
            .build();
        Some(client(assumed).await?)
    };
    HostedDashboard::new(read, actions, &config, options).map_err(|e| Failure::other("config", e.0))
}

#[tokio::main]
async fn main() -> Result<(), Failure> {
    let app: OnceCell<HostedDashboard> = OnceCell::new();
    runtime::serve(|body| {
        let app = &app;
        async move {
            let app = app.get_or_try_init(dashboard).await?;
            let event: serde_json::Value =
                serde_json::from_slice(&body).map_err(|_| Failure::other("decode", "not_json"))?;
            Ok(app.handle(&event).await)
        }
    })
    .await
}
