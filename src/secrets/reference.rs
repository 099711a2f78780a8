//! Which secret to read ([`SecretRef`]) and the checks of names, prefixes
//! and ARNs that run before any call.
//!
//! A secret's name is a confidential selector (it can say whose key it is
//! and for what): no check here ever quotes it, and `SecretRef`'s `Debug`
//! prints only lengths and which version selector is set.

use std::fmt;

use crate::error::SandboxError;
pub use crate::secret::SecretRef;

/// The name prefix of the store and the cache unless set otherwise.
pub const DEFAULT_PREFIX: &str = "rayito/";
/// The version stage read when a reference names no version.
pub const AWSCURRENT: &str = "AWSCURRENT";
/// The longest secret name Secrets Manager takes (prefix included).
pub(crate) const MAX_NAME_CHARS: usize = 512;
/// The longest ARN accepted (Secrets Manager's `SecretId` limit).
pub(crate) const MAX_ARN_CHARS: usize = 2_048;
/// Secrets of the lifecycle-event webhooks: never read or written through
/// the store or the cache (their own feature owns them).
const WEBHOOKS: &str = "rayito/webhooks/";
/// Secrets Manager's `VersionId`: 32 to 64 characters.
const MAX_VERSION_ID_CHARS: usize = 64;
/// Secrets Manager's staging labels: 1 to 256 characters.
const MAX_STAGE_CHARS: usize = 256;

/// What the secrets feature does with a [`SecretRef`] (the type is the
/// core's, in `crate::secret`: option types name it).
impl SecretRef {
    /// Checks the reference and resolves its `SecretId` under `prefix`:
    /// the validated id and the selector (a version id, or a stage,
    /// `AWSCURRENT` by default). No I/O.
    ///
    /// # Errors
    /// `InvalidArgument` naming `argument`, never quoting the name.
    pub(crate) fn resolve(
        &self,
        prefix: &str,
        argument: &'static str,
    ) -> Result<(String, Selector), SandboxError> {
        self.resolved(prefix)
            .map_err(|reason| SandboxError::invalid_argument(argument, reason))
    }

    /// [`SecretRef::resolve`] for the environment variable `variable` of a
    /// sandbox: the error (`InvalidArgument`, `secrets`) names the variable.
    ///
    /// # Errors
    /// `InvalidArgument` naming `secrets` and the variable.
    pub(crate) fn resolve_for_env(
        &self,
        prefix: &str,
        variable: &str,
    ) -> Result<(String, Selector), SandboxError> {
        self.resolved(prefix).map_err(|reason| {
            SandboxError::invalid_argument(
                "secrets",
                format!("the secret of environment variable {variable}: {reason}"),
            )
        })
    }

    fn resolved(&self, prefix: &str) -> Result<(String, Selector), &'static str> {
        let id = resolve_name(prefix, &self.name)?;
        let selector = match (&self.version_id, &self.version_stage) {
            (Some(_), Some(_)) => {
                return Err(
                    "a secret reference takes at most one of version_id and version_stage; set one",
                );
            }
            (Some(id), None) => {
                check_version_id(id)?;
                Selector::Id(id.clone())
            }
            (None, Some(stage)) => {
                check_stage(stage)?;
                Selector::Stage(stage.clone())
            }
            (None, None) => Selector::Stage(AWSCURRENT.to_owned()),
        };
        Ok((id, selector))
    }
}

/// Which version of a secret a read asks for.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) enum Selector {
    /// `VersionId`.
    Id(String),
    /// `VersionStage`.
    Stage(String),
}

impl fmt::Debug for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Id(_) => "Selector::Id",
            Self::Stage(_) => "Selector::Stage",
        })
    }
}

/// A character of a secret name (and of a prefix): `[A-Za-z0-9/_+=.@-]`.
fn name_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'/' | b'_' | b'+' | b'=' | b'.' | b'@' | b'-')
}

/// Checks a name prefix: up to 512 of `[A-Za-z0-9/_+=.@-]`, `""` allowed.
///
/// # Errors
/// `InvalidArgument` (`prefix`), not quoting it.
pub(crate) fn check_prefix(prefix: &str) -> Result<(), SandboxError> {
    if prefix_ok(prefix) {
        Ok(())
    } else {
        Err(SandboxError::invalid_argument(
            "prefix",
            "a secret name prefix is at most 512 of A-Z, a-z, 0-9 and / _ + = . @ -; pass a valid prefix or \"\"",
        ))
    }
}

fn prefix_ok(prefix: &str) -> bool {
    prefix.len() <= MAX_NAME_CHARS && prefix.bytes().all(name_char)
}

/// [`resolve_name`] with the refusal as `InvalidArgument` naming
/// `argument`.
///
/// # Errors
/// `InvalidArgument` naming `argument`, never quoting the name.
pub(crate) fn secret_id(
    prefix: &str,
    name: &str,
    argument: &'static str,
) -> Result<String, SandboxError> {
    check_prefix(prefix)?;
    resolve_name(prefix, name).map_err(|reason| SandboxError::invalid_argument(argument, reason))
}

/// The `SecretId` of `name` under `prefix`: an ARN as is (checked), else
/// `prefix + name` (1 to 512 of the name characters). Names under
/// `rayito/webhooks/` are refused either way.
///
/// # Errors
/// Why not (our own text, never quoting the name).
fn resolve_name(prefix: &str, name: &str) -> Result<String, &'static str> {
    if name.starts_with("arn:") {
        check_arn(name)?;
        return Ok(name.to_owned());
    }
    if !prefix_ok(prefix) {
        return Err("the prefix is not valid");
    }
    if name.is_empty() {
        return Err("a secret name is empty; pass a name or an ARN");
    }
    if !name.bytes().all(name_char) {
        return Err(
            "a secret name has a character outside A-Z, a-z, 0-9 and / _ + = . @ -; pass a valid name",
        );
    }
    let full = format!("{prefix}{name}");
    if full.len() > MAX_NAME_CHARS {
        return Err(
            "a secret name with its prefix is longer than 512 characters; pass a shorter name",
        );
    }
    refuse_webhooks(&full)?;
    Ok(full)
}

/// Checks an ARN given as a name: `arn:` and at most 2,048 printable ASCII
/// characters without spaces; never one of the webhook secrets.
fn check_arn(arn: &str) -> Result<(), &'static str> {
    let ok = arn.len() <= MAX_ARN_CHARS
        && arn.bytes().all(|b| name_char(b) || b == b':')
        && arn.split(':').count() >= 7;
    if !ok {
        return Err(
            "a secret ARN is arn:<partition>:secretsmanager:<region>:<account>:secret:<name> (at most 2,048 characters); pass a valid ARN",
        );
    }
    match arn.split_once(":secret:") {
        Some((_, name)) => refuse_webhooks(name),
        None => Err(
            "a secret ARN names a resource of type secret (\":secret:\"); pass a Secrets Manager secret's ARN",
        ),
    }
}

/// Refuses a full name under `rayito/webhooks/`.
fn refuse_webhooks(full_name: &str) -> Result<(), &'static str> {
    if full_name.starts_with(WEBHOOKS) {
        Err(
            "secrets under rayito/webhooks/ belong to lifecycle events and are never read or written here",
        )
    } else {
        Ok(())
    }
}

/// A `VersionId`: 1 to 64 of `A-Z a-z 0-9 -`.
fn check_version_id(id: &str) -> Result<(), &'static str> {
    if (1..=MAX_VERSION_ID_CHARS).contains(&id.len())
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        Ok(())
    } else {
        Err("a version_id is 1 to 64 of A-Z, a-z, 0-9 and -; pass a version id the store returned")
    }
}

/// A staging label: 1 to 256 of the name characters.
fn check_stage(stage: &str) -> Result<(), &'static str> {
    if (1..=MAX_STAGE_CHARS).contains(&stage.len()) && stage.bytes().all(name_char) {
        Ok(())
    } else {
        Err(
            "a version_stage is 1 to 256 of A-Z, a-z, 0-9 and / _ + = . @ -; pass a label such as AWSCURRENT",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CANARY: &str = "canary-name-7f3a";

    #[test]
    fn debug_shows_no_name_and_no_selector_value() {
        let reference = SecretRef::new(CANARY).version_id("v-canary-id-9");
        let debug = format!("{reference:?}");
        assert!(
            !debug.contains(CANARY) && !debug.contains("canary"),
            "{debug}"
        );
        assert_eq!(
            debug,
            "SecretRef { name_len: 16, arn: false, version_id: true, version_stage: false }"
        );
    }

    #[test]
    fn names_resolve_under_the_prefix_and_arns_as_they_are() {
        let (id, selector) = SecretRef::from("api/key")
            .resolve(DEFAULT_PREFIX, "r")
            .unwrap();
        assert_eq!(id, "rayito/api/key");
        assert_eq!(selector, Selector::Stage("AWSCURRENT".into()));
        let arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:other/key-AbCdEf";
        let (id, _) = SecretRef::from(arn).resolve(DEFAULT_PREFIX, "r").unwrap();
        assert_eq!(id, arn);
        let (id, selector) = SecretRef::from("k")
            .version_stage("AWSPREVIOUS")
            .resolve("", "r")
            .unwrap();
        assert_eq!(
            (id.as_str(), selector),
            ("k", Selector::Stage("AWSPREVIOUS".into()))
        );
    }

    #[test]
    fn bad_references_are_refused_naming_the_argument_never_the_name() {
        let long = "a".repeat(506);
        let cases: Vec<(SecretRef, &str)> = vec![
            (
                SecretRef::from(""),
                "a secret name is empty; pass a name or an ARN",
            ),
            (
                SecretRef::from("has space canary"),
                "a secret name has a character outside A-Z, a-z, 0-9 and / _ + = . @ -; pass a valid name",
            ),
            (
                SecretRef::from(long.as_str()),
                "a secret name with its prefix is longer than 512 characters; pass a shorter name",
            ),
            (
                SecretRef::from("webhooks/canary"),
                "secrets under rayito/webhooks/ belong to lifecycle events and are never read or written here",
            ),
            (
                SecretRef::from(
                    "arn:aws:secretsmanager:us-east-1:123456789012:secret:rayito/webhooks/canary",
                ),
                "secrets under rayito/webhooks/ belong to lifecycle events and are never read or written here",
            ),
            (
                SecretRef::from("arn:aws:s3:::canary"),
                "a secret ARN is arn:<partition>:secretsmanager:<region>:<account>:secret:<name> (at most 2,048 characters); pass a valid ARN",
            ),
            (
                SecretRef::from("k")
                    .version_id("a")
                    .version_stage("AWSCURRENT"),
                "a secret reference takes at most one of version_id and version_stage; set one",
            ),
            (
                SecretRef::from("k").version_id("bad id"),
                "a version_id is 1 to 64 of A-Z, a-z, 0-9 and -; pass a version id the store returned",
            ),
            (
                SecretRef::from("k").version_stage(""),
                "a version_stage is 1 to 256 of A-Z, a-z, 0-9 and / _ + = . @ -; pass a label such as AWSCURRENT",
            ),
        ];
        for (reference, reason) in cases {
            let err = reference.resolve(DEFAULT_PREFIX, "reference").unwrap_err();
            assert_eq!(err.kind(), crate::ErrorKind::InvalidArgument, "{reason}");
            assert!(err.to_string().contains(reason), "{err} / {reason}");
            assert!(err.to_string().contains("reference"), "{err}");
            assert!(!err.to_string().contains("canary"), "{err}");
        }
        // 512 characters with the prefix is the limit.
        assert!(
            SecretRef::from("a".repeat(505))
                .resolve(DEFAULT_PREFIX, "r")
                .is_ok()
        );
    }

    #[test]
    fn prefixes_are_checked() {
        assert!(check_prefix("").is_ok());
        assert!(check_prefix("team/a.b@c+d=e_f-g/").is_ok());
        assert!(check_prefix("bad prefix").is_err());
        assert!(check_prefix(&"p".repeat(513)).is_err());
    }
}
