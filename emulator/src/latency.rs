//! The latency profile ([`LatencyProfile`]): how long the emulator makes a
//! MicroVM's create, suspend and resume take, so that what the SDK does
//! over those floors (a pool's take against a create, above all) can be
//! measured locally with AWS-like figures. Off by default: the emulator's
//! own times are milliseconds.

use std::time::Duration;

/// How long each lifecycle step takes on top of the emulator's own work
/// ([`EmulatorConfig::latency`](crate::EmulatorConfig::latency); default:
/// all zero, off). `create`: from RunMicrovm until its `/run` hook is
/// posted (the MicroVM stays PENDING and its agent not ready meanwhile, as
/// while AWS boots one); `suspend`: from SuspendMicrovm until `/suspend`
/// (SUSPENDING meanwhile); `resume`: from ResumeMicrovm until `/resume`
/// (PENDING meanwhile, and ResumeMicrovm answers after it, as it answers
/// once the hook has).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LatencyProfile {
    /// RunMicrovm to `/run`.
    pub create: Duration,
    /// SuspendMicrovm (or an idle suspend) to `/suspend`.
    pub suspend: Duration,
    /// ResumeMicrovm (or the proxy's auto-resume) to `/resume`.
    pub resume: Duration,
}

impl LatencyProfile {
    /// No added latency (the default).
    pub const OFF: LatencyProfile = LatencyProfile {
        create: Duration::ZERO,
        suspend: Duration::ZERO,
        resume: Duration::ZERO,
    };

    /// AWS-like figures: a create of 3 s (a cold MicroVM from its
    /// snapshot, 2 to 4 s as measured), a resume of 800 ms (the
    /// reference's measured take on AWS), a suspend of 500 ms.
    pub const AWS: LatencyProfile = LatencyProfile {
        create: Duration::from_secs(3),
        suspend: Duration::from_millis(500),
        resume: Duration::from_millis(800),
    };

    /// A profile of these three times.
    pub fn new(create: Duration, suspend: Duration, resume: Duration) -> Self {
        LatencyProfile {
            create,
            suspend,
            resume,
        }
    }

    /// The environment variable the `rayito-emulator` binary (when no
    /// `--latency` is given) and the SDK's embedded local backend (when it
    /// starts) read a profile from, in [`LatencyProfile::parse`]'s text.
    pub const ENV: &'static str = "RAYITO_EMULATOR_LATENCY";

    /// The profile [`LatencyProfile::ENV`] names in `env` (the process
    /// environment, or a stand-in); off when unset.
    ///
    /// # Errors
    /// [`LatencyProfile::parse`]'s message, naming the variable.
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        match env(Self::ENV) {
            None => Ok(Self::OFF),
            Some(text) => Self::parse(&text).map_err(|err| format!("{}: {err}", Self::ENV)),
        }
    }

    /// Whether nothing is added.
    pub fn is_off(&self) -> bool {
        *self == Self::OFF
    }

    /// A profile from its text: `off`, `aws`, or `key=ms` pairs separated
    /// by commas (`create=3000,resume=800,suspend=500`; a key left out is
    /// 0; `aws,resume=1200` starts from `aws`).
    ///
    /// # Errors
    /// A message naming what is wrong: an unknown key or profile, a time
    /// that is not a whole number of milliseconds (at most an hour).
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut profile = Self::OFF;
        for part in text.split(',').map(str::trim) {
            match part {
                "" | "off" => {}
                "aws" => profile = Self::AWS,
                _ => {
                    let (key, value) = part.split_once('=').ok_or_else(|| bad(part))?;
                    let ms: u64 = value
                        .trim()
                        .parse()
                        .ok()
                        .filter(|ms| *ms <= 3_600_000)
                        .ok_or_else(|| bad(part))?;
                    let time = Duration::from_millis(ms);
                    match key.trim() {
                        "create" => profile.create = time,
                        "suspend" => profile.suspend = time,
                        "resume" => profile.resume = time,
                        _ => return Err(bad(part)),
                    }
                }
            }
        }
        Ok(profile)
    }
}

fn bad(part: &str) -> String {
    format!(
        "invalid latency profile part {part:?}: use off, aws, or create=MS,suspend=MS,resume=MS (whole milliseconds, at most 3600000)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_parse_from_their_text() {
        assert_eq!(LatencyProfile::parse("off").unwrap(), LatencyProfile::OFF);
        assert_eq!(LatencyProfile::parse("").unwrap(), LatencyProfile::OFF);
        assert_eq!(LatencyProfile::parse("aws").unwrap(), LatencyProfile::AWS);
        let ms = Duration::from_millis;
        assert_eq!(
            LatencyProfile::parse("create=2000, resume=700").unwrap(),
            LatencyProfile::new(ms(2000), ms(0), ms(700))
        );
        assert_eq!(
            LatencyProfile::parse("aws,resume=1200").unwrap(),
            LatencyProfile::new(ms(3000), ms(500), ms(1200))
        );
        assert_eq!(
            LatencyProfile::parse("boot=1").unwrap_err(),
            "invalid latency profile part \"boot=1\": use off, aws, or create=MS,suspend=MS,resume=MS (whole milliseconds, at most 3600000)"
        );
        assert!(LatencyProfile::parse("create=1.5").is_err());
        assert!(LatencyProfile::parse("fast").is_err());
        assert!(LatencyProfile::parse("resume=3600001").is_err());
    }

    #[test]
    fn the_environment_names_a_profile_or_nothing() {
        let none = |_: &str| None;
        assert_eq!(LatencyProfile::from_env(none).unwrap(), LatencyProfile::OFF);
        let aws = |name: &str| (name == "RAYITO_EMULATOR_LATENCY").then(|| "aws".to_owned());
        assert_eq!(LatencyProfile::from_env(aws).unwrap(), LatencyProfile::AWS);
        let bad = |_: &str| Some("slow".to_owned());
        let err = LatencyProfile::from_env(bad).unwrap_err();
        assert!(
            err.starts_with("RAYITO_EMULATOR_LATENCY: invalid latency profile part \"slow\""),
            "{err}"
        );
    }

    #[test]
    fn the_default_is_off() {
        assert!(LatencyProfile::default().is_off());
        assert!(!LatencyProfile::AWS.is_off());
    }
}
