//! The Python kernel: `python3 -c <driver>` speaking length-prefixed JSON
//! frames over its stdin/stdout (the protocol is described at the top of
//! `agent/python/driver.py`).
//!
//! The driver is embedded in the agent binary and handed to the interpreter
//! with `-c` rather than as a file in the sandbox root: the root's host path
//! is hidden inside the sandbox's mount namespace (its `/tmp` is bind-mounted
//! over the host's), and the guest path does not exist without one, while
//! `-c` works the same in both.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::process::Stdio;
use std::time::Duration;

use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc;

use super::kernel::{KernelEvent, KernelSpec, Started};
use crate::pb;
use crate::sandbox::{SandboxEnv, SpawnSpec};

/// The driver program, shipped inside the agent.
pub(crate) const DRIVER_SOURCE: &str = include_str!("../../python/driver.py");

/// The interpreter, looked up on the sandbox PATH.
const PYTHON: &str = "python3";

/// How long a fresh interpreter may take to say it is ready.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Frames larger than this are a protocol error (results are capped well below).
const MAX_FRAME_BYTES: usize = 256 * 1024 * 1024;

/// One frame from the driver.
#[derive(Debug, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
enum DriverFrame {
    Ready,
    Running,
    Stdout {
        text: String,
    },
    Stderr {
        text: String,
    },
    Result {
        main: bool,
        data: HashMap<String, String>,
    },
    Error {
        name: String,
        value: String,
        traceback: Vec<String>,
    },
    Done {
        #[allow(dead_code)]
        count: u64,
    },
}

/// Starts the driver and waits for its `ready` frame.
pub(crate) async fn spawn(
    env: &SandboxEnv,
    spec: &KernelSpec,
    events: mpsc::Sender<KernelEvent>,
) -> io::Result<Started> {
    let mut cmd = env.command(&SpawnSpec {
        program: PYTHON.to_owned(),
        args: vec!["-c".to_owned(), DRIVER_SOURCE.to_owned()],
        envs: spec.envs.clone(),
        cwd: Some(spec.cwd.clone()),
    });
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd.spawn()?;
    let pid = child
        .id()
        .ok_or_else(|| io::Error::other("kernel exited at once"))?;
    env.track(pid);
    let stdin = child
        .stdin
        .take()
        .ok_or_else(|| io::Error::other("no stdin pipe"))?;
    let mut stdout = child
        .stdout
        .take()
        .ok_or_else(|| io::Error::other("no stdout pipe"))?;

    let first = tokio::time::timeout(READY_TIMEOUT, read_frame(&mut stdout))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "kernel did not become ready"))??;
    if !matches!(first, DriverFrame::Ready) {
        return Err(io::Error::other("kernel broke its protocol at start"));
    }
    tokio::spawn(pump_frames(stdout, events));
    Ok(Started {
        child,
        pgid: pid as i32,
        stdin,
        bash_end_line: String::new(),
    })
}

/// The request frame for one cell.
pub(crate) fn request(
    code: &str,
    envs: &BTreeMap<String, String>,
    count: u64,
) -> io::Result<Vec<u8>> {
    let body = serde_json::to_vec(&serde_json::json!({
        "op": "execute",
        "code": code,
        "envs": envs,
        "count": count,
    }))
    .map_err(io::Error::other)?;
    let len = u32::try_from(body.len()).map_err(io::Error::other)?;
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&body);
    Ok(frame)
}

async fn read_frame<R: AsyncRead + Unpin>(reader: &mut R) -> io::Result<DriverFrame> {
    let mut header = [0u8; 4];
    reader.read_exact(&mut header).await?;
    let len = u32::from_be_bytes(header) as usize;
    if len > MAX_FRAME_BYTES {
        return Err(io::Error::other("kernel frame too large"));
    }
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body).await?;
    serde_json::from_slice(&body).map_err(io::Error::other)
}

/// Turns the driver's frames into kernel events until it exits.
async fn pump_frames<R: AsyncRead + Unpin>(mut reader: R, events: mpsc::Sender<KernelEvent>) {
    loop {
        let event = match read_frame(&mut reader).await {
            Ok(DriverFrame::Ready) => continue,
            Ok(DriverFrame::Running) => KernelEvent::Running,
            Ok(DriverFrame::Stdout { text }) => KernelEvent::Stdout(text),
            Ok(DriverFrame::Stderr { text }) => KernelEvent::Stderr(text),
            Ok(DriverFrame::Result { main, data }) => {
                KernelEvent::Result(Box::new(result_from_bundle(main, data)))
            }
            Ok(DriverFrame::Error {
                name,
                value,
                traceback,
            }) => KernelEvent::Error(pb::ExecutionError {
                name,
                value,
                traceback,
            }),
            Ok(DriverFrame::Done { .. }) => KernelEvent::Done,
            Err(_) => {
                let _ = events.send(KernelEvent::Died).await;
                return;
            }
        };
        if events.send(event).await.is_err() {
            return;
        }
    }
}

/// Maps a Jupyter mime bundle onto `ExecutionResult` (unknown mimes go to `extra`).
pub(crate) fn result_from_bundle(main: bool, data: HashMap<String, String>) -> pb::ExecutionResult {
    let mut result = pb::ExecutionResult {
        is_main_result: main,
        ..Default::default()
    };
    for (mime, content) in data {
        let slot = match mime.as_str() {
            "text/plain" => &mut result.text,
            "text/html" => &mut result.html,
            "text/markdown" => &mut result.markdown,
            "text/latex" => &mut result.latex,
            "application/json" => &mut result.json,
            "application/javascript" => &mut result.javascript,
            "image/png" => &mut result.png,
            "image/jpeg" => &mut result.jpeg,
            "image/svg+xml" => &mut result.svg,
            "application/pdf" => &mut result.pdf,
            _ => {
                result.extra.insert(mime, content);
                continue;
            }
        };
        *slot = Some(content);
    }
    result
}
