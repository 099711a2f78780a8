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
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use serde::Deserialize;
use tokio::io::AsyncRead;
use tokio::sync::mpsc;
use tokio_util::codec::{Encoder, FramedRead, LengthDelimitedCodec};

use super::kernel::{self, KernelEvent, KernelSpec, Started};
use crate::isolation::launch::Stdio;
use crate::pb;
use crate::sandbox::SandboxEnv;

/// The driver program, shipped inside the agent.
pub(crate) const DRIVER_SOURCE: &str = include_str!("../../python/driver.py");

/// The interpreter, looked up on the sandbox PATH.
pub(crate) const PYTHON: &str = "python3";

/// How long a fresh interpreter (python3 or node) may take to say it is
/// ready.
pub(crate) const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Frames larger than this are a protocol error: the kernel is taken for
/// dead. A cell can write to the driver's protocol descriptor itself, so a
/// frame's length is hostile: it is checked against this cap before any
/// byte of the body is waited for, and nothing is reserved from it (the
/// buffer grows with what arrives). 32 MiB holds every frame the drivers
/// send: they split output, cap each mime value at 8 MiB and shrink a
/// result or error frame that would be larger (`_MAX_FRAME_BYTES` in
/// `driver.py`, `MAX_FRAME_BYTES` in `driver.js`).
pub(crate) const MAX_FRAME_BYTES: usize = 32 * 1024 * 1024;

/// One frame from the driver.
#[derive(Debug, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub(crate) enum DriverFrame {
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
    let launched = kernel::launch(
        env,
        spec,
        PYTHON,
        vec!["-c".to_owned(), DRIVER_SOURCE.to_owned()],
        Stdio::Null,
    )?;
    let mut frames = frames(launched.stdout);
    await_ready(&mut frames).await??;
    tokio::spawn(pump_frames(frames, events));
    Ok(launched.started)
}

/// Waits for a driver's `ready` frame (the Python driver's, or the node
/// driver's, which speaks the same frames): `Ok(Ok(()))` once it came,
/// `Ok(Err(_))` when the driver's output ended or broke first (it died: the
/// caller may ask how), `Err` when another frame came first or none within
/// [`READY_TIMEOUT`].
pub(crate) async fn await_ready<R: AsyncRead + Unpin>(
    frames: &mut Frames<R>,
) -> io::Result<io::Result<()>> {
    let first = tokio::time::timeout(READY_TIMEOUT, next_frame(frames))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "kernel did not become ready"))?;
    match first {
        Ok(DriverFrame::Ready) => Ok(Ok(())),
        Ok(_) => Err(io::Error::other("kernel broke its protocol at start")),
        Err(err) => Ok(Err(err)),
    }
}

/// The codec of the driver protocol: a 4-byte big-endian length, then the
/// body (`LengthDelimitedCodec`'s defaults), bodies capped at [`MAX_FRAME_BYTES`].
/// Used to encode requests; frames from the driver are read by
/// [`FrameDecoder`].
fn codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .max_frame_length(MAX_FRAME_BYTES)
        .new_codec()
}

/// Reads the driver's frames: a 4-byte big-endian length checked against
/// [`MAX_FRAME_BYTES`] at once, then the body, without reserving room for
/// the announced length (`LengthDelimitedCodec` reserves it: a forged
/// header would make the agent allocate the cap per kernel).
#[derive(Debug, Default)]
pub(crate) struct FrameDecoder;

impl tokio_util::codec::Decoder for FrameDecoder {
    type Item = bytes::BytesMut;
    type Error = io::Error;

    fn decode(&mut self, src: &mut bytes::BytesMut) -> io::Result<Option<bytes::BytesMut>> {
        let Some(head) = src.first_chunk::<4>() else {
            return Ok(None);
        };
        let len = u32::from_be_bytes(*head) as usize;
        if len > MAX_FRAME_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "a frame from the kernel driver is larger than the 32 MiB cap",
            ));
        }
        if src.len() - 4 < len {
            return Ok(None);
        }
        bytes::Buf::advance(src, 4);
        Ok(Some(src.split_to(len)))
    }
}

/// The driver's output as a stream of frames.
pub(crate) type Frames<R> = FramedRead<R, FrameDecoder>;

/// Reads `reader` as driver frames.
pub(crate) fn frames<R: AsyncRead>(reader: R) -> Frames<R> {
    FramedRead::new(reader, FrameDecoder)
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
    encode_frame(body)
}

/// One body, length-prefixed.
pub(crate) fn encode_frame(body: Vec<u8>) -> io::Result<Vec<u8>> {
    let mut frame = bytes::BytesMut::with_capacity(4 + body.len());
    codec().encode(Bytes::from(body), &mut frame)?;
    Ok(frame.to_vec())
}

/// The next frame, decoded; end of stream is `UnexpectedEof`.
pub(crate) async fn next_frame<R: AsyncRead + Unpin>(
    frames: &mut Frames<R>,
) -> io::Result<DriverFrame> {
    let body = frames
        .next()
        .await
        .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))??;
    serde_json::from_slice(&body).map_err(io::Error::other)
}

/// Turns the driver's frames into kernel events until it exits.
pub(crate) async fn pump_frames<R: AsyncRead + Unpin>(
    mut frames: Frames<R>,
    events: mpsc::Sender<KernelEvent>,
) {
    loop {
        let event = match next_frame(&mut frames).await {
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
            // E2B's chart and data documents have fields of their own
            // (the reference agent's wire: `chart` 12, `data` 13).
            "e2b/chart" => &mut result.chart,
            "e2b/data" => &mut result.data,
            _ => {
                result.extra.insert(mime, content);
                continue;
            }
        };
        *slot = Some(content);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_are_a_big_endian_length_then_the_body() {
        let frame = encode_frame(br#"{"t":"ready"}"#.to_vec()).unwrap();
        assert_eq!(&frame[..4], &[0, 0, 0, 13]);
        let request = request("1 + 1", &BTreeMap::new(), 3).unwrap();
        let len = u32::from_be_bytes(request[..4].try_into().unwrap()) as usize;
        assert_eq!(len, request.len() - 4);
        // Two frames back to back, split anywhere, decode as two.
        let both = [
            frame.clone(),
            encode_frame(br#"{"t":"running"}"#.to_vec()).unwrap(),
        ]
        .concat();
        let (a, b) = both.split_at(6);
        let (mut writer, reader) = tokio::io::duplex(64);
        let (a, b) = (a.to_vec(), b.to_vec());
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt as _;
            writer.write_all(&a).await.unwrap();
            tokio::task::yield_now().await;
            writer.write_all(&b).await.unwrap();
        });
        let mut frames = frames(reader);
        assert!(matches!(
            next_frame(&mut frames).await.unwrap(),
            DriverFrame::Ready
        ));
        assert!(matches!(
            next_frame(&mut frames).await.unwrap(),
            DriverFrame::Running
        ));
        let end = next_frame(&mut frames).await.unwrap_err();
        assert_eq!(end.kind(), io::ErrorKind::UnexpectedEof);
    }
}
