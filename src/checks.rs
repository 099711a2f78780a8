//! Checks of the arguments a caller passes to a sandbox call, made where the
//! caller passes them and before any I/O, so that a bad value is an
//! `InvalidArgument` naming the argument instead of an agent failure.
//!
//! Every reason text is a constant here; `docs/errors.md` ("Arguments refused
//! before any I/O") transcribes [`REASONS`] and a test keeps the two in step.
//! No reason ever quotes the value (it may be a secret).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::error::SandboxError;

/// The sandbox user's home: relative paths and cwds are relative to it.
pub(crate) const HOME: &str = "/home/user";
/// The kernel's limit on one argument or environment string
/// (`MAX_ARG_STRLEN`, 128 KiB), its terminating NUL included.
pub(crate) const MAX_ARG_BYTES: usize = 128 * 1024 - 1;
/// The agent's limit on the source of one code cell (1 MiB).
pub(crate) const MAX_CODE_BYTES: usize = 1024 * 1024;
/// The longest a sandbox can live (28,800 s): a command or cell timeout
/// above it can never fire, so it is sent as "no limit".
pub(crate) const LONGEST_TIMEOUT: Duration = Duration::from_secs(28_800);

/// A timeout the caller sets, refused when zero (it would fail every call
/// it bounds): `InvalidArgument` naming `argument`.
pub(crate) fn positive_duration(
    argument: &'static str,
    value: Duration,
) -> Result<(), SandboxError> {
    if value.is_zero() {
        return Err(SandboxError::invalid_argument(
            argument,
            format!(
                "{} must be positive; pass a positive duration",
                argument.replace('_', " ")
            ),
        ));
    }
    Ok(())
}

/// The reasons of a validator: one `(argument, reason)` constant each, and
/// `REASONS`, all of them in documentation order (the docs test reads it).
macro_rules! reasons {
    ($( $name:ident = $argument:literal => $text:literal; )+) => {
        $( pub(crate) const $name: (&str, &str) = ($argument, $text); )+
        /// Every reason, in documentation order: (argument, reason).
        #[cfg_attr(not(test), allow(dead_code, reason = "read by the docs test"))]
        pub(crate) const REASONS: &[(&str, &str)] = &[$($name),+];
    };
}
// Used by path from transfer/staging.rs (feature `s3`); a build without
// it uses the macro only here, by its textual scope.
#[cfg_attr(not(feature = "s3"), allow(unused_imports))]
pub(crate) use reasons;

reasons! {
    CMD_NUL = "cmd" =>
        "the command contains a NUL character; pass a command without NUL";
    CMD_TOO_LONG = "cmd" =>
        "the command is longer than the kernel's limit of 131,071 bytes for one argument; write the script to a file and run the file";
    ENV_NAME = "envs" =>
        "an env name is empty, too long or contains a control character or '='; pass names of 1 to 256 printable characters";
    ENV_VALUE_NUL = "envs" =>
        "an env value contains a NUL character; pass values without NUL";
    ENV_TOO_LONG = "envs" =>
        "an env name and value are longer than the kernel's limit of 131,071 bytes for one environment string; pass a shorter value or write it to a file";
    CWD_NUL = "cwd" =>
        "the working directory contains a NUL character; pass a path without NUL";
    CWD_EMPTY_CONTEXT = "cwd" =>
        "the working directory is empty; pass a path, absolute or relative to /home/user";
    USER_BAD = "user" =>
        "the user name is empty or contains a NUL character; pass a user name, or none for the default user";
    PATH_NUL = "path" =>
        "the path contains a NUL character; pass a path without NUL";
    PATH_EMPTY = "path" =>
        "the path is empty; pass a path, absolute or relative to /home/user";
    PATH_DIR = "path" =>
        "the path ends with '/', which names a directory; pass the path of the file to write";
    MODE_RANGE = "mode" =>
        "the mode is above 0o7777; pass permission bits from 0 to 0o7777 (0o644 by default)";
    METADATA_KEYS = "metadata" =>
        "more than 64 keys; pass at most 64";
    METADATA_KEY = "metadata" =>
        "a key is empty, longer than 255 characters or not made of HTTP token characters (RFC 9110: letters, digits and 15 symbols); pass keys of letters, digits, '-', '_' or '.'";
    METADATA_VALUE = "metadata" =>
        "a value holds a character that is not printable ASCII (0x20 to 0x7E); pass printable ASCII values";
    METADATA_KEY_CASE = "metadata" =>
        "two keys are equal once lowercased (keys are stored lowercased); pass distinct keys";
    METADATA_TOO_LARGE = "metadata" =>
        "the keys and values take more than 4000 bytes, counting the prefix user.rayito. of each key; pass less metadata";
    SOURCE_BAD = "source" =>
        "the source path is empty or contains a NUL character; pass a path, absolute or relative to /home/user";
    DESTINATION_BAD = "destination" =>
        "the destination path is empty or contains a NUL character; pass a path, absolute or relative to /home/user";
    CODE_TOO_LARGE = "code" =>
        "the code is larger than the agent's limit of 1 MiB for one cell; split it into smaller cells";
    CONTEXT_ID_BAD = "context_id" =>
        "the context id is empty or contains a NUL character; pass the id create_code_context returned";
    ENDPOINT_URL_BAD = "endpoint_url" =>
        "the endpoint URL must be an absolute http:// or https:// URL with a host; pass the endpoint's URL";
    S3_ENDPOINT_URL_BAD = "s3_endpoint_url" =>
        "the S3 endpoint URL must be an absolute http:// or https:// URL with a host; pass the S3 endpoint's URL";
    REGION_BAD = "region" =>
        "the AWS region must be labels of 1 to 63 letters, digits or '-' separated by '.', not starting with '-' (like us-east-1); pass a region name";
    LANGUAGE_BAD = "language" =>
        "the language name is empty or contains a NUL character; pass python, bash, javascript or typescript";
    SIZE_UNKNOWN = "size" =>
        "unknown size; pass one of 512mb, 1gb, 2gb, 4gb, 8gb";
    SIZE_ZERO = "size" =>
        "a size's memory must be at least 1 MiB; pass 512 to 8192 MiB or a size name";
    SIZE_TOO_LARGE = "size" =>
        "the largest size is 8gb (8192 MiB); pass at most 8192 MiB";
    SIZE_WITH_ARN = "size" =>
        "a size picks the image <template>-<size> by name, and the template is an image ARN; pass the template's name, or the sized image's ARN without a size";
}

/// The refusal of a [`REASONS`] entry.
pub(crate) fn refuse((argument, reason): (&'static str, &'static str)) -> SandboxError {
    SandboxError::invalid_argument(argument, reason)
}

/// A command line for `bash -l -c`: no NUL, within one argument's limit.
pub(crate) fn command(cmd: &str) -> Result<(), SandboxError> {
    if cmd.contains('\0') {
        return Err(refuse(CMD_NUL));
    }
    if cmd.len() > MAX_ARG_BYTES {
        return Err(refuse(CMD_TOO_LONG));
    }
    Ok(())
}

/// Environment variables of one call: the builder's rules (names of 1 to
/// 256 printable characters without `=`, values without NUL), and each
/// `NAME=value` string within the kernel's limit.
pub(crate) fn envs(envs: &BTreeMap<String, String>) -> Result<(), SandboxError> {
    for (name, value) in envs {
        let bad_name = name.is_empty()
            || name.chars().count() > 256
            || name.chars().any(char::is_control)
            || name.contains('=');
        if bad_name {
            return Err(refuse(ENV_NAME));
        }
        if value.contains('\0') {
            return Err(refuse(ENV_VALUE_NUL));
        }
        if name.len() + 1 + value.len() > MAX_ARG_BYTES {
            return Err(refuse(ENV_TOO_LONG));
        }
    }
    Ok(())
}

/// A working directory: no NUL; a relative one is taken relative to
/// `/home/user`, like relative file paths. An empty one means the default.
pub(crate) fn cwd(cwd: Option<&str>) -> Result<Option<String>, SandboxError> {
    match cwd {
        None | Some("") => Ok(None),
        Some(c) if c.contains('\0') => Err(refuse(CWD_NUL)),
        Some(c) if c.starts_with('/') => Ok(Some(c.to_owned())),
        Some(c) => Ok(Some(format!("{HOME}/{c}"))),
    }
}

/// A code context's working directory: as [`cwd`], but an empty one is
/// refused (the caller asked for one).
pub(crate) fn context_cwd(value: Option<&str>) -> Result<Option<String>, SandboxError> {
    if value == Some("") {
        return Err(refuse(CWD_EMPTY_CONTEXT));
    }
    cwd(value)
}

/// A user name: non-empty, no NUL (an empty one means the default user).
pub(crate) fn user(user: Option<&str>) -> Result<Option<String>, SandboxError> {
    match user {
        None | Some("") => Ok(None),
        Some(u) if u.contains('\0') => Err(refuse(USER_BAD)),
        Some(u) => Ok(Some(u.to_owned())),
    }
}

/// A filesystem path: non-empty, no NUL.
pub(crate) fn path(path: &str) -> Result<(), SandboxError> {
    if path.is_empty() {
        return Err(refuse(PATH_EMPTY));
    }
    if path.contains('\0') {
        return Err(refuse(PATH_NUL));
    }
    Ok(())
}

/// The path of a file to write: as [`path`], and not ending with `/` (that
/// names a directory; the agent would create a file without the slash).
pub(crate) fn file_path(value: &str) -> Result<(), SandboxError> {
    path(value)?;
    if value.ends_with('/') {
        return Err(refuse(PATH_DIR));
    }
    Ok(())
}

/// Both paths of a rename.
pub(crate) fn rename(source: &str, destination: &str) -> Result<(), SandboxError> {
    let bad = |p: &str| p.is_empty() || p.contains('\0');
    if bad(source) {
        return Err(refuse(SOURCE_BAD));
    }
    if bad(destination) {
        return Err(refuse(DESTINATION_BAD));
    }
    Ok(())
}

/// A code cell: within the agent's 1 MiB limit.
pub(crate) fn code(code: &str) -> Result<(), SandboxError> {
    if code.len() > MAX_CODE_BYTES {
        return Err(refuse(CODE_TOO_LARGE));
    }
    Ok(())
}

/// A context id: non-empty, no NUL (the agent checks the rest).
pub(crate) fn context_id(id: &str) -> Result<(), SandboxError> {
    if id.is_empty() || id.contains('\0') {
        return Err(refuse(CONTEXT_ID_BAD));
    }
    Ok(())
}

/// A language name: non-empty, no NUL (the agent checks the rest).
pub(crate) fn language(language: &str) -> Result<(), SandboxError> {
    if language.is_empty() || language.contains('\0') {
        return Err(refuse(LANGUAGE_BAD));
    }
    Ok(())
}

/// An endpoint override: an absolute `http`/`https` URL with a host (the
/// AWS SDK panics on an empty one).
pub(crate) fn endpoint_url(url: &str) -> Result<(), SandboxError> {
    if is_endpoint_url(url) {
        Ok(())
    } else {
        Err(refuse(ENDPOINT_URL_BAD))
    }
}

/// The same rule for S3's endpoint ([`AwsOptions::s3_endpoint_url`]).
///
/// [`AwsOptions::s3_endpoint_url`]: crate::AwsOptions::s3_endpoint_url
pub(crate) fn s3_endpoint_url(url: &str) -> Result<(), SandboxError> {
    if is_endpoint_url(url) {
        Ok(())
    } else {
        Err(refuse(S3_ENDPOINT_URL_BAD))
    }
}

fn is_endpoint_url(url: &str) -> bool {
    url.parse::<http::Uri>().is_ok_and(|uri| {
        matches!(uri.scheme_str(), Some("http" | "https"))
            && uri.host().is_some_and(|h| !h.is_empty())
    })
}

/// An AWS region, as the AWS SDK's endpoint rules require it (a host
/// label that may hold dots): checked here, because the AWS SDK fails such
/// a region while building the request, which used to read as a lost
/// connection worth retrying.
pub(crate) fn region(region: &str) -> Result<(), SandboxError> {
    let label_ok = |label: &str| {
        (1..=63).contains(&label.len())
            && !label.starts_with('-')
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    if region.split('.').all(label_ok) {
        Ok(())
    } else {
        Err(refuse(REGION_BAD))
    }
}

/// A command or cell timeout as the agent gets it, and the client's
/// deadline over the whole stream (the timeout plus `slack`).
///
/// `None` means no limit (0 on the wire, no client deadline). The rule for
/// large values: a timeout above 28,800 s (the longest a sandbox lives) can
/// never fire, so it is sent as no limit too; nothing overflows.
pub(crate) fn operation_timeout(
    timeout: Option<Duration>,
    slack: Duration,
) -> (u64, Option<Duration>) {
    match timeout {
        Some(t) if t <= LONGEST_TIMEOUT => {
            // At most 28,800,000 ms: always fits.
            let ms = u64::try_from(t.as_millis()).unwrap_or(u64::MAX).max(1);
            (ms, Some(t.saturating_add(slack)))
        }
        _ => (0, None),
    }
}

/// `base` plus one `per_mib` for every whole MiB of `bytes`, saturating.
pub(crate) fn size_deadline(base: Duration, per_mib: Duration, bytes: u64) -> Duration {
    let mib = u32::try_from(bytes / (1024 * 1024)).unwrap_or(u32::MAX);
    base.saturating_add(per_mib.saturating_mul(mib))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = include_str!("../docs/errors.md");

    #[test]
    fn every_reason_is_in_docs_errors_md() {
        let start = DOC
            .find("## Arguments refused before any I/O")
            .expect("docs/errors.md has the arguments section");
        let rows: Vec<(String, String)> = DOC[start..]
            .lines()
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| l.starts_with('|'))
            .skip(2)
            .map(|l| {
                let cells: Vec<&str> = l.trim().trim_matches('|').split(" | ").collect();
                (
                    cells[0].trim().trim_matches('`').to_owned(),
                    cells[1].trim().trim_matches('`').to_owned(),
                )
            })
            .collect();
        let expected: Vec<(String, String)> = REASONS
            .iter()
            .map(|(a, r)| ((*a).to_owned(), (*r).to_owned()))
            .collect();
        assert_eq!(rows, expected);
    }

    #[test]
    fn refusals_render_exactly() {
        let err = command("a\0b").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid cmd: the command contains a NUL character; pass a command without NUL"
        );
        let err = file_path("dir/").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid path: the path ends with '/', which names a directory; pass the path of the file to write"
        );
        let err = code(&"x".repeat(MAX_CODE_BYTES + 1)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid code: the code is larger than the agent's limit of 1 MiB for one cell; split it into smaller cells"
        );
        assert!(code(&"x".repeat(MAX_CODE_BYTES)).is_ok());
        assert!(command(&"x".repeat(MAX_ARG_BYTES)).is_ok());
        assert_eq!(
            command(&"x".repeat(MAX_ARG_BYTES + 1))
                .unwrap_err()
                .to_string(),
            "invalid cmd: the command is longer than the kernel's limit of 131,071 bytes for one argument; write the script to a file and run the file"
        );
    }

    #[test]
    fn relative_cwds_are_under_home() {
        assert_eq!(
            cwd(Some("work")).unwrap().as_deref(),
            Some("/home/user/work")
        );
        assert_eq!(cwd(Some("/tmp")).unwrap().as_deref(), Some("/tmp"));
        assert_eq!(cwd(Some("")).unwrap(), None);
        assert!(context_cwd(Some("")).is_err());
    }

    #[test]
    fn timeouts_saturate_to_no_limit() {
        let slack = Duration::from_secs(5);
        assert_eq!(operation_timeout(None, slack), (0, None));
        assert_eq!(operation_timeout(Some(Duration::MAX), slack), (0, None));
        assert_eq!(
            operation_timeout(Some(LONGEST_TIMEOUT), slack),
            (28_800_000, Some(LONGEST_TIMEOUT + slack))
        );
        assert_eq!(
            operation_timeout(Some(Duration::from_nanos(1)), slack),
            (1, Some(slack + Duration::from_nanos(1)))
        );
        assert_eq!(
            size_deadline(Duration::MAX, Duration::from_secs(1), u64::MAX),
            Duration::MAX
        );
    }
}
