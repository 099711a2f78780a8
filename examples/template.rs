//! A template: a small web site built into an image, its server started
//! with every sandbox, then a sandbox of it. Building again reuses the
//! version at once.
//!
//! ```text
//! cargo run --example template --features templates                # local backend (root, overlayfs)
//! RAYITO_BACKEND=aws RAYITO_BUCKET=<artifact bucket> \
//!     cargo run --example template --features templates            # your AWS account
//! ```

use std::time::Duration;

use rayito::template::{BuildEvent, BuildOptions, ReadyCmd, StartCmd, Template};
use rayito::{Client, SandboxError};

const PORT: u16 = 8321;

#[tokio::main]
async fn main() -> Result<(), SandboxError> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "rayito=warn".into()),
        )
        .init();
    let client = match std::env::var("RAYITO_BACKEND").as_deref() {
        Ok("aws") => Client::from_env().await?,
        _ => Client::local().await?,
    };

    // The build context: one page, copied into the image.
    let context =
        std::env::temp_dir().join(format!("rayito-template-example-{}", std::process::id()));
    std::fs::create_dir_all(context.join("site")).map_err(|_| {
        SandboxError::invalid_argument("context_dir", "cannot write the example's build context")
    })?;
    std::fs::write(
        context.join("site/index.html"),
        "<h1>built by a rayito template</h1>\n",
    )
    .map_err(|_| {
        SandboxError::invalid_argument("context_dir", "cannot write the example's build context")
    })?;

    let template = Template::new()
        .run_cmd("mkdir -p /srv/www")
        .copy("site", "/srv/www")
        .set_envs([("SITE_NAME", "example")])
        .set_start_cmd(
            StartCmd::new(format!(
                "python3 -m http.server {PORT} --bind 127.0.0.1 --directory /srv/www"
            ))
            .ready(ReadyCmd::port(PORT).timeout(Duration::from_secs(30))),
        );
    let options = || {
        BuildOptions {
            context_dir: Some(context.clone()),
            ..BuildOptions::default()
        }
        .on_event(|event| {
            if !matches!(event, BuildEvent::Log(_)) {
                println!("  {event}");
            }
        })
    };

    println!("building the template `example-site`:");
    let info = client
        .templates()
        .build(&template, "example-site", options())
        .await?;
    println!(
        "version {} ready in {:.1}s ({})",
        info.version,
        info.duration.as_secs_f64(),
        if info.reused { "reused" } else { "built" }
    );
    let again = client
        .templates()
        .build(&template, "example-site", options())
        .await?;
    println!(
        "building again: version {} in {:.2}s (reused: {})",
        again.version,
        again.duration.as_secs_f64(),
        again.reused
    );

    let sandbox = client.sandbox().template("example-site").create().await?;
    let page = sandbox
        .commands()
        .run(&format!(
            "for i in $(seq 50); do curl -fsS http://127.0.0.1:{PORT}/ && exit 0; \
             python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{PORT}/').read().decode(), end='')\" 2>/dev/null && exit 0; \
             sleep 0.1; done; exit 1"
        ))
        .await?;
    print!("the sandbox's server says: {}", page.stdout);
    let env = sandbox.commands().run("echo $SITE_NAME").await?;
    print!("SITE_NAME in the sandbox: {}", env.stdout);
    sandbox.kill().await?;
    let _ = std::fs::remove_dir_all(&context);
    Ok(())
}
