//! `rayito template ...`: build a template described in a JSON or TOML
//! file (the SDK's stable JSON form, `Template::to_json`), and read the
//! builds' status, logs and list.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand};
use rayito::template::{BuildInfo, BuildOptions, BuildStatus, Template};
use serde_json::json;

use crate::build_output::BuildOutput;
use crate::commands::{Backend, Failure};
use crate::output;
use crate::{Format, Global, local};

/// The template subcommands.
/// The flags of `template build` and `agent template build` alike.
#[derive(Debug, Args)]
pub struct BuildFlags {
    /// Build even when an identical version exists.
    #[arg(long)]
    pub force: bool,
    /// Seconds to wait for the build (default 1800).
    #[arg(long, value_name = "SECS", default_value_t = 1800)]
    pub timeout: u64,
    /// The artifact bucket (else RAYITO_BUCKET; the local backend has
    /// its own).
    #[arg(long)]
    pub bucket: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum TemplateCommand {
    /// Builds the template FILE (JSON, or TOML with the same fields) as
    /// the image NAME, or reuses an identical version.
    Build {
        /// The template: `.json` or `.toml` (the JSON form
        /// `Template::to_json` writes).
        file: PathBuf,
        /// The template's name (1 to 64 of A-Z, a-z, 0-9, _ and -).
        #[arg(long)]
        name: String,
        /// The image's memory in MiB (512, 1024, 2048, 4096 or 8192).
        #[arg(long, default_value_t = 2048)]
        memory_mb: u32,
        // --force, --timeout, --bucket.
        #[command(flatten)]
        build: BuildFlags,
        /// The directory `copy` sources are relative to (default: the
        /// template file's directory).
        #[arg(long)]
        context: Option<PathBuf>,
    },
    /// The state of a template's newest version (or VERSION).
    Status {
        /// The template's name.
        name: String,
        /// A version (default: the newest).
        #[arg(long)]
        version: Option<String>,
    },
    /// The last lines of a template's newest build log.
    Logs {
        /// The template's name.
        name: String,
        /// How many lines.
        #[arg(long, default_value_t = 500)]
        limit: usize,
    },
    /// The account's templates.
    List {
        /// Only names containing this.
        #[arg(long)]
        filter: Option<String>,
    },
}

/// Runs one template subcommand; returns the exit code.
pub async fn run(global: Global, command: TemplateCommand) -> i32 {
    let format = global.output;
    let backend = match crate::commands::backend_or_exit(&global) {
        Ok(backend) => backend,
        Err(code) => return code,
    };
    crate::commands::exit_code(format, dispatch(&backend, format, command).await)
}

/// Reads a template file: JSON, or TOML with the same fields (read as
/// TOML, so that an error's position is the file's).
fn read_template(path: &Path) -> Result<Template, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::Cli(format!("cannot read {}: {e}", path.display())))?;
    if path.extension().is_some_and(|e| e == "toml") {
        return toml::from_str(&text).map_err(|e| toml_error(path, &text, &e));
    }
    Ok(Template::from_json(&text)?)
}

/// A TOML template's error: the file, the line and column, and what is
/// wrong (a field's name, never a value: a quoted value in the parser's
/// message is left out, as the SDK leaves a JSON template's values out).
fn toml_error(path: &Path, text: &str, err: &toml::de::Error) -> Failure {
    let (at, mut reason) = toml_position(text, err);
    // A value the builder refused: its own message, already "invalid template: ...".
    if let Some(rest) = reason.strip_prefix("invalid template: ") {
        reason = rest.to_owned();
    }
    Failure::Sdk(rayito::SandboxError::invalid_argument(
        "template",
        format!("{} is not a rayito template{at}: {reason}", path.display()),
    ))
}

/// A TOML file's error: ` (line L, column C)` (empty without a position)
/// and what is wrong, a quoted value left out; a mistyped value names its
/// field.
pub(crate) fn toml_position(text: &str, err: &toml::de::Error) -> (String, String) {
    let mut reason = without_quoted_values(err.message().trim());
    let at = err.span().map_or_else(String::new, |span| {
        let before = text.get(..span.start).unwrap_or(text);
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let line = before.matches('\n').count() + 1;
        let column = before.len() - line_start + 1;
        // A mistyped value: name its field (`key = value` on that line).
        if !reason.contains('`')
            && let Some((key, _)) = before[line_start..].split_once('=')
            && !key.trim().is_empty()
        {
            reason = format!("field `{}`: {reason}", key.trim());
        }
        format!(" (line {line}, column {column})")
    });
    (at, reason)
}

/// `text` with every `"..."` replaced by `"…"` (serde's messages quote the
/// values they refuse; field names are in backquotes).
pub(crate) fn without_quoted_values(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut quoted = false;
    for c in text.chars() {
        if c == '"' {
            if !quoted {
                out.push_str("\"…\"");
            }
            quoted = !quoted;
        } else if !quoted {
            out.push(c);
        }
    }
    out
}

async fn dispatch(
    backend: &Backend,
    format: Format,
    command: TemplateCommand,
) -> Result<i32, Failure> {
    let client = backend.client().await?;
    let templates = client.templates();
    match command {
        TemplateCommand::Build {
            file,
            name,
            memory_mb,
            build,
            context,
        } => {
            let template = read_template(&file)?;
            let context = context.unwrap_or_else(|| {
                file.parent()
                    .filter(|p| !p.as_os_str().is_empty())
                    .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
            });
            let options = BuildOptions {
                memory_mib: memory_mb,
                context_dir: Some(context),
                ..build_options(backend, build)
            };
            build_reported(format, &name, options, |options| {
                templates.build(&template, &name, options)
            })
            .await
        }
        TemplateCommand::Status { name, version } => {
            let (version, status) = templates.version_status(&name, version.as_deref()).await?;
            let status = match status {
                BuildStatus::InProgress => "IN_PROGRESS",
                BuildStatus::Succeeded => "SUCCESSFUL",
                BuildStatus::Failed => "FAILED",
                _ => "UNKNOWN",
            };
            match format {
                Format::Json => output::json(&json!({
                    "name": name, "version": version, "status": status,
                })),
                Format::Text => outln!("{name} version {version}: {status}"),
            }
            Ok(0)
        }
        TemplateCommand::Logs { name, limit } => {
            let lines = templates.logs(&name, limit).await?;
            // No log: say whether there is a template at all.
            if lines.is_empty() && !templates.exists(&name).await? {
                return Err(Failure::Missing(
                    format!(
                        "no such template: {name} (no image of that name; `rayito template list` lists them)"
                    ),
                    rayito::ErrorKind::NotFound,
                ));
            }
            match format {
                Format::Json => output::json(&json!({ "name": name, "lines": lines })),
                Format::Text => {
                    for line in lines {
                        outln!("{line}");
                    }
                }
            }
            Ok(0)
        }
        TemplateCommand::List { filter } => {
            let list = templates.list(filter.as_deref()).await?;
            match format {
                Format::Json => output::json(&json!({
                    "templates": list.iter().map(|t| json!({
                        "name": t.name,
                        "template_id": t.template_id,
                        "state": t.state,
                        "latest_version": t.latest_version,
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
            Ok(0)
        }
    }
}

/// The options `template build` and `agent template build` share: their
/// [`BuildFlags`] (the bucket, else the local backend's own) and the local
/// backend's faster polling.
pub(crate) fn build_options(backend: &Backend, flags: BuildFlags) -> BuildOptions {
    BuildOptions {
        force: flags.force,
        timeout: Duration::from_secs(flags.timeout),
        bucket: flags.bucket.or_else(|| {
            backend
                .local
                .as_ref()
                .and_then(|state| state.artifact_bucket.clone())
        }),
        poll_interval: backend.local.as_ref().map(|_| local::BUILD_POLL_INTERVAL),
        ..BuildOptions::default()
    }
}

/// Runs `build` (with `options` and a progress line for `name`) and prints
/// what was built; on failure the build log's lines go to stderr before the
/// error. `template build` and `agent template build` both end here.
pub(crate) async fn build_reported<F, Fut>(
    format: Format,
    name: &str,
    options: BuildOptions,
    build: F,
) -> Result<i32, Failure>
where
    F: FnOnce(BuildOptions) -> Fut,
    Fut: Future<Output = Result<BuildInfo, rayito::SandboxError>>,
{
    let progress = BuildOutput::start(format, &format!("building {name}"));
    let options = options.on_event(progress.on_event());
    match build(options).await {
        Ok(info) => {
            progress.finish();
            match format {
                Format::Json => output::json(&json!({
                    "template_id": info.template_id,
                    "build_id": info.build_id,
                    "alias": info.alias,
                    "version": info.version,
                    "reused": info.reused,
                    "artifact_uploaded": info.artifact_uploaded,
                    "build_seconds": info.duration.as_secs_f64(),
                })),
                Format::Text => {
                    let how = if info.reused { "reused" } else { "built" };
                    outln!(
                        "{how} {} version {} in {:.1}s",
                        info.alias,
                        info.version,
                        info.duration.as_secs_f64()
                    );
                    outln!("RAYITO_TEMPLATE={}", info.template_id);
                }
            }
            Ok(0)
        }
        Err(err) => {
            progress.failed(&err);
            Err(Failure::Sdk(err))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ```toml block of docs/templates.md.
    fn documented_toml() -> String {
        let doc = include_str!("../../docs/templates.md");
        let start = doc.find("```toml\n").expect("a TOML example") + "```toml\n".len();
        let len = doc[start..].find("```").expect("its end");
        doc[start..start + len].to_owned()
    }

    fn refusal(text: &str) -> String {
        let path = Path::new("site.toml");
        let err = toml::from_str::<Template>(text).expect_err("not a template");
        match toml_error(path, text, &err) {
            Failure::Sdk(err) => err.to_string(),
            _ => unreachable!("an SDK error"),
        }
    }

    #[test]
    fn the_documented_toml_template_is_read_whole() {
        let template: Template = toml::from_str(&documented_toml()).expect("the doc's example");
        let same = Template::from_json(&template.to_json().unwrap()).unwrap();
        assert_eq!(template, same);
        assert_eq!(template.step_count(), 8);
        assert!(template.start_cmd().is_some());
    }

    #[test]
    fn a_toml_error_names_the_line_and_the_field_never_a_value() {
        let without_base =
            "version = \"rayito.template-spec/1\"\n\n[[steps]]\nkind = \"run\"\ncmd = \"true\"\n";
        assert_eq!(
            refusal(without_base),
            "invalid template: site.toml is not a rayito template (line 1, column 1): missing field `base`"
        );
        let doc = include_str!("../../docs/templates.md").replace("\n", " ");
        assert!(
            doc.contains(&refusal(without_base)),
            "docs/templates.md transcribes it"
        );
        let mistyped = "version = \"rayito.template-spec/1\"\n[base]\nname = \"rayito-base\"\nversion = \"s3cr3t\"\n";
        assert_eq!(
            refusal(mistyped),
            "invalid template: site.toml is not a rayito template (line 4, column 11): field `version`: invalid type: string \"…\", expected u32"
        );
        let typo = "version = \"rayito.template-spec/1\"\n[base]\nname = \"rayito-base\"\n[[steps]]\nkind = \"run\"\ncmdd = \"x\"\n";
        assert_eq!(
            refusal(typo),
            "invalid template: site.toml is not a rayito template (line 4, column 1): unknown field `cmdd`, expected `cmd`"
        );
    }
}
