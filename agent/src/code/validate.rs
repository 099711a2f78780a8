//! Checks on the caller's input, each answering the exact status of the
//! contract (docs/local.md, "Code").

use std::collections::HashMap;

use tonic::Status;

use super::messages;

/// Largest accepted cell source, in bytes (1 MiB).
pub const MAX_CODE_BYTES: usize = 1024 * 1024;

/// The kernels this agent can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Language {
    /// The Python driver (`agent/python/driver.py`).
    Python,
    /// A persistent bash process driven with sentinels.
    Bash,
    /// node with `agent/js/driver.js` (when node is on the sandbox PATH).
    JavaScript,
    /// node with `agent/js/driver.js`, types stripped by node itself
    /// (node 22.13 or newer).
    TypeScript,
}

impl Language {
    /// The name used on the wire (`ContextInfo.language`).
    pub fn as_str(self) -> &'static str {
        match self {
            Language::Python => "python",
            Language::Bash => "bash",
            Language::JavaScript => "javascript",
            Language::TypeScript => "typescript",
        }
    }

    /// The id of this language's default context.
    pub fn default_context_id(self) -> &'static str {
        match self {
            Language::Python => "default",
            Language::Bash => "default-bash",
            Language::JavaScript => "default-javascript",
            Language::TypeScript => "default-typescript",
        }
    }
}

/// Parses a language name; empty means Python (what rayito sends when unset).
///
/// A name that is not a short lower-case identifier is INVALID_ARGUMENT
/// without echo; a well-formed name with no kernel here is UNIMPLEMENTED and
/// names the (validated) language.
#[allow(clippy::result_large_err)]
pub fn language(name: &str) -> Result<Language, Status> {
    let name = name.to_ascii_lowercase();
    match name.as_str() {
        "" | "python" | "python3" => return Ok(Language::Python),
        "bash" => return Ok(Language::Bash),
        "javascript" | "js" | "node" => return Ok(Language::JavaScript),
        "typescript" | "ts" => return Ok(Language::TypeScript),
        _ => {}
    }
    let well_formed = name.len() <= 32
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-' | '+' | '.')
        });
    if well_formed {
        Err(Status::unimplemented(messages::language_not_installed(
            &name,
        )))
    } else {
        Err(Status::invalid_argument(messages::INVALID_LANGUAGE))
    }
}

/// A context id: 1 to 64 characters from `[A-Za-z0-9_-]`.
#[allow(clippy::result_large_err)]
pub fn context_id(id: &str) -> Result<(), Status> {
    let ok = (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    require(ok, messages::INVALID_CONTEXT_ID)
}

/// An execution id as `started` gives it: `exec-` and 16 hex digits.
#[allow(clippy::result_large_err)]
pub fn execution_id(id: &str) -> Result<(), Status> {
    let ok = id
        .strip_prefix("exec-")
        .is_some_and(|hex| hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_hexdigit()));
    require(ok, messages::INVALID_EXECUTION_ID)
}

/// A cell's source size.
#[allow(clippy::result_large_err)]
pub fn code(code: &str) -> Result<(), Status> {
    require(code.len() <= MAX_CODE_BYTES, messages::CODE_TOO_LARGE)
}

/// Environment names and values a process can actually receive.
#[allow(clippy::result_large_err)]
pub fn envs(envs: &HashMap<String, String>) -> Result<(), Status> {
    for (name, value) in envs {
        if name.is_empty() || name.contains('=') || name.contains('\0') {
            return Err(Status::invalid_argument(messages::INVALID_ENV_NAME));
        }
        if value.contains('\0') {
            return Err(Status::invalid_argument(messages::INVALID_ENV_VALUE));
        }
    }
    Ok(())
}

/// A context's working directory as a guest path: absolute, no `..`, no NUL.
#[allow(clippy::result_large_err)]
pub fn cwd(cwd: &str) -> Result<(), Status> {
    let clean =
        cwd.starts_with('/') && !cwd.contains('\0') && !cwd.split('/').any(|part| part == "..");
    require(clean, messages::CWD_NOT_ABSOLUTE)
}

/// INVALID_ARGUMENT with the contract's `message` unless `ok`.
#[allow(clippy::result_large_err)]
fn require(ok: bool, message: &'static str) -> Result<(), Status> {
    if ok {
        Ok(())
    } else {
        Err(Status::invalid_argument(message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    #[test]
    fn languages() {
        assert_eq!(language("").unwrap(), Language::Python);
        assert_eq!(language("Python").unwrap(), Language::Python);
        assert_eq!(language("bash").unwrap(), Language::Bash);
        assert_eq!(language("js").unwrap(), Language::JavaScript);
        assert_eq!(language("JavaScript").unwrap(), Language::JavaScript);
        assert_eq!(language("ts").unwrap(), Language::TypeScript);
        let err = language("ruby").unwrap_err();
        assert_eq!(err.code(), Code::Unimplemented);
        let err = language("no such; rm -rf").unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert_eq!(err.message(), "invalid language name");
    }

    #[test]
    fn context_ids() {
        assert!(context_id("ctx-0123456789ab").is_ok());
        assert!(context_id(&"a".repeat(64)).is_ok());
        assert!(context_id(&"a".repeat(65)).is_err());
        assert!(context_id("").is_err());
        assert!(context_id("a/b").is_err());
    }

    #[test]
    fn cwds() {
        assert!(cwd("/home/user").is_ok());
        assert!(cwd("home/user").is_err());
        assert!(cwd("/home/../etc").is_err());
    }
}
