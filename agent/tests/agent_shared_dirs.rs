//! Issue 41, section 4: a local sandbox sees none of the host's
//! world-writable directories. `/dev/shm` and `/var/tmp` are its own (an
//! empty tmpfs each): a 0777 Unix socket a host process made in the host's
//! `/dev/shm` is not reachable from guest code, and two sandboxes cannot
//! pass files through either directory.
//!
//! Needs a mount namespace (root); elsewhere the test prints
//! `SKIPPED: <test>: <reason>` and returns.

use crate::support;

use crate::skip_support;

use std::os::unix::fs::PermissionsExt as _;

use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_shm_and_var_tmp_are_the_sandboxs_own() {
    let a = TestAgent::start().await;
    if !a.agent.env().containment().mount_namespace {
        skip_support::skip("needs a mount namespace (root)");
        return;
    }
    let b = TestAgent::start().await;

    // The host's: a listening 0777 socket in /dev/shm, a file in /var/tmp.
    let tag = format!("rayito-shared-{}", std::process::id());
    let socket = std::path::PathBuf::from(format!("/dev/shm/{tag}.sock"));
    let _ = std::fs::remove_file(&socket);
    let listener = std::os::unix::net::UnixListener::bind(&socket).expect("host socket");
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o777)).unwrap();
    let host_file = std::path::PathBuf::from(format!("/var/tmp/{tag}.host"));
    std::fs::write(&host_file, "host").unwrap();

    let probe = format!(
        "for d in /dev/shm /var/tmp /run/lock; do stat -c '%n %a' $d; ls -A $d | grep -c {tag}; done; \
         /usr/bin/python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); \
         s.connect('/dev/shm/{tag}.sock'); print('reached')\" 2>/dev/null || echo unreachable; \
         echo from-a > /dev/shm/{tag}.a && echo from-a > /var/tmp/{tag}.a && echo wrote"
    );
    let seen = run_bash(&a, &probe).await;
    let stdout = String::from_utf8_lossy(&seen.stdout).into_owned();
    assert_eq!(
        stdout,
        "/dev/shm 1777\n0\n/var/tmp 1777\n0\n/run/lock 1777\n0\nunreachable\nwrote\n",
        "{}",
        String::from_utf8_lossy(&seen.stderr)
    );
    // What sandbox a wrote is a's alone: neither b nor the host sees it.
    let other = run_bash(&b, &format!("ls -A /dev/shm /var/tmp | grep -c {tag}.a")).await;
    assert_eq!(String::from_utf8_lossy(&other.stdout), "0\n");
    assert!(!std::path::Path::new(&format!("/dev/shm/{tag}.a")).exists());
    assert!(!std::path::Path::new(&format!("/var/tmp/{tag}.a")).exists());

    // System V IPC is the sandbox's own too: a queue a makes is a's alone.
    let host_queues = || {
        let out = std::process::Command::new("ipcs").arg("-q").output();
        out.map(|o| String::from_utf8_lossy(&o.stdout).matches("\n0x").count())
            .unwrap_or(0)
    };
    let before = host_queues();
    let queues = "ipcs -q | grep -c '^0x'";
    let made = run_bash(&a, &format!("ipcmk -Q >/dev/null; {queues}")).await;
    assert_eq!(String::from_utf8_lossy(&made.stdout), "1\n");
    let other = run_bash(&b, queues).await;
    assert_eq!(String::from_utf8_lossy(&other.stdout), "0\n");
    assert_eq!(host_queues(), before);

    drop(listener);
    let _ = std::fs::remove_file(&socket);
    let _ = std::fs::remove_file(&host_file);
}
