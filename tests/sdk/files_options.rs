//! The reference SDK's write and watch options on the local backend (issue
//! 43): `WriteOptions` (owner, mode, gzip, metadata) with the agent's
//! answer checked from a command, and `WatchOptions` (include_entry,
//! timeout, on_exit), with every refusal's message pinned.

use crate::sdk_support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt as _;
use rayito::{
    FileType, FilesystemEventKind as Kind, SandboxError, WatchOptions, WriteEntry, WriteOptions,
};
use sdk_support::{emulator, sandbox};

/// Generous: a loaded 2-core CI machine.
const PATIENCE: Duration = Duration::from_secs(60);

async fn stat(sbx: &rayito::Sandbox, path: &str) -> String {
    let out = sbx
        .commands()
        .run(&format!("stat -c '%a %U' {path}"))
        .await
        .expect("stat");
    out.stdout.trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_with_sets_mode_and_owner_and_refuses_before_any_io() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;
    let files = sbx.files();
    let me = stat(&sbx, "/home/user").await;
    let owner = me.split(' ').nth(1).expect("an owner").to_owned();

    for (mode, shown) in [(0o600, "600"), (0o755, "755")] {
        let path = format!("/home/user/m/{shown}");
        let entry = files
            .write_with(&path, "x", WriteOptions::new().mode(mode))
            .await
            .expect("write with a mode");
        assert_eq!(entry.mode, mode);
        assert_eq!(stat(&sbx, &path).await, format!("{shown} {owner}"));
    }
    // The default stays 0o644; the sandbox's user by name is the default.
    let entry = files
        .write_with("/home/user/m/d", "x", WriteOptions::new().user("user"))
        .await
        .expect("write as the sandbox user");
    assert_eq!(entry.mode, 0o644);
    assert_eq!(stat(&sbx, "/home/user/m/d").await, format!("644 {owner}"));

    // The edge: every bit the mode can hold. What the kernel keeps of
    // setuid/setgid for an unprivileged owner is its word: the entry and
    // stat agree, and the permission bits are all there.
    let entry = files
        .write_with("/home/user/m/all", "x", WriteOptions::new().mode(0o7777))
        .await
        .expect("write with 0o7777");
    assert_eq!(entry.mode & 0o777, 0o777);
    assert_eq!(
        stat(&sbx, "/home/user/m/all").await,
        format!("{:o} {owner}", entry.mode)
    );

    // Above 0o7777: refused before any I/O, nothing written.
    let err = files
        .write_with("/home/user/m/bad", "x", WriteOptions::new().mode(0o10000))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, SandboxError::InvalidArgument { argument: Some(a), .. } if a == "mode"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "invalid mode: the mode is above 0o7777; pass permission bits from 0 to 0o7777 (0o644 by default)"
    );
    assert!(!files.exists("/home/user/m/bad").await.unwrap());

    // A user the local backend does not have: the agent's refusal.
    let err = files
        .write_with("/home/user/m/root", "x", WriteOptions::new().user("root"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, SandboxError::InvalidArgument { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "the agent refused an argument of files.write: unknown user; fix the value before retrying"
    );
    assert!(!files.exists("/home/user/m/root").await.unwrap());

    // write_files_with: the mode reaches every file of the stream.
    let entries = files
        .write_files_with(
            vec![
                WriteEntry::new("/home/user/m/f1", "1"),
                WriteEntry::new("/home/user/m/f2", "22"),
            ],
            WriteOptions::new().mode(0o640),
        )
        .await
        .expect("write_files_with");
    assert_eq!(
        entries.iter().map(|e| e.mode).collect::<Vec<_>>(),
        [0o640, 0o640]
    );
    assert_eq!(stat(&sbx, "/home/user/m/f2").await, format!("640 {owner}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gzip_write_round_trips_a_large_compressible_file() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;
    let files = sbx.files();
    // 6 MiB of text over several 1 MiB messages, each compressed alone.
    let data: Vec<u8> = (0..6 * 1024 * 1024)
        .map(|i: usize| b"rayito gzip "[i % 12])
        .collect();
    let entry = files
        .write_with(
            "/home/user/big.txt",
            data.clone(),
            WriteOptions::new().gzip(true),
        )
        .await
        .expect("gzip write");
    assert_eq!(entry.size, data.len() as u64);
    assert_eq!(files.read("/home/user/big.txt").await.unwrap(), data);
    let streamed = files
        .write_stream_with(
            "/home/user/streamed.txt",
            futures_util::stream::iter(vec![data[..3].to_vec(), data[3..1000].to_vec()]),
            WriteOptions::new().gzip(true).mode(0o600),
        )
        .await
        .expect("gzip write_stream");
    assert_eq!((streamed.size, streamed.mode), (1000, 0o600));
    assert_eq!(
        files.read("/home/user/streamed.txt").await.unwrap(),
        &data[..1000]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_is_stored_returned_and_replaced_whole() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;
    let files = sbx.files();
    let options = WriteOptions::new()
        .metadata("Owner", "ana")
        .metadata("x-run", "42");
    let written = files.write_with("/home/user/meta.txt", "m", options).await;
    let entry = match written {
        Ok(entry) => entry,
        Err(err)
            if err
                .to_string()
                .contains("file metadata is not supported by this filesystem") =>
        {
            println!(
                "SKIPPED: metadata_is_stored_returned_and_replaced_whole: the host filesystem keeps no user xattrs"
            );
            return;
        }
        Err(err) => panic!("{err:?}"),
    };
    let expected: BTreeMap<String, String> = [
        ("owner".to_owned(), "ana".to_owned()),
        ("x-run".to_owned(), "42".to_owned()),
    ]
    .into();
    assert_eq!(entry.metadata, expected);
    assert_eq!(
        files
            .get_info("/home/user/meta.txt")
            .await
            .unwrap()
            .metadata,
        expected
    );
    // A rewrite replaces the set whole: none given, none kept.
    let again = files.write("/home/user/meta.txt", "n").await.unwrap();
    assert!(again.metadata.is_empty(), "{:?}", again.metadata);

    // A refusal names metadata and never quotes a key or value.
    let err = files
        .write_with(
            "/home/user/meta2.txt",
            "m",
            WriteOptions::new().metadata("k", "line\nbreak"),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid metadata: a value holds a character that is not printable ASCII (0x20 to 0x7E); pass printable ASCII values"
    );
    assert!(!files.exists("/home/user/meta2.txt").await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_with_entries_reports_sizes_and_types() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;
    let files = sbx.files();
    assert!(files.make_dir("/home/user/we").await.unwrap());
    let mut watch = files
        .watch_dir_with("/home/user/we", WatchOptions::new().include_entry(true))
        .await
        .expect("watch");
    // files().write renames a complete file in: a Create of the whole.
    files
        .write("/home/user/we/five.txt", "12345")
        .await
        .unwrap();
    files.make_dir("/home/user/we/sub").await.unwrap();
    sbx.commands()
        .run("chmod 600 /home/user/we/five.txt && printf 1234567 > /home/user/we/seven")
        .await
        .unwrap();
    let (mut file_seen, mut dir_seen, mut chmod_seen, mut write_seen) =
        (false, false, false, false);
    while !(file_seen && dir_seen && chmod_seen && write_seen) {
        let event = tokio::time::timeout(PATIENCE, watch.next())
            .await
            .expect("an event in time")
            .expect("open")
            .expect("an event");
        match (event.kind, event.name.as_str()) {
            (Kind::Create, "five.txt") => {
                let entry = event.entry.expect("a create carries its entry");
                assert_eq!((entry.file_type, entry.size), (FileType::File, 5));
                assert_eq!(entry.path, "/home/user/we/five.txt");
                file_seen = true;
            }
            (Kind::Chmod, "five.txt") => {
                let entry = event.entry.expect("a chmod carries its entry");
                assert_eq!(entry.mode, 0o600);
                chmod_seen = true;
            }
            (Kind::Write, "seven") => {
                let entry = event.entry.expect("a write carries its entry");
                assert_eq!((entry.file_type, entry.size), (FileType::File, 7));
                write_seen = true;
            }
            (Kind::Create, "sub") => {
                let entry = event.entry.expect("a create carries its entry");
                assert_eq!(entry.file_type, FileType::Directory);
                dir_seen = true;
            }
            _ => {}
        }
    }
    // Without the option no entry comes.
    let mut plain = files.watch_dir("/home/user/we", false).await.unwrap();
    sbx.commands().run("touch /home/user/we/six").await.unwrap();
    let event = tokio::time::timeout(PATIENCE, plain.next())
        .await
        .expect("an event in time")
        .expect("open")
        .expect("an event");
    assert_eq!(event.entry, None);
}

/// What on_exit saw: one entry per call, the error's kind (or None).
type Calls = Arc<Mutex<Vec<Option<rayito::ErrorKind>>>>;

fn recording() -> (Calls, impl FnOnce(Option<&SandboxError>) + Send + 'static) {
    let calls: Calls = Arc::default();
    let seen = calls.clone();
    (calls, move |err: Option<&SandboxError>| {
        seen.lock().unwrap().push(err.map(SandboxError::kind));
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_timeout_ends_with_the_timeout_error_and_on_exit_runs_once() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;
    let files = sbx.files();
    assert!(files.make_dir("/home/user/wt").await.unwrap());

    let (calls, on_exit) = recording();
    let mut watch = files
        .watch_dir_with(
            "/home/user/wt",
            WatchOptions::new()
                .timeout(Duration::from_secs(1))
                .on_exit(on_exit),
        )
        .await
        .expect("watch");
    let err = tokio::time::timeout(PATIENCE, watch.next())
        .await
        .expect("the watch ends in time")
        .expect("an item")
        .unwrap_err();
    assert_eq!(err.kind(), rayito::ErrorKind::Timeout, "{err:?}");
    assert_eq!(
        err.to_string(),
        "the call files.watch_dir did not finish within 1 s; raise request_timeout or retry"
    );
    assert!(watch.next().await.is_none(), "the error is the last item");
    watch.stop();
    drop(watch);
    assert_eq!(*calls.lock().unwrap(), [Some(rayito::ErrorKind::Timeout)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_exit_runs_once_after_stop_and_never_for_a_zero_timeout() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;
    let files = sbx.files();
    assert!(files.make_dir("/home/user/ws").await.unwrap());

    let (calls, on_exit) = recording();
    let mut watch = files
        .watch_dir_with(
            "/home/user/ws",
            // Zero is no deadline.
            WatchOptions::new().timeout(Duration::ZERO).on_exit(on_exit),
        )
        .await
        .expect("watch");
    sbx.commands().run("touch /home/user/ws/a").await.unwrap();
    let event = tokio::time::timeout(PATIENCE, watch.next())
        .await
        .expect("an event in time")
        .expect("open")
        .expect("an event");
    assert_eq!((event.kind, event.name.as_str()), (Kind::Create, "a"));
    assert!(calls.lock().unwrap().is_empty());
    let stopper = watch.stopper();
    watch.stop();
    assert_eq!(*calls.lock().unwrap(), [None]);
    stopper.stop();
    assert!(watch.next().await.is_none());
    drop(watch);
    assert_eq!(*calls.lock().unwrap(), [None], "once, whatever follows");
    assert_eq!(calls.lock().unwrap().len(), 1);

    // A dropped watch is a clean end too.
    let (calls, on_exit) = recording();
    let watch = files
        .watch_dir_with("/home/user/ws", WatchOptions::new().on_exit(on_exit))
        .await
        .expect("watch");
    assert_eq!(watch.reconnects(), 0);
    drop(watch);
    assert_eq!(*calls.lock().unwrap(), [None]);
}

/// docs/files.md transcribes these messages; this keeps the two in step
/// (the tests above assert each against the SDK).
#[test]
fn docs_files_md_transcribes_the_messages() {
    let doc = std::fs::read_to_string(sdk_support::repo_root().join("docs/files.md"))
        .expect("docs/files.md");
    for text in [
        "`unknown user`",
        "`file metadata is not supported by this\n  filesystem`",
        "`the call files.watch_dir did not finish within <d>; raise request_timeout or retry`",
        "`Unimplemented { feature: files.write(gzip) }`",
        "`files.write(metadata)`",
    ] {
        assert!(doc.contains(text), "docs/files.md lacks {text}");
    }
}

/// `files().as_user(u)`: every call names `u` to the agent (E2B's `user=`
/// argument). The sandbox's account by name works for each call; an
/// account the local agent does not have is refused by it for each
/// (`unknown user`: no call runs as another account than it asked for),
/// and nothing is created; a user with a NUL is refused before any I/O,
/// naming `user`; a write's own user comes before the view's, and
/// `WatchOptions::user` before it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn as_user_names_the_user_on_every_call_and_the_agent_checks_it() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;
    let me = sbx.files().as_user("user");
    assert!(me.make_dir("/home/user/au").await.expect("make_dir"));
    me.write("/home/user/au/a.txt", "abc").await.expect("write");
    assert_eq!(me.read("/home/user/au/a.txt").await.expect("read"), b"abc");
    assert_eq!(me.list("/home/user/au").await.expect("list").len(), 1);
    assert!(me.exists("/home/user/au/a.txt").await.expect("exists"));
    assert_eq!(
        me.get_info("/home/user/au/a.txt").await.expect("info").size,
        3
    );
    me.rename("/home/user/au/a.txt", "/home/user/au/b.txt")
        .await
        .expect("rename");
    let watch = me.watch_dir("/home/user/au", false).await.expect("watch");
    watch.stop();
    me.remove("/home/user/au/b.txt").await.expect("remove");

    let root = sbx.files().as_user("root");
    let refused = |e: SandboxError, feature: &str| {
        assert!(matches!(&e, SandboxError::InvalidArgument { .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            format!(
                "the agent refused an argument of {feature}: unknown user; fix the value before retrying"
            )
        );
    };
    refused(
        root.make_dir("/home/user/au/r").await.unwrap_err(),
        "files.make_dir",
    );
    refused(
        root.write("/home/user/au/r.txt", "x").await.unwrap_err(),
        "files.write",
    );
    let read = root.read("/home/user/au").await.unwrap_err();
    let doc = include_str!("../../docs/files.md");
    assert!(doc.contains(&format!("`{read}`")), "docs/files.md: {read}");
    refused(read, "files.read");
    refused(root.list("/home/user/au").await.unwrap_err(), "files.list");
    refused(
        root.exists("/home/user/au").await.unwrap_err(),
        "files.exists",
    );
    refused(
        root.get_info("/home/user/au").await.unwrap_err(),
        "files.get_info",
    );
    me.write("/home/user/au/c.txt", "c").await.expect("write");
    refused(
        root.rename("/home/user/au/c.txt", "/home/user/au/d.txt")
            .await
            .unwrap_err(),
        "files.rename",
    );
    refused(
        root.remove("/home/user/au/c.txt").await.unwrap_err(),
        "files.remove",
    );
    refused(
        root.watch_dir("/home/user/au", false).await.unwrap_err(),
        "files.watch_dir",
    );
    // An empty user of the options is the default: the view's.
    refused(
        root.watch_dir_with("/home/user/au", WatchOptions::new().user(""))
            .await
            .unwrap_err(),
        "files.watch_dir",
    );
    refused(
        me.watch_dir_with("/home/user/au", WatchOptions::new().user("root"))
            .await
            .unwrap_err(),
        "files.watch_dir",
    );
    let names: Vec<String> = me
        .list("/home/user/au")
        .await
        .expect("list")
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, ["c.txt"], "nothing made, moved or removed as root");

    // The write's own user first.
    root.write_with("/home/user/au/e.txt", "e", WriteOptions::new().user("user"))
        .await
        .expect("the write's user");

    // A NUL: refused before any I/O, naming `user`.
    let err = sbx
        .files()
        .as_user("a\0b")
        .make_dir("/home/user/au/nul")
        .await
        .unwrap_err();
    assert!(
        matches!(&err, SandboxError::InvalidArgument { argument: Some(a), .. } if a == "user"),
        "{err:?}"
    );
    assert!(!me.exists("/home/user/au/nul").await.unwrap());
}
