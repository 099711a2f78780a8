//! The template's own stable JSON form, the one the CLI reads templates
//! from:
//!
//! ```json
//! {
//!   "base": {"name": "rayito-base", "version": null},
//!   "skip_cache": false,
//!   "start": {"cmd": "...", "envs": {}, "ready": {"cmd": "...", "timeout_seconds": 60},
//!             "user": "1000", "workdir": null},
//!   "steps": [{"kind": "copy", "src": "app", "dst": "/home/user/app"}, ...],
//!   "version": "rayito.template-spec/1"
//! }
//! ```
//!
//! Step kinds: `copy {src, dst}`, `run {cmd}`, `pip_install {packages,
//! extra_args}`, `dnf_install {packages}`, `npm_install {packages,
//! global}`, `env {envs}`, `workdir {path}`, `user {user}`. Reading
//! replays the builder's methods, so a file is checked exactly as the same
//! calls in Rust are; unknown keys are refused (a typo must not pass
//! silently).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use super::agent_files::seconds;
use super::builder::Template;
use super::json_text;
use super::ready::ReadyCmd;
use super::step::{DEFAULT_START_USER, StartCmd, Step};
use crate::SandboxError;

/// The `version` of the template's JSON form.
pub const TEMPLATE_SPEC_VERSION: &str = "rayito.template-spec/1";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SpecFile {
    version: String,
    base: BaseFile,
    #[serde(default)]
    steps: Vec<StepFile>,
    #[serde(default)]
    start: Option<StartFile>,
    #[serde(default)]
    skip_cache: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BaseFile {
    name: String,
    #[serde(default)]
    version: Option<u32>,
}

#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum StepFile {
    Copy {
        src: String,
        dst: String,
    },
    Run {
        cmd: String,
    },
    PipInstall {
        packages: Vec<String>,
        #[serde(default)]
        extra_args: String,
    },
    DnfInstall {
        packages: Vec<String>,
    },
    NpmInstall {
        #[serde(default)]
        packages: Vec<String>,
        #[serde(default)]
        global: bool,
    },
    Env {
        envs: BTreeMap<String, String>,
    },
    Workdir {
        path: String,
    },
    User {
        user: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StartFile {
    cmd: String,
    #[serde(default)]
    ready: Option<ReadyFile>,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    workdir: Option<String>,
    #[serde(default)]
    envs: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadyFile {
    cmd: String,
    #[serde(default)]
    timeout_seconds: Option<f64>,
}

fn step_value(step: &Step) -> Value {
    let kind = step.kind();
    match step {
        Step::Copy { src, dst } => json!({"kind": kind, "src": src, "dst": dst}),
        Step::Run { cmd } => json!({"kind": kind, "cmd": cmd}),
        Step::PipInstall {
            packages,
            extra_args,
        } => json!({"kind": kind, "packages": packages, "extra_args": extra_args}),
        Step::DnfInstall { packages } => json!({"kind": kind, "packages": packages}),
        Step::NpmInstall { packages, global } => {
            json!({"kind": kind, "packages": packages, "global": global})
        }
        Step::Env { envs } => json!({"kind": kind, "envs": envs}),
        Step::Workdir { path } => json!({"kind": kind, "path": path}),
        Step::User { user } => json!({"kind": kind, "user": user}),
    }
}

fn start_value(start: &StartCmd) -> Value {
    let ready = start.ready.as_ref().map_or(
        Value::Null,
        |r| json!({"cmd": r.cmd, "timeout_seconds": seconds(r.timeout)}),
    );
    json!({
        "cmd": start.cmd,
        "envs": start.envs,
        "ready": ready,
        "user": start.user,
        "workdir": start.workdir,
    })
}

/// A refusal of the whole document: where, never what (serde's own
/// message may quote a value).
fn not_a_template(e: &serde_json::Error) -> SandboxError {
    let what = match e.classify() {
        serde_json::error::Category::Io | serde_json::error::Category::Syntax => {
            "is not valid JSON"
        }
        serde_json::error::Category::Eof => "ends too early",
        serde_json::error::Category::Data => {
            "has a missing, unknown or mistyped field for a rayito template"
        }
    };
    SandboxError::invalid_argument(
        "template",
        format!("{what} (line {}, column {})", e.line(), e.column()),
    )
}

fn duration(argument: &'static str, secs: f64) -> Result<Duration, SandboxError> {
    Duration::try_from_secs_f64(secs).map_err(|_| {
        SandboxError::invalid_argument(argument, "must be a number of seconds above zero")
    })
}

impl Template {
    /// The template's stable JSON form (keys sorted, two-space indent,
    /// final newline; see the module documentation of `rayito::template`).
    ///
    /// # Errors
    ///
    /// The first refusal of a builder call (see [`Template::check`]).
    pub fn to_json(&self) -> Result<String, SandboxError> {
        let spec = self.spec()?;
        let steps: Vec<Value> = spec.steps.iter().map(step_value).collect();
        let doc = json!({
            "base": {"name": spec.base_image, "version": spec.base_version},
            "skip_cache": spec.skip_cache,
            "start": spec.start.as_ref().map_or(Value::Null, start_value),
            "steps": steps,
            "version": TEMPLATE_SPEC_VERSION,
        });
        Ok(json_text::document(&doc))
    }

    /// Reads a template from its JSON form, checking every value as the
    /// builder's methods do.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` (`template`) when the text is not a template in
    /// JSON (the message says where, never what), has another `version`,
    /// or a key this version does not know; otherwise the refusal of the
    /// first invalid value, naming its argument as the builder does.
    pub fn from_json(text: &str) -> Result<Self, SandboxError> {
        let file: SpecFile = serde_json::from_str(text).map_err(|e| not_a_template(&e))?;
        Self::from_file(file)
    }

    /// Replays a parsed file through the builder's methods.
    fn from_file(file: SpecFile) -> Result<Self, SandboxError> {
        if file.version != TEMPLATE_SPEC_VERSION {
            return Err(SandboxError::invalid_argument(
                "template",
                format!("has an unknown version; this SDK reads {TEMPLATE_SPEC_VERSION}"),
            ));
        }
        let mut t = Self::from_base_image(file.base.name);
        if let Some(version) = file.base.version {
            t = t.base_image_version(version);
        }
        for step in file.steps {
            t = match step {
                StepFile::Copy { src, dst } => t.copy(src, dst),
                StepFile::Run { cmd } => t.run_cmd(cmd),
                StepFile::PipInstall {
                    packages,
                    extra_args,
                } => t.pip_install_with(packages, extra_args),
                StepFile::DnfInstall { packages } => t.dnf_install(packages),
                StepFile::NpmInstall { packages, global } if global => {
                    t.npm_install_global(packages)
                }
                StepFile::NpmInstall { packages, .. } => t.npm_install(packages),
                StepFile::Env { envs } => t.set_envs(envs),
                StepFile::Workdir { path } => t.workdir(path),
                StepFile::User { user } => t.set_user(user),
            };
        }
        if let Some(start) = file.start {
            let mut cmd = StartCmd::new(start.cmd)
                .user(start.user.unwrap_or_else(|| DEFAULT_START_USER.to_owned()))
                .envs(start.envs);
            if let Some(workdir) = start.workdir {
                cmd = cmd.workdir(workdir);
            }
            if let Some(ready) = start.ready {
                let mut check = ReadyCmd::custom(ready.cmd);
                if let Some(secs) = ready.timeout_seconds {
                    check = check.timeout(duration("timeout", secs)?);
                }
                cmd = cmd.ready(check);
            }
            t = t.set_start_cmd(cmd);
        }
        if file.skip_cache {
            t = t.skip_cache();
        }
        t.check()?;
        Ok(t)
    }
}

/// The same form in any serde format (the CLI reads TOML through it): a
/// missing, unknown or mistyped field is the format's own error, with its
/// position and the field's name; a value the builder refuses fails with
/// the builder's message.
impl<'de> Deserialize<'de> for Template {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let file = SpecFile::deserialize(deserializer)?;
        Template::from_file(file).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Template {
        Template::from_base_image("rayito-base-slim")
            .base_image_version(3)
            .copy("app", "/home/user/app")
            .run_cmd("make")
            .pip_install_with(["flask"], "--pre")
            .dnf_install(["git"])
            .npm_install(Vec::<String>::new())
            .npm_install_global(["pnpm"])
            .set_envs([("A", "1")])
            .workdir("/home/user")
            .set_user("user")
            .skip_cache()
            .set_start_cmd(
                StartCmd::new("npm start")
                    .ready(ReadyCmd::url("http://127.0.0.1:3000/").timeout(Duration::from_secs(90)))
                    .workdir("/home/user/app")
                    .env("NODE_ENV", "production"),
            )
    }

    #[test]
    fn the_json_form_is_exact_and_round_trips() {
        let text = sample().to_json().unwrap();
        assert_eq!(
            text,
            r#"{
  "base": {
    "name": "rayito-base-slim",
    "version": 3
  },
  "skip_cache": true,
  "start": {
    "cmd": "npm start",
    "envs": {
      "NODE_ENV": "production"
    },
    "ready": {
      "cmd": "test \"$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:3000/)\" = 200",
      "timeout_seconds": 90
    },
    "user": "1000",
    "workdir": "/home/user/app"
  },
  "steps": [
    {
      "dst": "/home/user/app",
      "kind": "copy",
      "src": "app"
    },
    {
      "cmd": "make",
      "kind": "run"
    },
    {
      "extra_args": "--pre",
      "kind": "pip_install",
      "packages": [
        "flask"
      ]
    },
    {
      "kind": "dnf_install",
      "packages": [
        "git"
      ]
    },
    {
      "global": false,
      "kind": "npm_install",
      "packages": []
    },
    {
      "global": true,
      "kind": "npm_install",
      "packages": [
        "pnpm"
      ]
    },
    {
      "envs": {
        "A": "1"
      },
      "kind": "env"
    },
    {
      "kind": "workdir",
      "path": "/home/user"
    },
    {
      "kind": "user",
      "user": "user"
    }
  ],
  "version": "rayito.template-spec/1"
}
"#
        );
        let back = Template::from_json(&text).unwrap();
        assert_eq!(back, sample());
        assert_eq!(back.to_json().unwrap(), text);
        assert_eq!(
            back.to_dockerfile().unwrap(),
            sample().to_dockerfile().unwrap()
        );
        let minimal = Template::from_json(
            r#"{"version": "rayito.template-spec/1", "base": {"name": "rayito-base"}}"#,
        )
        .unwrap();
        assert_eq!(minimal, Template::new());
    }

    #[test]
    fn bad_documents_are_refused_without_quoting_them() {
        let refusal = |text: &str| match Template::from_json(text) {
            Err(SandboxError::InvalidArgument {
                argument: Some(a),
                meta,
            }) => (a.into_owned(), meta.message().to_owned()),
            other => panic!("{text}: {other:?}"),
        };
        let (arg, msg) = refusal("{not json");
        assert_eq!(arg, "template");
        assert_eq!(
            msg,
            "invalid template: is not valid JSON (line 1, column 2)"
        );
        let (_, msg) = refusal(
            r#"{"version": "rayito.template-spec/1", "base": {"name": "x"}, "steps": [{"kind": "rm", "secret": "s3cr3t"}]}"#,
        );
        assert!(
            msg.starts_with("invalid template: has a missing, unknown or mistyped field"),
            "{msg}"
        );
        assert!(!msg.contains("s3cr3t") && !msg.contains("rm"), "{msg}");
        let (_, msg) =
            refusal(r#"{"version": "rayito.template-spec/1", "base": {"name": "x"}, "extra": 1}"#);
        assert!(msg.contains("unknown or mistyped"), "{msg}");
        let (_, msg) = refusal(r#"{"version": "rayito.template-spec/9", "base": {"name": "x"}}"#);
        assert_eq!(
            msg,
            "invalid template: has an unknown version; this SDK reads rayito.template-spec/1"
        );
        // Values are checked as the builder checks them.
        let (arg, _) = refusal(
            r#"{"version": "rayito.template-spec/1", "base": {"name": "x"}, "steps": [{"kind": "copy", "src": "a", "dst": "rel"}]}"#,
        );
        assert_eq!(arg, "dst");
        let (arg, _) = refusal(
            r#"{"version": "rayito.template-spec/1", "base": {"name": "x"}, "start": {"cmd": "x", "ready": {"cmd": "y", "timeout_seconds": -1}}}"#,
        );
        assert_eq!(arg, "timeout");
        let (arg, _) = refusal(
            r#"{"version": "rayito.template-spec/1", "base": {"name": "x"}, "start": {"cmd": "x", "ready": {"cmd": "y", "timeout_seconds": 0}}}"#,
        );
        assert_eq!(arg, "timeout");
    }
}
