//! Template benchmarks on the local backend (docs/performance.md,
//! "Templates"):
//!
//! 1. a template with one `pip install` of a small wheel from a local
//!    package directory, one `copy` and a start command waiting on a port:
//!    the build time, then a rebuild with no change (reused: no upload, no
//!    new version);
//! 2. create-to-first-result from the template's image against the base
//!    image in the same run, alternating, `N` rounds each (the first
//!    result: `commands().run("true")`, then `run_code("1 + 1")`): the same
//!    layer without a start command (what mounting the layer costs), and
//!    with it (a sandbox is ready once its start command's ready check
//!    passed: on the local backend the start command starts with the
//!    sandbox, there being no memory snapshot). Each measured create
//!    comes 0.7 s after the previous one, so that every image's MicroVM
//!    made ahead is ready, as for creates that are not back to back.
//!
//! ```text
//! cargo run --release -p rayito-tests --example template_bench [-- ROUNDS]
//! ```

use std::io::Write as _;
use std::time::{Duration, Instant};

use rayito::template::{BuildOptions, ReadyCmd, StartCmd, Template};
use rayito::{Client, Sandbox, SandboxError};

const PORT: u16 = 8417;
/// The pause before each measured create (see the loop).
const SETTLE: Duration = Duration::from_millis(700);

/// A minimal pure-Python wheel (`rayito_bench_pkg` 1.0), written by hand
/// so that the benchmark needs no package index.
fn write_wheel(dir: &std::path::Path) -> std::io::Result<()> {
    use base64::Engine as _;
    use sha2::Digest as _;
    let files: [(&str, &str); 3] = [
        ("rayito_bench_pkg/__init__.py", "VALUE = 42\n"),
        (
            "rayito_bench_pkg-1.0.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: rayito-bench-pkg\nVersion: 1.0\n",
        ),
        (
            "rayito_bench_pkg-1.0.dist-info/WHEEL",
            "Wheel-Version: 1.0\nGenerator: rayito-bench\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        ),
    ];
    let mut record = String::new();
    for (name, text) in files {
        let digest = sha2::Sha256::digest(text.as_bytes());
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest);
        record.push_str(&format!("{name},sha256={b64},{}\n", text.len()));
    }
    record.push_str("rayito_bench_pkg-1.0.dist-info/RECORD,,\n");
    std::fs::create_dir_all(dir)?;
    let file = std::fs::File::create(dir.join("rayito_bench_pkg-1.0-py3-none-any.whl"))?;
    let mut zip = zip::ZipWriter::new(file);
    let options = zip::write::SimpleFileOptions::default();
    for (name, text) in files
        .iter()
        .copied()
        .chain([("rayito_bench_pkg-1.0.dist-info/RECORD", record.as_str())])
    {
        zip.start_file(name, options)
            .map_err(std::io::Error::other)?;
        zip.write_all(text.as_bytes())?;
    }
    zip.finish().map_err(std::io::Error::other)?;
    Ok(())
}

/// Create, one command, one cell, kill: the two first-result times.
async fn first_result(
    client: &Client,
    template: &str,
) -> Result<(Duration, Duration), SandboxError> {
    let started = Instant::now();
    let sandbox: Sandbox = client.sandbox().template(template).create().await?;
    sandbox.commands().run("true").await?;
    let command = started.elapsed();
    sandbox.run_code("1 + 1").await?;
    let cell = started.elapsed();
    sandbox.kill().await?;
    Ok((command, cell))
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main]
async fn main() -> Result<(), SandboxError> {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10);
    let client = Client::local().await?;
    let context =
        std::env::temp_dir().join(format!("rayito-template-bench-{}", std::process::id()));
    let setup = || -> std::io::Result<()> {
        write_wheel(&context.join("wheels"))?;
        std::fs::create_dir_all(context.join("site"))?;
        std::fs::write(context.join("site/index.html"), "bench\n")
    };
    setup().map_err(|_| {
        SandboxError::invalid_argument("context_dir", "cannot write the benchmark's build context")
    })?;
    let plain = Template::new()
        .copy("wheels", "/opt/wheels")
        .pip_install_with(["rayito-bench-pkg"], "--no-index --find-links /opt/wheels")
        .copy("site", "/srv/bench");
    let template = plain.clone().set_start_cmd(
        StartCmd::new(format!(
            "python3 -m http.server {PORT} --bind 127.0.0.1 --directory /srv/bench"
        ))
        .ready(ReadyCmd::port(PORT)),
    );
    let name = format!("bench-{:08x}", std::process::id());
    let options = || BuildOptions {
        context_dir: Some(context.clone()),
        ..BuildOptions::default()
    };

    let built = client
        .templates()
        .build(&template, &name, options())
        .await?;
    println!(
        "build: {:.2} s (version {}, uploaded: {})",
        built.duration.as_secs_f64(),
        built.version,
        built.artifact_uploaded
    );
    let again = client
        .templates()
        .build(&template, &name, options())
        .await?;
    println!(
        "rebuild with no change: {:.3} s (reused: {}, uploaded: {}, version {})",
        again.duration.as_secs_f64(),
        again.reused,
        again.artifact_uploaded,
        again.version
    );

    let plain_name = format!("{name}-plain");
    client
        .templates()
        .build(&plain, &plain_name, options())
        .await?;
    // The wheel is installed in the image.
    let sandbox = client.sandbox().template(&plain_name).create().await?;
    let out = sandbox
        .commands()
        .run("python3 -c 'import rayito_bench_pkg as p; print(p.VALUE)'")
        .await?;
    assert_eq!(out.stdout, "42\n");
    sandbox.kill().await?;

    // Warm every path once, then alternate.
    let images = ["rayito-base", plain_name.as_str(), name.as_str()];
    for image in images {
        first_result(&client, image).await?;
    }
    let mut commands: [Vec<Duration>; 3] = Default::default();
    let mut cells: [Vec<Duration>; 3] = Default::default();
    for _ in 0..rounds {
        for (i, image) in images.iter().enumerate() {
            // Each create finds its image's MicroVM made ahead ready (as a
            // create that is not right behind another does): the pause
            // lets the previous create's refill finish.
            tokio::time::sleep(SETTLE).await;
            let (c, r) = first_result(&client, image).await?;
            commands[i].push(c);
            cells[i].push(r);
        }
    }
    let [bc, pc, tc] = commands.map(median);
    let [br, pr, tr] = cells.map(median);
    println!(
        "layer without a start command: first command {pc:?} ({:.2}x base), first cell {pr:?} ({:.2}x base)",
        pc.as_secs_f64() / bc.as_secs_f64(),
        pr.as_secs_f64() / br.as_secs_f64()
    );
    println!(
        "create to first command, median of {rounds}: base {bc:?}, template {tc:?} ({:.2}x)",
        tc.as_secs_f64() / bc.as_secs_f64()
    );
    println!(
        "create to first cell result, median of {rounds}: base {br:?}, template {tr:?} ({:.2}x)",
        tr.as_secs_f64() / br.as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(&context);
    Ok(())
}
