//! What a template is made of: its steps and its start command.

use std::collections::BTreeMap;
use std::fmt;

use super::ready::ReadyCmd;
use super::validate;
use crate::SandboxError;

/// The user the start command runs as unless told otherwise.
pub const DEFAULT_START_USER: &str = "1000";

/// One step of a template, in the order the builder's methods were called.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// `COPY` of `src` (relative to the build context, cleaned) to `dst`.
    Copy { src: String, dst: String },
    /// `RUN cmd`.
    Run { cmd: String },
    /// `RUN python3 -m pip install ...`.
    PipInstall {
        packages: Vec<String>,
        extra_args: String,
    },
    /// `RUN dnf install ...`, as root.
    DnfInstall { packages: Vec<String> },
    /// `RUN npm install ...`; as root when `global`.
    NpmInstall { packages: Vec<String>, global: bool },
    /// One `ENV` line per variable, in name order.
    Env { envs: BTreeMap<String, String> },
    /// `WORKDIR path`.
    Workdir { path: String },
    /// `USER user`.
    User { user: String },
}

impl Step {
    /// The stable name of the step's kind (the `kind` of the JSON form).
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Self::Copy { .. } => "copy",
            Self::Run { .. } => "run",
            Self::PipInstall { .. } => "pip_install",
            Self::DnfInstall { .. } => "dnf_install",
            Self::NpmInstall { .. } => "npm_install",
            Self::Env { .. } => "env",
            Self::Workdir { .. } => "workdir",
            Self::User { .. } => "user",
        }
    }
}

/// Environment values are never shown: `Debug` lists the names only.
impl fmt::Debug for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Env { envs } => f
                .debug_struct("Env")
                .field("names", &envs.keys().collect::<Vec<_>>())
                .finish(),
            Self::Copy { src, dst } => f
                .debug_struct("Copy")
                .field("src", src)
                .field("dst", dst)
                .finish(),
            other => f.write_str(other.kind()),
        }
    }
}

/// A copy source as kept: `/`-separated, without empty or `.` parts, a
/// `..` cancelling the part before it. What is left of a `..` that climbs
/// above the start is kept, as is a leading `/`, so that the build
/// context can refuse the path as outside. The context itself is `.`.
pub(crate) fn clean_source(src: &str) -> String {
    let absolute = src.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in src.split('/') {
        match part {
            "" | "." => {}
            ".." if parts.last().is_some_and(|p| *p != "..") => {
                parts.pop();
            }
            ".." if absolute => {}
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    match (absolute, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_owned(),
        (false, false) => joined,
    }
}

/// The command a template's sandboxes start with, before the agent reports
/// ready: run as a managed process as [`user`](StartCmd::user) (`1000`
/// by default), in [`workdir`](StartCmd::workdir), with extra
/// [`envs`](StartCmd::envs), and watched by a [`ReadyCmd`].
///
/// ```
/// use std::time::Duration;
/// use rayito::template::{ReadyCmd, StartCmd};
///
/// let start = StartCmd::new("python3 -m http.server 8000")
///     .ready(ReadyCmd::port(8000).timeout(Duration::from_secs(30)))
///     .workdir("/home/user")
///     .env("PYTHONUNBUFFERED", "1");
/// # let _ = start;
/// ```
///
/// An invalid argument is kept and reported by the template it is given to.
#[derive(Clone, PartialEq, Eq)]
pub struct StartCmd {
    pub(crate) cmd: String,
    pub(crate) ready: Option<ReadyCmd>,
    pub(crate) user: String,
    pub(crate) workdir: Option<String>,
    pub(crate) envs: BTreeMap<String, String>,
    pub(crate) error: Option<SandboxError>,
}

impl StartCmd {
    /// Starts `cmd` (a shell command; not blank, one line: `start_cmd`).
    pub fn new(cmd: impl Into<String>) -> Self {
        let cmd = cmd.into();
        let error = validate::not_blank("start_cmd", &cmd).err();
        Self {
            cmd,
            ready: None,
            user: DEFAULT_START_USER.to_owned(),
            workdir: None,
            envs: BTreeMap::new(),
            error,
        }
    }

    fn check(mut self, check: impl FnOnce(&mut Self) -> Result<(), SandboxError>) -> Self {
        if self.error.is_none()
            && let Err(e) = check(&mut self)
        {
            self.error = Some(e);
        }
        self
    }

    /// The ready check (none by default: ready as soon as the command
    /// started). Its own refusal, if any, is kept.
    #[must_use]
    pub fn ready(self, ready: ReadyCmd) -> Self {
        self.check(|s| {
            if let Some(e) = &ready.error {
                return Err(e.clone());
            }
            s.ready = Some(ready);
            Ok(())
        })
    }

    /// The user the command runs as (a name or a uid; `1000` by default).
    #[must_use]
    pub fn user(self, user: impl Into<String>) -> Self {
        let user = user.into();
        self.check(|s| {
            validate::not_blank("user", &user)?;
            s.user = user;
            Ok(())
        })
    }

    /// The directory the command starts in (absolute).
    #[must_use]
    pub fn workdir(self, path: impl Into<String>) -> Self {
        let path = path.into();
        self.check(|s| {
            validate::absolute_path("workdir", &path)?;
            s.workdir = Some(path);
            Ok(())
        })
    }

    /// One more environment variable of the command.
    #[must_use]
    pub fn env(self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.envs([(name, value)])
    }

    /// More environment variables of the command (a later value of the
    /// same name wins).
    #[must_use]
    pub fn envs<K: Into<String>, V: Into<String>>(
        self,
        envs: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        let envs: Vec<(String, String)> = envs
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        self.check(|s| {
            for (name, value) in &envs {
                validate::env_name(name)?;
                validate::one_line("envs", value)?;
            }
            s.envs.extend(envs);
            Ok(())
        })
    }

    /// The command.
    pub fn command(&self) -> &str {
        &self.cmd
    }

    /// The ready check, if any.
    pub fn ready_check(&self) -> Option<&ReadyCmd> {
        self.ready.as_ref()
    }
}

impl From<&str> for StartCmd {
    fn from(cmd: &str) -> Self {
        Self::new(cmd)
    }
}

impl From<String> for StartCmd {
    fn from(cmd: String) -> Self {
        Self::new(cmd)
    }
}

// Environment values are never shown: `Debug` lists the names only.
crate::secret::redacted_debug! {
    StartCmd |o| cmd, ready, user, workdir, env_names = o.envs.keys().collect::<Vec<_>>(),
    invalid = o.error.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_cleaned_lexically() {
        for (src, clean) in [
            (".", "."),
            ("./", "."),
            ("", "."),
            ("app/", "app"),
            ("./app//main.py", "app/main.py"),
            ("a/../b", "b"),
            ("a/./b/.", "a/b"),
            ("../x", "../x"),
            ("a/../../x", "../x"),
            ("/etc/passwd", "/etc/passwd"),
            ("/../etc", "/etc"),
        ] {
            assert_eq!(clean_source(src), clean, "{src}");
            assert_eq!(clean_source(clean), clean, "cleaning {clean} again");
        }
    }

    #[test]
    fn start_commands_validate_each_argument() {
        let arg = |s: &StartCmd| match &s.error {
            Some(SandboxError::InvalidArgument { argument, .. }) => {
                argument.as_deref().map(str::to_owned)
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(arg(&StartCmd::new(" ")).as_deref(), Some("start_cmd"));
        assert_eq!(arg(&StartCmd::new("x").user("")).as_deref(), Some("user"));
        assert_eq!(
            arg(&StartCmd::new("x").workdir("rel")).as_deref(),
            Some("workdir")
        );
        assert_eq!(
            arg(&StartCmd::new("x").env("1X", "v")).as_deref(),
            Some("envs")
        );
        assert_eq!(
            arg(&StartCmd::new("x").env("X", "a\nb")).as_deref(),
            Some("envs")
        );
        assert_eq!(
            arg(&StartCmd::new("x").ready(ReadyCmd::port(0))).as_deref(),
            Some("ready")
        );
        let ok = StartCmd::new("x")
            .env("B", "2")
            .envs([("A", "1"), ("B", "3")]);
        assert!(ok.error.is_none());
        assert_eq!(ok.user, "1000");
        assert_eq!(
            ok.envs
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>(),
            ["A=1", "B=3"]
        );
        let shown = format!("{ok:?}");
        assert!(!shown.contains("=3") && !shown.contains("\"3\""), "{shown}");
    }
}
