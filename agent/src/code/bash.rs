//! The bash kernel: one persistent `bash` per context, so `cd` and variables
//! carry over between cells. The agent writes each cell's lines followed by a
//! random end line on the command pipe (a private fd; the cell's own stdin is
//! /dev/null); the wrapper `eval`s them in the shell itself, then writes a
//! random marker to both output pipes so the agent knows every byte of the
//! cell's output has arrived.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc;

use super::kernel::{self, KernelEvent, KernelSpec, Started};
use crate::isolation::launch::Stdio;
use crate::sandbox::SandboxEnv;
use crate::text::Utf8Decoder;

const BASH: &str = "bash";
const READ_SIZE: usize = 32 * 1024;

/// Starts the shell with its driver loop.
pub(crate) fn spawn(
    env: &SandboxEnv,
    spec: &KernelSpec,
    events: mpsc::Sender<KernelEvent>,
) -> io::Result<Started> {
    let token = format!(
        "{:016x}{:016x}",
        rand::random::<u64>(),
        rand::random::<u64>()
    );
    let end_line = format!("__rayito_end_{token}");
    let marker = format!("\x1erayito-mark-{token}\x1e");
    let launched = kernel::launch(
        env,
        spec,
        BASH,
        vec![
            "--noprofile".to_owned(),
            "--norc".to_owned(),
            "-c".to_owned(),
            wrapper(&end_line, &token),
        ],
        Stdio::Piped,
    )?;
    let stderr = launched
        .stderr
        .ok_or_else(|| io::Error::other("no stderr pipe"))?;
    tokio::spawn(pump_output(
        launched.stdout,
        marker.clone().into_bytes(),
        events.clone(),
        KernelEvent::Stdout,
    ));
    tokio::spawn(pump_output(
        stderr,
        marker.into_bytes(),
        events,
        KernelEvent::Stderr,
    ));
    Ok(Started {
        bash_end_line: end_line,
        ..launched.started
    })
}

/// The shell program: read a cell up to the end line, eval it, mark both streams.
fn wrapper(end_line: &str, token: &str) -> String {
    format!(
        r#"exec 60<&0 61>&1 62>&2 0</dev/null
while :; do
  __rayito_code=
  while IFS= read -r -u 60 __rayito_line || exit 0; do
    if [ "$__rayito_line" = '{end_line}' ]; then break; fi
    __rayito_code+="$__rayito_line"$'\n'
  done
  eval "$__rayito_code"
  printf '\036rayito-mark-{token}\036' >&61
  printf '\036rayito-mark-{token}\036' >&62
done
"#
    )
}

/// The bytes written to the shell for one cell.
pub(crate) fn request(code: &str, end_line: &str) -> Vec<u8> {
    let mut out = String::with_capacity(code.len() + end_line.len() + 2);
    out.push_str(code);
    if !code.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(end_line);
    out.push('\n');
    out.into_bytes()
}

/// Forwards one output pipe as text events, turning each marker into `Mark`.
async fn pump_output<R: AsyncRead + Unpin>(
    mut reader: R,
    marker: Vec<u8>,
    events: mpsc::Sender<KernelEvent>,
    wrap: fn(String) -> KernelEvent,
) {
    let mut decoder = Utf8Decoder::default();
    let mut buf: Vec<u8> = Vec::new();
    let mut read = vec![0u8; READ_SIZE];
    loop {
        let n = match reader.read(&mut read).await {
            Ok(0) | Err(_) => {
                let _ = events.send(KernelEvent::Died).await;
                return;
            }
            Ok(n) => n,
        };
        buf.extend_from_slice(&read[..n]);
        let mut out: Vec<KernelEvent> = Vec::new();
        while let Some(at) = find(&buf, &marker) {
            let text = decoder.decode(&buf[..at]);
            if !text.is_empty() {
                out.push(wrap(text));
            }
            out.push(KernelEvent::Mark);
            buf.drain(..at + marker.len());
        }
        let keep = held_back(&buf, &marker);
        let text = decoder.decode(&buf[..buf.len() - keep]);
        if !text.is_empty() {
            out.push(wrap(text));
        }
        buf.drain(..buf.len() - keep);
        for event in out {
            if events.send(event).await.is_err() {
                return;
            }
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Length of the longest tail of `buf` that could be the start of `marker`
/// (held back until the next read says whether it is).
fn held_back(buf: &[u8], marker: &[u8]) -> usize {
    let max = buf.len().min(marker.len() - 1);
    (1..=max)
        .rev()
        .find(|&k| buf.ends_with(&marker[..k]))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_back_only_a_marker_prefix() {
        assert_eq!(held_back(b"hello\x1era", b"\x1erayito"), 3);
        assert_eq!(held_back(b"hello", b"\x1erayito"), 0);
        assert_eq!(find(b"ab\x1erayitocd", b"\x1erayito"), Some(2));
    }

    #[test]
    fn request_ends_with_the_end_line() {
        assert_eq!(request("echo hi", "END"), b"echo hi\nEND\n");
        assert_eq!(request("echo hi\n", "END"), b"echo hi\nEND\n");
    }
}
