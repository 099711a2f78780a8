//! The launcher thread of a sandbox whose limits are in cgroup v1 (a hybrid
//! host, as the project machine): every child of the sandbox is cloned from
//! a thread of the agent that lives in the sandbox's v1 cgroups, so it is
//! born in them (no `cgroup.procs` write of its own); the thread never
//! joins the sandbox's cgroup v2, and it leaves before the sandbox's
//! cgroups are removed at its end (docs/performance.md, "Session 24").
//!
//! Needs root and a hybrid host; elsewhere the test prints `SKIPPED: ...`
//! (a failure under `RAYITO_TEST_STRICT=1`).

use crate::skip_support;

use std::path::PathBuf;

use rayito_agent::SandboxLimits;
use rayito_agent::for_emulator::Stdio;
use rayito_agent::sandbox::{SandboxEnv, SpawnSpec};

/// The path of the v1 hierarchy holding `controller` in a
/// `/proc/.../cgroup` text (`id:controllers:path` lines).
fn v1_path<'a>(cgroups: &'a str, controller: &str) -> Option<&'a str> {
    cgroups.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let _id = fields.next()?;
        let controllers = fields.next()?;
        let path = fields.next()?;
        controllers
            .split(',')
            .any(|c| c == controller)
            .then_some(path)
    })
}

/// The host directory of the v1 cgroup `path` in the hierarchy holding
/// `controller` (this process is in the root cgroup namespace).
fn v1_dir(controller: &str, path: &str) -> PathBuf {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let (root, mount_point) = mountinfo
        .lines()
        .find_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let mut right = right.split_whitespace();
            if right.next()? != "cgroup" || !right.nth(1)?.split(',').any(|o| o == controller) {
                return None;
            }
            let mut fields = left.split_whitespace();
            Some((fields.nth(3)?.to_owned(), fields.next()?.to_owned()))
        })
        .expect("a v1 mount of the controller");
    let relative = path
        .strip_prefix(root.trim_end_matches('/'))
        .unwrap_or(path)
        .trim_start_matches('/');
    PathBuf::from(mount_point).join(relative)
}

/// The threads of this process named `rayito-launch`, with their
/// `/proc/self/task/<tid>/cgroup` text.
fn launcher_threads() -> Vec<(u32, String)> {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .flatten()
        .filter_map(|entry| {
            let tid = entry.file_name().to_str()?.parse().ok()?;
            let comm = std::fs::read_to_string(entry.path().join("comm")).ok()?;
            (comm.trim() == "rayito-launch").then_some(())?;
            Some((tid, std::fs::read_to_string(entry.path().join("cgroup")).ok()?))
        })
        .collect()
}

/// `cat /proc/self/cgroup` started in `env`'s sandbox.
async fn child_cgroups(env: &SandboxEnv) -> String {
    let spec = SpawnSpec {
        program: "/bin/cat".into(),
        args: vec!["/proc/self/cgroup".into()],
        ..Default::default()
    };
    let mut child = env
        .launch(&spec, Stdio::Null, Stdio::Piped, Stdio::Null)
        .expect("launch");
    let mut out = String::new();
    tokio::io::AsyncReadExt::read_to_string(child.stdout.as_mut().expect("stdout"), &mut out)
        .await
        .expect("read");
    assert!(child.wait().await.expect("wait").success(), "{out}");
    out
}

/// A child of a sandbox is in the sandbox's v1 `pids` and `memory`
/// cgroups, and so is one thread of the agent (its launcher) and no more;
/// the thread is not in the sandbox's cgroup v2; the v1 `pids.max` leaves
/// the sandbox its whole limit besides the thread; once the sandbox is
/// dropped the thread has left and the v1 cgroups are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_are_born_in_the_sandboxs_v1_cgroups_from_its_launcher_thread() {
    const PIDS_MAX: u64 = 48;
    let root = tempfile::tempdir().expect("tempdir");
    let env = SandboxEnv::with_limits(
        root.path(),
        &SandboxLimits {
            pids_max: Some(PIDS_MAX),
            memory_max_bytes: Some(256 << 20),
        },
    )
    .expect("sandbox");
    let limits = env.containment().limits;
    if !env.containment().cgroup || limits.pids_max.is_none() || limits.memory_max_bytes.is_none()
    {
        skip_support::skip("needs root and cgroups with the pids and memory controllers");
        return;
    }
    let first = child_cgroups(&env).await;
    let in_v1: Vec<(&str, &str)> = ["pids", "memory"]
        .into_iter()
        .filter_map(|c| Some((c, v1_path(&first, c)?)))
        .filter(|(_, path)| path.rsplit('/').next().unwrap().starts_with("sandbox-"))
        .collect();
    if in_v1.len() != 2 {
        skip_support::skip(format!(
            "the sandbox's limits are not both in cgroup v1 here (no launcher thread): {first}"
        ));
        return;
    }
    let sandbox = in_v1[0].1.rsplit('/').next().unwrap().to_owned();
    assert!(
        in_v1.iter().all(|(_, path)| path.ends_with(&format!("/{sandbox}"))),
        "the same sandbox in both hierarchies: {first}"
    );
    let launchers: Vec<(u32, String)> = launcher_threads()
        .into_iter()
        .filter(|(_, cgroups)| cgroups.contains(&format!("/{sandbox}")))
        .collect();
    assert_eq!(launchers.len(), 1, "one launcher thread: {launchers:?}");
    let (tid, thread_cgroups) = &launchers[0];
    for (controller, path) in &in_v1 {
        assert_eq!(
            v1_path(thread_cgroups, controller),
            Some(*path),
            "the launcher thread {tid} is in the sandbox's v1 {controller} cgroup"
        );
    }
    let thread_v2 = thread_cgroups
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or("");
    assert!(
        !thread_v2.contains(&sandbox),
        "the launcher thread is not in the sandbox's cgroup v2 (whose kill would reach \
         the agent): {thread_cgroups}"
    );
    let dirs: Vec<PathBuf> = in_v1.iter().map(|(c, p)| v1_dir(c, p)).collect();
    let pids_max = std::fs::read_to_string(dirs[0].join("pids.max")).expect("pids.max");
    assert_eq!(
        pids_max.trim(),
        (PIDS_MAX + 1).to_string(),
        "the thread is one task more than the sandbox's limit"
    );
    // A later child: the same cgroups, the same thread.
    let second = child_cgroups(&env).await;
    for (controller, path) in &in_v1 {
        assert_eq!(v1_path(&second, controller), Some(*path), "{second}");
    }
    assert_eq!(
        launcher_threads()
            .iter()
            .filter(|(_, c)| c.contains(&format!("/{sandbox}")))
            .count(),
        1
    );

    drop(env);
    assert!(
        launcher_threads()
            .iter()
            .all(|(_, c)| !c.contains(&format!("/{sandbox}"))),
        "the launcher thread left the sandbox's cgroups"
    );
    for dir in &dirs {
        assert!(
            !dir.exists(),
            "the sandbox's v1 cgroup {} is removed with it",
            dir.display()
        );
    }
}
