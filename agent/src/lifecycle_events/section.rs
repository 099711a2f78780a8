//! Reading a `lifecycle_events` section (extras §4.2): key and id both
//! empty clear it, one of them empty is `invalid_section`, and anything the
//! pipeline could never admit (a key that is not the 32 bytes of an
//! HMAC-SHA256, a string over the line's bound) is refused here rather
//! than turned into lines every forwarder rejects.

use rayito_events::key::SandboxKey;
use zeroize::{Zeroize as _, Zeroizing};

use crate::pb;

/// The one class an invalid section answers.
pub(super) const INVALID_SECTION: &str = "invalid_section";

/// An enabled section: what every event line carries and is signed with.
pub(super) struct Wanted {
    pub key: Zeroizing<SandboxKey>,
    pub sandbox_id: String,
    pub image_arn: String,
    pub image_version: String,
}

/// `Ok(None)`: clear (stop emitting); `Ok(Some)`: enable or re-key. The
/// section's copy of the key is wiped either way.
pub(super) fn read(mut config: pb::LifecycleEventsConfig) -> Result<Option<Wanted>, &'static str> {
    let read = match (config.sandbox_key.is_empty(), config.sandbox_id.is_empty()) {
        (true, true) => Ok(None),
        (true, false) | (false, true) => Err(INVALID_SECTION),
        (false, false) => wanted(&mut config).map(Some),
    };
    config.sandbox_key.zeroize();
    read
}

fn wanted(config: &mut pb::LifecycleEventsConfig) -> Result<Wanted, &'static str> {
    let strings = [&config.sandbox_id, &config.image_arn, &config.image_version];
    if strings
        .iter()
        .any(|s| s.len() > rayito_events::line::MAX_STRING)
    {
        return Err(INVALID_SECTION);
    }
    let mut key = Zeroizing::new(SandboxKey::default());
    if config.sandbox_key.len() != key.len() {
        return Err(INVALID_SECTION);
    }
    key.copy_from_slice(&config.sandbox_key);
    Ok(Wanted {
        key,
        sandbox_id: std::mem::take(&mut config.sandbox_id),
        image_arn: std::mem::take(&mut config.image_arn),
        image_version: std::mem::take(&mut config.image_version),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(key: &[u8], id: &str) -> pb::LifecycleEventsConfig {
        pb::LifecycleEventsConfig {
            sandbox_key: key.to_vec(),
            sandbox_id: id.into(),
            image_arn: "arn:aws:lambda:us-east-1:123456789012:microvm-image:i".into(),
            image_version: "1".into(),
        }
    }

    #[test]
    fn both_empty_clear_one_empty_or_a_short_key_is_invalid() {
        assert!(matches!(read(section(b"", "")), Ok(None)));
        for bad in [
            section(b"", "sbx"),
            section(&[7; 32], ""),
            section(&[7; 31], "sbx"),
            section(&[7; 33], "sbx"),
            section(&[7; 32], &"s".repeat(513)),
        ] {
            assert!(matches!(read(bad), Err(INVALID_SECTION)));
        }
        let wanted = read(section(&[7; 32], "sbx")).unwrap().unwrap();
        assert_eq!((*wanted.key, wanted.sandbox_id.as_str()), ([7; 32], "sbx"));
    }
}
