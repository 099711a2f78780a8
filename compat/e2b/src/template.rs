//! E2B's `Template` class and its `TemplateBuilder` chain over
//! `rayito::template` (this crate's `templates` feature): `Template::new()
//! .from_base_image().pip_install(..).run_cmd(..)`, then
//! `Template::build(&template, name, opts)`.
//!
//! Templates here are built on a rayito base image only, so E2B's other
//! starting points (`from_image`, `from_python_image`, ...) and the steps
//! with no rayito equivalent are refused: the first refusal is kept and
//! whatever consumes the template (`build`, `to_json`, ...) returns it, as
//! the SDK's own builder does. The signatures are the same in every
//! build: without the feature every consumer is
//! `Unimplemented { feature: "template" }` saying how to enable it.

use std::path::PathBuf;
use std::time::Duration;

use rayito::SandboxError;

use crate::options::Backend;
use crate::unimplemented::Missing;

/// E2B's `Template()`: where a template starts (`from_base_image()`), and
/// the class methods that build, describe and render templates.
#[derive(Debug, Clone, Default)]
pub struct Template {
    skip_cache: bool,
}

/// E2B's `TemplateBuilder` (and `TemplateFinal`): the steps of a template.
/// Each method adds one step; the first refusal is kept and returned by
/// whatever consumes the template.
#[derive(Debug, Clone)]
pub struct TemplateBuilder {
    #[cfg(feature = "templates")]
    inner: Result<rayito::template::Template, SandboxError>,
}

/// E2B's `BuildInfo`: what [`Template::build`] built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildInfo {
    /// `template_id`: the image's ARN, what sandboxes are created from
    /// (`SandboxOpts::template` also takes the `name`).
    pub template_id: String,
    /// `build_id`: `<version>/<name>`.
    pub build_id: String,
    /// `name`: the template's name.
    pub name: String,
    /// `alias`: the name (deprecated in E2B).
    pub alias: String,
    /// `tags`: always empty (images have versions, not tags).
    pub tags: Vec<String>,
    /// rayito only: the image version built (or reused).
    pub version: String,
}

/// E2B's build status (`TemplateBuildStatusResponse.status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TemplateBuildStatus {
    /// `building`.
    Building,
    /// `ready`.
    Ready,
    /// `error`: `Template::build` of the same template gives the failed
    /// step.
    Error,
}

/// The keyword arguments of `Template.build(..)` and the other class
/// methods.
#[derive(Debug, Clone, Default)]
pub struct TemplateOpts {
    /// `memory_mb`: the image's memory (512, 1024, 2048, 4096 or 8192;
    /// default 2048).
    pub memory_mb: Option<u32>,
    /// `skip_cache`: build even when an identical version exists.
    pub skip_cache: bool,
    /// `tags`: `Unimplemented` when any is given (images have versions,
    /// not tags).
    pub tags: Vec<String>,
    /// rayito only: where the template is built.
    pub backend: Backend,
    /// rayito only: the directory `copy` sources are relative to (default:
    /// the current directory).
    pub context_dir: Option<PathBuf>,
    /// rayito only: how long `build` waits (default 30 min).
    pub timeout: Option<Duration>,
}

/// Declares `TemplateBuilder` steps E2B has and rayito's builder has not:
/// each keeps the `template.step` refusal.
macro_rules! no_such_step {
    ($($(#[$doc:meta])* fn $method:ident($($arg:ident: $ty:ty),*);)*) => {
        impl TemplateBuilder {
            $(
                $(#[$doc])*
                /// No rayito template step does this: the refusal
                /// (`Unimplemented { feature: "template.step" }`) is kept;
                /// write it as [`TemplateBuilder::run_cmd`].
                #[must_use]
                pub fn $method(self, $($arg: $ty),*) -> Self {
                    $(let _ = $arg;)*
                    self.refuse(Missing::TemplateStep)
                }
            )*
        }
    };
}

/// Declares E2B's starting points other than the base image: each gives
/// a builder that keeps the `template.from_image` refusal.
macro_rules! no_such_base {
    ($($(#[$doc:meta])* fn $method:ident($($arg:ident: $ty:ty),*);)*) => {
        impl Template {
            $(
                $(#[$doc])*
                /// Templates are built on a rayito base image only: the
                /// builder keeps `Unimplemented { feature:
                /// "template.from_image" }`; start with
                /// [`Template::from_base_image`].
                #[allow(clippy::wrong_self_convention)]
                pub fn $method(self, $($arg: $ty),*) -> TemplateBuilder {
                    $(let _ = $arg;)*
                    self.from_base_image().refuse(Missing::TemplateImage)
                }
            )*
        }
    };
}

impl Template {
    /// `Template()`.
    pub fn new() -> Self {
        Self::default()
    }

    /// `Template().skip_cache()`: the template's steps are built again
    /// even when an identical version exists.
    #[must_use]
    pub fn skip_cache(mut self) -> Self {
        self.skip_cache = true;
        self
    }

    /// `Template().from_base_image()`: the rayito base image
    /// (`rayito-base`), where E2B starts from its own base image.
    #[allow(clippy::wrong_self_convention)]
    pub fn from_base_image(self) -> TemplateBuilder {
        let builder = TemplateBuilder::start();
        if self.skip_cache {
            builder.skip_cache()
        } else {
            builder
        }
    }
}

no_such_base! {
    /// `Template().from_image(image)`.
    fn from_image(image: &str);
    /// `Template().from_template(template)`.
    fn from_template(template: &str);
    /// `Template().from_dockerfile(dockerfile_content_or_path)`.
    fn from_dockerfile(dockerfile_content_or_path: &str);
    /// `Template().from_gcp_registry(image, service_account_json)`.
    fn from_gcp_registry(image: &str, service_account_json: &str);
    /// `Template().from_aws_registry(image, access_key_id,
    /// secret_access_key, region)`.
    fn from_aws_registry(image: &str, access_key_id: &str, secret_access_key: &str, region: &str);
    /// `Template().from_alpine_image(variant)`.
    fn from_alpine_image(variant: &str);
    /// `Template().from_arch_image(variant)`.
    fn from_arch_image(variant: &str);
    /// `Template().from_bun_image(variant)`.
    fn from_bun_image(variant: &str);
    /// `Template().from_debian_image(variant)`.
    fn from_debian_image(variant: &str);
    /// `Template().from_fedora_image(variant)`.
    fn from_fedora_image(variant: &str);
    /// `Template().from_node_image(variant)`.
    fn from_node_image(variant: &str);
    /// `Template().from_python_image(version)`.
    fn from_python_image(version: &str);
    /// `Template().from_ubuntu_image(variant)`.
    fn from_ubuntu_image(variant: &str);
}

no_such_step! {
    /// `add_mcp_server(servers)`.
    fn add_mcp_server(servers: &str);
    /// `beta_dev_container_prebuild(devcontainer_directory)`.
    fn beta_dev_container_prebuild(devcontainer_directory: &str);
    /// `beta_set_dev_container_start(devcontainer_directory)`.
    fn beta_set_dev_container_start(devcontainer_directory: &str);
    /// `bun_install(packages)`.
    fn bun_install(packages: &[&str]);
    /// `copy_items(items)`: use [`TemplateBuilder::copy`] per item.
    fn copy_items(items: &[(&str, &str)]);
    /// `git_clone(url, path)`.
    fn git_clone(url: &str, path: &str);
    /// `set_ready_cmd(ready_cmd)` alone: a ready check belongs to a start
    /// command here ([`TemplateBuilder::set_start_cmd`]).
    fn set_ready_cmd(ready_cmd: &str);
}

#[cfg(feature = "templates")]
mod built {
    use super::{
        Backend, BuildInfo, Missing, SandboxError, Template, TemplateBuildStatus, TemplateBuilder,
        TemplateOpts,
    };
    use rayito::template::{BuildHandle, BuildOptions, BuildStatus, ReadyCmd, StartCmd};
    use rayito::{Client, template};

    impl TemplateBuilder {
        pub(super) fn start() -> Self {
            Self {
                inner: Ok(template::Template::new()),
            }
        }

        pub(super) fn refuse(mut self, missing: Missing) -> Self {
            if self.inner.is_ok() {
                self.inner = Err(missing.error());
            }
            self
        }

        fn step(mut self, f: impl FnOnce(template::Template) -> template::Template) -> Self {
            self.inner = self.inner.map(f);
            self
        }

        /// The SDK's template (or the kept refusal).
        ///
        /// # Errors
        /// The first refusal of the chain.
        pub fn inner(&self) -> Result<&template::Template, SandboxError> {
            self.inner.as_ref().map_err(Clone::clone)
        }

        /// `run_cmd(command)`: a shell command run as root at build time.
        #[must_use]
        pub fn run_cmd(self, command: &str) -> Self {
            self.step(|t| t.run_cmd(command))
        }

        /// `pip_install(packages)`.
        #[must_use]
        pub fn pip_install(self, packages: &[&str]) -> Self {
            self.step(|t| t.pip_install(packages.iter().copied()))
        }

        /// `apt_install(packages)`: the base image is Amazon Linux, which
        /// has no apt: the builder keeps `Unimplemented { feature:
        /// "template.apt_install" }` (use [`TemplateBuilder::dnf_install`]).
        #[must_use]
        pub fn apt_install(self, packages: &[&str]) -> Self {
            let _ = packages;
            self.refuse(Missing::TemplateApt)
        }

        /// rayito only: `dnf_install(packages)` (the base image's package
        /// manager).
        #[must_use]
        pub fn dnf_install(self, packages: &[&str]) -> Self {
            self.step(|t| t.dnf_install(packages.iter().copied()))
        }

        /// `npm_install(packages, g)`: `global` installs with `-g`.
        #[must_use]
        pub fn npm_install(self, packages: &[&str], global: bool) -> Self {
            self.step(|t| {
                if global {
                    t.npm_install_global(packages.iter().copied())
                } else {
                    t.npm_install(packages.iter().copied())
                }
            })
        }

        /// `copy(src, dest)`: `src` relative to the build's context
        /// directory.
        #[must_use]
        pub fn copy(self, src: &str, dest: &str) -> Self {
            self.step(|t| t.copy(src, dest))
        }

        /// `set_envs(envs)`.
        #[must_use]
        pub fn set_envs(self, envs: &[(&str, &str)]) -> Self {
            self.step(|t| t.set_envs(envs.iter().copied()))
        }

        /// `set_workdir(workdir)`.
        #[must_use]
        pub fn set_workdir(self, workdir: &str) -> Self {
            self.step(|t| t.workdir(workdir))
        }

        /// `set_user(user)`.
        #[must_use]
        pub fn set_user(self, user: &str) -> Self {
            self.step(|t| t.set_user(user))
        }

        /// `skip_cache()`.
        #[must_use]
        pub fn skip_cache(self) -> Self {
            self.step(template::Template::skip_cache)
        }

        /// `set_start_cmd(start_cmd, ready_cmd)`: `ready_cmd` is a shell
        /// command that succeeds once the started process is ready.
        #[must_use]
        pub fn set_start_cmd(self, start_cmd: &str, ready_cmd: &str) -> Self {
            self.step(|t| {
                t.set_start_cmd(StartCmd::new(start_cmd).ready(ReadyCmd::custom(ready_cmd)))
            })
        }

        /// `make_dir(path)`: `mkdir -p`, as a `run_cmd` step.
        #[must_use]
        pub fn make_dir(self, path: &str) -> Self {
            self.run_cmd(&format!("mkdir -p -- {}", quoted(path)))
        }

        /// `remove(path, force, recursive)`: `rm`, as a `run_cmd` step.
        #[must_use]
        pub fn remove(self, path: &str, force: bool, recursive: bool) -> Self {
            let flags = match (force, recursive) {
                (true, true) => " -rf",
                (true, false) => " -f",
                (false, true) => " -r",
                (false, false) => "",
            };
            self.run_cmd(&format!("rm{flags} -- {}", quoted(path)))
        }

        /// `rename(src, dest, force)`: `mv`, as a `run_cmd` step.
        #[must_use]
        pub fn rename(self, src: &str, dest: &str, force: bool) -> Self {
            let flag = if force { " -f" } else { "" };
            self.run_cmd(&format!("mv{flag} -- {} {}", quoted(src), quoted(dest)))
        }

        /// `make_symlink(src, dest, force)`: `ln -s`, as a `run_cmd` step.
        #[must_use]
        pub fn make_symlink(self, src: &str, dest: &str, force: bool) -> Self {
            let flag = if force { " -f" } else { "" };
            self.run_cmd(&format!("ln -s{flag} -- {} {}", quoted(src), quoted(dest)))
        }
    }

    /// `arg` as one word of a POSIX shell command line.
    fn quoted(arg: &str) -> String {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }

    async fn client(backend: &Backend) -> Result<Client, SandboxError> {
        match backend {
            Backend::FromEnv => Client::from_env().await,
            #[cfg(feature = "local")]
            Backend::Local => Client::local().await,
            Backend::Aws(aws) => Client::builder().aws(aws.clone()).build().await,
        }
    }

    fn options(opts: &TemplateOpts) -> Result<BuildOptions, SandboxError> {
        if !opts.tags.is_empty() {
            return Err(Missing::TemplateTags.error());
        }
        let mut options = BuildOptions {
            force: opts.skip_cache,
            context_dir: opts.context_dir.clone(),
            ..BuildOptions::default()
        };
        if let Some(memory) = opts.memory_mb {
            options.memory_mib = memory;
        }
        if let Some(timeout) = opts.timeout {
            options.timeout = timeout;
        }
        Ok(options)
    }

    fn info(built: template::BuildInfo) -> BuildInfo {
        BuildInfo {
            template_id: built.template_id,
            build_id: built.build_id,
            name: built.alias.clone(),
            alias: built.alias,
            tags: Vec::new(),
            version: built.version,
        }
    }

    impl Template {
        /// `Template.build(template, name, ...)`: builds the image `name`
        /// and waits until it is launchable (an identical version is
        /// reused at once unless `skip_cache`).
        ///
        /// # Errors
        /// The builder's kept refusal; `Unimplemented { feature:
        /// "template.tags" }` when `tags` are given; otherwise what
        /// `rayito::template::Templates::build` returns (`Build` naming
        /// the failed step, `InvalidArgument`, ...).
        pub async fn build(
            template: &TemplateBuilder,
            name: &str,
            opts: TemplateOpts,
        ) -> Result<BuildInfo, SandboxError> {
            let template = template.inner()?;
            let options = options(&opts)?;
            let built = client(&opts.backend)
                .await?
                .templates()
                .build(template, name, options)
                .await?;
            Ok(info(built))
        }

        /// `Template.build_in_background(template, name, ...)`: submits
        /// the build and returns at once; read it with
        /// [`Template::get_build_status`].
        ///
        /// # Errors
        /// As [`Template::build`], up to the submission.
        pub async fn build_in_background(
            template: &TemplateBuilder,
            name: &str,
            opts: TemplateOpts,
        ) -> Result<BuildInfo, SandboxError> {
            let template = template.inner()?;
            let options = options(&opts)?;
            let handle = client(&opts.backend)
                .await?
                .templates()
                .build_in_background(template, name, options)
                .await?;
            Ok(BuildInfo {
                build_id: format!("{}/{}", handle.version, handle.name),
                template_id: handle.template_id,
                name: handle.name.clone(),
                alias: handle.name,
                tags: Vec::new(),
                version: handle.version,
            })
        }

        /// `Template.get_build_status(build_info)`: one read of where the
        /// build stands.
        ///
        /// # Errors
        /// `NotFound` when the image or version is gone; control-plane
        /// failures.
        pub async fn get_build_status(
            build_info: &BuildInfo,
            opts: TemplateOpts,
        ) -> Result<TemplateBuildStatus, SandboxError> {
            let handle = BuildHandle::new(
                build_info.template_id.clone(),
                build_info.version.clone(),
                build_info.name.clone(),
            );
            let status = client(&opts.backend)
                .await?
                .templates()
                .status(&handle)
                .await?;
            Ok(match status {
                BuildStatus::Succeeded => TemplateBuildStatus::Ready,
                BuildStatus::Failed => TemplateBuildStatus::Error,
                _ => TemplateBuildStatus::Building,
            })
        }

        /// `Template.exists(name)`: whether an image of that name exists.
        ///
        /// # Errors
        /// `Template` for a malformed name; control-plane failures.
        pub async fn exists(name: &str, opts: TemplateOpts) -> Result<bool, SandboxError> {
            client(&opts.backend).await?.templates().exists(name).await
        }

        /// `Template.alias_exists(alias)`: as [`Template::exists`] (an
        /// alias is a name here, as in E2B now).
        ///
        /// # Errors
        /// As [`Template::exists`].
        pub async fn alias_exists(alias: &str, opts: TemplateOpts) -> Result<bool, SandboxError> {
            Self::exists(alias, opts).await
        }

        /// `Template.to_dockerfile(template)`: the Dockerfile layer of the
        /// template's steps (over the rayito base image, whose own
        /// Dockerfile comes first in a build).
        ///
        /// # Errors
        /// The builder's kept refusal.
        pub fn to_dockerfile(template: &TemplateBuilder) -> Result<String, SandboxError> {
            template.inner()?.to_dockerfile()
        }

        /// `Template.to_json(template)`: the SDK's stable JSON form of the
        /// template (the one `rayito template build` reads).
        ///
        /// # Errors
        /// The builder's kept refusal.
        pub fn to_json(template: &TemplateBuilder) -> Result<String, SandboxError> {
            template.inner()?.to_json()
        }
    }
}

#[cfg(not(feature = "templates"))]
mod unbuilt {
    use super::{
        BuildInfo, Missing, SandboxError, Template, TemplateBuildStatus, TemplateBuilder,
        TemplateOpts,
    };

    impl TemplateBuilder {
        pub(super) fn start() -> Self {
            Self {}
        }

        pub(super) fn refuse(self, _missing: Missing) -> Self {
            self
        }

        /// `run_cmd(command)` (needs the `templates` feature to build).
        #[must_use]
        pub fn run_cmd(self, _command: &str) -> Self {
            self
        }

        /// `pip_install(packages)` (needs the `templates` feature).
        #[must_use]
        pub fn pip_install(self, _packages: &[&str]) -> Self {
            self
        }

        /// `apt_install(packages)` (needs the `templates` feature).
        #[must_use]
        pub fn apt_install(self, _packages: &[&str]) -> Self {
            self
        }

        /// rayito only: `dnf_install(packages)` (needs the `templates`
        /// feature).
        #[must_use]
        pub fn dnf_install(self, _packages: &[&str]) -> Self {
            self
        }

        /// `npm_install(packages, g)` (needs the `templates` feature).
        #[must_use]
        pub fn npm_install(self, _packages: &[&str], _global: bool) -> Self {
            self
        }

        /// `copy(src, dest)` (needs the `templates` feature).
        #[must_use]
        pub fn copy(self, _src: &str, _dest: &str) -> Self {
            self
        }

        /// `set_envs(envs)` (needs the `templates` feature).
        #[must_use]
        pub fn set_envs(self, _envs: &[(&str, &str)]) -> Self {
            self
        }

        /// `set_workdir(workdir)` (needs the `templates` feature).
        #[must_use]
        pub fn set_workdir(self, _workdir: &str) -> Self {
            self
        }

        /// `set_user(user)` (needs the `templates` feature).
        #[must_use]
        pub fn set_user(self, _user: &str) -> Self {
            self
        }

        /// `skip_cache()` (needs the `templates` feature).
        #[must_use]
        pub fn skip_cache(self) -> Self {
            self
        }

        /// `set_start_cmd(start_cmd, ready_cmd)` (needs the `templates`
        /// feature).
        #[must_use]
        pub fn set_start_cmd(self, _start_cmd: &str, _ready_cmd: &str) -> Self {
            self
        }

        /// `make_dir(path)` (needs the `templates` feature).
        #[must_use]
        pub fn make_dir(self, _path: &str) -> Self {
            self
        }

        /// `remove(path, force, recursive)` (needs the `templates` feature).
        #[must_use]
        pub fn remove(self, _path: &str, _force: bool, _recursive: bool) -> Self {
            self
        }

        /// `rename(src, dest, force)` (needs the `templates` feature).
        #[must_use]
        pub fn rename(self, _src: &str, _dest: &str, _force: bool) -> Self {
            self
        }

        /// `make_symlink(src, dest, force)` (needs the `templates` feature).
        #[must_use]
        pub fn make_symlink(self, _src: &str, _dest: &str, _force: bool) -> Self {
            self
        }
    }

    impl Template {
        /// `Template.build(template, name, ...)`: needs this crate's
        /// `templates` feature.
        ///
        /// # Errors
        /// Always `Unimplemented { feature: "template" }` without the
        /// feature, with no call made.
        #[allow(clippy::unused_async)]
        pub async fn build(
            _template: &TemplateBuilder,
            _name: &str,
            _opts: TemplateOpts,
        ) -> Result<BuildInfo, SandboxError> {
            Err(Missing::Template.error())
        }

        /// `Template.build_in_background(template, name, ...)`: needs the
        /// `templates` feature.
        ///
        /// # Errors
        /// Always `Unimplemented { feature: "template" }` without it.
        #[allow(clippy::unused_async)]
        pub async fn build_in_background(
            _template: &TemplateBuilder,
            _name: &str,
            _opts: TemplateOpts,
        ) -> Result<BuildInfo, SandboxError> {
            Err(Missing::Template.error())
        }

        /// `Template.get_build_status(build_info)`: needs the `templates`
        /// feature.
        ///
        /// # Errors
        /// Always `Unimplemented { feature: "template" }` without it.
        #[allow(clippy::unused_async)]
        pub async fn get_build_status(
            _build_info: &BuildInfo,
            _opts: TemplateOpts,
        ) -> Result<TemplateBuildStatus, SandboxError> {
            Err(Missing::Template.error())
        }

        /// `Template.exists(name)`: needs the `templates` feature.
        ///
        /// # Errors
        /// Always `Unimplemented { feature: "template" }` without it.
        #[allow(clippy::unused_async)]
        pub async fn exists(_name: &str, _opts: TemplateOpts) -> Result<bool, SandboxError> {
            Err(Missing::Template.error())
        }

        /// `Template.alias_exists(alias)`: needs the `templates` feature.
        ///
        /// # Errors
        /// Always `Unimplemented { feature: "template" }` without it.
        #[allow(clippy::unused_async)]
        pub async fn alias_exists(_alias: &str, _opts: TemplateOpts) -> Result<bool, SandboxError> {
            Err(Missing::Template.error())
        }

        /// `Template.to_dockerfile(template)`: needs the `templates`
        /// feature.
        ///
        /// # Errors
        /// Always `Unimplemented { feature: "template" }` without it.
        pub fn to_dockerfile(_template: &TemplateBuilder) -> Result<String, SandboxError> {
            Err(Missing::Template.error())
        }

        /// `Template.to_json(template)`: needs the `templates` feature.
        ///
        /// # Errors
        /// Always `Unimplemented { feature: "template" }` without it.
        pub fn to_json(_template: &TemplateBuilder) -> Result<String, SandboxError> {
            Err(Missing::Template.error())
        }
    }
}

impl Template {
    /// `Template.get_tags(template_id)`: images have versions, not tags.
    ///
    /// # Errors
    /// Always `Unimplemented { feature: "template.tags" }`, with no call
    /// made.
    #[allow(clippy::unused_async)]
    pub async fn get_tags(
        _template_id: &str,
        _opts: TemplateOpts,
    ) -> Result<Vec<String>, SandboxError> {
        Err(Missing::TemplateTags.error())
    }

    /// `Template.assign_tags(target_name, tags)`: images have versions,
    /// not tags.
    ///
    /// # Errors
    /// Always `Unimplemented { feature: "template.tags" }`.
    #[allow(clippy::unused_async)]
    pub async fn assign_tags(
        _target_name: &str,
        _tags: &[&str],
        _opts: TemplateOpts,
    ) -> Result<Vec<String>, SandboxError> {
        Err(Missing::TemplateTags.error())
    }

    /// `Template.remove_tags(name, tags)`: images have versions, not tags.
    ///
    /// # Errors
    /// Always `Unimplemented { feature: "template.tags" }`.
    #[allow(clippy::unused_async)]
    pub async fn remove_tags(
        _name: &str,
        _tags: &[&str],
        _opts: TemplateOpts,
    ) -> Result<(), SandboxError> {
        Err(Missing::TemplateTags.error())
    }
}
