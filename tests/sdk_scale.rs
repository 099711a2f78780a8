//! Scale (issue 11): 50 sandboxes x 20 `run_code` calls at once from one
//! process on the local backend. Every call prints a value of its own and
//! must get exactly that back; after `kill()` of every sandbox no process
//! of theirs is left: none carries their marker (`RAYITO_SANDBOX`, set in
//! every sandbox process), none runs under their host uids, and their
//! cgroups (where the host has cgroup v2) hold no process.
//!
//! Phase times are printed (`--nocapture`); the bounds are generous for a
//! loaded 2-core CI machine.

use crate::sdk_support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rayito::Sandbox;
use rayito_emulator::MicrovmState;
use sdk_support::skip::skip;
use sdk_support::{builder, emulator};
use tokio::task::JoinSet;

const SANDBOXES: usize = 50;
const CALLS: usize = 20;

/// One live process of a sandbox, seen from the host.
#[derive(Clone)]
struct HostProcess {
    pid: u32,
    uid: u32,
    /// Its cgroup v2 path (`0::` of /proc/PID/cgroup).
    cgroup: Option<String>,
}

/// Every live process whose environment holds `RAYITO_SANDBOX=<marker>`,
/// by marker.
fn processes_by_marker(markers: &BTreeSet<String>) -> BTreeMap<String, Vec<HostProcess>> {
    let mut found: BTreeMap<String, Vec<HostProcess>> = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        // A process may end while it is read: skip it.
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let marker = environ.split(|b| *b == 0).find_map(|var| {
            std::str::from_utf8(var)
                .ok()?
                .strip_prefix("RAYITO_SANDBOX=")
                .map(str::to_owned)
        });
        let Some(marker) = marker.filter(|m| markers.contains(m)) else {
            continue;
        };
        let Some(uid) = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Uid:"))
                    .and_then(|ids| ids.split_whitespace().next()?.parse().ok())
            })
        else {
            continue;
        };
        let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("0::").map(str::to_owned))
            });
        found
            .entry(marker)
            .or_default()
            .push(HostProcess { pid, uid, cgroup });
    }
    found
}

/// Live processes (any) running under one of `uids`.
fn processes_with_uids(uids: &BTreeSet<u32>) -> Vec<(u32, u32)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let uid = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Uid:"))
                    .and_then(|ids| ids.split_whitespace().next()?.parse::<u32>().ok())
            });
        if let Some(uid) = uid.filter(|u| uids.contains(u)) {
            found.push((pid, uid));
        }
    }
    found
}

/// The cgroup2 mount point, if the host has one.
fn cgroup2_mount() -> Option<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        if right.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        left.split_whitespace().nth(4).map(PathBuf::from)
    })
}

/// The pids a cgroup still holds (none when it is gone).
fn cgroup_pids(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .map(|s| s.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// Polls `check` until it returns `true` or `within` passes.
async fn eventually(within: Duration, mut check: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + within;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_sandboxes_twenty_cells_each_every_output_back_and_nothing_left() {
    let emu = emulator().await;
    let started = Instant::now();

    // Create every sandbox at once (the client paces RunMicrovm at 5/s).
    let mut creates = JoinSet::new();
    for _ in 0..SANDBOXES {
        let create = builder(&emu).create();
        creates.spawn(create);
    }
    let mut sandboxes: Vec<Sandbox> = Vec::with_capacity(SANDBOXES);
    while let Some(created) = creates.join_next().await {
        sandboxes.push(created.unwrap().expect("every sandbox is created"));
    }
    let created_after = started.elapsed();

    // Each sandbox's marker, as its own processes see it.
    let mut markers = Vec::with_capacity(SANDBOXES);
    for sbx in &sandboxes {
        let out = sbx.commands().run("printenv RAYITO_SANDBOX").await.unwrap();
        let marker = out.stdout.trim().to_owned();
        assert!(!marker.is_empty(), "{out:?}");
        markers.push(marker);
    }
    let marker_set: BTreeSet<String> = markers.iter().cloned().collect();
    assert_eq!(marker_set.len(), SANDBOXES, "one marker per sandbox");

    // Every call at once, each on its own task.
    let phase = Instant::now();
    let mut calls = JoinSet::new();
    for (s, sbx) in sandboxes.iter().enumerate() {
        for c in 0..CALLS {
            let sbx = sbx.clone();
            calls.spawn(async move {
                let value = format!("sandbox-{s}-call-{c}");
                let execution = sbx.run_code(&format!("print('{value}')")).await;
                (s, value, execution)
            });
        }
    }
    let mut seen = BTreeSet::new();
    let mut counts: BTreeMap<usize, BTreeSet<u64>> = BTreeMap::new();
    while let Some(joined) = calls.join_next().await {
        let (s, value, execution) = joined.unwrap();
        let execution = execution.unwrap_or_else(|err| panic!("{value}: {err}"));
        assert_eq!(execution.error, None, "{value}");
        assert_eq!(
            execution.logs.stdout.concat(),
            format!("{value}\n"),
            "{value} got its own output and nothing else"
        );
        assert!(execution.logs.stderr.is_empty(), "{value}: {execution:?}");
        assert!(seen.insert(value.clone()), "{value} came back twice");
        let count = execution.execution_count.expect("a count");
        assert!(
            counts.entry(s).or_default().insert(count),
            "{value}: execution count {count} used twice: a cell ran twice or was merged"
        );
    }
    assert_eq!(seen.len(), SANDBOXES * CALLS, "every output accounted for");
    let cells_took = phase.elapsed();

    // The host view before kill: every sandbox has live processes (the
    // kernel at least), so the checks after kill can see them.
    let before = processes_by_marker(&marker_set);
    assert_eq!(
        before.len(),
        SANDBOXES,
        "every sandbox has a live process: {:?}",
        before.keys().collect::<Vec<_>>()
    );
    // Root (a host without the unprivileged sandbox user) names no
    // sandbox in particular.
    let uids: BTreeSet<u32> = before
        .values()
        .flatten()
        .map(|p| p.uid)
        .filter(|uid| *uid != 0)
        .collect();
    if uids.is_empty() {
        skip("the uid check: the sandboxes run as root on this host");
    }
    let mount = cgroup2_mount();
    let cgroups: BTreeSet<PathBuf> = before
        .values()
        .flatten()
        .filter_map(|p| p.cgroup.as_deref())
        .filter(|c| c.contains("rayito-"))
        .filter_map(|c| Some(mount.as_ref()?.join(c.trim_start_matches('/'))))
        .collect();
    if cgroups.is_empty() {
        skip("the cgroup check: the sandboxes run without cgroup v2 on this host");
    } else {
        assert!(
            cgroups.iter().all(|dir| !cgroup_pids(dir).is_empty()),
            "the sandbox cgroups hold their processes"
        );
    }

    // Kill every sandbox at once.
    let phase = Instant::now();
    let mut kills = JoinSet::new();
    for sbx in &sandboxes {
        let sbx = sbx.clone();
        kills.spawn(async move { sbx.kill().await });
    }
    while let Some(killed) = kills.join_next().await {
        assert!(killed.unwrap().expect("kill"), "each kill ended a sandbox");
    }
    let ids: Vec<String> = sandboxes.iter().map(|s| s.id().to_owned()).collect();
    assert!(
        eventually(Duration::from_secs(60), || ids
            .iter()
            .all(|id| emu.state(id) == Some(MicrovmState::Terminated)))
        .await,
        "every MicroVM reached TERMINATED"
    );
    let left = || processes_by_marker(&marker_set);
    assert!(
        eventually(Duration::from_secs(60), || left().is_empty()).await,
        "no sandbox process is left; pids left: {:?}",
        left().values().flatten().map(|p| p.pid).collect::<Vec<_>>()
    );
    let by_uid = processes_with_uids(&uids);
    assert!(
        by_uid.is_empty(),
        "processes under sandbox uids: {by_uid:?}"
    );
    for dir in &cgroups {
        assert!(
            cgroup_pids(dir).is_empty(),
            "{} still holds processes",
            dir.display()
        );
    }
    let killed_after = phase.elapsed();

    println!(
        "{SANDBOXES} sandboxes created in {created_after:?}; {} cells in {cells_took:?}; \
         killed and checked in {killed_after:?}; total {:?}; {} sandbox uids, {} cgroups",
        SANDBOXES * CALLS,
        started.elapsed(),
        uids.len(),
        cgroups.len()
    );
}
