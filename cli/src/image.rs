//! `rayito image`: pack the base image's artifact (`zip`), publish it as a
//! MicroVM image with its sizes (`publish`), list images and versions
//! (`list`), where each size stands (`sizes`), and delete old versions
//! (`prune`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Subcommand;
use rayito::error::BuildReason;
use rayito::template::{
    ALL_OS_CAPABILITIES, Arch, Artifact, PruneOptions, PruneReport, PublishInfo, PublishOptions,
    Variant, pack_base_image_variant,
};
use rayito::{SandboxError, Size};
use serde_json::{Value, json};

use crate::build_output::BuildOutput;
use crate::commands::{Backend, Failure};
use crate::output;
use crate::{Format, Global, local};

/// The image subcommands.
#[derive(Debug, Subcommand)]
pub enum ImageCommand {
    /// Packs DIR into the base image's artifact DEST (a deterministic zip),
    /// filling in what DIR lacks: the Dockerfile that runs the agent as
    /// PID 1, the agent as `rayd`, the kernel driver's requirement files
    /// and the licence files. DIR may be empty.
    Zip {
        /// The directory to pack.
        dir: PathBuf,
        /// Where to write the zip.
        dest: PathBuf,
        /// The agent binary to ship as `rayd` (default: DIR's `rayd`, else
        /// the `rayito-agent` next to this `rayito`).
        #[arg(long, value_name = "PATH")]
        agent_binary: Option<PathBuf>,
        /// The image's CPU architecture; the agent must be built for it.
        #[arg(long, default_value = "ARM_64")]
        arch: String,
        /// Pack the caps-efs variant: the marker kernel-sidecar/efs_variant,
        /// and a Dockerfile that also installs amazon-efs-utils (EFS
        /// volumes; publish it with --with-efs --os-capabilities ALL).
        #[arg(long)]
        with_efs: bool,
    },
    /// Publishes a base artifact as a MicroVM image, or reuses an
    /// identical version; prints RAYITO_TEMPLATE=<arn> (exit 1 when the
    /// image is not launchable).
    Publish {
        /// The artifact (`rayito image zip`).
        #[arg(long)]
        artifact: PathBuf,
        /// The artifact bucket (else RAYITO_BUCKET; the local backend has
        /// its own).
        #[arg(long)]
        bucket: Option<String>,
        /// The image's name (default: the variant's, rayito-base for full).
        #[arg(long)]
        image_name: Option<String>,
        /// The artifact's variant: full, slim or poly (its markers are
        /// checked before anything is written).
        #[arg(long, default_value = "full")]
        variant: String,
        /// The image's additional operating system capabilities: ALL (the
        /// only value) publishes the caps image, rayito-base-caps, whose
        /// agent can mount S3 prefixes (full variant only).
        #[arg(long, value_name = "ALL")]
        os_capabilities: Option<String>,
        /// Publish the caps-efs image, rayito-base-caps-efs (an artifact
        /// packed with `image zip --with-efs`; needs --os-capabilities ALL).
        #[arg(long)]
        with_efs: bool,
        /// Sizes to publish beside the 2gb baseline, each as
        /// <image>-<size>: 512mb, 1gb, 4gb, 8gb (comma-separated).
        #[arg(long, value_delimiter = ',')]
        sizes: Vec<String>,
        /// The managed base image's major version, or `latest`.
        #[arg(long)]
        base_image_version: String,
        /// The image's memory in MiB (512, 1024, 2048, 4096 or 8192).
        #[arg(long, default_value_t = 2048)]
        memory_mib: u32,
        /// Seconds to wait for the build.
        #[arg(long, default_value_t = 1800)]
        timeout_seconds: u64,
        /// Build even when an identical version exists.
        #[arg(long)]
        force: bool,
        /// An environment variable of the image, K=V (repeatable).
        #[arg(long = "env", value_name = "K=V")]
        env: Vec<String>,
        /// The build role's ARN (default:
        /// arn:aws:iam::<account>:role/rayito-m0-build-<region>).
        #[arg(long)]
        build_role_arn: Option<String>,
        /// The image's CPU architecture.
        #[arg(long, default_value = "ARM_64")]
        arch: String,
    },
    /// The account's images, or NAME's versions newest first.
    List {
        /// An image's name: list its versions.
        name: Option<String>,
        /// Only images whose name contains this.
        #[arg(long)]
        name_filter: Option<String>,
    },
    /// Each size of an image: published or not, its ARN, its state, and
    /// whether its newest version has the baseline's artifact.
    Sizes {
        /// The baseline image's name (default: the variant's).
        #[arg(long)]
        image_name: Option<String>,
        /// The variant whose image is meant: full, slim or poly.
        #[arg(long, default_value = "full")]
        variant: String,
    },
    /// Deletes an image's old versions, oldest first: keeps the newest
    /// launchable ones, every version MicroVMs run on and every version
    /// building (exit 1 when the service kept one it was asked to delete).
    Prune {
        /// The image's name (default: rayito-base).
        #[arg(long, default_value = "rayito-base")]
        image_name: String,
        /// How many launchable versions to keep.
        #[arg(long, default_value_t = 5)]
        keep: usize,
        /// Only say what would be deleted.
        #[arg(long)]
        dry_run: bool,
        /// Seconds to wait for each deleted version to be gone.
        #[arg(long, default_value_t = 600)]
        wait_timeout: u64,
    },
}

/// Runs one image subcommand; returns the exit code.
pub async fn run(global: Global, command: ImageCommand) -> i32 {
    let format = global.output;
    let outcome = match command {
        ImageCommand::Zip {
            dir,
            dest,
            agent_binary,
            arch,
            with_efs,
        } => zip(format, &dir, &dest, agent_binary, &arch, with_efs),
        // The variant's flags are checked before any backend is made.
        ImageCommand::Publish {
            ref variant,
            ref os_capabilities,
            with_efs,
            ..
        } if publish_variant(variant, os_capabilities.as_deref(), with_efs).is_err() => {
            publish_variant(variant, os_capabilities.as_deref(), with_efs).map(|_| 0)
        }
        other => match crate::commands::backend_or_exit(&global) {
            Ok(backend) => dispatch(&backend, format, other).await,
            Err(code) => return code,
        },
    };
    crate::commands::exit_code(format, outcome)
}

/// The `rayito-agent` next to the running `rayito`, if there is one.
pub(crate) fn sibling_agent() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let agent = exe.parent()?.join("rayito-agent");
    agent.is_file().then_some(agent)
}

fn zip(
    format: Format,
    dir: &Path,
    dest: &Path,
    agent_binary: Option<PathBuf>,
    arch: &str,
    with_efs: bool,
) -> Result<i32, Failure> {
    let arch: Arch = arch.parse()?;
    let variant = with_efs.then_some(Variant::CapsEfs);
    if !dir.is_dir() {
        return Err(Failure::Cli(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    let agent_path = agent_binary.or_else(|| {
        if dir.join(rayito::template::AGENT_ENTRY).is_file() {
            None
        } else {
            sibling_agent()
        }
    });
    let agent = match &agent_path {
        Some(path) => Some(
            std::fs::read(path)
                .map_err(|e| Failure::Cli(format!("cannot read {}: {e}", path.display())))?,
        ),
        None => None,
    };
    let artifact = pack_base_image_variant(dir, agent.as_deref(), arch, variant)?;
    std::fs::write(dest, artifact.bytes())
        .map_err(|e| Failure::Cli(format!("cannot write {}: {e}", dest.display())))?;
    match format {
        Format::Json => output::json(&json!({
            "artifact": dest.display().to_string(),
            "sha256": artifact.sha256_hex(),
            "key": artifact.image_key(),
            "bytes": artifact.bytes().len(),
            "arch": arch.as_str(),
            "withEfs": with_efs,
        })),
        Format::Text => outln!(
            "wrote {} ({} bytes, sha256 {}, key {})",
            dest.display(),
            artifact.bytes().len(),
            artifact.sha256_hex(),
            artifact.image_key()
        ),
    }
    Ok(0)
}

/// The variant `--variant`, `--os-capabilities` and `--with-efs` name
/// together (checked before anything is read or written).
fn publish_variant(
    variant: &str,
    os_capabilities: Option<&str>,
    with_efs: bool,
) -> Result<Variant, Failure> {
    let variant: Variant = variant.parse()?;
    let caps = match os_capabilities {
        None => false,
        Some(ALL_OS_CAPABILITIES) => true,
        Some(_) => {
            return Err(Failure::Cli(
                "--os-capabilities takes ALL, the only value the service accepts".into(),
            ));
        }
    };
    if with_efs && variant != Variant::Full {
        return Err(Failure::Cli(format!(
            "--with-efs publishes rayito-base-caps-efs, built from the full artifact: drop --variant {variant}"
        )));
    }
    if with_efs && !caps {
        return Err(Failure::Cli(
            "--with-efs needs --os-capabilities ALL: the agent mounts EFS only with CAP_SYS_ADMIN"
                .into(),
        ));
    }
    if caps && variant != Variant::Full {
        return Err(Failure::Cli(format!(
            "--os-capabilities ALL publishes the caps image, built from the full artifact: drop --variant {variant}"
        )));
    }
    Ok(variant.with_caps(caps, with_efs)?)
}

/// `K=V` pairs into a map (the last of a key wins).
fn parse_env(pairs: &[String]) -> Result<BTreeMap<String, String>, Failure> {
    pairs
        .iter()
        .map(|pair| {
            pair.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .ok_or_else(|| {
                    Failure::Cli("--env takes K=V; put an = between the name and the value".into())
                })
        })
        .collect()
}

async fn dispatch(
    backend: &Backend,
    format: Format,
    command: ImageCommand,
) -> Result<i32, Failure> {
    let client = backend.client().await?;
    let images = client.images();
    match command {
        ImageCommand::Zip {
            dir,
            dest,
            agent_binary,
            arch,
            with_efs,
        } => zip(format, &dir, &dest, agent_binary, &arch, with_efs),
        ImageCommand::Publish {
            artifact,
            bucket,
            image_name,
            variant,
            os_capabilities,
            with_efs,
            sizes,
            base_image_version,
            memory_mib,
            timeout_seconds,
            force,
            env,
            build_role_arn,
            arch,
        } => {
            let base_image_version = match base_image_version.as_str() {
                "latest" => None,
                v => Some(v.parse::<u32>().map_err(|_| {
                    Failure::Cli(
                        "--base-image-version takes a major version number or latest".into(),
                    )
                })?),
            };
            let variant = publish_variant(&variant, os_capabilities.as_deref(), with_efs)?;
            let image_name = image_name.unwrap_or_else(|| variant.image_name().to_owned());
            let sizes = sizes
                .iter()
                .map(|s| s.parse::<Size>())
                .collect::<Result<Vec<_>, _>>()?;
            let bytes = std::fs::read(&artifact)
                .map_err(|e| Failure::Cli(format!("cannot read {}: {e}", artifact.display())))?;
            let bucket = bucket.or_else(|| {
                backend
                    .local
                    .as_ref()
                    .and_then(|state| state.artifact_bucket.clone())
            });
            let mut options = PublishOptions::default();
            options.bucket = bucket;
            options.base_image_version = base_image_version;
            options.memory_mib = memory_mib;
            options.timeout = Duration::from_secs(timeout_seconds);
            options.force = force;
            options.env = parse_env(&env)?;
            options.build_role_arn = build_role_arn;
            options.arch = arch.parse()?;
            options.sizes = sizes;
            options.variant = variant;
            options.poll_interval = backend.local.as_ref().map(|_| local::BUILD_POLL_INTERVAL);
            let progress = BuildOutput::start(format, &format!("publishing {image_name}"));
            let options = options.on_event(progress.on_event());
            let outcome = images
                .publish(&Artifact::from_zip(bytes), &image_name, options)
                .await;
            match outcome {
                Ok(info) => {
                    progress.finish();
                    Ok(published(format, &image_name, &info))
                }
                Err(err @ SandboxError::Build { .. }) if format == Format::Json => {
                    progress.finish();
                    // Not launchable: the publish's JSON with the gate's
                    // outcome and the error, exit 1.
                    output::json(&json!({
                        "imageName": image_name,
                        "launchable": false,
                        "gate": gate_of(&err),
                        "error": error_json(&err),
                    }));
                    Ok(output::EXIT_FAILURE)
                }
                Err(err) => {
                    progress.failed(&err);
                    Err(Failure::Sdk(err))
                }
            }
        }
        ImageCommand::Sizes {
            image_name,
            variant,
        } => {
            let variant: Variant = variant.parse()?;
            let name = image_name.unwrap_or_else(|| variant.image_name().to_owned());
            let rows = images.sizes(&name).await?;
            match format {
                Format::Json => output::json(&json!({
                    "imageName": name,
                    "sizes": rows.iter().map(|r| json!({
                        "size": r.size.name(),
                        "memoryMib": r.size.memory_mib(),
                        "imageName": r.image_name,
                        "imageArn": r.image_arn,
                        "published": r.published,
                        "state": r.state,
                        "latestVersion": r.latest_version,
                        "sameArtifact": r.same_artifact,
                    })).collect::<Vec<_>>(),
                })),
                Format::Text => {
                    outln!(
                        "{:<6} {:<32} {:<9} {:<14} {:<7} SAME_ARTIFACT",
                        "SIZE",
                        "IMAGE",
                        "PUBLISHED",
                        "STATE",
                        "VERSION"
                    );
                    for r in &rows {
                        outln!(
                            "{:<6} {:<32} {:<9} {:<14} {:<7} {}",
                            r.size.name(),
                            r.image_name,
                            if r.published { "yes" } else { "no" },
                            r.state.as_deref().unwrap_or("-"),
                            r.latest_version.as_deref().unwrap_or("-"),
                            match r.same_artifact {
                                Some(true) => "yes",
                                Some(false) => "no",
                                None => "-",
                            }
                        );
                    }
                }
            }
            Ok(0)
        }
        ImageCommand::Prune {
            image_name,
            keep,
            dry_run,
            wait_timeout,
        } => {
            let mut options = PruneOptions::default();
            options.keep = keep;
            options.dry_run = dry_run;
            options.wait_timeout = Duration::from_secs(wait_timeout);
            let report = images.prune(&image_name, options).await?;
            print_prune(format, &image_name, &report);
            Ok(if report.refused.is_empty() {
                0
            } else {
                output::EXIT_FAILURE
            })
        }
        ImageCommand::List { name, name_filter } => {
            match name {
                Some(name) => {
                    let versions = images.versions(&name).await?;
                    match format {
                        Format::Json => output::json(&json!({
                            "name": name,
                            "versions": versions.iter().map(|v| json!({
                                "version": v.version,
                                "state": v.state,
                                "status": v.status,
                                "createdAt": output::unix(Some(v.created_at)),
                                "memoryMib": v.memory_mib,
                                "artifact": v.artifact,
                            })).collect::<Vec<_>>(),
                        })),
                        Format::Text => {
                            for v in &versions {
                                outln!(
                                    "{:<8} {:<12} {:<9} {}",
                                    v.version,
                                    v.state,
                                    v.status,
                                    v.artifact.as_deref().unwrap_or("-")
                                );
                            }
                        }
                    }
                }
                None => {
                    let list = images.list(name_filter.as_deref()).await?;
                    match format {
                        Format::Json => output::json(&json!({
                            "images": list.iter().map(|t| json!({
                                "name": t.name,
                                "imageArn": t.template_id,
                                "state": t.state,
                                "latestVersion": t.latest_version,
                            })).collect::<Vec<_>>(),
                        })),
                        Format::Text => {
                            for t in &list {
                                outln!(
                                    "{:<32} {:<14} {}",
                                    t.name,
                                    t.state,
                                    t.latest_version.as_deref().unwrap_or("-")
                                );
                            }
                        }
                    }
                }
            }
            Ok(0)
        }
    }
}

/// The gate's outcome of a failed build: `timeout` or `failed`.
fn gate_of(err: &SandboxError) -> &'static str {
    match err {
        SandboxError::Build {
            reason: Some(BuildReason::BuildTimeout),
            ..
        } => "timeout",
        _ => "failed",
    }
}

fn error_json(err: &SandboxError) -> Value {
    let info = err.classify();
    json!({
        "message": crate::hints::message(err),
        "kind": info.kind,
        "retryable": info.retryable,
    })
}

/// A publish's result: the JSON document, or the lines a shell sources
/// (`RAYITO_TEMPLATE=`, then `RAYITO_TEMPLATE_<SIZE>=` per size, only
/// when every size is launchable). Returns the exit code: 1 unless every
/// image is launchable.
fn published(format: Format, image_name: &str, info: &PublishInfo) -> i32 {
    let all = info.all_launchable();
    match format {
        Format::Json => {
            let mut doc = json!({
                "imageArn": info.image_arn,
                "imageVersion": info.image_version,
                "baseImageVersion": info.base_image_version,
                "artifact": info.artifact,
                "artifactUploaded": info.artifact_uploaded,
                "reused": info.reused,
                "buildSeconds": info.duration.as_secs_f64(),
                "launchable": all,
                "gate": if all { "launchable" } else { "failed" },
            });
            if !info.sizes.is_empty()
                && let Some(obj) = doc.as_object_mut()
            {
                obj.insert(
                    "sizes".into(),
                    info.sizes
                        .iter()
                        .map(|s| {
                            let mut size = json!({
                                "size": s.size.name(),
                                "imageName": s.image_name,
                                "imageArn": s.image_arn,
                                "imageVersion": s.image_version,
                                "reused": s.reused,
                                "launchable": s.launchable(),
                            });
                            if let (Some(err), Some(obj)) = (&s.error, size.as_object_mut()) {
                                obj.insert("gate".into(), json!(gate_of(err)));
                                obj.insert("error".into(), error_json(err));
                            }
                            size
                        })
                        .collect(),
                );
            }
            output::json(&doc);
        }
        Format::Text => {
            let how = if info.reused { "reused" } else { "built" };
            outln!(
                "{how} {image_name} version {} over al2023-1 version {}",
                info.image_version,
                info.base_image_version
            );
            for s in &info.sizes {
                match (&s.image_version, &s.error) {
                    (Some(version), None) => {
                        let how = if s.reused { "reused" } else { "built" };
                        outln!("{how} {} version {version}", s.image_name);
                    }
                    (_, Some(err)) => eprintln!("{} is not launchable: {err}", s.image_name),
                    (None, None) => {}
                }
            }
            if all {
                outln!("RAYITO_TEMPLATE={}", info.image_arn);
                for s in &info.sizes {
                    outln!(
                        "RAYITO_TEMPLATE_{}={}",
                        s.size.name().to_ascii_uppercase(),
                        s.image_arn
                    );
                }
            }
        }
    }
    if all { 0 } else { output::EXIT_FAILURE }
}

/// A prune's report: what was kept and why, deleted (or would be), and
/// what the service kept.
fn print_prune(format: Format, image_name: &str, report: &PruneReport) {
    match format {
        Format::Json => output::json(&json!({
            "imageName": image_name,
            "imageArn": report.image_arn,
            "dryRun": report.dry_run,
            "kept": report.kept.iter().map(|(v, why)| json!({
                "version": v, "reason": why.as_str(),
            })).collect::<Vec<_>>(),
            "deleted": report.deleted,
            "refused": report.refused.iter().map(|(v, why)| json!({
                "version": v, "reason": why.as_str(),
            })).collect::<Vec<_>>(),
        })),
        Format::Text => {
            for (version, why) in &report.kept {
                outln!("keep    {version} ({})", why.as_str());
            }
            let verb = if report.dry_run {
                "would delete"
            } else {
                "deleted"
            };
            for version in &report.deleted {
                outln!("{verb} {version}");
            }
            for (version, why) in &report.refused {
                outln!("refused {version} ({})", why.as_str());
            }
        }
    }
}
