//! Streaming file reads and writes through the SDK, on the emulator: real
//! AWS client, real gRPC through its proxy to the agent.

use crate::sdk_support;

use futures_util::StreamExt as _;
use rayito::SandboxError;

/// 3.5 MiB of a pattern that shows any reordered or lost chunk.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_write_reads_back_whole_in_order() {
    let emulator = sdk_support::emulator().await;
    let sbx = sdk_support::sandbox(&emulator).await;
    let data = pattern(3 * 1024 * 1024 + 512 * 1024);
    // Chunk sizes around the agent's 1 MiB message limit, one larger than it.
    let sizes = [1, 700 * 1024, 2 * 1024 * 1024 + 3, 64 * 1024];
    let mut pieces = Vec::new();
    let mut at = 0;
    for size in sizes.iter().cycle() {
        if at >= data.len() {
            break;
        }
        let end = (at + size).min(data.len());
        pieces.push(data[at..end].to_vec());
        at = end;
    }
    let entry = sbx
        .files()
        .write_stream("/home/user/big.bin", futures_util::stream::iter(pieces))
        .await
        .expect("the streamed write succeeds");
    assert_eq!(entry.size, data.len() as u64);
    assert_eq!(entry.path, "/home/user/big.bin");

    let mut chunks = sbx
        .files()
        .read_stream("/home/user/big.bin")
        .await
        .expect("the read stream opens");
    let mut read = Vec::new();
    let mut count = 0;
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.expect("every chunk arrives");
        assert!(
            chunk.len() <= 256 * 1024,
            "a chunk of {} bytes",
            chunk.len()
        );
        read.extend_from_slice(&chunk);
        count += 1;
    }
    assert_eq!(read, data);
    assert_eq!(count, 14, "3.5 MiB in 256 KiB chunks");

    // The same file, read whole, and seen by a command at the same path.
    assert_eq!(sbx.files().read("big.bin").await.unwrap(), data);
    let wc = sbx
        .commands()
        .run("wc -c < /home/user/big.bin")
        .await
        .expect("wc runs");
    assert_eq!(wc.stdout.trim(), data.len().to_string());
    sbx.kill().await.expect("kill");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_failures_are_the_same_errors_as_whole_calls() {
    let emulator = sdk_support::emulator().await;
    let sbx = sdk_support::sandbox(&emulator).await;

    let err = sbx
        .files()
        .read_stream("/home/user/missing.txt")
        .await
        .expect_err("a missing file");
    assert!(matches!(err, SandboxError::FileNotFound { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "file not found (files.read_stream): path not found; check the path"
    );

    sbx.files().make_dir("/home/user/dir").await.unwrap();
    let err = sbx
        .files()
        .read_stream("/home/user/dir")
        .await
        .expect_err("a directory");
    assert!(
        matches!(err, SandboxError::InvalidArgument { ref argument, .. } if argument.as_deref() == Some("path")),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "invalid path: the path is not a regular file; pass the path of a file"
    );

    // The agent refuses `..` before it writes anything: resolved, this path
    // would name a file the user may write.
    sbx.files().make_dir("/home/user/sub").await.unwrap();
    let err = sbx
        .files()
        .write_stream(
            "/home/user/sub/../escaped.txt",
            futures_util::stream::iter([b"data".to_vec()]),
        )
        .await
        .expect_err("a path with ..");
    assert!(
        matches!(err, SandboxError::InvalidArgument { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "the agent refused an argument of files.write: invalid path; fix the value before retrying"
    );
    assert!(!sbx.files().exists("/home/user/escaped.txt").await.unwrap());
    let listed = sbx.commands().run("ls -A /home/user").await.unwrap();
    assert!(!listed.stdout.contains("escaped"), "{}", listed.stdout);

    // The disk reserve stops a streamed write like a whole one.
    assert!(emulator.faults().set_disk_reserve(sbx.id(), u64::MAX));
    let err = sbx
        .files()
        .write_stream(
            "/home/user/full.bin",
            futures_util::stream::iter([vec![1u8; 10]]),
        )
        .await
        .expect_err("the disk reserve");
    assert!(matches!(err, SandboxError::DiskFull { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "the sandbox has less than 256 MiB of free disk (files.write); free space or use a larger disk"
    );
    sbx.kill().await.expect("kill");
}
