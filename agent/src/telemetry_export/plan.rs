//! The telemetry export section, checked whole before anything changes:
//! an INVALID answer carries the class of the first field refused.

use std::fmt;
use std::time::Duration;

use zeroize::Zeroizing;

use crate::pb;

/// The shortest and longest export interval (the reference's bounds).
pub(crate) const INTERVALS_S: std::ops::RangeInclusive<u32> = 15..=300;
/// Longest `service_name`, image ARN or version kept.
const MAX_TEXT: usize = 1_024;
/// Longest endpoint URL.
const MAX_URL: usize = 2_048;

/// INVALID classes (the field refused).
pub(crate) mod class {
    pub(crate) const INTERVAL: &str = "interval_s";
    pub(crate) const SERVICE_NAME: &str = "service_name";
    pub(crate) const NAMES: &str = "names";
    pub(crate) const AUTH: &str = "auth";
    pub(crate) const BEARER_TOKEN: &str = "bearer_token";
    pub(crate) const IMAGE: &str = "image";
    pub(crate) const ENDPOINT: &str = "endpoint";
}

/// The gauge names' style.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Names {
    /// `rayito.sandbox.*`.
    Rayito,
    /// `e2b.sandbox.*`.
    E2b,
}

/// How each export is signed.
#[derive(Clone)]
pub(crate) enum Auth {
    /// SigV4 (service `monitoring`) with the execution role's credentials.
    ExecutionRole,
    /// `Authorization: Bearer <token>`; wiped when the export stops.
    Bearer(Zeroizing<String>),
}

impl fmt::Debug for Auth {
    // The token never reaches a log.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Auth::ExecutionRole => "ExecutionRole",
            Auth::Bearer(_) => "Bearer(***)",
        })
    }
}

/// Where exports go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// CloudWatch's OTLP endpoint of the agent's region.
    CloudWatch,
    /// The section's `endpoint` (a rayito extension).
    Url(http::Uri),
}

/// A checked section.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub interval: Duration,
    pub service_name: String,
    pub names: Names,
    pub image_arn: String,
    pub image_version: String,
    pub image_memory_mib: u32,
    pub auth: Auth,
    pub target: Target,
}

/// Whether `config` is the all-default section: stop exporting.
pub(crate) fn is_stop(config: &pb::TelemetryExportConfig) -> bool {
    *config == pb::TelemetryExportConfig::default()
}

/// Checks `config` whole.
///
/// # Errors
/// The INVALID class of the first field refused.
pub(crate) fn check(config: pb::TelemetryExportConfig) -> Result<Plan, &'static str> {
    if !INTERVALS_S.contains(&config.interval_s) {
        return Err(class::INTERVAL);
    }
    if config.service_name.trim().is_empty() || config.service_name.len() > MAX_TEXT {
        return Err(class::SERVICE_NAME);
    }
    let names = match pb::TelemetryExportNameStyle::try_from(config.names) {
        Ok(pb::TelemetryExportNameStyle::Rayito) => Names::Rayito,
        Ok(pb::TelemetryExportNameStyle::E2b) => Names::E2b,
        _ => return Err(class::NAMES),
    };
    if config.image_arn.len() > MAX_TEXT || config.image_version.len() > MAX_TEXT {
        return Err(class::IMAGE);
    }
    let auth = match config.auth {
        Some(pb::telemetry_export_config::Auth::ExecutionRole(_)) => Auth::ExecutionRole,
        Some(pb::telemetry_export_config::Auth::Bearer(b)) => {
            let token = Zeroizing::new(b.token);
            // A header value: visible ASCII, no CR/LF that could split it.
            if token.is_empty() || !token.bytes().all(|c| c.is_ascii_graphic() || c == b' ') {
                return Err(class::BEARER_TOKEN);
            }
            Auth::Bearer(token)
        }
        None => return Err(class::AUTH),
    };
    let target = if config.endpoint.is_empty() {
        Target::CloudWatch
    } else {
        Target::Url(endpoint(&config.endpoint).ok_or(class::ENDPOINT)?)
    };
    Ok(Plan {
        interval: Duration::from_secs(u64::from(config.interval_s)),
        service_name: config.service_name,
        names,
        image_arn: config.image_arn,
        image_version: config.image_version,
        image_memory_mib: config.image_memory_mib,
        auth,
        target,
    })
}

/// An export URL: `https://host[:port][/path]`, or `http://` to a loopback
/// host only (a token or a signature never crosses a network in clear
/// text); no userinfo or fragment.
fn endpoint(url: &str) -> Option<http::Uri> {
    if url.len() > MAX_URL || url.contains('#') {
        return None;
    }
    let uri: http::Uri = url.parse().ok()?;
    let authority = uri.authority()?;
    if authority.as_str().contains('@') || authority.host().is_empty() {
        return None;
    }
    match uri.scheme_str()? {
        "https" => Some(uri),
        "http" if is_loopback(authority.host()) => Some(uri),
        _ => None,
    }
}

fn is_loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid() -> pb::TelemetryExportConfig {
        pb::TelemetryExportConfig {
            interval_s: 60,
            service_name: "svc".into(),
            names: pb::TelemetryExportNameStyle::Rayito as i32,
            auth: Some(pb::telemetry_export_config::Auth::ExecutionRole(
                pb::TelemetryExportExecutionRoleAuth {},
            )),
            ..Default::default()
        }
    }

    /// A change to a valid section.
    type Change = fn(&mut pb::TelemetryExportConfig);

    #[test]
    fn each_field_is_refused_with_its_class() {
        assert!(check(valid()).is_ok());
        let cases: Vec<(Change, &str)> = vec![
            (|c| c.interval_s = 14, class::INTERVAL),
            (|c| c.interval_s = 301, class::INTERVAL),
            (|c| c.service_name = " ".into(), class::SERVICE_NAME),
            (|c| c.names = 0, class::NAMES),
            (|c| c.names = 9, class::NAMES),
            (|c| c.auth = None, class::AUTH),
            (
                |c| {
                    c.auth = Some(pb::telemetry_export_config::Auth::Bearer(
                        pb::TelemetryExportBearerAuth {
                            token: "a\r\nb".into(),
                        },
                    ))
                },
                class::BEARER_TOKEN,
            ),
            (
                |c| c.endpoint = "ftp://x/v1/metrics".into(),
                class::ENDPOINT,
            ),
            (
                |c| c.endpoint = "http://example.com/v1".into(),
                class::ENDPOINT,
            ),
            (
                |c| c.endpoint = "https://u:p@example.com/".into(),
                class::ENDPOINT,
            ),
            (
                |c| c.endpoint = "https://example.com/#f".into(),
                class::ENDPOINT,
            ),
        ];
        for (change, want) in cases {
            let mut c = valid();
            change(&mut c);
            assert_eq!(check(c).unwrap_err(), want);
        }
        for ok in [
            "https://collector.example.com:4318/v1/metrics",
            "http://127.0.0.1:4318/v1/metrics",
            "http://[::1]:9/v1/metrics",
            "http://localhost/v1/metrics",
        ] {
            let mut c = valid();
            c.endpoint = ok.into();
            assert!(matches!(check(c).unwrap().target, Target::Url(_)), "{ok}");
        }
        assert!(is_stop(&pb::TelemetryExportConfig::default()));
        assert!(!is_stop(&valid()));
    }

    #[test]
    fn the_bearer_token_never_shows() {
        let a = Auth::Bearer(Zeroizing::new("sekrit".into()));
        assert_eq!(format!("{a:?}"), "Bearer(***)");
    }
}
