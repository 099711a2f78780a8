//! The quickstart: create a sandbox, write a CSV, summarise it with Python,
//! run a command, kill the sandbox.
//!
//! ```text
//! cargo run --example quickstart                     # local backend, no AWS account
//! RAYITO_BACKEND=aws RAYITO_TEMPLATE=arn:aws:lambda:us-east-1:123456789012:microvm-image:rayito-base \
//!     cargo run --example quickstart                 # your AWS account
//! ```
//!
//! The local backend runs the sandbox on this machine with best-effort
//! isolation; the SDK logs a warning when it starts it.

use rayito::{Sandbox, SandboxError};

const CSV: &str = "city,temperature\nLima,19\nOslo,4\nCairo,31\nQuito,14\n";

const SUMMARY: &str = r#"
import csv
rows = list(csv.DictReader(open("/home/user/weather.csv")))
temps = [int(r["temperature"]) for r in rows]
print(f"{len(rows)} cities, mean {sum(temps) / len(temps):.1f} C")
max(rows, key=lambda r: int(r["temperature"]))["city"]
"#;

#[tokio::main]
async fn main() -> Result<(), SandboxError> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "rayito=warn".into()),
        )
        .init();

    // The examples default to the local backend; `Sandbox::create()` alone
    // would pick AWS unless RAYITO_BACKEND says otherwise.
    let builder = match std::env::var("RAYITO_BACKEND").as_deref() {
        Ok("aws") => Sandbox::builder(),
        _ => Sandbox::builder().local(),
    };
    let sandbox = builder.create().await?;
    println!("sandbox {} is ready", sandbox.id());

    let outcome = run(&sandbox).await;
    // Kill is explicit: dropping the handle leaves the sandbox running.
    let killed = sandbox.kill().await?;
    println!("killed: {killed}");
    outcome
}

async fn run(sandbox: &Sandbox) -> Result<(), SandboxError> {
    let entry = sandbox.files().write("/home/user/weather.csv", CSV).await?;
    println!("wrote {} ({} bytes)", entry.path, entry.size);

    let execution = sandbox.run_code(SUMMARY).await?;
    print!("python says: {}", execution.logs.stdout.concat());
    println!("warmest city: {}", execution.text().unwrap_or("?"));
    if let Some(error) = &execution.error {
        println!("python raised {}: {}", error.name, error.value);
    }

    let listing = sandbox
        .commands()
        .run("wc -l /home/user/weather.csv && uname -s")
        .await?;
    print!("command says:\n{}", listing.stdout);
    Ok(())
}
