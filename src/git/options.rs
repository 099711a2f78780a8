//! The option structs of the git helpers (all with `Default`).

use std::fmt;
use std::time::Duration;

use crate::Secret;
use crate::commands::{ProcessSpec, spec_setters};

/// Default timeout of one git command (as for commands).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Options of every call of a [`Git`](super::Git) view: the environment,
/// user, working directory, timeout and request timeout of the git command
/// it runs.
#[derive(Clone)]
pub struct GitOptions {
    /// Env, user, cwd, timeout, request timeout (never secrets).
    pub(crate) spec: ProcessSpec,
}

impl Default for GitOptions {
    fn default() -> Self {
        Self {
            spec: ProcessSpec::with_timeout(DEFAULT_TIMEOUT),
        }
    }
}

impl fmt::Debug for GitOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Env values may be secret: names only.
        self.spec
            .debug_fields(&mut f.debug_struct("GitOptions"))
            .finish()
    }
}

impl GitOptions {
    /// The defaults: 60 s timeout, the sandbox's user and working directory.
    pub fn new() -> Self {
        Self::default()
    }

    spec_setters! {
        /// An environment variable for the git command (over the helpers'
        /// `GIT_TERMINAL_PROMPT=0`: the caller wins).
        env;
        /// The user to run git as (default `user`).
        user;
        /// The working directory (relative paths of the calls start there).
        cwd;
        /// The server-side timeout of the git command (default 60 s); zero
        /// means none, as [`GitOptions::no_timeout`].
        timeout;
        /// No server-side deadline (a long clone).
        no_timeout;
        /// The request timeout of each call's git command, instead of the
        /// sandbox's: how long the SDK waits for the agent to start it and to
        /// take its stdin (see [`CommandOptions::request_timeout`]); it never
        /// bounds git itself. Zero is refused when a call runs
        /// (`InvalidArgument` naming `request_timeout`).
        ///
        /// [`CommandOptions::request_timeout`]: crate::CommandOptions::request_timeout
        request_timeout;
    }
}

/// Options of [`Git::clone`](super::Git::clone).
#[derive(Clone, Default)]
pub struct CloneOptions {
    /// Where to clone to (default: git's, the URL's last part in the cwd).
    pub path: Option<String>,
    /// The branch to check out (`--branch`, with `--single-branch`).
    pub branch: Option<String>,
    /// A shallow clone of this many commits (at least 1).
    pub depth: Option<u32>,
    /// The username for an `http(s)` remote.
    pub username: Option<String>,
    /// The password or token (needs `username`); it reaches git through
    /// the command's stdin and a credential helper, never an argument.
    pub password: Option<Secret>,
    /// Also store the credentials in `~/.git-credentials` for later git
    /// commands of the sandbox (readable by any code in it).
    pub dangerously_store_credentials: bool,
}

crate::secret::redacted_debug! {
    CloneOptions |o| path, branch, depth, username = o.username.is_some(),
    password = o.password.is_some(), dangerously_store_credentials
}

/// Options of [`Git::init`](super::Git::init).
#[derive(Debug, Clone, Default)]
pub struct InitOptions {
    /// A bare repository.
    pub bare: bool,
    /// The first branch's name (`--initial-branch`).
    pub initial_branch: Option<String>,
}

/// Options of [`Git::remote_add`](super::Git::remote_add).
#[derive(Debug, Clone, Default)]
pub struct RemoteAddOptions {
    /// Fetch the remote once added.
    pub fetch: bool,
    /// Change the URL of a remote of that name if there is one.
    pub overwrite: bool,
}

/// Options of [`Git::add`](super::Git::add).
#[derive(Debug, Clone)]
pub struct AddOptions {
    /// These paths only (`add -- <files>`).
    pub files: Option<Vec<String>>,
    /// Without `files`: every change, deletions included (`add -A`, the
    /// default), else the working directory (`add .`).
    pub all: bool,
}

impl Default for AddOptions {
    fn default() -> Self {
        Self {
            files: None,
            all: true,
        }
    }
}

/// Options of [`Git::commit`](super::Git::commit).
#[derive(Debug, Clone, Default)]
pub struct CommitOptions {
    /// The author's (and committer's) name for this commit.
    pub author_name: Option<String>,
    /// The author's (and committer's) email for this commit.
    pub author_email: Option<String>,
    /// Commit even with nothing staged.
    pub allow_empty: bool,
}

/// Options of [`Git::reset`](super::Git::reset).
#[derive(Debug, Clone, Default)]
pub struct ResetOptions {
    /// `soft`, `mixed`, `hard`, `merge` or `keep` (git's default: mixed).
    pub mode: Option<String>,
    /// The commit to reset to (default HEAD).
    pub target: Option<String>,
    /// Only these paths.
    pub paths: Option<Vec<String>>,
}

/// Options of [`Git::restore`](super::Git::restore).
#[derive(Debug, Clone, Default)]
pub struct RestoreOptions {
    /// Restore the index (unstage). Alone, it restores the index only.
    pub staged: Option<bool>,
    /// Restore the working tree (the default when neither is set).
    pub worktree: Option<bool>,
    /// Restore from this commit.
    pub source: Option<String>,
}

/// Options of [`Git::push`](super::Git::push).
#[derive(Clone)]
pub struct PushOptions {
    /// The remote (default: git's choice, the branch's upstream).
    pub remote: Option<String>,
    /// The branch (needs `remote`).
    pub branch: Option<String>,
    /// `--set-upstream` when a remote is named (default true).
    pub set_upstream: bool,
    /// The username for an `http(s)` remote.
    pub username: Option<String>,
    /// The password or token (needs `username`).
    pub password: Option<Secret>,
    /// The URL the credentials are for. The remote's URL (and push URL) in
    /// the sandbox must be exactly this, or nothing is sent. Default: the
    /// URL given to `clone` / `remote_add` for this path and remote in
    /// this process; without either, credentials are refused
    /// (`InvalidArgument` naming `url`).
    pub url: Option<String>,
}

impl Default for PushOptions {
    fn default() -> Self {
        Self {
            remote: None,
            branch: None,
            set_upstream: true,
            username: None,
            password: None,
            url: None,
        }
    }
}

crate::secret::redacted_debug! {
    PushOptions |o| remote, branch, set_upstream, username = o.username.is_some(),
    password = o.password.is_some(), url = o.url.is_some()
}

/// Options of [`Git::pull`](super::Git::pull).
#[derive(Clone, Default)]
pub struct PullOptions {
    /// The remote (default: the branch's upstream, which must exist).
    pub remote: Option<String>,
    /// The branch (needs `remote`).
    pub branch: Option<String>,
    /// The username for an `http(s)` remote.
    pub username: Option<String>,
    /// The password or token (needs `username`).
    pub password: Option<Secret>,
    /// The URL the credentials are for (as [`PushOptions::url`]; the
    /// remote's fetch URL must be exactly this).
    pub url: Option<String>,
}

crate::secret::redacted_debug! {
    PullOptions |o| remote, branch, username = o.username.is_some(),
    password = o.password.is_some(), url = o.url.is_some()
}

/// Which git config file a setting goes to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigScope {
    /// `~/.gitconfig` (`--global`), the default.
    #[default]
    Global,
    /// The repository's `.git/config` (`--local`; needs a path).
    Local,
    /// `/etc/gitconfig` (`--system`; usually needs root).
    System,
}

impl ConfigScope {
    pub(crate) fn flag(self) -> &'static str {
        match self {
            Self::Global => "--global",
            Self::Local => "--local",
            Self::System => "--system",
        }
    }
}

/// Where [`Git::dangerously_authenticate`](super::Git::dangerously_authenticate)
/// stores credentials for.
#[derive(Debug, Clone)]
pub struct AuthenticateOptions {
    /// The host, with `:port` if not the default (default `github.com`).
    pub host: String,
    /// `https` (the default) or `http`.
    pub protocol: String,
}

impl Default for AuthenticateOptions {
    fn default() -> Self {
        Self {
            host: "github.com".to_owned(),
            protocol: "https".to_owned(),
        }
    }
}
