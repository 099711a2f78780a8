//! The server's settings: environment variables only (an MCP client
//! starts the server with an `env` block, never a config file), all
//! checked before the server speaks. An invalid one is one line naming the
//! variable, then exit 2.

use std::fmt;
use std::time::Duration;

/// The sandbox's lifetime (seconds).
pub const TIMEOUT_ENV: &str = "RAYITO_MCP_TIMEOUT_SECONDS";
/// The idle time before the platform suspends the sandbox (seconds; 0: never).
pub const IDLE_ENV: &str = "RAYITO_MCP_IDLE_SECONDS";
/// The log level of the server's stderr.
pub const LOG_LEVEL_ENV: &str = "RAYITO_MCP_LOG_LEVEL";
/// The template's version to start.
pub const TEMPLATE_VERSION_ENV: &str = "RAYITO_TEMPLATE_VERSION";
/// The IAM role the sandbox runs with (turns on CloudWatch logging).
pub const EXECUTION_ROLE_ENV: &str = "RAYITO_EXECUTION_ROLE_ARN";

/// Default sandbox lifetime: one hour.
const DEFAULT_TIMEOUT_SECS: u64 = 3_600;
/// Shortest lifetime: a sandbox that ends within a minute is no use to an
/// agent's conversation.
const MIN_TIMEOUT_SECS: u64 = 60;
/// The platform's cap on a MicroVM's duration.
const MAX_TIMEOUT_SECS: u64 = 28_800;
/// Default idle time.
const DEFAULT_IDLE_SECS: u64 = 300;
/// The platform's minimum idle time.
const MIN_IDLE_SECS: u64 = 60;

/// How verbose the server's stderr is: the reference's level names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    /// Everything the server logs.
    Debug,
    /// One line per tool call (the default).
    Info,
    /// Problems only.
    Warning,
    /// Failures only.
    Error,
    /// Failures only (tracing has no level above error).
    Critical,
}

impl LogLevel {
    /// The `tracing` level this name stands for.
    pub fn tracing_level(self) -> tracing::Level {
        match self {
            Self::Debug => tracing::Level::DEBUG,
            Self::Info => tracing::Level::INFO,
            Self::Warning => tracing::Level::WARN,
            Self::Error | Self::Critical => tracing::Level::ERROR,
        }
    }
}

/// Everything the environment configures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The sandbox's lifetime.
    pub timeout: Duration,
    /// The idle policy's time; `None`: no idle policy.
    pub idle: Option<Duration>,
    /// The template's version; `None`: its newest launchable one.
    pub template_version: Option<u32>,
    /// The execution role; `Some` also turns on CloudWatch logging.
    pub execution_role_arn: Option<String>,
    /// The log level.
    pub log_level: LogLevel,
    /// The secret gateways of every sandbox (`RAYITO_MCP_GATEWAYS`).
    pub gateways: Vec<(String, rayito::gateway::SecretGateway)>,
}

/// A variable whose value the server refuses. The message names the
/// variable and what it accepts, never the value (it could be anything
/// the user pasted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingError {
    /// The variable.
    pub variable: &'static str,
    /// What it accepts.
    pub expected: &'static str,
}

impl fmt::Display for SettingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid {}: {}", self.variable, self.expected)
    }
}

impl std::error::Error for SettingError {}

impl Settings {
    /// The settings of this process's environment.
    ///
    /// # Errors
    /// The first invalid variable.
    pub fn from_env() -> Result<Settings, SettingError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// The settings `lookup` gives (a variable's value, or `None` when
    /// unset). An empty value counts as unset, as shells and MCP clients
    /// write `VAR=` for "no value".
    ///
    /// # Errors
    /// The first invalid variable.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Settings, SettingError> {
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        // Read again by the SDK when the client is made; checked here so
        // that a typo stops the server before it speaks.
        if let Some(backend) = get(rayito::BACKEND_ENV)
            && backend != "local"
            && backend != "aws"
        {
            return Err(SettingError {
                variable: rayito::BACKEND_ENV,
                expected: "local or aws (unset: aws)",
            });
        }
        let timeout_secs = match get(TIMEOUT_ENV) {
            None => DEFAULT_TIMEOUT_SECS,
            Some(v) => v
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|s| (MIN_TIMEOUT_SECS..=MAX_TIMEOUT_SECS).contains(s))
                .ok_or(SettingError {
                    variable: TIMEOUT_ENV,
                    expected: "a whole number of seconds from 60 to 28800",
                })?,
        };
        let idle_secs = match get(IDLE_ENV) {
            // The default only applies to a sandbox that outlives it.
            None if DEFAULT_IDLE_SECS < timeout_secs => DEFAULT_IDLE_SECS,
            None => 0,
            Some(v) => v
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|&s| s == 0 || (MIN_IDLE_SECS..timeout_secs).contains(&s))
                .ok_or(SettingError {
                    variable: IDLE_ENV,
                    expected: "0 (no idle suspension) or a whole number of seconds from 60 to less than RAYITO_MCP_TIMEOUT_SECONDS",
                })?,
        };
        let idle = (idle_secs > 0).then(|| Duration::from_secs(idle_secs));
        let template_version = match get(TEMPLATE_VERSION_ENV) {
            None => None,
            Some(v) => Some(v.trim().parse::<u32>().ok().filter(|&n| n > 0).ok_or(
                SettingError {
                    variable: TEMPLATE_VERSION_ENV,
                    expected: "a positive whole number",
                },
            )?),
        };
        let execution_role_arn = match get(EXECUTION_ROLE_ENV) {
            None => None,
            Some(v) if v.trim().starts_with("arn:") && !v.trim().contains(char::is_whitespace) => {
                Some(v.trim().to_owned())
            }
            Some(_) => {
                return Err(SettingError {
                    variable: EXECUTION_ROLE_ENV,
                    expected: "an IAM role ARN (arn:aws:iam::<account>:role/<name>)",
                });
            }
        };
        let log_level = match get(LOG_LEVEL_ENV) {
            None => LogLevel::Info,
            Some(v) => match v.trim().to_ascii_uppercase().as_str() {
                "DEBUG" => LogLevel::Debug,
                "INFO" => LogLevel::Info,
                "WARNING" | "WARN" => LogLevel::Warning,
                "ERROR" => LogLevel::Error,
                "CRITICAL" => LogLevel::Critical,
                _ => {
                    return Err(SettingError {
                        variable: LOG_LEVEL_ENV,
                        expected: "one of DEBUG, INFO, WARNING, ERROR, CRITICAL",
                    });
                }
            },
        };
        let gateways = match get(crate::gateways::GATEWAYS_ENV) {
            None => Vec::new(),
            Some(v) => crate::gateways::parse(&v).map_err(|()| SettingError {
                variable: crate::gateways::GATEWAYS_ENV,
                expected: crate::gateways::EXPECTED,
            })?,
        };
        Ok(Settings {
            timeout: Duration::from_secs(timeout_secs),
            idle,
            template_version,
            execution_role_arn,
            log_level,
            gateways,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(vars: &[(&str, &str)]) -> Result<Settings, SettingError> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Settings::from_lookup(move |name| {
            vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn defaults_when_nothing_is_set() {
        let s = settings(&[]).unwrap();
        assert_eq!(s.timeout, Duration::from_secs(3_600));
        assert_eq!(s.idle, Some(Duration::from_secs(300)));
        assert_eq!(s.template_version, None);
        assert_eq!(s.execution_role_arn, None);
        assert_eq!(s.log_level, LogLevel::Info);
        assert!(s.gateways.is_empty());
    }

    #[test]
    fn gateways_are_read_by_name() {
        let s = settings(&[(
            crate::gateways::GATEWAYS_ENV,
            r#"{"api": {"upstream": "https://api.example.com", "headers": {"authorization": "api-key"}, "allow": [["POST", "/v1/chat"], ["GET", "/v1/*"]], "rate_per_minute": 30}}"#,
        )])
        .unwrap();
        let expected = rayito::gateway::SecretGateway::new("https://api.example.com")
            .header("authorization", "api-key")
            .allow("POST", "/v1/chat")
            .allow("GET", "/v1/*")
            .rate_per_minute(30);
        assert_eq!(s.gateways, vec![("api".to_owned(), expected)]);
    }

    #[test]
    fn each_bound_is_kept() {
        let s = settings(&[
            (TIMEOUT_ENV, "60"),
            (IDLE_ENV, "0"),
            (TEMPLATE_VERSION_ENV, "3"),
            (LOG_LEVEL_ENV, "warning"),
            (EXECUTION_ROLE_ENV, "arn:aws:iam::123456789012:role/r"),
        ])
        .unwrap();
        assert_eq!(s.timeout, Duration::from_secs(60));
        assert_eq!(s.idle, None);
        assert_eq!(s.template_version, Some(3));
        assert_eq!(s.log_level, LogLevel::Warning);
        assert_eq!(
            s.execution_role_arn.as_deref(),
            Some("arn:aws:iam::123456789012:role/r")
        );
        let s = settings(&[(TIMEOUT_ENV, "28800"), (IDLE_ENV, "28799")]).unwrap();
        assert_eq!(s.idle, Some(Duration::from_secs(28_799)));
        // A sandbox shorter than the default idle time gets none by default.
        let s = settings(&[(TIMEOUT_ENV, "300")]).unwrap();
        assert_eq!(s.idle, None);
        // Empty means unset.
        assert_eq!(
            settings(&[(TIMEOUT_ENV, "")]).unwrap().timeout.as_secs(),
            3_600
        );
    }

    #[test]
    fn an_invalid_value_names_its_variable_and_not_the_value() {
        let cases: &[(&str, &str)] = &[
            (TIMEOUT_ENV, "59"),
            (TIMEOUT_ENV, "28801"),
            (TIMEOUT_ENV, "1h"),
            (IDLE_ENV, "59"),
            (IDLE_ENV, "3600"),
            (IDLE_ENV, "-1"),
            (TEMPLATE_VERSION_ENV, "0"),
            (TEMPLATE_VERSION_ENV, "latest"),
            (EXECUTION_ROLE_ENV, "my-role"),
            (LOG_LEVEL_ENV, "TRACE"),
            (rayito::BACKEND_ENV, "lcoal"),
            (
                crate::gateways::GATEWAYS_ENV,
                "{\"api\": {\"upstream\": \"https://a.test\"}}",
            ),
            (crate::gateways::GATEWAYS_ENV, "[\"api\"]"),
        ];
        for (variable, value) in cases {
            let err = settings(&[(variable, value)]).unwrap_err();
            assert_eq!(err.variable, *variable, "{variable}={value}");
            let text = err.to_string();
            assert!(text.starts_with(&format!("invalid {variable}: ")), "{text}");
            assert!(!text.contains(&format!(" {value}")), "{text}");
        }
        assert_eq!(
            settings(&[(TIMEOUT_ENV, "5")]).unwrap_err().to_string(),
            "invalid RAYITO_MCP_TIMEOUT_SECONDS: a whole number of seconds from 60 to 28800"
        );
    }
}
