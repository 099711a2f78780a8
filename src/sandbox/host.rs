//! `sandbox.get_host(port)`: how a client outside the sandbox reaches a
//! server listening on a port inside it, through the MicroVM's proxy: the
//! address, and the headers to send (the port, and a proxy token for that
//! port that the SDK mints and refreshes).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{PROXY_TOKEN_TTL, Sandbox};
use crate::control::{AuthTokenRequest, ControlPlane};
use crate::error::SandboxError;
use crate::secret::Secret;
use crate::transport::HOOKS_PORT;

/// A token older than this is replaced before its headers are handed out
/// (tokens live an hour): a request sent with fresh headers has at least
/// 15 minutes before its token expires.
const REFRESH_AFTER: Duration = Duration::from_secs(45 * 60);

/// The header naming the port behind the proxy.
const PROXY_PORT_HEADER: &str = "x-aws-proxy-port";
/// The header carrying the proxy token.
const PROXY_AUTH_HEADER: &str = "x-aws-proxy-auth";

/// A port of the sandbox reachable from outside (from
/// [`Sandbox::get_host`]). Cheap to clone; clones share the token.
#[derive(Clone)]
pub struct SandboxHost {
    inner: Arc<HostInner>,
}

struct HostInner {
    url: String,
    port: u16,
    microvm_id: String,
    control: Arc<dyn ControlPlane>,
    token: tokio::sync::Mutex<(Secret, Instant)>,
}

// The token never shows.
crate::secret::redacted_debug! {
    non_exhaustive SandboxHost |o| url = o.inner.url, port = o.inner.port
}

impl SandboxHost {
    /// The base URL to send requests to (`https://<endpoint>` on AWS,
    /// `http://127.0.0.1:<port>` on the local backend): the proxy, which
    /// forwards to the sandbox's port named by the headers.
    pub fn url(&self) -> &str {
        &self.inner.url
    }

    /// The port inside the sandbox.
    pub fn port(&self) -> u16 {
        self.inner.port
    }

    /// The headers every request must carry: `x-aws-proxy-port` and
    /// `x-aws-proxy-auth` (a token for this port only). The token is
    /// re-minted when it is older than 45 minutes, so call this for each
    /// request (or at least every few minutes). The values are secrets:
    /// never log them.
    ///
    /// # Errors
    /// Control-plane failures of the re-mint (`Authentication`, `RateLimit`,
    /// `SandboxNotFound`, ...).
    pub async fn headers(&self) -> Result<Vec<(&'static str, String)>, SandboxError> {
        let mut token = self.inner.token.lock().await;
        if token.1.elapsed() >= REFRESH_AFTER {
            *token = (
                mint(&self.inner.control, &self.inner.microvm_id, self.inner.port).await?,
                Instant::now(),
            );
        }
        Ok(vec![
            (PROXY_PORT_HEADER, self.inner.port.to_string()),
            (PROXY_AUTH_HEADER, token.0.expose().to_owned()),
        ])
    }
}

async fn mint(
    control: &Arc<dyn ControlPlane>,
    microvm_id: &str,
    port: u16,
) -> Result<Secret, SandboxError> {
    control
        .create_auth_token(AuthTokenRequest {
            microvm_id: microvm_id.to_owned(),
            expiration: PROXY_TOKEN_TTL,
            ports: vec![port],
        })
        .await
}

/// The proxy's base URL for a control-plane endpoint: plain HTTP for a
/// loopback address with a port (the local backend), HTTPS otherwise.
fn base_url(endpoint: &str) -> String {
    let bare = endpoint
        .strip_prefix("https://")
        .or_else(|| endpoint.strip_prefix("http://"))
        .unwrap_or(endpoint);
    let authority = bare.split('/').next().unwrap_or(bare);
    let loopback_with_port = authority.rsplit_once(':').is_some_and(|(host, _)| {
        host == "localhost"
            || host == "[::1]"
            || host
                .parse::<std::net::Ipv4Addr>()
                .is_ok_and(|ip| ip.is_loopback())
    });
    if loopback_with_port {
        format!("http://{authority}")
    } else {
        format!("https://{authority}")
    }
}

impl Sandbox {
    /// How to reach `port` inside the sandbox from outside (E2B's
    /// `get_host`): the proxy's URL and, through
    /// [`SandboxHost::headers`], the headers to send, with a proxy token
    /// for this port minted now and refreshed by the SDK.
    ///
    /// # Errors
    /// `InvalidArgument` (`port`) for 0 or 9000 (the hooks port, never
    /// opened); `Sandbox { code: Closed }` after [`Sandbox::kill`];
    /// control-plane failures (`SandboxNotFound`, `Authentication`, ...).
    pub async fn get_host(&self, port: u16) -> Result<SandboxHost, SandboxError> {
        if port == 0 || port == HOOKS_PORT {
            return Err(SandboxError::invalid_argument(
                "port",
                format!(
                    "port {port} cannot be opened; pass ports from 1 to 65535 other than 9000 (the hooks port)"
                ),
            ));
        }
        if self.inner.conn.is_closed() {
            return Err(SandboxError::closed());
        }
        let control = self.inner.control.clone();
        let vm = control.get_microvm(self.inner.id.clone()).await?;
        let token = mint(&control, &vm.id, port).await?;
        Ok(SandboxHost {
            inner: Arc::new(HostInner {
                url: base_url(&vm.endpoint),
                port,
                microvm_id: vm.id,
                control,
                token: tokio::sync::Mutex::new((token, Instant::now())),
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::base_url;

    #[test]
    fn loopback_with_a_port_is_plain_http_and_the_rest_https() {
        assert_eq!(base_url("127.0.0.1:4000"), "http://127.0.0.1:4000");
        assert_eq!(base_url("localhost:4000"), "http://localhost:4000");
        assert_eq!(base_url("127.0.0.5"), "https://127.0.0.5");
        assert_eq!(
            base_url("abc.lambda-microvm.us-east-1.on.aws"),
            "https://abc.lambda-microvm.us-east-1.on.aws"
        );
    }
}
