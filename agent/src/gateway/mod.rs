//! Secret gateways (Configure section `secret_gateway`, docs/gateways.md):
//! per route, a loopback listener inside the sandbox's network (its own
//! namespace when egress is enforced) on which the agent adds the route's
//! secret headers and forwards to one fixed HTTPS upstream, within the
//! route's allow rules and rate. The secrets stay in the agent's memory
//! (wiped when a route stops) and never reach a log, a span or an error.
//!
//! Every apply replaces the whole set: validated first (INVALID leaves the
//! routes in force as they were), then every old listener stops and one
//! new one per route binds `127.0.0.1:0`.

mod bucket;
mod listener;
mod options;
mod path;
mod upstream;
mod validate;

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use self::listener::Route;
pub use self::options::{DEFAULT_RESPONSE_HEAD_TIMEOUT, GatewayOptions, LocalUpstreams};
use crate::pb;
use crate::sandbox::SandboxEnv;

/// A route in force: its name, port, state and listener.
#[derive(Debug)]
struct Running {
    name: String,
    port: u16,
    route: Arc<Route>,
    stop: CancellationToken,
}

/// One agent's gateways.
#[derive(Debug)]
pub(crate) struct Gateways {
    options: GatewayOptions,
    env: SandboxEnv,
    /// Applies take their turn (binding awaits).
    applying: tokio::sync::Mutex<()>,
    /// The routes in force; `None` until the first apply.
    running: std::sync::Mutex<Option<Vec<Running>>>,
}

impl Drop for Gateways {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// What an apply answers: the section's code and class.
pub(crate) type Outcome = (pb::SectionCode, &'static str);

impl Gateways {
    pub(crate) fn new(options: GatewayOptions, env: SandboxEnv) -> Self {
        if options.enabled {
            upstream::warm_roots();
        }
        Self {
            options,
            env,
            applying: tokio::sync::Mutex::new(()),
            running: std::sync::Mutex::new(None),
        }
    }

    /// Whether this agent serves the section: enabled, and some root to
    /// verify an upstream with (the OS trust store or extra roots).
    pub(crate) fn supported(&self) -> bool {
        self.options.enabled && upstream::roots(&self.options).is_some()
    }

    /// Applies a section: the whole desired set of routes.
    pub(crate) async fn apply(&self, config: pb::SecretGatewayConfig) -> Outcome {
        if !self.options.enabled {
            return (pb::SectionCode::Unsupported, "");
        }
        let specs = match validate::section(config) {
            Ok(specs) => specs,
            Err(class) => return (pb::SectionCode::Invalid, class),
        };
        let Some(client) = upstream::client(&self.options) else {
            return (pb::SectionCode::Unsupported, "");
        };
        let _turn = self.applying.lock().await;
        self.replace(Vec::new());
        let mut started = Vec::with_capacity(specs.len());
        for spec in specs {
            let name = spec.name.clone();
            let bound = self.bind().await;
            let Ok((listener, port)) = bound else {
                tracing::warn!("secret gateway: a route's listener could not bind");
                for route in started {
                    let route: Running = route;
                    route.stop.cancel();
                }
                return (pb::SectionCode::Failed, "listen_failed");
            };
            let route = Arc::new(Route::new(
                spec,
                client.clone(),
                self.options.response_head_timeout,
            ));
            let stop = CancellationToken::new();
            tokio::spawn(listener::serve(listener, route.clone(), stop.clone()));
            started.push(Running {
                name,
                port,
                route,
                stop,
            });
        }
        self.replace(started);
        (pb::SectionCode::Applied, "")
    }

    /// Binds `127.0.0.1:0` in the sandbox's network namespace when it has
    /// one (so its processes reach it on their loopback), else on the
    /// agent's.
    async fn bind(&self) -> std::io::Result<(TcpListener, u16)> {
        let listener = match self.env.network_ns() {
            Some(ns) => tokio::task::spawn_blocking(move || ns.bind_loopback())
                .await
                .map_err(std::io::Error::other)??,
            None => {
                let l = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))?;
                l.set_nonblocking(true)?;
                l
            }
        };
        let port = listener.local_addr()?.port();
        Ok((TcpListener::from_std(listener)?, port))
    }

    /// Puts `routes` in force, stopping those that were.
    fn replace(&self, routes: Vec<Running>) {
        let old = self
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .replace(routes);
        for route in old.into_iter().flatten() {
            route.stop.cancel();
        }
    }

    /// What ConfigureStatus reports: `None` until a section was applied.
    pub(crate) fn status(&self) -> Option<pb::SecretGatewayStatus> {
        let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        let running = running.as_ref()?;
        Some(pb::SecretGatewayStatus {
            routes: running
                .iter()
                .map(|r| pb::SecretGatewayRouteStatus {
                    name: r.name.clone(),
                    port: u32::from(r.port),
                    state: pb::SecretGatewayRouteState::Listening as i32,
                    last_error_class: r.route.last_error().unwrap_or_default().to_owned(),
                })
                .collect(),
        })
    }

    /// Stops every route (the agent stops): their secrets are wiped once
    /// the requests still in flight end.
    pub(crate) fn stop_all(&self) {
        let old = self
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
            .map(std::mem::take);
        for route in old.into_iter().flatten() {
            route.stop.cancel();
        }
    }
}
