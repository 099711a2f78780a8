//! The local backend across invocations.
//!
//! The SDK's embedded local backend lives inside one process, and every
//! `rayito` invocation is a new process. So the first `--local` command
//! starts a detached daemon (`rayito __local-backend`, this same binary)
//! that runs the MicroVMs emulator, and records its endpoint, region, image
//! ARN, pid and the access key the emulator generated in
//! `<cache>/local/backend.json` (0600, in a 0700 directory). Every
//! invocation then uses the SDK's AWS path against that endpoint, signing
//! with that key: the emulator refuses any other, so sandbox code on this
//! host cannot drive it.
//!
//! The daemon stops on `rayito local stop`, SIGTERM or Ctrl-C, or after
//! `RAYITO_LOCAL_IDLE_SECS` (default 1800) without a control-plane call;
//! its sandboxes (processes on this host) and their directories go with it.
//! Its images (templates built with `--local`) and objects stay in its root,
//! one directory per cache in the temporary directory, for the next daemon.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rayito_emulator::{Emulator, EmulatorConfig, LatencyProfile, Operation};
use rustix::process::{Pid, Signal};
use serde::{Deserialize, Serialize};

use crate::cache;

/// The daemon's idle limit in seconds, when set.
pub const IDLE_ENV: &str = "RAYITO_LOCAL_IDLE_SECS";
const DEFAULT_IDLE: Duration = Duration::from_secs(30 * 60);
/// How often a build's state is read on the local daemon. The CLI's
/// client reaches it as AWS (an endpoint, `AwsOptions`), so the SDK cannot
/// tell and would read at its AWS interval, 10 s: every local build would
/// take at least that. The daemon answers at once.
pub const BUILD_POLL_INTERVAL: Duration = Duration::from_millis(200);
/// What the daemon records for later invocations.
#[derive(Clone, Serialize, Deserialize, PartialEq)]
pub struct BackendState {
    /// The daemon's process id.
    pub pid: i32,
    /// The emulated MicroVMs API (`http://127.0.0.1:<port>`).
    pub endpoint_url: String,
    /// The emulator's region.
    pub region: String,
    /// The ARN of its default image (`rayito-base`).
    pub image_arn: String,
    /// The access key id the emulator accepts.
    pub access_key_id: String,
    /// That key's secret.
    pub secret_access_key: String,
    /// The emulator's S3 endpoint (template artifacts).
    #[serde(default)]
    pub s3_endpoint_url: Option<String>,
    /// The emulator's artifact bucket.
    #[serde(default)]
    pub artifact_bucket: Option<String>,
}

impl std::fmt::Debug for BackendState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackendState")
            .field("pid", &self.pid)
            .field("endpoint_url", &self.endpoint_url)
            .field("region", &self.region)
            .field("image_arn", &self.image_arn)
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

impl BackendState {
    /// What `local status --output json` prints: every field but the
    /// secret access key.
    pub fn public_view(&self) -> serde_json::Value {
        serde_json::json!({
            "pid": self.pid,
            "endpoint_url": self.endpoint_url,
            "region": self.region,
            "image_arn": self.image_arn,
            "access_key_id": self.access_key_id,
            "s3_endpoint_url": self.s3_endpoint_url,
            "artifact_bucket": self.artifact_bucket,
        })
    }

    /// The image ARN for a template: ARNs as they are, bare names on the
    /// emulator's account and region, none for the default image.
    pub fn image_for(&self, template: Option<&str>) -> String {
        match template {
            Some(t) if t.starts_with("arn:") => t.to_owned(),
            Some(name) => {
                let prefix = self.image_arn.rsplit_once(':').map_or("", |(p, _)| p);
                format!("{prefix}:{name}")
            }
            None => self.image_arn.clone(),
        }
    }
}

fn state_dir() -> PathBuf {
    cache::dir().join("local")
}

fn state_path() -> PathBuf {
    state_dir().join("backend.json")
}

fn alive(pid: i32) -> bool {
    Pid::from_raw(pid).is_some_and(|pid| rustix::process::test_kill_process(pid).is_ok())
}

/// The running daemon's state, if one is recorded and its pid is alive.
pub fn running() -> Option<BackendState> {
    let text = fs::read_to_string(state_path()).ok()?;
    let state: BackendState = serde_json::from_str(&text).ok()?;
    alive(state.pid).then_some(state)
}

/// The running daemon, started first when there is none.
///
/// # Errors
/// When the daemon cannot be spawned or does not record its state within
/// 60 s (the message points at its log).
pub fn ensure() -> io::Result<BackendState> {
    if let Some(state) = running() {
        return Ok(state);
    }
    let dir = state_dir();
    cache::private_dir(&dir)?;
    // One starter at a time: a second invocation racing the first waits for
    // the first one's daemon instead of starting its own.
    let _lock = match StartLock::take(&dir)? {
        Some(lock) => lock,
        None => return wait_for_other_starter(),
    };
    if let Some(state) = running() {
        return Ok(state);
    }
    let _ = fs::remove_file(state_path());
    let log_path = dir.join("backend.log");
    let log = fs::File::create(&log_path)?;
    let mut child = {
        use std::os::unix::process::CommandExt as _;
        Command::new(std::env::current_exe()?)
            .arg("__local-backend")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            // It must not keep the caller's working directory busy.
            .current_dir("/")
            // Its own process group: Ctrl-C in the terminal that started it
            // does not stop it.
            .process_group(0)
            .spawn()?
    };
    let started = Instant::now();
    let child_pid = i32::try_from(child.id()).unwrap_or(-1);
    loop {
        if let Some(state) = running()
            && state.pid == child_pid
        {
            return Ok(state);
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(io::Error::other(format!(
                "the local backend exited at start ({status}); see {}",
                log_path.display()
            )));
        }
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(io::Error::other(format!(
                "the local backend did not start within 60 s; see {}",
                log_path.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `<cache>/local/starting`, held while a daemon is being started; removed
/// on drop. One older than a minute is a crashed starter's and is taken over.
struct StartLock {
    path: PathBuf,
}

impl StartLock {
    fn take(dir: &Path) -> io::Result<Option<StartLock>> {
        let path = dir.join("starting");
        for _ in 0..2 {
            match fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(_) => return Ok(Some(StartLock { path })),
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
                    let stale = fs::metadata(&path)
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| t.elapsed().ok())
                        .is_some_and(|age| age > Duration::from_secs(60));
                    if !stale {
                        return Ok(None);
                    }
                    let _ = fs::remove_file(&path);
                }
                Err(err) => return Err(err),
            }
        }
        Ok(None)
    }
}

impl Drop for StartLock {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

fn wait_for_other_starter() -> io::Result<BackendState> {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(60) {
        if let Some(state) = running() {
            return Ok(state);
        }
        if !state_dir().join("starting").exists() {
            // The other starter gave up or finished without a daemon: try
            // once more ourselves.
            return running().map_or_else(ensure, Ok);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(io::Error::other(
        "another rayito invocation is starting the local backend and it did not come up within 60 s",
    ))
}

/// Stops the daemon (SIGTERM, then waits up to 30 s for it to end).
/// Returns whether one was running.
///
/// # Errors
/// When it does not end in time.
pub fn stop() -> io::Result<bool> {
    let Some(state) = running() else {
        let _ = fs::remove_file(state_path());
        return Ok(false);
    };
    if let Some(pid) = Pid::from_raw(state.pid) {
        let _ = rustix::process::kill_process(pid, Signal::TERM);
    }
    let started = Instant::now();
    while alive(state.pid) {
        if started.elapsed() > Duration::from_secs(30) {
            return Err(io::Error::other(format!(
                "the local backend (pid {}) did not stop within 30 s",
                state.pid
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = fs::remove_file(state_path());
    Ok(true)
}

/// The daemon itself (`rayito __local-backend`): runs the emulator until
/// SIGTERM, Ctrl-C or the idle limit. Returns the process exit code.
pub fn serve() -> i32 {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("rayito local backend: cannot start a runtime: {err}");
            return 1;
        }
    };
    runtime.block_on(serve_async())
}

async fn serve_async() -> i32 {
    let idle = std::env::var(IDLE_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(DEFAULT_IDLE, Duration::from_secs);
    let root = match stable_root() {
        Ok(root) => root,
        Err(err) => {
            eprintln!("rayito local backend: cannot prepare its root: {err}");
            return 1;
        }
    };
    let gateway_upstreams = match crate::local_upstreams::from_env() {
        Ok(upstreams) => upstreams,
        Err(err) => {
            eprintln!("rayito local backend: {err}");
            return 1;
        }
    };
    // As the SDK's embedded local backend does: the profile applies to the
    // daemon's whole life, and a value it cannot parse stops it at start.
    let latency = match LatencyProfile::from_env(|name| std::env::var(name).ok()) {
        Ok(latency) => latency,
        Err(err) => {
            eprintln!("rayito local backend: {err}");
            return 1;
        }
    };
    let config = EmulatorConfig {
        root: root.clone(),
        gateway_upstreams,
        latency,
        // Templates built here outlive the daemon (`local stop`, the idle
        // exit): the next daemon on this root finds them.
        keep_images: true,
        ..EmulatorConfig::default()
    };
    let emulator = match Emulator::start(config).await {
        Ok(emulator) => emulator,
        Err(err) => {
            eprintln!("rayito local backend: cannot start the emulator: {err}");
            return 1;
        }
    };
    // `rayito::LOCAL_BUCKET` exists here as on the SDK's embedded local
    // backend (the emulator's object store keeps a bucket as a directory
    // under `<root>/s3`), so a program reaching this daemon can persist
    // and stage through it without making a bucket first.
    if let Err(err) = tokio::fs::create_dir_all(root.join("s3").join(rayito::LOCAL_BUCKET)).await {
        eprintln!("rayito local backend: cannot make its bucket: {err}");
        emulator.shutdown().await;
        return 1;
    }
    let arn = emulator.image_arn("rayito-base");
    let state = BackendState {
        pid: i32::try_from(std::process::id()).unwrap_or(-1),
        endpoint_url: emulator.endpoint_url(),
        region: arn.split(':').nth(3).unwrap_or("us-east-1").to_owned(),
        image_arn: arn,
        access_key_id: emulator.access_key().id.clone(),
        secret_access_key: emulator.access_key().secret.clone(),
        s3_endpoint_url: Some(emulator.s3_endpoint_url()),
        artifact_bucket: Some(emulator.artifact_bucket()),
    };
    if let Err(err) = record(&state) {
        eprintln!("rayito local backend: cannot record its state: {err}");
        emulator.shutdown().await;
        return 1;
    }
    eprintln!(
        "rayito local backend: serving {} (pid {}); sandbox code runs on this host",
        state.endpoint_url, state.pid
    );
    let stopped = stop_signal();
    tokio::pin!(stopped);
    let mut last_calls = 0;
    let mut last_activity = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            () = &mut stopped => break,
            _ = tick.tick() => {
                // EFS calls (`rayito volume ...`) are activity too.
                let calls: u64 = Operation::ALL.iter().map(|op| emulator.calls(*op)).sum::<u64>()
                    + emulator.efs().total_calls();
                if calls != last_calls {
                    last_calls = calls;
                    last_activity = Instant::now();
                } else if last_activity.elapsed() >= idle {
                    eprintln!("rayito local backend: idle for {} s, stopping", idle.as_secs());
                    break;
                }
            }
        }
    }
    // Only our own record is removed (a newer daemon may have replaced it).
    if running().is_some_and(|s| s.pid == state.pid) {
        let _ = fs::remove_file(state_path());
    }
    emulator.shutdown().await;
    0
}

/// What a daemon keeps in its root for the next one: the images (their
/// registry and layers), the object store (the artifacts and
/// `rayito::LOCAL_BUCKET`) and the EFS file systems (volumes are data).
/// Anything else there is a sandbox's directory.
const KEPT: [&str; 3] = ["images", "s3", "efs"];

/// The daemon's root: one path per cache directory, the same for every
/// daemon of that cache, in the temporary directory (its sandboxes' uid
/// must traverse the directories above it, which the 0700 cache is not).
/// Its name is not an emulator's (`rayito-emulator-*`), so no emulator's
/// pruning of dead roots takes it. A directory a killed daemon's sandboxes
/// left is removed here; the kept parts stay.
///
/// # Errors
/// The filesystem's.
fn stable_root() -> io::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
    let cache = std::path::absolute(cache::dir())?;
    // FNV-1a: stable across builds, which `DefaultHasher` is not promised.
    let hash = cache
        .as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
        });
    let uid = rustix::process::geteuid().as_raw();
    let root = std::env::temp_dir().join(format!("rayito-local-{uid}-{hash:016x}"));
    match fs::DirBuilder::new().mode(0o711).create(&root) {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
            // Never another user's directory (or a link) in a shared /tmp.
            let meta = fs::symlink_metadata(&root)?;
            if !meta.is_dir() || meta.uid() != uid {
                return Err(io::Error::other(format!(
                    "{} is not a directory of this user",
                    root.display()
                )));
            }
        }
        Err(err) => return Err(err),
    }
    for entry in fs::read_dir(&root)? {
        let entry = entry?;
        if KEPT.iter().any(|kept| entry.file_name() == *kept) {
            continue;
        }
        let path = entry.path();
        let _ = if entry.file_type()?.is_dir() {
            fs::remove_dir_all(&path)
        } else {
            fs::remove_file(&path)
        };
    }
    Ok(root)
}

fn record(state: &BackendState) -> io::Result<()> {
    let path = state_path();
    let tmp = path.with_extension("tmp");
    write_private(&tmp, &serde_json::to_vec(state).map_err(io::Error::other)?)?;
    fs::rename(tmp, path)
}

fn write_private(path: &Path, data: &[u8]) -> io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(data)
}

async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::BackendState;

    #[test]
    fn bare_template_names_become_arns_on_the_emulator() {
        let state = BackendState {
            pid: 1,
            endpoint_url: "http://127.0.0.1:1".into(),
            region: "us-east-1".into(),
            image_arn: "arn:aws:lambda:us-east-1:000000000000:microvm-image:rayito-base".into(),
            access_key_id: "AKIDTEST".into(),
            secret_access_key: "secret".into(),
            s3_endpoint_url: None,
            artifact_bucket: None,
        };
        assert_eq!(state.image_for(None), state.image_arn);
        assert_eq!(
            state.image_for(Some("other")),
            "arn:aws:lambda:us-east-1:000000000000:microvm-image:other"
        );
        assert_eq!(state.image_for(Some("arn:x")), "arn:x");
    }
}
