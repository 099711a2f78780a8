//! [`WriteOptions`]: owner, mode, compression and metadata of a write,
//! checked before any I/O, and the probe of an agent too old for some.

use std::collections::BTreeMap;

use crate::checks::{
    METADATA_KEY, METADATA_KEY_CASE, METADATA_KEYS, METADATA_TOO_LARGE, METADATA_VALUE, MODE_RANGE,
    refuse,
};
use crate::error::{GrpcCode, SandboxError};
use crate::pb;
use crate::sandbox::Sandbox;

/// The highest mode: permission bits with setuid, setgid and sticky.
pub(crate) const MODE_MAX: u32 = 0o7777;
/// What the agent stores before each key (and counts in the size limit).
const METADATA_PREFIX: &str = "user.rayito.";
const METADATA_MAX_KEYS: usize = 64;
const METADATA_MAX_KEY_CHARS: usize = 255;
const METADATA_MAX_BYTES: usize = 4000;

/// Options of [`Files::write_with`](super::Files::write_with),
/// [`Files::write_files_with`](super::Files::write_files_with) and
/// [`Files::write_stream_with`](super::Files::write_stream_with); the
/// default is what [`Files::write`](super::Files::write) does (the
/// sandbox's user, mode 0o644, uncompressed, no metadata).
///
/// A write with any option set always travels over gRPC, even with a
/// staging that would send its bytes through S3: that way every option
/// applies (the reference SDK ignores `gzip` on its staged writes).
#[derive(Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriteOptions {
    user: Option<String>,
    mode: Option<u32>,
    gzip: bool,
    metadata: BTreeMap<String, String>,
}

// Metadata values are the caller's data: key names only.
crate::secret::redacted_debug! {
    WriteOptions |o| user, mode = o.mode.map(|m| format!("{m:#o}")), gzip,
    metadata_keys = o.metadata.keys().collect::<Vec<_>>()
}

impl WriteOptions {
    /// The defaults (those of [`Files::write`](super::Files::write)).
    pub fn new() -> Self {
        Self::default()
    }

    crate::setters::setters! {
        /// The owner of the written files (and of the parents made for them);
        /// empty means the sandbox's default user. The local backend has one
        /// account, `user`: any other is refused by its agent.
        user: Some impl String;
        /// The mode of each written file, 0 to 0o7777 (default 0o644), set
        /// after the bytes are written and before the file appears.
        mode: Some u32;
        /// Sends the write stream gzip-compressed (`grpc-encoding: gzip`): for
        /// compressible data over a slow link. Needs an agent from 0.3.0.
        gzip: bool;
    }

    /// Adds a metadata entry to every written file (stored by the agent as
    /// the extended attribute `user.rayito.<key>`, returned in
    /// [`EntryInfo::metadata`](super::EntryInfo::metadata)). The set
    /// replaces the file's whole: a rewrite without metadata has none.
    /// Keys are 1 to 255 HTTP token characters, stored lowercased; values
    /// printable ASCII; at most 64 keys and 4,000 bytes counting the prefix
    /// of each. Needs an agent from 0.3.0.
    #[must_use]
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// These options with `user` (a view's, [`Files::as_user`](super::Files::as_user))
    /// when they name none.
    pub(crate) fn or_user(mut self, user: Option<&str>) -> Self {
        if self.user.as_deref().unwrap_or_default().is_empty()
            && let Some(user) = user
        {
            self.user = Some(user.to_owned());
        }
        self
    }

    /// Whether every option is the default (a plain write, which a staging
    /// may route through S3); an empty user is the default user.
    pub(crate) fn is_default(&self) -> bool {
        self.user.as_deref().unwrap_or_default().is_empty()
            && self.mode.is_none()
            && !self.gzip
            && self.metadata.is_empty()
    }

    /// Whether the write stream is compressed.
    pub(crate) fn gzipped(&self) -> bool {
        self.gzip
    }

    /// The options checked: `InvalidArgument` naming `mode`, `user` or
    /// `metadata`, before any I/O.
    pub(crate) fn checked(&self) -> Result<Checked, SandboxError> {
        if self.mode.is_some_and(|m| m > MODE_MAX) {
            return Err(refuse(MODE_RANGE));
        }
        let user = crate::checks::user(self.user.as_deref())?;
        let metadata = checked_metadata(&self.metadata)?;
        Ok(Checked {
            user,
            mode: self.mode,
            metadata,
        })
    }
}

/// What goes in each file's first message.
#[derive(Debug, Clone, Default)]
pub(crate) struct Checked {
    user: Option<String>,
    mode: Option<u32>,
    metadata: BTreeMap<String, String>,
}

impl Checked {
    /// The first message of a file: its path, owner, mode and metadata, and
    /// its first chunk.
    pub(crate) fn first(&self, path: String, chunk: bytes::Bytes) -> pb::WriteRequest {
        pb::WriteRequest {
            path: Some(path),
            user: self.user.as_ref().map(|username| pb::User {
                username: username.clone(),
            }),
            mode: self.mode,
            chunk,
            metadata: self
                .metadata
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }

    pub(crate) fn has_metadata(&self) -> bool {
        !self.metadata.is_empty()
    }
}

fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

/// The reference agent's rules for `WriteRequest.metadata`; keys come back
/// lowercased.
fn checked_metadata(
    metadata: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, SandboxError> {
    if metadata.len() > METADATA_MAX_KEYS {
        return Err(refuse(METADATA_KEYS));
    }
    let mut out = BTreeMap::new();
    let mut bytes = 0usize;
    for (key, value) in metadata {
        if key.is_empty()
            || key.chars().count() > METADATA_MAX_KEY_CHARS
            || !key.chars().all(is_token_char)
        {
            return Err(refuse(METADATA_KEY));
        }
        if !value.chars().all(|c| (' '..='~').contains(&c)) {
            return Err(refuse(METADATA_VALUE));
        }
        bytes += METADATA_PREFIX.len() + key.len() + value.len();
        if out
            .insert(key.to_ascii_lowercase(), value.clone())
            .is_some()
        {
            return Err(refuse(METADATA_KEY_CASE));
        }
    }
    if bytes > METADATA_MAX_BYTES {
        return Err(refuse(METADATA_TOO_LARGE));
    }
    Ok(out)
}

/// An agent built before 0.3.0 takes no compressed write and drops
/// metadata without a word: `GetTransfer("")` (the capability probe of
/// that version, NOT_FOUND on a newer agent) tells them apart before any
/// byte moves. Asked only for a write that needs it.
///
/// # Errors
/// `Unimplemented { feature: files.write(gzip) | files.write(metadata) }`
/// on an older agent; the probe's transport failures.
pub(crate) async fn require_agent_for(
    sandbox: &Sandbox,
    gzip: bool,
    checked: &Checked,
) -> Result<(), SandboxError> {
    let feature = match (gzip, checked.has_metadata()) {
        (true, _) => "files.write(gzip)",
        (false, true) => "files.write(metadata)",
        (false, false) => return Ok(()),
    };
    let probe = pb::GetTransferRequest {
        transfer_id: String::new(),
    };
    match sandbox
        .conn()
        .write_probe(probe, sandbox.request_timeout())
        .await
    {
        Ok(_) => Ok(()),
        Err(e) => match e.meta().grpc_code() {
            Some(GrpcCode::NotFound) => Ok(()),
            Some(GrpcCode::Unimplemented) => Err(SandboxError::unimplemented(
                feature,
                "the sandbox's agent predates it (needs agent 0.3.0 or later); use an image with a newer agent",
                Some("docs/files.md"),
            )),
            _ => Err(e),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argument_and_message(options: &WriteOptions) -> (String, String) {
        let err = options.checked().unwrap_err();
        match &err {
            SandboxError::InvalidArgument { argument, .. } => (
                argument.as_deref().unwrap_or_default().to_owned(),
                err.to_string(),
            ),
            other => panic!("not InvalidArgument: {other:?}"),
        }
    }

    #[test]
    fn mode_up_to_0o7777_passes_and_above_is_refused() {
        assert!(WriteOptions::new().mode(0o7777).checked().is_ok());
        assert!(WriteOptions::new().mode(0).checked().is_ok());
        let (argument, message) = argument_and_message(&WriteOptions::new().mode(0o10000));
        assert_eq!(argument, "mode");
        assert_eq!(
            message,
            "invalid mode: the mode is above 0o7777; pass permission bits from 0 to 0o7777 (0o644 by default)"
        );
    }

    #[test]
    fn metadata_rules_refuse_naming_metadata_and_never_quote() {
        let secret = "s3cr3t\u{7}";
        let cases = [
            WriteOptions::new().metadata("", "v"),
            WriteOptions::new().metadata("a b", "v"),
            WriteOptions::new().metadata("k", secret),
            WriteOptions::new().metadata("K", "1").metadata("k", "2"),
            (0..30).fold(WriteOptions::new(), |o, i| {
                o.metadata(format!("k{i}"), "x".repeat(200))
            }),
            (0..65).fold(WriteOptions::new(), |o, i| o.metadata(format!("k{i}"), "v")),
        ];
        let expected = [
            METADATA_KEY,
            METADATA_KEY,
            METADATA_VALUE,
            METADATA_KEY_CASE,
            METADATA_TOO_LARGE,
            METADATA_KEYS,
        ];
        for (options, (argument, reason)) in cases.iter().zip(expected) {
            let (got_argument, message) = argument_and_message(options);
            assert_eq!(got_argument, argument);
            assert_eq!(message, format!("invalid {argument}: {reason}"));
            assert!(!message.contains("s3cr3t"));
        }
        let ok = WriteOptions::new()
            .metadata("Owner", "ana")
            .checked()
            .unwrap();
        assert_eq!(ok.metadata.get("owner").map(String::as_str), Some("ana"));
    }

    #[test]
    fn debug_shows_metadata_keys_not_values() {
        let shown = format!("{:?}", WriteOptions::new().metadata("k", "hidden-value"));
        assert!(shown.contains("\"k\""), "{shown}");
        assert!(!shown.contains("hidden-value"), "{shown}");
    }
}
