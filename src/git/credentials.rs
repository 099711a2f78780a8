//! How credentials reach git without a command line: the command's stdin
//! carries them, a fixed shell prefix reads them into one variable exported
//! to the `git` process only, and an inline credential helper (static text,
//! no secret in it) hands them to git only for the expected protocol and
//! host. Nothing of them is written to `.git/config` or to any argument
//! list (`/proc/<pid>/cmdline`).

use super::line::quote;
use crate::Secret;
use crate::error::SandboxError;

/// The credential helper git runs (through `sh -c`, as `f get`, `f store`,
/// `f erase`). It answers `get` only, and only when the request's protocol
/// and host (`host[:port]`, as git sends it) are the expected ones; the
/// username is the first line of `RAYITO_GIT_CREDENTIAL`, the password the
/// rest. `printf` is a shell builtin, so the values never reach an
/// argument list. A username without a password answers the username only:
/// git then asks for the password, which cannot be prompted for.
const HELPER: &str = "!f() { test \"$1\" = get || return 0; h=; p=; \
while IFS= read -r l && test -n \"$l\"; do case \"$l\" in \
host=*) h=${l#host=};; protocol=*) p=${l#protocol=};; esac; done; \
test \"$p\" = \"$RAYITO_GIT_PROTOCOL\" && test \"$h\" = \"$RAYITO_GIT_HOST\" || return 0; \
nl='\n'; c=$RAYITO_GIT_CREDENTIAL; u=${c%%\"$nl\"*}; \
case $c in *\"$nl\"*) pw=${c#*\"$nl\"};; *) pw=;; esac; \
printf 'username=%s\\n' \"$u\"; test -z \"$pw\" || printf 'password=%s\\n' \"$pw\"; }; f";

/// Username and optional password for one call.
pub(crate) struct Credentials<'a> {
    pub(crate) username: &'a str,
    pub(crate) password: Option<&'a Secret>,
}

impl Credentials<'_> {
    /// The call's stdin: the username, a line break, the password.
    pub(crate) fn stdin(&self) -> Vec<u8> {
        let password = self.password.map_or("", Secret::expose);
        format!("{}\n{password}\n", self.username).into_bytes()
    }

    /// Only a username (git then needs a password it cannot prompt for).
    pub(crate) fn username_only(&self) -> bool {
        self.password.is_none_or(|p| p.expose().is_empty())
    }
}

/// Checks a username / password pair before any I/O: a password needs a
/// username; neither may hold a NUL or a line break (they travel as lines).
pub(crate) fn check<'a>(
    username: Option<&'a str>,
    password: Option<&'a Secret>,
) -> Result<Option<Credentials<'a>>, SandboxError> {
    if let Some(username) = username
        && (username.is_empty() || username.contains(['\0', '\n', '\r']))
    {
        return Err(SandboxError::invalid_argument(
            "username",
            "must be non-empty, without a NUL or a line break",
        ));
    }
    if let Some(password) = password
        && password.expose().contains(['\0', '\n', '\r'])
    {
        return Err(SandboxError::invalid_argument(
            "password",
            "must not contain a NUL or a line break",
        ));
    }
    match (username, password) {
        (None, Some(_)) => Err(SandboxError::invalid_argument(
            "password",
            "a password needs a username",
        )),
        (None, None) => Ok(None),
        (Some(username), password) => Ok(Some(Credentials { username, password })),
    }
}

/// Where credentials may go: a URL's scheme and `host[:port]`, as git's
/// credential protocol names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    pub(crate) protocol: String,
    pub(crate) host: String,
}

/// Why credentials cannot go to a URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TargetError {
    /// Not `http://` or `https://` with a host.
    NotHttp,
    /// The URL carries `user@` or `user:password@` itself.
    UserInfo,
}

/// The protocol and host of an `http(s)://[user@]host[:port]/...` URL.
pub(crate) fn target(url: &str) -> Result<Target, TargetError> {
    let (scheme, rest) = url.split_once("://").ok_or(TargetError::NotHttp)?;
    let protocol = scheme.to_ascii_lowercase();
    if protocol != "http" && protocol != "https" {
        return Err(TargetError::NotHttp);
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        return Err(TargetError::UserInfo);
    }
    let valid = !authority.is_empty()
        && authority.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b':' | b'[' | b']')
        });
    if !valid {
        return Err(TargetError::NotHttp);
    }
    Ok(Target {
        protocol,
        host: authority.to_owned(),
    })
}

/// Checks a clone URL before any I/O: credentials need `http(s)://` and a
/// URL without user info (a URL must not carry credentials at all).
pub(crate) fn check_url(url: &str, credentialed: bool) -> Result<Option<Target>, SandboxError> {
    match (target(url), credentialed) {
        (Err(TargetError::UserInfo), _) => Err(SandboxError::invalid_argument(
            "url",
            "must not carry a user name or password; pass them as username and password",
        )),
        (Err(TargetError::NotHttp), true) => Err(SandboxError::invalid_argument(
            "url",
            "credentials are sent only to an http:// or https:// URL",
        )),
        (Err(TargetError::NotHttp), false) => Ok(None),
        (Ok(target), _) => Ok(Some(target)),
    }
}

/// The prefix of a credentialed git command: askpass programs cleared, the
/// expected target and the credentials (read from stdin by `cat`) exported
/// to `git` only, hooks off, every configured helper dropped, then
/// [`HELPER`]. The caller appends the git arguments.
pub(crate) fn git_prefix(target: &Target) -> String {
    format!(
        "GIT_ASKPASS= SSH_ASKPASS= RAYITO_GIT_PROTOCOL={} RAYITO_GIT_HOST={} \
RAYITO_GIT_CREDENTIAL=\"$(cat)\" git -c core.hooksPath=/dev/null -c credential.helper= -c {}",
        quote(&target.protocol),
        quote(&target.host),
        quote(&format!("credential.helper={HELPER}")),
    )
}

/// The refusal check: the effective config (system, global and, with a
/// repository, local) rewrites URLs with `insteadOf` / `pushInsteadOf`.
/// Prints `rewrite` if so; a failure of the check itself fails the command.
pub(crate) fn rewrite_check(repo: Option<&str>) -> String {
    let config = super::line::git(
        repo,
        &["config", "--get-regexp", r"^url\..*\.(push)?insteadof$"],
    );
    format!(
        "{config} >/dev/null; s=$?; if [ $s = 0 ]; then echo rewrite; exit 0; fi; [ $s = 1 ] || exit $s"
    )
}

/// What [`rewrite_check`] and a URL lookup printed: `rewrite`, or the URL.
pub(crate) fn rewrites(stdout: &str) -> bool {
    stdout.lines().next() == Some("rewrite")
}

/// The remote's URL lookup after [`rewrite_check`]: the named remote, else
/// the current branch's configured remote, else `origin`; push URLs for a
/// push.
pub(crate) fn url_lookup(repo: &str, remote: Option<&str>, push: bool) -> String {
    let r = quote(repo);
    let pick = match remote {
        Some(remote) => format!("r={}", quote(remote)),
        None => format!(
            "b=$(git -C {r} symbolic-ref --short -q HEAD); \
r=$(git -C {r} config --get \"branch.$b.remote\") || r=origin"
        ),
    };
    let push = if push { " --push" } else { "" };
    format!("{pick}; git -C {r} remote get-url{push} -- \"$r\"")
}

/// `git credential approve` input for the dangerous storing calls.
pub(crate) fn approve_input(target: &Target, username: &str, password: &Secret) -> Vec<u8> {
    format!(
        "protocol={}\nhost={}\nusername={username}\npassword={}\n\n",
        target.protocol,
        target.host,
        password.expose()
    )
    .into_bytes()
}

/// Stores credentials for every later git command of the user (the store
/// helper writes `~/.git-credentials`): stdin carries them.
pub(crate) const STORE_LINE: &str =
    "git config --global credential.helper store && git credential approve";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        let t = target("https://github.com/o/r.git").unwrap();
        assert_eq!(
            (t.protocol.as_str(), t.host.as_str()),
            ("https", "github.com")
        );
        let t = target("http://127.0.0.1:8080/r.git").unwrap();
        assert_eq!(t.host, "127.0.0.1:8080");
        assert_eq!(target("HTTPS://h").unwrap().protocol, "https");
        assert_eq!(target("https://u:p@h/r"), Err(TargetError::UserInfo));
        // Only http(s) user info is refused: an ssh user is not a secret.
        assert_eq!(target("ssh://git@h/r"), Err(TargetError::NotHttp));
        assert_eq!(target("git@github.com:o/r"), Err(TargetError::NotHttp));
        assert_eq!(target("git://h/r"), Err(TargetError::NotHttp));
        assert_eq!(target("https:///r"), Err(TargetError::NotHttp));
        assert_eq!(target("https://h h/r"), Err(TargetError::NotHttp));
    }

    #[test]
    fn url_refusals_name_the_url() {
        let e = check_url("https://u:p@h/r", false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid url: must not carry a user name or password; pass them as username and password"
        );
        let e = check_url("git://h/r", true).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid url: credentials are sent only to an http:// or https:// URL"
        );
        assert_eq!(check_url("/srv/r.git", false).unwrap(), None);
    }

    #[test]
    fn credential_refusals() {
        let pw = Secret::new("pw");
        let e = check(None, Some(&pw)).err().unwrap();
        assert_eq!(
            e.to_string(),
            "invalid password: a password needs a username"
        );
        let e = check(Some(""), None).err().unwrap();
        assert_eq!(
            e.to_string(),
            "invalid username: must be non-empty, without a NUL or a line break"
        );
        let bad = Secret::new("a\nb");
        let e = check(Some("u"), Some(&bad)).err().unwrap();
        assert_eq!(
            e.to_string(),
            "invalid password: must not contain a NUL or a line break"
        );
        let c = check(Some("u"), Some(&pw)).unwrap().unwrap();
        assert_eq!(c.stdin(), b"u\npw\n");
        assert!(!c.username_only());
        assert!(check(Some("u"), None).unwrap().unwrap().username_only());
        assert!(check(None, None).unwrap().is_none());
    }

    #[test]
    fn the_prefix_holds_no_secret_and_quotes_the_target() {
        let t = Target {
            protocol: "https".into(),
            host: "h:8443".into(),
        };
        let p = git_prefix(&t);
        assert!(p.starts_with(
            "GIT_ASKPASS= SSH_ASKPASS= RAYITO_GIT_PROTOCOL='https' RAYITO_GIT_HOST='h:8443' \
RAYITO_GIT_CREDENTIAL=\"$(cat)\" git -c core.hooksPath=/dev/null -c credential.helper= -c '"
        ));
        // The failed command's message names `git`, the first word that is
        // not an assignment.
        assert_eq!(crate::error::map::agent::program_name(&p), "git");
    }
}

/// The helper itself, run by the host's git the way the sandbox's runs it:
/// it answers for the expected protocol and host only, and `get` only.
#[cfg(test)]
mod helper_tests {
    use super::HELPER;

    /// `git credential fill` for `protocol` / `host` with the helper set up
    /// for `https` / `h.example:8443`: its stdout, or `None` when git found
    /// no credentials (it may not prompt).
    fn fill(protocol: &str, host: &str, credential: &str) -> Option<String> {
        let home = tempfile::tempdir().expect("tempdir");
        let mut child = std::process::Command::new("git")
            .args(["-c", "credential.helper="])
            .arg("-c")
            .arg(format!("credential.helper={HELPER}"))
            .args(["credential", "fill"])
            .env("HOME", home.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_ASKPASS", "")
            .env("SSH_ASKPASS", "")
            .env("RAYITO_GIT_PROTOCOL", "https")
            .env("RAYITO_GIT_HOST", "h.example:8443")
            .env("RAYITO_GIT_CREDENTIAL", credential)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("git runs");
        use std::io::Write as _;
        let mut stdin = child.stdin.take().expect("stdin");
        write!(stdin, "protocol={protocol}\nhost={host}\n\n").expect("write");
        drop(stdin);
        let out = child.wait_with_output().expect("git ends");
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    #[test]
    fn answers_only_the_expected_protocol_and_host() {
        let ok = fill("https", "h.example:8443", "bob\nto'k en$x").expect("answered");
        assert!(ok.contains("username=bob\n"), "{ok}");
        assert!(ok.contains("password=to'k en$x\n"), "{ok}");
        assert_eq!(fill("https", "h.example", "bob\npw"), None, "another port");
        assert_eq!(
            fill("https", "evil.example:8443", "bob\npw"),
            None,
            "another host"
        );
        assert_eq!(
            fill("http", "h.example:8443", "bob\npw"),
            None,
            "plain http"
        );
        // A username alone: git then needs a password it cannot prompt for.
        assert_eq!(fill("https", "h.example:8443", "bob"), None);
    }
}
