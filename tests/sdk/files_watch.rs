//! Directory watches and the rest of the filesystem surface on the local
//! backend (a real agent behind the emulated proxy): typed watch events of
//! each kind, recursive and not, stop, the failures mapped with their exact
//! messages; write_files, get_info, make_dir with parents, rename, remove
//! of a tree.

use crate::sdk_support;

use std::time::Duration;

use futures_util::StreamExt as _;
use rayito::{
    FileType, FilesystemEvent, FilesystemEventKind as Kind, SandboxError, WatchHandle, WriteEntry,
};
use sdk_support::{emulator, sandbox};

/// Generous: a loaded 2-core CI machine.
const PATIENCE: Duration = Duration::from_secs(60);

fn assert_send<T: Send>(_: &T) {}

async fn next_event(watch: &mut WatchHandle) -> FilesystemEvent {
    tokio::time::timeout(PATIENCE, watch.next())
        .await
        .expect("an event in time")
        .expect("the watch is open")
        .expect("an event, not an error")
}

/// Reads events until `last` arrives; returns them all.
async fn events_until(watch: &mut WatchHandle, last: (Kind, &str)) -> Vec<(Kind, String)> {
    let mut seen = Vec::new();
    loop {
        let event = next_event(watch).await;
        let done = event.kind == last.0 && event.name == last.1;
        seen.push((event.kind, event.name));
        if done {
            return seen;
        }
    }
}

/// `expected` appears in `seen` in this order (other events may come between).
fn assert_in_order(seen: &[(Kind, String)], expected: &[(Kind, &str)]) {
    let mut rest = seen.iter();
    for want in expected {
        assert!(
            rest.any(|(kind, name)| *kind == want.0 && name == want.1),
            "missing {want:?} (in order) in {seen:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_reports_each_kind_of_event_and_stops() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;
    assert!(sbx.files().make_dir("/home/user/w").await.unwrap());

    let files = sbx.files();
    let opening = files.watch_dir("/home/user/w", false);
    assert_send(&opening);
    let mut watch = opening.await.expect("watch");
    assert_send(&watch);

    sbx.commands()
        .run("cd /home/user/w && echo one > a.txt && echo two >> a.txt && chmod 600 a.txt && mv a.txt b.txt && rm b.txt")
        .await
        .expect("changes");
    let seen = events_until(&mut watch, (Kind::Remove, "b.txt")).await;
    assert_in_order(
        &seen,
        &[
            (Kind::Create, "a.txt"),
            (Kind::Write, "a.txt"),
            (Kind::Chmod, "a.txt"),
            (Kind::Rename, "a.txt"),
            (Kind::Create, "b.txt"),
            (Kind::Remove, "b.txt"),
        ],
    );

    // Not recursive: a file in a subdirectory is not reported, so the next
    // event after creating both is the top-level one.
    sbx.commands().run("mkdir /home/user/w/sub").await.unwrap();
    let event = next_event(&mut watch).await;
    assert_eq!((event.kind, event.name.as_str()), (Kind::Create, "sub"));
    sbx.commands()
        .run("touch /home/user/w/sub/inner && touch /home/user/w/top")
        .await
        .unwrap();
    let event = next_event(&mut watch).await;
    assert_eq!((event.kind, event.name.as_str()), (Kind::Create, "top"));

    // Stopped from elsewhere: the stream ends.
    let stopper = watch.stopper();
    let reader = tokio::spawn(async move {
        let mut rest = Vec::new();
        while let Some(item) = watch.next().await {
            rest.push(item);
        }
        rest
    });
    stopper.stop();
    let rest = tokio::time::timeout(PATIENCE, reader)
        .await
        .expect("the stream ends")
        .unwrap();
    assert!(rest.iter().all(Result::is_ok), "{rest:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recursive_watch_follows_new_directories_and_ends_when_the_root_goes() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;
    sbx.files().make_dir("/home/user/r/a/b").await.unwrap();
    let mut watch = sbx
        .files()
        .watch_dir("/home/user/r", true)
        .await
        .expect("watch");

    sbx.commands()
        .run("echo x > /home/user/r/a/b/deep.txt")
        .await
        .unwrap();
    let seen = events_until(&mut watch, (Kind::Write, "a/b/deep.txt")).await;
    assert_eq!(seen[0], (Kind::Create, "a/b/deep.txt".to_owned()));

    // A directory created after the watch started is followed once its
    // own creation was reported.
    sbx.commands().run("mkdir /home/user/r/new").await.unwrap();
    let event = next_event(&mut watch).await;
    assert_eq!((event.kind, event.name.as_str()), (Kind::Create, "new"));
    sbx.commands()
        .run("touch /home/user/r/new/f")
        .await
        .unwrap();
    let event = next_event(&mut watch).await;
    assert_eq!((event.kind, event.name.as_str()), (Kind::Create, "new/f"));

    // The watched directory removed: the stream's last item says so.
    sbx.files().remove("/home/user/r").await.unwrap();
    let err = loop {
        match tokio::time::timeout(PATIENCE, watch.next())
            .await
            .expect("in time")
            .expect("an error before the end")
        {
            Ok(_) => {}
            Err(err) => break err,
        }
    };
    assert!(matches!(err, SandboxError::FileNotFound { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "file not found (files.watch_dir): watched directory was removed; check the path"
    );
    assert!(watch.next().await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_failures_are_mapped() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;

    let err = sbx
        .files()
        .watch_dir("/home/user/missing", false)
        .await
        .unwrap_err();
    assert!(matches!(err, SandboxError::FileNotFound { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "file not found (files.watch_dir): path not found; check the path"
    );

    sbx.files().write("/home/user/plain", "x").await.unwrap();
    let err = sbx
        .files()
        .watch_dir("/home/user/plain", false)
        .await
        .unwrap_err();
    assert!(
        matches!(err, SandboxError::InvalidArgument { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "the agent refused an argument of files.watch_dir: not a directory; fix the value before retrying"
    );

    // The sandbox's user was refused, not the caller's credentials.
    let err = sbx.files().watch_dir("/etc", false).await.unwrap_err();
    assert_eq!(
        err.sandbox_code(),
        Some(&rayito::error::SandboxCode::PermissionDenied),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "the sandbox's user may not use the path given to files.watch_dir: path not allowed; pass a path that user may use (its home is /home/user)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_surface_write_files_info_dirs_rename_and_remove_a_tree() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;
    let files = sbx.files();

    let written = files
        .write_files(vec![
            WriteEntry::new("/home/user/t/one.txt", "1"),
            WriteEntry::new("/home/user/t/deeper/two.txt", "22"),
            WriteEntry::new("three.txt", "333"),
        ])
        .await
        .expect("write_files");
    let paths: Vec<_> = written.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/home/user/t/one.txt",
            "/home/user/t/deeper/two.txt",
            "/home/user/three.txt"
        ]
    );
    assert_eq!(
        written.iter().map(|e| e.size).collect::<Vec<_>>(),
        [1, 2, 3]
    );

    // get_info: size, mode, owner, modified time, symlink target.
    sbx.commands()
        .run("chmod 640 /home/user/t/one.txt && ln -s /home/user/t/one.txt /home/user/t/link")
        .await
        .unwrap();
    let info = files.get_info("/home/user/t/one.txt").await.unwrap();
    assert_eq!(info.file_type, FileType::File);
    assert_eq!(info.size, 1);
    assert_eq!(info.mode, 0o640);
    assert_eq!(info.permissions, "-rw-r-----");
    assert_eq!(info.name, "one.txt");
    assert!(!info.owner.is_empty());
    let age = info
        .modified_time
        .expect("a modified time")
        .elapsed()
        .unwrap_or_default();
    assert!(age < Duration::from_secs(600), "{age:?}");
    let link = files.get_info("/home/user/t/link").await.unwrap();
    assert_eq!(link.file_type, FileType::Symlink);
    assert_eq!(link.symlink_target.as_deref(), Some("/home/user/t/one.txt"));
    assert_eq!(info.symlink_target, None);

    // make_dir creates parents; false when it already exists.
    assert!(files.make_dir("/home/user/m/n/o").await.unwrap());
    assert!(!files.make_dir("/home/user/m/n/o").await.unwrap());
    assert_eq!(
        files.get_info("/home/user/m/n").await.unwrap().file_type,
        FileType::Directory
    );
    let err = files.make_dir("/home/user/t/one.txt").await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "the agent refused an argument of files.make_dir: something else exists at the path; fix the value before retrying"
    );

    // rename moves a directory with its contents.
    let moved = files
        .rename("/home/user/t/deeper", "/home/user/m/moved")
        .await
        .unwrap();
    assert_eq!(moved.path, "/home/user/m/moved");
    assert_eq!(moved.file_type, FileType::Directory);
    assert_eq!(
        files
            .read_to_string("/home/user/m/moved/two.txt")
            .await
            .unwrap(),
        "22"
    );
    let err = files
        .rename("/home/user/nothing", "/home/user/x")
        .await
        .unwrap_err();
    assert!(matches!(err, SandboxError::FileNotFound { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "file not found (files.rename): path not found; check the path"
    );

    // remove takes a whole tree.
    files.remove("/home/user/m").await.unwrap();
    assert!(!files.exists("/home/user/m/moved/two.txt").await.unwrap());
    assert!(!files.exists("/home/user/m").await.unwrap());
    let err = files.remove("/home/user/m").await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "file not found (files.remove): path not found; check the path"
    );
}
