//! The sandbox's view of the machine: where its files live on the host, and
//! how its processes are started (clean environment, own process group,
//! limits, its cgroup, namespaces and an unprivileged uid where the machine
//! allows them; see `crate::isolation`).
//!
//! Every child of the agent (commands, kernels, terminals) is started through
//! [`SandboxEnv::launch`] (or its variants), and every guest path used by a file RPC goes
//! through [`SandboxEnv::to_host`], so both see the same tree; file RPCs act
//! as the sandbox's uid ([`SandboxEnv::as_user`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustix::process::{Pid, Signal};

use crate::isolation::cgroup::{CommandCgroup, SandboxCgroup};
use crate::isolation::layer_root::LayerRoot;
use crate::isolation::uids::UidLease;
use crate::isolation::user::HostIds;
use crate::isolation::{self, ChildSetup, SandboxMounts, SandboxUserNs, Support, launch};

/// The guest's home directory, as commands and kernels see it.
pub const GUEST_HOME: &str = "/home/user";

/// The PATH of every process unless the run payload's envs set another.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The default [`SandboxLimits::pids_max`]: what the reference agent's
/// `RLIMIT_NPROC` gives the sandbox's user (every process and thread of the
/// sandbox counts).
pub const DEFAULT_PIDS_MAX: u64 = 512;
/// The default [`SandboxLimits::memory_max_bytes`]: 2,048 MiB, the memory of
/// the reference's default image.
pub const DEFAULT_MEMORY_MAX_BYTES: u64 = 2048 * 1024 * 1024;

/// Limits on everything a sandbox's processes use together, carried by its
/// cgroup (see `crate::isolation::cgroup`). `None` is no limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SandboxLimits {
    /// Most processes and threads at once (`pids.max`): a fork past it
    /// fails with EAGAIN in the sandbox.
    pub pids_max: Option<u64>,
    /// Most memory, in bytes (`memory.max`, no swap): past it the kernel's
    /// out-of-memory killer ends a process of the sandbox, whose end then
    /// says so.
    pub memory_max_bytes: Option<u64>,
}

impl Default for SandboxLimits {
    /// [`DEFAULT_PIDS_MAX`] and [`DEFAULT_MEMORY_MAX_BYTES`].
    fn default() -> Self {
        Self {
            pids_max: Some(DEFAULT_PIDS_MAX),
            memory_max_bytes: Some(DEFAULT_MEMORY_MAX_BYTES),
        }
    }
}

impl SandboxLimits {
    /// No limit at all.
    pub fn unlimited() -> Self {
        Self {
            pids_max: None,
            memory_max_bytes: None,
        }
    }
}

/// What a child process is started with.
#[derive(Clone, Default)]
pub struct SpawnSpec {
    /// Program to run (looked up on the sandbox PATH).
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Per-call environment, applied over the sandbox defaults.
    pub envs: BTreeMap<String, String>,
    /// Working directory as a guest path; `None` is the home.
    pub cwd: Option<String>,
    /// Whether the run payload's CPU-time limit applies: to every command,
    /// terminal and start command, never to a code kernel (a kernel lives
    /// as long as its context, and its CPU time adds up across cells).
    pub cpu_limited: bool,
}

// Env values and arguments may be secrets: Debug shows the program, the
// argument count and the env names only.
impl std::fmt::Debug for SpawnSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpawnSpec")
            .field("program", &self.program)
            .field("arg_count", &self.args.len())
            .field("env_names", &self.envs.keys().collect::<Vec<_>>())
            .field("cwd", &self.cwd)
            .field("cpu_limited", &self.cpu_limited)
            .finish()
    }
}

/// Shared by every service of one agent. Cheap to clone.
#[derive(Clone, Debug)]
pub struct SandboxEnv {
    inner: Arc<Inner>,
}

struct Inner {
    root: PathBuf,
    /// The value of [`SANDBOX_MARKER`] in every child of this sandbox.
    marker: String,
    /// What the host allows (see `crate::isolation`).
    support: Support,
    /// The unprivileged host uid/gid of the sandbox's processes (agent as root).
    ids: Option<HostIds>,
    /// Keeps `ids` from every other sandbox on the host while this one lives.
    _lease: Option<UidLease>,
    /// Holds every process of the sandbox, where the host has cgroup v2.
    cgroup: Option<SandboxCgroup>,
    /// The mount namespace every child enters, where the host allows one.
    mounts: Option<SandboxMounts>,
    /// The user namespace every child enters (uid 1000 is `ids`), where used.
    userns: Option<SandboxUserNs>,
    /// The image layer over the host's root in the mount namespace, if any.
    image_layer: Option<PathBuf>,
    /// The network namespace every later child enters, and the proxy
    /// variables it gets, once egress enforcement is installed.
    network: Mutex<Option<crate::egress::SandboxNetwork>>,
    /// The image's environment (`template-env.json`), under the payload's.
    template_envs: Mutex<BTreeMap<String, String>>,
    /// The run payload's `envs`.
    defaults: Mutex<BTreeMap<String, String>>,
    run_options: Mutex<RunOptions>,
    pgids: Mutex<Vec<i32>>,
}

// Env values may be secrets: Debug shows only their count.
impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SandboxEnv")
            .field("root", &self.root)
            .field("support", &self.support)
            .field("ids", &self.ids)
            .field("cgroup", &self.cgroup)
            .field(
                "default_env_count",
                &self.defaults.lock().map(|d| d.len()).unwrap_or(0),
            )
            .field(
                "template_env_count",
                &self.template_envs.lock().map(|d| d.len()).unwrap_or(0),
            )
            .finish_non_exhaustive()
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The cgroup's own drop kills what is left in it; the rest (no
        // cgroup on this host) goes through the process groups and marker.
        if self.cgroup.is_none() {
            self.kill_groups_and_marked();
        }
    }
}

/// The environment variable that marks every process of a sandbox, so that
/// terminate finds processes that left their process group (`setsid`) on a
/// host without cgroup v2.
pub const SANDBOX_MARKER: &str = "RAYITO_SANDBOX";

/// What every child of the sandbox is started with (see `SandboxEnv::prepare`).
struct Prepared {
    envs: BTreeMap<String, String>,
    setup: std::io::Result<ChildSetup>,
}

/// Per-sandbox options from the run payload.
#[derive(Debug, Default, Clone)]
struct RunOptions {
    /// Default working directory (guest path) when a call gives none.
    workdir: Option<String>,
    /// RLIMIT_CPU for every process, in seconds.
    cpu_seconds: Option<u64>,
}

/// How a sandbox contains and runs its processes on this host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Containment {
    /// Every process is in the sandbox's own cgroup v2, killed as a whole.
    pub cgroup: bool,
    /// Children get their own mount namespace (`/home/user`, `/tmp`).
    pub mount_namespace: bool,
    /// Children run under an unprivileged host uid (the agent is root).
    pub unprivileged_uid: Option<u32>,
    /// Children see themselves as uid 1000 `user` through a user namespace.
    pub user_namespace: bool,
    /// The limits in force on the sandbox's cgroup (a limit the host cannot
    /// carry, or without a cgroup, is `None`).
    pub limits: SandboxLimits,
}

impl SandboxEnv {
    /// A sandbox rooted at `root` (a host directory); creates `home/user`
    /// and `tmp` below it (owned by the sandbox's uid when the agent is
    /// root), the sandbox's cgroup where the host has cgroup v2, and the
    /// mount and user namespaces its processes enter where the host allows
    /// them.
    ///
    /// # Errors
    /// The directories cannot be created or given to the sandbox's uid, the
    /// host's directories above the root keep that uid out, no uid is free,
    /// or the mount or user namespace cannot be built.
    pub fn new(root: &Path) -> std::io::Result<Self> {
        Self::with_limits(root, &SandboxLimits::default())
    }

    /// As [`SandboxEnv::new`], with `limits` on the sandbox's cgroup.
    ///
    /// # Errors
    /// As [`SandboxEnv::new`].
    pub fn with_limits(root: &Path, limits: &SandboxLimits) -> std::io::Result<Self> {
        Self::create(root, limits, true, None)
    }

    /// As [`SandboxEnv::with_limits`], without a cgroup when `cgroup` is
    /// `false` (the fallback of a host without cgroup v2; see
    /// `AgentConfig::cgroup`), on `image_layer` when given (see
    /// `AgentConfig::image_layer`).
    ///
    /// # Errors
    /// As [`SandboxEnv::new`]; with an image layer, also a host without
    /// mount namespaces (the sandbox would run on the bare host root) and
    /// a layer that cannot be read or mounted.
    pub(crate) fn create(
        root: &Path,
        limits: &SandboxLimits,
        cgroup: bool,
        image_layer: Option<&Path>,
    ) -> std::io::Result<Self> {
        let support = isolation::support();
        let layer = match image_layer {
            None => None,
            Some(_) if !support.mount_ns => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::Unsupported,
                    crate::isolation::layer_root::NO_MOUNT_NAMESPACE,
                ));
            }
            Some(layer) => Some((layer, LayerRoot::plan(layer, &std::path::absolute(root)?)?)),
        };
        let lease = support.switch_uid.then(UidLease::allocate).transpose()?;
        let ids = lease.as_ref().map(UidLease::ids);
        isolation::prepare_root(root, ids, support.user_ns)?;
        if let Some((layer, _)) = &layer {
            // The home is the sandbox's own: the image's content is a copy.
            crate::isolation::layer_root::copy_home(layer, &root.join("home/user"), ids)?;
        }
        let mounts = if support.mount_ns {
            Some(SandboxMounts::create(
                root,
                ids.is_some(),
                layer.as_ref().map(|(_, plan)| plan),
            )?)
        } else {
            None
        };
        let userns = match ids {
            Some(ids) if support.user_ns => Some(SandboxUserNs::create(ids)?),
            _ => None,
        };
        let marker = format!("{:016x}", rand::random::<u64>());
        let cgroup = cgroup
            .then(|| SandboxCgroup::create(&format!("sandbox-{marker}"), limits))
            .flatten();
        Ok(Self {
            inner: Arc::new(Inner {
                root: root.to_path_buf(),
                marker,
                support,
                ids,
                _lease: lease,
                cgroup,
                mounts,
                userns,
                image_layer: image_layer.map(Path::to_path_buf),
                network: Mutex::new(None),
                template_envs: Mutex::new(BTreeMap::new()),
                defaults: Mutex::new(BTreeMap::new()),
                run_options: Mutex::new(RunOptions::default()),
                pgids: Mutex::new(Vec::new()),
            }),
        })
    }

    /// Removes `dir` when this process ends, however it ends, if it still
    /// exists then (for roots the agent created and owns).
    pub fn remove_at_exit(dir: &Path) {
        isolation::exit_cleanup::remove_dir_at_exit(dir);
    }

    /// Withdraws `dir` from [`SandboxEnv::remove_at_exit`]: its owner
    /// removed it, so that the exit cleanup's list keeps the live
    /// directories only.
    pub fn forget_at_exit(dir: &Path) {
        isolation::exit_cleanup::forget_dir_at_exit(dir);
    }

    /// The sandbox's root directory on the host.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// How this sandbox's processes are contained on this host.
    pub fn containment(&self) -> Containment {
        Containment {
            cgroup: self.inner.cgroup.is_some(),
            mount_namespace: self.inner.support.mount_ns,
            unprivileged_uid: self.inner.ids.map(|i| i.uid),
            user_namespace: self.inner.ids.is_some() && self.inner.support.user_ns,
            limits: self
                .inner
                .cgroup
                .as_ref()
                .map_or_else(SandboxLimits::unlimited, SandboxCgroup::limits),
        }
    }

    /// How many of the sandbox's processes the kernel ended so far for
    /// going over its memory limit (0 without one).
    pub(crate) fn oom_kills(&self) -> u64 {
        self.inner
            .cgroup
            .as_ref()
            .map_or(0, SandboxCgroup::oom_kills)
    }

    /// The sandbox's cgroup v2 directory, where it has one (the metrics
    /// read its `cpu.stat` and `memory.*`).
    pub(crate) fn cgroup_dir(&self) -> Option<PathBuf> {
        self.inner.cgroup.as_ref().map(|c| c.dir().to_path_buf())
    }

    /// The memory limit in force, in bytes.
    pub(crate) fn memory_max_bytes(&self) -> Option<u64> {
        self.containment().limits.memory_max_bytes
    }

    /// Sets the image's environment (its template's `template-env.json`):
    /// every later process gets it, under the run payload's `envs` and the
    /// call's own.
    pub fn set_template_envs(&self, envs: BTreeMap<String, String>) {
        *self.inner.template_envs.lock().expect("template envs lock") = envs;
    }

    /// Sets the default environment of every later process (the run payload's `envs`).
    pub fn set_default_envs(&self, envs: BTreeMap<String, String>) {
        *self.inner.defaults.lock().expect("defaults lock") = envs;
    }

    /// Puts every later child in the network namespace `ns` with the proxy
    /// variables `envs` (under the payload's and the call's own envs).
    pub(crate) fn set_network(&self, network: crate::egress::SandboxNetwork) {
        *self.inner.network.lock().expect("network lock") = Some(network);
    }

    /// The network namespace the sandbox's children enter, when egress is
    /// enforced (the secret gateway binds its listeners in it).
    pub(crate) fn network_ns(&self) -> Option<Arc<crate::egress::SandboxNetNs>> {
        self.inner
            .network
            .lock()
            .expect("network lock")
            .as_ref()
            .map(|n| n.ns.clone())
    }

    /// Sets the payload's default working directory and CPU-time limit.
    pub fn set_run_options(&self, workdir: Option<String>, cpu_seconds: Option<u64>) {
        *self.inner.run_options.lock().expect("run options lock") = RunOptions {
            workdir,
            cpu_seconds,
        };
    }

    /// The value of [`SANDBOX_MARKER`] in the environment of every child
    /// of this sandbox (how a harness finds them in `/proc`).
    pub fn marker(&self) -> &str {
        &self.inner.marker
    }

    /// The run payload's default working directory when it is not the home
    /// (the home itself cannot be swapped by the guest: its parent is root's).
    pub(crate) fn moved_workdir(&self) -> Option<String> {
        let options = self.inner.run_options.lock().expect("run options lock");
        options.workdir.clone().filter(|w| w != GUEST_HOME)
    }

    /// Whether the run payload changed what a child starts with: default
    /// envs, a working directory other than the home, or a CPU-time limit.
    pub(crate) fn has_run_settings(&self) -> bool {
        let options = self.inner.run_options.lock().expect("run options lock");
        let workdir_moved = options.workdir.as_deref().is_some_and(|w| w != GUEST_HOME);
        workdir_moved
            || options.cpu_seconds.is_some()
            || self.inner.network.lock().expect("network lock").is_some()
            || !self
                .inner
                .defaults
                .lock()
                .expect("defaults lock")
                .is_empty()
    }

    /// Whether children run in their own mount namespace, where
    /// `/home/user` and `/tmp` are the sandbox's (else HOME is the host path).
    pub fn is_isolated(&self) -> bool {
        self.inner.support.mount_ns
    }

    /// Attaches `mount`, a detached mount the agent built (`fsmount`, or
    /// `open_tree` with `OPEN_TREE_CLONE`), at `guest_path` in the
    /// sandbox's mount namespace (see [`crate::isolation::ns_mount`]):
    /// only the sandbox's processes see it. Directories it creates below
    /// `/home/user` belong to the sandbox's user. Blocks for a few syscalls.
    ///
    /// # Errors
    /// `Unsupported` on a host without mount namespaces (the sandbox's
    /// processes see the host's tree, where a mount would be everyone's);
    /// else as [`SandboxMounts::attach`](crate::isolation::SandboxMounts).
    pub(crate) fn attach_mount(
        &self,
        mount: std::os::fd::OwnedFd,
        guest_path: &str,
    ) -> std::io::Result<crate::isolation::ns_mount::NsMount> {
        let Some(mounts) = &self.inner.mounts else {
            return Err(std::io::Error::from(std::io::ErrorKind::Unsupported));
        };
        let owner = self
            .inner
            .ids
            .filter(|_| guest_path.starts_with("/home/user/"));
        mounts.attach(mount, guest_path, owner)
    }

    /// Detaches a mount [`SandboxEnv::attach_mount`] made.
    ///
    /// # Errors
    /// As [`SandboxMounts::detach`](crate::isolation::SandboxMounts).
    pub(crate) fn detach_mount(
        &self,
        mount: &crate::isolation::ns_mount::NsMount,
    ) -> std::io::Result<()> {
        let Some(mounts) = &self.inner.mounts else {
            return Err(std::io::Error::from(std::io::ErrorKind::Unsupported));
        };
        mounts.detach(mount)
    }

    /// Whether mounts can be made for the sandbox alone
    /// ([`SandboxEnv::attach_mount`]).
    pub(crate) fn can_attach_mounts(&self) -> bool {
        self.inner.mounts.is_some()
    }

    /// The sandbox's unprivileged host uid and gid, when the agent
    /// switches uids.
    pub(crate) fn host_ids(&self) -> Option<HostIds> {
        self.inner.ids
    }

    /// The host path behind a guest path (absolute, already validated).
    pub fn to_host(&self, guest: &str) -> PathBuf {
        self.inner.root.join(guest.trim_start_matches('/'))
    }

    /// Runs `f` (synchronous: no `.await` inside) with this thread's
    /// file-system uid and gid set to the sandbox's, when the agent switches
    /// uids: the file RPCs then can do nothing the sandbox user could not
    /// (a path that sandbox code swapped for a symlink between a check and
    /// its use leads nowhere the user cannot already write), and what they
    /// create belongs to that user, so commands and kernels can rewrite it.
    pub fn as_user<T>(&self, f: impl FnOnce() -> T) -> T {
        let _guard = self.inner.ids.map(crate::isolation::user::FsIdsGuard::set);
        f()
    }

    /// Whether `program` (a bare name) is on the PATH the sandbox's
    /// processes get (the run payload's, else the image's, else the
    /// default), as exec would
    /// look it up: an executable file of that name in one of its
    /// directories. `true` when it cannot tell (a relative PATH entry).
    /// Lets the code service say at once that an interpreter is missing
    /// instead of failing its start in the background.
    pub fn finds_program(&self, program: &str) -> bool {
        use std::os::unix::fs::PermissionsExt as _;
        let payload_path = self
            .inner
            .defaults
            .lock()
            .expect("defaults lock")
            .get("PATH")
            .cloned();
        let path = payload_path
            .or_else(|| {
                let template = self.inner.template_envs.lock().expect("template envs lock");
                template.get("PATH").cloned()
            })
            .unwrap_or_else(|| DEFAULT_PATH.to_owned());
        path.split(':').filter(|d| !d.is_empty()).any(|dir| {
            if !dir.starts_with('/') {
                return true;
            }
            let guest = Path::new(dir).join(program);
            // Inside the mount namespace, the home and /tmp are the sandbox's.
            let private = [GUEST_HOME, "/tmp"].iter().any(|p| guest.starts_with(p));
            let executable = |p: &Path| {
                std::fs::metadata(p)
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            };
            if private && self.inner.support.mount_ns {
                return executable(&self.to_host(&guest.to_string_lossy()));
            }
            // On an image layer, what the layer holds (or hides) first.
            if let Some(layer) = &self.inner.image_layer {
                match crate::isolation::layer_root::layer_entry(layer, &guest) {
                    Some(true) => {
                        return executable(&layer.join(guest.strip_prefix("/").unwrap_or(&guest)));
                    }
                    Some(false) => return false,
                    None => {}
                }
            }
            executable(&guest)
        })
    }

    /// Starts `spec` with the sandbox's environment, in its own process
    /// group, with the sandbox limits, its cgroup, namespaces and uid,
    /// without copying the agent's address space (see
    /// `crate::isolation::launch`): what commands and kernels use, whose
    /// start time is what a caller waits for. The caller then calls
    /// [`SandboxEnv::track`] with its pid.
    ///
    /// # Errors
    /// The setup cannot be prepared, a string holds a NUL byte, the program
    /// cannot be executed (`NotFound`, `PermissionDenied`) or the child's
    /// setup fails.
    pub fn launch(
        &self,
        spec: &SpawnSpec,
        stdin: launch::Stdio,
        stdout: launch::Stdio,
        stderr: launch::Stdio,
    ) -> std::io::Result<launch::LaunchedChild> {
        let plan = self.plan(spec, None)?;
        launch::launch(&plan, stdin, stdout, stderr)
    }

    /// As [`SandboxEnv::launch`], for a terminal's shell: the child leads a
    /// session of its own whose controlling terminal is `tty` (the pty's
    /// slave, its stdin, stdout and stderr), so job control, `^C` and
    /// SIGWINCH on a resize work. The caller then calls
    /// [`SandboxEnv::track`] with its pid.
    ///
    /// # Errors
    /// As [`SandboxEnv::launch`].
    pub(crate) fn launch_on_terminal(
        &self,
        spec: &SpawnSpec,
        tty: std::os::fd::BorrowedFd<'_>,
    ) -> std::io::Result<launch::LaunchedChild> {
        let plan = self.plan(spec, None)?.on_terminal();
        launch::launch_on_terminal(&plan, tty)
    }

    /// As [`SandboxEnv::launch`], in a cgroup of the command's own inside
    /// the sandbox's where the sandbox has one: killing it ends everything
    /// the command started, wherever that moved itself (what the process
    /// service's SIGKILL and timeout of one command use).
    ///
    /// # Errors
    /// As [`SandboxEnv::launch`].
    pub(crate) fn launch_command(
        &self,
        spec: &SpawnSpec,
        stdin: launch::Stdio,
        stdout: launch::Stdio,
        stderr: launch::Stdio,
    ) -> std::io::Result<(launch::LaunchedChild, Option<CommandCgroup>)> {
        let cgroup = self.inner.cgroup.as_ref().and_then(SandboxCgroup::command);
        let plan = self.plan(spec, cgroup.as_ref())?;
        let child = launch::launch(&plan, stdin, stdout, stderr)?;
        Ok((child, cgroup))
    }

    /// The work a command's launch leaves for after its `clone3` (while
    /// the child runs): the ended commands' cgroups go, the next one's is
    /// made.
    pub(crate) fn after_command_launch(&self) {
        if let Some(cgroup) = &self.inner.cgroup {
            cgroup.after_launch();
        }
    }

    /// A command has ended (its whole tree, where it waited for that): its
    /// cgroup goes, if empty then, after the next launch or 20 ms after
    /// the end, whichever comes first.
    pub(crate) fn command_ended(&self, command: &CommandCgroup) {
        if let Some(cgroup) = &self.inner.cgroup {
            cgroup.command_ended(command);
        }
    }

    /// The launch plan of `spec` (see [`SandboxEnv::prepare`]), in a
    /// process group of its own.
    fn plan(
        &self,
        spec: &SpawnSpec,
        cgroup: Option<&CommandCgroup>,
    ) -> std::io::Result<launch::LaunchPlan> {
        let prepared = self.prepare(spec, cgroup);
        launch::LaunchPlan::new(
            &spec.program,
            &spec.args,
            prepared.envs.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            true,
            prepared.setup?,
        )
    }

    /// The environment (later entries win: the base below, the image's
    /// template envs, the run payload's envs, the call's envs, the sandbox
    /// marker), the guest working directory and the isolation setup of a
    /// child of this sandbox (joining the sandbox's cgroups, with `cgroup`
    /// in place of its v2 one when given). A setup that cannot be prepared
    /// fails the spawn rather than running the child less contained; it is
    /// prepared before fork because nothing may allocate in the child.
    fn prepare(&self, spec: &SpawnSpec, cgroup: Option<&CommandCgroup>) -> Prepared {
        let mut envs = BTreeMap::new();
        envs.insert("PATH".to_owned(), DEFAULT_PATH.to_owned());
        let home = if self.inner.support.mount_ns {
            GUEST_HOME.to_owned()
        } else {
            self.to_host(GUEST_HOME).to_string_lossy().into_owned()
        };
        envs.insert("HOME".to_owned(), home);
        envs.insert("LANG".to_owned(), "C.UTF-8".to_owned());
        if self.inner.ids.is_some() {
            envs.insert("USER".to_owned(), "user".to_owned());
            envs.insert("LOGNAME".to_owned(), "user".to_owned());
        }
        let network = self.inner.network.lock().expect("network lock").clone();
        if let Some(network) = &network {
            for (k, v) in &network.envs {
                envs.insert(k.clone(), v.clone());
            }
        }
        for (k, v) in self
            .inner
            .template_envs
            .lock()
            .expect("template envs lock")
            .iter()
        {
            envs.insert(k.clone(), v.clone());
        }
        for (k, v) in self.inner.defaults.lock().expect("defaults lock").iter() {
            envs.insert(k.clone(), v.clone());
        }
        for (k, v) in &spec.envs {
            envs.insert(k.clone(), v.clone());
        }
        envs.insert(SANDBOX_MARKER.to_owned(), self.inner.marker.clone());
        let options = self
            .inner
            .run_options
            .lock()
            .expect("run options lock")
            .clone();
        let cwd = spec
            .cwd
            .clone()
            .or(options.workdir)
            .unwrap_or_else(|| GUEST_HOME.to_owned());
        // Each child is cloned straight into its v2 cgroup where the kernel
        // allows (no move between clone and exec: see `clone_into`), else
        // joins it by its `cgroup.procs`.
        let cgroups = self.inner.cgroup.as_ref().map_or_else(
            || Ok((Vec::new(), None)),
            |sandbox| Ok((sandbox.procs(cgroup)?, Some(sandbox.v2_dir(cgroup)?))),
        );
        // Inside the mount namespace the guest path itself; else its host path.
        let child_cwd = if self.inner.support.mount_ns {
            PathBuf::from(&cwd)
        } else {
            self.to_host(&cwd)
        };
        let setup = cgroups.and_then(|(procs, dir)| {
            ChildSetup::new(
                &child_cwd,
                self.inner.mounts.as_ref(),
                self.inner.userns.as_ref(),
                self.inner.ids,
                procs,
                options.cpu_seconds.filter(|_| spec.cpu_limited),
            )
            .map(|setup| match dir {
                Some(dir) => setup.born_in_cgroup(dir),
                None => setup,
            })
            .and_then(|setup| match &network {
                Some(network) => setup.with_netns(network.ns.fd()),
                None => Ok(setup),
            })
        });
        Prepared { envs, setup }
    }

    /// Remembers a child's process group so that terminate can kill it.
    pub fn track(&self, pid: u32) {
        self.inner
            .pgids
            .lock()
            .expect("pgids lock")
            .push(pid as i32);
    }

    /// Forgets a process group that has been reaped (so that a recycled pid
    /// is never signalled by [`SandboxEnv::kill_all`]).
    pub fn untrack(&self, pid: u32) {
        self.inner
            .pgids
            .lock()
            .expect("pgids lock")
            .retain(|p| *p != pid as i32);
    }

    /// Kills every process of the sandbox with SIGKILL: its whole cgroup
    /// where there is one, and every tracked process group and every process
    /// that still carries this sandbox's marker in any case.
    pub fn kill_all(&self) {
        if let Some(cgroup) = &self.inner.cgroup {
            cgroup.kill();
        }
        self.inner.kill_groups_and_marked();
    }

    /// Whether a process of this sandbox listens on TCP `port` (its cgroup's
    /// members where it has one, else its marked processes): what the
    /// emulated proxy forwards a port other than the agent's to.
    pub fn listens_on(&self, port: u16) -> bool {
        let inodes = crate::isolation::sockets::listening_inodes(port);
        if inodes.is_empty() {
            return false;
        }
        let member = format!("/sandbox-{}", self.inner.marker);
        // A process cannot leave its cgroup; the marker it can clear.
        let marked: Option<std::collections::HashSet<i32>> = self
            .inner
            .cgroup
            .is_none()
            .then(|| self.inner.marked_pids().into_iter().collect());
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return false;
        };
        dir.flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| match &marked {
                None => std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
                    .is_ok_and(|groups| groups.lines().any(|l| l.contains(&member))),
                Some(marked) => marked.contains(pid),
            })
            .any(|pid| crate::isolation::sockets::holds_any(pid, &inodes))
    }

    /// Whether any process of the sandbox is still running, as far as the
    /// agent can tell (its cgroup where there is one, else its tracked
    /// groups and marked processes).
    pub fn has_processes(&self) -> bool {
        match &self.inner.cgroup {
            Some(cgroup) => cgroup.populated(),
            None => {
                !self.inner.pgids.lock().expect("pgids lock").is_empty()
                    || !self.inner.marked_pids().is_empty()
            }
        }
    }
}

impl Inner {
    fn kill_groups_and_marked(&self) {
        let pgids = std::mem::take(&mut *self.pgids.lock().unwrap_or_else(|p| p.into_inner()));
        for pgid in pgids.into_iter().filter_map(Pid::from_raw) {
            let _ = rustix::process::kill_process_group(pgid, Signal::KILL);
        }
        isolation::marker::Needle::new(&self.marker).kill_marked();
    }

    /// Pids whose environment carries this sandbox's marker.
    fn marked_pids(&self) -> Vec<i32> {
        isolation::marker::Needle::new(&self.marker).marked_pids()
    }
}
