//! The image's bucket allowlist, `RAYITO_ALLOWED_MOUNT_BUCKETS`: a comma
//! list (each name trimmed); absent or empty denies every bucket, so an
//! image mounts nothing its publisher did not name.
//!
//! Where it is read (once, when the agent starts): on a MicroVM, the
//! agent's own environment (the image's `--env`), unless the image's
//! template environment (`template-env.json`) sets it, which then wins; on
//! the local backend only the template environment, since the agent's
//! process environment there is the emulator's, shared by every image.

use std::collections::BTreeSet;

/// The variable that names the allowed buckets.
pub const ALLOWED_BUCKETS_VAR: &str = "RAYITO_ALLOWED_MOUNT_BUCKETS";

/// The buckets an image may mount. Debug shows only how many (bucket
/// names never reach a log).
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct Allowlist {
    buckets: BTreeSet<String>,
}

impl std::fmt::Debug for Allowlist {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Allowlist")
            .field("bucket_count", &self.buckets.len())
            .finish()
    }
}

impl Allowlist {
    /// Parses the variable's value (`None`: absent).
    pub(crate) fn parse(value: Option<&str>) -> Self {
        let buckets = value
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|b| !b.is_empty())
            .map(str::to_owned)
            .collect();
        Self { buckets }
    }

    /// The allowlist of an agent whose image environment is
    /// `template_envs`; `process_env` on a MicroVM (see the module).
    pub(crate) fn load(
        template_envs: &std::collections::BTreeMap<String, String>,
        process_env: bool,
    ) -> Self {
        match template_envs.get(ALLOWED_BUCKETS_VAR) {
            Some(value) => Self::parse(Some(value)),
            None if process_env => Self::parse(std::env::var(ALLOWED_BUCKETS_VAR).ok().as_deref()),
            None => Self::default(),
        }
    }

    /// Whether `bucket` is listed.
    pub(crate) fn allows(&self, bucket: &str) -> bool {
        self.buckets.contains(bucket)
    }
}

#[cfg(test)]
mod tests {
    use super::Allowlist;

    #[test]
    fn a_comma_list_trimmed_and_empty_denies_all() {
        let list = Allowlist::parse(Some(" a-bucket,b ,, c "));
        assert!(list.allows("a-bucket") && list.allows("b") && list.allows("c"));
        assert!(!list.allows("") && !list.allows("d"));
        assert!(!Allowlist::parse(Some("")).allows("a"));
        assert!(!Allowlist::parse(None).allows("a"));
    }

    #[test]
    fn the_template_environment_wins_and_the_local_backend_reads_nothing_else() {
        let mut envs = std::collections::BTreeMap::new();
        assert_eq!(Allowlist::load(&envs, false), Allowlist::default());
        envs.insert(super::ALLOWED_BUCKETS_VAR.to_owned(), "x".to_owned());
        assert!(Allowlist::load(&envs, false).allows("x"));
        assert!(Allowlist::load(&envs, true).allows("x"));
    }
}
