//! The template as a Dockerfile layer, and that layer composed over the
//! base image's Dockerfile.
//!
//! The markers, the `__rayito_*` names and the `/etc/rayito/*.json`
//! destinations are the wire format the reference's tools and the agent
//! read: they are written verbatim.

use super::builder::{Spec, Template};
use super::json_text;
use super::shell::{quote, quote_all};
use super::step::Step;
use crate::SandboxError;

/// The first line of the layer.
pub const LAYER_BEGIN: &str = "# >>> rayito template layer (m15-templates), no editar a mano";
/// The last line of the layer.
pub const LAYER_END: &str = "# <<< rayito template layer";
/// The folder of the artifact that holds the build context.
pub(crate) const CONTEXT_DIR: &str = "__rayito_context";
/// The artifact's copy of `template.json`, and where the layer puts it.
pub(crate) const TEMPLATE_JSON: (&str, &str) =
    ("__rayito_template.json", "/etc/rayito/template.json");
/// The artifact's copy of `template-env.json`, and where the layer puts it.
pub(crate) const TEMPLATE_ENV_JSON: (&str, &str) = (
    "__rayito_template_env.json",
    "/etc/rayito/template-env.json",
);

/// The npm guard's hint, printed when the image has no `npm`.
const NPM_MISSING: &str = "npm is not installed in this image; add dnf_install([\"nodejs20\", \"nodejs20-npm\"]) before npm_install";

/// `COPY ["<from>", "<to>"]`, both JSON strings.
fn copy_line(from: &str, to: &str) -> String {
    format!(
        "COPY [{}, {}]\n",
        json_text::string(from),
        json_text::string(to)
    )
}

/// An `ENV` value in double quotes, `\`, `"` and `$` escaped.
fn env_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        if matches!(c, '\\' | '"' | '$') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// Whether `user` is root by name or uid.
fn is_root(user: &str) -> bool {
    matches!(user, "root" | "0")
}

/// `RUN <cmd>`, as root: when an earlier `set_user` chose another user,
/// the line is wrapped in `USER root` ... `USER <that user>`.
fn run_as_root(out: &mut String, current_user: Option<&str>, cmd: &str) {
    match current_user {
        Some(user) if !is_root(user) => {
            out.push_str("USER root\n");
            out.push_str(&format!("RUN {cmd}\n"));
            out.push_str(&format!("USER {user}\n"));
        }
        _ => out.push_str(&format!("RUN {cmd}\n")),
    }
}

fn pip_command(packages: &[String], extra_args: &str) -> String {
    let mut cmd = "python3 -m pip install --no-cache-dir --break-system-packages".to_owned();
    let extra = extra_args.trim();
    if !extra.is_empty() {
        cmd.push(' ');
        cmd.push_str(extra);
    }
    for name in packages {
        cmd.push(' ');
        cmd.push_str(name);
    }
    cmd
}

fn npm_command(packages: &[String], global: bool) -> String {
    let mut cmd = format!(
        "if ! command -v npm >/dev/null 2>&1; then echo {} >&2; exit 127; fi; npm install --no-audit --no-fund",
        quote(NPM_MISSING)
    );
    if global {
        cmd.push_str(" -g");
    }
    if !packages.is_empty() {
        cmd.push(' ');
        cmd.push_str(&quote_all(packages));
    }
    cmd
}

/// The layer of a checked spec.
pub(crate) fn layer(spec: &Spec) -> String {
    let mut out = String::new();
    out.push_str(LAYER_BEGIN);
    out.push('\n');
    let mut user: Option<&str> = None;
    for step in &spec.steps {
        match step {
            Step::Copy { src, dst } => {
                out.push_str(&copy_line(&format!("{CONTEXT_DIR}/{src}"), dst));
            }
            Step::Run { cmd } => out.push_str(&format!("RUN {cmd}\n")),
            Step::PipInstall {
                packages,
                extra_args,
            } => out.push_str(&format!("RUN {}\n", pip_command(packages, extra_args))),
            Step::DnfInstall { packages } => {
                let cmd = format!(
                    "dnf install -y --setopt=install_weak_deps=0 {} && dnf clean all",
                    quote_all(packages)
                );
                run_as_root(&mut out, user, &cmd);
            }
            Step::NpmInstall { packages, global } => {
                let cmd = npm_command(packages, *global);
                if *global {
                    run_as_root(&mut out, user, &cmd);
                } else {
                    out.push_str(&format!("RUN {cmd}\n"));
                }
            }
            Step::Env { envs } => {
                for (name, value) in envs {
                    out.push_str(&format!("ENV {name}={}\n", env_value(value)));
                }
            }
            Step::Workdir { path } => out.push_str(&format!("WORKDIR {path}\n")),
            Step::User { user: next } => {
                out.push_str(&format!("USER {next}\n"));
                user = Some(next);
            }
        }
    }
    if !spec.merged_envs().is_empty() {
        out.push_str(&copy_line(TEMPLATE_ENV_JSON.0, TEMPLATE_ENV_JSON.1));
    }
    if spec.start.is_some() {
        out.push_str(&copy_line(TEMPLATE_JSON.0, TEMPLATE_JSON.1));
    }
    out.push_str(LAYER_END);
    out.push('\n');
    out
}

/// Whether a Dockerfile line (trimmed) is a `CMD` or `ENTRYPOINT`
/// instruction (instructions are case-insensitive).
fn is_terminal(trimmed: &str) -> bool {
    let word = trimmed
        .split(|c: char| c.is_whitespace() || c == '[')
        .next()
        .unwrap_or_default();
    word.eq_ignore_ascii_case("CMD") || word.eq_ignore_ascii_case("ENTRYPOINT")
}

/// `layer` over the base Dockerfile `base`: the text before its last
/// `CMD`/`ENTRYPOINT` line (or before an earlier template layer's begin
/// marker, which the new layer replaces), the layer, `USER root` (the
/// agent runs as root), then that terminal line.
///
/// # Errors
///
/// `Build { base_image_missing_entrypoint }` when `base` has no
/// `CMD`/`ENTRYPOINT` line.
pub(crate) fn compose(base: &str, layer: &str) -> Result<String, SandboxError> {
    let mut begin: Option<usize> = None;
    let mut terminal: Option<(usize, &str)> = None;
    let mut offset = 0;
    for line in base.split_inclusive('\n') {
        let trimmed = line.trim();
        if trimmed == LAYER_BEGIN && begin.is_none() {
            begin = Some(offset);
        }
        if is_terminal(trimmed) {
            terminal = Some((offset, line));
        }
        offset += line.len();
    }
    let (at, line) = terminal.ok_or_else(SandboxError::base_image_missing_entrypoint)?;
    let cut = begin.filter(|b| *b < at).unwrap_or(at);
    let mut out = String::with_capacity(cut + layer.len() + line.len() + 16);
    out.push_str(&base[..cut]);
    out.push_str(layer);
    out.push_str("USER root\n");
    out.push_str(line.trim_end_matches(['\r', '\n']));
    out.push('\n');
    Ok(out)
}

impl Template {
    /// The template's Dockerfile layer: the begin marker, one or more
    /// lines per step, the `COPY` lines of the agent's JSON files, the end
    /// marker (a preview of what a build puts before the base image's
    /// `CMD`).
    ///
    /// # Errors
    ///
    /// The first refusal of a builder call (see [`Template::check`]).
    pub fn to_dockerfile(&self) -> Result<String, SandboxError> {
        Ok(layer(self.spec()?))
    }

    /// The whole Dockerfile a build runs: the layer composed over
    /// `base_dockerfile` (the base image artifact's `Dockerfile`).
    ///
    /// # Errors
    ///
    /// The first refusal of a builder call; `Build {
    /// base_image_missing_entrypoint }` when `base_dockerfile` has no
    /// `CMD`/`ENTRYPOINT` line.
    pub fn to_dockerfile_over(&self, base_dockerfile: &str) -> Result<String, SandboxError> {
        compose(base_dockerfile, &self.to_dockerfile()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::BuildReason;
    use crate::template::{ReadyCmd, StartCmd};

    /// Every kind of step, the as-root rule, escaping and both JSON copies.
    #[test]
    fn the_layer_text_is_exact() {
        let template = Template::new()
            .copy("./app/", "/home/user/app")
            .run_cmd("echo \"hi\" > /tmp/x")
            .pip_install(["flask", "requests==2.32.3"])
            .pip_install_with(["mypkg"], " --index-url https://pypi.example/simple ")
            .dnf_install(["git", "gcc-c++"])
            .set_user("user")
            .dnf_install(["jq"])
            .npm_install(["left-pad"])
            .npm_install_global(["typescript@5"])
            .set_envs([("B", "two words"), ("A", r#"a\b"c$d"#)])
            .workdir("/home/user")
            .set_user("root")
            .dnf_install(["make"])
            .set_start_cmd(StartCmd::new("npm start").ready(ReadyCmd::port(3000)));
        let expected = concat!(
            "# >>> rayito template layer (m15-templates), no editar a mano\n",
            "COPY [\"__rayito_context/app\", \"/home/user/app\"]\n",
            "RUN echo \"hi\" > /tmp/x\n",
            "RUN python3 -m pip install --no-cache-dir --break-system-packages flask requests==2.32.3\n",
            "RUN python3 -m pip install --no-cache-dir --break-system-packages --index-url https://pypi.example/simple mypkg\n",
            "RUN dnf install -y --setopt=install_weak_deps=0 git gcc-c++ && dnf clean all\n",
            "USER user\n",
            "USER root\n",
            "RUN dnf install -y --setopt=install_weak_deps=0 jq && dnf clean all\n",
            "USER user\n",
            "RUN if ! command -v npm >/dev/null 2>&1; then echo 'npm is not installed in this image; add dnf_install([\"nodejs20\", \"nodejs20-npm\"]) before npm_install' >&2; exit 127; fi; npm install --no-audit --no-fund left-pad\n",
            "USER root\n",
            "RUN if ! command -v npm >/dev/null 2>&1; then echo 'npm is not installed in this image; add dnf_install([\"nodejs20\", \"nodejs20-npm\"]) before npm_install' >&2; exit 127; fi; npm install --no-audit --no-fund -g typescript@5\n",
            "USER user\n",
            "ENV A=\"a\\\\b\\\"c\\$d\"\n",
            "ENV B=\"two words\"\n",
            "WORKDIR /home/user\n",
            "USER root\n",
            "RUN dnf install -y --setopt=install_weak_deps=0 make && dnf clean all\n",
            "COPY [\"__rayito_template_env.json\", \"/etc/rayito/template-env.json\"]\n",
            "COPY [\"__rayito_template.json\", \"/etc/rayito/template.json\"]\n",
            "# <<< rayito template layer\n",
        );
        assert_eq!(template.to_dockerfile().unwrap(), expected);
    }

    #[test]
    fn an_empty_template_is_the_two_markers() {
        assert_eq!(
            Template::new().to_dockerfile().unwrap(),
            "# >>> rayito template layer (m15-templates), no editar a mano\n# <<< rayito template layer\n"
        );
        // Non-ASCII paths are JSON-escaped in COPY, as json.dumps does.
        let layer = Template::new()
            .copy("données", "/tmp/é")
            .to_dockerfile()
            .unwrap();
        assert!(
            layer.contains("COPY [\"__rayito_context/donn\\u00e9es\", \"/tmp/\\u00e9\"]\n"),
            "{layer}"
        );
    }

    const BASE: &str =
        "FROM scratch\nCOPY rayd /usr/local/bin/rayd\nCMD [\"/usr/local/bin/rayd\"]\n";

    #[test]
    fn composes_before_the_last_cmd_and_replaces_an_earlier_layer() {
        let t = Template::new().run_cmd("echo one");
        let once = t.to_dockerfile_over(BASE).unwrap();
        assert_eq!(
            once,
            concat!(
                "FROM scratch\nCOPY rayd /usr/local/bin/rayd\n",
                "# >>> rayito template layer (m15-templates), no editar a mano\n",
                "RUN echo one\n",
                "# <<< rayito template layer\n",
                "USER root\n",
                "CMD [\"/usr/local/bin/rayd\"]\n",
            )
        );
        // Composing over a composed Dockerfile replaces the layer.
        let twice = Template::new()
            .run_cmd("echo two")
            .to_dockerfile_over(&once)
            .unwrap();
        assert_eq!(twice, once.replace("echo one", "echo two"));
        // The last terminal line wins; an ENTRYPOINT counts, in any case;
        // a missing final newline is added.
        let base = "FROM x\nCMD a\nRUN b\n  entrypoint [\"rayd\"]";
        assert_eq!(
            Template::new().to_dockerfile_over(base).unwrap(),
            "FROM x\nCMD a\nRUN b\n# >>> rayito template layer (m15-templates), no editar a mano\n# <<< rayito template layer\nUSER root\n  entrypoint [\"rayd\"]\n"
        );
    }

    #[test]
    fn a_base_without_cmd_is_refused() {
        for base in [
            "",
            "FROM x\nRUN y\n",
            "FROM x\n# CMD in a comment\nCMDX y\n",
        ] {
            match Template::new().to_dockerfile_over(base) {
                Err(SandboxError::Build {
                    reason: Some(BuildReason::BaseImageMissingEntrypoint),
                    ..
                }) => {}
                other => panic!("{base:?}: {other:?}"),
            }
        }
    }
}
