//! `rayito setup`: a new account in one command. A dry run by default
//! (prints the plan, writes nothing); `--yes` creates what is missing in
//! order: the artifacts stack (unless `--bucket` names an existing
//! bucket), the IAM stack, the base image `rayito-base` (and, with
//! `--caps-image`, `rayito-base-caps`: the same artifact with the os
//! capabilities ALL, for S3 mounts); then runs the doctor. A second
//! `--yes` changes nothing and says so.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use rayito::setup::{SetupOptions, SetupStep, StepAction, StepTarget};
use rayito::template::{
    Arch, Artifact, BuildEvent, PublishInfo, PublishOptions, Variant, pack_base_image,
};
use rayito::{Client, SandboxError};
use serde_json::json;

use crate::commands::{Backend, Failure};
use crate::output;
use crate::{Format, Global};

/// The base image setup publishes.
pub const BASE_IMAGE: &str = "rayito-base";
/// The caps image `--caps-image` publishes after it.
pub const CAPS_IMAGE: &str = "rayito-base-caps";
/// Its memory, MiB.
const BASE_MEMORY_MIB: u32 = 2048;

/// `rayito setup`'s flags.
#[derive(Debug, Args)]
pub struct SetupArgs {
    /// An existing artifact bucket of this account to use (the artifacts
    /// stack is then not deployed).
    #[arg(long)]
    bucket: Option<String>,
    /// The base image's artifact (`rayito image zip`); else one is packed
    /// from --agent-binary.
    #[arg(long, value_name = "ZIP", conflicts_with = "agent_binary")]
    artifact: Option<PathBuf>,
    /// The agent binary to pack as the base image's `rayd` (default: the
    /// `rayito-agent` next to this `rayito`).
    #[arg(long, value_name = "PATH")]
    agent_binary: Option<PathBuf>,
    /// The base image's CPU architecture; the agent must be built for it.
    #[arg(long, default_value = "ARM_64")]
    arch: String,
    /// Apply the plan (without it, setup only prints what it would do).
    #[arg(long)]
    yes: bool,
    /// Only print the plan (the default; the opposite of --yes).
    #[arg(long, conflicts_with = "yes")]
    dry_run: bool,
    /// Seconds to wait for each stack.
    #[arg(long, default_value_t = 900)]
    stack_timeout_seconds: u64,
    /// Seconds to wait for the base image's build.
    #[arg(long, default_value_t = 1800)]
    timeout_seconds: u64,
    /// Also publish rayito-base-caps after rayito-base: the same artifact
    /// with the os capabilities ALL, whose agent mounts S3 prefixes
    /// (`mounts=`).
    #[arg(long)]
    caps_image: bool,
}

/// Runs `rayito setup`; returns the exit code.
pub async fn run(global: Global, args: SetupArgs) -> i32 {
    let format = global.output;
    let backend = match crate::commands::backend_or_exit(&global) {
        Ok(backend) => backend,
        Err(code) => return code,
    };
    crate::commands::exit_code(format, setup(&global, &backend, args).await)
}

/// An image's step: `exists` when it has a launchable version, else
/// `create`. (`--yes` reuses an identical version or builds one.)
async fn image_step(client: &Client, name: &str) -> Result<SetupStep, SandboxError> {
    let launchable = match client.images().versions(name).await {
        Ok(versions) => versions
            .iter()
            .any(|v| v.state == "SUCCESSFUL" && v.status == "ACTIVE"),
        Err(err) if err.is_not_found() => false,
        Err(err) => return Err(err),
    };
    Ok(SetupStep::new(
        if launchable {
            StepAction::Exists
        } else {
            StepAction::Create
        },
        StepTarget::Image,
        name,
    ))
}

/// The base artifact: `--artifact`, else packed from the agent binary as
/// `rayito image zip` does over an empty directory.
fn artifact(args: &SetupArgs, arch: Arch) -> Result<Artifact, Failure> {
    if let Some(path) = &args.artifact {
        let bytes = std::fs::read(path)
            .map_err(|e| Failure::Cli(format!("cannot read {}: {e}", path.display())))?;
        return Ok(Artifact::from_zip(bytes));
    }
    let agent = args
        .agent_binary
        .clone()
        .or_else(crate::image::sibling_agent)
        .ok_or_else(|| {
            Failure::Cli(
                "no agent binary for the base image: pass --agent-binary PATH (a rayito-agent built for --arch) or --artifact ZIP (rayito image zip)".into(),
            )
        })?;
    let bytes = std::fs::read(&agent)
        .map_err(|e| Failure::Cli(format!("cannot read {}: {e}", agent.display())))?;
    let empty = tempfile_dir()?;
    let packed = pack_base_image(&empty, Some(&bytes), arch);
    let _ = std::fs::remove_dir(&empty);
    Ok(packed?)
}

/// An empty directory of our own under the temp directory.
fn tempfile_dir() -> Result<PathBuf, Failure> {
    let dir = std::env::temp_dir().join(format!("rayito-setup-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)
        .map_err(|e| Failure::Cli(format!("cannot create {}: {e}", dir.display())))?;
    Ok(dir)
}

fn step_json(step: &SetupStep) -> serde_json::Value {
    json!({
        "action": step.action.as_str(),
        "target": step.target.as_str(),
        "name": step.name,
    })
}

/// What a step did, in the past tense.
fn done_text(step: &SetupStep) -> String {
    let verb = match step.action {
        StepAction::Create => "created",
        StepAction::Update => "updated",
        _ => "unchanged",
    };
    format!("{verb} {} {}", step.target.as_str(), step.name)
}

async fn setup(global: &Global, backend: &Backend, args: SetupArgs) -> Result<i32, Failure> {
    let format = global.output;
    let arch: Arch = args.arch.parse()?;
    let client = backend.client().await?;
    let mut options = SetupOptions::default();
    // The local backend has its own bucket (as for `image publish`).
    options.bucket = args.bucket.clone().or_else(|| {
        backend
            .local
            .as_ref()
            .and_then(|state| state.artifact_bucket.clone())
    });
    options.timeout = Duration::from_secs(args.stack_timeout_seconds);
    let setup = client.setup(options);
    let plan = setup.plan().await?;
    let mut steps = plan.steps().to_vec();
    steps.push(image_step(&client, BASE_IMAGE).await?);
    if args.caps_image {
        steps.push(image_step(&client, CAPS_IMAGE).await?);
    }

    if !args.yes {
        match format {
            Format::Json => output::json(&json!({
                "dryRun": true,
                "account": plan.account(),
                "region": plan.region(),
                "bucket": plan.bucket(),
                "steps": steps.iter().map(step_json).collect::<Vec<_>>(),
            })),
            Format::Text => {
                outln!(
                    "setup of account {} in {} (dry run: nothing is written; --yes applies it)",
                    plan.account(),
                    plan.region()
                );
                for step in &steps {
                    outln!("  {step}");
                }
                outln!("artifact bucket: {}", plan.bucket());
                if steps.iter().all(|s| s.action == StepAction::Exists) {
                    outln!("nothing to do: this account is set up");
                }
            }
        }
        return Ok(0);
    }

    // The artifact is read (or packed, its architecture checked) before
    // anything is written.
    let artifact = artifact(&args, arch)?;
    let say = |line: String| {
        if format == Format::Text {
            outln!("{line}");
        }
    };
    let outcome = setup.apply(&plan).await?;
    for step in &outcome.steps {
        say(done_text(step));
    }
    let mut done = outcome.steps.clone();
    let mut images = vec![(BASE_IMAGE, Variant::Full)];
    if args.caps_image {
        images.push((CAPS_IMAGE, Variant::Caps));
    }
    let mut published: Vec<PublishInfo> = Vec::new();
    for (name, variant) in images {
        let mut publish = PublishOptions::default();
        publish.bucket = Some(outcome.bucket.clone());
        publish.memory_mib = BASE_MEMORY_MIB;
        publish.build_role_arn = Some(outcome.build_role_arn.clone());
        publish.arch = arch;
        publish.timeout = Duration::from_secs(args.timeout_seconds);
        publish.variant = variant;
        let publish = publish.on_event(move |event| {
            if format == Format::Text && !matches!(event, BuildEvent::Log(_)) {
                eprintln!("{event}");
            }
        });
        let info = client.images().publish(&artifact, name, publish).await?;
        let planned = steps
            .iter()
            .find(|s| s.target == StepTarget::Image && s.name == name)
            .map(|s| s.action);
        let action = if info.reused {
            StepAction::Exists
        } else if planned == Some(StepAction::Exists) {
            StepAction::Update
        } else {
            StepAction::Create
        };
        say(if info.reused {
            format!(
                "unchanged image {name} (version {} reused)",
                info.image_version
            )
        } else {
            format!(
                "built image {name} version {} over al2023-1 version {}",
                info.image_version, info.base_image_version
            )
        });
        done.push(SetupStep::new(action, StepTarget::Image, name));
        published.push(info);
    }
    let info = published.remove(0);
    let caps = published.pop();
    let changed = done.iter().any(|s| s.action != StepAction::Exists);
    // The doctor, on the same client, with the image and bucket just set up.
    let report = crate::doctor::report(
        global,
        Ok(client.clone()),
        Some(info.image_arn.clone()),
        Some(outcome.bucket.clone()),
    )
    .await;
    match format {
        Format::Json => output::json(&json!({
            "dryRun": false,
            "account": plan.account(),
            "region": plan.region(),
            "bucket": outcome.bucket,
            "steps": done.iter().map(step_json).collect::<Vec<_>>(),
            "changed": changed,
            "buildRoleArn": outcome.build_role_arn,
            "outputs": outcome.outputs,
            "imageArn": info.image_arn,
            "imageVersion": info.image_version,
            "capsImageArn": caps.as_ref().map(|c| &c.image_arn),
            "capsImageVersion": caps.as_ref().map(|c| &c.image_version),
            "doctor": report.to_json(),
        })),
        Format::Text => {
            if !changed {
                outln!("nothing changed: this account was already set up");
            }
            outln!("RAYITO_TEMPLATE={}", info.image_arn);
            if let Some(caps) = &caps {
                // The caps image, for sandboxes with S3 mounts.
                outln!("RAYITO_CAPS_TEMPLATE={}", caps.image_arn);
            }
            outln!("RAYITO_BUCKET={}", outcome.bucket);
            outln!();
            report.print(Format::Text);
        }
    }
    Ok(if report.ready() && report.publishing_ready() {
        0
    } else {
        output::EXIT_FAILURE
    })
}
