//! The three secrets of one start: the token of the printed URL, the
//! session cookie's value it is exchanged for, and the CSRF value the page
//! sends back in a header on every POST. Each is 32 random bytes in hex,
//! compared in constant time; none is ever logged or put in a Debug.

use std::fmt;

use rand::RngCore as _;
use subtle::ConstantTimeEq as _;

/// The secrets of one start.
pub(crate) struct Secrets {
    start: String,
    session: String,
    csrf: String,
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secrets(..)")
    }
}

impl Secrets {
    /// Fresh secrets from the thread's CSPRNG.
    pub(crate) fn draw() -> Self {
        Self {
            start: random_hex(),
            session: random_hex(),
            csrf: random_hex(),
        }
    }

    pub(crate) fn start_token(&self) -> &str {
        &self.start
    }

    pub(crate) fn session(&self) -> &str {
        &self.session
    }

    pub(crate) fn csrf(&self) -> &str {
        &self.csrf
    }

    pub(crate) fn is_start_token(&self, candidate: &str) -> bool {
        same(&self.start, candidate)
    }

    pub(crate) fn is_session(&self, candidate: &str) -> bool {
        same(&self.session, candidate)
    }

    pub(crate) fn is_csrf(&self, candidate: &str) -> bool {
        same(&self.csrf, candidate)
    }
}

/// Constant time in the content (the length of every secret is public: 64).
fn same(secret: &str, candidate: &str) -> bool {
    secret.len() == candidate.len() && bool::from(secret.as_bytes().ct_eq(candidate.as_bytes()))
}

fn random_hex() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_secret_is_its_own() {
        let s = Secrets::draw();
        assert_eq!(s.start_token().len(), 64);
        assert!(s.is_start_token(s.start_token()));
        assert!(!s.is_start_token(s.session()));
        assert!(!s.is_session(s.csrf()));
        assert!(s.is_csrf(s.csrf()));
        assert!(!s.is_csrf(""));
        assert_eq!(format!("{s:?}"), "Secrets(..)");
    }
}
