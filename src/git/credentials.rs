//! How credentials reach git without a command line or an environment: the
//! command's stdin carries them, the shell hands that stdin to `git` as
//! descriptor 3 (git's own stdin is `/dev/null`), and an inline credential
//! helper (static text, no secret in it) reads them from that descriptor,
//! once, only for the expected protocol and host. Nothing of them is written
//! to `.git/config`, to an argument list (`/proc/<pid>/cmdline`) or to an
//! environment (`/proc/<pid>/environ`). A guard run in the same shell just
//! before git refuses a configuration that could send them elsewhere.

use super::line::quote;
use crate::Secret;
use crate::error::SandboxError;

/// The credential helper git runs (through `sh -c`, as `f get`, `f store`,
/// `f erase`). It answers `get` only, and only when the request's protocol
/// and host (`host[:port]`, as git sends it) are the expected ones; then it
/// reads the username and the password, one line each, from descriptor 3
/// (the command's stdin, inherited through git and `git-remote-http(s)`):
/// the first answer drains it, so a later process of the same command
/// (a merge driver, a filter, a second helper call) finds nothing. `read`
/// and `printf` are shell builtins, so the values never reach an argument
/// list or an environment. A username without a password answers the
/// username only: git then asks for the password, which cannot be prompted
/// for.
const HELPER: &str = "!f() { test \"$1\" = get || return 0; h=; p=; \
while IFS= read -r l && test -n \"$l\"; do case \"$l\" in \
host=*) h=${l#host=};; protocol=*) p=${l#protocol=};; esac; done; \
test \"$p\" = \"$RAYITO_GIT_PROTOCOL\" && test \"$h\" = \"$RAYITO_GIT_HOST\" || return 0; \
IFS= read -r u <&3 || return 0; IFS= read -r pw <&3 || pw=; \
printf 'username=%s\\n' \"$u\"; test -z \"$pw\" || printf 'password=%s\\n' \"$pw\"; }; f";

/// Exit code of the guard when the config rewrites URLs (`insteadOf`).
pub(crate) const EXIT_REWRITE: i32 = 85;
/// Exit code of the guard when the config sets a transport key.
pub(crate) const EXIT_TRANSPORT: i32 = 86;
/// Exit code of the guard when the remote's URL is not the pinned one.
pub(crate) const EXIT_MOVED: i32 = 87;

/// Keys (as `git config --get-regexp` prints them: section and name
/// lower-cased) that rewrite a URL.
const REWRITE_KEYS: &str = r"^url\..*\.(push)?insteadof$";

/// Keys that redirect or downgrade the transport, URL-scoped ones
/// included (a URL-scoped key beats a command-line `-c`): every proxy
/// setting, every TLS setting (`sslVerify`, `sslCAInfo`, `sslCAPath`,
/// `sslCert`, `sslKey`, `sslVersion`, `sslBackend`...), `curloptResolve`
/// (another address for the host), `extraHeader`, a remote's proxy and a
/// remote's helper program (`remote.<name>.vcs`, which would get the
/// credential helper's answers).
const TRANSPORT_KEYS: &str = r"^(http\.(.*\.)?(proxy[a-z]*|ssl[a-z]*|curloptresolve|extraheader)|remote\..*\.(proxy[a-z]*|vcs))$";

/// Every git trace a credentialed command turns off (`0` wins over the
/// `trace2.*Target` keys of `~/.gitconfig` and `/etc/gitconfig`; an empty
/// value would not), and the redaction of the traces kept on.
const TRACES_OFF: &str = "GIT_TRACE=0 GIT_TRACE2=0 GIT_TRACE2_EVENT=0 GIT_TRACE2_PERF=0 \
GIT_TRACE_CURL=0 GIT_TRACE_PACKET=0 GIT_TRACE_PACKFILE=0 GIT_TRACE_PACK_ACCESS=0 \
GIT_TRACE_PERFORMANCE=0 GIT_TRACE_SETUP=0 GIT_TRACE_SHALLOW=0 GIT_TRACE_REFS=0 \
GIT_TRACE_FSMONITOR=0 GIT_TRACE_REDACT=1";

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

/// The prefix of a credentialed git command: askpass programs cleared,
/// every trace off, the expected target exported to `git` only, hooks off,
/// TLS verification on for the pinned `url` (scoped to the whole URL, so
/// that no key of the sandbox's for that URL is more specific: this holds
/// even if a key appeared after the guard ran), every configured helper
/// dropped, then [`HELPER`]. The caller appends the git arguments, then
/// [`CREDENTIAL_FD`].
pub(crate) fn git_prefix(target: &Target, url: &str) -> String {
    // `-c` splits at the first `=`: a URL holding one cannot be a key (the
    // guard's refusal still covers it).
    let scoped = if url.contains('=') {
        String::new()
    } else {
        format!("-c {} ", quote(&format!("http.{url}.sslVerify=true")))
    };
    format!(
        "GIT_ASKPASS= SSH_ASKPASS= {TRACES_OFF} RAYITO_GIT_PROTOCOL={} RAYITO_GIT_HOST={} \
git -c core.hooksPath=/dev/null -c http.sslVerify=true {scoped}-c credential.helper= -c {}",
        quote(&target.protocol),
        quote(&target.host),
        quote(&format!("credential.helper={HELPER}")),
    )
}

/// The end of a credentialed git command: the command's stdin (the
/// credentials) becomes descriptor 3, git's own stdin `/dev/null`.
pub(crate) const CREDENTIAL_FD: &str = " 3<&0 0</dev/null";

/// What the guard checks of a push or pull's remote: every URL git would
/// use for it (`remote get-url --all`, with `--push` for a push) must be
/// exactly the pinned one.
pub(crate) struct UrlCheck<'a> {
    pub(crate) remote: &'a str,
    pub(crate) push: bool,
    pub(crate) pinned: &'a str,
}

/// The guard a credentialed command runs in its own shell right before git
/// (the first word is `git`, so a failure names `git`): it exits
/// [`EXIT_REWRITE`] when the effective config (system, global and, with a
/// repository, local, includes followed) rewrites URLs, [`EXIT_TRANSPORT`]
/// when it sets a [`TRANSPORT_KEYS`] key, [`EXIT_MOVED`] when the remote's
/// URLs are not the pinned one; a failure of a check itself fails with its
/// own code. It prints nothing (git's answers go to `/dev/null`, the URLs
/// into a variable compared by the shell): nothing the sandbox controls is
/// parsed by the SDK. `GIT_SSL_NO_VERIFY` and `GIT_CURL_VERBOSE` are unset
/// (any value, even empty, turns them on).
pub(crate) fn guard(repo: Option<&str>, url: Option<&UrlCheck<'_>>) -> String {
    let keys = |regex: &str, code: i32| {
        let config = super::line::git(repo, &["config", "--get-regexp", regex]);
        format!(
            "{config} >/dev/null 2>&1; s=$?; [ $s = 0 ] && exit {code}; [ $s = 1 ] || exit $s; "
        )
    };
    let mut out = keys(REWRITE_KEYS, EXIT_REWRITE);
    out.push_str(&keys(TRANSPORT_KEYS, EXIT_TRANSPORT));
    if let (Some(repo), Some(check)) = (repo, url) {
        let mut args = vec!["remote", "get-url", "--all"];
        if check.push {
            args.push("--push");
        }
        args.extend(["--", check.remote]);
        let lookup = super::line::git(Some(repo), &args);
        out.push_str(&format!(
            "u=$({lookup} 2>/dev/null) || exit {EXIT_MOVED}; [ \"$u\" = {} ] || exit {EXIT_MOVED}; ",
            quote(check.pinned)
        ));
    }
    out.push_str("unset GIT_SSL_NO_VERIFY GIT_CURL_VERBOSE; ");
    out
}

/// The remote a push or pull without one would use: the current branch's
/// push remote, the default push remote (push only), the branch's remote,
/// else `origin`. Prints its name (sandbox text: the caller checks it).
pub(crate) fn remote_lookup(repo: &str, push: bool) -> String {
    let r = quote(repo);
    let push_first = if push {
        format!(
            "git -C {r} config --get \"branch.$b.pushRemote\" || \
git -C {r} config --get remote.pushDefault || "
        )
    } else {
        String::new()
    };
    format!(
        "b=$(git -C {r} symbolic-ref --short -q HEAD); {push_first}\
git -C {r} config --get \"branch.$b.remote\" || echo origin"
    )
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
        let p = git_prefix(&t, "https://h:8443/r.git");
        assert!(p.starts_with("GIT_ASKPASS= SSH_ASKPASS= GIT_TRACE=0 GIT_TRACE2=0 "));
        assert!(p.contains(
            " GIT_TRACE_REDACT=1 RAYITO_GIT_PROTOCOL='https' RAYITO_GIT_HOST='h:8443' \
git -c core.hooksPath=/dev/null -c http.sslVerify=true \
-c 'http.https://h:8443/r.git.sslVerify=true' -c credential.helper= -c '"
        ));
        assert!(!p.contains("RAYITO_GIT_CREDENTIAL") && !p.contains("$(cat)"));
        // The failed command's message names `git`, the first word that is
        // not an assignment.
        assert_eq!(crate::error::map::agent::program_name(&p), "git");
        let g = guard(
            Some("/r"),
            Some(&UrlCheck {
                remote: "origin",
                push: true,
                pinned: "https://h/r.git",
            }),
        );
        assert_eq!(crate::error::map::agent::program_name(&g), "git");
        assert!(
            g.contains("remote' 'get-url' '--all' '--push' '--' 'origin'"),
            "{g}"
        );
        assert!(
            g.contains("[ \"$u\" = 'https://h/r.git' ] || exit 87"),
            "{g}"
        );
    }

    /// The guard's key patterns, run by the host's git against planted
    /// configs: each transport key (URL-scoped or not) is found, ordinary
    /// keys are not.
    #[test]
    fn the_guard_patterns_find_every_planted_key() {
        let found = |key: &str, regex: &str| {
            let home = tempfile::tempdir().expect("tempdir");
            let git = |args: &[&str]| {
                std::process::Command::new("git")
                    .args(args)
                    .env("HOME", home.path())
                    .env("GIT_CONFIG_NOSYSTEM", "1")
                    .output()
                    .expect("git runs")
            };
            assert!(git(&["config", "--global", key, "x"]).status.success());
            git(&["config", "--get-regexp", regex]).status.success()
        };
        for key in [
            "http.proxy",
            "http.https://h.example/.proxy",
            "http.https://h.example.proxyAuthMethod",
            "http.sslVerify",
            "http.https://h.example/r.git.sslVerify",
            "http.sslCAInfo",
            "http.sslCAPath",
            "http.sslCert",
            "http.https://h.example.sslKey",
            "http.curloptResolve",
            "http.https://h.example.curloptResolve",
            "http.extraHeader",
            "http.https://*.example.extraHeader",
            "remote.origin.proxy",
            "remote.origin.vcs",
        ] {
            assert!(found(key, TRANSPORT_KEYS), "{key}");
        }
        for key in [
            "http.postBuffer",
            "user.name",
            "remote.origin.url",
            "remote.pushDefault",
            "url.https://h/.insteadOf",
        ] {
            assert!(!found(key, TRANSPORT_KEYS), "{key}");
        }
        assert!(found("url.https://h/.pushInsteadOf", REWRITE_KEYS));
    }

    /// docs/git.md transcribes the guard's patterns and the traces turned
    /// off.
    #[test]
    fn docs_transcribe_the_guard() {
        let doc = include_str!("../../docs/git.md");
        for pattern in [REWRITE_KEYS, TRANSPORT_KEYS] {
            assert!(
                doc.contains(&format!("`{pattern}`")) || doc.contains(&format!("'{pattern}'")),
                "docs/git.md lacks {pattern}"
            );
        }
        for assignment in TRACES_OFF.split_whitespace() {
            let name = assignment.split('=').next().unwrap_or("");
            let listed = doc.contains(&format!("`{name}`")) || name.starts_with("GIT_TRACE_");
            assert!(listed, "docs/git.md lacks {name}");
        }
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
    /// `sh -c script` with `$HELPER`, `$FD3` (a file holding `fd3`), a
    /// clean home and the helper's expected target `https` /
    /// `h.example:8443`.
    fn helper_shell(home: &tempfile::TempDir, script: &str, fd3: &str) -> std::process::Command {
        let file = home.path().join("fd3");
        std::fs::write(&file, fd3).expect("write");
        let mut cmd = std::process::Command::new("sh");
        cmd.arg("-c")
            .arg(script)
            .env("HELPER", HELPER)
            .env("FD3", &file)
            .env("HOME", home.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_ASKPASS", "")
            .env("SSH_ASKPASS", "")
            .env("RAYITO_GIT_PROTOCOL", "https")
            .env("RAYITO_GIT_HOST", "h.example:8443");
        cmd
    }

    fn fill(protocol: &str, host: &str, credential: &str) -> Option<String> {
        let home = tempfile::tempdir().expect("tempdir");
        let script = "exec git -c credential.helper= -c \"credential.helper=$HELPER\" \
credential fill 3<\"$FD3\"";
        let mut child = helper_shell(&home, script, &format!("{credential}\n"))
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

    /// Two helper calls of one command share descriptor 3: the first
    /// drains it, the second (a later child of git) gets nothing.
    #[test]
    fn the_first_answer_drains_the_descriptor() {
        let home = tempfile::tempdir().expect("tempdir");
        let fill = "printf 'protocol=https\\nhost=h.example:8443\\n\\n' | \
git -c credential.helper= -c \"credential.helper=$HELPER\" credential fill";
        let script = format!("{{ {fill}; echo --; {fill}; }} 3<\"$FD3\"");
        let out = helper_shell(&home, &script, "bob\npw\n")
            .output()
            .expect("sh runs");
        let out = String::from_utf8_lossy(&out.stdout);
        let (first, second) = out.split_once("--").expect("both ran");
        assert!(first.contains("password=pw"), "{out}");
        assert!(!second.contains("pw"), "{out}");
    }
}
