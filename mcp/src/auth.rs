//! `--http`'s bearer token: every request must carry
//! `Authorization: Bearer <token>`, or it gets 401 with
//! `WWW-Authenticate: Bearer`. Loopback is shared by every local user, and
//! the Host and Origin checks only stop browsers: without the token another
//! user's `curl` could run code under the owner's AWS identity.
//!
//! The token is `RAYITO_MCP_TOKEN` when set (at least 32 characters), or
//! 32 random bytes (hex) made at start and written to a file only this user
//! can read, whose path (never the token) is printed on stderr. The token
//! is compared in constant time and never logged.

use std::fs::{DirBuilder, OpenOptions};
use std::io::{Read as _, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use subtle::ConstantTimeEq as _;

/// The variable that gives the token.
pub const TOKEN_ENV: &str = "RAYITO_MCP_TOKEN";
/// The fewest characters of a given token.
pub const MIN_TOKEN_CHARS: usize = 32;
/// The refusal of a short or unprintable `RAYITO_MCP_TOKEN`.
pub const BAD_TOKEN: &str =
    "invalid RAYITO_MCP_TOKEN: at least 32 printable ASCII characters, no spaces";
/// The body of a 401.
pub const UNAUTHORIZED: &str =
    "Unauthorized: send the server's bearer token (Authorization: Bearer <token>)";
/// The `WWW-Authenticate` header of a 401.
pub const CHALLENGE: &str = "Bearer realm=\"rayito-mcp\"";

/// The token requests must carry. Its Debug never shows it.
#[derive(Clone)]
pub struct Token(Arc<str>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token([redacted])")
    }
}

impl Token {
    /// The token of `RAYITO_MCP_TOKEN`'s value.
    ///
    /// # Errors
    /// [`BAD_TOKEN`] for a value too short or with other characters.
    pub fn given(value: &str) -> Result<Token, &'static str> {
        let ok = value.len() >= MIN_TOKEN_CHARS && value.bytes().all(|b| b.is_ascii_graphic());
        if ok {
            Ok(Token(value.into()))
        } else {
            Err(BAD_TOKEN)
        }
    }

    /// 32 random bytes from the kernel, as hex.
    ///
    /// # Errors
    /// The random source cannot be read.
    pub fn random() -> std::io::Result<Token> {
        let mut bytes = [0u8; 32];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Ok(Token(hex.into()))
    }

    /// Whether an `Authorization` header value carries this token (scheme
    /// case-insensitive, the token compared in constant time).
    pub fn accepts(&self, authorization: &[u8]) -> bool {
        let Some((scheme, rest)) = authorization.split_at_checked(7) else {
            return false;
        };
        if !scheme.eq_ignore_ascii_case(b"bearer ") {
            return false;
        }
        let presented = rest.trim_ascii();
        bool::from(presented.ct_eq(self.0.as_bytes()))
    }

    /// The token itself, to write to the token file.
    fn expose(&self) -> &str {
        &self.0
    }
}

/// The file holding a generated token: a private directory (0700) with a
/// `token` file (0600) in the temporary directory, removed when dropped.
#[derive(Debug)]
pub struct TokenFile {
    dir: PathBuf,
    file: PathBuf,
}

impl TokenFile {
    /// Writes `token` to a new private file under `parent`.
    ///
    /// # Errors
    /// The directory or the file cannot be made or written.
    pub fn write(parent: &Path, token: &Token) -> std::io::Result<TokenFile> {
        let name = Token::random()?;
        let dir = parent.join(format!("rayito-mcp-{}", &name.0[..16]));
        DirBuilder::new().mode(0o700).create(&dir)?;
        let file = dir.join("token");
        let written = (|| {
            let mut out = OpenOptions::new()
                .write(true)
                .create_new(true)
                // create_new: never through a link or over a planted file.
                .mode(0o600)
                .open(&file)?;
            out.write_all(token.expose().as_bytes())?;
            out.write_all(b"\n")?;
            out.sync_all()
        })();
        let made = TokenFile { dir, file };
        written.map(|()| made)
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.file
    }
}

impl Drop for TokenFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.file);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// The middleware: 401 unless the request carries the token.
pub async fn require(State(token): State<Token>, request: Request, next: Next) -> Response {
    let carried = request
        .headers()
        .get_all(header::AUTHORIZATION)
        .iter()
        .any(|value| token.accepts(value.as_bytes()));
    if carried {
        return next.run(request).await;
    }
    let mut response = (StatusCode::UNAUTHORIZED, UNAUTHORIZED).into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static(CHALLENGE),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_token_is_accepted() {
        let token = Token::given(&"a".repeat(32)).unwrap();
        assert!(token.accepts(format!("Bearer {}", "a".repeat(32)).as_bytes()));
        assert!(token.accepts(format!("bearer  {} ", "a".repeat(32)).as_bytes()));
        for wrong in [
            String::new(),
            "Bearer".to_owned(),
            "Bearer ".to_owned(),
            format!("Bearer {}", "a".repeat(31)),
            format!("Bearer {}", "a".repeat(33)),
            format!("Basic {}", "a".repeat(32)),
            format!("Bearer {}b", "a".repeat(31)),
        ] {
            assert!(!token.accepts(wrong.as_bytes()), "{wrong}");
        }
        assert_eq!(Token::given("short").unwrap_err(), BAD_TOKEN);
        assert_eq!(Token::given(&" ".repeat(40)).unwrap_err(), BAD_TOKEN);
        assert_eq!(format!("{token:?}"), "Token([redacted])");
    }

    #[test]
    fn the_token_file_is_private_and_goes_when_dropped() {
        use std::os::unix::fs::PermissionsExt as _;
        let parent = tempfile::tempdir().unwrap();
        let token = Token::random().unwrap();
        assert_eq!(token.expose().len(), 64);
        let file = TokenFile::write(parent.path(), &token).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(file.path()), 0o600);
        assert_eq!(mode(file.path().parent().unwrap()), 0o700);
        assert_eq!(
            std::fs::read_to_string(file.path()).unwrap().trim(),
            token.expose()
        );
        let dir = file.path().parent().unwrap().to_owned();
        drop(file);
        assert!(!dir.exists());
    }
}
