//! EFS volumes (Configure section `efs_volumes`, docs/volumes.md): each
//! volume an EFS access point mounted at a path of the sandbox, in the
//! sandbox's own mount namespace.
//!
//! Every apply is the whole desired set: validated first (INVALID leaves
//! the volumes in force as they were), then the volumes no longer asked
//! for are detached, identical live ones kept, and the new ones mounted
//! inside the call, one at a time, until the first failure (each bounded
//! by [`helper::HELPER_BOUND`]): APPLIED, or FAILED with that volume's
//! class. On a MicroVM a volume is `mount -t efs` ([`helper`]); on the
//! local backend, the emulator's directory of the access point as an
//! idmapped bind ([`local`]). Either way the sandbox gets a detached clone
//! attached in its namespace ([`attach`]), whose descriptor the agent
//! keeps: to flush it on `/suspend`, probe it on `/resume`, detach it.

mod attach;
mod helper;
mod local;
mod validate;

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use self::validate::VolumeSpec;
use crate::isolation::ns_mount::NsMount;
use crate::local_volumes::LocalVolumes;
use crate::pb;
use crate::sandbox::SandboxEnv;

/// The mount target or the helper's tunnel could not be reached.
pub(crate) const NETWORK: &str = "network";
/// The execution role (IAM) was refused.
pub(crate) const IAM_DENIED: &str = "iam_denied";
/// No such file system or access point.
pub(crate) const NOT_FOUND: &str = "not_found";
/// The TLS tunnel failed.
pub(crate) const TLS: &str = "tls";
/// `mount`, `mount.efs` or the tunnel is not installed.
pub(crate) const HELPER_MISSING: &str = "helper_missing";
/// The helper did not finish within its bound.
pub(crate) const TIMEOUT: &str = "timeout";
/// Anything else.
pub(crate) const UNKNOWN: &str = "unknown";
/// A degraded volume: its root is gone (deleted underneath).
pub(crate) const GONE: &str = "gone";
/// A degraded volume: the server no longer knows its handle.
pub(crate) const STALE: &str = "stale";
/// A degraded volume: the probe did not answer within its bound.
pub(crate) const UNREACHABLE: &str = "unreachable";
/// A degraded volume: `/suspend`'s flush did not finish within its bound.
pub(crate) const FLUSH_TIMEOUT: &str = "flush_timeout";
/// A degraded local volume: the file system refused an idmapped mount, so
/// it is a plain bind (its files keep their on-disk owner).
pub(crate) const NO_IDMAP: &str = "no_idmap";

/// `/suspend`'s flush of every volume, together.
const FLUSH_BOUND: Duration = Duration::from_secs(2);
/// `/resume`'s probe of each volume.
const PROBE_BOUND: Duration = Duration::from_secs(2);

/// How an agent serves the section.
#[derive(Clone, Debug, Default)]
pub(crate) struct VolumeOptions {
    /// `AgentConfig::efs_volumes`.
    pub(crate) enabled: bool,
    /// `AgentConfig::local_volumes`: the local backend's stand-in.
    pub(crate) local: Option<Arc<dyn LocalVolumes>>,
}

/// A volume attached in the sandbox's namespace.
#[derive(Debug)]
struct Mount {
    /// The attached clone (its descriptor: flush, probe, detach).
    ns: NsMount,
    /// pidfds of its tunnels (a MicroVM's).
    proxies: Vec<OwnedFd>,
}

/// One volume of the section in force.
#[derive(Debug)]
struct Entry {
    spec: VolumeSpec,
    state: pb::EfsVolumeState,
    class: &'static str,
    mount: Option<Arc<Mount>>,
}

impl Entry {
    fn new(spec: VolumeSpec) -> Self {
        Self {
            spec,
            state: pb::EfsVolumeState::Requested,
            class: "",
            mount: None,
        }
    }

    /// Mounted and nothing to retry: kept by an identical apply.
    fn is_live(&self) -> bool {
        self.mount.is_some()
            && (self.state == pb::EfsVolumeState::Mounted
                || (self.state == pb::EfsVolumeState::Degraded && self.class == NO_IDMAP))
    }

    fn set(&mut self, state: pb::EfsVolumeState, class: &'static str) {
        self.state = state;
        self.class = class;
    }
}

/// One agent's volumes.
#[derive(Debug)]
pub(crate) struct EfsVolumes {
    options: VolumeOptions,
    env: SandboxEnv,
    /// Applies and `/resume`'s remounts take their turn.
    turn: tokio::sync::Mutex<()>,
    /// The section in force; `None` until the first apply.
    entries: Mutex<Option<Vec<Entry>>>,
    /// Set by `/terminate`: nothing is mounted any more.
    closed: AtomicBool,
    /// Names each staging directory.
    serial: AtomicU64,
}

impl EfsVolumes {
    pub(crate) fn new(options: VolumeOptions, env: SandboxEnv) -> Self {
        Self {
            options,
            env,
            turn: tokio::sync::Mutex::new(()),
            entries: Mutex::new(None),
            closed: AtomicBool::new(false),
            serial: AtomicU64::new(0),
        }
    }

    /// Whether this agent serves the section (Health's `efs_volumes`):
    /// enabled, the sandbox has a mount namespace, and either the local
    /// stand-in with the agent switching uids (the idmap maps to the
    /// sandbox's host ids), or `mount.efs` installed and mounting allowed.
    pub(crate) fn supported(&self) -> bool {
        self.options.enabled
            && self.env.can_attach_mounts()
            && match &self.options.local {
                Some(_) => self.env.host_ids().is_some(),
                None => helper::helper_present() && helper::mounting_allowed(),
            }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Vec<Entry>>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies a section: the whole desired set of volumes.
    pub(crate) async fn apply(
        &self,
        config: pb::EfsVolumesConfig,
    ) -> (pb::SectionCode, &'static str) {
        if !self.supported() {
            return (pb::SectionCode::Unsupported, "");
        }
        let specs = match validate::section(&config) {
            Ok(specs) => specs,
            Err(class) => return (pb::SectionCode::Invalid, class),
        };
        let _turn = self.turn.lock().await;
        if self.closed.load(Ordering::SeqCst) {
            return (pb::SectionCode::Failed, UNKNOWN);
        }
        let old = self.lock().take().unwrap_or_default();
        let (mut kept, gone): (Vec<Entry>, Vec<Entry>) = old
            .into_iter()
            .partition(|e| e.is_live() && specs.contains(&e.spec));
        for entry in gone {
            if let Some(mount) = entry.mount {
                self.take_down(mount).await;
            }
        }
        let entries = specs
            .into_iter()
            .map(|spec| match kept.iter().position(|e| e.spec == spec) {
                Some(at) => kept.swap_remove(at),
                None => Entry::new(spec),
            })
            .collect::<Vec<_>>();
        let todo: Vec<(usize, VolumeSpec)> = entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.state == pb::EfsVolumeState::Requested)
            .map(|(i, e)| (i, e.spec.clone()))
            .collect();
        *self.lock() = Some(entries);
        let mut failed = None;
        for (at, spec) in todo {
            if failed.is_some() {
                self.update(at, |e| e.set(pb::EfsVolumeState::Unmounted, ""));
                continue;
            }
            self.update(at, |e| e.set(pb::EfsVolumeState::Mounting, ""));
            match self.mount_one(&spec).await {
                Ok((mount, degraded)) => {
                    if self.closed.load(Ordering::SeqCst) {
                        self.take_down(Arc::new(mount)).await;
                        return (pb::SectionCode::Failed, UNKNOWN);
                    }
                    self.update(at, |e| {
                        e.mount = Some(Arc::new(mount));
                        match degraded {
                            Some(class) => e.set(pb::EfsVolumeState::Degraded, class),
                            None => e.set(pb::EfsVolumeState::Mounted, ""),
                        }
                    });
                }
                Err(class) => {
                    self.update(at, |e| e.set(pb::EfsVolumeState::Failed, class));
                    failed = Some(class);
                }
            }
        }
        match failed {
            None => (pb::SectionCode::Applied, ""),
            Some(class) => (pb::SectionCode::Failed, class),
        }
    }

    /// Changes entry `at` of the section in force.
    fn update(&self, at: usize, f: impl FnOnce(&mut Entry)) {
        if let Some(entry) = self.lock().as_mut().and_then(|e| e.get_mut(at)) {
            f(entry);
        }
    }

    /// Mounts one volume and attaches it; on success, the DEGRADED class
    /// it starts with, if any.
    async fn mount_one(
        &self,
        spec: &VolumeSpec,
    ) -> Result<(Mount, Option<&'static str>), &'static str> {
        match self.options.local.clone() {
            Some(local) => self.mount_local(local, spec.clone()).await,
            None => {
                let serial = self.serial.fetch_add(1, Ordering::Relaxed);
                let mounted = helper::mount(spec, serial).await?;
                let env = self.env.clone();
                let path = spec.path.clone();
                let helper::Mounted { tree, proxies } = mounted;
                let attached = blocking(move || attach_in(&env, tree, &path)).await;
                match attached {
                    Ok(ns) => Ok((Mount { ns, proxies }, None)),
                    Err(class) => {
                        helper::stop_proxies(proxies).await;
                        Err(class)
                    }
                }
            }
        }
    }

    /// The local backend: resolve, clone with the idmap, attach; bounded
    /// like the helper (a late success is detached again).
    async fn mount_local(
        &self,
        local: Arc<dyn LocalVolumes>,
        spec: VolumeSpec,
    ) -> Result<(Mount, Option<&'static str>), &'static str> {
        let env = self.env.clone();
        let work = tokio::task::spawn_blocking(move || {
            let volume = local
                .resolve(&spec.file_system_id, &spec.access_point_id)
                .map_err(|e| e.class())?;
            let tree = local::tree(&volume, env.host_ids(), spec.read_only).map_err(|err| {
                if err.kind() == std::io::ErrorKind::NotFound {
                    NOT_FOUND
                } else if err.raw_os_error() == Some(libc::ELOOP) {
                    // A link where the access point's directory was: a
                    // sandbox swapped it; nothing is mounted.
                    validate::INVALID_PATH
                } else {
                    UNKNOWN
                }
            })?;
            let degraded = (!tree.idmapped).then_some(NO_IDMAP);
            let ns = attach_in(&env, tree.fd, &spec.path)?;
            Ok::<_, &'static str>((
                Mount {
                    ns,
                    proxies: Vec::new(),
                },
                degraded,
            ))
        });
        let mut work = work;
        match tokio::time::timeout(helper::HELPER_BOUND, &mut work).await {
            Ok(joined) => joined.map_err(|_| UNKNOWN)?,
            Err(_) => {
                let env = self.env.clone();
                // Whatever it did once it finishes is undone.
                tokio::spawn(async move {
                    if let Ok(Ok((mount, _))) = work.await {
                        let _ = env.detach_mount(&mount.ns);
                    }
                });
                Err(TIMEOUT)
            }
        }
    }

    /// Detaches a volume and stops its tunnels.
    async fn take_down(&self, mount: Arc<Mount>) {
        let env = self.env.clone();
        let held = mount.clone();
        let _ = blocking(move || env.detach_mount(&held.ns).map_err(|_| UNKNOWN)).await;
        if let Ok(mount) = Arc::try_unwrap(mount) {
            helper::stop_proxies(mount.proxies).await;
        }
    }

    /// What ConfigureStatus reports: `None` until a section was applied.
    pub(crate) fn status(&self) -> Option<pb::EfsVolumesStatus> {
        let entries = self.lock();
        let entries = entries.as_ref()?;
        Some(pb::EfsVolumesStatus {
            volumes: entries
                .iter()
                .map(|e| pb::EfsVolumeStatus {
                    mount_path: e.spec.path.clone(),
                    state: e.state as i32,
                    last_error_class: e.class.to_owned(),
                })
                .collect(),
        })
    }

    /// The mounts in force.
    fn mounts(&self) -> Vec<Arc<Mount>> {
        self.lock()
            .iter()
            .flatten()
            .filter_map(|e| e.mount.clone())
            .collect()
    }

    /// Changes the entry holding `mount`, if it still does (an apply may
    /// have replaced the section meanwhile).
    fn update_mount(&self, mount: &Arc<Mount>, f: impl FnOnce(&mut Entry)) {
        let mut entries = self.lock();
        let entry = entries
            .iter_mut()
            .flatten()
            .find(|e| e.mount.as_ref().is_some_and(|m| Arc::ptr_eq(m, mount)));
        if let Some(entry) = entry {
            f(entry);
        }
    }

    /// `/suspend`: flushes every volume (`syncfs`), all within
    /// [`FLUSH_BOUND`]; one that does not finish is DEGRADED
    /// `flush_timeout` (its data may not have reached the server) until
    /// `/resume` finds it well.
    pub(crate) async fn on_suspend(&self) {
        let flushes = self.mounts().into_iter().map(|mount| async move {
            let flushing = mount.clone();
            let flushed = tokio::time::timeout(
                FLUSH_BOUND,
                tokio::task::spawn_blocking(move || rustix::fs::syncfs(flushing.ns.root())),
            )
            .await;
            (mount, matches!(flushed, Ok(Ok(Ok(())))))
        });
        for (mount, flushed) in futures_util::future::join_all(flushes).await {
            if !flushed {
                self.update_mount(&mount, |e| {
                    e.set(pb::EfsVolumeState::Degraded, FLUSH_TIMEOUT);
                });
            }
        }
    }

    /// `/resume`: probes every volume (within [`PROBE_BOUND`] each, all at
    /// once); one that does not answer is REMOUNTING when this returns,
    /// and is remounted in the background (the hook does not wait for
    /// the helper); one that cannot be is DEGRADED with what the probe
    /// found (`gone`, `stale`, `unreachable`).
    pub(crate) async fn on_resume(self: &Arc<Self>) {
        let probes = self.mounts().into_iter().map(|mount| async move {
            let probed = mount.clone();
            let health = tokio::time::timeout(
                PROBE_BOUND,
                tokio::task::spawn_blocking(move || attach::probe(probed.ns.root())),
            )
            .await;
            let problem = match health {
                Ok(Ok(Ok(()))) => None,
                Ok(Ok(Err(class))) => Some(class),
                _ => Some(UNREACHABLE),
            };
            (mount, problem)
        });
        let mut unwell = Vec::new();
        for (mount, problem) in futures_util::future::join_all(probes).await {
            match problem {
                None => self.update_mount(&mount, |e| {
                    if e.class == FLUSH_TIMEOUT {
                        e.set(pb::EfsVolumeState::Mounted, "");
                    }
                }),
                Some(problem) => {
                    self.update_mount(&mount, |e| {
                        e.set(pb::EfsVolumeState::Remounting, problem);
                    });
                    unwell.push((mount, problem));
                }
            }
        }
        if !unwell.is_empty() {
            let this = self.clone();
            tokio::spawn(async move { this.remount(unwell).await });
        }
    }

    /// Remounts each of `unwell` that the section in force still holds.
    async fn remount(&self, unwell: Vec<(Arc<Mount>, &'static str)>) {
        let _turn = self.turn.lock().await;
        for (mount, problem) in unwell {
            if self.closed.load(Ordering::SeqCst) {
                return;
            }
            let mut spec = None;
            self.update_mount(&mount, |e| {
                spec = Some(e.spec.clone());
                e.mount = None;
            });
            let Some(spec) = spec else {
                continue;
            };
            self.take_down(mount).await;
            let remounted = self.mount_one(&spec).await;
            // No apply ran meanwhile (the turn is held): the spec finds it.
            let mut entries = self.lock();
            let Some(entry) = entries.iter_mut().flatten().find(|e| e.spec == spec) else {
                continue;
            };
            match remounted {
                Ok((new, degraded)) => {
                    entry.mount = Some(Arc::new(new));
                    match degraded {
                        Some(class) => entry.set(pb::EfsVolumeState::Degraded, class),
                        None => entry.set(pb::EfsVolumeState::Mounted, ""),
                    }
                }
                Err(_) => entry.set(pb::EfsVolumeState::Degraded, problem),
            }
        }
    }

    /// `/terminate` (and the agent's end): detaches every volume and stops
    /// its tunnels; the section reads UNMOUNTED from then on.
    pub(crate) fn detach_all(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let mut mounts = Vec::new();
        for entry in self.lock().iter_mut().flatten() {
            if let Some(mount) = entry.mount.take() {
                mounts.push(mount);
            }
            entry.set(pb::EfsVolumeState::Unmounted, "");
        }
        let mut proxies = Vec::new();
        for mount in mounts {
            let _ = self.env.detach_mount(&mount.ns);
            if let Ok(mount) = Arc::try_unwrap(mount) {
                proxies.extend(mount.proxies);
            }
        }
        if proxies.is_empty() {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(helper::stop_proxies(proxies));
            }
            Err(_) => {
                std::thread::spawn(move || {
                    if let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                        .enable_time()
                        .build()
                    {
                        runtime.block_on(helper::stop_proxies(proxies));
                    }
                });
            }
        }
    }
}

impl Drop for EfsVolumes {
    fn drop(&mut self) {
        self.detach_all();
    }
}

/// Runs blocking mount work off the runtime's threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, &'static str> + Send + 'static,
) -> Result<T, &'static str> {
    tokio::task::spawn_blocking(f).await.map_err(|_| UNKNOWN)?
}

/// Attaches `tree` at `path` in the sandbox's namespace; a path that
/// cannot hold a mount point (a symlink, a file, a read-only parent) is
/// `invalid_path`.
fn attach_in(env: &SandboxEnv, tree: OwnedFd, path: &str) -> Result<NsMount, &'static str> {
    env.attach_mount(tree, path)
        .map_err(|err| match err.raw_os_error() {
            Some(
                libc::ENOTDIR
                | libc::ELOOP
                | libc::EROFS
                | libc::EACCES
                | libc::EPERM
                | libc::ENOENT
                | libc::EEXIST,
            ) => validate::INVALID_PATH,
            _ => {
                tracing::warn!(error = %err, "EFS volume: the mount could not be attached");
                UNKNOWN
            }
        })
}
