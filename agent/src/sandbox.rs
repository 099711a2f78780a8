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

#[derive(Debug)]
struct Inner {
    root: PathBuf,
    defaults: Mutex<BTreeMap<String, String>>,
    run_options: Mutex<RunOptions>,
    pgids: Mutex<Vec<i32>>,
}

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
        Ok(Self {
            inner: Arc::new(Inner {
                root: root.to_path_buf(),
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
        cmd.env("HOME", self.to_host(GUEST_HOME));
        cmd.env("LANG", "C.UTF-8");
        for (k, v) in self.inner.defaults.lock().expect("defaults lock").iter() {
            cmd.env(k, v);
        }
        for (k, v) in &spec.envs {
            cmd.env(k, v);
        }
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
        // SAFETY: the closure runs in the forked child before exec and only
        // calls setrlimit(2), which is async-signal-safe and takes a pointer
        // to a local that outlives the call.
        unsafe {
            cmd.pre_exec(move || apply_limits(cpu_seconds));
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

    /// Kills every tracked process group with SIGKILL.
    pub fn kill_all(&self) {
        let pgids = std::mem::take(&mut *self.inner.pgids.lock().expect("pgids lock"));
        for pgid in pgids {
            // SAFETY: kill(2) with a negative pid signals a process group; it
            // takes no pointers and cannot violate memory safety.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
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
