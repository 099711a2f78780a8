//! `agent_pool_warmup`: the pool's warm-up steps for a runtime, so that a
//! sandbox taken from the pool starts its first run with nothing to
//! install or write: the runtime installed when the image lacks it (a
//! built-in's install, a `CustomRuntime`'s `install` commands when its
//! `check` fails), the runtime's files in place (an adapter, the entrypoint
//! driver, your code), and the runtime loaded once into the page cache
//! (kept by the pause's snapshot on AWS).

use std::time::Duration;

use base64::Engine as _;

use super::BuiltinRuntime;
use crate::agent::AgentRuntime;
use crate::error::SandboxError;
use crate::pool::WarmupStep;

/// How long the install step may take: an npm install of a ~180 MB
/// package on a cold cache. A sandbox of `AgentTemplate` skips it (the
/// check passes at once).
pub(crate) const INSTALL_TIMEOUT: Duration = Duration::from_secs(600);

/// The warm-up steps of `runtime` (a built-in's name, a
/// [`CustomRuntime`](crate::agent::CustomRuntime) or an
/// [`HttpApp`](crate::agent::HttpApp)) for
/// [`PoolConfig::warmup`](crate::PoolConfig::warmup), in order: install
/// when the check fails, write the runtime's files, load the runtime once
/// (a built-in's binary, an entrypoint's module imported from
/// `/home/user`, its failure ignored). A `CustomRuntime` without `install`
/// commands has no install step; one without a `check` installs always.
///
/// ```no_run
/// use rayito::PoolConfig;
/// use rayito::agent::{CustomRuntime, agent_pool_warmup};
///
/// # fn f() -> Result<(), rayito::SandboxError> {
/// let mut config = PoolConfig::new(2);
/// for step in agent_pool_warmup("opencode")? {
///     config = config.warmup(step);
/// }
/// let mine = CustomRuntime::entrypoint("agent:answer")
///     .check("python3 -c 'import httpx'")
///     .install("pip install --user httpx");
/// for step in agent_pool_warmup(mine)? {
///     config = config.warmup(step);
/// }
/// # Ok(())
/// # }
/// ```
///
/// # Errors
///
/// `InvalidArgument` for a name that is no built-in runtime or a custom
/// runtime or app that `AgentSpec::check` refuses; `Unimplemented` for a
/// runtime not built in this release (its reason says what it lacks).
pub fn agent_pool_warmup(
    runtime: impl Into<AgentRuntime>,
) -> Result<Vec<WarmupStep>, SandboxError> {
    let runtime = runtime.into();
    if let AgentRuntime::Builtin(name) = &runtime {
        return Ok(steps(&super::resolve(name)?));
    }
    runtime.check()?;
    let resolved = crate::agent::plan::resolve(&runtime)?;
    let load = match &runtime {
        AgentRuntime::Custom(custom) => custom.entrypoint.as_ref().map(|entrypoint| {
            let python = custom
                .python
                .as_deref()
                .unwrap_or(crate::agent::runtime::DEFAULT_PYTHON);
            import(python, entrypoint)
        }),
        _ => None,
    };
    Ok(steps_of(
        resolved.check.as_deref(),
        &resolved.install,
        &resolved.files,
        load,
    ))
}

pub(crate) fn steps(runtime: &BuiltinRuntime) -> Vec<WarmupStep> {
    steps_of(
        Some(&runtime.check),
        &runtime.install,
        &runtime.files,
        Some(load(runtime)),
    )
}

fn steps_of(
    check: Option<&str>,
    install: &[String],
    files: &[(String, Vec<u8>, u32)],
    load: Option<String>,
) -> Vec<WarmupStep> {
    let mut steps = Vec::new();
    if !install.is_empty() {
        let install = install.join(" && ");
        let command = match check {
            Some(check) => format!("{check} || ( {install} )"),
            None => format!("( {install} )"),
        };
        steps.push(WarmupStep::run(command).timeout(INSTALL_TIMEOUT));
    }
    steps.extend(
        files
            .iter()
            .map(|(path, content, mode)| WarmupStep::run(write_file(path, content, *mode))),
    );
    steps.extend(load.map(WarmupStep::run));
    steps
}

/// Imports an entrypoint's module once (its pages and its imports read),
/// from `/home/user` as a run with the default workdir; a failure is
/// ignored (the module may live in another workdir).
fn import(python: &str, entrypoint: &str) -> String {
    let module = entrypoint.split_once(':').map_or(entrypoint, |(m, _)| m);
    let python = crate::agent::plan::quote_argv(&[python.to_owned()]);
    format!(
        "cd /home/user && {python} -c 'import importlib, sys; sys.path.insert(0, \".\"); \
         importlib.import_module(\"{module}\")' >/dev/null 2>&1 || true"
    )
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
    fn a_custom_runtime_warms_with_its_install_its_files_and_an_import() {
        use crate::agent::CustomRuntime;
        let runtime = CustomRuntime::entrypoint("pkg.agent:answer")
            .check("test -f /opt/mine/ok")
            .install("mkdir -p /opt/mine")
            .install("touch /opt/mine/ok")
            .file(
                "/home/user/pkg/agent.py",
                "def answer(r): return 'x'\n",
                0o644,
            );
        let steps = agent_pool_warmup(runtime).unwrap();
        assert_eq!(steps.len(), 4, "{steps:?}");
        assert_eq!(
            steps[0].command,
            "test -f /opt/mine/ok || ( mkdir -p /opt/mine && touch /opt/mine/ok )"
        );
        assert!(steps[1].command.ends_with("/home/user/pkg/agent.py"));
        assert!(
            steps[2]
                .command
                .ends_with("/home/user/.rayito/agent/entrypoint_driver.py")
        );
        assert!(
            steps[3]
                .command
                .contains("importlib.import_module(\"pkg.agent\")")
        );
        // A command without install or files: nothing to do.
        let bare = agent_pool_warmup(CustomRuntime::command(["my-agent"])).unwrap();
        assert!(bare.is_empty(), "{bare:?}");
        // Refused as a run refuses it.
        let err = agent_pool_warmup(CustomRuntime::entrypoint("no colon")).unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::InvalidArgument);
    }

    #[test]
    fn an_unbuilt_runtime_has_no_warm_up() {
        let err = agent_pool_warmup("hermes").unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::Unimplemented);
    }
}
