//! OpenCode, the default built-in runtime: installed from the npm registry
//! (`opencode-ai`, whose platform packages carry the binary), run as
//! `opencode run --format json` by a small Python adapter that speaks
//! protocol v1 (`opencode_adapter.py`, written into the sandbox before the
//! first run).
//!
//! The reference pins OpenCode 1.18.34 from its GitHub release; the npm
//! registry's newest is 1.18.33 (1.18.34 was never published there), so
//! that is the version pinned here. npm checks each tarball against the
//! registry's sha512 integrity.

use super::BuiltinRuntime;

/// The runtime's name in the registry and in messages.
pub(crate) const NAME: &str = "opencode";
/// The pinned OpenCode version (the npm registry's `opencode-ai`).
pub(crate) const VERSION: &str = "1.18.33";
/// The npm package that installs it.
pub(crate) const NPM_PACKAGE: &str = "opencode-ai";
/// Where a template installs the agents' runtimes (root's, read-only to
/// the sandbox's user).
pub(crate) const INSTALL_DIR: &str = "/opt/agents";
/// Where a sandbox without the template installs them (a warm-up step or
/// `prepare` runs as the sandbox's user, who cannot write `/opt`).
const USER_INSTALL_DIR: &str = "/home/user/.rayito/agent/runtimes";
/// The adapter's path in the sandbox: versioned, because files are written
/// only when missing and a newer SDK must not run an older adapter.
pub(crate) const ADAPTER_PATH: &str = "/home/user/.rayito/agent/bin/opencode-adapter-1.py";
/// The adapter's source, compiled in.
pub(crate) const ADAPTER: &[u8] = include_bytes!("opencode_adapter.py");

/// OpenCode as the seam describes a built-in runtime.
pub(crate) fn runtime() -> BuiltinRuntime {
    BuiltinRuntime {
        name: NAME.to_owned(),
        version: VERSION.to_owned(),
        check: check(),
        install: vec![install()],
        launch: format!("exec python3 {ADAPTER_PATH}"),
        files: vec![(ADAPTER_PATH.to_owned(), ADAPTER.to_vec(), 0o755)],
    }
}

/// Exit 0 iff an `opencode` binary is where the adapter looks for one.
fn check() -> String {
    format!(
        "command -v opencode >/dev/null 2>&1 || test -x {INSTALL_DIR}/bin/opencode \
         || test -x {USER_INSTALL_DIR}/bin/opencode"
    )
}

/// One shell command: `npm install` of the pinned version into
/// `/opt/agents` when writable (a template's build, as root), else into
/// the user's state directory; the binary linked into `<dir>/bin`, and
/// `opencode --version` as the smoke check. npm's cache goes to a
/// directory removed afterwards, so it never lands in the image. Node
/// trusts the image's OpenSSL store (`--use-openssl-ca`), not only its own
/// bundled roots, so a registry reached through a proxy whose CA the image
/// (or the host, on the local backend) trusts installs too.
fn install() -> String {
    format!(
        "set -e; d={INSTALL_DIR}; if ! mkdir -p $d/bin 2>/dev/null || ! test -w $d; \
         then d={USER_INSTALL_DIR}; mkdir -p $d/bin; fi; \
         c=$(mktemp -d); \
         NODE_OPTIONS=--use-openssl-ca npm install --global --prefix $d/opencode --cache $c --no-audit --no-fund \
         --loglevel=error {NPM_PACKAGE}@{VERSION}; rm -rf $c; \
         ln -sf $d/opencode/bin/opencode $d/bin/opencode; \
         if test -w /usr/local/bin; then ln -sf $d/bin/opencode /usr/local/bin/opencode; fi; \
         $d/bin/opencode --version"
    )
}

/// The template's manifest entry for OpenCode.
pub(crate) fn manifest_entry() -> serde_json::Value {
    serde_json::json!({
        "version": VERSION,
        "source": format!("npm:{NPM_PACKAGE}@{VERSION}"),
        "binary": format!("{INSTALL_DIR}/bin/opencode"),
        "adapter": ADAPTER_PATH,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_adapter_is_written_executable_and_launched_by_path() {
        let runtime = runtime();
        assert_eq!(runtime.name, "opencode");
        assert_eq!(runtime.version, "1.18.33");
        assert_eq!(runtime.files.len(), 1);
        let (path, content, mode) = &runtime.files[0];
        assert_eq!(path, ADAPTER_PATH);
        assert_eq!(*mode, 0o755);
        assert!(content.starts_with(b"#!/usr/bin/env python3\n"));
        assert!(runtime.launch.ends_with(ADAPTER_PATH));
    }

    #[test]
    fn the_install_pins_the_package_and_checks_the_binary_runs() {
        let install = install();
        assert!(install.contains("opencode-ai@1.18.33"), "{install}");
        assert!(install.ends_with("$d/bin/opencode --version"), "{install}");
        // The check looks where the install puts it.
        assert!(check().contains("/opt/agents/bin/opencode"));
        assert!(check().contains(USER_INSTALL_DIR));
    }

    #[test]
    fn the_docs_transcribe_the_pinned_package_and_the_trust_of_the_images_store() {
        let doc = include_str!("../../../docs/agent.md");
        let install = install();
        for fact in [
            format!("{NPM_PACKAGE}@{VERSION}"),
            "NODE_OPTIONS=--use-openssl-ca".to_owned(),
        ] {
            assert!(install.contains(&fact), "the install lacks {fact}");
            assert!(doc.contains(&fact), "docs/agent.md lacks {fact}");
        }
        assert!(doc.contains(&format!("OpenCode {VERSION}")));
    }

    #[test]
    fn the_adapter_looks_where_the_install_puts_the_binary() {
        let adapter = std::str::from_utf8(ADAPTER).unwrap();
        assert!(adapter.contains("\"/opt/agents/bin/opencode\""));
        assert!(adapter.contains(&format!("\"{USER_INSTALL_DIR}/bin/opencode\"")));
    }
}
