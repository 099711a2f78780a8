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

/// Forgets the token of `sandbox_id` (no error when there was none), and
/// where it came from.
pub fn remove_token(sandbox_id: &str) {
    let _ = fs::remove_file(token_path(sandbox_id));
    let _ = fs::remove_file(local_marker(sandbox_id));
}

/// Beside the token of a sandbox of the local daemon: that daemon's pid.
/// Its sandboxes end with it, so a token of another daemon is of a
/// sandbox that is gone; and a token without it is of a sandbox on AWS,
/// which no answer of the local daemon says anything about.
fn local_marker(sandbox_id: &str) -> PathBuf {
    let mut name = token_path(sandbox_id).into_os_string();
    name.push(".local");
    PathBuf::from(name)
}

/// Records that `sandbox_id` runs on the local daemon of pid `daemon_pid`.
///
/// # Errors
/// The filesystem's.
pub fn mark_local(sandbox_id: &str, daemon_pid: i32) -> io::Result<()> {
    fs::write(local_marker(sandbox_id), daemon_pid.to_string())
}

/// Where a kept token's sandbox was created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// On AWS (or an endpoint the CLI was pointed at).
    Aws,
    /// On the local daemon of this pid.
    Local {
        /// The daemon's pid.
        daemon_pid: i32,
    },
}

/// Where the sandbox of the kept token of `sandbox_id` was created; `None`
/// when no token is kept.
pub fn token_origin(sandbox_id: &str) -> Option<Origin> {
    if !token_path(sandbox_id).exists() {
        return None;
    }
    Some(match fs::read_to_string(local_marker(sandbox_id)) {
        Ok(pid) => Origin::Local {
            daemon_pid: pid.trim().parse().unwrap_or(-1),
        },
        Err(_) => Origin::Aws,
    })
}

/// The ids of the sandboxes whose tokens are kept.
pub fn token_ids() -> Vec<String> {
    let Ok(entries) = fs::read_dir(tokens_dir()) else {
        return Vec::new();
    };
    let mut ids: Vec<String> = entries
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        // A token being written, and the local markers, are not tokens.
        .filter(|name| !name.ends_with(".tmp") && !name.ends_with(".local"))
        .collect();
    ids.sort();
    ids
}
