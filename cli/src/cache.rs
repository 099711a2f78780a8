//! The CLI's cache directory: sandbox access tokens (one file per sandbox,
//! mode 0600) and the local-backend daemon's state.
//!
//! `RAYITO_CACHE_DIR`, else `$XDG_CACHE_HOME/rayito`, else `~/.cache/rayito`.

use std::fs;
use std::io::{self, Write as _};
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::PathBuf;

/// Overrides the cache directory (tests, several accounts side by side).
pub const CACHE_DIR_ENV: &str = "RAYITO_CACHE_DIR";

/// The cache directory (not created).
pub fn dir() -> PathBuf {
    if let Some(dir) = std::env::var_os(CACHE_DIR_ENV).filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(xdg) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(xdg).join("rayito");
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join(".cache").join("rayito")
}

/// Creates `path` (and parents) readable by the owner only.
pub fn private_dir(path: &std::path::Path) -> io::Result<()> {
    fs::create_dir_all(path)?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o700))
}

fn tokens_dir() -> PathBuf {
    dir().join("tokens")
}

/// Where the token of `sandbox_id` is kept. Sandbox ids are checked by the
/// SDK before any I/O; a separator would still never leave the directory.
pub fn token_path(sandbox_id: &str) -> PathBuf {
    tokens_dir().join(sandbox_id.replace(['/', '\\'], "_"))
}

/// Stores the access token of `sandbox_id`, mode 0600 from the start (the
/// file is never readable by others, not even for a moment).
///
/// # Errors
/// The filesystem's.
pub fn save_token(sandbox_id: &str, token: &str) -> io::Result<PathBuf> {
    private_dir(&tokens_dir())?;
    let path = token_path(sandbox_id);
    let tmp = path.with_extension("tmp");
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(token.as_bytes())?;
    file.sync_all()?;
    fs::rename(&tmp, &path)?;
    Ok(path)
}

/// The stored access token of `sandbox_id`, if any.
pub fn load_token(sandbox_id: &str) -> Option<String> {
    fs::read_to_string(token_path(sandbox_id))
        .ok()
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
}

/// Forgets the token of `sandbox_id` (no error when there was none).
pub fn remove_token(sandbox_id: &str) {
    let _ = fs::remove_file(token_path(sandbox_id));
}
