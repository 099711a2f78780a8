//! Local image builds: a template's Dockerfile layer run for real over the
//! host's root, and the result checked the way AWS checks a build (an agent
//! started on it answers the `ready` and `validate` hooks).
//!
//! The image API (`super::images`) drives a version through its states and
//! calls [`run`] once per version.
//!
//! The build: read the artifact's Dockerfile ([`dockerfile`]), build a
//! mount namespace whose root is the host's root under an overlay with the
//! version's upper directory ([`namespace`]), run the layer's steps there
//! as root (`RUN` in [`run`], `COPY` in [`copy`], `USER` through
//! [`user`]), logging BuildKit-shaped lines ([`log`]); then drop the
//! namespace, keep the upper directory as the image layer and check it as
//! AWS does ([`check`]).
//!
//! A build runs as root on the host, contained only by its mount
//! namespace (and its cgroup): a template's `RUN` is trusted as much as
//! the emulator's caller, as on a developer's own Docker.

mod check;
mod copy;
mod dockerfile;
mod image;
mod log;
mod namespace;
mod run;
mod user;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::time::Instant;

use self::dockerfile::{Instruction, Step};
use self::log::BuildLog;
use self::namespace::{BuildNamespace, HOST_CANNOT_BUILD};
use self::user::RunAs;
use rayito_agent::for_emulator::SandboxCgroup;
use rayito_agent::sandbox::SandboxLimits;

/// How long a build's steps may take together (AWS's default build
/// timeout); the hooks' own timeouts come after.
pub(crate) const BUILD_DEADLINE: Duration = Duration::from_secs(1800);

/// One version's build.
#[derive(Debug)]
pub(crate) struct LocalBuild {
    /// The unpacked code artifact: `Dockerfile` at the root, the context
    /// under `__rayito_context/`, the template's JSON files at the root.
    pub(crate) artifact_dir: PathBuf,
    /// The version's own directory (created by the caller, empty); the
    /// build keeps the image layer in `<version_dir>/layer`.
    pub(crate) version_dir: PathBuf,
    /// How long the `ready` and `validate` hooks may take, each.
    pub(crate) hook_timeout: Duration,
    /// Each BuildKit-shaped log line, as it is produced.
    pub(crate) log: tokio::sync::mpsc::UnboundedSender<String>,
}

/// How a build ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum BuildResult {
    /// The layer is complete and an agent on it passed both hooks.
    Succeeded {
        /// The image layer: mounted read-only under every sandbox of the
        /// version (`AgentConfig::image_layer`).
        layer: PathBuf,
    },
    /// The version is FAILED with this `stateReason`.
    Failed {
        /// The version's `stateReason`, in AWS's words.
        state_reason: String,
    },
}

/// Runs one build to its end.
pub(crate) async fn run(build: LocalBuild) -> BuildResult {
    run_within(build, BUILD_DEADLINE).await
}

/// [`run`] with the steps' deadline `steps_within`.
pub(crate) async fn run_within(build: LocalBuild, steps_within: Duration) -> BuildResult {
    let mut log = BuildLog::new(build.log.clone());
    let failed = |state_reason: String| BuildResult::Failed { state_reason };
    if let Err(reason) = preflight(rustix::process::geteuid().is_root()) {
        log.fatal(&reason);
        return failed(reason);
    }
    let text = match read_dockerfile(&build.artifact_dir) {
        Ok(text) => text,
        Err(reason) => {
            log.fatal(&reason);
            return failed(format!("Image build failed: {reason}"));
        }
    };
    log.definition(text.len());
    let steps = match dockerfile::parse(&text) {
        Ok(steps) => steps,
        Err(err) => {
            log.fatal(&err.to_string());
            return failed(format!(
                "Image build failed: the Dockerfile cannot be built ({err})"
            ));
        }
    };
    let layer = build.version_dir.join("layer");
    let work = build.version_dir.join("work");
    let merged = build.version_dir.join("merged");
    for dir in [&layer, &work, &merged] {
        // The upper directory's own mode is the image root's: the host
        // root's, whatever the emulator's umask.
        let made = std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::set_permissions(dir, std::fs::metadata("/")?.permissions()));
        if let Err(err) = made {
            let reason = format!(
                "Image build failed: the version's directories cannot be created ({})",
                err.kind()
            );
            log.fatal(&reason);
            return failed(reason);
        }
    }
    let outcome = match BuildNamespace::create(&layer, &work, &merged) {
        Ok(ns) => {
            let outcome = execute(&ns, &steps, &build.artifact_dir, steps_within, &mut log).await;
            // Unmounts the overlay: nothing in the namespace runs any more.
            drop(ns);
            outcome
        }
        Err(reason) => {
            log.fatal(&reason);
            Err(reason)
        }
    };
    for dir in [&work, &merged] {
        let _ = std::fs::remove_dir_all(dir);
    }
    if let Err(reason) = outcome {
        return failed(reason);
    }
    log.exported(&layer_digest(&text, &build.version_dir));
    match check::check(&layer, build.hook_timeout).await {
        Ok(()) => BuildResult::Succeeded { layer },
        Err(reason) => failed(reason),
    }
}

/// What the host must allow before anything is created.
///
/// # Errors
/// The version's reason.
fn preflight(root: bool) -> Result<(), String> {
    if root {
        return Ok(());
    }
    Err(format!(
        "{HOST_CANNOT_BUILD} root (overlayfs mounts in a mount namespace), and the emulator \
         does not run as root; run it as root to build templates"
    ))
}

fn read_dockerfile(artifact_dir: &Path) -> Result<String, String> {
    use std::io::Read as _;
    let file = std::fs::File::open(artifact_dir.join("Dockerfile"))
        .map_err(|_| "the code artifact has no Dockerfile at its root".to_owned())?;
    let mut bytes = Vec::new();
    file.take(dockerfile::MAX_DOCKERFILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| format!("the Dockerfile cannot be read ({})", err.kind()))?;
    if bytes.len() as u64 > dockerfile::MAX_DOCKERFILE_BYTES {
        return Err("the Dockerfile is larger than 1 MiB".to_owned());
    }
    String::from_utf8(bytes).map_err(|_| "the Dockerfile is not UTF-8".to_owned())
}

/// A stand-in for the image digest BuildKit prints: the Dockerfile and the
/// version, hashed.
fn layer_digest(text: &str, version_dir: &Path) -> String {
    use sha2::Digest as _;
    let mut hash = sha2::Sha256::new();
    hash.update(text.as_bytes());
    hash.update(version_dir.as_os_str().as_encoded_bytes());
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The build's state between steps.
struct State {
    env: BTreeMap<String, String>,
    workdir: String,
    user: String,
}

/// Runs the steps in `ns`, all within `within`; the first failure ends
/// the build.
///
/// # Errors
/// The version's reason.
async fn execute(
    ns: &BuildNamespace,
    steps: &[Step],
    artifact_dir: &Path,
    within: Duration,
    log: &mut BuildLog,
) -> Result<(), String> {
    let deadline = Instant::now() + within;
    let total = steps.iter().filter(|s| s.numbered()).count();
    let cgroup = SandboxCgroup::create(
        &format!("build-{:016x}", rand::random::<u64>()),
        &SandboxLimits::unlimited(),
    );
    let mut state = State {
        env: BTreeMap::new(),
        workdir: "/".to_owned(),
        user: "root".to_owned(),
    };
    let mut k = 0;
    for step in steps {
        if !step.numbered() {
            apply_metadata(&mut state, &step.instruction);
            continue;
        }
        k += 1;
        let mut v = log.begin(format!("[{k}/{total}] {}", step.text));
        if step.base || matches!(step.instruction, Instruction::From) {
            log.cached(v);
            continue;
        }
        let result = match &step.instruction {
            Instruction::Copy { sources, dest } => {
                let root = match ns.root.try_clone() {
                    Ok(root) => root,
                    Err(err) => return Err(format!("Image build failed: {}", err.kind())),
                };
                let (artifact, sources, dest, workdir) = (
                    artifact_dir.to_path_buf(),
                    sources.clone(),
                    dest.clone(),
                    state.workdir.clone(),
                );
                tokio::task::spawn_blocking(move || {
                    copy::copy(&root, &artifact, &sources, &dest, &workdir)
                })
                .await
                .unwrap_or_else(|_| Err("the copy stopped unexpectedly".to_owned()))
            }
            Instruction::Workdir(word) => {
                let path = workdir_path(&state.workdir, &word.expand(&state.env));
                let made = image::create_dir_all(&ns.root, &path)
                    .map(drop)
                    .map_err(|err| format!("failed to create the working directory: {err}"));
                state.workdir = path;
                made
            }
            Instruction::Run { argv } => {
                run_step(ns, cgroup.as_ref(), &state, argv, deadline, log, &mut v).await
            }
            Instruction::From | Instruction::Env(_) | Instruction::User(_) => Ok(()),
        };
        match result {
            Ok(()) => log.done(v),
            Err(error) => {
                log.failed(v, &error);
                if Instant::now() >= deadline {
                    return Err(format!(
                        "Image build failed: the Dockerfile's steps did not finish within {} \
                         seconds (step [{k}/{total}] was running)",
                        within.as_secs()
                    ));
                }
                return Err(format!(
                    "Image build failed: the Dockerfile step [{k}/{total}] did not complete \
                     successfully; see the build log"
                ));
            }
        }
    }
    Ok(())
}

/// Applies an `ENV` or `USER` (steps BuildKit does not number).
fn apply_metadata(state: &mut State, instruction: &Instruction) {
    match instruction {
        Instruction::Env(pairs) => {
            // Every value sees the variables as they were before the line
            // (Docker's `ENV abc=bye def=$abc` gives def the old abc).
            let values: Vec<(String, String)> = pairs
                .iter()
                .map(|(key, word)| (key.clone(), word.expand(&state.env)))
                .collect();
            state.env.extend(values);
        }
        Instruction::User(word) => state.user = word.expand(&state.env),
        _ => {}
    }
}

/// `WORKDIR`'s new directory: absolute, or below the current one.
fn workdir_path(current: &str, next: &str) -> String {
    if next.starts_with('/') {
        next.to_owned()
    } else {
        format!("{}/{next}", current.trim_end_matches('/'))
    }
}

/// One `RUN`: its user resolved in the image, then the process.
///
/// # Errors
/// The error line of the step (BuildKit's text).
async fn run_step(
    ns: &BuildNamespace,
    cgroup: Option<&SandboxCgroup>,
    state: &State,
    argv: &[String],
    deadline: Instant,
    log: &mut BuildLog,
    v: &mut log::Vertex,
) -> Result<(), String> {
    let user = if state.user == "root" || state.user == "0" {
        RunAs::root()
    } else {
        user::resolve(&ns.root, &state.user)?
    };
    // Docker creates a WORKDIR that an earlier step removed.
    image::create_dir_all(&ns.root, &state.workdir)
        .map_err(|err| format!("failed to create the working directory: {err}"))?;
    let ctx = run::RunContext {
        ns,
        cgroup,
        env: &state.env,
        workdir: &state.workdir,
        user: &user,
        deadline,
    };
    match run::run(&ctx, argv, log, v).await {
        Ok(run::RunEnd::Exited(0)) => Ok(()),
        Ok(run::RunEnd::Exited(code)) => Err(log::process_error(argv, code)),
        Ok(run::RunEnd::TimedOut) => Err(format!(
            "process \"{}\" did not complete before the build's deadline",
            argv.join(" ")
        )),
        Err(err) => Err(format!(
            "process \"{}\" could not start: {}",
            argv.join(" "),
            err.kind()
        )),
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod unit_tests {
    use super::*;

    #[test]
    fn env_values_see_the_variables_before_their_line() {
        let mut state = State {
            env: BTreeMap::new(),
            workdir: "/".to_owned(),
            user: "root".to_owned(),
        };
        for line in ["ENV abc=hello", "ENV abc=bye def=$abc", "USER ${abc}"] {
            let steps = dockerfile::parse(line).unwrap();
            apply_metadata(&mut state, &steps[0].instruction);
        }
        assert_eq!(state.env["abc"], "bye");
        assert_eq!(state.env["def"], "hello");
        assert_eq!(state.user, "bye");
        assert_eq!(workdir_path("/srv", "a/b"), "/srv/a/b");
        assert_eq!(workdir_path("/", "a"), "/a");
        assert_eq!(workdir_path("/srv", "/x"), "/x");
    }
}
