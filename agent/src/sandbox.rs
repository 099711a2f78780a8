//! The sandbox's view of the machine: where its files live on the host, and
//! how its processes are started (clean environment, own process group,
//! limits, and namespaces where the machine allows them).
//!
//! Every child of the agent (commands, kernels) is started through
//! [`SandboxEnv::command`], and every guest path used by a file RPC goes
//! through [`SandboxEnv::to_host`], so both see the same tree.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The guest's home directory, as commands and kernels see it.
pub const GUEST_HOME: &str = "/home/user";

/// What a child process is started with.
#[derive(Clone, Debug, Default)]
pub struct SpawnSpec {
    /// Program to run (looked up on the sandbox PATH).
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Per-call environment, applied over the sandbox defaults.
    pub envs: BTreeMap<String, String>,
    /// Working directory as a guest path; `None` is the home.
    pub cwd: Option<String>,
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
    /// Whether children get the mount namespace (see `crate::isolation`).
    isolated: bool,
    defaults: Mutex<BTreeMap<String, String>>,
    run_options: Mutex<RunOptions>,
    pgids: Mutex<Vec<i32>>,
}

// Env values may be secrets: Debug shows only their count.
impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SandboxEnv")
            .field("root", &self.root)
            .field("isolated", &self.isolated)
            .field(
                "default_env_count",
                &self.defaults.lock().map(|d| d.len()).unwrap_or(0),
            )
            .finish_non_exhaustive()
    }
}

/// The environment variable that marks every process of a sandbox, so that
/// terminate finds processes that left their process group (`setsid`).
pub const SANDBOX_MARKER: &str = "RAYITO_SANDBOX";

/// Per-sandbox options from the run payload.
#[derive(Debug, Default, Clone)]
struct RunOptions {
    /// Default working directory (guest path) when a call gives none.
    workdir: Option<String>,
    /// RLIMIT_CPU for every process, in seconds.
    cpu_seconds: Option<u64>,
}

impl SandboxEnv {
    /// A sandbox rooted at `root` (a host directory); creates `home/user`
    /// and `tmp` below it.
    pub fn new(root: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(root.join("home/user"))?;
        std::fs::create_dir_all(root.join("tmp"))?;
        let isolated = crate::isolation::available();
        Ok(Self {
            inner: Arc::new(Inner {
                root: root.to_path_buf(),
                marker: format!("{:016x}", rand::random::<u64>()),
                isolated,
                defaults: Mutex::new(BTreeMap::new()),
                run_options: Mutex::new(RunOptions::default()),
                pgids: Mutex::new(Vec::new()),
            }),
        })
    }

    /// The sandbox's root directory on the host.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// Sets the default environment of every later process (the run payload's `envs`).
    pub fn set_default_envs(&self, envs: BTreeMap<String, String>) {
        *self.inner.defaults.lock().expect("defaults lock") = envs;
    }

    /// Sets the payload's default working directory and CPU-time limit.
    pub fn set_run_options(&self, workdir: Option<String>, cpu_seconds: Option<u64>) {
        *self.inner.run_options.lock().expect("run options lock") = RunOptions {
            workdir,
            cpu_seconds,
        };
    }

    /// Whether children run in their own mount namespace, where
    /// `/home/user` and `/tmp` are the sandbox's (else HOME is the host path).
    pub fn is_isolated(&self) -> bool {
        self.inner.isolated
    }

    /// The host path behind a guest path (absolute, already validated).
    pub fn to_host(&self, guest: &str) -> PathBuf {
        self.inner.root.join(guest.trim_start_matches('/'))
    }

    /// A command for `spec`, with the sandbox's environment, its own process
    /// group and the sandbox limits. The caller spawns it and then calls
    /// [`SandboxEnv::track`] with its pid.
    pub fn command(&self, spec: &SpawnSpec) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&spec.program);
        cmd.args(&spec.args);
        cmd.env_clear();
        cmd.env(
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        );
        if self.inner.isolated {
            cmd.env("HOME", GUEST_HOME);
        } else {
            cmd.env("HOME", self.to_host(GUEST_HOME));
        }
        cmd.env("LANG", "C.UTF-8");
        for (k, v) in self.inner.defaults.lock().expect("defaults lock").iter() {
            cmd.env(k, v);
        }
        for (k, v) in &spec.envs {
            cmd.env(k, v);
        }
        cmd.env(SANDBOX_MARKER, &self.inner.marker);
        let options = self
            .inner
            .run_options
            .lock()
            .expect("run options lock")
            .clone();
        let cwd = spec
            .cwd
            .as_deref()
            .or(options.workdir.as_deref())
            .unwrap_or(GUEST_HOME);
        cmd.current_dir(self.to_host(cwd));
        cmd.process_group(0);
        cmd.kill_on_drop(true);
        let cpu_seconds = options.cpu_seconds;
        // Prepared before fork: nothing may allocate in the child.
        let plan = if self.inner.isolated {
            crate::isolation::MountPlan::new(&self.inner.root, cwd).ok()
        } else {
            None
        };
        // SAFETY: the closure runs in the forked child before exec and only
        // makes async-signal-safe syscalls (setrlimit, unshare, mount, mkdir,
        // chdir) on memory prepared before the fork.
        unsafe {
            cmd.pre_exec(move || {
                apply_limits(cpu_seconds)?;
                if let Some(plan) = &plan {
                    plan.apply()?;
                }
                Ok(())
            });
        }
        cmd
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

    /// Kills every tracked process group with SIGKILL, then every process
    /// that still carries this sandbox's marker (one that left its group).
    pub fn kill_all(&self) {
        let pgids = std::mem::take(&mut *self.inner.pgids.lock().expect("pgids lock"));
        for pgid in pgids {
            // SAFETY: kill(2) with a negative pid signals a process group; it
            // takes no pointers and cannot violate memory safety.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
        for pid in self.marked_pids() {
            // SAFETY: as above, a plain kill(2) of one pid.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }

    /// Pids whose environment carries this sandbox's marker.
    fn marked_pids(&self) -> Vec<i32> {
        let needle = format!("{SANDBOX_MARKER}={}", self.inner.marker);
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        dir.flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/environ"))
                    .map(|env| env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()))
                    .unwrap_or(false)
            })
            .collect()
    }
}

/// Sets one resource limit (soft and hard) in the current process.
fn set_limit(resource: libc::__rlimit_resource_t, value: u64) -> std::io::Result<()> {
    let limit = libc::rlimit {
        rlim_cur: value as libc::rlim_t,
        rlim_max: value as libc::rlim_t,
    };
    // SAFETY: setrlimit(2) reads the struct we pass by pointer; it lives on
    // this stack frame for the whole call.
    let rc = unsafe { libc::setrlimit(resource, &limit) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The sandbox limits every child gets: no core dumps, 1024 descriptors, and
/// the payload's CPU-time limit. Runs between fork and exec.
fn apply_limits(cpu_seconds: Option<u64>) -> std::io::Result<()> {
    set_limit(libc::RLIMIT_CORE, 0)?;
    set_limit(libc::RLIMIT_NOFILE, 1024)?;
    if let Some(secs) = cpu_seconds {
        set_limit(libc::RLIMIT_CPU, secs)?;
    }
    Ok(())
}
