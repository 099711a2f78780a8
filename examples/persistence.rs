//! A home that outlives its sandbox, and a large file moved by URL.
//!
//! 1. Create a sandbox with a persistence name and an execution role, write
//!    files, checkpoint the home (with progress), kill the sandbox.
//! 2. Create again with the same name: the home is restored before `create`
//!    returns, the files are back.
//! 3. Ask for an upload URL, PUT `--upload-mib` MiB (default 1024) to it
//!    with plain HTTP (a generated body streamed, never held whole in
//!    memory, hashed as it is sent), wait for the file to arrive, check its
//!    size and its sha256 (`sha256sum` in the sandbox).
//! 4. Ask for a download link, GET it the same way, check the bytes' sha256
//!    against the link's.
//!
//! ```text
//! cargo run --example persistence --features s3                 # local backend, no AWS account
//! cargo run --example persistence --features s3 -- --upload-mib 64  # a smaller upload
//! cargo run --release --example persistence --features s3       # faster hashing
//! RAYITO_BACKEND=aws \
//!   RAYITO_TEMPLATE=arn:aws:lambda:us-east-1:123456789012:microvm-image:rayito-base \
//!   RAYITO_EXECUTION_ROLE_ARN=arn:aws:iam::123456789012:role/rayito-sandbox \
//!   RAYITO_PERSIST_BUCKET=my-checkpoints \
//!   RAYITO_TRANSFER_BUCKET=my-staging \
//!   cargo run --example persistence --features s3               # your AWS account
//! ```
//!
//! On the local backend the checkpoints and the staged file go to its own S3
//! endpoint and bucket ([`rayito::LOCAL_BUCKET`], there from the start), and
//! any role ARN gives the sandbox the emulator's S3 key. On AWS the role
//! and the buckets are yours: `RAYITO_EXECUTION_ROLE_ARN` (the sandbox's
//! execution role, docs/persistence.md, "The execution role"), `RAYITO_PERSIST_BUCKET`
//! (checkpoints), `RAYITO_TRANSFER_BUCKET` (staging, plus the optional
//! `RAYITO_TRANSFER_PREFIX` and `RAYITO_TRANSFER_REGION`, docs/transfers.md).
//!
//! A debug build moves and hashes the 1 GiB in unoptimised code, several
//! times over (here, the emulator's S3 and the agent run in this process):
//! minutes on a small machine. Memory stays flat: the body is generated and
//! read chunk by chunk.
//!
//! The example prints no URL, bucket or key: a presigned URL is a secret
//! until it expires.

use std::convert::Infallible;
use std::error::Error;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::stream;
use http_body_util::{BodyExt as _, Empty, StreamBody};
use hyper::body::Frame;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rayito::persistence::{CheckpointOptions, S3Prefix};
use rayito::transfer::{DownloadUrlOptions, S3Staging, UploadUrlOptions};
use rayito::{Sandbox, SandboxBuilder, SandboxError};
use sha2::{Digest as _, Sha256};

/// The persistence name: both lives of the sandbox use it.
const NAME: &str = "alice";
/// The files of the first life, relative to the home directory.
const FILES: [(&str, &str); 2] = [
    ("project/notes.md", "# day one\nremember the milk\n"),
    ("project/data.csv", "city,temperature\nLima,19\nOslo,4\n"),
];
/// Where the upload lands in the second life.
const UPLOAD_PATH: &str = "big.bin";
/// Bytes per generated chunk of the upload.
const CHUNK: usize = 1 << 20;
/// How long the upload may take to arrive in the sandbox.
const UPLOAD_WAIT: Duration = Duration::from_secs(1800);

type Failure = Box<dyn Error + Send + Sync>;

/// Where checkpoints and staged files go, and with which role.
struct Setup {
    local: bool,
    role: String,
    persist: S3Prefix,
    staging: S3Staging,
}

impl Setup {
    /// The local backend unless `RAYITO_BACKEND=aws`.
    fn from_env() -> Result<Self, Failure> {
        if std::env::var("RAYITO_BACKEND").as_deref() != Ok("aws") {
            return Ok(Self {
                local: true,
                // Any ARN: the emulator gives a sandbox with a role its S3 key.
                role: "arn:aws:iam::000000000000:role/rayito-sandbox".to_owned(),
                persist: S3Prefix::new(rayito::LOCAL_BUCKET).name(NAME),
                staging: S3Staging::new(rayito::LOCAL_BUCKET),
            });
        }
        let var = |name: &str| -> Result<String, Failure> {
            std::env::var(name)
                .ok()
                .filter(|v| !v.is_empty())
                .ok_or_else(|| {
                    format!("set {name} (see the top of examples/persistence.rs)").into()
                })
        };
        let staging = S3Staging::from_env()?
            .ok_or("set RAYITO_TRANSFER_BUCKET (see the top of examples/persistence.rs)")?;
        Ok(Self {
            local: false,
            role: var("RAYITO_EXECUTION_ROLE_ARN")?,
            persist: S3Prefix::new(var("RAYITO_PERSIST_BUCKET")?).name(NAME),
            staging,
        })
    }

    fn builder(&self) -> SandboxBuilder {
        let builder = if self.local {
            Sandbox::builder().local()
        } else {
            Sandbox::builder()
        };
        builder
            .timeout(Duration::from_secs(3600))
            .execution_role_arn(self.role.clone())
            .persist(self.persist.clone())
    }
}

/// `--upload-mib N` (default 1024).
fn upload_mib() -> Result<u64, Failure> {
    let mut args = std::env::args().skip(1);
    let mut mib = 1024;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--upload-mib" => {
                let value = args.next().ok_or("--upload-mib needs a number of MiB")?;
                mib = value
                    .parse::<u64>()
                    .ok()
                    .filter(|n| (1..=5 * 1024).contains(n))
                    .ok_or("--upload-mib must be 1 to 5120")?;
            }
            other => return Err(format!("unknown argument {other:?}; use --upload-mib N").into()),
        }
    }
    Ok(mib)
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            // Display, not Debug: the SDK's messages are written for people.
            eprintln!("error: {err}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Failure> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "rayito=warn".into()),
        )
        .init();
    let mib = upload_mib()?;
    let setup = Setup::from_env()?;

    first_life(&setup).await?;
    let second = setup.builder().create().await?;
    println!("second life: sandbox {} is ready", second.id());
    let outcome = second_life(&second, &setup, mib).await;
    // Kill is explicit: dropping the handle leaves the sandbox running.
    let killed = second.kill().await?;
    println!("killed the second sandbox: {killed}");
    outcome?;
    println!("all checks passed");
    Ok(())
}

/// Create, write, checkpoint, kill.
async fn first_life(setup: &Setup) -> Result<(), Failure> {
    // A name you give restores automatically; the first time there is
    // nothing to restore, and that is not an error.
    let first = setup.builder().create().await?;
    println!("first life: sandbox {} is ready", first.id());
    let outcome = async {
        for (path, text) in FILES {
            let entry = first.files().write(path, text).await?;
            println!("wrote {path} ({} bytes)", entry.size);
        }
        let done = first
            .persistence()
            .checkpoint(CheckpointOptions::default().on_progress(|p| {
                println!(
                    "  checkpoint progress: {} files, {} bytes read, {} bytes uploaded",
                    p.files_done, p.bytes_read, p.bytes_uploaded
                );
            }))
            .await?;
        // The outcome also holds the bucket, the key prefix and the URI:
        // not printed, as the SDK logs none of them.
        println!(
            "checkpoint: {} files, {} bytes archived, sha256 {}",
            done.files, done.archive_bytes, done.sha256
        );
        Ok::<_, SandboxError>(())
    }
    .await;
    let killed = first.kill().await?;
    println!("killed the first sandbox: {killed}");
    Ok(outcome?)
}

/// The files are back; then an upload and a download by URL.
async fn second_life(sandbox: &Sandbox, setup: &Setup, mib: u64) -> Result<(), Failure> {
    for (path, text) in FILES {
        let back = sandbox.files().read(path).await?;
        if back != text.as_bytes() {
            return Err(format!("{path} came back different").into());
        }
    }
    println!("second life: {} files are back", FILES.len());

    let size = mib * (1 << 20);
    let ticket = sandbox
        .files()
        .upload_url(
            UPLOAD_PATH,
            UploadUrlOptions::new(setup.staging.clone()).max_bytes(size),
        )
        .await?;
    let started = Instant::now();
    let sent = put(ticket.url(), ticket.headers(), size).await?;
    let entry = ticket.wait(UPLOAD_WAIT).await?;
    println!(
        "upload: {} MiB sent and arrived in {:.1} s",
        mib,
        started.elapsed().as_secs_f64()
    );
    if entry.size != size {
        return Err(format!("the uploaded file has {} bytes, not {size}", entry.size).into());
    }
    let inside = sandbox
        .commands()
        .run(&format!("sha256sum -- '{}'", entry.path))
        .await?;
    let inside = inside.stdout.split_whitespace().next().unwrap_or_default();
    if inside != sent {
        return Err("the sandbox's sha256sum differs from the sent bytes'".into());
    }
    println!("upload: size and sha256 match ({sent})");

    let link = sandbox
        .files()
        .download_url(
            UPLOAD_PATH,
            DownloadUrlOptions::new(setup.staging.clone()).filename("big.bin"),
        )
        .await?;
    let started = Instant::now();
    let (got, hash) = get(link.url()).await?;
    println!(
        "download: {} MiB in {:.1} s",
        got >> 20,
        started.elapsed().as_secs_f64()
    );
    if got != link.size() || hash != link.sha256() || hash != sent {
        return Err("the downloaded bytes differ from the link's size or sha256".into());
    }
    println!("download: size and sha256 match the link's");
    Ok(())
}

/// A client for plain HTTP (the local backend) and HTTPS (AWS).
fn client<B>() -> Result<
    Client<hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>, B>,
    Failure,
>
where
    B: hyper::body::Body + Send,
    B::Data: Send,
{
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_native_roots()?
        .https_or_http()
        .enable_http1()
        .build();
    Ok(Client::builder(TokioExecutor::new()).build(https))
}

/// PUTs `size` generated bytes to `url`, one chunk at a time; the bytes'
/// sha256 (hex).
async fn put(
    url: &str,
    headers: &std::collections::BTreeMap<String, String>,
    size: u64,
) -> Result<String, Failure> {
    let hash = Arc::new(Mutex::new(None::<String>));
    let body = StreamBody::new(Box::pin(generated(size, hash.clone())));
    let mut request = http::Request::put(url).header(http::header::CONTENT_LENGTH, size);
    for (name, value) in headers {
        request = request.header(name, value);
    }
    let response = client()?.request(request.body(body)?).await?;
    let status = response.status();
    // Drain the answer (S3 may explain a refusal in it; not printed).
    response.into_body().collect().await?;
    if !status.is_success() {
        return Err(format!("the upload was answered HTTP {status}").into());
    }
    let hash = hash.lock().map_err(|_| "the hash was poisoned")?.take();
    Ok(hash.ok_or("the body was not sent whole")?)
}

/// `size` pseudo-random bytes in chunks of [`CHUNK`], hashed as they are
/// made; the hex sha256 lands in `out` with the last chunk.
fn generated(
    size: u64,
    out: Arc<Mutex<Option<String>>>,
) -> impl futures_util::Stream<Item = Result<Frame<Bytes>, Infallible>> + Send + 'static {
    struct State {
        left: u64,
        seed: u64,
        hasher: Sha256,
        out: Arc<Mutex<Option<String>>>,
    }
    let state = State {
        left: size,
        seed: 0x9e37_79b9_7f4a_7c15,
        hasher: Sha256::new(),
        out,
    };
    stream::unfold(state, |mut s| async move {
        if s.left == 0 {
            return None;
        }
        let len = usize::try_from(s.left.min(CHUNK as u64)).unwrap_or(CHUNK);
        let mut chunk = Vec::with_capacity(len);
        while chunk.len() < len {
            // xorshift64: cheap bytes that do not compress.
            s.seed ^= s.seed << 13;
            s.seed ^= s.seed >> 7;
            s.seed ^= s.seed << 17;
            let word = s.seed.to_le_bytes();
            let take = word.len().min(len - chunk.len());
            chunk.extend_from_slice(&word[..take]);
        }
        s.hasher.update(&chunk);
        s.left -= len as u64;
        if s.left == 0 {
            // Now, not at the stream's end: with a Content-Length the
            // client stops polling once that many bytes went out.
            let digest = hex(&std::mem::take(&mut s.hasher).finalize());
            if let Ok(mut slot) = s.out.lock() {
                *slot = Some(digest);
            }
        }
        Some((Ok(Frame::data(Bytes::from(chunk))), s))
    })
}

/// GETs `url`, hashing the body as it arrives; its length and sha256 (hex).
async fn get(url: &str) -> Result<(u64, String), Failure> {
    let request = http::Request::get(url).body(Empty::<Bytes>::new())?;
    let response = client()?.request(request).await?;
    if !response.status().is_success() {
        return Err(format!("the download was answered HTTP {}", response.status()).into());
    }
    let mut body = response.into_body();
    let mut hasher = Sha256::new();
    let mut len = 0u64;
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            hasher.update(&data);
            len += data.len() as u64;
        }
    }
    Ok((len, hex(&hasher.finalize())))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
