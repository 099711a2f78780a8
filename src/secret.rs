//! Secret values (access tokens, proxy tokens) that must never be printed.
//!
//! `Secret` wraps `secrecy`'s `SecretString` (zeroed on drop): it has no
//! `Display`, and its `Debug` prints a fixed placeholder, so a token that
//! ends up inside a struct that derives `Debug` (or a `tracing` field)
//! cannot leak. Reading the value is an explicit call to [`Secret::expose`].

use std::fmt;
use std::sync::Arc;

use secrecy::{ExposeSecret as _, SecretString};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore as _;
use sha2::{Digest as _, Sha256};

/// A secret string: an access token or a proxy token.
///
/// Cheap to clone (the value is shared). `Debug` prints `Secret(***)`; there is
/// no `Display`. Call [`Secret::expose`] to read it, and only where it is sent.
#[derive(Clone)]
pub struct Secret(Arc<SecretString>);

impl Secret {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(Arc::new(SecretString::from(value.into())))
    }

    /// The secret value. Never log it or put it into an error.
    pub fn expose(&self) -> &str {
        self.0.expose_secret()
    }
}

/// Compared in constant time, so that a comparison cannot tell how much of
/// a token was right.
impl PartialEq for Secret {
    fn eq(&self, other: &Self) -> bool {
        use subtle::ConstantTimeEq as _;
        self.expose()
            .as_bytes()
            .ct_eq(other.expose().as_bytes())
            .into()
    }
}

impl Eq for Secret {}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self::new(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Self::new(value)
    }
}

/// Number of random bytes in a generated access token (docs/architecture.md, "One create, step by step").
const ACCESS_TOKEN_BYTES: usize = 32;
/// The agent refuses tokens that decode to fewer bytes than this.
const ACCESS_TOKEN_MIN_BYTES: usize = 16;

/// A fresh access token: 32 random bytes, base64url without padding (43 chars).
pub(crate) fn generate_access_token() -> Secret {
    let mut bytes = [0u8; ACCESS_TOKEN_BYTES];
    rand::rng().fill_bytes(&mut bytes);
    Secret::new(URL_SAFE_NO_PAD.encode(bytes))
}

/// Why an access token given by the caller was refused (no value inside).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TokenProblem {
    /// Not canonical base64url without padding.
    NotBase64Url,
    /// Decodes to fewer than 16 bytes.
    TooShort,
}

/// Decodes an access token to its bytes, checking the contract's rules.
pub(crate) fn decode_access_token(token: &Secret) -> Result<Vec<u8>, TokenProblem> {
    let bytes = URL_SAFE_NO_PAD
        .decode(token.expose())
        .map_err(|_| TokenProblem::NotBase64Url)?;
    if bytes.len() < ACCESS_TOKEN_MIN_BYTES {
        return Err(TokenProblem::TooShort);
    }
    Ok(bytes)
}

/// `hex(sha256(bytes))`: the only form of the access token that leaves the
/// client (inside the run payload, which AWS may log).
pub(crate) fn token_sha256_hex(token_bytes: &[u8]) -> String {
    let digest = Sha256::digest(token_bytes);
    let mut out = String::with_capacity(64);
    for byte in digest {
        out.push(char::from_digit(u32::from(byte >> 4), 16).unwrap_or('0'));
        out.push(char::from_digit(u32::from(byte & 0xf), 16).unwrap_or('0'));
    }
    out
}

/// `impl Debug` for a struct, from the list of what it shows: a bare field
/// name prints that field, `name = expr` prints `expr` in its place (a
/// secret's presence, a length, a redacted form), so what a struct's `Debug`
/// lets out reads at one glance and no field is printed by accident. `$o`
/// names the struct inside the expressions; a leading `non_exhaustive` ends
/// the output with `..`; `Type<T>` shows a struct generic over one `T: Debug`.
/// `non_exhaustive Type` alone shows nothing but the name (`Type { .. }`).
macro_rules! redacted_debug {
    (@value $o:ident $name:ident) => { &$o.$name };
    (@value $o:ident $name:ident = $e:expr) => { &$e };
    (@impl $ty:ident [$($g:ident)?] $o:ident [$($name:ident $(= $e:expr)?),+] $finish:ident) => {
        impl<$($g: ::std::fmt::Debug)?> ::std::fmt::Debug for $ty<$($g)?> {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                let $o = self;
                f.debug_struct(stringify!($ty))
                    $(.field(
                        stringify!($name),
                        $crate::secret::redacted_debug!(@value $o $name $(= $e)?),
                    ))+
                    .$finish()
            }
        }
    };
    (non_exhaustive $ty:ident $(<$g:ident>)? |$o:ident| $($name:ident $(= $e:expr)?),+ $(,)?) => {
        $crate::secret::redacted_debug!(
            @impl $ty [$($g)?] $o [$($name $(= $e)?),+] finish_non_exhaustive
        );
    };
    (non_exhaustive $ty:ident) => {
        impl ::std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.debug_struct(stringify!($ty)).finish_non_exhaustive()
            }
        }
    };
    ($ty:ident $(<$g:ident>)? |$o:ident| $($name:ident $(= $e:expr)?),+ $(,)?) => {
        $crate::secret::redacted_debug!(@impl $ty [$($g)?] $o [$($name $(= $e)?),+] finish);
    };
}
pub(crate) use redacted_debug;

/// Which secret a process reads (the secrets feature reads it; option
/// types and the sandbox builder only carry it).
#[cfg(feature = "secrets")]
mod reference {
    use std::fmt;

    /// A secret to read, by name (relative to the cache's prefix) or full ARN,
    /// with at most one of a version id or a version stage (none: the stage
    /// `AWSCURRENT`).
    ///
    /// `From<&str>` and `From<String>` make a reference to the current version.
    /// `Debug` never shows the name: names are confidential selectors.
    ///
    /// ```
    /// use rayito::secrets::SecretRef;
    /// let current = SecretRef::from("openai");
    /// let previous = SecretRef::new("openai").version_stage("AWSPREVIOUS");
    /// assert_ne!(current, previous);
    /// ```
    #[derive(Clone, PartialEq, Eq, Hash)]
    pub struct SecretRef {
        pub(crate) name: String,
        pub(crate) version_id: Option<String>,
        pub(crate) version_stage: Option<String>,
    }

    impl SecretRef {
        /// The current version (`AWSCURRENT`) of the secret `name`: a name
        /// relative to the prefix, or a full ARN (`arn:...`, used as is).
        pub fn new(name: impl Into<String>) -> Self {
            Self {
                name: name.into(),
                version_id: None,
                version_stage: None,
            }
        }

        crate::setters::setters! {
            /// Reads the version with this `VersionId` (for example
            /// `rayito-secret-version-00000000000000000002`). Setting both a
            /// version id and a version stage is refused when the reference is used.
            version_id: Some impl String;
            /// Reads the version holding this staging label (for example
            /// `AWSPREVIOUS`).
            version_stage: Some impl String;
        }

        /// The name (relative to the prefix) or ARN as given. Confidential:
        /// never log it.
        pub fn name(&self) -> &str {
            &self.name
        }
    }

    impl From<&str> for SecretRef {
        fn from(name: &str) -> Self {
            Self::new(name)
        }
    }

    impl From<String> for SecretRef {
        fn from(name: String) -> Self {
            Self::new(name)
        }
    }

    impl From<&SecretRef> for SecretRef {
        fn from(reference: &SecretRef) -> Self {
            reference.clone()
        }
    }

    // Lengths and which selector is set, never the name or the selector's
    // value.
    redacted_debug! {
        SecretRef |o| name_len = o.name.len(), arn = o.name.starts_with("arn:"),
        version_id = o.version_id.is_some(), version_stage = o.version_stage.is_some()
    }

    /// Environment variable -> secret reference.
    #[derive(Clone, Default, PartialEq, Eq)]
    pub(crate) struct SecretEnv(pub(crate) std::collections::BTreeMap<String, SecretRef>);

    // Variable names are not secret; the references are (names are
    // confidential selectors).
    impl fmt::Debug for SecretEnv {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_list().entries(self.0.keys()).finish()
        }
    }

    impl SecretEnv {
        pub(crate) fn insert(&mut self, variable: String, reference: SecretRef) {
            self.0.insert(variable, reference);
        }

        pub(crate) fn is_empty(&self) -> bool {
            self.0.is_empty()
        }
    }
}
#[cfg(feature = "secrets")]
pub(crate) use self::reference::SecretEnv;
#[cfg(feature = "secrets")]
pub use self::reference::SecretRef;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_value() {
        let secret = Secret::new("canary-value");
        assert_eq!(format!("{secret:?}"), "Secret(***)");
        assert_eq!(format!("{:?}", Some(secret)), "Some(Secret(***))");
    }

    #[test]
    fn generated_tokens_are_43_chars_and_decode_to_32_bytes() {
        let token = generate_access_token();
        assert_eq!(token.expose().len(), 43);
        assert_eq!(decode_access_token(&token).unwrap().len(), 32);
        assert_ne!(token, generate_access_token());
    }

    #[test]
    fn digest_is_of_the_bytes_not_the_string() {
        // The token "AAAA..." (22 chars) decodes to 16 zero bytes. The
        // payload carries sha256 of those bytes (a fixed vector), which
        // differs from sha256 of the 22-character string.
        let token = Secret::new("A".repeat(22));
        let bytes = decode_access_token(&token).unwrap();
        assert_eq!(bytes, [0u8; 16]);
        assert_eq!(
            token_sha256_hex(&bytes),
            "374708fff7719dd5979ec875d56cd2286f6d3cf7ec317a3b25632aab28ec37bb"
        );
        assert_ne!(
            token_sha256_hex(token.expose().as_bytes()),
            token_sha256_hex(&bytes)
        );
        // The empty input, the standard vector: the hex is lowercase and
        // full width.
        assert_eq!(
            token_sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn bad_tokens_are_refused() {
        assert_eq!(
            decode_access_token(&Secret::new("not base64!")),
            Err(TokenProblem::NotBase64Url)
        );
        assert_eq!(
            decode_access_token(&Secret::new("AAAA")),
            Err(TokenProblem::TooShort)
        );
    }
}
