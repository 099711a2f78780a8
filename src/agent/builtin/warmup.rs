//! `agent_pool_warmup`: the pool's warm-up steps for a built-in runtime, so
//! that a sandbox taken from the pool starts its first run with nothing to
//! install or write: the runtime installed when the image lacks it, the
//! adapter files in place, and the binary read once into the page cache
//! (kept by the pause's snapshot on AWS).

use std::time::Duration;

use base64::Engine as _;

use super::BuiltinRuntime;
use crate::error::SandboxError;
use crate::pool::WarmupStep;

/// How long the install step may take: an npm install of a ~180 MB
/// package on a cold cache. A sandbox of `AgentTemplate` skips it (the
/// check passes at once).
pub(crate) const INSTALL_TIMEOUT: Duration = Duration::from_secs(600);

/// The warm-up steps of `runtime` for
/// [`PoolConfig::warmup`](crate::PoolConfig::warmup), in order: install
/// when missing, write the runtime's files, load the runtime once.
///
/// ```no_run
/// use rayito::PoolConfig;
/// use rayito::agent::agent_pool_warmup;
///
/// # fn f() -> Result<(), rayito::SandboxError> {
/// let mut config = PoolConfig::new(2);
/// for step in agent_pool_warmup("opencode")? {
///     config = config.warmup(step);
/// }
/// # Ok(())
/// # }
/// ```
///
/// # Errors
///
/// `InvalidArgument` for a name that is no built-in runtime;
/// `Unimplemented` for a runtime not built in this release (its reason
/// says what it lacks).
pub fn agent_pool_warmup(runtime: &str) -> Result<Vec<WarmupStep>, SandboxError> {
    Ok(steps(&super::resolve(runtime)?))
}

pub(crate) fn steps(runtime: &BuiltinRuntime) -> Vec<WarmupStep> {
    let mut steps = Vec::new();
    if !runtime.install.is_empty() {
        let install = runtime.install.join(" && ");
        steps.push(
            WarmupStep::run(format!("{} || ( {install} )", runtime.check)).timeout(INSTALL_TIMEOUT),
        );
    }
    steps.extend(
        runtime
            .files
            .iter()
            .map(|(path, content, mode)| WarmupStep::run(write_file(path, content, *mode))),
    );
    steps.push(WarmupStep::run(load(runtime)));
    steps
}

/// A shell command writing `content` at `path` with `mode`, atomically
/// (a temporary file renamed), from base64 so any byte survives.
fn write_file(path: &str, content: &[u8], mode: u32) -> String {
    let encoded = base64::engine::general_purpose::STANDARD.encode(content);
    let dir = path.rsplit_once('/').map_or(".", |(dir, _)| dir);
    format!(
        "mkdir -p {dir} && printf '%s' '{encoded}' | base64 -d > {path}.tmp \
         && chmod {mode:o} {path}.tmp && mv -f {path}.tmp {path}"
    )
}

/// Runs the runtime's binary once (`--version`): its pages are read, so
/// the first run after the pause does not wait on the disk.
fn load(runtime: &BuiltinRuntime) -> String {
    format!(
        "{check} && for b in {name} /opt/agents/bin/{name} \
         /home/user/.rayito/agent/runtimes/bin/{name}; do \
         if command -v $b >/dev/null 2>&1; then exec $b --version >/dev/null; fi; done",
        check = runtime.check,
        name = runtime.name,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opencode_warms_with_install_then_files_then_a_load() {
        let steps = agent_pool_warmup("opencode").unwrap();
        assert_eq!(steps.len(), 3);
        assert!(steps[0].command.contains("|| ( set -e; d=/opt/agents;"));
        assert_eq!(steps[0].timeout, INSTALL_TIMEOUT);
        assert!(steps[1].command.contains("base64 -d > "));
        assert!(
            steps[2]
                .command
                .ends_with("exec $b --version >/dev/null; fi; done")
        );
        assert!(steps.iter().all(|s| !s.background));
    }

    #[test]
    fn a_file_round_trips_through_its_shell_command() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/file.py");
        let path = path.to_str().unwrap();
        let content = b"#!/bin/sh\necho 'it''s' \"$x\" \\ \x00\xff\n";
        let status = std::process::Command::new("sh")
            .arg("-c")
            .arg(write_file(path, content, 0o755))
            .status()
            .unwrap();
        assert!(status.success());
        assert_eq!(std::fs::read(path).unwrap(), content);
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
    }

    #[test]
    fn an_unbuilt_runtime_has_no_warm_up() {
        let err = agent_pool_warmup("hermes").unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::Unimplemented);
    }
}
