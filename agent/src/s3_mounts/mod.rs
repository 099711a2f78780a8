//! S3 mounts (Configure section `s3_mounts`, docs/mounts.md): bucket
//! prefixes mounted into the sandbox with FUSE, each seen only by the
//! sandbox's processes (attached in its mount namespace,
//! [`crate::isolation::ns_mount`]) and served by a helper
//! ([`helper`]): the agent's own FUSE server over the emulator's S3 on
//! the local backend, `mount-s3` on a MicroVM. Never a copy: every read
//! and write goes to the bucket.
//!
//! An apply is the whole desired set, checked whole first ([`validate`]:
//! an INVALID section touches nothing). Then mounts no longer asked for
//! (or asked differently) are unmounted, identical live ones kept, and new
//! ones answered PENDING and made in the background, each within
//! [`MOUNT_TIMEOUT`]; `ConfigureStatus` tells PENDING, MOUNTED or FAILED
//! with a class. `/resume` checks each mount and remakes a dead one;
//! `/terminate` and the sandbox's end unmount them all.

mod allowlist;
mod fuse;
mod helper;
mod mount;
mod validate;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use self::allowlist::ALLOWED_BUCKETS_VAR;
pub(crate) use self::allowlist::Allowlist;
use self::mount::Live;
use self::validate::MountSpec;
use crate::pb;
use crate::persist::{Persist, PersistenceAccess};
use crate::sandbox::SandboxEnv;

/// How long one mount may take, attach, server start and first answer
/// together, before it fails with `timeout`.
pub const MOUNT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long `/resume` waits for a mount's answer before remaking it.
pub const RESUME_CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// Classes (the SDK's closed `MountCode` list).
pub(crate) const IAM_DENIED: &str = "iam_denied";
pub(crate) const HELPER_MISSING: &str = "helper_missing";
pub(crate) const INVALID_PATH: &str = validate::INVALID_PATH;
pub(crate) const TIMEOUT: &str = "timeout";
/// What the SDK maps to its own `unknown`.
pub(crate) const UNKNOWN: &str = "unknown";

/// Where one mount stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Pending,
    Mounted,
    Failed(&'static str),
}

/// One asked-for mount.
#[derive(Debug)]
struct Entry {
    /// Which attempt owns it: a background attempt whose entry was replaced
    /// meanwhile unmounts what it made instead of committing it.
    id: u64,
    spec: MountSpec,
    phase: Phase,
    live: Option<Live>,
    attempt: Option<tokio::task::AbortHandle>,
}

#[derive(Debug, Default)]
struct Table {
    /// Whether a section was applied yet (status reports none before).
    applied: bool,
    mounts: BTreeMap<String, Entry>,
    next_id: u64,
}

/// One agent's S3 mounts.
#[derive(Debug)]
pub(crate) struct S3Mounts {
    enabled: bool,
    env: SandboxEnv,
    persist: Arc<Persist>,
    allowlist: Allowlist,
    /// Applies and `/resume` checks take their turn.
    applying: tokio::sync::Mutex<()>,
    table: Arc<Mutex<Table>>,
}

/// What an apply answers: the section's code and class.
pub(crate) type Outcome = (pb::SectionCode, &'static str);

impl Drop for S3Mounts {
    fn drop(&mut self) {
        self.stop_all();
    }
}

impl S3Mounts {
    /// The section of an agent whose sandbox is `env`; `enabled: false`
    /// is an agent without the feature (UNSUPPORTED, Health's flag false).
    pub(crate) fn new(
        enabled: bool,
        env: SandboxEnv,
        persist: Arc<Persist>,
        allowlist: Allowlist,
    ) -> Self {
        Self {
            enabled,
            env,
            persist,
            allowlist,
            applying: tokio::sync::Mutex::new(()),
            table: Arc::default(),
        }
    }

    /// Whether this agent can mount: the feature on, FUSE mounts allowed
    /// (`/dev/fuse` and `fsopen("fuse")`), a mount namespace of the
    /// sandbox's own, and a helper (the local backend's own, or
    /// `mount-s3` on the PATH).
    pub(crate) fn supported(&self) -> bool {
        self.enabled
            && self.env.can_attach_mounts()
            && fuse::available()
            && match self.persist.access() {
                PersistenceAccess::Local(_) => true,
                PersistenceAccess::Aws => helper::mount_s3_on_path(),
            }
    }

    /// Applies a section: the whole desired set of mounts.
    pub(crate) async fn apply(&self, config: pb::S3MountsConfig) -> Outcome {
        if !self.enabled {
            return (pb::SectionCode::Unsupported, "");
        }
        let specs = match validate::section(&config, &self.allowlist) {
            Ok(specs) => specs,
            Err(class) => return (pb::SectionCode::Invalid, class),
        };
        let _turn = self.applying.lock().await;
        let wanted: BTreeMap<String, MountSpec> =
            specs.into_iter().map(|s| (s.path.clone(), s)).collect();
        let mut gone = Vec::new();
        let mut started = Vec::new();
        {
            let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
            table.applied = true;
            let stale: Vec<String> = table
                .mounts
                .iter()
                .filter(|(path, entry)| {
                    wanted.get(*path) != Some(&entry.spec)
                        || matches!(entry.phase, Phase::Failed(_))
                })
                .map(|(path, _)| path.clone())
                .collect();
            for path in stale {
                if let Some(entry) = table.mounts.remove(&path) {
                    gone.push(entry);
                }
            }
            for (path, spec) in wanted {
                if table.mounts.contains_key(&path) {
                    continue;
                }
                let id = table.next_id;
                table.next_id += 1;
                table.mounts.insert(
                    path,
                    Entry {
                        id,
                        spec: spec.clone(),
                        phase: Phase::Pending,
                        live: None,
                        attempt: None,
                    },
                );
                started.push((id, spec));
            }
        }
        self.unmount_entries(gone).await;
        let pending = !started.is_empty();
        for (id, spec) in started {
            self.start_attempt(id, spec);
        }
        if pending {
            (pb::SectionCode::Pending, "")
        } else {
            (pb::SectionCode::Applied, "")
        }
    }

    /// Makes `spec` in the background, within [`MOUNT_TIMEOUT`], and
    /// commits the outcome to its entry if the entry is still `id`'s.
    fn start_attempt(&self, id: u64, spec: MountSpec) {
        let env = self.env.clone();
        let access = self.persist.access();
        let table = self.table.clone();
        let path = spec.path.clone();
        let task =
            tokio::spawn(async move {
                let outcome =
                    match tokio::time::timeout(MOUNT_TIMEOUT, mount::mount(&env, &spec, access))
                        .await
                    {
                        Ok(outcome) => outcome,
                        Err(_) => Err(TIMEOUT),
                    };
                let orphan = {
                    let mut table = table.lock().unwrap_or_else(|p| p.into_inner());
                    match table.mounts.get_mut(&spec.path).filter(|e| e.id == id) {
                        Some(entry) => {
                            entry.attempt = None;
                            match outcome {
                                Ok(live) => {
                                    entry.phase = Phase::Mounted;
                                    entry.live = Some(live);
                                }
                                Err(class) => entry.phase = Phase::Failed(class),
                            }
                            None
                        }
                        None => outcome.ok(),
                    }
                };
                if let Some(live) = orphan {
                    let _ = tokio::task::spawn_blocking(move || live.unmount(&env)).await;
                }
            });
        let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(entry) = table.mounts.get_mut(&path).filter(|e| e.id == id)
            && entry.phase == Phase::Pending
        {
            entry.attempt = Some(task.abort_handle());
        }
    }

    /// Unmounts what `entries` hold (an attempt still running is aborted:
    /// it unmakes what it made).
    async fn unmount_entries(&self, entries: Vec<Entry>) {
        let mut lives = Vec::new();
        for entry in entries {
            if let Some(attempt) = entry.attempt {
                attempt.abort();
            }
            lives.extend(entry.live);
        }
        if lives.is_empty() {
            return;
        }
        let env = self.env.clone();
        let _ = tokio::task::spawn_blocking(move || {
            for live in lives {
                live.unmount(&env);
            }
        })
        .await;
    }

    /// The section's status: every asked-for mount, by path (`None` before
    /// the first apply).
    pub(crate) fn status(&self) -> Option<pb::S3MountsStatus> {
        let table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        if !table.applied {
            return None;
        }
        Some(pb::S3MountsStatus {
            mounts: table
                .mounts
                .iter()
                .map(|(path, entry)| {
                    let (phase, class) = match entry.phase {
                        Phase::Pending => (pb::S3MountPhase::Pending, ""),
                        Phase::Mounted => (pb::S3MountPhase::Mounted, ""),
                        Phase::Failed(class) => (pb::S3MountPhase::Failed, class),
                    };
                    pb::S3MountState {
                        mount_path: path.clone(),
                        phase: phase as i32,
                        error_class: class.to_owned(),
                    }
                })
                .collect(),
        })
    }

    /// `/resume`: checks every mounted mount (its server alive, one round
    /// trip within [`RESUME_CHECK_TIMEOUT`]) and remakes each dead one
    /// (PENDING again, then MOUNTED or FAILED). Resolves once every remake
    /// has started.
    pub(crate) async fn recheck(&self) {
        if !self.enabled {
            return;
        }
        let _turn = self.applying.lock().await;
        let mut lives: Vec<(String, u64, Live)> = {
            let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
            table
                .mounts
                .iter_mut()
                .filter_map(|(path, e)| e.live.take().map(|live| (path.clone(), e.id, live)))
                .collect()
        };
        let mut dead = Vec::new();
        let mut alive = Vec::new();
        for (path, id, mut live) in lives.drain(..) {
            if live.check(RESUME_CHECK_TIMEOUT).await {
                alive.push((path, id, live));
            } else {
                dead.push((path, id, live));
            }
        }
        let mut restart = Vec::new();
        let mut unmount = Vec::new();
        {
            let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
            for (path, id, live) in alive {
                match table.mounts.get_mut(&path).filter(|e| e.id == id) {
                    Some(entry) => entry.live = Some(live),
                    // Replaced meanwhile: not asked for any more.
                    None => unmount.push(live),
                }
            }
            for (path, id, live) in dead {
                let next = table.next_id;
                table.next_id += 1;
                if let Some(entry) = table.mounts.get_mut(&path).filter(|e| e.id == id) {
                    entry.id = next;
                    entry.phase = Phase::Pending;
                    restart.push((next, entry.spec.clone()));
                }
                unmount.push(live);
            }
        }
        if !restart.is_empty() {
            tracing::info!(
                count = restart.len(),
                "remaking S3 mounts whose helper died"
            );
        }
        if !unmount.is_empty() {
            let env = self.env.clone();
            let _ = tokio::task::spawn_blocking(move || {
                for live in unmount {
                    live.unmount(&env);
                }
            })
            .await;
        }
        for (id, spec) in restart {
            self.start_attempt(id, spec);
        }
    }

    /// Stops every mount's server, leaving the mounts attached, as if each
    /// had crashed (fault injection; `/resume` remakes them).
    pub(crate) fn crash_helpers(&self) {
        let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        for live in table.mounts.values_mut().filter_map(|e| e.live.as_mut()) {
            live.crash_helper();
        }
    }

    /// Unmounts every mount and stops every attempt (`/terminate`, the
    /// sandbox's end). Synchronous: detaching is a few syscalls, and the
    /// servers stop on their own threads.
    pub(crate) fn stop_all(&self) {
        let entries: Vec<Entry> = {
            let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
            std::mem::take(&mut table.mounts).into_values().collect()
        };
        for entry in entries {
            if let Some(attempt) = entry.attempt {
                attempt.abort();
            }
            if let Some(live) = entry.live {
                live.unmount(&self.env);
            }
        }
    }
}
