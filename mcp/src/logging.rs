//! Log lines on stderr only (stdout carries the protocol). The server's
//! own lines and the SDK's follow `RAYITO_MCP_LOG_LEVEL`; the libraries
//! below them (the AWS SDK, rmcp, the HTTP stack, the in-process local
//! backend) are held at WARN at most, as their debug lines may quote
//! requests, and with them code, commands or file contents.

use tracing_subscriber::EnvFilter;

use crate::settings::LogLevel;

/// Crates whose lines never go below WARN.
const QUIET_TARGETS: &[&str] = &[
    "aws_config",
    "aws_runtime",
    "aws_sdk_lambdamicrovms",
    "aws_sdk_s3",
    "aws_sigv4",
    "aws_smithy_http_client",
    "aws_smithy_runtime",
    "aws_smithy_runtime_api",
    "h2",
    "hyper",
    "hyper_util",
    "rayito_agent",
    "rayito_emulator",
    "rmcp",
    "tonic",
    "tower",
];

/// The filter directives for `level`.
pub fn directives(level: LogLevel) -> String {
    let own = level.tracing_level();
    let quiet = own.min(tracing::Level::WARN);
    let mut directives = own.as_str().to_ascii_lowercase();
    for target in QUIET_TARGETS {
        directives.push_str(&format!(
            ",{target}={}",
            quiet.as_str().to_ascii_lowercase()
        ));
    }
    directives
}

/// Installs the stderr subscriber.
pub fn init(level: LogLevel) {
    let filter = EnvFilter::new(directives(level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libraries_stay_at_warn_or_quieter() {
        let d = directives(LogLevel::Debug);
        assert!(d.starts_with("debug,"), "{d}");
        assert!(d.contains(",rmcp=warn"), "{d}");
        assert!(d.contains(",aws_smithy_runtime=warn"), "{d}");
        let d = directives(LogLevel::Critical);
        assert!(d.starts_with("error,"), "{d}");
        assert!(d.contains(",rmcp=error"), "{d}");
    }
}
