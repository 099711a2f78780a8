//! [`Template`]: the immutable builder.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use super::step::{StartCmd, Step, clean_source};
use super::validate;
use crate::SandboxError;

/// The base image a template is built on unless told otherwise.
pub const DEFAULT_BASE_IMAGE: &str = "rayito-base";

/// Where the documentation of templates lives (named by `Unimplemented`).
const DOC: &str = "docs/templates.md";

/// What a template says, shared by its clones.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Spec {
    pub(crate) base_image: String,
    pub(crate) base_version: Option<u32>,
    pub(crate) steps: Vec<Step>,
    pub(crate) start: Option<StartCmd>,
    pub(crate) skip_cache: bool,
}

impl Spec {
    /// The environment of every `set_envs` call, merged (a later value of
    /// the same name wins), sorted by name.
    pub(crate) fn merged_envs(&self) -> BTreeMap<String, String> {
        let mut merged = BTreeMap::new();
        for step in &self.steps {
            if let Step::Env { envs } = step {
                merged.extend(envs.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
        }
        merged
    }
}

#[derive(Clone, PartialEq, Eq)]
struct Inner {
    spec: Spec,
    /// The first refusal of a builder call; every later call is ignored.
    error: Option<SandboxError>,
}

/// A sandbox image described in Rust: a base image, steps (copy, run,
/// package installs, environment, working directory, user) and a start
/// command with a ready check.
///
/// Immutable and cheap to clone: each method takes the template and
/// returns the template with one more step; a clone kept elsewhere never
/// changes (the steps are shared until one side adds to them).
///
/// Each method checks its arguments when it is called. The first refusal
/// (an [`InvalidArgument`](SandboxError::InvalidArgument) naming the
/// argument, or [`Unimplemented`](SandboxError::Unimplemented) for a
/// feature this SDK does not have) is kept, later calls are ignored, and
/// whatever consumes the template ([`to_dockerfile`](Template::to_dockerfile),
/// [`to_json`](Template::to_json), [`pack`](Template::pack) ...) returns it.
/// [`check`](Template::check) returns it early. That keeps a long chain
/// readable (one `?` at the end, as with `http::request::Builder`) while
/// the error still names the call that was wrong.
///
/// ```
/// use rayito::template::{ReadyCmd, StartCmd, Template};
///
/// # fn main() -> Result<(), rayito::SandboxError> {
/// let template = Template::new()
///     .dnf_install(["git"])
///     .pip_install(["flask"])
///     .copy("app", "/home/user/app")
///     .set_envs([("FLASK_ENV", "production")])
///     .set_start_cmd(
///         StartCmd::new("python3 -m flask --app /home/user/app/main run --port 8000")
///             .ready(ReadyCmd::port(8000)),
///     );
/// let layer = template.to_dockerfile()?;
/// assert!(layer.contains("RUN python3 -m pip install --no-cache-dir --break-system-packages flask"));
/// # Ok(())
/// # }
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Template {
    inner: Arc<Inner>,
}

impl Default for Template {
    fn default() -> Self {
        Self::new()
    }
}

impl Template {
    /// A template on the default base image, `rayito-base`.
    pub fn new() -> Self {
        Self::from_base_image(DEFAULT_BASE_IMAGE)
    }

    /// A template on the rayito base image `name` (an image built from a
    /// rayito base artifact; its newest launchable version unless
    /// [`base_image_version`](Template::base_image_version) says which).
    /// The name must not be blank (`base_image`).
    pub fn from_base_image(name: impl Into<String>) -> Self {
        let name = name.into();
        let error = validate::not_blank("base_image", &name).err();
        Self {
            inner: Arc::new(Inner {
                spec: Spec {
                    base_image: name,
                    base_version: None,
                    steps: Vec::new(),
                    start: None,
                    skip_cache: false,
                },
                error,
            }),
        }
    }

    /// A template on any container image: not available (`Unimplemented`).
    pub fn from_image(image: impl Into<String>) -> Self {
        let _ = image.into();
        Self::unimplemented("Template::from_image")
    }

    /// A template on another template: not available (`Unimplemented`).
    pub fn from_template(name: impl Into<String>) -> Self {
        let _ = name.into();
        Self::unimplemented("Template::from_template")
    }

    /// A template from a Dockerfile: not available (`Unimplemented`).
    pub fn from_dockerfile(dockerfile: impl Into<String>) -> Self {
        let _ = dockerfile.into();
        Self::unimplemented("Template::from_dockerfile")
    }

    /// A template on an image of Google's registry: not available
    /// (`Unimplemented`).
    pub fn from_gcp_registry(image: impl Into<String>) -> Self {
        let _ = image.into();
        Self::unimplemented("Template::from_gcp_registry")
    }

    fn unimplemented(feature: &'static str) -> Self {
        Self::new().refuse(SandboxError::unimplemented(
            feature,
            "templates are built on a rayito base image only; use Template::from_base_image",
            Some(DOC),
        ))
    }

    /// Keeps `error` unless an earlier one is kept.
    fn refuse(self, error: SandboxError) -> Self {
        self.with(|_| Err(error))
    }

    /// Applies `change` unless a refusal is already kept; keeps its refusal.
    fn with(mut self, change: impl FnOnce(&mut Spec) -> Result<(), SandboxError>) -> Self {
        let inner = Arc::make_mut(&mut self.inner);
        if inner.error.is_none()
            && let Err(e) = change(&mut inner.spec)
        {
            inner.error = Some(e);
        }
        self
    }

    fn push(self, check: Result<(), SandboxError>, step: Step) -> Self {
        self.with(|spec| {
            check?;
            spec.steps.push(step);
            Ok(())
        })
    }

    /// Which version of the base image to build on (from 1; by default
    /// its newest launchable version): `base_image_version`.
    #[must_use]
    pub fn base_image_version(self, version: u32) -> Self {
        self.with(|spec| {
            if version == 0 {
                return Err(SandboxError::invalid_argument(
                    "base_image_version",
                    "image versions start at 1",
                ));
            }
            spec.base_version = Some(version);
            Ok(())
        })
    }

    /// Copies `src` (a file or directory of the build context, relative
    /// to it) to `dst` (absolute) in the image. A directory's contents are
    /// copied, as Docker's `COPY` does; `.dockerignore` applies.
    #[must_use]
    pub fn copy(self, src: impl Into<String>, dst: impl Into<String>) -> Self {
        let (src, dst) = (src.into(), dst.into());
        let check =
            validate::not_blank("src", &src).and_then(|()| validate::absolute_path("dst", &dst));
        let src = clean_source(&src);
        self.push(check, Step::Copy { src, dst })
    }

    /// Runs `cmd` with `/bin/sh -c` (not blank, one line: `cmd`).
    #[must_use]
    pub fn run_cmd(self, cmd: impl Into<String>) -> Self {
        let cmd = cmd.into();
        let check = validate::not_blank("cmd", &cmd);
        self.push(check, Step::Run { cmd })
    }

    /// `python3 -m pip install --no-cache-dir --break-system-packages
    /// <packages>`. The names are written unquoted, as pip requirement
    /// specifiers, so a specifier with `<` or `>` must be quoted by the
    /// caller (`"'flask>=3'"`).
    #[must_use]
    pub fn pip_install<S: Into<String>>(self, packages: impl IntoIterator<Item = S>) -> Self {
        self.pip_install_with(packages, "")
    }

    /// [`pip_install`](Template::pip_install) with `extra_args` written
    /// before the names (e.g. `--index-url https://...`).
    #[must_use]
    pub fn pip_install_with<S: Into<String>>(
        self,
        packages: impl IntoIterator<Item = S>,
        extra_args: impl Into<String>,
    ) -> Self {
        let packages: Vec<String> = packages.into_iter().map(Into::into).collect();
        let extra_args = extra_args.into();
        let check = validate::packages("packages", &packages, false, false)
            .and_then(|()| validate::one_line("extra_args", &extra_args));
        self.push(
            check,
            Step::PipInstall {
                packages,
                extra_args,
            },
        )
    }

    /// `dnf install -y --setopt=install_weak_deps=0 <packages> && dnf
    /// clean all`, as root. Names are quoted; none may be blank or start
    /// with `-` (`packages`).
    #[must_use]
    pub fn dnf_install<S: Into<String>>(self, packages: impl IntoIterator<Item = S>) -> Self {
        let packages: Vec<String> = packages.into_iter().map(Into::into).collect();
        let check = validate::packages("packages", &packages, false, true);
        self.push(check, Step::DnfInstall { packages })
    }

    /// `apt` is not in the Amazon Linux base image: not available
    /// (`Unimplemented`); use [`dnf_install`](Template::dnf_install).
    #[must_use]
    pub fn apt_install<S: Into<String>>(self, packages: impl IntoIterator<Item = S>) -> Self {
        let _ = packages.into_iter().count();
        self.refuse(SandboxError::unimplemented(
            "Template::apt_install",
            "the base image is Amazon Linux, which has no apt; use Template::dnf_install",
            Some(DOC),
        ))
    }

    /// `npm install --no-audit --no-fund <packages>` in the working
    /// directory (no names: the `package.json` there). Fails the build
    /// with exit code 127 and a hint when the image has no `npm`.
    #[must_use]
    pub fn npm_install<S: Into<String>>(self, packages: impl IntoIterator<Item = S>) -> Self {
        self.npm(packages, false)
    }

    /// [`npm_install`](Template::npm_install) with `-g`, as root.
    #[must_use]
    pub fn npm_install_global<S: Into<String>>(
        self,
        packages: impl IntoIterator<Item = S>,
    ) -> Self {
        self.npm(packages, true)
    }

    fn npm<S: Into<String>>(self, packages: impl IntoIterator<Item = S>, global: bool) -> Self {
        let packages: Vec<String> = packages.into_iter().map(Into::into).collect();
        let check = validate::packages("packages", &packages, true, true);
        self.push(check, Step::NpmInstall { packages, global })
    }

    /// Sets environment variables in the image (one `ENV` line each, in
    /// name order; a later value of the same name wins). The agent also
    /// injects them into commands, terminals and code kernels. Names match
    /// `[A-Za-z_][A-Za-z0-9_]*`; values are on one line (`envs`).
    #[must_use]
    pub fn set_envs<K: Into<String>, V: Into<String>>(
        self,
        envs: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        let envs: BTreeMap<String, String> = envs
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        let check = envs.iter().try_for_each(|(name, value)| {
            validate::env_name(name)?;
            validate::one_line("envs", value)
        });
        self.push(check, Step::Env { envs })
    }

    /// The working directory of the following steps (absolute: `path`).
    #[must_use]
    pub fn workdir(self, path: impl Into<String>) -> Self {
        let path = path.into();
        let check = validate::absolute_path("path", &path);
        self.push(check, Step::Workdir { path })
    }

    /// The user of the following steps (not blank: `user`). Steps that
    /// need root (`dnf_install`, `npm_install_global`) switch to root and
    /// back by themselves.
    #[must_use]
    pub fn set_user(self, user: impl Into<String>) -> Self {
        let user = user.into();
        let check = validate::not_blank("user", &user);
        self.push(check, Step::User { user })
    }

    /// Build even when an identical template was built before (the
    /// build's `force`).
    #[must_use]
    pub fn skip_cache(self) -> Self {
        self.with(|spec| {
            spec.skip_cache = true;
            Ok(())
        })
    }

    /// The command every sandbox of this template starts with, and its
    /// ready check (a command alone converts: `.set_start_cmd("npm start")`).
    /// A refusal kept by the [`StartCmd`] or its [`ReadyCmd`] becomes the
    /// template's.
    #[must_use]
    pub fn set_start_cmd(self, start: impl Into<StartCmd>) -> Self {
        let start = start.into();
        self.with(|spec| {
            if let Some(e) = &start.error {
                return Err(e.clone());
            }
            spec.start = Some(start);
            Ok(())
        })
    }

    /// The first refusal of a builder call, if any.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` naming the argument of the first invalid call, or
    /// `Unimplemented` for a feature this SDK does not have.
    pub fn check(&self) -> Result<(), SandboxError> {
        match &self.inner.error {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// The template's spec, after [`check`](Template::check).
    pub(crate) fn spec(&self) -> Result<&Spec, SandboxError> {
        self.check()?;
        Ok(&self.inner.spec)
    }

    /// The base image's name.
    pub fn base_image(&self) -> &str {
        &self.inner.spec.base_image
    }

    /// The base image's version, when the template names one.
    pub fn base_version(&self) -> Option<u32> {
        self.inner.spec.base_version
    }

    /// Whether a build skips reuse of an identical earlier build.
    pub fn skips_cache(&self) -> bool {
        self.inner.spec.skip_cache
    }

    /// The start command, if any.
    pub fn start_cmd(&self) -> Option<&StartCmd> {
        self.inner.spec.start.as_ref()
    }

    /// How many steps the template has.
    pub fn step_count(&self) -> usize {
        self.inner.spec.steps.len()
    }
}

/// Environment values are never shown (`Debug` of steps lists names only).
impl fmt::Debug for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let spec = &self.inner.spec;
        f.debug_struct("Template")
            .field("base_image", &spec.base_image)
            .field("base_version", &spec.base_version)
            .field("steps", &spec.steps)
            .field("start", &spec.start)
            .field("skip_cache", &spec.skip_cache)
            .field("error", &self.inner.error.as_ref().map(|e| e.kind()))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::template::ReadyCmd;

    fn argument(t: &Template) -> String {
        match t.check() {
            Err(SandboxError::InvalidArgument {
                argument: Some(a), ..
            }) => a.into_owned(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn each_method_names_its_argument() {
        let t = Template::new;
        assert_eq!(argument(&Template::from_base_image(" ")), "base_image");
        assert_eq!(argument(&t().base_image_version(0)), "base_image_version");
        assert_eq!(argument(&t().copy("", "/x")), "src");
        assert_eq!(argument(&t().copy("a", "x")), "dst");
        assert_eq!(argument(&t().copy("a", "/x\n")), "dst");
        assert_eq!(argument(&t().run_cmd("  ")), "cmd");
        assert_eq!(argument(&t().run_cmd("a\rb")), "cmd");
        assert_eq!(argument(&t().pip_install(Vec::<String>::new())), "packages");
        assert_eq!(argument(&t().pip_install_with(["x"], "a\nb")), "extra_args");
        assert_eq!(argument(&t().dnf_install(["-y"])), "packages");
        assert_eq!(argument(&t().dnf_install([""])), "packages");
        assert_eq!(argument(&t().npm_install(["--x"])), "packages");
        assert_eq!(argument(&t().set_envs([("1A", "v")])), "envs");
        assert_eq!(argument(&t().set_envs([("A", "v\n")])), "envs");
        assert_eq!(argument(&t().workdir("rel")), "path");
        assert_eq!(argument(&t().set_user("")), "user");
        assert_eq!(argument(&t().set_start_cmd("")), "start_cmd");
        assert_eq!(
            argument(&t().set_start_cmd(StartCmd::new("x").ready(ReadyCmd::port(0)))),
            "ready"
        );
        assert!(t().npm_install(Vec::<String>::new()).check().is_ok());
    }

    #[test]
    fn the_first_refusal_is_kept_and_later_calls_are_ignored() {
        let t = Template::new()
            .run_cmd("echo 1")
            .copy("a", "relative")
            .run_cmd("")
            .run_cmd("echo 2");
        assert_eq!(argument(&t), "dst");
        assert_eq!(t.step_count(), 1);
        let e = t.to_dockerfile().unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid dst: must be an absolute path (starting with /)"
        );
    }

    #[test]
    fn unimplemented_sources_name_the_feature() {
        for (t, feature) in [
            (Template::from_image("python:3.12"), "Template::from_image"),
            (Template::from_template("base"), "Template::from_template"),
            (
                Template::from_dockerfile("FROM x"),
                "Template::from_dockerfile",
            ),
            (
                Template::from_gcp_registry("gcr.io/x"),
                "Template::from_gcp_registry",
            ),
            (
                Template::new().apt_install(["git"]),
                "Template::apt_install",
            ),
        ] {
            match t.check() {
                Err(SandboxError::Unimplemented {
                    feature: f, doc, ..
                }) => {
                    assert_eq!(&*f, feature);
                    assert_eq!(doc.as_deref(), Some("docs/templates.md"));
                }
                other => panic!("{feature}: {other:?}"),
            }
        }
    }

    #[test]
    fn templates_are_immutable_values() {
        let base = Template::new().run_cmd("echo base");
        let a = base.clone().run_cmd("echo a");
        let b = base.clone().run_cmd("echo b");
        assert_eq!(base.step_count(), 1);
        assert_eq!((a.step_count(), b.step_count()), (2, 2));
        assert_ne!(a, b);
        // A refusal in one branch does not reach the others.
        let bad = base.clone().run_cmd("");
        assert!(bad.check().is_err() && base.check().is_ok());
        let debug = format!(
            "{:?}",
            Template::new().set_envs([("TOKEN", "s3cr3t-value")])
        );
        assert!(!debug.contains("s3cr3t-value"), "{debug}");
        assert!(debug.contains("TOKEN"), "{debug}");
    }
}
