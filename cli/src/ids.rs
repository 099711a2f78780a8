//! Which sandbox a command means: the id given, else `RAYITO_SANDBOX_ID`
//! (what `sandbox connect` exports); and a unique start of an id among the
//! sandboxes of this cache (`microvm-3f2a` or `3f2a`), as `docker` and
//! `git` take short ids. Only what looks like part of an id is completed
//! (`microvm-` and hex digits): any other text goes on as given, so that
//! the backend says what it knows of it.

use crate::commands::Failure;

/// The variable `sandbox connect` exports and an omitted id falls back to.
pub(crate) const SANDBOX_ID_ENV: &str = "RAYITO_SANDBOX_ID";

/// Sandbox ids start so (`microvm-` and a UUID's 36 characters).
const ID_PREFIX: &str = "microvm-";
/// The length of a UUID in the 8-4-4-4-12 form.
const UUID_LEN: usize = 36;
/// The most candidates an ambiguous or unknown prefix lists.
const MAX_LISTED: usize = 5;

/// A sandbox id argument that may be omitted when `RAYITO_SANDBOX_ID` is set.
#[derive(Debug, clap::Args)]
pub(crate) struct SandboxId {
    /// The sandbox id, or the start of one of this cache's sandboxes'
    /// ids (default: $RAYITO_SANDBOX_ID).
    #[arg(value_name = "ID")]
    id: Option<String>,
}

impl From<Option<String>> for SandboxId {
    fn from(id: Option<String>) -> Self {
        SandboxId { id }
    }
}

impl SandboxId {
    /// The id this argument names, for what the CLI does around the
    /// command (forgetting a gone sandbox's token): like [`Self::resolve`]
    /// but never failing (an ambiguous or unknown start stays as given;
    /// the command itself then says why).
    pub(crate) fn peek(&self) -> Option<String> {
        let given = self.id.clone().or_else(|| {
            std::env::var(SANDBOX_ID_ENV)
                .ok()
                .filter(|id| !id.is_empty())
        })?;
        Some(complete(&given).unwrap_or(given))
    }

    /// The whole id this argument names.
    ///
    /// # Errors
    /// A usage error when there is none, or the prefix is ambiguous or
    /// unknown.
    pub(crate) fn resolve(self) -> Result<String, Failure> {
        let given = match self.id {
            Some(id) => id,
            None => std::env::var(SANDBOX_ID_ENV)
                .ok()
                .filter(|id| !id.is_empty())
                .ok_or_else(|| {
                    Failure::Usage(format!(
                        "no sandbox id: pass one, or set {SANDBOX_ID_ENV} (eval \"$(rayito sandbox connect ID)\" does)"
                    ))
                })?,
        };
        complete(&given)
    }
}

/// The whole id `text` names: itself when it is a whole id, a cached
/// one, or nothing like an id; else the one cached id starting with it.
///
/// # Errors
/// A usage error listing (at most five of) the candidates when several
/// cached ids start with `text`, or none does.
pub(crate) fn complete(text: &str) -> Result<String, Failure> {
    if !is_partial_id(text) || crate::cache::load_token(text).is_some() {
        return Ok(text.to_owned());
    }
    let cached = cached_ids();
    let matches: Vec<&String> = cached
        .iter()
        .filter(|id| {
            id.starts_with(text)
                || id
                    .strip_prefix(ID_PREFIX)
                    .is_some_and(|u| u.starts_with(text))
        })
        .collect();
    match matches.as_slice() {
        [one] => Ok((*one).clone()),
        [] if cached.is_empty() => Err(Failure::Usage(format!(
            "no sandbox of this cache ({}) has an id starting with {text}: it holds none; pass a whole id",
            crate::cache::dir().display()
        ))),
        [] => Err(Failure::Usage(format!(
            "no sandbox of this cache has an id starting with {text}; its sandboxes: {}",
            listed(&cached.iter().collect::<Vec<_>>())
        ))),
        several => Err(Failure::Usage(format!(
            "the id prefix {text} is ambiguous: {} sandboxes of this cache start with it: {}; give more of the id",
            several.len(),
            listed(several)
        ))),
    }
}

/// Whether `text` is part of a sandbox id, short of a whole one:
/// `microvm-` or a start of it, or hex digits and dashes after it (or
/// alone), fewer than a UUID's.
fn is_partial_id(text: &str) -> bool {
    if text.is_empty() {
        return false;
    }
    if ID_PREFIX.starts_with(text) {
        return true;
    }
    let uuid = text.strip_prefix(ID_PREFIX).unwrap_or(text);
    uuid.len() < UUID_LEN && uuid.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

/// The ids of the sandboxes whose tokens this cache keeps, sorted.
pub(crate) fn cached_ids() -> Vec<String> {
    crate::cache::token_ids()
}

/// At most [`MAX_LISTED`] ids, comma-separated, and how many more.
fn listed(ids: &[&String]) -> String {
    let shown: Vec<&str> = ids.iter().take(MAX_LISTED).map(|id| id.as_str()).collect();
    let mut text = shown.join(", ");
    if ids.len() > MAX_LISTED {
        text.push_str(&format!(" and {} more", ids.len() - MAX_LISTED));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_parts_of_ids_are_completed() {
        for partial in [
            "micro",
            "microvm-",
            "microvm-3f2a",
            "3f2a",
            "3f2a-1b",
            "ABC",
        ] {
            assert!(is_partial_id(partial), "{partial}");
        }
        for other in [
            "",
            "garbage",
            "microvm-3f2a9c1e-0b1d-4e5f-8a9b-0c1d2e3f4a5b",
            "my-sandbox",
            "microvm-xyz",
        ] {
            assert!(!is_partial_id(other), "{other}");
        }
    }
}
