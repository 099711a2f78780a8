//! `--http`: streamable HTTP at `http://<host>:<port>/mcp`. Every request
//! must carry the server's bearer token (crate::auth; 401 otherwise), since
//! loopback is shared by every local user. The server listens on loopback
//! by default, refuses a wildcard address, and accepts only requests whose
//! `Host` is exactly `<host>:<port>` and whose `Origin`, when present, is
//! exactly `http://<host>:<port>`: a web page on another origin, or one
//! reached through a rebound DNS name, gets 403 (DNS rebinding).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::auth::{Token, TokenFile};
use crate::lease::Lease;
use crate::tools::SandboxTools;

/// The default port.
const DEFAULT_PORT: u16 = 8000;
/// The path the protocol is served at.
pub const MCP_PATH: &str = "/mcp";

/// The refusal of `--host` or `--port` without `--http`.
pub const NEEDS_HTTP: &str = "--host and --port need --http";
/// The refusal of a wildcard `--host`.
pub const NO_WILDCARD: &str = "--host must be one address, not a wildcard (0.0.0.0 or ::): anyone who can reach it would see the server";
/// The refusal of a `--host` that is not an IP address.
pub const NOT_AN_ADDRESS: &str = "--host must be an IP address (127.0.0.1, ::1, 192.0.2.10)";

/// Where `--http` listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listen {
    /// The address.
    pub ip: IpAddr,
    /// The port (0: a free one).
    pub port: u16,
}

impl Listen {
    /// `None` for stdio; the listening address for `--http`.
    ///
    /// # Errors
    /// The sentence for a refused combination or address.
    pub fn from_args(
        http: bool,
        host: Option<String>,
        port: Option<u16>,
    ) -> Result<Option<Listen>, &'static str> {
        if !http {
            return if host.is_some() || port.is_some() {
                Err(NEEDS_HTTP)
            } else {
                Ok(None)
            };
        }
        let ip = match host.as_deref().map(str::trim) {
            None => IpAddr::V4(Ipv4Addr::LOCALHOST),
            Some("*" | "") => return Err(NO_WILDCARD),
            Some(text) => text
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<IpAddr>()
                .map_err(|_| NOT_AN_ADDRESS)?,
        };
        if ip.is_unspecified() {
            return Err(NO_WILDCARD);
        }
        Ok(Some(Listen {
            ip,
            port: port.unwrap_or(DEFAULT_PORT),
        }))
    }
}

/// `host:port` as a `Host` header carries it (IPv6 in brackets).
pub fn authority(addr: SocketAddr) -> String {
    match addr.ip() {
        IpAddr::V4(ip) => format!("{ip}:{}", addr.port()),
        IpAddr::V6(ip) => format!("[{ip}]:{}", addr.port()),
    }
}

/// Serves until SIGTERM or SIGINT. Requests must carry `token` (the
/// user's `RAYITO_MCP_TOKEN`), or, when `None`, a token made here and
/// written to a private file whose path is printed on stderr.
///
/// # Errors
/// The address cannot be bound, the token file cannot be written, or the
/// server failed.
pub async fn serve(listen: Listen, token: Option<Token>, lease: Arc<Lease>) -> Result<(), String> {
    let listener = tokio::net::TcpListener::bind((listen.ip, listen.port))
        .await
        .map_err(|e| {
            format!(
                "cannot listen on {}: {e}",
                authority((listen.ip, listen.port).into())
            )
        })?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("cannot read the listening address: {e}"))?;
    let authority = authority(addr);
    if !listen.ip.is_loopback() {
        tracing::warn!(
            "not loopback: anyone who can reach {authority} can try the bearer token, and requests and the token travel in clear text"
        );
    }
    // Held until the server stops: the file goes with it.
    let mut token_file = None;
    let token = match token {
        Some(token) => token,
        None => {
            let token =
                Token::random().map_err(|e| format!("cannot make the bearer token: {e}"))?;
            let file = TokenFile::write(&std::env::temp_dir(), &token)
                .map_err(|e| format!("cannot write the bearer token's file: {e}"))?;
            eprintln!(
                "rayito-mcp: the bearer token is in {} (readable only by you)",
                file.path().display()
            );
            token_file = Some(file);
            token
        }
    };
    let stop = CancellationToken::new();
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts([authority.clone()])
        .with_allowed_origins([format!("http://{authority}")])
        .enforce_origin_validation()
        .with_cancellation_token(stop.child_token());
    let service = StreamableHttpService::new(
        move || Ok(SandboxTools::new(lease.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let router = axum::Router::new().nest_service(MCP_PATH, service).layer(
        axum::middleware::from_fn_with_state(token, crate::auth::require),
    );
    // The line a user (and the tests) read to find the server: printed
    // whatever the log level, as `--port 0` makes it the only way to know.
    eprintln!("rayito-mcp: serving MCP at http://{authority}{MCP_PATH}");
    let served = axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            let signal = crate::shutdown_signal().await;
            tracing::info!(signal, "stopping");
            stop.cancel();
        })
        .await;
    drop(token_file);
    served.map_err(|e| format!("the HTTP server failed: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments() {
        assert_eq!(Listen::from_args(false, None, None), Ok(None));
        assert_eq!(
            Listen::from_args(false, Some("127.0.0.1".into()), None),
            Err(NEEDS_HTTP)
        );
        assert_eq!(Listen::from_args(false, None, Some(9000)), Err(NEEDS_HTTP));
        assert_eq!(
            Listen::from_args(true, None, None),
            Ok(Some(Listen {
                ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
                port: 8000
            }))
        );
        for wildcard in ["0.0.0.0", "::", "[::]", "*", ""] {
            assert_eq!(
                Listen::from_args(true, Some(wildcard.into()), None),
                Err(NO_WILDCARD),
                "{wildcard}"
            );
        }
        assert_eq!(
            Listen::from_args(true, Some("example.com".into()), None),
            Err(NOT_AN_ADDRESS)
        );
        let v6 = Listen::from_args(true, Some("[::1]".into()), Some(0))
            .unwrap()
            .unwrap();
        assert_eq!(authority((v6.ip, 9).into()), "[::1]:9");
    }
}
