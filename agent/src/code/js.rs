//! The javascript and typescript kernels: one long-lived `node` per context
//! running `agent/js/driver.js`, which speaks the Python driver's frames.
//!
//! node is started through `sh` so that the protocol gets private
//! descriptors (requests on fd 4, frames on fd 3) while fds 1 and 2 both
//! lead to the kernel's stderr pipe: a subprocess that inherits them writes
//! stderr text instead of corrupting a frame. `sh` first checks that `node`
//! is on the sandbox PATH (exit 127 otherwise), and the driver exits 3 for a
//! typescript context when node cannot strip types; both come back as
//! distinct errors so that the caller can say what is missing.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc;

use super::kernel::{self, KernelEvent, KernelSpec, Started};
use super::python;
use super::validate::Language;
use crate::isolation::launch::Stdio;
use crate::sandbox::SandboxEnv;
use crate::text::Utf8Decoder;

/// The driver program, shipped inside the agent.
pub(crate) const DRIVER_SOURCE: &str = include_str!("../../js/driver.js");

/// The shell, by absolute path so that a PATH without node still finds it.
const SH: &str = "/bin/sh";
const READ_SIZE: usize = 32 * 1024;
/// `sh`'s status when `command -v node` finds nothing.
const EXIT_NO_NODE: i32 = 127;
/// The driver's status when a typescript context has no type stripping.
const EXIT_NO_TYPESCRIPT: i32 = 3;

/// The wrapper: check for node, move the protocol to fds 3/4, run the driver.
const WRAPPER: &str = "command -v node >/dev/null 2>&1 || exit 127\n\
exec 3>&1 4<&0 1>&2 0</dev/null\n\
exec node --no-warnings -e \"$1\" \"$2\"\n";

/// Starts node with the driver and waits for its `ready` frame.
///
/// # Errors
/// `NotFound` when node is not on the sandbox PATH, `Unsupported` when a
/// typescript context's node cannot strip types, any other I/O error as is.
pub(crate) async fn spawn(
    env: &SandboxEnv,
    spec: &KernelSpec,
    events: mpsc::Sender<KernelEvent>,
) -> io::Result<Started> {
    let launched = kernel::launch(
        env,
        spec,
        SH,
        vec![
            "-c".to_owned(),
            WRAPPER.to_owned(),
            "sh".to_owned(),
            DRIVER_SOURCE.to_owned(),
            spec.language.as_str().to_owned(),
        ],
        Stdio::Piped,
    )?;
    let stderr = launched
        .stderr
        .ok_or_else(|| io::Error::other("no stderr pipe"))?;
    let mut started = launched.started;
    let mut frames = python::frames(launched.stdout);
    if python::await_ready(&mut frames).await?.is_err() {
        // The wrapper or the driver exited: its status says why.
        let status = tokio::time::timeout(python::READY_TIMEOUT, started.child.wait()).await;
        return Err(
            match status.ok().and_then(|s| s.ok()).and_then(|s| s.code()) {
                Some(EXIT_NO_NODE) => io::Error::new(io::ErrorKind::NotFound, "node not found"),
                Some(EXIT_NO_TYPESCRIPT) if spec.language == Language::TypeScript => {
                    io::Error::new(io::ErrorKind::Unsupported, "node cannot strip types")
                }
                _ => io::Error::other("kernel exited before it was ready"),
            },
        );
    }
    tokio::spawn(python::pump_frames(frames, events.clone()));
    tokio::spawn(pump_stderr(stderr, events));
    Ok(started)
}

/// Forwards what reaches node's fds 1 and 2 directly (a subprocess that
/// inherited them, node's own fatal messages) as stderr text.
async fn pump_stderr<R: AsyncRead + Unpin>(mut reader: R, events: mpsc::Sender<KernelEvent>) {
    let mut decoder = Utf8Decoder::default();
    let mut read = vec![0u8; READ_SIZE];
    loop {
        let n = match reader.read(&mut read).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let text = decoder.decode(&read[..n]);
        if !text.is_empty() && events.send(KernelEvent::Stderr(text)).await.is_err() {
            return;
        }
    }
}
