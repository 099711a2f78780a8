//! `sandbox.git()`: git inside the sandbox, each call one foreground
//! command (`commands().run_with`), every argument single-quoted.
//!
//! Credentials never reach a command line, an environment or `.git/config`:
//! they travel in the command's stdin to a credential helper that answers
//! only for the host of the URL the caller pinned (`pins`, `credentials`),
//! with hooks and traces off, and URL rewriting, proxies, TLS overrides and
//! a moved remote URL refused. See `docs/git.md`.

mod classify;
mod credentials;
mod line;
mod options;
mod pins;
mod status;

use crate::Secret;
use crate::commands::{CommandOptions, CommandResult};
use crate::error::SandboxError;
use crate::sandbox::Sandbox;

use self::classify::{Remote, failed, password_forms};
use self::credentials::{Credentials, Target, UrlCheck};
use self::line::{free_text, git, name, opt_text, text};

pub use self::options::{
    AddOptions, AuthenticateOptions, CloneOptions, CommitOptions, ConfigScope, GitOptions,
    InitOptions, PullOptions, PushOptions, RemoteAddOptions, ResetOptions, RestoreOptions,
};
pub use self::status::{GitBranches, GitFileState, GitFileStatus, GitStatus};

/// The modes `reset` accepts.
const RESET_MODES: [&str; 5] = ["soft", "mixed", "hard", "merge", "keep"];

/// Git in a sandbox (a borrowed view: `sandbox.git()`).
#[derive(Debug)]
pub struct Git<'a> {
    sandbox: &'a Sandbox,
    options: GitOptions,
}

/// A credentialed run: what to send, where to (the pinned URL's target),
/// what to redact, and for a push or pull the remote whose URLs must be the
/// pinned one.
struct Credentialed<'a> {
    credentials: Credentials<'a>,
    target: Target,
    /// The pinned URL (`target` is its protocol and host).
    url: String,
    /// `(remote, pinned URL)` of a push or pull.
    remote: Option<(String, String)>,
}

/// The remote, branch and credentials of a push or pull, checked before
/// any I/O.
struct SyncTarget<'a> {
    remote: Option<&'a str>,
    branch: Option<&'a str>,
    credentials: Option<Credentials<'a>>,
    /// The URL the credentials are for, given by the caller.
    url: Option<&'a str>,
}

impl<'a> SyncTarget<'a> {
    /// `InvalidArgument` for a bad `path`, `remote` or `branch` (a branch
    /// without a remote), `username` or `password` (without a username).
    fn check(
        path: &str,
        (remote, branch, url): (Option<&'a str>, Option<&'a str>, Option<&'a str>),
        (username, password): (Option<&'a str>, Option<&'a Secret>),
    ) -> Result<Self, SandboxError> {
        name("path", path)?;
        check_target(remote, branch)?;
        let credentials = credentials::check(username, password)?;
        if let Some(url) = url {
            name("url", url)?;
            credentials::check_url(url, credentials.is_some())?;
        }
        Ok(Self {
            remote,
            branch,
            credentials,
            url,
        })
    }
}

impl<'a> Git<'a> {
    pub(crate) fn new(sandbox: &'a Sandbox) -> Self {
        Self {
            sandbox,
            options: GitOptions::default(),
        }
    }

    /// This view with `options` for each of its calls (envs, user, cwd,
    /// timeout, request timeout).
    #[must_use]
    pub fn with_options(mut self, options: GitOptions) -> Self {
        self.options = options;
        self
    }

    /// Clones `url` (`git clone`). With `username` / `password`, `url` must
    /// be `http(s)://` and the credentials go only to its host, through
    /// stdin and a credential helper; they are not kept unless
    /// `dangerously_store_credentials`.
    ///
    /// # Errors
    /// `InvalidArgument` before any I/O, naming the argument: `url` (empty,
    /// a line break, user info in it, credentials for a non-http URL),
    /// `path`, `branch`, `depth` (0), `username`, `password` (without a
    /// username), `dangerously_store_credentials` (without a password);
    /// `GitAuth` when the remote wanted credentials or refused them, or the
    /// config rewrites URLs (`insteadOf`) while credentials were given;
    /// `CommandExit` for any other failure (the password replaced by
    /// `***`); the errors of [`Commands::run`](crate::Commands::run).
    pub async fn clone(
        &self,
        url: &str,
        options: CloneOptions,
    ) -> Result<CommandResult, SandboxError> {
        text("url", url)?;
        opt_text("path", options.path.as_deref())?;
        if let Some(path) = &options.path {
            name("path", path)?;
        }
        if let Some(branch) = &options.branch {
            name("branch", branch)?;
        }
        if options.depth == Some(0) {
            return Err(SandboxError::invalid_argument(
                "depth",
                "must be at least 1",
            ));
        }
        let credentials =
            credentials::check(options.username.as_deref(), options.password.as_ref())?;
        let target = credentials::check_url(url, credentials.is_some())?;
        if options.dangerously_store_credentials
            && credentials.as_ref().is_none_or(|c| c.username_only())
        {
            return Err(SandboxError::invalid_argument(
                "dangerously_store_credentials",
                "needs a username and a password",
            ));
        }
        let depth = options.depth.map(|d| d.to_string());
        let mut args = vec!["clone"];
        if credentials.is_some() {
            // A template's `config` would land in the new repository after
            // the guard ran (`init.templateDir` can name one of the
            // sandbox's): a credentialed clone uses none.
            args.push("--template=");
        }
        if let Some(branch) = &options.branch {
            args.extend(["--branch", branch, "--single-branch"]);
        }
        if let Some(depth) = &depth {
            args.extend(["--depth", depth]);
        }
        args.extend(["--", url]);
        if let Some(path) = &options.path {
            args.push(path);
        }
        let credentialed = credentials
            .zip(target)
            .map(|(credentials, target)| Credentialed {
                credentials,
                target,
                url: url.to_owned(),
                remote: None,
            });
        let result = self
            .remote_run(Remote::Clone, None, &args, credentialed.as_ref())
            .await?;
        // The URL the caller gave is where later credentials of this
        // repository's `origin` may go (`pins`).
        if let Some(dir) = options.path.clone().or_else(|| pins::clone_dir(url)) {
            self.pin(&dir, "origin", url);
        }
        if let (true, Some(c), Some(password)) = (
            options.dangerously_store_credentials,
            &credentialed,
            &options.password,
        ) {
            self.store(&c.target, c.credentials.username, password)
                .await?;
        }
        Ok(result)
    }

    /// Creates a repository at `path` (`git init`).
    ///
    /// # Errors
    /// `InvalidArgument` (`path`, `initial_branch`) before any I/O;
    /// `CommandExit` when git fails; the errors of
    /// [`Commands::run`](crate::Commands::run).
    pub async fn init(
        &self,
        path: &str,
        options: InitOptions,
    ) -> Result<CommandResult, SandboxError> {
        name("path", path)?;
        if let Some(branch) = &options.initial_branch {
            name("initial_branch", branch)?;
        }
        let mut args = vec!["init"];
        if options.bare {
            args.push("--bare");
        }
        if let Some(branch) = &options.initial_branch {
            args.extend(["--initial-branch", branch]);
        }
        args.push(path);
        self.plain(&git(None, &args)).await
    }

    /// Adds a remote (`git remote add`); with `overwrite`, an existing one
    /// gets the new URL (`remote set-url`); with `fetch`, it is fetched.
    ///
    /// # Errors
    /// `InvalidArgument` (`path`, `name`, `url`: user info in it) before any
    /// I/O; with `fetch`, `GitAuth` when the remote wants credentials
    /// (add none here: fetch through [`Git::pull`] with them);
    /// `CommandExit` otherwise; the errors of
    /// [`Commands::run`](crate::Commands::run).
    pub async fn remote_add(
        &self,
        path: &str,
        remote: &str,
        url: &str,
        options: RemoteAddOptions,
    ) -> Result<CommandResult, SandboxError> {
        name("path", path)?;
        name("name", remote)?;
        name("url", url)?;
        credentials::check_url(url, false)?;
        let add = git(Some(path), &["remote", "add", remote, url]);
        let mut cmd = if options.overwrite {
            let set = git(Some(path), &["remote", "set-url", remote, url]);
            format!("{{ {add} || {set}; }}")
        } else {
            add
        };
        if options.fetch {
            cmd = format!("{cmd} && {}", git(Some(path), &["fetch", remote]));
        }
        let op = options.fetch.then_some(Remote::FetchAfterAdd);
        let result = self
            .run(cmd, None)
            .await
            .map_err(|err| failed(err, op, false, &[]))?;
        self.pin(path, remote, url);
        Ok(result)
    }

    /// Remembers on the host that `remote` of `path` is `url` (`pins`).
    fn pin(&self, path: &str, remote: &str, url: &str) {
        let repo = pins::repo_key(self.options.spec.cwd.as_deref(), path);
        pins::pin(self.sandbox.id(), repo, remote, url);
    }

    /// The URL of a remote, `None` when there is no such remote.
    ///
    /// # Errors
    /// `InvalidArgument` (`path`, `name`) before any I/O; the errors of
    /// [`Commands::run`](crate::Commands::run).
    pub async fn remote_get(
        &self,
        path: &str,
        remote: &str,
    ) -> Result<Option<String>, SandboxError> {
        name("path", path)?;
        name("name", remote)?;
        let cmd = format!(
            "{} || true",
            git(Some(path), &["remote", "get-url", remote])
        );
        let out = self.plain(&cmd).await?;
        Ok(non_empty(&out.stdout))
    }

    /// The status of the repository at `path` (`git status --porcelain=1 -b`).
    ///
    /// # Errors
    /// `InvalidArgument` (`path`) before any I/O; `CommandExit` when it is
    /// not a repository; the errors of [`Commands::run`](crate::Commands::run).
    pub async fn status(&self, path: &str) -> Result<GitStatus, SandboxError> {
        name("path", path)?;
        let out = self
            .plain(&git(Some(path), &["status", "--porcelain=1", "-b"]))
            .await?;
        Ok(status::parse_status(&out.stdout))
    }

    /// The local branches and the current one.
    ///
    /// # Errors
    /// As [`Git::status`].
    pub async fn branches(&self, path: &str) -> Result<GitBranches, SandboxError> {
        name("path", path)?;
        let out = self
            .plain(&git(
                Some(path),
                &["branch", "--format=%(refname:short)\t%(HEAD)"],
            ))
            .await?;
        Ok(status::parse_branches(&out.stdout))
    }

    /// Creates a branch and checks it out (`git checkout -b`).
    ///
    /// # Errors
    /// `InvalidArgument` (`path`, `branch`) before any I/O; `CommandExit`
    /// when git fails (the branch exists); the errors of
    /// [`Commands::run`](crate::Commands::run).
    pub async fn create_branch(
        &self,
        path: &str,
        branch: &str,
    ) -> Result<CommandResult, SandboxError> {
        name("path", path)?;
        name("branch", branch)?;
        self.plain(&git(Some(path), &["checkout", "-b", branch]))
            .await
    }

    /// Checks out a branch.
    ///
    /// # Errors
    /// As [`Git::create_branch`].
    pub async fn checkout_branch(
        &self,
        path: &str,
        branch: &str,
    ) -> Result<CommandResult, SandboxError> {
        name("path", path)?;
        name("branch", branch)?;
        self.plain(&git(Some(path), &["checkout", branch])).await
    }

    /// Deletes a branch (`-d`, or `-D` with `force`).
    ///
    /// # Errors
    /// As [`Git::create_branch`] (`CommandExit` for an unmerged branch
    /// without `force`).
    pub async fn delete_branch(
        &self,
        path: &str,
        branch: &str,
        force: bool,
    ) -> Result<CommandResult, SandboxError> {
        name("path", path)?;
        name("branch", branch)?;
        let flag = if force { "-D" } else { "-d" };
        self.plain(&git(Some(path), &["branch", flag, branch]))
            .await
    }

    /// Stages changes (`add -- <files>`, `add -A` or `add .`).
    ///
    /// # Errors
    /// `InvalidArgument` (`path`, `files`: an empty list or an empty
    /// entry) before any I/O; `CommandExit`; the errors of
    /// [`Commands::run`](crate::Commands::run).
    pub async fn add(
        &self,
        path: &str,
        options: AddOptions,
    ) -> Result<CommandResult, SandboxError> {
        name("path", path)?;
        let mut args = vec!["add"];
        match &options.files {
            Some(files) => {
                if files.is_empty() {
                    return Err(SandboxError::invalid_argument("files", "must not be empty"));
                }
                for file in files {
                    text("files", file)?;
                }
                args.push("--");
                args.extend(files.iter().map(String::as_str));
            }
            None if options.all => args.push("-A"),
            None => args.push("."),
        }
        self.plain(&git(Some(path), &args)).await
    }

    /// Commits what is staged, as `author_name` / `author_email` if given.
    ///
    /// # Errors
    /// `InvalidArgument` (`path`, `message`: a NUL, `author_name`,
    /// `author_email`) before any I/O; `CommandExit` (nothing to commit, no
    /// identity); the errors of [`Commands::run`](crate::Commands::run).
    pub async fn commit(
        &self,
        path: &str,
        message: &str,
        options: CommitOptions,
    ) -> Result<CommandResult, SandboxError> {
        name("path", path)?;
        free_text("message", message)?;
        opt_text("author_name", options.author_name.as_deref())?;
        opt_text("author_email", options.author_email.as_deref())?;
        let name_cfg = options
            .author_name
            .as_ref()
            .map(|n| format!("user.name={n}"));
        let email_cfg = options
            .author_email
            .as_ref()
            .map(|e| format!("user.email={e}"));
        let mut args = Vec::new();
        for cfg in [&name_cfg, &email_cfg].into_iter().flatten() {
            args.extend(["-c", cfg.as_str()]);
        }
        args.extend(["commit", "-m", message]);
        if options.allow_empty {
            args.push("--allow-empty");
        }
        self.plain(&git(Some(path), &args)).await
    }

    /// Resets HEAD, the index and maybe the tree (`git reset`).
    ///
    /// # Errors
    /// `InvalidArgument` (`path`, `mode`: not one of `soft`, `mixed`,
    /// `hard`, `merge`, `keep`; `target`; `paths`: an empty list or entry)
    /// before any I/O; `CommandExit`; the errors of
    /// [`Commands::run`](crate::Commands::run).
    pub async fn reset(
        &self,
        path: &str,
        options: ResetOptions,
    ) -> Result<CommandResult, SandboxError> {
        name("path", path)?;
        let mode = match options.mode.as_deref() {
            Some(mode) if RESET_MODES.contains(&mode) => Some(format!("--{mode}")),
            Some(_) => {
                return Err(SandboxError::invalid_argument(
                    "mode",
                    "must be one of soft, mixed, hard, merge, keep",
                ));
            }
            None => None,
        };
        if let Some(target) = &options.target {
            name("target", target)?;
        }
        check_paths(options.paths.as_deref())?;
        let mut args = vec!["reset"];
        args.extend(mode.as_deref());
        args.extend(options.target.as_deref());
        if let Some(paths) = &options.paths {
            args.push("--");
            args.extend(paths.iter().map(String::as_str));
        }
        self.plain(&git(Some(path), &args)).await
    }

    /// Restores paths in the working tree (the default) and/or the index
    /// (`staged`; alone, the index only).
    ///
    /// # Errors
    /// `InvalidArgument` (`path`; `paths`: empty, or an empty entry;
    /// `worktree`: both sides turned off; `source`) before any I/O;
    /// `CommandExit`; the errors of [`Commands::run`](crate::Commands::run).
    pub async fn restore(
        &self,
        path: &str,
        paths: &[String],
        options: RestoreOptions,
    ) -> Result<CommandResult, SandboxError> {
        name("path", path)?;
        if paths.is_empty() {
            return Err(SandboxError::invalid_argument("paths", "must not be empty"));
        }
        check_paths(Some(paths))?;
        let staged = options.staged.unwrap_or(false);
        let worktree = options.worktree.unwrap_or(!staged);
        if !staged && !worktree {
            return Err(SandboxError::invalid_argument(
                "worktree",
                "restore needs the worktree, the index (staged) or both",
            ));
        }
        if let Some(source) = &options.source {
            name("source", source)?;
        }
        let mut args = vec!["restore"];
        if worktree {
            args.push("--worktree");
        }
        if staged {
            args.push("--staged");
        }
        if let Some(source) = &options.source {
            args.extend(["--source", source]);
        }
        args.push("--");
        args.extend(paths.iter().map(String::as_str));
        self.plain(&git(Some(path), &args)).await
    }

    /// Pushes (`push [--set-upstream] [remote] [branch]`). With
    /// `username` / `password`, the credentials are for one URL: `url`, else
    /// the one given to `clone` / `remote_add` for this path and remote in
    /// this process (remembered on the host). It must be `http(s)://`, the
    /// remote's URLs and push URLs in the sandbox must be exactly it, and
    /// the credentials go only to its host.
    ///
    /// # Errors
    /// `InvalidArgument` (`path`, `remote`, `branch`: a branch without a
    /// remote, `url`, `username`, `password`: without a username) before any
    /// I/O; `InvalidArgument` naming `url` when credentials are given
    /// without a URL they are for; `GitAuth` (credentials wanted or refused;
    /// or not sent: the sandbox's config rewrites URLs, sets a proxy, TLS,
    /// header or remote helper key, or gives the remote another URL);
    /// `GitUpstream` (no upstream branch);
    /// `CommandExit` otherwise (the password replaced by `***`); the
    /// errors of [`Commands::run`](crate::Commands::run).
    pub async fn push(
        &self,
        path: &str,
        options: PushOptions,
    ) -> Result<CommandResult, SandboxError> {
        let target = SyncTarget::check(
            path,
            (
                options.remote.as_deref(),
                options.branch.as_deref(),
                options.url.as_deref(),
            ),
            (options.username.as_deref(), options.password.as_ref()),
        )?;
        let set_upstream = options.set_upstream && options.remote.is_some();
        self.sync(
            Remote::Push,
            path,
            set_upstream.then_some("--set-upstream"),
            target,
        )
        .await
    }

    /// Pulls (`pull [remote] [branch]`). Without a remote and branch, the
    /// current branch must have an upstream (checked first: nothing is
    /// pulled otherwise).
    ///
    /// # Errors
    /// As [`Git::push`].
    pub async fn pull(
        &self,
        path: &str,
        options: PullOptions,
    ) -> Result<CommandResult, SandboxError> {
        let target = SyncTarget::check(
            path,
            (
                options.remote.as_deref(),
                options.branch.as_deref(),
                options.url.as_deref(),
            ),
            (options.username.as_deref(), options.password.as_ref()),
        )?;
        if options.remote.is_none() {
            let probe = git(
                Some(path),
                &["rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{u}"],
            );
            let cmd = format!("{probe} >/dev/null 2>&1 || echo none");
            if self.plain(&cmd).await?.stdout.trim() == "none" {
                return Err(SandboxError::git_upstream(Remote::Pull.action()));
            }
        }
        self.sync(Remote::Pull, path, None, target).await
    }

    /// Push or pull (`<op> [flag] [remote] [branch]`) of a checked target,
    /// the credentials (if any) going to the remote's host only.
    async fn sync(
        &self,
        op: Remote,
        path: &str,
        flag: Option<&str>,
        target: SyncTarget<'_>,
    ) -> Result<CommandResult, SandboxError> {
        let credentialed = match target.credentials {
            Some(credentials) => Some(
                self.remote_target(op, path, target.remote, target.url, credentials)
                    .await?,
            ),
            None => None,
        };
        let mut args = vec![op.action()];
        args.extend(flag);
        if credentialed.is_some() {
            // A submodule's own config (`.git/modules/*/config`) is not the
            // guard's, and `push.recurseSubmodules` pushes submodules
            // first: a credentialed push or pull recurses into none.
            args.push("--no-recurse-submodules");
        }
        // With credentials, the remote checked is the remote git uses.
        match &credentialed {
            Some(Credentialed {
                remote: Some((remote, _)),
                ..
            }) => args.push(remote),
            _ => args.extend(target.remote),
        }
        args.extend(target.branch);
        self.remote_run(op, Some(path), &args, credentialed.as_ref())
            .await
    }

    /// Sets a config value (`git config --<scope> key value`).
    ///
    /// # Errors
    /// `InvalidArgument` (`key`, `value`: a NUL, `path`: missing with the
    /// local scope) before any I/O; `CommandExit`; the errors of
    /// [`Commands::run`](crate::Commands::run).
    pub async fn set_config(
        &self,
        key: &str,
        value: &str,
        scope: ConfigScope,
        path: Option<&str>,
    ) -> Result<CommandResult, SandboxError> {
        name("key", key)?;
        free_text("value", value)?;
        let repo = config_repo(scope, path)?;
        self.plain(&git(repo, &["config", scope.flag(), key, value]))
            .await
    }

    /// A config value, `None` when unset.
    ///
    /// # Errors
    /// `InvalidArgument` (`key`, `path`: missing with the local scope)
    /// before any I/O; the errors of [`Commands::run`](crate::Commands::run).
    pub async fn get_config(
        &self,
        key: &str,
        scope: ConfigScope,
        path: Option<&str>,
    ) -> Result<Option<String>, SandboxError> {
        name("key", key)?;
        let repo = config_repo(scope, path)?;
        let cmd = format!(
            "{} || true",
            git(repo, &["config", scope.flag(), "--get", key])
        );
        let out = self.plain(&cmd).await?;
        Ok(non_empty(&out.stdout))
    }

    /// Sets `user.name` and `user.email` in one scope.
    ///
    /// # Errors
    /// `InvalidArgument` (`name`, `email`, `path`: missing with the local
    /// scope) before any I/O; `CommandExit`; the errors of
    /// [`Commands::run`](crate::Commands::run).
    pub async fn configure_user(
        &self,
        user_name: &str,
        email: &str,
        scope: ConfigScope,
        path: Option<&str>,
    ) -> Result<CommandResult, SandboxError> {
        text("name", user_name)?;
        text("email", email)?;
        let repo = config_repo(scope, path)?;
        let cmd = format!(
            "{} && {}",
            git(repo, &["config", scope.flag(), "user.name", user_name]),
            git(repo, &["config", scope.flag(), "user.email", email]),
        );
        self.plain(&cmd).await
    }

    /// **Dangerous**: stores credentials for `host` in `~/.git-credentials`
    /// (`credential.helper=store`, fed to `git credential approve` through
    /// stdin, never an argument). Every later git command of the sandbox
    /// user uses them, and any code in the sandbox can read that file.
    ///
    /// # Errors
    /// `InvalidArgument` (`username`, `password`: empty or a line break,
    /// `host`, `protocol`: not `http` / `https`) before any I/O;
    /// `CommandExit` (the password replaced by `***`); the errors of
    /// [`Commands::run`](crate::Commands::run).
    pub async fn dangerously_authenticate(
        &self,
        username: &str,
        password: &Secret,
        options: AuthenticateOptions,
    ) -> Result<CommandResult, SandboxError> {
        credentials::check(Some(username), Some(password))?;
        if password.expose().is_empty() {
            return Err(SandboxError::invalid_argument(
                "password",
                "must not be empty",
            ));
        }
        if options.protocol != "http" && options.protocol != "https" {
            return Err(SandboxError::invalid_argument(
                "protocol",
                "must be http or https",
            ));
        }
        let target = credentials::target(&format!("{}://{}/", options.protocol, options.host))
            .map_err(|_| {
                SandboxError::invalid_argument("host", "must be a host name with an optional :port")
            })?;
        self.store(&target, username, password).await
    }

    /// Runs the store line with the credentials on stdin.
    async fn store(
        &self,
        target: &Target,
        username: &str,
        password: &Secret,
    ) -> Result<CommandResult, SandboxError> {
        let input = credentials::approve_input(target, username, password);
        let forms = password_forms(password.expose());
        let secrets: Vec<&str> = forms.iter().map(String::as_str).collect();
        self.run(credentials::STORE_LINE.to_owned(), Some(input))
            .await
            .map_err(|err| failed(err, None, false, &secrets))
    }

    /// Where credentials for a push / pull may go: the URL the caller gave
    /// (`url`), else the one pinned by `clone` / `remote_add` for this
    /// repository and remote; never what the sandbox's config says. Without
    /// a named remote, the sandbox's choice (the branch's push remote or
    /// remote, else `origin`) is read first, and must have a pin. The
    /// pinned URL must be `http(s)://` without user info; the command's
    /// guard then checks the sandbox's URLs against it.
    async fn remote_target<'c>(
        &self,
        op: Remote,
        path: &str,
        remote: Option<&str>,
        url: Option<&str>,
        credentials: Credentials<'c>,
    ) -> Result<Credentialed<'c>, SandboxError> {
        let remote = match remote {
            Some(remote) => remote.to_owned(),
            None => {
                let out = self
                    .guarded(&credentials::remote_lookup(path, op == Remote::Push))
                    .await?;
                let chosen = out.stdout.lines().next().unwrap_or("").trim().to_owned();
                // Sandbox text: only a plain remote name goes on.
                name("remote", &chosen).map_err(|_| {
                    SandboxError::invalid_argument(
                        "remote",
                        "the branch's remote in the sandbox is not a plain remote name; pass remote",
                    )
                })?;
                chosen
            }
        };
        let pinned = match url {
            Some(url) => url.to_owned(),
            None => {
                let repo = pins::repo_key(self.options.spec.cwd.as_deref(), path);
                pins::pinned(self.sandbox.id(), repo, &remote).ok_or_else(|| {
                    SandboxError::invalid_argument(
                        "url",
                        "credentials go only to a URL the caller gave: pass url, or clone or remote_add this remote through this process first",
                    )
                })?
            }
        };
        let target = credentials::target(&pinned).map_err(|_| {
            SandboxError::invalid_argument(
                "username",
                "credentials are sent only to a remote with an http:// or https:// URL without user info",
            )
        })?;
        Ok(Credentialed {
            credentials,
            target,
            url: pinned.clone(),
            remote: Some((remote, pinned)),
        })
    }

    /// Runs a git command that talks to a remote: with credentials, through
    /// the guard (URL rewriting, transport keys, for a push or pull the
    /// remote's URLs against the pinned one), then the credential prefix,
    /// with the credentials on stdin handed to git as descriptor 3, in a
    /// shell that reads no profile. A failure is classified.
    async fn remote_run(
        &self,
        op: Remote,
        repo: Option<&str>,
        args: &[&str],
        credentialed: Option<&Credentialed<'_>>,
    ) -> Result<CommandResult, SandboxError> {
        let Some(c) = credentialed else {
            return self
                .run(git(repo, args), None)
                .await
                .map_err(|err| failed(err, Some(op), false, &[]));
        };
        let check = c.remote.as_ref().map(|(remote, pinned)| UrlCheck {
            remote,
            push: op == Remote::Push,
            pinned,
        });
        let line = git(repo, args);
        let cmd = format!(
            "{}{}{}{}",
            credentials::guard(repo, check.as_ref()),
            credentials::git_prefix(&c.target, &c.url),
            line.strip_prefix("git").unwrap_or(&line),
            credentials::CREDENTIAL_FD,
        );
        let forms = c
            .credentials
            .password
            .map(|p| password_forms(p.expose()))
            .unwrap_or_default();
        let secrets: Vec<&str> = forms.iter().map(String::as_str).collect();
        self.run_with(cmd, Some(c.credentials.stdin()), false)
            .await
            .map_err(|err| match &err {
                SandboxError::CommandExit { exit_code, .. } => match *exit_code {
                    credentials::EXIT_REWRITE => SandboxError::git_auth_rewrite(op.action()),
                    credentials::EXIT_TRANSPORT => SandboxError::git_auth_transport(op.action()),
                    credentials::EXIT_MOVED => SandboxError::git_auth_moved(op.action()),
                    _ => failed(err, Some(op), c.credentials.username_only(), &secrets),
                },
                _ => failed(err, Some(op), c.credentials.username_only(), &secrets),
            })
    }

    /// A command that holds no secret, in a shell that reads no profile
    /// (its answer decides where credentials go).
    async fn guarded(&self, cmd: &str) -> Result<CommandResult, SandboxError> {
        self.run_with(cmd.to_owned(), None, false).await
    }

    /// Runs a command that holds no secret and talks to no remote.
    async fn plain(&self, cmd: &str) -> Result<CommandResult, SandboxError> {
        self.run(cmd.to_owned(), None).await
    }

    /// One foreground command with the view's options and
    /// `GIT_TERMINAL_PROMPT=0` under the caller's envs.
    async fn run(
        &self,
        cmd: String,
        stdin: Option<Vec<u8>>,
    ) -> Result<CommandResult, SandboxError> {
        self.run_with(cmd, stdin, true).await
    }

    /// [`Git::run`] in a login shell or not: a credentialed command reads no
    /// profile, which sandbox code could have written (an exported
    /// variable, a function named `git`).
    async fn run_with(
        &self,
        cmd: String,
        stdin: Option<Vec<u8>>,
        login: bool,
    ) -> Result<CommandResult, SandboxError> {
        let mut spec = self.options.spec.clone();
        spec.envs
            .entry("GIT_TERMINAL_PROMPT".to_owned())
            .or_insert_with(|| "0".to_owned());
        let mut options = CommandOptions::with_spec(spec).login_shell(login);
        if let Some(stdin) = stdin {
            options = options.stdin(stdin);
        }
        self.sandbox.commands().run_with(&cmd, options).await
    }
}

/// A trimmed output, `None` when empty.
fn non_empty(stdout: &str) -> Option<String> {
    let value = stdout.trim_end_matches(['\n', '\r']);
    (!value.is_empty()).then(|| value.to_owned())
}

/// Paths of reset / restore: no empty entry, no line break.
fn check_paths(paths: Option<&[String]>) -> Result<(), SandboxError> {
    match paths {
        Some([]) => Err(SandboxError::invalid_argument("paths", "must not be empty")),
        Some(paths) => paths.iter().try_for_each(|p| text("paths", p)),
        None => Ok(()),
    }
}

/// `remote` / `branch` of push and pull: names, and a branch needs a remote
/// (git would take it for one).
fn check_target(remote: Option<&str>, branch: Option<&str>) -> Result<(), SandboxError> {
    if let Some(remote) = remote {
        name("remote", remote)?;
    }
    if let Some(branch) = branch {
        name("branch", branch)?;
        if remote.is_none() {
            return Err(SandboxError::invalid_argument(
                "branch",
                "a branch needs a remote",
            ));
        }
    }
    Ok(())
}

/// The repository a config call runs in: the local scope needs one.
fn config_repo(scope: ConfigScope, path: Option<&str>) -> Result<Option<&str>, SandboxError> {
    if let Some(path) = path {
        name("path", path)?;
    }
    if scope == ConfigScope::Local && path.is_none() {
        return Err(SandboxError::invalid_argument(
            "path",
            "the local scope needs a repository path",
        ));
    }
    Ok(path)
}

/// The view's entry on the sandbox core (the core does not know the feature).
impl crate::sandbox::Sandbox {
    /// Git in the sandbox: each call one command, credentials never on a
    /// command line (see `docs/git.md`).
    pub fn git(&self) -> Git<'_> {
        Git::new(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/git.md transcribes the messages of the git kinds.
    #[test]
    fn docs_transcribe_the_git_messages() {
        let doc = include_str!("../../docs/git.md");
        for err in [
            SandboxError::git_auth("{action}", false),
            SandboxError::git_auth("{action}", true),
            SandboxError::git_auth_rewrite("{action}"),
            SandboxError::git_auth_transport("{action}"),
            SandboxError::git_auth_moved("{action}"),
            SandboxError::git_upstream("{action}"),
        ] {
            let message = err.to_string();
            assert!(
                doc.contains(&format!("`{message}`")),
                "docs/git.md lacks `{message}`"
            );
        }
    }
}
