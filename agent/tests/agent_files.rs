//! FilesystemService through a real tonic client over loopback.

use crate::support;

use std::time::Duration;

use rayito_agent::pb;
use support::{TestAgent, assert_status, run_bash};
use tonic::Code;

/// The messages the SDK sends for one file: path (+mode) with the first
/// chunk, then chunk-only messages of at most 1 MiB.
fn file_messages(path: &str, data: &[u8], mode: Option<u32>) -> Vec<pb::WriteRequest> {
    let mut out = Vec::new();
    let mut chunks = data.chunks(1 << 20);
    out.push(pb::WriteRequest {
        path: Some(path.to_owned()),
        mode,
        chunk: chunks.next().unwrap_or_default().to_vec().into(),
        ..Default::default()
    });
    for c in chunks {
        out.push(pb::WriteRequest {
            chunk: c.to_vec().into(),
            ..Default::default()
        });
    }
    out
}

async fn write(
    t: &TestAgent,
    msgs: Vec<pb::WriteRequest>,
) -> Result<pb::WriteResponse, tonic::Status> {
    t.files()
        .write(tokio_stream::iter(msgs))
        .await
        .map(|r| r.into_inner())
}

async fn read(t: &TestAgent, path: &str) -> Result<Vec<u8>, tonic::Status> {
    let mut stream = t
        .files()
        .read(pb::ReadRequest {
            path: path.into(),
            user: None,
        })
        .await?
        .into_inner();
    let mut out = Vec::new();
    while let Some(msg) = stream.message().await? {
        assert!(msg.chunk.len() <= 256 * 1024);
        out.extend_from_slice(&msg.chunk);
    }
    Ok(out)
}

async fn stat(t: &TestAgent, path: &str) -> Result<pb::EntryInfo, tonic::Status> {
    t.files()
        .stat(pb::StatRequest {
            path: path.into(),
            user: None,
        })
        .await
        .map(|r| r.into_inner().entry.expect("entry"))
}

#[tokio::test]
async fn ten_mib_round_trip() {
    let t = TestAgent::start().await;
    let data: Vec<u8> = (0..10 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    let resp = write(&t, file_messages("/home/user/big.bin", &data, None))
        .await
        .unwrap();
    assert_eq!(resp.entries.len(), 1);
    let e = &resp.entries[0];
    assert_eq!(
        (e.path.as_str(), e.name.as_str(), e.size),
        ("/home/user/big.bin", "big.bin", data.len() as u64)
    );
    assert_eq!((e.mode, e.permissions.as_str()), (0o644, "-rw-r--r--"));
    assert_eq!(e.r#type, pb::FileType::File as i32);
    assert_eq!(read(&t, "big.bin").await.unwrap(), data);
    // No temp file is left behind.
    let names: Vec<_> = std::fs::read_dir(t.host_path("/home/user"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, vec!["big.bin".to_owned()]);
}

#[tokio::test]
async fn written_file_is_readable_by_a_command_at_the_same_path() {
    let t = TestAgent::start().await;
    write(&t, file_messages("/home/user/x", b"from files", None))
        .await
        .unwrap();
    write(&t, file_messages("/tmp/y", b"tmp too", None))
        .await
        .unwrap();
    let o = run_bash(
        &t,
        "cat /home/user/x; echo; cat /tmp/y; echo made > /home/user/z",
    )
    .await;
    assert_eq!(String::from_utf8(o.stdout).unwrap(), "from files\ntmp too");
    assert_eq!(read(&t, "/home/user/z").await.unwrap(), b"made\n");
    if t.agent.env().is_isolated() {
        // Python sees the same path too.
        let o = run_bash(&t, "python3 -c 'print(open(\"/home/user/x\").read())'").await;
        assert_eq!(o.stdout, b"from files\n");
    }
}

#[tokio::test]
async fn several_files_per_stream_with_mode_and_parents() {
    let t = TestAgent::start().await;
    let mut msgs = file_messages("a/b/c.txt", b"one", Some(0o600));
    msgs.extend(file_messages("/tmp/empty", b"", None));
    msgs.extend(file_messages(
        "/home/user/two",
        &vec![7u8; 3 << 20],
        Some(0o755),
    ));
    let resp = write(&t, msgs).await.unwrap();
    let paths: Vec<_> = resp
        .entries
        .iter()
        .map(|e| (e.path.as_str(), e.size, e.mode))
        .collect();
    assert_eq!(
        paths,
        vec![
            ("/home/user/a/b/c.txt", 3, 0o600),
            ("/tmp/empty", 0, 0o644),
            ("/home/user/two", 3 << 20, 0o755)
        ]
    );
    assert!(read(&t, "/tmp/empty").await.unwrap().is_empty());
}

#[tokio::test]
async fn write_errors_have_exact_messages() {
    let t = TestAgent::start().await;
    let cases: Vec<(Vec<pb::WriteRequest>, Code, &str)> = vec![
        (vec![], Code::InvalidArgument, "no files in the stream"),
        (
            vec![pb::WriteRequest {
                chunk: b"x".to_vec().into(),
                ..Default::default()
            }],
            Code::InvalidArgument,
            "first message has no path",
        ),
        (
            {
                let mut m = file_messages("/home/user/f", b"x", None);
                m.push(pb::WriteRequest {
                    mode: Some(0o600),
                    ..Default::default()
                });
                m
            },
            Code::InvalidArgument,
            "mode, user or metadata without a path",
        ),
        (
            vec![pb::WriteRequest {
                path: Some("/home/user/f".into()),
                chunk: vec![0; (1 << 20) + 1].into(),
                ..Default::default()
            }],
            Code::InvalidArgument,
            "chunk larger than 1 MiB",
        ),
        (
            file_messages("/home/user/f", b"x", Some(0o10000)),
            Code::InvalidArgument,
            "invalid mode",
        ),
        (
            file_messages("/etc/passwd", b"x", None),
            Code::PermissionDenied,
            "path not allowed",
        ),
        (
            file_messages("../x", b"x", None),
            Code::InvalidArgument,
            "invalid path",
        ),
        (
            file_messages("/home/user", b"x", None),
            Code::InvalidArgument,
            "is a directory",
        ),
        (
            vec![pb::WriteRequest {
                path: Some("/home/user/m".into()),
                // Metadata is stored now (issue 43); a key that breaks the
                // rules is refused before the file is made.
                metadata: [("a b".to_owned(), "v".to_owned())].into(),
                ..Default::default()
            }],
            Code::InvalidArgument,
            "invalid metadata: keys are HTTP token characters",
        ),
    ];
    for (msgs, code, msg) in cases {
        let err = write(&t, msgs).await.unwrap_err();
        assert_status(&err, code, msg);
    }
    // A parent that is a file.
    write(&t, file_messages("/home/user/file", b"x", None))
        .await
        .unwrap();
    let err = write(&t, file_messages("/home/user/file/child", b"x", None))
        .await
        .unwrap_err();
    assert_status(&err, Code::InvalidArgument, "not a directory");
}

#[tokio::test]
async fn disk_reserve_refuses_before_the_file_and_keeps_the_target() {
    let t = TestAgent::start().await;
    write(&t, file_messages("/home/user/keep", b"old", None))
        .await
        .unwrap();
    t.agent.set_disk_reserve(u64::MAX);
    let err = write(&t, file_messages("/home/user/keep", b"new", None))
        .await
        .unwrap_err();
    assert_status(&err, Code::ResourceExhausted, "disk_reserve");
    t.agent.set_disk_reserve(0);
    assert_eq!(read(&t, "/home/user/keep").await.unwrap(), b"old");
}

#[tokio::test]
async fn read_errors_have_exact_messages() {
    let t = TestAgent::start().await;
    std::os::unix::fs::symlink("/home/user/target", t.host_path("/home/user/link")).unwrap();
    write(&t, file_messages("/home/user/target", b"t", None))
        .await
        .unwrap();
    let cases = [
        ("/home/user/missing", Code::NotFound, "path not found"),
        ("/home/user", Code::InvalidArgument, "is a directory"),
        ("/home/user/link", Code::InvalidArgument, "is a symlink"),
        (
            "/proc/self/environ",
            Code::PermissionDenied,
            "path not allowed",
        ),
        ("", Code::InvalidArgument, "invalid path"),
        ("/var/x", Code::NotFound, "path not found"),
    ];
    for (path, code, msg) in cases {
        let err = read(&t, path).await.unwrap_err();
        assert_status(&err, code, msg);
    }
}

#[tokio::test]
async fn stat_list_make_remove_move() {
    let t = TestAgent::start().await;
    let mk = |p: &str| pb::MakeDirRequest {
        path: p.into(),
        user: None,
    };
    let made = t
        .files()
        .make_dir(mk("/home/user/d/e"))
        .await
        .unwrap()
        .into_inner()
        .entry
        .unwrap();
    assert_eq!(
        (made.path.as_str(), made.r#type),
        ("/home/user/d/e", pb::FileType::Directory as i32)
    );
    assert!(made.permissions.starts_with('d'));
    let err = t.files().make_dir(mk("/home/user/d")).await.unwrap_err();
    assert_status(&err, Code::AlreadyExists, "directory already exists");
    write(&t, file_messages("/home/user/d/f", b"12345", None))
        .await
        .unwrap();
    let err = t.files().make_dir(mk("/home/user/d/f")).await.unwrap_err();
    assert_status(
        &err,
        Code::InvalidArgument,
        "something else exists at the path",
    );

    let st = stat(&t, "d/f").await.unwrap();
    assert_eq!((st.size, st.name.as_str()), (5, "f"));
    assert!(st.modified_time_unix_ms > 1_600_000_000_000);
    assert_status(
        &stat(&t, "/home/user/nope").await.unwrap_err(),
        Code::NotFound,
        "path not found",
    );

    std::os::unix::fs::symlink("/", t.host_path("/home/user/d/root-link")).unwrap();
    let list = |depth| {
        let mut c = t.files();
        async move {
            c.list_dir(pb::ListDirRequest {
                path: "/home/user/d".into(),
                depth,
                user: None,
            })
            .await
            .map(|r| {
                r.into_inner()
                    .entries
                    .into_iter()
                    .map(|e| e.path)
                    .collect::<Vec<_>>()
            })
        }
    };
    assert_eq!(
        list(0).await.unwrap(),
        vec!["/home/user/d/e", "/home/user/d/f", "/home/user/d/root-link"]
    );
    write(&t, file_messages("/home/user/d/e/g", b"", None))
        .await
        .unwrap();
    assert_eq!(
        list(2).await.unwrap(),
        vec![
            "/home/user/d/e",
            "/home/user/d/e/g",
            "/home/user/d/f",
            "/home/user/d/root-link"
        ]
    );
    let link = stat(&t, "/home/user/d/root-link").await.unwrap();
    assert_eq!(
        (link.r#type, link.symlink_target.as_deref()),
        (pb::FileType::Symlink as i32, Some("/"))
    );
    let err = t
        .files()
        .list_dir(pb::ListDirRequest {
            path: "/home/user/d/f".into(),
            depth: 1,
            user: None,
        })
        .await
        .unwrap_err();
    assert_status(&err, Code::InvalidArgument, "not a directory");

    let mv = t
        .files()
        .r#move(pb::MoveRequest {
            source: "d/f".into(),
            destination: "/tmp/moved/f2".into(),
            user: None,
        })
        .await
        .unwrap()
        .into_inner()
        .entry
        .unwrap();
    assert_eq!((mv.path.as_str(), mv.size), ("/tmp/moved/f2", 5));
    let err = t
        .files()
        .r#move(pb::MoveRequest {
            source: "d/f".into(),
            destination: "/tmp/x".into(),
            user: None,
        })
        .await
        .unwrap_err();
    assert_status(&err, Code::NotFound, "path not found");

    let rm = |p: &str, recursive| pb::RemoveRequest {
        path: p.into(),
        recursive,
        user: None,
    };
    let err = t
        .files()
        .remove(rm("/home/user/d", false))
        .await
        .unwrap_err();
    assert_status(&err, Code::FailedPrecondition, "directory not empty");
    t.files().remove(rm("/home/user/d", true)).await.unwrap();
    assert_status(
        &stat(&t, "/home/user/d").await.unwrap_err(),
        Code::NotFound,
        "path not found",
    );
    let err = t
        .files()
        .remove(rm("/home/user/d", true))
        .await
        .unwrap_err();
    assert_status(&err, Code::NotFound, "path not found");
    let err = t.files().remove(rm("/home/user", true)).await.unwrap_err();
    assert_status(&err, Code::PermissionDenied, "path not allowed");
}

#[tokio::test]
async fn list_over_10000_entries_is_resource_exhausted() {
    let t = TestAgent::start().await;
    let dir = t.host_path("/home/user/many");
    std::fs::create_dir(&dir).unwrap();
    for i in 0..10_001 {
        std::fs::File::create(dir.join(format!("f{i}"))).unwrap();
    }
    let err = t
        .files()
        .list_dir(pb::ListDirRequest {
            path: "many".into(),
            depth: 1,
            user: None,
        })
        .await
        .unwrap_err();
    assert_status(&err, Code::ResourceExhausted, "too many entries");
}

#[tokio::test]
async fn an_unknown_transfer_is_not_found() {
    let t = TestAgent::start().await;
    let err = t
        .files()
        .get_transfer(pb::GetTransferRequest {
            transfer_id: "t".into(),
        })
        .await
        .unwrap_err();
    assert_status(&err, Code::NotFound, "unknown transfer");
}

#[tokio::test]
async fn suspend_gates_read_and_write_and_aborts_a_live_write() {
    let t = TestAgent::start().await;
    write(&t, file_messages("/home/user/keep", b"old", None))
        .await
        .unwrap();
    // A write stream that stays open until after the suspend.
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.send(pb::WriteRequest {
        path: Some("/home/user/keep".into()),
        chunk: b"new".to_vec().into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let mut files = t.files();
    let call = tokio::spawn(async move {
        files
            .write(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
    });
    // The write is live once the agent opened its `.rayito-tmp-*` sibling:
    // the suspend below then aborts it (a gate at open would not create it).
    let temp_of_keep = || {
        std::fs::read_dir(t.host_path("/home/user"))
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(".rayito-tmp-"))
    };
    let live_by = std::time::Instant::now() + Duration::from_secs(60);
    while !temp_of_keep() {
        assert!(
            std::time::Instant::now() < live_by,
            "the write never started"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    t.hook("suspend", None).await;
    let err = tokio::time::timeout(Duration::from_secs(30), call)
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    assert_status(&err, Code::Unavailable, "suspending");
    drop(tx);
    // Aborted, not finished: its temp file is gone and nothing was renamed.
    let cleaned_by = std::time::Instant::now() + Duration::from_secs(30);
    while temp_of_keep() {
        assert!(
            std::time::Instant::now() < cleaned_by,
            "the aborted write left its temp file"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let err = read(&t, "/home/user/keep").await.unwrap_err();
    assert_status(&err, Code::Unavailable, "suspending");
    let err = write(&t, file_messages("/home/user/other", b"x", None))
        .await
        .unwrap_err();
    assert_status(&err, Code::Unavailable, "suspending");
    // Unary file calls still answer.
    assert_eq!(stat(&t, "/home/user/keep").await.unwrap().size, 3);
    t.hook("resume", None).await;
    assert_eq!(read(&t, "/home/user/keep").await.unwrap(), b"old");
}

/// A loopback relay to the agent that forwards one client connection and,
/// once the client has sent `marker`, forwards that read and closes both
/// sides: the agent gets the marker's message and then the connection's
/// end, with nothing after it.
async fn relay_cut_after(
    agent: std::net::SocketAddr,
    marker: &'static [u8],
) -> std::net::SocketAddr {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (client, _) = listener.accept().await.unwrap();
        let upstream = tokio::net::TcpStream::connect(agent).await.unwrap();
        let (mut client_rx, mut client_tx) = client.into_split();
        let (mut agent_rx, mut agent_tx) = upstream.into_split();
        let back = tokio::spawn(async move {
            let _ = tokio::io::copy(&mut agent_rx, &mut client_tx).await;
        });
        let mut buf = vec![0u8; 1 << 16];
        // The last bytes of the previous read: a marker may straddle two.
        let mut tail: Vec<u8> = Vec::new();
        loop {
            let n = match client_rx.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if agent_tx.write_all(&buf[..n]).await.is_err() {
                break;
            }
            tail.extend_from_slice(&buf[..n]);
            if tail.windows(marker.len()).any(|w| w == marker) {
                break;
            }
            let keep = tail.len().saturating_sub(marker.len());
            tail.drain(..keep);
        }
        back.abort();
        // Dropping both halves of both sockets closes the connections.
    });
    addr
}

/// A client that vanishes while the agent commits the first of two files
/// leaves no temporary file: hyper drops a pending handler when its stream
/// ends abnormally, so the cleanup cannot wait for the handler to see the
/// error (it leaked a `.rayito-tmp-*` file on a loaded CI machine).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_cut_while_committing_leaves_no_temporary_file() {
    let t = TestAgent::start().await;
    for round in 0..3 {
        let dir = format!("/home/user/cut{round}");
        let relay = relay_cut_after(t.agent.grpc_addr(), b"/b-marker").await;
        let files = pb::filesystem_service_client::FilesystemServiceClient::with_interceptor(
            support::connect(relay).await,
            t.interceptor(),
        );
        // 64 MiB make the first file's fsync last while the cut arrives.
        let mut msgs = file_messages(&format!("{dir}/a"), &vec![b'a'; 64 << 20], None);
        msgs.extend(file_messages(&format!("{dir}/b-marker"), b"b", None));
        let (tx, rx) = tokio::sync::mpsc::channel(msgs.len());
        for m in msgs {
            tx.send(m).await.unwrap();
        }
        let mut files = files.clone();
        tokio::time::timeout(
            Duration::from_secs(60),
            files.write(tokio_stream::wrappers::ReceiverStream::new(rx)),
        )
        .await
        .expect("the cut ends the call")
        .expect_err("the cut fails the call");
        drop(tx);
        let host = t.host_path(&dir);
        let temps = || temp_files_in(&host);
        let by = std::time::Instant::now() + Duration::from_secs(30);
        while temps() > 0 {
            assert!(
                std::time::Instant::now() < by,
                "round {round}: a temporary file outlived the cut write"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(!host.join("b-marker").exists(), "round {round}");
    }
}

/// A Write its client cancels (RST_STREAM CANCEL) after a file's first
/// message commits nothing: tonic reads a request body that fails with
/// CANCEL as its clean end, so the agent committed what it had (an empty
/// file here; a proxy that lost its client sends the same CANCEL).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_cancelled_by_its_client_commits_nothing() {
    let t = TestAgent::start().await;
    // Whether the handler reads the cancel or is dropped first is a race:
    // enough rounds to see both.
    for round in 0..40 {
        let dir = format!("/home/user/cancel{round}");
        let path = format!("{dir}/target");
        write(&t, file_messages(&path, b"old", None)).await.unwrap();
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tx.send(pb::WriteRequest {
            path: Some(path.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
        let mut request = tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(rx));
        let cancel = request.cancellation_handle();
        let mut files = t.files();
        let call = tokio::spawn(async move { files.write(request).await });
        let host = t.host_path(&dir);
        let temps = || temp_files_in(&host);
        // The agent has the first message once its temporary file exists.
        let by = std::time::Instant::now() + Duration::from_secs(30);
        while temps() == 0 {
            assert!(
                std::time::Instant::now() < by,
                "round {round}: the write never started"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        cancel.cancel();
        let outcome = tokio::time::timeout(Duration::from_secs(30), call)
            .await
            .expect("the cancel ends the call")
            .unwrap();
        assert!(outcome.is_err(), "round {round}: {outcome:?}");
        drop(tx);
        let by = std::time::Instant::now() + Duration::from_secs(30);
        while temps() > 0 {
            assert!(
                std::time::Instant::now() < by,
                "round {round}: a temporary file outlived the cancel"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(
            read(&t, &path).await.unwrap(),
            b"old",
            "round {round}: the cancelled write was committed"
        );
    }
}

/// The agent's HTTP/2 receive window lets one Write stream have 4 MiB in
/// flight (hyper's default, 1 MiB, left about one 1 MiB message, so a large
/// upload waited for a window update after each chunk; docs/performance.md,
/// "Files: the agent's own path (session 4)"). A bare h2 client asks for 8 MiB of send capacity and
/// gets exactly the stream window (the connection's, 8 MiB, is larger).
#[tokio::test]
async fn a_write_stream_may_have_four_mib_in_flight() {
    const STREAM_WINDOW: usize = 4 * 1024 * 1024;
    let t = TestAgent::start().await;
    let addr = t.agent.grpc_addr();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    // h2 caps a stream's capacity at its own send buffer (400 KiB by default).
    let (client, connection) = h2::client::Builder::new()
        .max_send_buffer_size(4 * STREAM_WINDOW)
        .handshake::<_, bytes::Bytes>(tcp)
        .await
        .unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let mut client = client.ready().await.unwrap();
    let request = http::Request::post(format!("http://{addr}/rayito.v1.FilesystemService/Write"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("x-access-token", support::token())
        .body(())
        .unwrap();
    let (_response, mut body) = client.send_request(request, false).unwrap();
    body.reserve_capacity(2 * STREAM_WINDOW);
    // The capacity grows as the server's SETTINGS and WINDOW_UPDATE arrive;
    // it stops at the window, so a quiet second means it is final.
    let mut granted = 0;
    while granted < STREAM_WINDOW {
        match tokio::time::timeout(
            Duration::from_secs(2),
            std::future::poll_fn(|cx| body.poll_capacity(cx)),
        )
        .await
        {
            Ok(Some(Ok(capacity))) => granted = capacity,
            Ok(other) => panic!("the stream ended: {other:?}"),
            Err(_) => break,
        }
    }
    assert_eq!(granted, STREAM_WINDOW);
}

/// How many `.rayito-tmp-*` files the host directory `dir` holds (0 when
/// it does not exist).
fn temp_files_in(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(".rayito-tmp-"))
                .count()
        })
        .unwrap_or(0)
}
