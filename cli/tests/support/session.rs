//! One run of the `rayito` binary's tests: a cache and a temp directory of
//! its own (the local-backend daemon's state and its sandboxes live there),
//! an environment that ignores the caller's rayito settings, and the daemon
//! stopped however the test ends. Shared by the CLI's process tests.
#![allow(dead_code)]

use std::process::{Command, Output};

use serde_json::Value;

/// The caller's settings a test must not inherit.
const UNSET: [&str; 7] = [
    "RAYITO_TEMPLATE",
    "RAYITO_TRANSFER_BUCKET",
    "RAYITO_BUCKET",
    "AWS_ENDPOINT_URL",
    "RUST_LOG",
    "RAYITO_BACKEND",
    "RAYITO_SANDBOX_ID",
];

/// A cache and temp directory of its own, and the environment every
/// invocation gets.
pub struct Session {
    pub cache: tempfile::TempDir,
    pub tmp: tempfile::TempDir,
    env: Vec<(&'static str, String)>,
}

impl Session {
    /// `RAYITO_BACKEND=local`: every command runs on the local backend.
    pub fn local() -> Session {
        Session::unset_backend().env("RAYITO_BACKEND", "local")
    }

    /// No backend in the environment: each command says `--local` (or
    /// meets AWS, at an endpoint the test gives).
    pub fn unset_backend() -> Session {
        Session {
            cache: tempfile::tempdir().expect("cache dir"),
            tmp: tempfile::tempdir().expect("tmp dir"),
            env: Vec::new(),
        }
    }

    /// `name=value` in every invocation's environment.
    pub fn env(mut self, name: &'static str, value: impl Into<String>) -> Session {
        self.env.push((name, value.into()));
        self
    }

    /// The binary with `args`, not yet run.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_rayito"));
        cmd.args(args)
            .env("RAYITO_CACHE_DIR", self.cache.path())
            // The daemon's sandboxes live under TMPDIR: this test's own.
            .env("TMPDIR", self.tmp.path());
        for name in UNSET {
            cmd.env_remove(name);
        }
        for (name, value) in &self.env {
            cmd.env(name, value);
        }
        cmd
    }

    /// Runs `args` to the end.
    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("run rayito")
    }

    /// Runs `args`, which must succeed; its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "{args:?} failed ({:?}): {}\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("UTF-8 output")
    }

    /// Runs `args`, which must succeed with one JSON document on stdout.
    pub fn json(&self, args: &[&str]) -> Value {
        serde_json::from_str(&self.ok(args)).expect("one JSON document on stdout")
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.run(&["--local", "local", "stop"]);
    }
}
